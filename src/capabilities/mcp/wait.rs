//! Waiting for a task a server started for a call (docs/spec.md §29): polled at the server's interval
//! (clamped) until it ends, within a limit (the run's deadline, the server's `task_timeout`);
//! past it, or when the wait is dropped (the run stopped), the task is cancelled with
//! `tasks/cancel`. A state tabd does not know ends the wait too, cancelled.

use std::time::Duration;

use tokio::time::Instant;

use rmcp::model::CallToolResult;
use rmcp::service::Peer;
use rmcp::RoleClient;

use super::client::{CallError, Connection};
use super::task::{self, Handle, State};

/// Cancels the task when the wait ends without it (past its limit, a state tabd does not know,
/// or a run that stopped and dropped the wait).
struct CancelOnDrop<'a> {
    conn: &'a Connection,
    handle: Option<Handle>,
}

impl CancelOnDrop<'_> {
    fn disarm(&mut self) {
        self.handle = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        // Dropped outside a runtime only at process exit, when the server goes with tabd. The
        // connection's `stop` awaits the cancel before it ends the session.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let peer = self.conn.peer().clone();
            let sent = rt.spawn(async move { task::cancel(&peer, &handle).await });
            self.conn
                .cancels
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sent);
        }
    }
}

/// What the person sees of a wait: updated at every poll.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// The server's last status message, inert.
    pub status: Option<String>,
    /// Polls so far.
    pub polls: u32,
}

impl Connection {
    /// Waits for `handle` to end, at most until `until` (`why_until` names that limit in the
    /// error); its result, as a plain call's would be. `on_poll` hears each state.
    pub async fn wait_task(
        &self,
        handle: Handle,
        until: Instant,
        why_until: &str,
        mut on_poll: impl FnMut(&Progress),
    ) -> Result<CallToolResult, CallError> {
        let peer = self.peer().clone();
        // Armed for as long as the wait runs: a run that stops drops it, and the task is cancelled.
        let mut guard = CancelOnDrop {
            conn: self,
            handle: Some(handle.clone()),
        };
        let mut poll = handle.poll;
        let mut progress = Progress::default();
        let started = Instant::now();
        let answer = loop {
            let now = Instant::now();
            if now >= until {
                break Err(CallError::Unknown(format!(
                    "the task ran longer than {} ({why_until}); tabd cancelled it, but what it did so far may stay done",
                    shown(until.saturating_duration_since(started))
                )));
            }
            // The first look comes after one interval: the server just said it is working.
            let nap = poll.min(until - now);
            tokio::select! {
                biased;
                () = self.closed() => break Err(CallError::Unknown(
                    "the server stopped while its task ran; it may or may not have been carried out".into(),
                )),
                () = tokio::time::sleep(nap) => {}
            }
            if Instant::now() >= until {
                continue;
            }
            progress.polls += 1;
            // A server that never answers a look is bounded by the same limit.
            let Ok(looked) = tokio::time::timeout_at(until, look(&peer, &handle, &mut progress)).await else {
                continue;
            };
            match looked {
                Look::Again(next) => {
                    poll = next;
                    on_poll(&progress);
                }
                Look::Ended(answer) => {
                    // The server ended it itself: nothing to cancel.
                    guard.disarm();
                    break answer;
                }
                Look::Stop(answer) => break answer,
            }
        };
        // Past its limit, or a state tabd cannot follow: cancelled now, before the run goes on
        // (and maybe stops the server).
        if answer.is_err() && guard.handle.is_some() {
            task::cancel(&peer, &handle).await;
        }
        guard.disarm();
        answer
    }
}

/// What one look at a task says to do.
enum Look {
    /// It still works: look again after this.
    Again(Duration),
    /// It ended, as the server says.
    Ended(Result<CallToolResult, CallError>),
    /// The wait ends with the task still there (cancelled after).
    Stop(Result<CallToolResult, CallError>),
}

/// One `tasks/get` (and `tasks/result` once a 2025 task completed).
async fn look(peer: &Peer<RoleClient>, handle: &Handle, progress: &mut Progress) -> Look {
    let state = match task::get(peer, handle).await {
        Ok(Ok(s)) => s,
        Ok(Err(garbage)) => {
            return Look::Stop(Err(CallError::Unknown(format!(
                "the server answered `tasks/get` with something tabd cannot follow: {garbage}; tabd cancelled the task"
            ))))
        }
        Err(e) => {
            return Look::Stop(Err(CallError::Unknown(format!(
                "`tasks/get` failed ({e}); the task may or may not have been carried out"
            ))))
        }
    };
    match state {
        // Questions from a server reach the person, never the model: not built yet (issue 53,
        // item 3), so the task is cancelled rather than left waiting.
        State::Working {
            input_required: true,
            ..
        } => Look::Stop(Err(CallError::Refused(
            "the server asked for input during its task, which tabd cannot give it yet; tabd cancelled the task".into(),
        ))),
        State::Working { poll, status, .. } => {
            progress.status = status;
            Look::Again(poll)
        }
        State::Completed(Some(result)) => Look::Ended(Ok(*result)),
        State::Completed(None) => Look::Ended(match task::result(peer, handle).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(garbage)) => Err(CallError::Unknown(format!(
                "the task completed, but its result is not one tabd can read: {garbage}"
            ))),
            Err(e) => Err(CallError::Unknown(format!(
                "the task completed, but `tasks/result` failed ({e})"
            ))),
        }),
        State::Failed(why) => Look::Ended(Err(CallError::Refused(format!("the server's task failed: {why}")))),
        State::Cancelled => Look::Ended(Err(CallError::Unknown(
            "the server cancelled its task; what it did so far may stay done".into(),
        ))),
    }
}

/// "2 h 14 min", "3 min", "40 s".
pub(super) fn shown(d: Duration) -> String {
    match d.as_secs() {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}
