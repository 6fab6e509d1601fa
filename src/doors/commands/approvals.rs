//! `tabd approvals [--json]`, `tabd approve ID`, `tabd reject ID` (DESIGN §15): the terminal's way
//! to see and decide what waits for the person. Deciding here edits the note, exactly as a person
//! would in Obsidian; the daemon then acts on it.

use chrono::Utc;
use serde::Serialize;

use super::{CliError, Workspace};
use crate::base::vault::VaultPath;
use crate::gate::approvals::{note, Approval, Phase};
use crate::records::state::StateStore;

#[derive(Serialize)]
struct Pending<'a> {
    id: &'a str,
    role: &'a str,
    tool: &'a str,
    risk: &'static str,
    note: &'a str,
    run_id: &'a str,
    created: String,
    expires: String,
}

pub fn list(ws: &Workspace, json: bool) -> Result<u8, CliError> {
    let state = StateStore::new(ws.vault.clone()).load();
    let now = Utc::now();
    let pending: Vec<Pending> = state
        .approvals
        .iter()
        .filter(|(_, a)| a.phase == Phase::Pending && a.expires > now)
        .map(|(id, a)| Pending {
            id,
            role: &a.role,
            tool: &a.tool,
            risk: a.risk.as_str(),
            note: &a.note,
            run_id: &a.run_id,
            created: note::stamp(a.created),
            expires: note::stamp(a.expires),
        })
        .collect();
    if json {
        let out = serde_json::json!({ "pending": pending });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| CliError::failed(e.to_string()))?
        );
        return Ok(0);
    }
    if pending.is_empty() {
        println!("No approvals are pending.");
        return Ok(0);
    }
    let tz = ws.config.timezone;
    for p in &pending {
        let a = &state.approvals[p.id];
        println!(
            "{}  {:<10} {:<40} {:<11} expires {}  {}",
            p.id,
            p.role,
            p.tool,
            p.risk,
            a.expires.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
            p.note
        );
    }
    println!("\nDecide with `tabd approve ID` or `tabd reject ID`, or set `status` in the note.");
    Ok(0)
}

/// `approve` (`approved = true`) or `reject`.
pub fn decide(ws: &Workspace, id: &str, approved: bool) -> Result<u8, CliError> {
    let state = StateStore::new(ws.vault.clone()).load();
    let (id, a) = find(&state.approvals, id)?;
    if !a.phase.may_run() {
        return Err(CliError::failed(format!(
            "approval {id} is {}: there is nothing to decide",
            a.phase.as_str()
        )));
    }
    if a.phase == Phase::Pending && a.expires <= Utc::now() {
        return Err(CliError::failed(format!(
            "approval {id} expired at {}; ask the role again",
            a.expires
                .with_timezone(&ws.config.timezone)
                .format("%Y-%m-%d %H:%M")
        )));
    }
    let path = VaultPath::parse(&a.note, false).map_err(|e| CliError::failed(e.to_string()))?;
    let text = ws
        .vault
        .read_text(&path, 1024 * 1024)
        .map_err(|e| CliError::failed(format!("cannot read {}: {e}", a.note)))?;
    let status = if approved { "approved" } else { "rejected" };
    let updated =
        note::update(&text, status, "").map_err(|e| CliError::failed(format!("{}: {e}", a.note)))?;
    ws.vault
        .write_atomic(&path, updated.as_bytes())
        .map_err(|e| CliError::failed(format!("cannot write {}: {e}", a.note)))?;
    let daemon = crate::doors::daemon::lock_holder(&ws.vault);
    let when = match (approved, daemon) {
        (true, Some(_)) => "the daemon runs it within seconds and writes the result into the note",
        (true, None) => "no daemon is running: it runs when `tabd run` starts",
        (false, _) => "nothing will run",
    };
    println!(
        "{status} {id} ({} for {}): {when}. Note: {}",
        a.tool, a.role, a.note
    );
    Ok(0)
}

fn find<'a>(
    all: &'a std::collections::BTreeMap<String, Approval>,
    id: &str,
) -> Result<(&'a str, &'a Approval), CliError> {
    if let Some((k, a)) = all.get_key_value(id) {
        return Ok((k, a));
    }
    let matches: Vec<(&String, &Approval)> = all.iter().filter(|(k, _)| k.starts_with(id)).collect();
    match matches.as_slice() {
        [(k, a)] => Ok((k, a)),
        [] => Err(CliError::failed(format!(
            "no approval {id}; `tabd approvals` lists the pending ones"
        ))),
        _ => Err(CliError::failed(format!(
            "{id} matches several approvals; give more of it"
        ))),
    }
}
