//! The daemon's upkeep, off the loop: the temp files a crash left behind swept once it is ready,
//! and the undo journal kept within `[journal]`, at start and every few hours.

use std::time::Duration;

use super::Daemon;

/// How often the daemon prunes the undo journal (and once at start).
const JOURNAL_PRUNE_EVERY: Duration = Duration::from_secs(6 * 3600);
/// Crash leftovers younger than this might be another process's write in flight.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

impl Daemon {
    /// Removes the temp files a crash left behind, walking the whole vault in the background
    /// once the daemon is ready: nothing waits for it, so it does not delay READY.
    pub(super) fn sweep_stale_temps(&self) {
        let vault = self.run_env.vault.clone();
        tokio::task::spawn_blocking(move || {
            let removed = vault.remove_stale_temps(STALE_TEMP_AGE);
            if !removed.is_empty() {
                tracing::info!("removed {} temp file(s) a crash left behind", removed.len());
            }
        });
        self.prune_journal();
    }

    /// Keeps the undo journal within `[journal] keep_days` and `max_mib`: now, then every few
    /// hours (off the loop: it lists and reads the journal).
    fn prune_journal(&self) {
        let vault = self.run_env.vault.clone();
        let clock = self.run_env.clock.clone();
        let keep = self.config().journal.clone();
        // Approvals asked for longer ago than this never run, so their marks may go.
        let approvals_within = crate::records::state::approval_ledger::runs_within(
            keep.keep_days,
            self.config().approvals.expire_after,
        );
        let key = self.run_env.key.clone();
        tokio::spawn(async move {
            loop {
                let (vault, now, keep, key) = (vault.clone(), clock.now(), keep.clone(), key.clone());
                let pruned = tokio::task::spawn_blocking(move || {
                    crate::records::journal::forget_open_marks(&key, keep.keep_days);
                    crate::records::state::approval_ledger::forget_old_marks(&key, approvals_within);
                    crate::records::journal::prune(&vault, keep.keep_days, keep.max_mib * 1024 * 1024, now)
                })
                .await;
                if let Some(p) = pruned.ok().filter(|p| p.runs + p.blobs > 0) {
                    tracing::info!(
                        "undo journal: dropped {} run(s) and {} stored version(s), {} KiB",
                        p.runs,
                        p.blobs,
                        p.bytes / 1024
                    );
                }
                tokio::time::sleep(JOURNAL_PRUNE_EVERY).await;
            }
        });
    }
}
