//! One approved call across devices (docs/spec.md §23; the records: `shared`). Before the call, the
//! device claims the approval (a lease it renews while the call lasts: the call's fence) and
//! creates its execution record — first write wins, so whichever device sees the decision first
//! runs it, once, also when the asking device is down — and takes the run waiting for it, which
//! then goes on here. After the call the outcome goes into the record. A device that finds the
//! record another's takes its outcome and does nothing more (a debug line).

use std::sync::Arc;

use super::shared::{self, Execution, Shared};
use crate::base::clock::Clock;
use crate::capabilities::cluster::Lease;
use crate::records::runlog::RunLog;
use crate::records::state::approval_ledger::{Approval, NoteStatus};
use crate::records::state::StateStore;
use crate::running::run::RunEnv;

/// What this device holds of one approval while its call runs.
pub(super) struct Held {
    pub(super) lease: Arc<Lease>,
    /// The revision of this device's `executing` record (once written) and its start.
    begun: Option<(u64, u32)>,
}

/// Claims the approval `id`; `None`: another device runs it now, or the cluster cannot say that
/// none does (then it waits: an approved call runs only once that is known).
async fn take(sh: &Shared, id: &str) -> Option<Held> {
    match sh.claim(id).await {
        Ok(Some(lease)) => Some(Held { lease, begun: None }),
        Ok(None) => {
            tracing::debug!("approval {id}: another device is running its call");
            None
        }
        Err(e) => {
            if sh.first_time(&format!("alone {id}")) {
                tracing::warn!(
                    "approval {id} waits: {e}; an approved call runs only once the cluster can say no other device runs it"
                );
            }
            None
        }
    }
}

/// `take`, with `shared`; else `Ok(None)` (no cluster: nothing to hold). `Err`: another device
/// runs it, or the cluster cannot say — `next` learns to look again within a third of the lease
/// (a holder that died lets its claim lapse).
pub(super) async fn take_or_later(
    clock: &dyn Clock,
    shared: Option<&Shared>,
    id: &str,
    next: &mut Option<chrono::DateTime<chrono::Utc>>,
) -> Result<Option<Held>, ()> {
    let Some(sh) = shared else {
        return Ok(None);
    };
    match take(sh, id).await {
        Some(held) => Ok(Some(held)),
        None => {
            let again =
                clock.now() + chrono::Duration::from_std(sh.cluster().lease() / 3).unwrap_or_default();
            *next = Some(next.map_or(again, |n| n.min(again)));
            Err(())
        }
    }
}

/// The run environment of the call: fenced by the approval's claim when it holds one (its tool
/// call is refused once the claim is lost: a device paused past its lease changes nothing).
pub(super) fn fenced(env: &RunEnv, held: Option<&Held>) -> RunEnv {
    let mut env = env.clone();
    if let Some(h) = held {
        env.fence = crate::base::fence::Fence::of(vec![h.lease.clone() as Arc<dyn crate::base::fence::Hold>]);
    }
    env
}

/// Records that this device starts the call (unless another device did: its outcome is taken
/// here, and nothing more happens) and takes the run that waits for it.
pub(super) async fn begin(env: &RunEnv, sh: &Shared, (id, a): (&str, &Approval), h: Held) -> Option<Held> {
    let begun = match sh.execution(id).await {
        Ok(None) => sh.begin(id).await.map(|r| r.map(|rev| (rev, 1))),
        // A start taken back before the call was sent (`withdraw`): any device may start it.
        Ok(Some((e, rev))) if e.phase == NoteStatus::Approved => sh
            .begin_again(id, e.start, rev)
            .await
            .map(|r| r.map(|rev| (rev, e.start))),
        // A call this device started before (re-approved after `unknown`): the next start.
        Ok(Some((e, rev)))
            if e.device == sh.device() && (e.phase.may_run() || e.phase == NoteStatus::Executing) =>
        {
            let start = e.start + 1;
            sh.begin_again(id, start, rev)
                .await
                .map(|r| r.map(|rev| (rev, start)))
        }
        Ok(Some((e, _))) => {
            elsewhere(&env.store, id, &e);
            sh.cluster().release(&h.lease).await;
            return None;
        }
        Err(e) => Err(e),
    };
    match begun {
        Ok(Some(begun)) => {
            if let Some(wait) = shared::take_run(env, sh, &a.run_id).await {
                resume_here((&env.log, env.clock.as_ref()), sh, &a.run_id, wait).await;
            }
            Some(Held {
                begun: Some(begun),
                ..h
            })
        }
        Ok(None) => {
            match sh.execution(id).await {
                Ok(Some((e, _))) => elsewhere(&env.store, id, &e),
                _ => tracing::debug!("approval {id}: another device started its call first"),
            }
            sh.cluster().release(&h.lease).await;
            None
        }
        Err(e) => {
            sh.report(&env.log, env.clock.as_ref(), &format!("approval {id} waits"), e);
            sh.cluster().release(&h.lease).await;
            None
        }
    }
}

/// Says which device lets run `run_id` go on (this one when none said so before).
async fn resume_here((log, clock): (&RunLog, &dyn Clock), sh: &Shared, run_id: &str, wait: u32) {
    match sh.resumer(run_id, wait).await {
        Ok(d) if d == sh.device() => {
            tracing::info!("run {run_id} goes on on this device once the calls it waits for are decided")
        }
        Ok(d) => tracing::debug!("run {run_id} goes on on device {d}"),
        Err(e) => sh.report(log, clock, &format!("run {run_id}"), e),
    }
}

/// Another device ran (or runs) the call: its outcome is taken, nothing more happens here.
pub(super) fn elsewhere(store: &StateStore, id: &str, e: &Execution) {
    shared::take_outcome(store, id, e);
    tracing::debug!(
        "approval {id}: device {} ran its call ({}); nothing more for it here",
        e.device,
        e.phase.as_str()
    );
}

/// The call did not start after all: its record is taken back (or, with `phase`, says so), and
/// the claim let go.
pub(super) async fn withdraw(
    shared: Option<&Shared>,
    id: &str,
    held: Option<Held>,
    phase: Option<NoteStatus>,
) {
    let (Some(sh), Some(h)) = (shared, held) else {
        return;
    };
    match (h.begun, phase) {
        (Some((rev, start)), None) => {
            if let Err(e) = sh.unbegin(id, rev, start).await {
                tracing::warn!("approval {id}: cannot take back its record in the cluster: {e}");
            }
            sh.cluster().release(&h.lease).await;
        }
        (Some(_), Some(p)) => end(sh, id, h, (p, format!("{}: not run", p.as_str()))).await,
        (None, _) => sh.cluster().release(&h.lease).await,
    }
}

/// The call's outcome into its execution record; then the claim is let go.
pub(super) async fn end(sh: &Shared, id: &str, h: Held, (phase, outcome): (NoteStatus, String)) {
    if let Some((rev, start)) = h.begun {
        let done = Execution {
            device: sh.device().to_string(),
            phase,
            outcome: Some(outcome),
            start,
            at: chrono::Utc::now(),
        };
        if let Err(e) = sh.end(id, rev, done).await {
            tracing::warn!(
                "approval {id}: cannot write its outcome into the cluster ({e}); other devices see it executing"
            );
        }
    }
    sh.cluster().release(&h.lease).await;
}
