//! One run of one role, start to finish (docs/spec.md §5, §7, §9):
//!
//! - `env` — what a run needs (`RunEnv`) and what it ends as (`RunResult`);
//! - `session` — what every door opens: id, account, hops, journal, MCP servers, delegator;
//! - `day` — the day a run spends in: its spending told to state as it goes, the daily budgets
//!   checked between two steps;
//! - `prepare` — id, limits, state and the prompt, including what the role's servers and the
//!   approvals ledger add to it (shared with `tabd prompt`);
//! - here — skip at zero tokens when nothing changed, open the role's MCP servers, build its
//!   harness, run the turn (an API loop, or an agent CLI through `agent_turn`);
//! - `finish` — decide, record, log, move notes; crash recovery; `interrupted` — a scheduled
//!   slot whose run did not finish and is not run again, recorded and said once;
//! - `suspend`, `resume` — a run that waits for the person's decision, and its second part;
//! - `refuse` — a note that cannot be read goes to `failed/` with its reason, never to a run.

mod agent_turn;
mod checkpoint;
mod day;
mod delegate;
mod env;
mod finish;
mod interrupted;
mod prepare;
pub mod refuse;
mod resume;
pub mod session;
pub mod suspend;

use std::sync::Arc;

pub use day::RunDay;
pub use delegate::{delegator_for, Lineage, RunDelegator};
pub use env::{NotRebuilt, RunEnv, RunResult, Stop, StopWhy};
pub use finish::{record_crash, record_crash_in_memory, record_stopped, recover, run_lock_path, STOPPED};
pub use interrupted::{record_interrupted, INTERRUPTED};
pub use prepare::{build_prompt, cache_ttl, complete, model_settings, PromptSources};

use crate::base::blocking;
use crate::base::clock::Clock;
use crate::base::cost::Account;
use crate::base::progress::Step;
use crate::base::trigger::Trigger;
use crate::base::vault::Vault;
use crate::capabilities::provider::RetryPolicy;
use crate::gate::harness::Harness;
use crate::records::inbox::Note;
use crate::records::state::StateStore;
use crate::running::prompt::Prompt;
use crate::running::turn::{self, triage, TurnEnd, TurnLimits, TurnOutcome};
use crate::setup::config::Config;
use crate::setup::role::Role;

use prepare::{down_line, last_output, Prepared};
use session::{OpenedBy, Opening, Servers, Session};

/// Runs `role` once for `trigger` with `notes` (already chosen, in order).
pub async fn run_role(env: &RunEnv, role: &Role, trigger: Trigger, notes: Vec<Note>) -> RunResult {
    // What an earlier run could not write (a daily note another process held) comes first, so
    // the day reads in order; the caller holds the run lock, as `recover_role` asks.
    blocking::run(|| finish::recover_role(env, &role.name));
    if trigger.resumes.is_some() {
        return resume::resume(env, role, trigger).await;
    }
    run_in(env, role, trigger, notes, Lineage::default()).await
}

/// The daily-log lines of a run that waits for the person.
fn waiting_lines(turn: &crate::running::turn::Suspension) -> Vec<String> {
    turn.waiting
        .iter()
        .map(|(call, note)| {
            let link = crate::records::runlog::wikilink(note);
            if call == crate::running::turn::CHECKPOINT_CALL {
                format!("**Waiting at a checkpoint:** {link} — approve it to let the run go on, reject it to stop it")
            } else {
                format!("**Waiting for your approval:** {link} — the run goes on with the call's result once you decide")
            }
        })
        .collect()
}

