//! `tabd approvals [--json]`, `tabd approve ID`, `tabd reject ID` (docs/spec.md §15): the terminal's way
//! to see and decide what waits for the person. A decision is recorded in tabd's ledger (durably,
//! under its lock, the same the daemon's pass claims a call under) before it is printed, so what
//! the command says is decided is decided: a rejected call never runs, an approved one runs once
//! (the daemon runs it). Then the note says so, as if the person had edited it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{CliError, Workspace};
use crate::base::vault::VaultPath;
use crate::doors::approval_pass::decide::{apply, Decided};
use crate::gate::approvals::{followup, note, Approval, NoteStatus};
use crate::records::state::approval_ledger::{self, DecidedBy};
use crate::records::state::StateStore;

#[derive(Serialize)]
struct Listed<'a> {
    id: &'a str,
    role: &'a str,
    tool: &'a str,
    risk: &'static str,
    note: &'a str,
    run_id: &'a str,
    status: NoteStatus,
    created: String,
    expires: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a str>,
}

/// What the ledger says of the requests a person may still act on, by kind.
#[derive(Serialize, Default)]
struct Listing<'a> {
    /// Waiting for a decision.
    pending: Vec<Listed<'a>>,
    /// Approved with `tabd approve`; the daemon runs it.
    approved: Vec<Listed<'a>>,
    /// Running now.
    running: Vec<Listed<'a>>,
    /// tabd stopped during the call or got no answer: it may or may not have happened.
    unknown: Vec<Listed<'a>>,
    /// Not run as the note stands (its arguments, its tool, or the note itself cannot be read):
    /// the outcome says why; the person may fix the note and approve it again.
    invalid: Vec<Listed<'a>>,
}

fn listing(all: &std::collections::BTreeMap<String, Approval>, now: DateTime<Utc>) -> Listing<'_> {
    let mut out = Listing::default();
    for (id, a) in all {
        let kind = match a.phase {
            NoteStatus::Pending if a.expires > now => &mut out.pending,
            NoteStatus::Approved => &mut out.approved,
            NoteStatus::Executing => &mut out.running,
            NoteStatus::Unknown => &mut out.unknown,
            NoteStatus::Invalid => &mut out.invalid,
            _ => continue,
        };
        kind.push(Listed {
            id,
            role: &a.role,
            tool: &a.tool,
            risk: a.risk_word(),
            note: &a.note,
            run_id: &a.run_id,
            status: a.phase,
            created: note::stamp(a.created),
            expires: note::stamp(a.expires),
            outcome: a.outcome.as_deref(),
        });
    }
    out
}

/// The ledger, or why it cannot be read (never an empty list in place of an unreadable one).
fn ledger(ws: &Workspace) -> Result<std::collections::BTreeMap<String, Approval>, CliError> {
    StateStore::new(ws.vault.clone())
        .try_peek()
        .map(|s| s.approvals)
        .map_err(|e| CliError::failed(format!("cannot read tabd's ledger of approvals: {e}")))
}

pub fn list(ws: &Workspace, json: bool) -> Result<u8, CliError> {
    let all = ledger(ws)?;
    let shown = listing(&all, Utc::now());
    if json {
        say!(
            "{}",
            serde_json::to_string_pretty(&shown).map_err(|e| CliError::failed(e.to_string()))?
        );
        return Ok(0);
    }
    let tz = ws.config.timezone;
    if shown.pending.is_empty() {
        say!("No approvals are pending.");
    }
    for p in &shown.pending {
        let a = &all[p.id];
        say!(
            "{}  {:<10} {:<40} {:<11} expires {}  {}",
            p.id,
            p.role,
            p.tool,
            p.risk,
            a.expires.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
            p.note
        );
    }
    if !shown.pending.is_empty() {
        say!("\nDecide with `tabd approve ID` or `tabd reject ID`, or set `status` in the note.");
    }
    for (title, kind) in [
        ("Approved, the daemon runs them", &shown.approved),
        ("Running now", &shown.running),
        (
            "Outcome unknown (tabd stopped during the call: check, then approve again to run it once more)",
            &shown.unknown,
        ),
        (
            "Invalid, not run (fix the note, then set `status` to `approved` again)",
            &shown.invalid,
        ),
    ] {
        if !kind.is_empty() {
            say!("\n{title}:");
            for p in kind {
                say!("{}  {:<10} {:<40} {}", p.id, p.role, p.tool, p.note);
                // Why it did not run, or what tabd knows of how it ended.
                let said = matches!(p.status, NoteStatus::Invalid | NoteStatus::Unknown);
                if let Some(why) = p.outcome.filter(|_| said) {
                    let why = why
                        .strip_prefix(p.status.as_str())
                        .and_then(|w| w.strip_prefix(": "))
                        .unwrap_or(why);
                    say!("        {}", crate::base::text::one_line(why, 300));
                }
            }
        }
    }
    Ok(0)
}

