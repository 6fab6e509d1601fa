//! The second part of a run that waited for the person (docs/spec.md §22; the record: `suspend`):
//! the same id, session and journal file, the conversation as it was with each waiting call's
//! real result, what was left of the run's ceilings, deadline and tool calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::prepare::Prepared;
use super::session::{OpenedBy, Opening, Servers, Session};
use super::suspend::{self, Suspended};
use super::{blocking, finish, RunEnv, RunResult};
use crate::base::run_id::RunId;
use crate::base::trigger::Trigger;
use crate::base::vault::Vault;
use crate::capabilities::provider::RetryPolicy;
use crate::records::limits::RoleLimits;
use crate::running::turn::{self, TurnLimits};
use crate::setup::role::Role;

/// Runs the second part of the suspended run `trigger.resumes`.
pub(super) async fn resume(env: &RunEnv, role: &Role, trigger: Trigger) -> RunResult {
    let id = trigger.resumes.clone().unwrap_or_default();
    let (mut s, state, decided) = match may_go_on(env, role, &id) {
        Ok(go) => go,
        Err(why) => return super::record_crash_in_memory(role, &format!("run {id} does not go on: {why}")),
    };
    let started = env.clock.now();
    let (session, harness, limits) = open(env, role, &trigger, &s, started).await;
    let ttl = limits.cache_ttl;
    let retry = RetryPolicy {
        progress: env.progress.clone(),
        ..RetryPolicy::from_config(&env.config.provider)
    };
    let request = suspend::continued(&s, &decided);
    let mut outcome = match suspend::stopped_at_checkpoint(&decided) {
        // The person stopped it at a checkpoint: no request more.
        Some(why) => turn::TurnOutcome::ended(turn::TurnEnd::StoppedByYou(why)),
        None => tokio::select! {
            o = turn::run_turn(env.provider.as_ref(), &retry, request, &limits, harness.as_ref()) => o,
            // What the first part spent is in its own record: only this part's spending is new.
            () = env.stop.requested_wait() => super::stopped(&session.account, &session, (s.spent_tokens, s.spent_usd)),
        },
    };
    let log = harness.log();
    outcome.calls = log.calls;
    outcome.changes = log.changes;
    if outcome.requests > 0 {
        // The model has had the decisions: the role's next run is not told them again.
        super::mark_reported(&env.store, role, approval_ids(&state, &s));
    }
    let mut prep = Prepared {
        id: s.run_id.clone(),
        started,
        state,
        hashes: BTreeMap::new(),
        limits: RoleLimits::resolve(role, &env.config.limits),
        ttl,
        hops: s.hops,
        notes: vec![resumed_line(&env.vault, role, &s, started)],
    };
    let again = outcome.suspension.clone();
    if let Some(t) = &again {
        prep.notes.extend(super::waiting_lines(t));
    }
    let spent = session.account.spent();
    let used = s.tool_calls + outcome.calls.len() as u32;
    let deadline_left = limits.deadline.saturating_duration_since(env.clock.instant());
    let children = session.take_children();
    let day = session.day.as_deref();
    let result =
        blocking::run(|| finish::finish(env, role, (trigger, Vec::new()), prep, outcome, children, day));
    session.close(&[]).await;
    match again {
        // Waits again (another call needs the person): the record carries on.
        Some(turn) => {
            s.turn = turn;
            (s.spent_tokens, s.spent_usd) = spent;
            s.tool_calls = used;
            s.deadline_left_ms = deadline_left.as_millis() as u64;
            s.suspended_at = env.clock.now();
            s.resuming = false;
            s.wait += 1;
            if let Err(e) = suspend::save(&env.vault, &env.key, &s) {
                tracing::error!("run {}: cannot save it to go on later: {e}", s.run_id);
            }
        }
        None => suspend::remove(&env.vault, &s.run_id),
    }
    finish::run_end(env, role, &result).await;
    result
}

/// A suspended run cleared to go on: its record, the state it was checked in, and the person's
/// decisions (`suspend::decisions`).
type GoingOn = (
    Suspended,
    crate::records::state::State,
    Vec<(String, String, bool)>,
);

