//! Agent tools: trigger_role (hand work to another role) and remember (long-term memory).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::files::append;
use super::{args, schema_of, Tool, ToolContext, ToolError};
use crate::base::calls::{Change, ChangeKind, Risk, ToolResult};
use crate::base::vault::{protected, VaultPath};
use crate::records::inbox::Priority;
use crate::setup::role::Role;

/// Longest note `trigger_role` or `remember` accepts.
const MAX_NOTE_BYTES: usize = 16 * 1024;

pub struct TriggerRole;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TriggerArgs {
    /// Name of the role to ask, e.g. risk
    role: String,
    /// What you want it to look at or do, in Markdown.
    note: String,
    /// How urgent it is (default normal).
    #[serde(default)]
    priority: Priority,
}

impl Tool for TriggerRole {
    fn name(&self) -> &'static str {
        "trigger_role"
    }
    fn description(&self) -> &'static str {
        "Ask another role to run: writes a note into its inbox. Use it when something needs that \
         role's attention now rather than at its next scheduled run."
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn schema(&self) -> Value {
        schema_of::<TriggerArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: TriggerArgs = args(input)?;
        let (target, hops) = may_trigger(ctx, &a)?;
        // A real YAML emitter: whatever the names and values hold, the reader gets them back,
        // and `hops` is always there to read.
        let header = crate::formats::frontmatter::render(&[
            ("from", Value::String(ctx.role.name.clone())),
            (
                "date",
                Value::String(ctx.now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            ),
            ("priority", Value::String(a.priority.as_str().to_string())),
            ("hops", Value::from(hops)),
        ]);
        let text = format!("{header}{}\n", a.note.trim_end());
        let inbox = inbox_of(target, ctx.vault.layout())?;
        let name = format!("{}-from-{}.md", ctx.now.format("%Y-%m-%d-%H%M%S"), ctx.role.name);
        let path = ctx.vault.create_unique(inbox, &name, text.as_bytes())?;
        // A new note (create never replaces): its prior state is "absent".
        if let Some(j) = ctx.journal {
            j.created(&path)
                .map_err(|e| ToolError::Fatal(format!("cannot keep {path} in the undo journal: {e}")))?;
        }
        Ok(ToolResult::ok(
            format!(
                "sent a {} note to {} ({path}, hops {hops})",
                a.priority.as_str(),
                target.display_name
            ),
            text.len() as u64,
            vec![Change {
                path: path.as_str().to_string(),
                kind: ChangeKind::Triggered,
            }],
        ))
    }
}

/// The role `a` sends a note to and the note's hops, or why it may not: the role must exist and
/// run, be one the caller may trigger, the chain must stay within `max_chain_depth`, and the note
/// must say something within `MAX_NOTE_BYTES`.
fn may_trigger<'a>(ctx: &ToolContext<'a>, a: &TriggerArgs) -> Result<(&'a Role, u32), ToolError> {
    let target_name = a.role.trim().trim_end_matches(".md");
    let target = match ctx.roles.roles.get(target_name) {
        Some(r) if r.is_abstract => {
            return Err(ToolError::Refused(format!(
                "`{target_name}` is an abstract role that never runs"
            )))
        }
        Some(r) => r,
        None if ctx.roles.broken.contains_key(target_name) => {
            return Err(ToolError::Refused(format!(
                "role `{target_name}` has errors in its file and cannot take notes until a person fixes it"
            )))
        }
        None => {
            let names: Vec<&str> = ctx.roles.runnable().map(|r| r.name.as_str()).collect();
            return Err(ToolError::Refused(format!(
                "there is no role `{target_name}`; roles: {}",
                names.join(", ")
            )));
        }
    };
    let allowed = &ctx.role.settings.can_trigger;
    if !allowed.is_empty() && !allowed.iter().any(|r| r == target_name) {
        return Err(ToolError::Refused(format!(
            "this role may trigger only {} (its can_trigger setting)",
            allowed.join(", ")
        )));
    }
    let hops = ctx.hops + 1;
    if hops > ctx.max_chain_depth {
        return Err(ToolError::Refused(format!(
            "this run was itself triggered by a chain of {} notes; another trigger would exceed \
                 max_chain_depth ({}). Finish the work here or note it for a person instead.",
            ctx.hops, ctx.max_chain_depth
        )));
    }
    if a.note.trim().is_empty() {
        return Err(ToolError::InvalidInput("note is empty".into()));
    }
    if a.note.len() > MAX_NOTE_BYTES {
        return Err(ToolError::InvalidInput(format!(
            "note is longer than {MAX_NOTE_BYTES} bytes"
        )));
    }
    Ok((target, hops))
}

