//! `tabd status [--json]`: the same report the daemon writes into `agent/status.md` and
//! `.tabd/status.json` — read from there while the daemon runs (one source, so the two never
//! disagree; what another command recorded since, such as a run of `tabd fire`, is read again
//! from the records), made here when it does not. A status note that still says a daemon runs when none
//! does (after `kill -9`) is rewritten.

use chrono::Utc;

use super::{CliError, Workspace};
use crate::base::vault::VaultPath;
use crate::doors::daemon::{self, status};
use crate::records::state::StateStore;

pub fn run(ws: &Workspace, role: Option<&str>, json: bool) -> Result<u8, CliError> {
    let pid = daemon::lock_holder(&ws.vault).and_then(|p| p.parse::<u32>().ok());
    let written = read_report(ws);
    let mut report = match (pid, written) {
        (Some(pid), Some(mut r)) if r.daemon_pid == Some(pid) => {
            let state = StateStore::new(ws.vault.clone()).peek();
            status::refresh_records(&mut r, &ws.vault, &ws.config, &state, Utc::now());
            r
        }
        (pid, written) => {
            let report = compute(ws, pid);
            // The daemon is gone but its status files say it runs: correct them now.
            if pid.is_none() && written.is_some_and(|w| w.daemon_pid.is_some()) {
                status::write(&ws.vault, &report, ws.config.timezone, &ws.env.redactor());
            }
            report
        }
    };
    if let Some(name) = role {
        if !report.roles.iter().any(|r| r.role == name) {
            let known: Vec<&str> = report.roles.iter().map(|r| r.role.as_str()).collect();
            let hint = crate::base::text::did_you_mean(name, known.iter().copied())
                .map(|k| format!(" — did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(CliError::usage(format!(
                "there is no role `{name}`{hint} Roles: {}",
                known.join(", ")
            )));
        }
        report.roles.retain(|r| r.role == name);
    }
    // What the daemon wrote is redacted already; what was made here, not: both go through the
    // redactor (docs/spec.md §24).
    let secrets = ws.env.redactor();
    // Where today's run log is, and what keeps it from its folder (docs/spec.md §26).
    let apart = super::run::log_apart_notes(ws);
    if json {
        let mut value = status::to_json(&report, &secrets);
        let log = crate::records::runlog::RunLog::new(ws.vault.clone(), ws.config.timezone);
        value["log"] = serde_json::json!({
            "folder": log.folder(),
            "today": log.daily_path(Utc::now()).as_str(),
            "warnings": apart.iter().map(|(_, said)| said).collect::<Vec<_>>(),
        });
        say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        say_raw!(
            "{}",
            secrets.apply(&status::render_text(&report, ws.config.timezone))
        );
        for (_, said) in &apart {
            say!("log: {said}");
        }
    }
    Ok(0)
}

/// The report the running daemon last wrote.
fn read_report(ws: &Workspace) -> Option<status::StatusReport> {
    let path = VaultPath::parse(crate::base::vault::layout::STATUS_JSON, false).ok()?;
    let text = ws.vault.read_text(&path, 64 * 1024 * 1024).ok()?;
    serde_json::from_str(&text).ok()
}

/// The pauses that hold, from the book — and, with tabd's key, the marks of pauses whose record
/// is gone. A status only reads: a key not made yet is not made here (it would have no marks).
/// `tabd doctor` asks it too.
pub(super) fn paused(ws: &Workspace) -> crate::records::state::pause::Paused {
    let made = ws
        .launcher(None)
        .places()
        .state
        .join(crate::base::signing::FILE)
        .exists();
    let key = if made { ws.key().ok() } else { None };
    let store = crate::records::state::pause::PauseStore::new(ws.vault.clone(), key);
    let names = ws.roles.all_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    store.paused(Utc::now(), &names)
}

/// The report made from state and the vault, for when no daemon is writing one.
fn compute(ws: &Workspace, pid: Option<u32>) -> status::StatusReport {
    let state = StateStore::new(ws.vault.clone()).peek();
    let live = status::Live {
        paused: if pid.is_some() {
            state.global.paused.clone()
        } else {
            None
        },
        watching: pid.as_ref().map(|_| "watching the vault".to_string()),
        pid,
        host: ws.config.daemon.host(),
        unsandboxed: {
            let support = crate::base::sandbox::Probe::default().support();
            (!support.enforced()).then(|| support.describe())
        },
        config_error: ws.config_error.clone(),
        pauses: paused(ws),
        ..status::Live::default()
    };
    status::collect(&ws.vault, &ws.config, &ws.roles, &state, &live, Utc::now())
}
