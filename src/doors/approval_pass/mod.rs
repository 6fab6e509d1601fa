//! The door for calls the person approved (docs/spec.md §15): the daemon's pass over
//! `agent/approvals/` acts on every settled note — `approved` runs the call once through the
//! harness (`execute`; the ledger says `executing`, durably, before it starts), `rejected` is
//! closed, an unanswered note past `expires` expires — and `recover` turns a call a crash
//! interrupted into `unknown`. Only the daemon runs approved calls, one pass at a time, so
//! duplicate events, reloads and two quick edits can never run a note twice. A host acts only on
//! the approvals of roles that run on it (`runs_on`).
//!
//! - `decide` — the one decision rule (`tabd approve`/`reject`, a tap on a push's button): the
//!   first decision counts; a tap's decision token checked first;
//! - `execute` — one approved call; `write` — ledger, note and daily-log writes;
//! - `shared` and `cluster` — with `[cluster]` and its key, approvals across devices: a request
//!   another device asked for is taken from the cluster, and the call runs once across devices.

mod cluster;
pub mod decide;
mod execute;
pub mod shared;
mod write;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::base::vault::{Entry, VaultError, VaultPath};
use crate::gate::approvals::note;
use crate::records::state::approval_ledger::{self, Approval, NoteStatus};
use crate::records::state::StateStore;
use crate::running::run::RunEnv;
use crate::setup::config::Config;
use crate::setup::role::RoleSet;

use write::{finish, owed, rewrite, update};

/// Longest note acted on; an approval note is a few KiB. A larger one is marked `invalid`.
const MAX_NOTE_BYTES: u64 = 1024 * 1024;

/// What one pass did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pass {
    pub ran: Vec<String>,
    pub rejected: Vec<String>,
    pub expired: Vec<String>,
    pub refused: Vec<String>,
    /// Decisions whose note and daily line this pass finished writing (a command's, or one a
    /// crash cut short).
    pub finished: Vec<String>,
    /// Of every request's phase as the pass began: a change since the last pass (a decision
    /// from the terminal) means the status and waiting runs should look again.
    pub phases: u64,
    /// When to look again: a note not settled yet, or the next expiry.
    pub next: Option<DateTime<Utc>>,
}

/// A hash of every request's id and phase.
fn fingerprint(ledger: &BTreeMap<String, Approval>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (id, a) in ledger {
        (id, a.phase.as_str()).hash(&mut h);
    }
    h.finish()
}

/// After a crash: every call recorded as `executing` may or may not have happened. Each becomes
/// `unknown`, in the ledger and in its note, with a line telling the person how to retry; and
/// what any decision still owed its note and the daily log is written.
pub fn recover(env: &RunEnv) -> usize {
    let now = env.clock.now();
    let line = format!(
        "**Unknown** ({}): tabd stopped while this call was running, so it may or may not have happened. \
         Check, and set `status` to `approved` again if you want it run (once more).",
        crate::base::text::shown(now, env.log.tz())
    );
    let interrupted = update(&env.store, |s| {
        let mut n = 0;
        for (id, a) in s.approvals.iter_mut() {
            if a.phase == NoteStatus::Executing {
                a.phase = NoteStatus::Unknown;
                a.decided = Some(now);
                a.reported = false;
                a.outcome =
                    Some("unknown: tabd stopped during the call; it may or may not have happened".into());
                let daily = format!(
                    "approval `{id}` ({}) — outcome unknown: tabd stopped during the call",
                    a.tool
                );
                a.followup = Some(owed(
                    &env.roles,
                    a,
                    now,
                    (NoteStatus::Unknown, line.clone()),
                    daily,
                ));
                n += 1;
            }
        }
        n
    });
    let interrupted = interrupted.unwrap_or_else(|e| {
        tracing::error!("approvals: cannot read or update the ledger: {e}");
        0
    });
    if interrupted > 0 {
        env.faults.abort_at("approval-unknown-recorded");
    }
    finish(env);
    interrupted
}

