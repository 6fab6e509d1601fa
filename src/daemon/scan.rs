//! What is due: inbox notes that are complete, and scheduled slots (recorded before they run).

use std::time::SystemTime;

use super::*;

/// What the daemon keeps of a note between scans (valid while `modified` and `size` hold).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoteMeta {
    modified: SystemTime,
    size: u64,
    draft: bool,
    priority: inbox::Priority,
}

impl Daemon {
    pub(super) fn scan_inboxes(&mut self) {
        let all = std::mem::take(&mut self.rescan_all);
        let now = Instant::now();
        let names: Vec<String> = self.rt.keys().cloned().collect();
        for name in names {
            let Some(role) = self.roles.roles.get(&name).cloned() else {
                continue;
            };
            let rt = self.rt.get_mut(&name).map(|r| (r.dirty, r.recheck_at));
            let Some((dirty, recheck)) = rt else { continue };
            if !(all || dirty || recheck.is_some_and(|t| now >= t)) {
                continue;
            }
            let (ready, recheck_at) = self.inbox_state(&role);
            if let Some(rt) = self.rt.get_mut(&name) {
                rt.dirty = false;
                rt.inbox_ready = ready;
                rt.recheck_at = recheck_at;
            }
        }
    }

    /// Whether `role` has complete notes waiting, and when to look again if some are settling.
    pub(super) fn inbox_state(&mut self, role: &Role) -> (bool, Option<Instant>) {
        let dir = self.inbox_abs(role);
        let Ok(inbox_path) = VaultPath::parse(&role.inbox, false) else {
            return (false, None);
        };
        let entries = self
            .vault
            .walk(&inbox_path, false, &|_| false)
            .unwrap_or_default();
        let now = Instant::now();
        let mut ready = false;
        let mut recheck: Option<Instant> = None;
        // A set: the retains below look up every tracked path (a Vec made them quadratic).
        let mut existing = std::collections::HashSet::new();
        for e in entries {
            if e.is_dir || !inbox::is_trigger_name(e.path.file_name()) {
                continue;
            }
            let abs = self.root.join(e.path.as_path());
            existing.insert(abs.clone());
            let modified = e.modified.unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            match self.readiness.check(&abs, e.size, modified, now) {
                Ok(()) => {
                    if !self.note_meta(&role.name, &abs, &e.path, modified, e.size).draft {
                        ready = true;
                    }
                }
                Err(Some(t)) => recheck = Some(recheck.map_or(t, |r: Instant| r.min(t))),
                Err(None) => {}
            }
        }
        self.readiness.retain_existing(&dir, &existing);
        if let Some(rt) = self.rt.get_mut(&role.name) {
            rt.notes.retain(|p, _| existing.contains(p));
        }
        (ready, recheck)
    }

    /// A note's draft status and priority, read once and kept while its mtime and size hold.
    fn note_meta(
        &mut self,
        role: &str,
        abs: &Path,
        path: &VaultPath,
        modified: SystemTime,
        size: u64,
    ) -> NoteMeta {
        if let Some(meta) = self.rt.get(role).and_then(|rt| rt.notes.get(abs)) {
            if meta.modified == modified && meta.size == size {
                return *meta;
            }
        }
        let (draft, priority) = inbox::read_note(&self.vault, path)
            .map(|n| (n.draft, n.priority))
            .unwrap_or((false, inbox::Priority::Normal));
        let meta = NoteMeta {
            modified,
            size,
            draft,
            priority,
        };
        if let Some(rt) = self.rt.get_mut(role) {
            rt.notes.insert(abs.to_path_buf(), meta);
        }
        meta
    }

