//! What the daemon says about itself: its status files and the next fire for systemd's STATUS=.

use super::core::Input;
use super::{status, Daemon};
use crate::records::limits::RoleLimits;

impl Daemon {
    /// Notes in an inbox folder no role reads (a role renamed or deleted): one daily-log line per
    /// folder per day, and the status note lists them.
    pub(super) fn report_stranded(&mut self) {
        let stranded = status::stranded_inboxes(&self.run_env.vault, self.roles());
        let today = self.today();
        for folder in stranded {
            let first = self
                .run_env
                .store
                .update(|s| s.global.first_notice(today, &format!("stranded: {folder}")));
            self.shown.writes.check("the state (a notice)", first.as_ref());
            let first = first.unwrap_or(true);
            if first {
                let line = format!("no role reads {folder}");
                self.shown.writes.check(
                    "the daily note",
                    self.run_env
                        .log
                        .write_line(self.run_env.clock.now(), "tabd", &line),
                );
            }
        }
        self.apply(Input::ShownChanged);
    }

    pub(super) fn next_fire_text(&self) -> String {
        let wall = self.run_env.clock.now();
        let next = self
            .roles()
            .runnable()
            .filter(|r| self.role_may_run_here(r))
            .filter_map(|r| r.schedule.next_after(wall).map(|t| (t, r.name.clone())))
            .min();
        match next {
            Some((t, name)) => format!(
                "next fire {name} at {}",
                t.with_timezone(&self.config().timezone)
                    .format("%Y-%m-%d %H:%M %Z")
            ),
            None => "no scheduled fires".into(),
        }
    }

    /// Each role's next fire, one line each, for the start-up log a person reads.
    /// One line per role for the start-up log; past `NEXT_FIRES_SHOWN` roles, the rest are
    /// counted (a thousand lines would bury the log; `tabd status` and `tabd schedule` list all).
    pub(super) fn next_fires(&self) -> Vec<String> {
        const NEXT_FIRES_SHOWN: usize = 20;
        let wall = self.run_env.clock.now();
        let total = self.roles().runnable().count();
        let mut lines: Vec<String> = self
            .roles()
            .runnable()
            .take(NEXT_FIRES_SHOWN)
            .map(|r| format!("  {} ({}): {}", r.name, r.display_name, self.fire_words(r, wall)))
            .collect();
        if total > NEXT_FIRES_SHOWN {
            lines.push(format!(
                "  … and {} more roles (`tabd schedule` shows each one's next fires)",
                total - NEXT_FIRES_SHOWN
            ));
        }
        lines
    }

    /// When `role` runs next, as the start-up log and a role's change say it: its next fire, or
    /// that only its inbox starts it, or that it does not run here.
    pub(super) fn fire_words(
        &self,
        role: &crate::setup::role::Role,
        wall: chrono::DateTime<chrono::Utc>,
    ) -> String {
        if !self.role_may_run_here(role) {
            return "not on this host or disabled".to_string();
        }
        match role.schedule.next_after(wall) {
            Some(t) => format!(
                "next fire {}",
                t.with_timezone(&self.config().timezone)
                    .format("%a %Y-%m-%d %H:%M %Z")
            ),
            None => "inbox only (no schedule: its notes and `tabd fire` start it)".to_string(),
        }
    }

    pub(super) fn write_status(&mut self, running: bool) {
        self.shown.dirty = false;
        self.shown.generation += 1;
        let (wall, now) = self.now();
        let live = status::Live {
            pid: running.then(std::process::id),
            paused: self.core.paused().map(str::to_string),
            watching: Some(if self.watching.polling {
                "polling for changes (file watching unavailable)".into()
            } else {
                "watching for changes".into()
            }),
            kept_last_good: self.setup.kept_last_good.clone(),
            config_error: self.setup.config_error.clone(),
            notify_problems: self
                .shown
                .notifier
                .as_ref()
                .map(|n| n.problems())
                .unwrap_or_default(),
            write_problem: self.shown.writes.problem(),
            cluster: self.cluster_view(),
            pauses: self.paused_view(),
            host: self.setup.host.clone(),
            ledger_error: self.seen.ledger_error.clone(),
            generation: self.shown.generation,
            unsandboxed: unsandboxed(&self.run_env.launcher),
            roles: self.role_views(wall, now),
            unreadable: self.seen.unreadable.clone(),
            mcp_servers: self.mcp_servers(),
        };
        let report = status::collect(
            &self.run_env.vault,
            self.config(),
            self.roles(),
            &self.seen.state,
            &live,
            wall,
        );
        status::write(
            &self.run_env.vault,
            &report,
            self.config().timezone,
            &self.setup.env.redactor(),
        );
    }

    /// Each role's live view for the status: its inbox as last listed, what it runs or waits
    /// for, when it may run again.
    fn role_views(
        &self,
        wall: chrono::DateTime<chrono::Utc>,
        now: tokio::time::Instant,
    ) -> std::collections::BTreeMap<String, status::InboxView> {
        self.core
            .roles()
            .map(|(name, r)| {
                let mut view = self.seen.inbox_view.get(name).cloned().unwrap_or_default();
                view.running = r.running();
                view.running_since = r.started().map(|s| s.0);
                view.running_trigger = r.started().map(|s| s.1.as_str().to_string());
                view.busy_elsewhere = r.busy_elsewhere();
                view.queued_slots = r.queued_slots();
                view.watch_pending = r.watch_pending();
                let wall_of = |(until, why): (tokio::time::Instant, String)| status::Wait {
                    until: wall + chrono::Duration::from_std(until - now).unwrap_or_default(),
                    why,
                };
                if let Some(role) = self.roles().roles.get(name) {
                    let limits = RoleLimits::resolve(role, &self.config().limits);
                    view.waits = r.waiting(&limits, now).map(wall_of);
                    view.schedule_held = r.schedule_held(limits.min_interval, now).map(wall_of);
                }
                (name.clone(), view)
            })
            .collect()
    }

    /// The `keep_alive` MCP servers, up or down (none without a pool).
    fn mcp_servers(&self) -> Vec<status::McpServerStatus> {
        self.run_env
            .mcp_pool
            .as_ref()
            .map(|p| {
                p.status()
                    .into_iter()
                    .map(|(name, up, error)| status::McpServerStatus { name, up, error })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Why children start unsandboxed here, if they do (the launcher's probe, made once).
fn unsandboxed(launcher: &crate::base::process::Launcher) -> Option<String> {
    let support = launcher.sandbox_probe.support();
    (!support.enforced()).then(|| support.describe())
}