/// One pass over the folder and the ledger (`shared`: with `[cluster]` and its key).
pub async fn pass(env: &RunEnv, shared: Option<&shared::Shared>) -> Pass {
    // What a decision (here, or `tabd approve`/`reject`, or one a crash cut short) still owes its
    // note and the daily log, first: a request that still owes it is not acted on.
    let mut out = Pass {
        finished: finish(env).done,
        ..Pass::default()
    };
    let now = env.clock.now();
    // One read of the ledger serves the whole pass; a change (an expiry, a run claiming its note)
    // is a fresh, locked update, so a stale snapshot can never run a call twice.
    let mut ledger = crate::base::blocking::run(|| env.store.load()).approvals;
    // Another host's roles are that host's to decide (`runs_on`): never touched here.
    ledger.retain(|_, a| runs_here(&env.config, &env.roles, &a.role));
    out.phases = fingerprint(&ledger);
    if let Some(sh) = shared {
        ran_elsewhere(&env.store, sh, &mut ledger, now).await;
    }
    expire(env, &ledger, now, &mut out);
    let settle = chrono::Duration::milliseconds(env.config.inbox.settle_ms as i64);
    let Ok(dir) = VaultPath::parse(&env.vault.layout().approvals(), false) else {
        return out;
    };
    let vault = env.vault.clone();
    let listing = crate::base::blocking::run(|| vault.list(&dir));
    let Ok(listing) = listing else {
        return out;
    };
    for entry in listing.entries.iter().filter(|e| e.is_file) {
        let name = entry.path.file_name();
        // A sync tool's copy of a note is not the note: only the note itself is acted on.
        if !name.ends_with(".md") || note::is_conflict_copy(name) {
            continue;
        }
        // A note being saved, or synced in, is read once it has settled (docs/spec.md §5).
        let modified: Option<DateTime<Utc>> = entry.modified.map(DateTime::<Utc>::from);
        if let Some(at) = modified.map(|m| m + settle).filter(|at| *at > now) {
            out.next = Some(out.next.map_or(at, |n| n.min(at)));
            continue;
        }
        consider(env, (&ledger, shared), entry, &mut out).await;
    }
    let next_expiry = ledger
        .values()
        .filter(|a| a.phase == NoteStatus::Pending)
        .map(|a| a.expires)
        .min();
    if let Some(e) = next_expiry {
        out.next = Some(out.next.map_or(e, |n| n.min(e)));
    }
    out
}

/// Whether `role` runs on this host (a role this host does not know is not its to decide).
fn runs_here(config: &Config, roles: &RoleSet, role: &str) -> bool {
    roles.roles.get(role).is_some_and(|r| {
        r.settings
            .runs_on
            .as_ref()
            .is_none_or(|h| *h == config.daemon.host())
    })
}

/// Requests due to expire here that another device ran already (its execution record says so):
/// their outcome is taken, and they are not expired over the other device's result.
async fn ran_elsewhere(
    store: &StateStore,
    sh: &shared::Shared,
    ledger: &mut BTreeMap<String, Approval>,
    now: DateTime<Utc>,
) {
    let due: Vec<String> = ledger
        .iter()
        .filter(|(_, a)| a.phase == NoteStatus::Pending && a.expires <= now)
        .map(|(id, _)| id.clone())
        .collect();
    for id in due {
        // A start taken back (`approved` again) ran nothing: it expires here like any.
        let ran = sh
            .execution(&id)
            .await
            .map(|r| r.filter(|(e, _)| e.phase != NoteStatus::Approved));
        if let Ok(Some((e, _))) = ran {
            cluster::elsewhere(store, &id, &e);
            ledger.remove(&id);
        }
    }
}

/// Reads one settled note and acts on it.
async fn consider(
    env: &RunEnv,
    (ledger, shared): (&BTreeMap<String, Approval>, Option<&shared::Shared>),
    entry: &Entry,
    out: &mut Pass,
) {
    let vault = env.vault.clone();
    let text = match crate::base::blocking::run(|| vault.read_text(&entry.path, MAX_NOTE_BYTES)) {
        Ok(t) => t,
        Err(VaultError::TooLarge { size, .. }) => {
            let why = format!(
                "the note is {size} bytes, more than the {MAX_NOTE_BYTES}-byte limit of an approval note"
            );
            // Still too large after it is marked: said once for each size, not at every pass.
            return unreadable(env, ledger, entry, (&why, true), out);
        }
        Err(e) => {
            tracing::warn!("approvals: cannot read {}: {e}", entry.path);
            return;
        }
    };
    let read = match note::read(&text) {
        Ok(r) => r,
        Err(why) => {
            let why = format!("tabd cannot read the note's properties (its frontmatter): {why}");
            // Marked, it gets new properties from tabd's record: readable, it is not marked again.
            return unreadable(env, ledger, entry, (&why, false), out);
        }
    };
    act(env, (ledger, shared), &entry.path, &text, read, out).await;
}

