//! One approved call, run through the harness like any other call (the role's lists, `deny`,
//! the schema check, hops and the sandbox all apply; only `ask` is satisfied), at most once.

use serde_json::Value;

use super::shared::Shared;
use super::write::{finish, owed, rewrite, update};
use super::{cluster, Pass};
use crate::gate::harness::Caller;
use crate::records::state::approval_ledger::{self, Approval, NoteStatus};
use crate::running::run::session::{OpenedBy, Opening, Servers, Session};
use crate::running::run::RunEnv;

/// Longest result kept in the note (the whole result went to no model: this is for the person).
const MAX_RESULT_IN_NOTE: usize = 16 * 1024;
/// Longest outcome line kept for the role's next prompt.
const MAX_OUTCOME: usize = 600;

/// Marks the request `invalid` (the person may fix the note and approve again).
pub(super) fn invalid(env: &RunEnv, id: &str, a: &Approval, why: &str) {
    let now = env.clock.now();
    let line = format!(
        "**Invalid** ({}): {why}. Nothing was run; fix it and set `status` to `approved` again.",
        crate::base::text::shown(now, env.log.tz())
    );
    let daily = format!("approval `{id}` ({}) not run: {why}", a.tool);
    // Only a request that could still run: one `tabd reject` closed meanwhile stays closed.
    let marked = update(&env.store, |s| match s.approvals.get_mut(id) {
        Some(r) if r.phase.may_run() && r.followup.is_none() => {
            r.phase = NoteStatus::Invalid;
            r.decided = Some(now);
            r.outcome = Some(format!("invalid: {why}"));
            r.followup = Some(owed(&env.roles, r, now, (NoteStatus::Invalid, line), daily));
            true
        }
        _ => false,
    });
    if marked == Ok(true) {
        finish(env);
    }
}

/// Checks the approved call as it now stands and runs it once — once across devices too, with
/// `shared` (`cluster::take`: the approval's claim fences the call, the execution record says
/// which device ran it).
pub(super) async fn run(
    env: &RunEnv,
    (id, a): (&str, &Approval),
    args: Value,
    shared: Option<&Shared>,
    out: &mut Pass,
) {
    if !args.is_object() {
        return invalid(
            env,
            id,
            a,
            &format!("the arguments must be a JSON object, not {args}"),
        );
    }
    let Some(role) = env.roles.roles.get(&a.role) else {
        return invalid(
            env,
            id,
            a,
            &format!("the role {} no longer exists or has errors", a.role),
        );
    };
    let Ok(held) = cluster::take_or_later(env.clock.as_ref(), shared, id, &mut out.next).await else {
        return;
    };
    let env = &cluster::fenced(env, held.as_ref());
    let session = open_session(env, role, a).await;
    // One call, no asking (the person has answered), the chain the asking run was in.
    let mut ticket = session.ticket(None, Default::default());
    ticket.max_tool_calls = 1;
    let harness = session.harness(ticket);
    if let Err(why) = check_call(&session, &harness, a, &args) {
        session.close(&[]).await;
        cluster::withdraw(shared, id, held, None).await;
        return invalid(env, id, a, &why.to_string());
    }
    let held = match (shared, held) {
        (Some(sh), Some(h)) => match cluster::begin(env, sh, (id, a), h).await {
            Some(h) => Some(h),
            None => return session.close(&[]).await,
        },
        _ => None,
    };
    // The person edited their note since the change was asked for, or wrote one where the call
    // writes: the change they saw is not what would happen, and it would write over their words.
    // Looked at once no other device has run the call (`begin`): the change that device made is
    // not an edit of the person's, and its outcome is taken as it is.
    let theirs = harness.persons_notes(&a.exposed, &args);
    if let Some(why) = crate::gate::approvals::person::outdated(&env.vault, &a.bases, &theirs) {
        session.close(&[]).await;
        cluster::withdraw(shared, id, held, Some(NoteStatus::Failed)).await;
        return close_unrun(env, id, a, NoteStatus::Failed, &why);
    }
    match claim(env, id) {
        Claim::Run => {}
        Claim::No => {
            cluster::withdraw(shared, id, held, None).await;
            return session.close(&[]).await;
        }
        Claim::StartedBefore => {
            session.close(&[]).await;
            cluster::withdraw(shared, id, held, Some(NoteStatus::Unknown)).await;
            finish(env);
            return out.refused.push(id.to_string());
        }
    }
    let (called, undo) = call(env, &session, &harness, a, &args).await;
    let (phase, text, sandbox) = outcome(called);
    record(env, id, a, (phase, &text, sandbox.as_deref()), undo.as_deref());
    if let (Some(sh), Some(h)) = (shared, held) {
        let line = crate::base::text::one_line(&text, MAX_OUTCOME);
        cluster::end(sh, id, h, (phase, format!("{}: {line}", phase.as_str()))).await;
    }
    out.ran.push(id.to_string());
}

