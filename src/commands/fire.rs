//! `tabd fire ROLE [--note FILE]`: one turn now, in the foreground.

use std::path::Path;

use chrono::Utc;

use super::{CliError, Workspace};
use crate::inbox;
use crate::provider::FailureClass;
use crate::role::Role;
use crate::run;
use crate::text::thousands;
use crate::trigger::Trigger;
use crate::vault::VaultPath;

/// The role named `name`, if it can run; else the validate message.
pub fn runnable_role<'a>(ws: &'a Workspace, name: &str) -> Result<&'a Role, CliError> {
    let name = name.trim_end_matches(".md");
    if let Some(diags) = ws.roles.broken.get(name) {
        let msgs: Vec<String> = diags.iter().map(ToString::to_string).collect();
        return Err(CliError::usage(format!(
            "role `{name}` has errors; fix them first:\n{}",
            msgs.join("\n")
        )));
    }
    match ws.roles.roles.get(name) {
        Some(r) if r.is_abstract => Err(CliError::usage(format!(
            "`{name}` is an abstract role (its name starts with `_`): other roles inherit from it, it never runs"
        ))),
        Some(r) => Ok(r),
        None => {
            let names: Vec<&str> = ws.roles.runnable().map(|r| r.name.as_str()).collect();
            Err(CliError::usage(format!("there is no role `{name}` in {}/roles; roles: {}", ws.root.display(), names.join(", "))))
        }
    }
}

/// Puts `file` into the role's inbox (unless it is already there) and returns its vault path.
fn adopt_note(ws: &Workspace, role: &Role, file: &Path) -> Result<VaultPath, CliError> {
    let abs = std::fs::canonicalize(file)
        .map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    if let Ok(rel) = abs.strip_prefix(&ws.root) {
        if let Some(rel) = rel.to_str().and_then(|r| VaultPath::parse(r, false).ok()) {
            if rel.parent() == role.inbox {
                return Ok(rel);
            }
        }
    }
    let text = crate::vault::read_regular_path(&abs, crate::inbox::MAX_NOTE_BYTES)
        .map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    let name = abs.file_name().and_then(|n| n.to_str()).unwrap_or("note.md");
    let name = if name.to_lowercase().ends_with(".md") {
        name.to_string()
    } else {
        format!("{name}.md")
    };
    let path = ws
        .vault
        .create_unique(&role.inbox, &name, text.as_bytes())
        .map_err(|e| CliError::failed(e.to_string()))?;
    println!("Copied {} into {path}", file.display());
    Ok(path)
}

pub fn run(ws: &Workspace, role_name: &str, note: Option<&Path>) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    let _guard = ws
        .vault
        .lock(&run::run_lock_path(&role.name), false)
        .map_err(|e| CliError::failed(format!("cannot take the run lock: {e}")))?
        .ok_or_else(|| {
            CliError::failed(format!(
                "{} is running right now (in the daemon); try again when it finishes",
                role.name
            ))
        })?;
    let env = ws.run_env()?;
    let recovered = run::recover(&env, Some(&role.name));
    if recovered > 0 {
        println!("Finished {recovered} run(s) a crash had interrupted.");
    }
    let adopted = match note {
        Some(file) => Some(adopt_note(ws, role, file)?),
        None => None,
    };
    let mut notes = inbox::ready_notes(&ws.vault, &role.inbox, ws.config.inbox.max_batch)
        .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
    if let Some(path) = &adopted {
        if !notes.iter().any(|n| &n.path == path) {
            let n = inbox::read_note(&ws.vault, path).map_err(|e| CliError::failed(e.to_string()))?;
            notes.insert(0, n);
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    let started = Utc::now();
    let result = rt.block_on(run::run_role(&env, role, Trigger::manual(), notes));
    print_result(role, &result, started);
    match &result.failure {
        None => Ok(0),
        Some((class, msg)) => {
            let what = match class {
                FailureClass::Outage => {
                    "the model could not be used; the notes stay in the inbox, no attempt counted"
                }
                FailureClass::RunFailure => "the run failed; its notes count an attempt",
                FailureClass::Unavailable => {
                    "a server this role requires is down; the notes stay in the inbox, no attempt counted"
                }
            };
            eprintln!("error: {msg}\n({what})");
            Ok(1)
        }
    }
}

fn print_result(role: &Role, result: &run::RunResult, started: chrono::DateTime<Utc>) {
    let rec = &result.record;
    let u = &rec.usage.tokens;
    let cost = if rec.usage.cost_usd > 0.0 {
        format!(" · {}", crate::cost::dollars(rec.usage.cost_usd))
    } else {
        String::new()
    };
    println!(
        "{} · {} · {:.1} s · {} tool calls · {} tokens in / {} out{cost}",
        role.display_name,
        rec.outcome,
        (Utc::now() - started).num_milliseconds() as f64 / 1000.0,
        rec.tool_calls.len(),
        thousands(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens),
        thousands(u.output_tokens)
    );
    if !result.summary.trim().is_empty() {
        println!("\n{}\n", result.summary.trim());
    }
    for m in &rec.moved {
        println!("moved {} → {}", m.from, m.to);
    }
    println!("Log: {}", result.daily_log);
    for e in &result.log_errors {
        eprintln!("error: {e}");
    }
}