/// A note tabd cannot act on as it stands (too large, its frontmatter unreadable) is never
/// skipped without a word, nor left `approved` for ever: its request (found by the note's path,
/// as the id inside cannot be read) is marked `invalid` with the reason — the note and the daily
/// log say so, `tabd approvals` lists it — and its call is not run. `once`: not marked again for
/// the same reason. A note no request of this host names is left alone (it runs nothing).
///
/// A note caught while it is written (a program that empties a file, then fills it) reads as
/// unreadable too, so it is marked only once unchanged for as long as a note a person types must
/// be (`[inbox] typing_settle_s`); until then the pass looks again.
fn unreadable(
    env: &RunEnv,
    ledger: &BTreeMap<String, Approval>,
    entry: &Entry,
    (why, once): (&str, bool),
    out: &mut Pass,
) {
    let path = &entry.path;
    let Some((id, a)) = ledger.iter().find(|(_, a)| a.note == path.as_str()) else {
        tracing::debug!("approvals: {path} skipped, no request of this host's names it: {why}");
        return;
    };
    let typing = chrono::Duration::from_std(env.config.inbox.settle().1).unwrap_or_default();
    let quiet_at = entry.modified.map(|m| DateTime::<Utc>::from(m) + typing);
    if let Some(at) = quiet_at.filter(|at| *at > env.clock.now()) {
        out.next = Some(out.next.map_or(at, |n| n.min(at)));
        return;
    }
    let said =
        once && a.phase == NoteStatus::Invalid && a.outcome.as_deref() == Some(&format!("invalid: {why}"));
    if a.phase.may_run() && a.followup.is_none() && !said {
        execute::invalid(env, id, a, why);
        out.refused.push(id.clone());
    }
}

/// Pending requests past their `expires` become `expired`.
fn expire(env: &RunEnv, ledger: &BTreeMap<String, Approval>, now: DateTime<Utc>, out: &mut Pass) {
    let due = |a: &Approval| a.phase == NoteStatus::Pending && a.expires <= now;
    // Every pass looks; only a pass that finds one writes (and fsyncs) the ledger.
    if !ledger.values().any(due) {
        return;
    }
    let line = format!(
        "**Expired** ({}): nobody decided in time, so nothing was run. Approving it now does nothing.",
        crate::base::text::shown(now, env.log.tz())
    );
    let expired: Vec<String> = update(&env.store, |s| {
        let mut v = Vec::new();
        for (id, a) in s.approvals.iter_mut() {
            if due(a) && a.followup.is_none() {
                a.phase = NoteStatus::Expired;
                a.decided = Some(now);
                a.reported = false;
                a.outcome = Some(crate::gate::approvals::checkpoint::expired(a));
                let daily = format!("approval `{id}` ({}) expired unanswered", a.tool);
                a.followup = Some(owed(
                    &env.roles,
                    a,
                    now,
                    (NoteStatus::Expired, line.clone()),
                    daily,
                ));
                v.push(id.clone());
            }
        }
        v
    })
    .unwrap_or_default();
    if !expired.is_empty() {
        finish(env);
    }
    out.expired.extend(expired);
}

/// What a settled note with a ledger record comes to: the approval state machine, pure.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    /// Nothing to do (still pending, decided already, or expired this very pass).
    Leave,
    /// `rejected` while it could still run: close it.
    Reject,
    /// `approved`, never run, same tool: run it with these arguments.
    Run(serde_json::Value),
    /// A checkpoint approved: the run goes on (nothing runs here).
    GoOn,
    /// `approved`, but it cannot run again: the note says why; its status becomes `status`.
    Refuse { why: String, status: NoteStatus },
    /// `approved`, but the note is not runnable as it stands: `invalid`, with the reason.
    Invalid(String),
    /// `approved`, but asked for longer ago than tabd keeps its marks of started calls: `expired`.
    TooOld(String),
}