/// A run, possibly delegated from another (`lineage`: the parent's account, deadline and depth).
async fn run_in(
    env: &RunEnv,
    role: &Role,
    trigger: Trigger,
    notes: Vec<Note>,
    lineage: Lineage,
) -> RunResult {
    if env.faults.hit("panic-in-run") {
        panic!("TABD_FAULTS: panic-in-run");
    }
    env.progress.emit(Step::Preparing);
    let (mut prep, prompt) = prepare::prepare(env, role, &trigger, &notes);
    if trigger.skip_if_unchanged && notes.is_empty() {
        let unchanged = prepare::previous_hashes(&prep.state, role).is_some_and(|h| *h == prep.hashes);
        if unchanged {
            return blocking::run(|| finish::skipped(env, role, &trigger, &prep, finish::Skip::Unchanged));
        }
    }
    if let Some(stop) = day_spent_at_start(env, role, &trigger, &prep) {
        return blocking::run(|| finish::skipped(env, role, &trigger, &prep, finish::Skip::DaySpent(stop)));
    }
    // MCP servers start only now: a skipped slot never starts one.
    let servers = role.mcp_servers();
    if !servers.is_empty() {
        env.progress
            .emit(Step::Starting(format!("MCP servers: {}", servers.join(", "))));
    }
    let session = Session::open(
        env,
        Opening {
            opened_by: OpenedBy::Run,
            role,
            trigger: &trigger,
            id: prep.id.clone(),
            started: prep.started,
            hops: prep.hops,
            lineage,
            servers: Servers::All,
            depth_left: None,
        },
    )
    .await;
    // The chain and the deadline as the session has them (a child carries its parent's).
    prep.hops = session.hops;
    prep.limits.run_deadline = session.deadline.saturating_duration_since(env.clock.instant());
    let mcp = session.mcp.clone();
    prep.notes.extend(mcp.down.iter().map(down_line));
    let outcome = turn_of(env, role, (&trigger, &notes), &mut prep, prompt, &session).await;
    mcp.close().await;
    env.progress.emit(Step::Finishing);
    let children = session.take_children();
    let suspended = outcome.suspension.clone().map(|turn| {
        suspended_record(
            env.clock.as_ref(),
            &env.vault,
            role,
            &session,
            &prep,
            turn,
            outcome.calls.len(),
        )
    });
    let day = session.day.as_deref();
    let result = blocking::run(|| finish::finish(env, role, (trigger, notes), prep, outcome, children, day));
    session::end_trace(&session.trace, &result.record);
    session.close(&moved(&result)).await;
    keep_suspended(env, suspended);
    finish::run_end(env, role, &result).await;
    result
}

/// The daily limit that keeps this run from starting, as state has the day now: its door
/// looked before (the daemon's dispatch, `tabd fire`), but another run may have spent the day
/// since. A delegated run's is its delegator's to check; a person may lift the budgets.
fn day_spent_at_start(
    env: &RunEnv,
    role: &Role,
    trigger: &Trigger,
    prep: &Prepared,
) -> Option<crate::records::limits::DailyStop> {
    if trigger.over_budget || trigger.delegation.is_some() {
        return None;
    }
    let today = prep.started.with_timezone(&env.log.tz()).date_naive();
    crate::records::limits::day_stop(role, &env.config.limits, &prep.state, today)
}

/// The run's turn with the model — or its end without one: a required MCP server is down, or
/// the role's output contract cannot be read.
async fn turn_of(
    env: &RunEnv,
    role: &Role,
    (trigger, notes): (&Trigger, &[Note]),
    prep: &mut Prepared,
    mut prompt: Prompt,
    session: &Session,
) -> TurnOutcome {
    match (session.mcp.required_down(), output_check(&env.vault, role)) {
        (Some(d), _) => TurnOutcome::ended(TurnEnd::ServerDown {
            cause: format!("{} (it is required)", d.problem),
            last_output: last_output(d),
        }),
        (None, Err(why)) => TurnOutcome::ended(TurnEnd::OutputInvalid(why.to_string())),
        (None, Ok(output)) => {
            let decided = prepare::complete(&mut prompt, &session.mcp, &prep.state, role);
            // A child answers its parent now: only a run of its own waits for the person.
            let suspend = role.settings.resume() && trigger.delegation.is_none();
            let triage = triage_model(&env.config, role, trigger, notes);
            let outcome = model_turn(env, role, prep, prompt, session, (output, suspend, triage)).await;
            if outcome.requests > 0 && !decided.is_empty() {
                mark_reported(&env.store, role, decided);
            }
            outcome
        }
    }
}