/// Makes the claimed call, once, its note saying `executing` meanwhile; closes its session.
/// Returns what the call came to, and the session's id when what it changed can be undone like
/// a run's (its note says how).
async fn call(
    env: &RunEnv,
    session: &Session,
    harness: &crate::gate::harness::Harness,
    a: &Approval,
    args: &Value,
) -> (
    Result<crate::gate::harness::Called, crate::capabilities::tools::FatalToolError>,
    Option<crate::base::run_id::RunId>,
) {
    env.faults.abort_at("approval-claimed");
    rewrite(&env.vault, &a.note, NoteStatus::Executing, "");
    env.faults.abort_at("approval-note-executing");
    let called = harness.call(&a.exposed, args, Caller::Approved).await;
    env.faults.abort_at("approval-call-returned");
    // The children of an approved `delegate` have no parent section to sit in: each gets its own.
    for child in session.take_children() {
        env.side.check(
            "the daily note (a delegated run's section)",
            env.log.append_daily(&child.daily_log, &child.delegated_section),
        );
    }
    session.close(&[]).await;
    let undo = matches!(&called, Ok(c) if !c.result.changes.is_empty()).then(|| session.id.clone());
    (called, undo)
}

/// The call as it now stands: the server it needs is up, the role still has the tool, the
/// arguments fit its schema.
fn check_call(
    session: &Session,
    harness: &crate::gate::harness::Harness,
    a: &Approval,
    args: &Value,
) -> Result<(), CannotRun> {
    if let Some(down) = session.mcp.down.first() {
        return Err(CannotRun::ServerDown(down.problem.clone()));
    }
    match harness.key_of(&a.exposed) {
        Some(key) if key == a.tool => harness.check(&a.exposed, args).map_err(CannotRun::Refused),
        Some(_) | None => Err(CannotRun::NoTool(a.tool.clone())),
    }
}

/// Why an approved call cannot run as it now stands (the sentence its note and the ledger get).
#[derive(Debug, thiserror::Error)]
enum CannotRun {
    /// The server the call needs could not be used.
    #[error("{0}, so nothing was sent")]
    ServerDown(crate::capabilities::mcp::client::ServerDown),
    #[error("the role no longer has the tool {0}")]
    NoTool(String),
    /// The harness's check of the tool and its arguments.
    #[error(transparent)]
    Refused(crate::gate::harness::NotCallable),
}

/// What the call came to: its phase, its text, and the sandbox's refusal if that stopped it.
fn outcome(
    called: Result<crate::gate::harness::Called, crate::capabilities::tools::FatalToolError>,
) -> (NoteStatus, String, Option<String>) {
    match called {
        Ok(c) if c.result.ok => (NoteStatus::Done, c.result.text, None),
        Ok(c) if c.result.unknown => (NoteStatus::Unknown, c.result.text, None),
        Ok(c) if c.result.sandbox.is_some() => (NoteStatus::Blocked, c.result.text, c.result.sandbox),
        Ok(c) => (NoteStatus::Failed, c.result.text, None),
        Err(fatal) => (NoteStatus::Failed, fatal.0, None),
    }
}

/// The session of an approved call: its own id and journal (undoable like a run), the server
/// the call needs and no other, the chain the asking run was in (an approved `trigger_role` is
/// hop + 1), and children that may not delegate further (the asking run's depth is not kept, so
/// the safe bound applies).
async fn open_session(env: &RunEnv, role: &crate::setup::role::Role, a: &Approval) -> Session {
    let started = env.clock.now();
    let trigger = crate::base::trigger::Trigger::manual();
    let servers = match a.tool.split_once('/') {
        Some((server, _)) => Servers::Only(server),
        None => Servers::None,
    };
    Session::open(
        env,
        Opening {
            opened_by: OpenedBy::Approved,
            role,
            trigger: &trigger,
            id: crate::base::run_id::RunId::new(&role.name, started),
            started,
            hops: a.hops,
            lineage: Default::default(),
            servers,
            depth_left: Some(1),
        },
    )
    .await
}