/// `within`: how long after it was asked for a request may still run (`approval_ledger::runs_within`).
fn verdict(a: &Approval, read: note::Read, now: DateTime<Utc>, within: std::time::Duration) -> Verdict {
    // `tabd approve` decided it: it runs, whatever the note says since (a decision printed on a
    // terminal is final).
    let status = match a.phase {
        NoteStatus::Approved => Some(NoteStatus::Approved),
        _ => read.status,
    };
    let expired_now = a.phase == NoteStatus::Pending && a.expires <= now;
    // Approved from a phone, the person saw the arguments as asked for: a note edited since is
    // not what they approved (docs/spec.md §27).
    let edited_since_the_tap = a.phase == NoteStatus::Approved
        && a.decided_by == Some(approval_ledger::DecidedBy::Phone)
        && read.args.as_ref().is_ok_and(|args| {
            approval_ledger::args_hash(read.tool.as_deref().unwrap_or(""), args) != a.args_hash
        });
    const APPROVED: Option<NoteStatus> = Some(NoteStatus::Approved);
    match status {
        Some(NoteStatus::Rejected) if a.phase.is_open() && !expired_now => Verdict::Reject,
        APPROVED if !a.phase.may_run() => {
            let why = match a.phase {
                NoteStatus::Done | NoteStatus::Failed | NoteStatus::Executing => format!(
                    "it already ran ({}); an approval runs at most once. Ask the role again for a new request",
                    a.phase
                ),
                NoteStatus::Expired => "it expired before it was approved".to_string(),
                _ => format!("it was {}", a.phase),
            };
            // A call cut off while it ran may or may not have happened: the note says so.
            let status = match a.phase {
                NoteStatus::Executing => NoteStatus::Unknown,
                other => other,
            };
            Verdict::Refuse { why, status }
        }
        // Expired this very pass (the snapshot predates it): `expire` wrote the note.
        APPROVED if expired_now => Verdict::Leave,
        APPROVED if approval_ledger::too_old(a, now, within) => Verdict::TooOld(format!(
            "it was asked for on {}, more than {} days ago: tabd keeps its record that a call started only that \
             long, so it no longer runs one this old",
            a.created.format("%Y-%m-%d"),
            within.as_secs() / 86_400
        )),
        APPROVED if read.tool.as_deref() != Some(a.tool.as_str()) => Verdict::Invalid(format!(
            "its `tool` was changed to `{}`, but a note runs only the call it asked for (`{}`); ask the role \
             for the other call, or set `tool` back",
            read.tool.as_deref().unwrap_or(""),
            a.tool
        )),
        // A checkpoint has no arguments: approved, its run goes on.
        APPROVED if a.tool == crate::gate::approvals::checkpoint::TOOL => Verdict::GoOn,
        APPROVED if edited_since_the_tap => Verdict::Invalid(
            "its arguments were edited after you approved it from your phone, which showed them as they \
             were: set `status` to `approved` here to run them as they stand"
                .to_string(),
        ),
        APPROVED => match read.args {
            Ok(args) => Verdict::Run(args),
            Err(why) => Verdict::Invalid(why.to_string()),
        },
        _ => Verdict::Leave,
    }
}