/// The turn through the session's harness, what it did recorded on the outcome, its answer
/// written where the role asks, and the lines of a run that now waits for the person.
async fn model_turn(
    env: &RunEnv,
    role: &Role,
    prep: &mut Prepared,
    prompt: Prompt,
    session: &Session,
    (output, suspend, triage): (Option<Arc<jsonschema::Validator>>, bool, Option<String>),
) -> TurnOutcome {
    let ticket = session.ticket(Some(session.asks()), env.progress.clone());
    let harness = Arc::new(session.harness(ticket));
    let turn = TurnContext {
        account: session.account.clone(),
        day: session
            .day
            .clone()
            .map(|d| d as Arc<dyn crate::gate::harness::Day>),
        trace: session.trace.clone(),
        output,
        suspend,
        triage,
        checkpoint: session.checkpoints(0, suspend),
    };
    let mut outcome = call_model_until_stop(env, role, prep, prompt, harness.clone(), turn, session).await;
    if let Some(line) = write_answer(role, prep, &outcome, &harness) {
        prep.notes.push(line);
    }
    let log = harness.log();
    outcome.calls = log.calls;
    outcome.changes = log.changes;
    prep.notes.extend(log.notes);
    prep.notes
        .extend(outcome.suspension.iter().flat_map(waiting_lines));
    outcome
}

/// Saves a run that waits for the person, after its first part is recorded (a crash in between
/// loses only the going-on: the decision still reaches the role's next run).
fn keep_suspended(env: &RunEnv, suspended: Option<suspend::Suspended>) {
    if let Some(s) = suspended {
        env.faults.abort_at("suspend-unsaved");
        if let Err(e) = suspend::save(&env.vault, &env.key, &s) {
            tracing::error!(
                "run {}: cannot save it to go on after the approval: {e}",
                s.run_id
            );
        }
        env.faults.abort_at("suspend-written");
    }
}

/// What a run that waits for the person keeps to go on later.
fn suspended_record(
    clock: &dyn Clock,
    vault: &Vault,
    role: &Role,
    session: &Session,
    prep: &Prepared,
    turn: crate::running::turn::Suspension,
    calls: usize,
) -> suspend::Suspended {
    let (spent_tokens, spent_usd) = session.account.spent();
    suspend::Suspended {
        run_id: prep.id.clone(),
        role: role.name.clone(),
        started_at: prep.started,
        suspended_at: clock.now(),
        turn,
        spent_tokens,
        spent_usd,
        tool_calls: calls as u32,
        deadline_left_ms: session
            .deadline
            .saturating_duration_since(clock.instant())
            .as_millis() as u64,
        hops: session.hops,
        role_hash: suspend::role_hash(vault, &role.path),
        resuming: false,
        wait: 1,
    }
}

/// The turn, unless tabd is stopped first: then it ends where it waits (a request, a tool call,
/// a CLI); what it did so far is recorded from the harness and the account, and its notes run
/// again.
async fn call_model_until_stop(
    env: &RunEnv,
    role: &Role,
    prep: &Prepared,
    prompt: Prompt,
    harness: Arc<Harness>,
    turn: TurnContext,
    session: &Session,
) -> TurnOutcome {
    let account = turn.account.clone();
    tokio::select! {
        outcome = call_model(env, role, prep, prompt, harness, turn) => outcome,
        () = env.stop.requested_wait() => stopped(&account, session, (0, 0.0)),
    }
}