/// What claiming a call came to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Claim {
    /// Marked as started, and `executing` in the ledger: send it.
    Run,
    /// Its request can no longer run (decided meanwhile, or its record cannot be written).
    No,
    /// Its start is marked already: the ledger is an older copy (restored from a backup, put back
    /// by a sync tool) than the one that recorded it running. Not run again; now `unknown`.
    StartedBefore,
}

/// At most once: the call's start is marked outside the vault (O_EXCL, synced: a restored ledger
/// cannot undo it), then the ledger says `executing` (fsynced), both before anything is sent. A
/// mark that is there already means this start happened before, whatever the ledger says.
fn claim(env: &RunEnv, id: &str) -> Claim {
    let now = env.clock.now();
    let mut made: Option<String> = None;
    let claimed = update(&env.store, |s| -> Result<Claim, std::io::Error> {
        let Some(r) = s
            .approvals
            .get_mut(id)
            .filter(|r| r.phase.may_run() && r.followup.is_none())
        else {
            return Ok(Claim::No);
        };
        let n = r.executions + 1;
        let mark = approval_ledger::started_mark(id, r, n);
        let fresh = env.key.mark(approval_ledger::STARTED, &mark, true)?;
        r.executions = n;
        if fresh {
            made = Some(mark);
            env.faults.abort_at("approval-marked");
            // Approved anywhere but the ledger (`tabd approve`, a tap): the note decided it.
            if r.phase != NoteStatus::Approved {
                r.decided_by = Some(approval_ledger::DecidedBy::Note);
            }
            r.phase = NoteStatus::Executing;
            return Ok(Claim::Run);
        }
        r.phase = NoteStatus::Unknown;
        r.decided = Some(now);
        r.reported = false;
        r.outcome = Some(
            "unknown: already run once — started before, but tabd's state has no record of it (it was put \
             back from an older copy, or tabd stopped right after starting it); not run again"
                .into(),
        );
        let line = format!(
            "**Not run again** ({}): tabd had already started this call (its mark outside the vault says \
             so), but its state has no record of it running: the state (`.tabd/state.json`) was put back \
             from an older copy (a backup, a sync tool), or tabd stopped right after starting the call. So \
             it may or may not have happened. Check, and set `status` to `approved` again if you want it \
             run (once more).",
            crate::base::text::shown(now, env.log.tz())
        );
        let daily = format!(
            "approval `{id}` ({}) not run again: it was started before, but tabd's state has no record of it \
             — outcome unknown",
            r.tool
        );
        r.followup = Some(owed(&env.roles, r, now, (NoteStatus::Unknown, line), daily));
        Ok(Claim::StartedBefore)
    });
    match claimed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::error!(
                "approvals: cannot mark outside the vault that {id} starts ({e}), so it does not run yet: \
                 without the mark a restored copy of tabd's state could run it twice"
            );
            Claim::No
        }
        Err(e) => {
            // Not recorded: it does not run now, and the mark made for it would say it started.
            if let Some(mark) = made {
                env.key.unmark(approval_ledger::STARTED, &mark);
            }
            tracing::error!("approvals: cannot record `executing` for {id}, so it does not run yet: {e}");
            Claim::No
        }
    }
}

/// Closes a request asked for longer ago than tabd keeps the marks of started calls
/// (`approval_ledger::runs_within`): `expired`, never run — had it run, its mark may be gone.
pub(super) fn too_old(env: &RunEnv, id: &str, a: &Approval, why: &str) {
    close_unrun(env, id, a, NoteStatus::Expired, why);
}

/// Closes a request as `phase` without running it, saying `why` in its note and the daily log
/// (the role's next run is told, and may ask again).
fn close_unrun(env: &RunEnv, id: &str, a: &Approval, phase: NoteStatus, why: &str) {
    let now = env.clock.now();
    let line = format!(
        "**Not run** ({}): {why}. Ask the role again for a new request.",
        crate::base::text::shown(now, env.log.tz())
    );
    let daily = format!("approval `{id}` ({}) not run: {why}", a.tool);
    let closed = update(&env.store, |s| match s.approvals.get_mut(id) {
        Some(r) if r.phase.may_run() && r.followup.is_none() => {
            r.phase = phase;
            r.decided = Some(now);
            r.reported = false;
            r.outcome = Some(format!("{}: {why}", phase.as_str()));
            r.followup = Some(owed(&env.roles, r, now, (phase, line), daily));
            true
        }
        _ => false,
    });
    if closed == Ok(true) {
        finish(env);
    }
}