/// The record of the run `id` waits for and the person's decisions, marked as going on; or why
/// its second part does not start.
fn may_go_on(env: &RunEnv, role: &Role, id: &str) -> Result<GoingOn, NotGoingOn> {
    // Only a record this machine signed, for this role, waiting for its own approvals, whose
    // second part has not started (the daemon sets the others aside before they get here).
    let loaded = RunId::parse(id)
        .map_err(suspend::NotResumable::from)
        .and_then(|id| suspend::load(&env.vault, &env.key, &id));
    let mut s = match loaded? {
        s if s.role == role.name => s,
        s => return Err(NotGoingOn::OtherRole(s.role)),
    };
    let state = env.store.load();
    if let Some(why) = suspend::refusal(&state, &s, env.clock.now()) {
        return Err(NotGoingOn::Refused(why));
    }
    let Some(decided) = suspend::decisions(&state, &s) else {
        return Err(NotGoingOn::StillWaits);
    };
    // Durably, in and outside the vault, before anything is sent: a crash from here on, or an
    // old copy of the record, never starts this part twice.
    mark(env, &mut s)?;
    Ok((s, state, decided))
}

/// Why the second part of a suspended run does not start (the end of its record says so).
#[derive(Debug, thiserror::Error)]
enum NotGoingOn {
    #[error("its record names another role ({0})")]
    OtherRole(String),
    #[error(transparent)]
    NotResumable(#[from] suspend::NotResumable),
    /// Too old, or its requests are gone (`suspend::refusal`'s sentence).
    #[error("{0}")]
    Refused(String),
    #[error("it still waits for the person")]
    StillWaits,
}

/// Marks the second part as started (`suspend::mark_resuming`); the crash tests' point
/// `resume-marked` aborts right after.
fn mark(env: &RunEnv, s: &mut Suspended) -> Result<(), suspend::NotResumable> {
    suspend::mark_resuming(&env.vault, &env.key, s)?;
    env.faults.abort_at("resume-marked");
    Ok(())
}

/// The second part's session (same id and journal), its harness with the tool calls left, and
/// its limits: what is left of every ceiling and of the deadline.
async fn open(
    env: &RunEnv,
    role: &Role,
    trigger: &Trigger,
    s: &Suspended,
    started: chrono::DateTime<chrono::Utc>,
) -> (Session, Arc<crate::gate::harness::Harness>, TurnLimits) {
    let session = Session::open(
        env,
        Opening {
            opened_by: OpenedBy::Run,
            role,
            trigger,
            id: s.run_id.clone(),
            started,
            hops: s.hops,
            lineage: Default::default(),
            servers: Servers::All,
            depth_left: None,
        },
    )
    .await;
    // What the first part spent counts: the second gets what is left of every ceiling.
    session.account.charge(s.spent_tokens, s.spent_usd);
    let mut ticket = session.ticket(Some(session.asks()), env.progress.clone());
    ticket.max_tool_calls = ticket.max_tool_calls.saturating_sub(s.tool_calls);
    let harness = Arc::new(session.harness(ticket));
    let limits = TurnLimits {
        account: session.account.clone(),
        price: env.config.prices.price(&s.turn.request.model),
        cache_ttl: s.turn.request.cache_ttl.unwrap_or_default(),
        deadline: env.clock.instant() + std::time::Duration::from_millis(s.deadline_left_ms),
        output: None,
        suspend: true,
        trace: session.trace.clone(),
        day: session
            .day
            .clone()
            .map(|d| d as Arc<dyn crate::gate::harness::Day>),
        checkpoint: session.checkpoints(s.tool_calls, true),
    };
    (session, harness, limits)
}

/// The approvals the run waited for, by id.
fn approval_ids(state: &crate::records::state::State, s: &Suspended) -> Vec<String> {
    s.turn
        .waiting
        .iter()
        .filter_map(|(_, note)| suspend::approval_of(state, note).map(|(id, _)| id.clone()))
        .collect()
}

/// The second part's first line: how long it waited, for which calls, and whether the role
/// file changed in between.
fn resumed_line(vault: &Vault, role: &Role, s: &Suspended, now: chrono::DateTime<chrono::Utc>) -> String {
    let notes: Vec<String> = s
        .turn
        .waiting
        .iter()
        .map(|(_, n)| crate::records::runlog::wikilink(n))
        .collect();
    let mut line = format!(
        "**Resumed:** run `{}` waited {} for your decision on {}; it goes on with the result",
        s.run_id,
        suspend::waited(s.suspended_at, now),
        notes.join(", ")
    );
    if suspend::role_hash(vault, &role.path) != s.role_hash {
        line.push_str(
            ". The role file changed meanwhile: the conversation goes on as it was asked, and what the \
             role may do is checked against the file as it is now",
        );
    }
    line
}
