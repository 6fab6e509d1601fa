//! Run tasks: started with the role's run lock, reaped the moment they finish (a `JoinSet`
//! polled by the main loop, so finished tasks never pile up), and a panic in one becomes a
//! failed run of its role instead of a role stuck "running" forever.

use std::collections::HashMap;
use std::path::PathBuf;

use tokio::task::{Id, JoinSet};

use crate::base::trigger::Trigger;
use crate::base::vault::FileLock;
use crate::records::inbox::Note;
use crate::running::run::{self, RunEnv, RunResult};
use crate::setup::role::Role;

/// A finished run, as the main loop learns of it.
pub struct Done {
    pub role: String,
    pub result: RunResult,
    /// The notes the run was given (absolute paths, for readiness bookkeeping).
    pub notes: Vec<PathBuf>,
}

/// What a run was started with, kept until it ends (to record a crash).
struct Started {
    env: RunEnv,
    role: Role,
    trigger: Trigger,
    notes: Vec<Note>,
    paths: Vec<PathBuf>,
}

#[derive(Default)]
pub struct Tasks {
    set: JoinSet<Done>,
    started: HashMap<Id, Started>,
    /// Set by `abort_all`: a run cancelled now was stopped by tabd, not crashed.
    stopping: bool,
}

impl Tasks {
    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Starts a run. `lock` is the role's run lock, held until the run ends.
    pub fn spawn(
        &mut self,
        env: RunEnv,
        role: Role,
        trigger: Trigger,
        notes: Vec<Note>,
        paths: Vec<PathBuf>,
        lock: FileLock,
    ) {
        let started = Started {
            env: env.clone(),
            role: role.clone(),
            trigger: trigger.clone(),
            notes: notes.clone(),
            paths: paths.clone(),
        };
        let handle = self.set.spawn(async move {
            let _lock = lock;
            let result = run::run_role(&env, &role, trigger, notes).await;
            Done {
                role: role.name.clone(),
                result,
                notes: paths,
            }
        });
        self.started.insert(handle.id(), started);
    }

    /// The next finished run; `None` when none is running. A run that panicked is recorded as
    /// a failed run (its notes count an attempt) and reported like any other.
    pub async fn next(&mut self) -> Option<Done> {
        match self.set.join_next_with_id().await? {
            Ok((id, done)) => {
                self.started.remove(&id);
                Some(done)
            }
            Err(e) => {
                let started = self.started.remove(&e.id())?;
                if e.is_cancelled() && self.stopping {
                    return Some(stopped(started));
                }
                Some(crashed(started, &e))
            }
        }
    }

    /// Cancels every run still going after they were asked to stop (`RunEnv::stop`) and did not
    /// record themselves in time; they are recorded as stopped and their notes stay in the inbox.
    pub fn abort_all(&mut self) {
        self.stopping = true;
        self.set.abort_all();
    }
}

fn stopped(t: Started) -> Done {
    let role = t.role.clone();
    let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::base::blocking::run(|| run::record_stopped(&t.env, &role, t.trigger.clone(), t.notes.clone()))
    }));
    let result = recorded.unwrap_or_else(|_| {
        let mut r = run::record_crash_in_memory(&t.role, run::STOPPED);
        r.failure = Some((
            crate::capabilities::provider::FailureClass::Stopped,
            run::STOPPED.into(),
        ));
        r
    });
    Done {
        role: t.role.name,
        result,
        notes: t.paths,
    }
}

fn panic_text(e: &tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "cancelled".into();
    }
    let text = format!("{e}");
    text.lines().next().unwrap_or("panicked").to_string()
}

fn crashed(t: Started, e: &tokio::task::JoinError) -> Done {
    let why = panic_text(e);
    tracing::error!(
        "the run of {} crashed: {why}; recording it as a failed run",
        t.role.name
    );
    let role = t.role.clone();
    // Recording must not take the daemon down even if it fails the same way.
    let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::base::blocking::run(|| {
            run::record_crash(&t.env, &role, t.trigger.clone(), t.notes.clone(), &why)
        })
    }));
    let result = match recorded {
        Ok(r) => r,
        Err(_) => {
            tracing::error!("recording the crashed run of {} failed too", t.role.name);
            let mut r = run::record_crash_in_memory(&t.role, &why);
            r.failure = Some((crate::capabilities::provider::FailureClass::RunFailure, why));
            r
        }
    };
    Done {
        role: t.role.name,
        result,
        notes: t.paths,
    }
}
