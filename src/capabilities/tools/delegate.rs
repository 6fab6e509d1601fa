//! `delegate` (DESIGN §18): what the model is offered and what it may send. The work itself is a
//! run of another role, which the harness asks the run layer for; this module only knows the
//! tool's shape, so a hostile call is refused before anything starts.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::base::calls::{ToolSpec, DELEGATE};
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
