//! `delegate` (DESIGN §18): what the model is offered and what it may send. The work itself is a
//! run of another role, which the harness asks the run layer for; this module only knows the
//! tool's shape, so a hostile call is refused before anything starts.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::base::calls::{ToolSpec, DELEGATE};
use crate::records::runlog::Outcome;
use crate::setup::role::Role;

/// Most children one `delegate` call may ask for (a batch runs `max_parallel_delegates` at once).
pub const MAX_TASKS: usize = 10;

/// One task for one role.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The role to ask (one of the roles named in the description).
    pub role: String,
    /// Everything the role needs to know: it sees none of this conversation.
    pub task: String,
}

/// What one task came to (DESIGN §18). Typed from the run layer through the harness; it becomes
/// the contract's JSON only for the model (`to_json`).
#[derive(Debug, Clone, PartialEq)]
pub enum DelegateOutcome {
    /// The child ran to its end and answered.
    Answered(ChildRun),
    /// The child ran and failed (`why`); what it said is still its answer.
    Failed { run: ChildRun, why: String },
    /// The child never started: no runnable role of that name, disabled, its day spent, the
    /// session ended.
    NotStarted { role: String, why: String },
}

/// A child run as its parent's model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRun {
    pub role: String,
    pub run_id: String,
    pub outcome: Outcome,
    /// Its final answer (a summary when it ended early).
    pub answer: String,
    /// Its answer as JSON, when the role declares an output schema and the answer fits it.
    pub output: Option<Value>,
    pub cost_usd: f64,
}

impl DelegateOutcome {
    /// Whether the task came to nothing the parent can use (every one failing fails the call).
    pub fn failed(&self) -> bool {
        !matches!(self, Self::Answered(_))
    }

    /// The contract's result object: `{"role", "run_id", "outcome", "answer", "output"?,
    /// "cost_usd", "error"?}`; a child that never started has only `role`, `outcome` and `error`.
    pub fn to_json(&self) -> Value {
        let (run, why) = match self {
            Self::Answered(run) => (run, None),
            Self::Failed { run, why } => (run, Some(why)),
            Self::NotStarted { role, why } => {
                return json!({"role": role, "outcome": Outcome::Failed.as_str(), "error": why});
            }
        };
        let mut v = json!({
            "role": run.role,
            "run_id": run.run_id,
            "outcome": run.outcome.as_str(),
            "answer": run.answer,
            "cost_usd": run.cost_usd,
        });
        if let Some(output) = &run.output {
            v["output"] = output.clone();
        }
        if let Some(why) = why {
            v["error"] = Value::String(why.clone());
        }
        v
    }
}

/// `{"role", "task"}` for one child, or `{"tasks": [...]}` for several in parallel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    /// For one child: the role to ask.
    #[serde(default)]
    role: Option<String>,
    /// For one child: the task.
    #[serde(default)]
    task: Option<String>,
    /// For several children at once: one entry per child.
    #[serde(default)]
    tasks: Option<Vec<Task>>,
}

/// The spec offered to `role` (which names the roles it may ask).
pub fn spec(role: &Role) -> ToolSpec {
    ToolSpec {
        name: DELEGATE.to_string(),
        description: format!(
            "Hand a task to another role and wait for its answer, in this run. Roles you may ask: {}. \
             The other role starts fresh: it does NOT see this conversation, your context or your notes, \
             so the task must say everything it needs (what to look at, what you want back, in what form). \
             Give `role` and `task` for one child, or `tasks: [{{role, task}}, ...]` (up to {MAX_TASKS}) to \
             run several at once. Each result has the child's run_id, outcome, answer (its JSON `output` when \
             the role declares one) and cost_usd, or an error. Children's tokens and dollars count against \
             this run's limits.",
            role.settings.can_delegate_to.join(", ")
        ),
        input_schema: super::schema_of::<DelegateArgs>(),
    }
}

/// The tasks a call asks for, checked against what `role` may do; `Err` tells the model why.
pub fn tasks(role: &Role, input: &Value) -> Result<Vec<Task>, String> {
    let args: DelegateArgs = serde_json::from_value(input.clone()).map_err(|e| {
        format!("invalid arguments for delegate: {e}; send {{\"role\": \"…\", \"task\": \"…\"}} or {{\"tasks\": [...]}}")
    })?;
    let tasks =
        match (args.role, args.task, args.tasks) {
            (Some(role), Some(task), None) => vec![Task { role, task }],
            (None, None, Some(tasks)) if !tasks.is_empty() => tasks,
            _ => return Err(
                "send either `role` and `task` (one child) or a non-empty `tasks` list (several), not both"
                    .into(),
            ),
        };
    if tasks.len() > MAX_TASKS {
        return Err(format!(
            "{} tasks in one call; at most {MAX_TASKS} (split them over several calls)",
            tasks.len()
        ));
    }
    for t in &tasks {
        if !role.settings.can_delegate_to.contains(&t.role) {
            return Err(format!(
                "refused: this role may not delegate to `{}`; it may ask: {} (a person sets can_delegate_to in {})",
                t.role,
                role.settings.can_delegate_to.join(", "),
                role.path.display()
            ));
        }
        if t.task.trim().is_empty() {
            return Err(format!("the task for `{}` is empty; say what you need", t.role));
        }
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(output: Option<Value>) -> ChildRun {
        ChildRun {
            role: "risk".into(),
            run_id: "20261124T090000Z-risk-0a1b2c3d".into(),
            outcome: Outcome::Ok,
            answer: "Two risks.".into(),
            output,
            cost_usd: 0.25,
        }
    }

    /// Each outcome is the contract's result object (DESIGN §18), byte for byte as the model
    /// has always been sent it.
    #[test]
    fn each_outcome_is_the_contracts_json() {
        let cases = [
            (
                DelegateOutcome::Answered(run(None)),
                r#"{"answer":"Two risks.","cost_usd":0.25,"outcome":"ok","role":"risk","run_id":"20261124T090000Z-risk-0a1b2c3d"}"#,
            ),
            (
                DelegateOutcome::Answered(run(Some(json!({"risks": 2})))),
                r#"{"answer":"Two risks.","cost_usd":0.25,"outcome":"ok","output":{"risks":2},"role":"risk","run_id":"20261124T090000Z-risk-0a1b2c3d"}"#,
            ),
            (
                DelegateOutcome::Failed {
                    run: ChildRun {
                        outcome: Outcome::Failed,
                        ..run(None)
                    },
                    why: "the model server answered 500".into(),
                },
                r#"{"answer":"Two risks.","cost_usd":0.25,"error":"the model server answered 500","outcome":"failed","role":"risk","run_id":"20261124T090000Z-risk-0a1b2c3d"}"#,
            ),
            (
                DelegateOutcome::NotStarted {
                    role: "risk".into(),
                    why: "the role `risk` is disabled (enabled: false)".into(),
                },
                r#"{"error":"the role `risk` is disabled (enabled: false)","outcome":"failed","role":"risk"}"#,
            ),
        ];
        for (outcome, want) in cases {
            assert_eq!(outcome.to_json().to_string(), want, "{outcome:?}");
            assert_eq!(outcome.failed(), want.contains(r#""error""#), "{outcome:?}");
        }
    }
}
