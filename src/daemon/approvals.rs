//! The approvals pass in the daemon (DESIGN §15): one at a time, off the loop (a call may take a
//! while), again at least every minute (expiry; polling mode) and at once on a file event.

use tokio::time::Instant;

use super::{core, Daemon};
use crate::blocking;

/// The approvals pass (DESIGN §15): one at a time, off the loop (a call may take a while).
#[derive(Default)]
pub(super) struct ApprovalWork {
    pub(super) task: Option<tokio::task::JoinHandle<crate::approved::Pass>>,
    /// When to look at `agent/approvals/` again.
    pub(super) due: Option<Instant>,
}

/// Approvals are looked at this often even without events (expiry; polling mode).
const APPROVALS_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Daemon {
    /// A call that was running when tabd stopped becomes `unknown`; then the first pass.
    pub(super) fn start_approvals(&mut self) {
        if let Ok(dir) = crate::vault::VaultPath::parse(crate::approvals::FOLDER, false) {
            if let Err(e) = self.run_env.vault.create_dir_all(&dir) {
                tracing::warn!("cannot create {dir}/: {e}");
            }
        }
        let recovered = blocking::run(|| crate::approved::recover(&self.run_env));
        if recovered > 0 {
            tracing::warn!(
                "{recovered} approved call(s) were running when tabd stopped: marked unknown in their notes"
            );
        }
        self.refresh_watches();
        self.approvals.due = Some(self.run_env.clock.instant());
    }

    /// Starts an approvals pass when one is due and none is running.
    pub(super) fn maybe_start_approvals(&mut self) {
        let now = self.run_env.clock.instant();
        if self.approvals.task.is_some() || self.approvals.due.is_none_or(|d| d > now) {
            return;
        }
        self.approvals.due = None;
        let env = self.run_env.clone();
        self.approvals.task = Some(tokio::spawn(async move { crate::approved::pass(&env).await }));
    }

    pub(super) fn on_approvals_pass(&mut self, pass: Result<crate::approved::Pass, tokio::task::JoinError>) {
        let (wall, now) = self.now();
        let mut next = now + APPROVALS_EVERY;
        match pass {
            Ok(p) => {
                if let Some(at) = p.next {
                    next = next.min(core::mono_of(at, wall, now));
                }
                if !p.ran.is_empty() || !p.rejected.is_empty() || !p.expired.is_empty() {
                    self.status_dirty = true;
                    self.queue_resumes();
                }
            }
            Err(e) => tracing::error!("approvals: the pass failed: {e}"),
        }
        self.approvals.due = Some(self.approvals.due.map_or(next, |d| d.min(next)));
    }
}
