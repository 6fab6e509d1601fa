//! A run ended: the role is free again, its notes' readiness forgotten, a pause begun or
//! ended, failures counted, the person told what needs them.

use super::{tasks, Daemon, Pause, PAUSE};
use crate::provider::FailureClass;

impl Daemon {
    pub(super) fn on_done(&mut self, done: tasks::Done) {
        let (_, now) = self.now();
        self.busy_until_quiet(now);
        for p in &done.notes {
            self.readiness.forget(p);
        }
        // A run that never reached the model (an outage) spent nothing a loop could run up: the
        // next try is not held back by min_interval.
        let reached_model = !matches!(
            done.result.failure,
            Some((
                FailureClass::Outage | FailureClass::Unavailable | FailureClass::Stopped,
                _
            ))
        ) || done.result.record.usage.tokens.total() > 0;
        if let Some(r) = self.rt.get_mut(&done.role) {
            r.finished(now, reached_model);
            match &done.result.failure {
                Some((FailureClass::RunFailure, _)) => r.failed_in_a_row += 1,
                None => r.failed_in_a_row = 0,
                Some(_) => {}
            }
        }
        self.notify_run(&done);
        // Its record is safe in state, but a log it could not write is a write that failed.
        for e in &done.result.log_errors {
            self.writes.check::<(), _>("a run's log", Err(e));
        }
        self.absorb_own_changes(&done.role, &done.result.changes);
        match &done.result.failure {
            Some((FailureClass::Outage, why)) => {
                tracing::warn!("model calls paused for {} min: {why}", PAUSE.as_secs() / 60);
                self.paused = Some(Pause {
                    until: now + PAUSE,
                    reason: why.clone(),
                });
                let why = why.clone();
                let r = self.run_env.store.update(|s| s.global.paused = Some(why));
                self.writes.check("the state (paused)", r);
            }
            Some((FailureClass::RunFailure, why)) => tracing::warn!("run of {} failed: {why}", done.role),
            Some((FailureClass::Stopped, _)) => {
                tracing::info!(
                    "run of {} stopped; its notes run again at the next start",
                    done.role
                )
            }
            Some((FailureClass::Unavailable, why)) => {
                tracing::warn!("{} waits {} min: {why}", done.role, PAUSE.as_secs() / 60);
                if let Some(r) = self.rt.get_mut(&done.role) {
                    r.down_until = Some(now + PAUSE);
                }
            }
            None => {
                if self.paused.is_some() {
                    self.unpause();
                }
                tracing::info!("run of {} finished: {}", done.role, done.result.record.outcome);
            }
        }
        self.status_dirty = true;
    }

    pub(super) fn unpause(&mut self) {
        self.paused = None;
        let r = self.run_env.store.update(|s| s.global.paused = None);
        self.writes.check("the state (paused)", r);
        self.status_dirty = true;
    }
}
