//! Stopping the daemon: a stop during a run costs nothing (DESIGN §13). Running turns get the
//! stop wait to finish; then they end where they are and are recorded as stopped — no attempt
//! counted, their notes run again at the next start.

use std::time::Duration;

use super::{notify_systemd, Daemon};

/// How long stopped runs get to record themselves before they are cancelled: they only write a
/// record and a log line (milliseconds), but a blocked disk must not hold the stop forever.
const STOP_RECORD: Duration = Duration::from_secs(5);

impl Daemon {
    /// Stops: running turns get `[daemon] shutdown_grace_s` to finish; then — or at once, on a
    /// second SIGINT/SIGTERM — they are asked to stop, recorded as stopped (no attempt counted,
    /// their notes run again at the next start), and whatever has not recorded itself within
    /// `STOP_RECORD` is cancelled and recorded the same way.
    pub(super) async fn shutdown(
        &mut self,
        sigterm: &mut tokio::signal::unix::Signal,
        sigint: &mut tokio::signal::unix::Signal,
    ) {
        let grace = self.config().daemon.shutdown_grace;
        // systemd's TimeoutStopSec must not cut the wait short: ask it for what we need.
        let needed = grace + STOP_RECORD + Duration::from_secs(5);
        notify_systemd(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::ExtendTimeoutUsec(needed.as_micros().min(u32::MAX as u128) as u32),
        ]);
        if !self.tasks.is_empty() {
            tracing::warn!(
                "stopping: waiting up to {}s for {} running turn(s) to finish (stop again, e.g. Ctrl-C, to stop them now)",
                grace.as_secs(),
                self.tasks.len()
            );
        }
        let deadline = self.run_env.clock.instant() + grace;
        self.let_runs_end(deadline, sigterm, sigint).await;
        if !self.tasks.is_empty() {
            tracing::warn!(
                "stopping: stopping {} turn(s) now; their notes stay in the inbox and run again at the next start",
                self.tasks.len()
            );
            self.run_env.stop.request();
            let recorded_by = self.run_env.clock.instant() + STOP_RECORD;
            self.let_runs_end(recorded_by, sigterm, sigint).await;
            if !self.tasks.is_empty() {
                self.tasks.abort_all();
                while let Some(done) = self.tasks.next().await {
                    self.on_done(done);
                }
            }
        }
        if let Some(task) = self.approvals.task.take() {
            // A call in flight is waited for; one cut off stays `executing` and becomes `unknown`.
            let _ = tokio::time::timeout(grace, task).await;
        }
        if let Some(pool) = self.run_env.mcp_pool.take() {
            pool.shutdown().await;
        }
        self.write_status(false);
        tracing::info!("stopped");
    }

    /// Takes in the runs that end until `until`, or until another stop signal comes.
    async fn let_runs_end(
        &mut self,
        until: tokio::time::Instant,
        sigterm: &mut tokio::signal::unix::Signal,
        sigint: &mut tokio::signal::unix::Signal,
    ) {
        while !self.tasks.is_empty() {
            tokio::select! {
                Some(done) = self.tasks.next() => self.on_done(done),
                _ = tokio::time::sleep_until(until) => break,
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
            }
        }
    }
}