/// A turn cut short by tabd's stop: what it spent is what its account was charged, less what
/// was recorded elsewhere — by finished children themselves (children cut short with it
/// recorded nothing), and `before`, by the run's first part when this is its second.
pub(super) fn stopped(account: &Account, session: &Session, before: (u64, f64)) -> TurnOutcome {
    let (tokens, usd) = account.spent();
    let (child_tokens, child_usd) = session.children_spent();
    let mut outcome = TurnOutcome::ended(TurnEnd::Stopped);
    outcome.usage.input_tokens = tokens.saturating_sub(child_tokens + before.0);
    outcome.cost_usd = Some(crate::base::cost::round_usd(
        (usd - child_usd - before.1).max(0.0),
    ));
    outcome
}

/// The notes a run moved (from, to): its journal keeps them for `tabd undo --requeue`.
fn moved(result: &RunResult) -> Vec<(String, String)> {
    result
        .record
        .moved
        .iter()
        .map(|m| (m.from.clone(), m.to.clone()))
        .collect()
}

/// `output.path`: a finished run's answer is also written to that note. `Some` (a line for the
/// run's log) when it could not be.
fn write_answer(role: &Role, prep: &Prepared, outcome: &TurnOutcome, harness: &Harness) -> Option<String> {
    let template = role.settings.output.as_ref()?.path.as_ref()?;
    if outcome.end != TurnEnd::Done || outcome.summary.trim().is_empty() {
        return None;
    }
    let date = prep
        .started
        .with_timezone(&role.schedule.tz)
        .format("%Y-%m-%d")
        .to_string();
    let path = template
        .replace("{date}", &date)
        .replace("{role}", &role.name)
        .replace("{run_id}", &prep.id);
    harness
        .write_output(&path, &outcome.summary)
        .err()
        .map(|why| format!("**Answer not written** to {path}: {why}"))
}

/// The role's output contract, compiled (a schema file broken since the role was loaded fails
/// the run before the model is paid).
fn output_check(
    vault: &Vault,
    role: &Role,
) -> Result<Option<Arc<jsonschema::Validator>>, crate::setup::role::SchemaFileError> {
    match role.settings.output.as_ref().and_then(|o| o.schema.as_deref()) {
        None => Ok(None),
        Some(path) => crate::setup::role::output_schema(vault, path).map(|v| Some(Arc::new(v))),
    }
}

/// What the turn gets beyond the role's settings: the account it spends from, the answer's
/// schema, whether a call waiting for approval suspends it, the model that looks first.
struct TurnContext {
    account: Account,
    /// The day it spends in (`RunDay`).
    day: Option<Arc<dyn crate::gate::harness::Day>>,
    trace: crate::capabilities::telemetry::RunSpan,
    output: Option<Arc<jsonschema::Validator>>,
    suspend: bool,
    triage: Option<String>,
    /// `checkpoint_every`: the turn waits at a checkpoint when it may suspend, else ends there.
    checkpoint: Option<crate::running::turn::Checkpoints>,
}

/// The role's `triage_model`, when this run asks it first (docs/spec.md §25): a scheduled run (past
/// the wake gate) with no note to handle, on a provider tabd sends requests to itself. A note
/// the person wrote, a manual fire, a delegated task or a watched change goes straight to the
/// role's model; a CLI agent's turn is a whole session, not one request.
fn triage_model(config: &Config, role: &Role, trigger: &Trigger, notes: &[Note]) -> Option<String> {
    let scheduled = trigger.kind == crate::base::trigger::TriggerKind::Schedule;
    let cli = config.provider.kind == crate::setup::config::ProviderKind::Command;
    // A triaged run's answer is never checked against an output contract: such a role's
    // runs all go to its model.
    let contract = role.settings.output.is_some();
    if !scheduled || !notes.is_empty() || cli || contract || trigger.delegation.is_some() {
        return None;
    }
    role.settings.triage_model.clone()
}

