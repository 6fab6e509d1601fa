//! `delegate` (docs/spec.md §18): what the model is offered and what it may send. The work itself is a
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

/// What one task came to (docs/spec.md §18). Typed from the run layer through the harness; it becomes
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

/// Why a `delegate` call's tasks were refused before any child started; its `Display` is what
/// the model is told, so it can send the call again.
#[derive(Debug, thiserror::Error)]
pub enum BadTasks {
    #[error(
        "invalid arguments for delegate: {0}; send {{\"role\": \"…\", \"task\": \"…\"}} or {{\"tasks\": [...]}}"
    )]
    Unreadable(serde_json::Error),
    #[error("send either `role` and `task` (one child) or a non-empty `tasks` list (several), not both")]
    Shape,
    #[error("{0} tasks in one call; at most {MAX_TASKS} (split them over several calls)")]
    TooMany(usize),
    /// A role outside the asker's `can_delegate_to` (`may_ask`), which is set in `file`.
    #[error(
        "refused: this role may not delegate to `{role}`; it may ask: {} (a person sets can_delegate_to in {})",
        .may_ask.join(", "),
        .file.display()
    )]
    NotAllowed {
        role: String,
        may_ask: Vec<String>,
        file: std::path::PathBuf,
    },
    #[error("the task for `{0}` is empty; say what you need")]
    EmptyTask(String),
}

/// The tasks a call asks for, checked against what `role` may do; `Err` tells the model why.
pub fn tasks(role: &Role, input: &Value) -> Result<Vec<Task>, BadTasks> {
    let args: DelegateArgs = serde_json::from_value(input.clone()).map_err(BadTasks::Unreadable)?;
    let tasks = match (args.role, args.task, args.tasks) {
        (Some(role), Some(task), None) => vec![Task { role, task }],
        (None, None, Some(tasks)) if !tasks.is_empty() => tasks,
        _ => return Err(BadTasks::Shape),
    };
    if tasks.len() > MAX_TASKS {
        return Err(BadTasks::TooMany(tasks.len()));
    }
    for t in &tasks {
        if !role.settings.can_delegate_to.contains(&t.role) {
            return Err(BadTasks::NotAllowed {
                role: t.role.clone(),
                may_ask: role.settings.can_delegate_to.clone(),
                file: role.path.clone(),
            });
        }
        if t.task.trim().is_empty() {
            return Err(BadTasks::EmptyTask(t.role.clone()));
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

    fn asker() -> Role {
        let mut role = crate::setup::role::RoleSet::from_texts(
            [(
                "lead".to_string(),
                std::path::PathBuf::from("roles/lead.md"),
                Ok("# Lead\n## Schedule\nmanual\n".to_string()),
            )],
            &crate::setup::role::LoadContext::new(chrono_tz::UTC, crate::base::environment::Env::default()),
        )
        .roles["lead"]
            .clone();
        role.settings.can_delegate_to = vec!["risk".into(), "legal".into()];
        role
    }

    /// What the model is told about a call it must send again, byte for byte as it always was
    /// (issue 37 item 3 made the reasons a type; the model reads the same words).
    #[test]
    fn each_refusal_says_what_it_always_said() {
        let role = asker();
        let task = |role: &str, task: &str| json!({"role": role, "task": task});
        let eleven: Vec<Value> = (0..11).map(|_| task("risk", "look")).collect();
        let cases = [
            (
                json!({"role": "risk"}),
                "send either `role` and `task` (one child) or a non-empty `tasks` list (several), not both",
            ),
            (json!({"tasks": []}), "send either `role` and `task` (one child) or a non-empty `tasks` list (several), not both"),
            (
                json!({"role": "risk", "task": "look", "tasks": [task("risk", "look")]}),
                "send either `role` and `task` (one child) or a non-empty `tasks` list (several), not both",
            ),
            (
                json!({"roles": "risk"}),
                "invalid arguments for delegate: unknown field `roles`, expected one of `role`, `task`, `tasks`; \
                 send {\"role\": \"…\", \"task\": \"…\"} or {\"tasks\": [...]}",
            ),
            (json!({"tasks": eleven}), "11 tasks in one call; at most 10 (split them over several calls)"),
            (
                task("ops", "look"),
                "refused: this role may not delegate to `ops`; it may ask: risk, legal \
                 (a person sets can_delegate_to in roles/lead.md)",
            ),
            (
                json!({"tasks": [task("risk", "look"), task("legal", " \n")]}),
                "the task for `legal` is empty; say what you need",
            ),
        ];
        for (input, want) in cases {
            let said = tasks(&role, &input).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(said, Err(want.to_string()), "{input}");
        }
        assert_eq!(
            tasks(&role, &task("legal", "read the contract"))
                .map(|t| t.len())
                .ok(),
            Some(1)
        );
    }

    /// Each outcome is the contract's result object (docs/spec.md §18), byte for byte as the model
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