/// A checkpoint the person let go on: `done`, their instruction (`said`) kept apart from its
/// outcome, for the run's second part; nothing runs.
pub(super) fn go_on(env: &RunEnv, (id, a): (&str, &Approval), said: &str) {
    let now = env.clock.now();
    let with = if said.is_empty() {
        String::new()
    } else {
        " with your instruction".to_string()
    };
    let line = format!(
        "**Approved** ({}): the run goes on{with}.",
        crate::base::text::shown(now, env.log.tz())
    );
    let daily = format!("checkpoint `{id}` of run `{}`: it goes on{with}", a.run_id);
    let decided = update(&env.store, |s| match s.approvals.get_mut(id) {
        Some(r) if r.phase.may_run() && r.followup.is_none() => {
            r.phase = NoteStatus::Done;
            r.decided = Some(now);
            r.reported = false;
            r.executions += 1;
            r.outcome = Some(crate::gate::approvals::checkpoint::continued(said).into());
            r.instruction = Some(said.to_string()).filter(|s| !s.is_empty());
            r.followup = Some(owed(&env.roles, r, now, (NoteStatus::Done, line), daily));
            true
        }
        _ => false,
    });
    if decided == Ok(true) {
        finish(env);
    }
}

/// The outcome: in the ledger, in the note (with the result and, when it changed files, how to
/// undo it), in the daily log.
fn record(
    env: &RunEnv,
    id: &str,
    a: &Approval,
    (phase, text, sandbox): (NoteStatus, &str, Option<&str>),
    undo: Option<&str>,
) {
    let end = env.clock.now();
    let outcome = format!(
        "{}: {}",
        phase.as_str(),
        crate::base::text::one_line(text, MAX_OUTCOME)
    );
    let shown = crate::capabilities::mcp::content::cap(text.to_string(), MAX_RESULT_IN_NOTE);
    // A fence longer than any run of backticks in the result, so the result cannot close it.
    let mut fence = "```".to_string();
    while shown.contains(&fence) {
        fence.push('`');
    }
    let retry = match (phase, sandbox) {
        (NoteStatus::Unknown, _) => {
            "\n\nNo answer came back, so the call **may or may not have happened**. Check, and \
             set `status` to `approved` again if you want it run (once more)."
                .to_string()
        }
        (NoteStatus::Blocked, Some(sentence)) => format!(
            "\n\n**Stopped by the sandbox**: {sentence}. If the server should be allowed that, add the line \
             to the config (tabd reloads it), then set `status` to `approved` again to run the call."
        ),
        _ => String::new(),
    };
    let undo_line = undo.map_or(String::new(), |run| format!("\nUndo: `tabd undo {run}`\n"));
    let section = format!(
        "## Result\nRan {} ({}), approved by you: **{}**.{retry}\n\n{fence}\n{shown}\n{fence}\n{undo_line}",
        crate::base::text::shown(end, env.log.tz()),
        a.tool,
        phase.as_str(),
    );
    let daily = format!(
        "approval `{id}` ({}) approved → {} — {}{}",
        a.tool,
        phase.as_str(),
        crate::records::runlog::wikilink(&a.note),
        undo.map_or(String::new(), |run| format!(" · undo: `tabd undo {run}`"))
    );
    // The outcome and all the note will say, in the ledger first: a crash before the note is
    // written is finished from there (the note never stays `executing` over a call that ran).
    let owes = owed(&env.roles, a, end, (phase, section), daily);
    let recorded = update(&env.store, |s| {
        if let Some(r) = s.approvals.get_mut(id) {
            r.phase = phase;
            r.decided = Some(end);
            r.reported = false;
            r.outcome = Some(outcome.clone());
            r.followup = Some(owes.clone());
        }
    });
    if let Err(e) = recorded {
        // The ledger still says `executing` (a restart makes it `unknown`); the person is told now.
        tracing::error!(
            "approvals: cannot record the outcome of {id} ({}): {e}",
            phase.as_str()
        );
        rewrite(&env.vault, &a.note, owes.status, &owes.line);
        return;
    }
    env.faults.abort_at("approval-recorded");
    finish(env);
}