    /// The notes for a run of `role`: complete (§5), not drafts, highest priority then oldest
    /// first, at most `max_batch`. Only the chosen notes are read in full.
    pub(super) fn pick_notes(&mut self, role: &Role) -> Vec<inbox::Note> {
        let Ok(inbox_path) = VaultPath::parse(&role.inbox, false) else {
            return Vec::new();
        };
        let entries = self
            .vault
            .walk(&inbox_path, false, &|_| false)
            .unwrap_or_default();
        let now = Instant::now();
        let mut candidates = Vec::new();
        for e in entries {
            if e.is_dir || !inbox::is_trigger_name(e.path.file_name()) {
                continue;
            }
            let abs = self.root.join(e.path.as_path());
            let modified = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
            if self.readiness.check(&abs, e.size, modified, now).is_err() {
                continue;
            }
            let meta = self.note_meta(&role.name, &abs, &e.path, modified, e.size);
            if !meta.draft {
                candidates.push((meta.priority, modified, e.path));
            }
        }
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        candidates
            .into_iter()
            .take(self.config.inbox.max_batch)
            .filter_map(|(_, _, path)| inbox::read_note(&self.vault, &path).ok())
            .collect()
    }

    /// Turns due scheduled slots into queued runs (or logged skips), recording them first.
    pub(super) fn schedule_due(&mut self, wall: DateTime<Utc>) {
        let roles: Vec<Role> = self
            .roles
            .runnable()
            .filter(|r| self.role_may_run_here(r) && !r.schedule.is_empty())
            .cloned()
            .collect();
        // Decide every role first, record all ledger moves in one write, then queue the runs:
        // a slot is in the ledger before its run can start.
        let mut decisions = Vec::new();
        let mut ledger_moves = Vec::new();
        for role in roles {
            let stale = role.settings.stale_after.unwrap_or(Duration::from_secs(7200));
            let ledger = self.state.roles.get(&role.name).and_then(|r| r.last_slot);
            let (decision, new_ledger) = slots::decide(&role.schedule, ledger, wall, role.catch_up(), stale);
            if new_ledger != ledger {
                ledger_moves.push((role.name.clone(), new_ledger));
            }
            if decision != SlotDecision::Nothing {
                decisions.push((role, decision));
            }
        }
        if !ledger_moves.is_empty() {
            if let Ok(fresh) = self.store.update(move |s| {
                for (name, slot) in ledger_moves {
                    s.role(&name).last_slot = slot;
                }
                s.clone()
            }) {
                self.state = fresh;
            }
        }
        for (role, decision) in decisions {
            let tz = self.config.timezone;
            let fmt = |t: DateTime<Utc>| t.with_timezone(&tz).format("%H:%M").to_string();
            let rt = self.rt.entry(role.name.clone()).or_default();
            match decision {
                SlotDecision::Nothing => {}
                SlotDecision::Run { slot, missed, late } => {
                    if late {
                        let what = if missed > 1 {
                            format!("missed {missed} scheduled runs (the last due {})", fmt(slot))
                        } else {
                            format!("missed the {} run", fmt(slot))
                        };
                        let _ = self.log.write_line(wall, &role.display_name, &format!(
                            "{what} while tabd was not running or the computer slept; running once now (catch_up: once)"
                        ));
                    }
                    rt.slots.push_back(SlotRun { slot, missed });
                }
                SlotDecision::RunEach { slots, dropped } => {
                    let _ = self.log.write_line(
                        wall,
                        &role.display_name,
                        &format!(
                        "missed {} scheduled runs; running {} of them now, oldest first (catch_up: all){}",
                        slots.len() + dropped,
                        slots.len(),
                        if dropped > 0 { format!(", {dropped} older ones skipped") } else { String::new() }
                    ),
                    );
                    rt.slots
                        .extend(slots.into_iter().map(|slot| SlotRun { slot, missed: 1 }));
                }
                SlotDecision::Skip {
                    count,
                    first,
                    last,
                    why,
                } => {
                    let span = if count > 1 {
                        format!("{count} scheduled runs ({}–{})", fmt(first), fmt(last))
                    } else {
                        format!("the {} run", fmt(last))
                    };
                    let _ = self.log.write_line(
                        wall,
                        &role.display_name,
                        &format!("skipped — missed {span}: {why}"),
                    );
                    self.status_dirty = true;
                }
            }
        }
    }
}
