//! What the daemon says about itself: its status files and the next fire for systemd's STATUS=.

use super::{status, Daemon};

impl Daemon {
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

    pub(super) fn write_status(&mut self, running: bool) {
        self.status_dirty = false;
        self.status_generation += 1;
        let live = status::Live {
            pid: running.then(|| std::process::id().to_string()),
            paused: self.paused.as_ref().map(|p| p.reason.clone()),
            watching: Some(if self.watching.polling {
                "polling for changes (file watching unavailable)".into()
            } else {
                "watching for changes".into()
            }),
            kept_last_good: self.kept_last_good.clone(),
            host: self.host.clone(),
            ledger_error: self.ledger_error.clone(),
            generation: self.status_generation,
            roles: self
                .rt
                .iter()
                .map(|(name, r)| {
                    let mut view = self.inbox_view.get(name).cloned().unwrap_or_default();
                    view.running = r.running;
                    view.busy_elsewhere = r.busy_until.is_some();
                    view.queued_slots = r.slots.len();
                    view.watch_pending = r.watch_pending.len();
                    (name.clone(), view)
                })
                .collect(),
            unreadable: self.unreadable.clone(),
            mcp_servers: self
                .run_env
                .mcp_pool
                .as_ref()
                .map(|p| {
                    p.status()
                        .into_iter()
                        .map(|(name, up, error)| status::McpServerStatus { name, up, error })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let report = status::collect(
            &self.run_env.vault,
            self.config(),
            self.roles(),
            &self.state,
            &live,
            self.run_env.clock.now(),
        );
        status::write(&self.run_env.vault, &report, self.config().timezone);
    }
}
