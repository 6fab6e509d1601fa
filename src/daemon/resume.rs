//! Runs that waited for the person go on (DESIGN §22): once every call a suspended run waits for
//! is decided (and run), its second part is queued for its role — ahead of its other work, never
//! held back by `min_interval`. One whose second part was cut off by a crash does not start again.

use super::core::Input;
use super::Daemon;
use crate::run::suspend;

impl Daemon {
    /// Queues the second part of every suspended run whose calls are all decided.
    pub(super) fn queue_resumes(&mut self) {
        let state = self.run_env.store.load();
        for s in suspend::all(&self.run_env.vault) {
            if s.resuming || suspend::decisions(&state, &s).is_none() {
                continue;
            }
            let now = self.run_env.clock.instant();
            let input = Input::Resumable {
                role: s.role.clone(),
                run_id: s.run_id.clone(),
            };
            let effects = self.core.step(input, now);
            if !effects.is_empty() {
                tracing::info!(
                    "{}: the calls run {} waited for are decided; it goes on",
                    s.role,
                    s.run_id
                );
                self.status_dirty = true;
            }
        }
    }

    /// At start-up: a second part that was starting or running when tabd stopped hard is not
    /// started again (its calls may have run); the daily note says so.
    pub(super) fn drop_interrupted_resumes(&mut self) {
        for s in suspend::all(&self.run_env.vault)
            .into_iter()
            .filter(|s| s.resuming)
        {
            let who = self
                .roles()
                .roles
                .get(&s.role)
                .map_or_else(|| s.role.clone(), |r| r.display_name.clone());
            let line = format!(
                "the second part of run `{}` was cut off when tabd stopped; it does not start twice — see the run's log and `tabd undo {}`",
                s.run_id, s.run_id
            );
            tracing::warn!("{who}: {line}");
            self.writes.check(
                "the daily note",
                self.run_env.log.write_line(self.run_env.clock.now(), &who, &line),
            );
            suspend::remove(&self.run_env.vault, &s.run_id);
        }
    }
}
