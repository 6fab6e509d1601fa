//! Why a run fired (docs/spec.md §6): the four trigger kinds and what each carries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerKind {
    Schedule,
    Inbox,
    Manual,
    Watch,
    /// Another role's run handed this run a task and waits for its answer (docs/spec.md §18).
    Delegate,
    /// The second part of a run that waited for the person's approval (docs/spec.md §22).
    Resume,
}

impl TriggerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Schedule => "schedule",
            Self::Inbox => "inbox",
            Self::Manual => "manual",
            Self::Watch => "watch",
            Self::Delegate => "delegate",
            Self::Resume => "resume",
        }
    }
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trigger {
    pub kind: TriggerKind,
    /// For a scheduled run: the slot it was due, and the cron line(s) of the schedule.
    pub scheduled_for: Option<DateTime<Utc>>,
    pub cron: Option<String>,
    /// Slots that were missed and are covered by this run (catch-up).
    pub missed: usize,
    /// For a watch run: the files whose change fired it.
    pub watched: Vec<String>,
    /// A scheduled run with no notes whose context is unchanged is skipped at zero tokens
    /// (`skip_unchanged`, docs/spec.md §3).
    pub skip_if_unchanged: bool,
    /// For a delegated run: who asked, and what.
    pub delegation: Option<Delegation>,
    /// The run this one is the second part of (`Resume`).
    pub resumes: Option<String>,
    /// A scheduled run that runs its slot again, the run of it that started earlier having been
    /// interrupted (docs/spec.md §22).
    pub rerun: Option<Rerun>,
    /// A person started it knowing its day is spent (`tabd fire --over-budget`): its role's and
    /// the global daily budgets do not stop it (what it spends still counts).
    pub over_budget: bool,
}

/// A slot run again because its run did not finish (a crash, `kill -9`, tabd's own stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rerun {
    /// The slot run again (the trigger's `scheduled_for`).
    pub slot: DateTime<Utc>,
    /// When the run that did not finish started.
    pub interrupted_run_started_at: DateTime<Utc>,
}

/// The task a parent run handed to a child run.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    pub parent_run_id: String,
    /// The parent role's display name (the child's prompt says who asks).
    pub parent_role: String,
    pub task: String,
    /// 1 for a child of a run that was not delegated itself.
    pub depth: u32,
    /// How many more levels the parent allows below this run (its own `max_delegation_depth`
    /// may lower it further).
    pub depth_left: u32,
}

impl Trigger {
    /// The second part of the run `run_id`, which waited for an approval.
    pub fn resume(run_id: &str) -> Self {
        Self {
            kind: TriggerKind::Resume,
            resumes: Some(run_id.to_string()),
            ..Self::manual()
        }
    }

    pub fn manual() -> Self {
        Self {
            kind: TriggerKind::Manual,
            scheduled_for: None,
            cron: None,
            missed: 0,
            watched: Vec::new(),
            skip_if_unchanged: false,
            delegation: None,
            resumes: None,
            rerun: None,
            over_budget: false,
        }
    }

    pub fn delegate(delegation: Delegation) -> Self {
        Self {
            kind: TriggerKind::Delegate,
            delegation: Some(delegation),
            ..Self::manual()
        }
    }

    /// How deep in a delegation this run is (0: not delegated).
    pub fn depth(&self) -> u32 {
        self.delegation.as_ref().map_or(0, |d| d.depth)
    }

    pub fn inbox() -> Self {
        Self {
            kind: TriggerKind::Inbox,
            ..Self::manual()
        }
    }

    pub fn watch(files: Vec<String>) -> Self {
        Self {
            kind: TriggerKind::Watch,
            watched: files,
            ..Self::manual()
        }
    }

    pub fn schedule(slot: DateTime<Utc>, cron: String, missed: usize, skip_if_unchanged: bool) -> Self {
        Self {
            kind: TriggerKind::Schedule,
            scheduled_for: Some(slot),
            cron: Some(cron),
            missed,
            skip_if_unchanged,
            ..Self::manual()
        }
    }
}