/// The folder `target` takes notes in: never one of tabd's own (a role file that names one as
/// its inbox is an error `validate` shows; the note is refused all the same).
fn inbox_of<'a>(
    target: &'a Role,
    layout: &crate::base::vault::layout::Layout,
) -> Result<&'a VaultPath, ToolError> {
    let inbox = &target.inbox;
    match protected::owned_by_tabd(&protected::fold(inbox.as_str()), layout) {
        Some((owned, why)) => Err(ToolError::Refused(format!(
            "{}'s inbox {inbox} is in {owned}, which is tabd's own ({why})",
            target.display_name
        ))),
        None => Ok(inbox),
    }
}

pub struct Remember;

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Scope {
    /// This role's own memory (agent/memory/<role>.md).
    #[default]
    Role,
    /// The memory every role reads (memory.md).
    Global,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    /// One short fact or lesson to keep for later runs.
    note: String,
    /// `role` (default) for this role only, `global` for every role.
    #[serde(default)]
    scope: Scope,
}

impl Tool for Remember {
    fn name(&self) -> &'static str {
        "remember"
    }
    fn description(&self) -> &'static str {
        "Keep a short fact or lesson for future runs, as a dated line in this role's memory \
         (scope role) or the memory all roles share (scope global)."
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn schema(&self) -> Value {
        schema_of::<RememberArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: RememberArgs = args(input)?;
        // One line, through the one renderer of model text (docs/spec.md §21): a remembered note is a
        // list item of the memory file, never a heading, a fence or a forged line of tabd's, in
        // the file or in the prompt that quotes it.
        let flat = crate::base::text::unify_line_ends(&a.note);
        let note = crate::base::text::for_note(&flat.split_whitespace().collect::<Vec<_>>().join(" "));
        if note.is_empty() {
            return Err(ToolError::InvalidInput("note is empty".into()));
        }
        if note.len() > MAX_NOTE_BYTES {
            return Err(ToolError::InvalidInput(format!(
                "note is longer than {MAX_NOTE_BYTES} bytes"
            )));
        }
        let path = match a.scope {
            Scope::Role => VaultPath::parse(&ctx.vault.layout().role_memory(&ctx.role.name), false)?,
            Scope::Global => VaultPath::parse(&ctx.vault.layout().memory(), false)?,
        };
        // Memory is tabd's own file: it bypasses write_paths, but never follows a link out.
        let real = ctx.vault.canonical(&path)?;
        if real != path {
            return Err(ToolError::Refused(format!(
                "{path} is a link; memory files must be plain files"
            )));
        }
        let mut line = String::new();
        if !ctx.vault.exists(&real) && matches!(a.scope, Scope::Role) {
            line.push_str(&format!("# Memory — {}\n\n", ctx.role.display_name));
        }
        line.push_str(&format!("- {}: {note}\n", ctx.now.format("%Y-%m-%d")));
        append(ctx, &real, &line)?;
        Ok(ToolResult::ok(
            format!("remembered in {path}"),
            line.len() as u64,
            vec![Change {
                path: path.as_str().to_string(),
                kind: ChangeKind::Remembered,
            }],
        ))
    }
}