/// Acts on one settled note.
async fn act(
    env: &RunEnv,
    (ledger, shared): (&BTreeMap<String, Approval>, Option<&shared::Shared>),
    path: &VaultPath,
    text: &str,
    read: note::Read,
    out: &mut Pass,
) {
    let status = read.status;
    let mut record = read
        .id
        .as_ref()
        .and_then(|id| ledger.get(id).cloned().map(|a| (id.clone(), a)));
    if let (None, Some(sh), Some(id), Some(NoteStatus::Approved)) = (&record, shared, &read.id, status) {
        record = taken(env, sh, id, path).await.map(|a| (id.clone(), a));
    }
    let record = record.filter(|(_, a)| a.note == path.as_str());
    let decided = record
        .as_ref()
        .is_some_and(|(_, a)| a.phase == NoteStatus::Approved);
    let asked = matches!(status, Some(NoteStatus::Approved | NoteStatus::Rejected));
    if !asked && !decided {
        return;
    }
    // A decision still being written (a crash cut it short, its note could not be written yet)
    // is finished first: the note may still say what it said before.
    if record.as_ref().is_some_and(|(_, a)| a.followup.is_some()) {
        return;
    }
    let Some((id, a)) = record else {
        // Notes of a role another host runs (or this host does not know) are left alone; with
        // [cluster], so is one another device asked for: its record is there, and it runs it
        // (docs/spec.md §23) — calling it invalid here would undo the person's decision.
        let ours = read
            .role
            .as_deref()
            .is_some_and(|r| runs_here(&env.config, &env.roles, r))
            && env.config.cluster.is_none();
        if status == Some(NoteStatus::Approved) && ours {
            let line = "**Not run:** tabd has no record of asking for this call (was the note copied or \
                        written by hand?). Only notes tabd wrote can be approved.";
            if let Ok(t) = note::update(text, NoteStatus::Invalid, line) {
                let written = crate::base::blocking::run(|| env.vault.write_atomic(path, t.as_bytes()));
                env.side.check("an approval note (invalid)", written);
            }
            out.refused.push(path.to_string());
        }
        return;
    };
    let within =
        approval_ledger::runs_within(env.config.journal.keep_days, env.config.approvals.expire_after);
    match verdict(&a, read, env.clock.now(), within) {
        Verdict::Leave => {}
        Verdict::Reject => reject(env, &id, out),
        Verdict::Run(args) => execute::run(env, (&id, &a), args, shared, out).await,
        Verdict::GoOn => {
            let said = crate::gate::approvals::checkpoint::instruction(text);
            execute::go_on(env, (&id, &a), &said);
            out.ran.push(id);
        }
        // A note another device ran, still `approved` here (its result not synced in yet).
        Verdict::Refuse { .. } if ran_on_another(shared, &id).await => {}
        Verdict::Refuse { why, status } => {
            let line = format!(
                "**Not run** ({}): {why}.",
                crate::base::text::shown(env.clock.now(), env.log.tz())
            );
            rewrite(&env.vault, &a.note, status, &line);
            out.refused.push(id);
        }
        Verdict::Invalid(why) => {
            execute::invalid(env, &id, &a, &why);
            out.refused.push(id);
        }
        Verdict::TooOld(why) => {
            execute::too_old(env, &id, &a, &why);
            out.refused.push(id);
        }
    }
}

/// The request `id` of the approved note at `path`, which another device asked for, from the
/// cluster (checked: signed with the cluster's key, for this note, of a role that runs here),
/// taken into this device's ledger as pending; `None` when it is not there (the asking device
/// has not handed it over: it runs it) or fails its check (said once; nothing runs).
async fn taken(env: &RunEnv, sh: &shared::Shared, id: &str, path: &VaultPath) -> Option<Approval> {
    let a = match sh.request(id).await {
        Ok(Some(a)) => a,
        Ok(None) => {
            if sh.first_time(&format!("unshared {id}")) {
                tracing::debug!("approvals: {path} is another device's request, not handed over: left to it");
            }
            return None;
        }
        Err(e) => {
            sh.report(&env.log, env.clock.as_ref(), &format!("approval {id}"), e);
            return None;
        }
    };
    if a.note != path.as_str() {
        sh.refuse(
            &env.log,
            env.clock.as_ref(),
            &format!("the cluster's request {id} is for {}, not for {path}", a.note),
        );
        return None;
    }
    if !runs_here(&env.config, &env.roles, &a.role) {
        return None;
    }
    shared::take_request(&env.store, id, &a).ok()
}

/// Whether another device ran the call `id` (its execution record says so): its outcome is
/// taken here, and nothing more is done.
async fn ran_on_another(shared: Option<&shared::Shared>, id: &str) -> bool {
    let Some(sh) = shared else {
        return false;
    };
    match sh.execution(id).await {
        Ok(Some((e, _))) if e.device != sh.device() => {
            tracing::debug!(
                "approval {id}: device {} ran its call ({}); nothing more for it here",
                e.device,
                e.phase.as_str()
            );
            true
        }
        _ => false,
    }
}

