//! Starting runs: limits, budgets, `skip_unchanged`, and the run tasks themselves.

use super::*;

impl Daemon {
    /// Starts every run that is allowed now.
    pub(super) fn dispatch(&mut self) {
        if self.paused_until.is_some() {
            return;
        }
        let max = self.config.limits.max_concurrent_runs as usize;
        let names: Vec<String> = self.rt.keys().cloned().collect();
        for name in names {
            if self.running >= max {
                break;
            }
            let Some(role) = self.roles.roles.get(&name).cloned() else {
                continue;
            };
            if !self.role_may_run_here(&role) {
                if let Some(rt) = self.rt.get_mut(&name) {
                    rt.slots.clear();
                }
                continue;
            }
            let Some(rt) = self.rt.get(&name) else { continue };
            let has_work = !rt.slots.is_empty() || rt.inbox_ready || !rt.watch_pending.is_empty();
            if rt.running || !has_work {
                continue;
            }
            if let Some(last) = rt.last_end {
                if Instant::now() < last + self.min_interval(&role) {
                    continue; // waits; next_wake includes this moment
                }
            }
            if let Some(cause) = self.over_limit(&role) {
                let first = self.note_once(&role.name, &cause);
                if first {
                    let _ =
                        self.log
                            .write_line(Utc::now(), &role.display_name, &format!("skipped — {cause}"));
                    self.write_run_record_skip(&role, &cause);
                }
                if let Some(rt) = self.rt.get_mut(&name) {
                    rt.slots.clear();
                    rt.watch_pending.clear();
                    rt.inbox_ready = false; // notes wait; the safety tick looks again
                }
                self.status_dirty = true;
                continue;
            }
            self.start_run(role);
        }
    }

    pub(super) fn note_once(&self, role: &str, cause: &str) -> bool {
        let today = Utc::now().with_timezone(&self.config.timezone).date_naive();
        self.store
            .update(|s| {
                let r = s.role(role);
                r.roll_day(today);
                r.first_notice(cause)
            })
            .unwrap_or(true)
    }

    pub(super) fn write_run_record_skip(&self, role: &Role, cause: &str) {
        let now = Utc::now();
        let rec = crate::runlog::RunRecord {
            run_id: format!("{}-{}-skip", now.format("%Y%m%dT%H%M%SZ"), role.name),
            role: role.name.clone(),
            trigger: crate::runlog::TriggerRecord {
                kind: "schedule".into(),
                notes: vec![],
                scheduled_for: None,
                cron: None,
            },
            started_at: now,
            ended_at: now,
            outcome: "skipped".into(),
            error: Some(cause.to_string()),
            model: String::new(),
            usage: Default::default(),
            tool_calls: vec![],
            moved: vec![],
        };
        let _ = self.log.write_record(&rec);
    }

    /// Budgets and run counts (DESIGN §6): the cause when the role may not run today.
    pub(super) fn over_limit(&self, role: &Role) -> Option<String> {
        let today = Utc::now().with_timezone(&self.config.timezone).date_naive();
        let state = &self.state;
        let limits = &self.config.limits;
        let (tokens, runs) = match state.roles.get(&role.name) {
            Some(rs) if rs.day == Some(today) => (rs.tokens_today, rs.runs_today),
            _ => (0, 0),
        };
        let global = if state.global.day == Some(today) {
            state.global.tokens_today
        } else {
            0
        };
        if tokens
            >= role
                .settings
                .daily_token_budget
                .unwrap_or(limits.daily_token_budget)
        {
            return Some("daily token budget spent".into());
        }
        if global >= limits.global_daily_token_budget {
            return Some("global daily token budget spent".into());
        }
        if runs >= role.settings.max_runs_per_day.unwrap_or(limits.max_runs_per_day) {
            return Some("max_runs_per_day reached".into());
        }
        None
    }

    pub(super) fn start_run(&mut self, role: Role) {
        let notes = self.pick_notes(&role);
        let Some(rt) = self.rt.get_mut(&role.name) else {
            return;
        };
        let slot = rt.slots.pop_front();
        let watched = std::mem::take(&mut rt.watch_pending);
        rt.inbox_ready = false;
        let trigger = if let Some(s) = &slot {
            Trigger {
                kind: TriggerKind::Schedule,
                scheduled_for: Some(s.slot),
                cron: Some(
                    role.schedule
                        .lines
                        .iter()
                        .map(|l| l.cron_exprs().collect::<Vec<_>>().join(" | "))
                        .collect::<Vec<_>>()
                        .join(" | "),
                ),
                missed: s.missed,
                watched: Vec::new(),
            }
        } else if !notes.is_empty() {
            Trigger::inbox()
        } else if !watched.is_empty() {
            Trigger {
                kind: TriggerKind::Watch,
                watched,
                ..Trigger::manual()
            }
        } else {
            return; // the notes went away (moved by someone) before the run started
        };

        // skip_unchanged: a scheduled run with no notes and no context change costs nothing.
        if trigger.kind == TriggerKind::Schedule
            && notes.is_empty()
            && role.skip_unchanged()
            && !self.context_changed(&role)
        {
            let cause = "skipped — nothing changed since the last run (skip_unchanged)";
            if self.note_once(&role.name, "skip_unchanged") {
                let _ = self.log.write_line(Utc::now(), &role.display_name, cause);
            }
            self.status_dirty = true;
            return;
        }

        let Some(rt) = self.rt.get_mut(&role.name) else {
            return;
        };
        rt.running = true;
        self.running += 1;
        let note_paths: Vec<PathBuf> = notes.iter().map(|n| self.root.join(n.path.as_path())).collect();
        for p in &note_paths {
            self.readiness.forget(p);
        }
        let (vault, config, roles, provider, log, store, tx) = (
            self.vault.clone(),
            self.config.clone(),
            self.roles.clone(),
            self.provider.clone(),
            self.log.clone(),
            self.store.clone(),
            self.done_tx.clone(),
        );
        let run_lock = self.root.join(".tabd").join(format!("run-{}.lock", role.name));
        self.tasks.spawn(async move {
            // Holding the role's run lock keeps a concurrent `tabd fire` of the same role out.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&run_lock);
            let mut lock = file.ok().map(fd_lock::RwLock::new);
            let _guard = lock.as_mut().and_then(|l| l.try_write().ok());
            let env = RunEnv {
                vault: &vault,
                config: &config,
                roles: &roles,
                provider: provider.as_ref(),
                retry: RetryPolicy::from_config(&config.provider),
                store: &store,
                log: &log,
            };
            let result = run::run_role(&env, &role, trigger, notes).await;
            let _ = tx
                .send(Done {
                    role: role.name.clone(),
                    result,
                    notes: note_paths,
                })
                .await;
        });
    }

    /// True when a context file changed, appeared or vanished since the role's last success.
    pub(super) fn context_changed(&self, role: &Role) -> bool {
        let Some(rs) = self
            .state
            .roles
            .get(&role.name)
            .filter(|r| r.last_success_at.is_some())
        else {
            return true;
        };
        let policy = AccessPolicy::for_role(role);
        let (found, _) = prompt::resolve_context(&self.vault, &policy, &role.context);
        let mut now: BTreeMap<String, String> = BTreeMap::new();
        for e in found {
            if let Ok(t) = self.vault.read_text(&e.path, 64 * 1024 * 1024) {
                now.insert(e.path.as_str().to_string(), prompt::hash(t.as_bytes()));
            }
        }
        now != rs.context_hashes
    }
}
