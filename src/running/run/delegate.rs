//! Delegation (docs/spec.md §18): a `delegate` call becomes runs of other roles, here and now. Each
//! child is a whole run — its own prompt, tools, sandbox, approvals and record — that starts with
//! no parent conversation, moves no inbox notes, never waits for a daemon run slot, ends by the
//! parent's deadline, carries the parent's chain depth (hops), and spends from an account its
//! parent's ceilings also watch — and in its parent's day: what it spends counts in its role's
//! day and in the parent's (`day`), and either's budget stops it between two steps. Before a
//! child starts, its role's day must not be spent (its daily budgets, the global ones, its runs
//! per day), and the session's gate must have room:
//! `max_parallel_delegates` holds for the whole session, however many `delegate` calls come at
//! once (an agent CLI can send several).

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::env::{RunEnv, RunResult};
use crate::base::cost::Account;
use crate::base::trigger::{Delegation, Trigger};
use crate::capabilities::provider::BoxFuture;
use crate::capabilities::tools::delegate::{ChildRun, DelegateOutcome, Task};
use crate::gate::harness::Delegator;
use crate::setup::role::Role;

/// What a run inherits from the run that asked for it (the depth left travels in the trigger).
#[derive(Clone, Default)]
pub struct Lineage {
    /// The parent's account: the child's spending counts there too.
    pub account: Option<Account>,
    /// The parent's deadline: the child ends by it.
    pub deadline: Option<Instant>,
    /// The parent's chain depth: a child is part of its parent's chain, so a note it triggers
    /// is one hop further than the parent's (a loop through children stays bounded).
    pub hops: u32,
    /// The parent's span: the child's is under it.
    pub trace: crate::capabilities::telemetry::RunSpan,
    /// The days the parent's spending counts in (its role's, and those above it): the child's
    /// spending counts in them too, and their budgets stop it as they stop the parent.
    pub day: Vec<crate::records::limits::DayLink>,
}

/// The run that delegates: what its children need to know of it, and their results.
pub struct RunDelegator {
    pub env: RunEnv,
    pub parent: Role,
    pub parent_run_id: String,
    /// The parent's depth in its own chain (0: not delegated itself).
    pub depth: u32,
    /// How many levels the parent may still delegate (1 or more).
    pub depth_left: u32,
    pub lineage: Lineage,
    /// `max_parallel_delegates` for the whole session: every child holds a place while it runs.
    pub gate: Arc<tokio::sync::Semaphore>,
    /// Every child run, in the order they ended (the parent's record and log list them).
    pub children: Mutex<Vec<RunResult>>,
}

impl RunDelegator {
    /// The child runs so far.
    pub fn take_children(&self) -> Vec<RunResult> {
        std::mem::take(&mut *self.children.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Why a child of `child` may not start now: a pause holds it (`tabd pause`), or holds this
    /// run's own role (a pause that landed while it runs: it starts nothing more).
    fn paused(&self, child: &str) -> Option<String> {
        let store =
            crate::records::state::pause::PauseStore::new(self.env.vault.clone(), Some(self.env.key.clone()));
        let (now, tz) = (self.env.clock.now(), self.env.config.timezone);
        let names = [child, self.parent.name.as_str()];
        let held = store.paused(now, &names);
        names.iter().find_map(|r| held.of(r).map(|h| h.refusal(r, tz)))
    }

    async fn one(&self, task: Task) -> DelegateOutcome {
        let not_started = |why: String| DelegateOutcome::NotStarted {
            role: task.role.clone(),
            why,
        };
        let Some(role) = self.env.roles.roles.get(&task.role).cloned() else {
            return not_started(format!(
                "there is no runnable role `{}` (its file has errors, or it was removed)",
                task.role
            ));
        };
        if !role.enabled() {
            return not_started(format!("the role `{}` is disabled (enabled: false)", task.role));
        }
        if let Some(why) = crate::base::blocking::run(|| self.paused(&task.role)) {
            return not_started(format!("not started: {why}"));
        }
        let Ok(_place) = self.gate.acquire().await else {
            return not_started("the session has ended".into());
        };
        let spent = {
            let env = self.env.clone();
            let child = role.clone();
            crate::base::blocking::run(move || {
                let today = env.clock.now().with_timezone(&env.config.timezone).date_naive();
                crate::records::limits::day_spent(&child, &env.config.limits, &env.store.load(), today)
            })
        };
        if let Some(why) = spent {
            return not_started(format!("not started: {why}"));
        }
        let trigger = Trigger::delegate(Delegation {
            parent_run_id: self.parent_run_id.clone(),
            parent_role: self.parent.display_name.clone(),
            task: task.task,
            depth: self.depth + 1,
            depth_left: self.depth_left - 1,
        });
        // Boxed: a child run may itself delegate (a recursive future).
        let run: BoxFuture<'_, RunResult> = Box::pin(super::run_in(
            &self.env,
            &role,
            trigger,
            Vec::new(),
            self.lineage.clone(),
        ));
        let result = run.await;
        let outcome = outcome_of(&result);
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(result);
        outcome
    }
}

/// What one child run came to, for its parent.
fn outcome_of(r: &RunResult) -> DelegateOutcome {
    let run = ChildRun {
        role: r.record.role.clone(),
        run_id: r.record.run_id.clone(),
        outcome: r.record.outcome,
        answer: r.summary.clone(),
        output: r.output.clone(),
        cost_usd: r.record.usage.cost_usd,
    };
    match &r.failure {
        // A child that stopped short of its answer (a limit, its checkpoint): its parent is told
        // why, with the calls a checkpoint lists.
        None if r.record.outcome == crate::records::runlog::Outcome::Limit => match &r.record.error {
            Some(why) => DelegateOutcome::Failed {
                run,
                why: why.clone(),
            },
            None => DelegateOutcome::Answered(run),
        },
        None => DelegateOutcome::Answered(run),
        Some((_, why)) => DelegateOutcome::Failed {
            run,
            why: why.clone(),
        },
    }
}

impl Delegator for RunDelegator {
    fn run(&self, tasks: Vec<Task>) -> BoxFuture<'_, Vec<DelegateOutcome>> {
        Box::pin(async move {
            use futures::stream::StreamExt;
            let parallel = self.parent.parallel_delegates();
            // In order of the tasks, at most `parallel` at a time.
            futures::stream::iter(tasks)
                .map(|t| self.one(t))
                .buffered(parallel)
                .collect()
                .await
        })
    }
}

/// A delegator for a run of `role` that may still delegate `depth_left` levels (the run's
/// `Role::delegation_left`, or less at a door that knows less); `None` when that is 0.
pub fn delegator_for(
    env: &RunEnv,
    role: &Role,
    run_id: &str,
    trigger: &Trigger,
    depth_left: u32,
    lineage: Lineage,
) -> Option<Arc<RunDelegator>> {
    if depth_left == 0 || !role.may_delegate() {
        return None;
    }
    Some(Arc::new(RunDelegator {
        env: env.clone(),
        parent: role.clone(),
        parent_run_id: run_id.to_string(),
        depth: trigger.depth(),
        depth_left,
        lineage,
        gate: Arc::new(tokio::sync::Semaphore::new(role.parallel_delegates().max(1))),
        children: Mutex::new(Vec::new()),
    }))
}