/// The model has been told about these decided approvals: later runs are not.
pub(super) fn mark_reported(store: &StateStore, role: &Role, ids: Vec<String>) {
    let store = store.clone();
    let marked = blocking::run(move || {
        store.update(|s| {
            for id in &ids {
                if let Some(a) = s.approvals.get_mut(id) {
                    a.reported = true;
                }
            }
        })
    });
    if let Err(e) = marked {
        tracing::warn!(
            "role {}: cannot record that approvals were reported: {e}",
            role.name
        );
    }
}

async fn call_model(
    env: &RunEnv,
    role: &Role,
    prep: &Prepared,
    prompt: Prompt,
    harness: Arc<Harness>,
    turn: TurnContext,
) -> TurnOutcome {
    let ms = model_settings(role, &env.config);
    let mut request = prompt.into_request(&ms.model, ms.max_tokens, ms.temperature, ms.thinking_budget);
    if env.config.provider.kind == crate::setup::config::ProviderKind::Command {
        // A CLI spends out of tabd's sight until it answers: it does not start at all when the
        // session (or one above it) has nothing left.
        let spent = turn.account.exhausted().or_else(|| {
            turn.account
                .usd_left()
                .filter(|left| *left <= 0.0)
                .map(|_| "max_cost_usd (nothing left)".to_string())
        });
        if let Some(why) = spent {
            return TurnOutcome::ended(TurnEnd::CapTooLow(why));
        }
        let span = turn.trace.chat(&request);
        let mut outcome = agent_turn::turn(env, role, prep, &request, harness).await;
        // A CLI's own words (its stderr, its error report) may quote its settings: no secret of
        // the environment reaches the record, the daily note or the terminal (docs/spec.md §24).
        if let TurnEnd::Failed(e) = &mut outcome.end {
            *e = e.clone().redacted(&env.launcher.env.redactor());
        }
        let failed = match &outcome.end {
            TurnEnd::Failed(e) => Some(e),
            _ => None,
        };
        span.cli_turn(&outcome.usage, &outcome.model, outcome.cost_usd, failed);
        // A CLI's session is over when it answers: no repair turn, the answer fits or the run fails.
        if let (Some(schema), TurnEnd::Done) = (&turn.output, &outcome.end) {
            match crate::running::turn::answer_json(&outcome.summary, schema) {
                Ok(v) => outcome.output = Some(v),
                Err(why) => outcome.end = TurnEnd::OutputInvalid(why.to_string()),
            }
        }
        // Its spending is known only now, at its end: counted in its day from here on (its calls
        // were steps, checked against what the day had).
        let usd = outcome.cost_usd.unwrap_or(0.0);
        turn.account.charge(outcome.usage.total(), usd);
        if let Some(day) = &turn.day {
            blocking::run(|| day.spent(outcome.usage.total(), usd));
        }
        return outcome;
    }
    let limits = TurnLimits {
        account: turn.account,
        price: env.config.prices.price(&ms.model),
        cache_ttl: prep.ttl,
        deadline: env.clock.instant() + prep.limits.run_deadline,
        output: turn.output,
        suspend: turn.suspend,
        trace: turn.trace,
        day: turn.day,
        checkpoint: turn.checkpoint,
    };
    let retry = RetryPolicy {
        progress: env.progress.clone(),
        ..RetryPolicy::from_config(&env.config.provider)
    };
    let first = match &turn.triage {
        Some(model) => {
            let at_its_price = TurnLimits {
                price: env.config.prices.price(model),
                ..limits.clone()
            };
            let t = triage::first_look(env.provider.as_ref(), &retry, &request, model, &at_its_price).await;
            if t.verdict == triage::Verdict::Nothing {
                return triage::triaged_outcome(&t);
            }
            triage::hand_over(&mut request, &t);
            Some(t)
        }
        None => None,
    };
    let mut outcome = turn::run_turn(env.provider.as_ref(), &retry, request, &limits, harness.as_ref()).await;
    outcome.triage = first;
    outcome
}