/// `approve` (`approved = true`) or `reject`: in the ledger first, under its lock, then the
/// note; printed only once both are done.
pub fn decide(ws: &Workspace, id: &str, approved: bool) -> Result<u8, CliError> {
    let store = StateStore::new(ws.vault.clone());
    // With [cluster], a request another device asked for is not in this device's ledger: its note
    // (synced with the vault) is decided instead, as a person would in Obsidian, and the device
    // that runs it reads the note.
    if ws.config.cluster.is_some() {
        let known = store
            .try_peek()
            .map(|s| approval_ledger::find_key(&s.approvals, id).is_ok());
        if matches!(known, Ok(false)) {
            if let Some(code) = decide_in_note(ws, id, approved)? {
                return Ok(code);
            }
        }
    }
    let log = ws.run_log()?;
    let faults = crate::base::faults::Faults::from_env(&ws.env);
    let failed =
        |e: crate::base::vault::VaultError| CliError::failed(format!("cannot record the decision: {e}"));
    let held = followup::hold(&ws.vault).map_err(failed)?;
    // What an earlier decision still owes its note (a crash cut it short), before this one.
    let earlier = held.finish(&store, &log, &faults).map_err(failed)?;
    let now = Utc::now();
    let tz = ws.config.timezone;
    let decided = store
        .update(|s| {
            let key = approval_ledger::find_key(&s.approvals, id)?;
            let a = s
                .approvals
                .get_mut(&key)
                .ok_or_else(|| approval_ledger::FindError::None(id.to_string()))?;
            let who = ws
                .roles
                .roles
                .get(&a.role)
                .map_or(a.role.clone(), |r| r.display_name.clone());
            apply(&key, a, approved, (now, tz), (who, DecidedBy::Terminal))
        })
        .map_err(failed)?
        .map_err(|e| CliError::failed(e.to_string()))?;
    faults.abort_at("approval-decided");
    let finished = held.finish(&store, &log, &faults);
    drop(held);
    let (now_or_before, id, a) = match decided {
        Decided::Now { id, a } => ("", id, a),
        Decided::Already { id, a } => (" already", id, a),
    };
    let when = match (approved, crate::doors::daemon::lock_holder(&ws.vault)) {
        (true, Some(_)) => "the daemon runs it within seconds and writes the result into the note",
        (true, None) => "no daemon is running: it runs (once) when `tabd run` starts",
        (false, _) => "nothing will run",
    };
    let status = if approved {
        NoteStatus::Approved
    } else {
        NoteStatus::Rejected
    };
    say!(
        "{status}{now_or_before} {id} ({} for {}): {when}. Note: {}",
        a.tool,
        a.role,
        a.note
    );
    let all_logged = say_unfinished(finished, earlier.unlogged);
    Ok(if all_logged { 0 } else { 1 })
}

/// Decides a pending approval in its note, found by its `id` (or a unique start of it) among the
/// vault's approval notes: its `status` set as a person sets it. `None`: no note has that id.
fn decide_in_note(ws: &Workspace, id: &str, approved: bool) -> Result<Option<u8>, CliError> {
    let dir = VaultPath::parse(&ws.vault.layout().approvals(), false)
        .map_err(|e| CliError::failed(e.to_string()))?;
    let Ok(listing) = ws.vault.list(&dir) else {
        return Ok(None);
    };
    let wanted = id.trim().to_ascii_lowercase();
    let found: Vec<(VaultPath, String, note::Read)> = listing
        .entries
        .into_iter()
        .filter(|e| e.is_file && e.path.file_name().ends_with(".md"))
        .filter_map(|e| {
            let text = ws.vault.read_text(&e.path, 1024 * 1024).ok()?;
            let read = note::read(&text).ok()?;
            read.id
                .as_deref()
                .is_some_and(|i| !wanted.is_empty() && i.to_ascii_lowercase().starts_with(&wanted))
                .then_some((e.path, text, read))
        })
        .collect();
    let (path, text, read) = match found.len() {
        0 => return Ok(None),
        1 => found
            .into_iter()
            .next()
            .ok_or_else(|| CliError::failed("no approval"))?,
        n => {
            return Err(CliError::failed(format!(
                "{id} matches {n} approval notes; give more of it"
            )))
        }
    };
    let status = if approved {
        NoteStatus::Approved
    } else {
        NoteStatus::Rejected
    };
    if read.status != Some(NoteStatus::Pending) {
        let now = read.status.map_or("not pending".to_string(), |s| s.to_string());
        return Err(CliError::failed(format!(
            "{path} is {now}, not pending: only the first decision counts"
        )));
    }
    let text = note::update(&text, status, "")
        .map_err(|e| CliError::failed(format!("cannot decide {path}: {e}")))?;
    ws.vault
        .write_atomic(&path, text.as_bytes())
        .map_err(|e| CliError::failed(format!("cannot decide {path}: {e}")))?;
    say!(
        "{status} {} ({} for {}) in its note, {path}: it was asked for on another device, which runs it \
         (with [cluster] `key`, any device may) once it reads the note",
        read.id.unwrap_or_default(),
        read.tool.unwrap_or_default(),
        read.role.unwrap_or_default()
    );
    Ok(Some(0))
}

/// Says on stderr what finishing the follow-ups left unwritten: a note (the daemon writes it
/// later, from the ledger) or a daily line (no one writes it later). `false`: a daily line is
/// lost, and the command exits 1.
fn say_unfinished(
    finished: Result<followup::Finished, crate::base::vault::VaultError>,
    mut unlogged: Vec<(String, crate::base::vault::VaultError)>,
) -> bool {
    let unwritten = match finished {
        Ok(f) => {
            unlogged.extend(f.unlogged);
            !f.left.is_empty()
        }
        Err(e) => {
            say_err!("warning: cannot finish writing the decision: {e}");
            true
        }
    };
    if unwritten {
        say_err!(
            "(the note could not be updated yet; the decision is recorded, and the daemon writes it into the note)"
        );
    }
    for (id, e) in &unlogged {
        say_err!("warning: the daily note has no line of approval {id}'s decision: {e}");
    }
    unlogged.is_empty()
}