/// `rejected`: closed, unless the fresh record says it can no longer be (it ran, it expired this
/// very pass, or `tabd approve` decided it first).
fn reject(env: &RunEnv, id: &str, out: &mut Pass) {
    let now = env.clock.now();
    let line = format!(
        "**Rejected** ({}): nothing was run.",
        crate::base::text::shown(now, env.log.tz())
    );
    let done = update(&env.store, |s| match s.approvals.get_mut(id) {
        Some(r)
            if r.phase.is_open()
                && r.followup.is_none()
                && !(r.phase == NoteStatus::Pending && r.expires <= now) =>
        {
            r.phase = NoteStatus::Rejected;
            r.decided = Some(now);
            r.decided_by = Some(approval_ledger::DecidedBy::Note);
            r.reported = false;
            r.outcome = Some(crate::gate::approvals::checkpoint::rejected(r));
            let daily = match r.is_checkpoint() {
                true => format!("checkpoint `{id}` of run `{}`: stopped by you", r.run_id),
                false => format!("approval `{id}` ({}) rejected — nothing ran", r.tool),
            };
            r.followup = Some(owed(&env.roles, r, now, (NoteStatus::Rejected, line), daily));
            true
        }
        _ => false,
    });
    if done == Ok(true) {
        finish(env);
        out.rejected.push(id.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::calls::Risk;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn record(phase: NoteStatus) -> Approval {
        Approval {
            role: "ops".into(),
            tool: "test/post".into(),
            exposed: "test__post".into(),
            risk: Risk::Network,
            note: "agent/approvals/n.md".into(),
            args_hash: String::new(),
            run_id: "r".into(),
            created: t("2026-11-22T09:00:00Z"),
            expires: t("2026-11-24T09:00:00Z"),
            phase,
            decided: None,
            outcome: None,
            reported: false,
            executions: 0,
            notified: false,
            outcome_told: None,
            also_for: Vec::new(),
            hops: 0,
            followup: None,
            gist: None,
            bases: Vec::new(),
            decided_by: None,
            kind: Default::default(),
            instruction: None,
        }
    }

    fn read(status: &str, tool: &str, args: Result<serde_json::Value, note::NoteError>) -> note::Read {
        note::Read {
            id: Some("abc123".into()),
            tool: Some(tool.into()),
            role: Some("ops".into()),
            status: NoteStatus::parse(status),
            args,
        }
    }

    const NOW: &str = "2026-11-23T09:00:00Z";
    const WITHIN: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

    #[test]
    fn approved_runs_once_with_the_arguments_as_they_stand() {
        let args = json!({"channel": "C1"});
        for phase in [
            NoteStatus::Pending,
            NoteStatus::Invalid,
            NoteStatus::Unknown,
            NoteStatus::Blocked,
        ] {
            assert_eq!(
                verdict(
                    &record(phase),
                    read("approved", "test/post", Ok(args.clone())),
                    t(NOW),
                    WITHIN
                ),
                Verdict::Run(args.clone()),
                "{phase:?} may run"
            );
        }
        for (phase, shown) in [
            (NoteStatus::Done, NoteStatus::Done),
            (NoteStatus::Failed, NoteStatus::Failed),
            (NoteStatus::Executing, NoteStatus::Unknown),
            (NoteStatus::Rejected, NoteStatus::Rejected),
            (NoteStatus::Expired, NoteStatus::Expired),
        ] {
            match verdict(
                &record(phase),
                read("approved", "test/post", Ok(args.clone())),
                t(NOW),
                WITHIN,
            ) {
                Verdict::Refuse { status, .. } => assert_eq!(status, shown, "{phase:?}"),
                other => panic!("{phase:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_edited_tool_or_broken_arguments_are_invalid_and_rejections_close() {
        let v = verdict(
            &record(NoteStatus::Pending),
            read("approved", "test/delete_all", Ok(json!({}))),
            t(NOW),
            WITHIN,
        );
        assert!(matches!(v, Verdict::Invalid(why) if why.contains("runs only the call it asked for")));
        let v = verdict(
            &record(NoteStatus::Pending),
            read("approved", "test/post", Err(note::NoteError::NoJsonBlock)),
            t(NOW),
            WITHIN,
        );
        assert_eq!(v, Verdict::Invalid(note::NoteError::NoJsonBlock.to_string()));
        assert_eq!(
            verdict(
                &record(NoteStatus::Pending),
                read("rejected", "test/post", Ok(json!({}))),
                t(NOW),
                WITHIN
            ),
            Verdict::Reject
        );
        assert_eq!(
            verdict(
                &record(NoteStatus::Done),
                read("rejected", "test/post", Ok(json!({}))),
                t(NOW),
                WITHIN
            ),
            Verdict::Leave
        );
        assert_eq!(
            verdict(
                &record(NoteStatus::Pending),
                read("pending", "test/post", Ok(json!({}))),
                t(NOW),
                WITHIN
            ),
            Verdict::Leave
        );
    }

    #[test]
    fn approved_from_the_terminal_runs_whatever_the_note_says_since() {
        let args = json!({"channel": "C1"});
        for status in ["approved", "rejected", "pending"] {
            assert_eq!(
                verdict(
                    &record(NoteStatus::Approved),
                    read(status, "test/post", Ok(args.clone())),
                    t(NOW),
                    WITHIN
                ),
                Verdict::Run(args.clone()),
                "{status}"
            );
        }
    }

    /// Approved from a phone, whose push showed the arguments as asked for: a note edited since
    /// does not run (it is `invalid`, and the person may approve it in the note as it stands);
    /// approved from the terminal, the note's arguments run as they stand, as before.
    #[test]
    fn approved_from_a_phone_runs_only_the_arguments_the_push_showed() {
        let asked = json!({"channel": "C1"});
        let mut a = record(NoteStatus::Approved);
        a.args_hash = approval_ledger::args_hash("test/post", &asked);
        a.decided_by = Some(approval_ledger::DecidedBy::Phone);
        assert_eq!(
            verdict(
                &a,
                read("pending", "test/post", Ok(asked.clone())),
                t(NOW),
                WITHIN
            ),
            Verdict::Run(asked.clone())
        );
        let edited = json!({"channel": "C2"});
        let v = verdict(
            &a,
            read("pending", "test/post", Ok(edited.clone())),
            t(NOW),
            WITHIN,
        );
        assert!(
            matches!(&v, Verdict::Invalid(why) if why.contains("edited after you approved it from your phone")),
            "{v:?}"
        );
        a.decided_by = Some(approval_ledger::DecidedBy::Terminal);
        assert_eq!(
            verdict(
                &a,
                read("pending", "test/post", Ok(edited.clone())),
                t(NOW),
                WITHIN
            ),
            Verdict::Run(edited)
        );
    }

    /// A request asked for longer ago than tabd keeps the marks of started calls is not run
    /// (had it run, its mark may be forgotten); rejecting it still closes it.
    #[test]
    fn a_request_older_than_its_marks_never_runs() {
        let old = "2026-12-23T09:00:01Z";
        for phase in [NoteStatus::Approved, NoteStatus::Unknown, NoteStatus::Invalid] {
            let v = verdict(
                &record(phase),
                read("approved", "test/post", Ok(json!({}))),
                t(old),
                WITHIN,
            );
            assert!(
                matches!(&v, Verdict::TooOld(why) if why.contains("2026-11-22") && why.contains("30 days")),
                "{phase:?}: {v:?}"
            );
        }
        assert_eq!(
            verdict(
                &record(NoteStatus::Unknown),
                read("rejected", "test/post", Ok(json!({}))),
                t(old),
                WITHIN
            ),
            Verdict::Reject
        );
    }

    #[test]
    fn a_note_past_its_expiry_never_runs_or_is_rejected_by_a_stale_read() {
        let late = "2026-11-25T09:00:00Z";
        let r = record(NoteStatus::Pending);
        assert_eq!(
            verdict(&r, read("approved", "test/post", Ok(json!({}))), t(late), WITHIN),
            Verdict::Leave
        );
        assert_eq!(
            verdict(&r, read("rejected", "test/post", Ok(json!({}))), t(late), WITHIN),
            Verdict::Leave
        );
    }
}
