//! `tabd fire ROLE [--note FILE]`: one turn now, in the foreground.

use std::path::Path;

use chrono::Utc;

use super::{CliError, Workspace};
use crate::prompt::Trigger;
use crate::provider::{self, FailureClass, RetryPolicy};
use crate::role::Role;
use crate::run::{self, RunEnv};
use crate::runlog::RunLog;
use crate::state::StateStore;
use crate::text::thousands;
use crate::vault::{Vault, VaultPath};

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
            Err(CliError::usage(format!("there is no role `{name}` in {}/roles; roles: {}", ws.vault.display(), names.join(", "))))
        }
    }
}

/// Puts `file` into the role's inbox (unless it is already there) and returns its vault path.
fn adopt_note(vault: &Vault, vault_root: &Path, role: &Role, file: &Path) -> Result<VaultPath, CliError> {
    let abs = std::fs::canonicalize(file)
        .map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    let root = std::fs::canonicalize(vault_root).map_err(|e| CliError::failed(e.to_string()))?;
    let inbox = VaultPath::parse(&role.inbox, false).map_err(|e| CliError::failed(e.to_string()))?;
    if let Ok(rel) = abs.strip_prefix(&root) {
        if let Some(rel) = rel.to_str().and_then(|r| VaultPath::parse(r, false).ok()) {
            if rel.parent() == inbox {
                return Ok(rel);
            }
        }
    }
    let text = std::fs::read(&abs).map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    let name = abs.file_name().and_then(|n| n.to_str()).unwrap_or("note.md");
    let name = if name.to_lowercase().ends_with(".md") {
        name.to_string()
    } else {
        format!("{name}.md")
    };
    let path = vault
        .create_unique(&inbox, &name, &text)
        .map_err(|e| CliError::failed(e.to_string()))?;
    println!("Copied {} into {path}", file.display());
    Ok(path)
}

pub fn run(ws: &Workspace, role_name: &str, note: Option<&Path>) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    let vault =
        Vault::open(&ws.vault).map_err(|e| CliError::failed(format!("cannot open the vault: {e}")))?;
    let lock_path = ws.vault.join(".tabd").join(format!("run-{}.lock", role.name));
    std::fs::create_dir_all(ws.vault.join(".tabd")).map_err(|e| CliError::failed(e.to_string()))?;
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| CliError::failed(e.to_string()))?;
    let mut lock = fd_lock::RwLock::new(lock_file);
    let _guard = lock.try_write().map_err(|_| {
        CliError::failed(format!(
            "{} is running right now (in the daemon); try again when it finishes",
            role.name
        ))
    })?;

    let store = StateStore::new(&ws.vault);
    run::finish_pending_moves(&vault, &store);
    let adopted = match note {
        Some(file) => Some(adopt_note(&vault, &ws.vault, role, file)?),
        None => None,
    };
    let mut notes = run::ready_notes(&vault, role, ws.config.inbox.max_batch)
        .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
    if let Some(path) = &adopted {
        if !notes.iter().any(|n| &n.path == path) {
            let n = crate::inbox::read_note(&vault, path).map_err(|e| CliError::failed(e.to_string()))?;
            notes.insert(0, n);
        }
    }
    let provider =
        provider::build(&ws.config.provider, &ws.env).map_err(|e| CliError::failed(e.to_string()))?;
    let log = RunLog::new(&ws.vault, ws.config.timezone);
    let env = RunEnv {
        vault: &vault,
        config: &ws.config,
        roles: &ws.roles,
        provider: provider.as_ref(),
        retry: RetryPolicy::from_config(&ws.config.provider),
        store: &store,
        log: &log,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    let started = Utc::now();
    let result = rt.block_on(run::run_role(&env, role, Trigger::manual(), notes));
    let rec = &result.record;
    let u = &rec.usage;
    println!(
        "{} · {} · {:.1} s · {} tool calls · {} tokens in / {} out",
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
    println!("Log: {}", result.daily_log.display());
    match &result.failure {
        None => Ok(0),
        Some((class, msg)) => {
            let what = match class {
                FailureClass::Outage => {
                    "the model could not be used; the notes stay in the inbox, no attempt counted"
                }
                FailureClass::RunFailure => "the run failed; its notes count an attempt",
            };
            eprintln!("error: {msg}\n({what})");
            Ok(1)
        }
    }
}
