//! The end of a run: decide what it was, plan where its notes go, record it, log it, move them.
//!
//! Order is what makes "nothing lost, nothing twice" hold across a crash at any point:
//! 1. **commit** — one state update records everything (usage, attempts, last run, hashes) and
//!    the run as *pending*: its JSONL record, its daily-log text and its note moves;
//! 2. **publish** — JSONL record, daily log, note moves;
//! 3. the pending entry is cleared.
//!
//! A crash before 1 leaves nothing: the notes run again. A crash after 1 is finished by
//! `recover` at the next start, from the pending entry: the record is written if it is not
//! there yet, the moves are made, so a record's `moved` list is always true and a note whose run
//! is recorded is never run again.

use std::collections::BTreeMap;

use chrono::Utc;

use super::env::{RunEnv, RunResult};
use super::prepare::{model_settings, Prepared};
use crate::base::calls::ToolCallRecord;
use crate::base::fence::Fence;
use crate::base::trigger::Trigger;
use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::capabilities::provider::FailureClass;
use crate::records::access::AccessPolicy;
use crate::records::context;
use crate::records::inbox::{self, Note};
use crate::records::limits::RoleLimits;
use crate::records::runlog::{
    HumanRun, Moved, NoteTruncated, Outcome, RunLog, RunRecord, TriggerRecord, UsageRecord,
};
use crate::records::state::{Attempts, LastRun, PendingRun, State, StateStore};
use crate::running::turn::{TurnEnd, TurnOutcome};
use crate::setup::config::Config;
use crate::setup::role::Role;

/// What the run ended as, in the terms of the logs and of docs/spec.md §5.
struct Decided {
    outcome: Outcome,
    error: Option<String>,
    failure: Option<(FailureClass, String)>,
    /// What an outage's daily line is keyed on (one line per cause per day): the error without
    /// details that change from one attempt to the next, such as a server's last output.
    cause: Option<String>,
}

/// What a run cut short by tabd's own stop is recorded as. A stop, not a restart: tabd cannot
/// tell whether it will be started again (systemd's restart, a person's Ctrl-C and `systemctl
/// stop` all look the same from inside), so it says only what it knows.
pub const STOPPED: &str = "stopped when tabd stopped; runs again when tabd next starts";
/// The same for a scheduled run: its slot is owed, and whether it runs again is decided then
/// (its role's `catch_up`, `stale_after`; at most once).
const STOPPED_SLOT: &str =
    "stopped when tabd stopped; its slot is owed: run again once when tabd next starts, or said why not";
/// What a run the person's pause cut short is recorded as: nothing of a paused role runs, so its
/// notes wait for the resume and a slot it ran is skipped, never owed (`tabd pause`).
pub const STOPPED_PAUSED: &str =
    "stopped because you paused its role (`tabd pause`); its notes wait in the inbox for `tabd resume`, a scheduled slot it ran is skipped";

/// What the turn's `end` makes of the run; `scheduled`: it ran a slot (a slot stopped by tabd's
/// stop is owed); `paused`: a stop was the person's pause.
fn decide(end: &TurnEnd, scheduled: bool, paused: bool) -> Decided {
    let failed = |class: FailureClass, msg: String| Decided {
        outcome: Outcome::Failed,
        error: Some(msg.clone()),
        cause: Some(msg.clone()),
        failure: Some((class, msg)),
    };
    match end {
        TurnEnd::Done => Decided {
            outcome: Outcome::Ok,
            error: None,
            failure: None,
            cause: None,
        },
        TurnEnd::Limit(why) => Decided {
            outcome: Outcome::Limit,
            error: Some(format!("limit reached: {why}")),
            failure: None,
            cause: None,
        },
        TurnEnd::Failed(e) => failed(e.class(), e.to_string()),
        TurnEnd::ContextExceeded => failed(
            FailureClass::RunFailure,
            "the conversation outgrew the model's context window; trim the role's context files".into(),
        ),
        TurnEnd::CapTooLow(why) => failed(
            FailureClass::RunFailure,
            format!(
                "limit reached before the first request: {why}; raise max_cost_usd or trim the role's context files"
            ),
        ),
        TurnEnd::OutputInvalid(why) => failed(
            FailureClass::RunFailure,
            format!("the final answer does not satisfy the role's output schema: {why}"),
        ),
        TurnEnd::ToolFatal(why) => failed(
            FailureClass::RunFailure,
            format!("the vault cannot be written: {why}"),
        ),
        TurnEnd::ServerDown { cause, last_output } => Decided {
            cause: Some(cause.clone()),
            ..failed(FailureClass::Unavailable, format!("{cause}{last_output}"))
        },
        TurnEnd::Crashed(why) => failed(
            FailureClass::RunFailure,
            format!("tabd failed while running this role ({why}); this is a bug in tabd — please report it"),
        ),
        TurnEnd::Stopped if paused => failed(FailureClass::Stopped, STOPPED_PAUSED.into()),
        TurnEnd::Stopped if scheduled => failed(FailureClass::Stopped, STOPPED_SLOT.into()),
        TurnEnd::Stopped => failed(FailureClass::Stopped, STOPPED.into()),
        // The person's own stop: the run ends, said; nothing failed (its notes were handled
        // when it first waited).
        TurnEnd::StoppedByYou(why) => Decided {
            outcome: Outcome::Limit,
            error: Some(format!("stopped by you: {why}")),
            failure: None,
            cause: None,
        },
        // A delegated child at its checkpoint: it stops there, and its parent is told why.
        TurnEnd::AtCheckpoint(why) => Decided {
            outcome: Outcome::Limit,
            error: Some(why.clone()),
            failure: None,
            cause: None,
        },
        // The run did what it could until a call needed the person: its notes are handled; it
        // goes on (a second part, same run id) once the call is decided.
        TurnEnd::Suspended => Decided {
            outcome: Outcome::Ok,
            error: None,
            failure: None,
            cause: None,
        },
    }
}

/// The run's end, unless the device lost what it held meanwhile (docs/spec.md §23): then it ends as
/// stopped — no note moved, no attempt counted, another device runs it — and says why.
fn fenced(fence: &Fence, outcome: TurnOutcome, scheduled: bool, paused: bool) -> (TurnOutcome, Decided) {
    let Err(lost) = fence.check() else {
        let decided = decide(&outcome.end, scheduled, paused);
        return (outcome, decided);
    };
    tracing::warn!("{lost}");
    let outcome = TurnOutcome {
        end: TurnEnd::Stopped,
        ..outcome
    };
    let why = lost.to_string();
    let decided = Decided {
        outcome: Outcome::Failed,
        error: Some(why.clone()),
        cause: Some(why.clone()),
        failure: Some((FailureClass::Stopped, why)),
    };
    (outcome, decided)
}

/// Where each note goes, and the attempt counts behind it.
#[derive(Default)]
struct Plan {
    moves: Vec<(VaultPath, VaultPath)>,
    /// (note, failed attempts so far, its inode)
    attempts: Vec<(String, u32, u64)>,
}

fn plan(
    vault: &Vault,
    config: &Config,
    notes: &[Note],
    failure: Option<FailureClass>,
    state: &State,
    role: &str,
) -> Plan {
    let max_attempts = config.inbox.max_attempts.max(1);
    let previous = state.roles.get(role).map(|r| &r.attempts);
    let mut p = Plan::default();
    for note in notes {
        let sub = match failure {
            None => Some(crate::base::vault::layout::PROCESSED),
            Some(FailureClass::RunFailure) => {
                // A count belongs to the note it was counted for: a new note under an old name starts at 0.
                let before = previous
                    .and_then(|a| a.get(note.path.as_str()))
                    .filter(|a| a.ino.is_none_or(|ino| ino == note.ino))
                    .map_or(0, |a| a.count);
                let count = before + 1;
                p.attempts.push((note.path.as_str().to_string(), count, note.ino));
                (count >= max_attempts).then_some(crate::base::vault::layout::FAILED)
            }
            Some(FailureClass::Outage | FailureClass::Unavailable | FailureClass::Stopped) => None,
        };
        let Some(sub) = sub else { continue };
        let taken: Vec<VaultPath> = p.moves.iter().map(|(_, d)| d.clone()).collect();
        match inbox::destination(vault, &note.path, sub, &taken) {
            Ok(dest) => p.moves.push((note.path.clone(), dest)),
            Err(e) => tracing::warn!("cannot plan a move for {}: {e}", note.path),
        }
    }
    p
}

/// The run's hashes with its own changes absorbed: a role's own writes to its context (and its
/// `remember`) are not "changes since the last run" for it, so they never wake it again.
fn hashes_after(
    vault: &Vault,
    role: &Role,
    before: &BTreeMap<String, String>,
    outcome: &TurnOutcome,
) -> BTreeMap<String, String> {
    let mut hashes = before.clone();
    if outcome.changes.is_empty() {
        return hashes;
    }
    let changed: Vec<&str> = outcome.changes.iter().map(|c| c.path.as_str()).collect();
    let memories: Vec<String> = crate::running::prompt::memory_files(vault.layout(), role)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    // Only a change that may be in the context needs the context resolved again (a new file in
    // a context folder); most runs write elsewhere, and a file already hashed is just reloaded.
    let may_join = changed
        .iter()
        .any(|p| !before.contains_key(*p) && !memories.iter().any(|m| m == p) && may_be_context(role, p));
    let now_in_context: Vec<VaultPath> = if may_join {
        let resolved = context::resolve(vault, &AccessPolicy::for_role(role), &role.context);
        resolved.paths().cloned().collect()
    } else {
        Vec::new()
    };
    for path in changed {
        let known = before.contains_key(path)
            || memories.iter().any(|m| m == path)
            || now_in_context.iter().any(|p| p.as_str() == path);
        let loaded = VaultPath::parse(path, false)
            .ok()
            .filter(|_| known)
            .and_then(|p| context::load(vault, &p).ok());
        match loaded {
            Some(l) => {
                hashes.insert(path.to_string(), l.hash);
            }
            None => {
                hashes.remove(path);
            }
        }
    }
    hashes
}

/// Whether a context entry of `role` could name `path` (without listing the vault).
fn may_be_context(role: &Role, path: &str) -> bool {
    use crate::setup::role::ContextEntry;
    role.context.iter().any(|e| match e {
        ContextEntry::File(f) => f == path,
        ContextEntry::Folder(d) => path.starts_with(d.as_str()),
        ContextEntry::Glob(g) => {
            crate::records::access::glob(g).is_ok_and(|g| g.compile_matcher().is_match(path))
        }
        ContextEntry::Wikilink(name) => {
            let stem = path.rsplit('/').next().unwrap_or(path).trim_end_matches(".md");
            stem.eq_ignore_ascii_case(name.trim().trim_end_matches(".md"))
                || path
                    .to_lowercase()
                    .ends_with(&format!("{}.md", name.to_lowercase()))
        }
    })
}

/// The JSONL record of a run; `moved`, `ended_at` and `cost_usd` are filled in by the caller.
fn record_of(
    role: &Role,
    prep: &Prepared,
    trigger: &Trigger,
    notes: &[Note],
    outcome: &TurnOutcome,
    decided: &Decided,
) -> RunRecord {
    RunRecord {
        run_id: prep.id.to_string(),
        role: role.name.clone(),
        trigger: TriggerRecord::of(
            trigger,
            notes.iter().map(|n| n.path.as_str().to_string()).collect(),
        ),
        started_at: prep.started,
        ended_at: prep.started,
        outcome: decided.outcome,
        error: decided.error.clone(),
        model: outcome.model.clone(),
        requests: outcome.requests,
        usage: UsageRecord {
            tokens: outcome.usage,
            cost_usd: 0.0,
        },
        tool_calls: outcome.calls.clone(),
        moved: Vec::new(),
        children: Vec::new(),
        ended: None,
        notes_truncated: Vec::new(),
        triage: None,
    }
}

/// The run's notes larger than one prompt, with how much of each the model read through
/// `read_file` beyond the prompt (none when the model was never asked).
fn notes_truncated(
    vault: &Vault,
    config: &Config,
    notes: &[Note],
    outcome: &TurnOutcome,
) -> Vec<NoteTruncated> {
    if outcome.requests == 0 {
        return Vec::new();
    }
    let mut out = crate::running::prompt::larger_than_prompt(notes, config.context.max_file_bytes);
    for t in &mut out {
        t.read_bytes = read_in_pages(vault, t, &outcome.calls);
    }
    out
}

/// Bytes of the note `t` that the run's `read_file` calls returned beyond its start in the
/// prompt, each byte once. Read from the note as it is now (it moves only after the record).
fn read_in_pages(vault: &Vault, t: &NoteTruncated, calls: &[ToolCallRecord]) -> u64 {
    let reads: Vec<&serde_json::Value> = calls
        .iter()
        .filter(|c| c.ok && c.server.is_none() && c.name == "read_file")
        .map(|c| &c.input)
        .collect();
    if reads.is_empty() {
        return 0;
    }
    let Ok(path) = VaultPath::parse(&t.path, false) else {
        return 0;
    };
    let Ok(text) = vault.read_text(&path, inbox::MAX_NOTE_BYTES) else {
        return 0;
    };
    let mut spans: Vec<std::ops::Range<usize>> = reads
        .into_iter()
        .filter_map(|input| crate::capabilities::tools::span_read(&path, &text, input))
        .collect();
    spans.push(0..t.included_bytes as usize);
    spans.sort_by_key(|r| r.start);
    let mut covered = 0usize;
    let mut reach = 0usize;
    for r in spans {
        let start = r.start.max(reach);
        if r.end > start {
            covered += r.end - start;
            reach = r.end;
        }
    }
    (covered as u64).saturating_sub(t.included_bytes)
}

fn moved_of(moves: &[(VaultPath, VaultPath)]) -> Vec<Moved> {
    moves
        .iter()
        .map(|(f, t)| Moved {
            from: f.as_str().to_string(),
            to: t.as_str().to_string(),
        })
        .collect()
}

fn human_of(role: &Role, outcome: &TurnOutcome, plan: &Plan) -> HumanRun {
    let mut human = HumanRun {
        display_name: role.display_name.clone(),
        thinking: outcome.thinking.clone(),
        summary: outcome.summary.clone(),
        changes: outcome.changes.clone(),
        ..HumanRun::default()
    };
    for (from, to) in &plan.moves {
        if to.parent().file_name() == crate::base::vault::layout::FAILED {
            let count = plan
                .attempts
                .iter()
                .find(|(n, _, _)| n == from.as_str())
                .map_or(0, |a| a.1);
            human.failed_notes.push((to.as_str().to_string(), count));
        }
    }
    for (note, count, _) in &plan.attempts {
        if !plan.moves.iter().any(|(f, _)| f.as_str() == note) {
            human.retry_notes.push((note.clone(), *count));
        }
    }
    human
}

/// What the run cost: as an agent CLI reported it, else from the model's price (0 if unknown).
fn cost_of(config: &Config, role: &Role, outcome: &TurnOutcome, ttl: crate::base::cost::CacheTtl) -> f64 {
    let model = if outcome.model.is_empty() {
        model_settings(role, config).model
    } else {
        outcome.model.clone()
    };
    outcome
        .cost_usd
        .unwrap_or_else(|| config.prices.cost(&model, &outcome.usage, ttl).unwrap_or(0.0))
}

/// The first look of the triage model in the record: a run it ended reads `triaged`; one the
/// role's model went on with counts the first look's tokens too. Returns its dollars to add.
fn add_triage(
    record: &mut RunRecord,
    t: &crate::running::turn::triage::Triage,
    class: Option<FailureClass>,
) -> f64 {
    let (ended_triaged, first) = triage_of(t);
    record.triage = Some(first);
    if ended_triaged {
        if class.is_none() {
            record.ended = Some(crate::records::runlog::TRIAGED.into());
        }
        return 0.0;
    }
    record.usage.tokens.add(t.usage);
    record.requests += 1;
    t.cost_usd
}

/// The first look of the triage model in the record, and whether the run ended there.
fn triage_of(t: &crate::running::turn::triage::Triage) -> (bool, crate::records::runlog::TriageRecord) {
    use crate::running::turn::triage::Verdict;
    let (verdict, wanted, error) = match &t.verdict {
        Verdict::Nothing => ("nothing", Vec::new(), None),
        Verdict::Escalated(calls) => ("escalated", calls.clone(), None),
        Verdict::Unusable(why) => ("failed", Vec::new(), Some(why.clone())),
    };
    let record = crate::records::runlog::TriageRecord {
        model: t.model.clone(),
        verdict,
        wanted,
        error,
        usage: UsageRecord {
            tokens: t.usage,
            cost_usd: crate::base::cost::round_usd(t.cost_usd),
        },
    };
    (t.verdict == Verdict::Nothing, record)
}

/// The runs a run delegated to: their ids in its record, their sections and spending in its log.
fn add_children(record: &mut RunRecord, human: &mut HumanRun, children: &[RunResult]) {
    record.children = children.iter().map(|c| c.record.run_id.clone()).collect();
    human.children = children.iter().map(|c| c.delegated_section.clone()).collect();
    human.children_spent = children.iter().fold((0, 0.0), |(t, d), c| {
        (t + c.record.usage.tokens.total(), d + c.record.usage.cost_usd)
    });
}

/// The record's `ended`: why a failed run was nobody's fault, or that an ok one waits.
fn ended_of(class: Option<FailureClass>, end: &TurnEnd) -> Option<String> {
    match class {
        Some(FailureClass::Outage | FailureClass::Unavailable) => Some("paused".into()),
        Some(FailureClass::Stopped) => Some("stopped".into()),
        // The first part of a run that waits for the person: `ok` so far, and not over.
        None if *end == TurnEnd::Suspended => Some(crate::records::runlog::WAITING.into()),
        // The person stopped it at a checkpoint (`checkpoint_every`).
        None if matches!(end, TurnEnd::StoppedByYou(_)) => Some("stopped by you".into()),
        _ => None,
    }
}

/// Finishes a run that called the model (or tried to); `day`: the day it spent in, `None` for
/// a run that had none (recorded after a crash or a cancelled task: what it spent, it told).
pub(super) fn finish(
    env: &RunEnv,
    role: &Role,
    (trigger, notes): (Trigger, Vec<Note>),
    prep: Prepared,
    outcome: TurnOutcome,
    children: Vec<RunResult>,
    day: Option<&super::day::RunDay>,
) -> RunResult {
    let ended = env.clock.now();
    let paused = env.stop.why() == Some(super::env::StopWhy::Paused);
    let (outcome, decided) = fenced(&env.fence, outcome, slot_of(&trigger).is_some(), paused);
    let class = decided.failure.as_ref().map(|(c, _)| *c);
    let plan = plan(&env.vault, &env.config, &notes, class, &prep.state, &role.name);
    let mut cost = cost_of(&env.config, role, &outcome, prep.ttl);
    let mut record = record_of(role, &prep, &trigger, &notes, &outcome, &decided);
    record.ended_at = ended;
    record.ended = ended_of(class, &outcome.end);
    if let Some(t) = &outcome.triage {
        cost += add_triage(&mut record, t, class);
    }
    record.usage.cost_usd = crate::base::cost::round_usd(cost);
    record.moved = moved_of(&plan.moves);
    record.notes_truncated = notes_truncated(&env.vault, &env.config, &notes, &outcome);
    let mut human = human_of(role, &outcome, &plan);
    human.notes.extend(prep.notes.iter().cloned());
    add_children(&mut record, &mut human, &children);
    let delegated = trigger.delegation.is_some();
    // A delegated run answers a task: it leaves the role's own change tracking alone.
    let hashes = match class {
        None if !delegated => Some(hashes_after(&env.vault, role, &prep.hashes, &outcome)),
        _ => None,
    };
    let (daily_section, delegated_section) = if delegated {
        (String::new(), env.log.render_delegated(&record, &human))
    } else {
        (env.log.render_run(&record, &human), String::new())
    };
    let day_spent = super::day::spent_at_end(day, &children);
    let result = |failure, daily_log| RunResult {
        record: record.clone(),
        summary: outcome.summary.clone(),
        failure,
        daily_log,
        changes: outcome.changes.clone(),
        skipped: None,
        output: outcome.output.clone(),
        delegated_section: delegated_section.clone(),
        day_spent: day_spent.clone(),
    };
    let daily_path = env.log.daily_path(prep.started);
    let commit = Commit {
        role: &role.name,
        display_name: &role.display_name,
        record: &record,
        plan: &plan,
        hashes,
        class,
        error: decided.error.clone(),
        cause: decided.cause.clone(),
        daily_section,
        trigger_kind: trigger.kind.as_str(),
        slot: slot_of(&trigger),
        paused,
        notes: notes.len(),
        day: super::day::unrecorded(day, &record, class, &role.name),
    };
    let pending = match commit.save(&env.store, &env.log) {
        Ok(p) => p,
        Err(e) => {
            unrecorded(env, &role.name, &record, &e);
            return result(Some((FailureClass::RunFailure, e.to_string())), daily_path);
        }
    };
    publish(env, &role.name, &pending, Publish::Fresh);
    result(decided.failure, daily_path)
}

/// The person's run_end hooks (docs/spec.md §28), given the run's record once it is written — the
/// record as its JSONL line has it. Each is waited for up to its `timeout_s`; one that fails is
/// a line in the daily note, and the run's outcome stands whatever they do.
pub async fn run_end(env: &RunEnv, role: &Role, result: &RunResult) {
    let hooks = super::session::hooks_for(env, role, &result.record.run_id);
    if hooks.is_empty() {
        return;
    }
    let record = match serde_json::to_value(&result.record) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(
                "role {}: cannot give the run's record to its run_end hooks: {e}",
                role.name
            );
            return;
        }
    };
    for line in hooks.run_end(&record).await {
        let at = env.clock.now();
        let written = crate::base::blocking::run(|| env.log.write_line(at, &role.display_name, &line));
        env.side
            .check("the daily note (a run_end hook's failure)", written);
    }
}

/// A run state could not record (`why`): its spend is never forgotten — its record is written all
/// the same, and the next save (or start) counts it from there (`records::spent`); its notes stay
/// in the inbox and run again.
fn unrecorded(env: &RunEnv, role: &str, record: &RunRecord, why: &VaultError) {
    env.side.check(
        "the run record (of a run tabd could not record in its state)",
        env.log.write_record(record),
    );
    tracing::error!(
        "cannot record the run of {role} in state: {why}; its notes stay in the inbox and run again, and \
         what it spent is counted from its run record"
    );
}

/// The scheduled slot a run of `trigger` is for (`None`: not a scheduled run).
fn slot_of(trigger: &Trigger) -> Option<chrono::DateTime<Utc>> {
    match trigger.kind {
        crate::base::trigger::TriggerKind::Schedule => trigger.scheduled_for,
        _ => None,
    }
}

/// Everything one run writes into state, in one update.
struct Commit<'a> {
    role: &'a str,
    display_name: &'a str,
    record: &'a RunRecord,
    plan: &'a Plan,
    /// Hashes to keep for the next run's change list (successful runs only).
    hashes: Option<BTreeMap<String, String>>,
    class: Option<FailureClass>,
    error: Option<String>,
    /// What an outage's one daily line per cause is keyed on.
    cause: Option<String>,
    daily_section: String,
    trigger_kind: &'a str,
    /// The scheduled slot the run was for: its end clears the slot's start (`StartedSlot`).
    slot: Option<chrono::DateTime<Utc>>,
    /// The person's pause stopped it: a slot it ran is settled, not owed.
    paused: bool,
    notes: usize,
    /// What of the run's spending today's counters do not have yet, and the roles whose day it
    /// counts in (its own, and those above it).
    day: super::day::Unrecorded,
}

impl Commit<'_> {
    fn save(self, store: &StateStore, log: &RunLog) -> Result<PendingRun, VaultError> {
        let rec = self.record;
        let today = rec.ended_at.with_timezone(&log.tz()).date_naive();
        // What today's records say was spent, read before the lock is taken: state is raised to
        // it first, so a run state lost (a garbled file, a held lock) is counted all the same.
        let spent = crate::records::spent::of_day(store.vault(), log.tz(), today);
        let record_json = serde_json::to_value(rec).map_err(|e| VaultError::Io(e.to_string()))?;
        let daily = log.daily_path(rec.started_at);
        // A run that never reached the model (an outage), or one tabd's own stop cut short, does
        // not use up max_runs_per_day unless it spent tokens.
        let outage = matches!(
            self.class,
            Some(FailureClass::Outage | FailureClass::Unavailable | FailureClass::Stopped)
        );
        // Durable against a crash of tabd (the kernel has the data once written); the folder is
        // not synced here, so a power cut may at worst run the run's notes again.
        store.update_with(crate::base::vault::Durability::File, |s| {
            crate::records::spent::reconcile(s, today, &spent);
            super::day::count_in(s, &self.day.roles, today, self.day.spent);
            let r = s.role(self.role);
            r.roll_day(today);
            self.count(r, outage);
            // In this same update, so a committed end and an owed slot never both hold: a run
            // tabd's own stop cut short leaves its slot owed (the next start decides), any other
            // end settles it.
            if let Some(slot) = self.slot {
                match self.class {
                    Some(FailureClass::Stopped) if !self.paused => r.slot_stopped(slot),
                    _ => r.slot_finished(slot),
                }
            }
            let daily_text = self.daily_text(log, r, outage);
            let pending = PendingRun {
                run_id: rec.run_id.clone(),
                record: record_json.clone(),
                jsonl: log.jsonl_path(rec.started_at).as_str().to_string(),
                daily: daily.as_str().to_string(),
                daily_text,
                moves: self
                    .plan
                    .moves
                    .iter()
                    .map(|(f, t)| (f.as_str().to_string(), t.as_str().to_string()))
                    .collect(),
            };
            // A run with no notes to move has nothing a crash could make untrue: its record is
            // kept only until its logs are written (here), not as a pending entry.
            if !pending.moves.is_empty() {
                r.pending.push(pending.clone());
            }
            pending
        })
    }

    /// The role's counters: runs today, its last run, its hashes, its notes' attempts.
    fn count(&self, r: &mut crate::records::state::RoleState, outage: bool) {
        let rec = self.record;
        // Every run counts in its role's runs per day, a delegated one too: a role's ceilings
        // hold whatever door its runs came through.
        if !outage || rec.usage.tokens.total() > 0 {
            r.runs_today += 1;
        }
        r.last_run = Some(LastRun {
            run_id: rec.run_id.clone(),
            started_at: rec.started_at,
            ended_at: rec.ended_at,
            // The JSONL record says `failed` (contract); people see that nothing was their fault.
            outcome: rec.ended.clone().unwrap_or_else(|| rec.outcome.as_str().into()),
            error: self.error.clone(),
            tokens: rec.usage.tokens.total(),
            trigger: self.trigger_kind.to_string(),
            cost_usd: rec.usage.cost_usd,
        });
        if let Some(h) = &self.hashes {
            r.last_success_at = Some(rec.ended_at);
            r.context_hashes = h.clone();
        }
        for (note, count, ino) in &self.plan.attempts {
            let last_error = self.error.clone().unwrap_or_default();
            r.attempts.insert(
                note.clone(),
                Attempts {
                    count: *count,
                    last_error,
                    ino: Some(*ino),
                },
            );
        }
        for (from, _) in &self.plan.moves {
            r.attempts.remove(from.as_str());
        }
    }

    /// What the daily log gets: the run's section — or, for an outage, one line per cause a day;
    /// for a run tabd's stop cut short, one line unless it did something (then its section).
    fn daily_text(&self, log: &RunLog, r: &mut crate::records::state::RoleState, outage: bool) -> String {
        let cause = self.cause.as_deref().unwrap_or_default();
        if self.class == Some(FailureClass::Stopped) {
            if !self.record.tool_calls.is_empty() {
                return self.daily_section.clone();
            }
            let secs = (self.record.ended_at - self.record.started_at).num_seconds();
            let waiting = match self.notes {
                0 => String::new(),
                1 => "; its note waits in the inbox, no attempt counted".into(),
                n => format!("; its {n} notes wait in the inbox, no attempt counted"),
            };
            if self.paused {
                return log.render_line(
                    self.record.started_at,
                    self.display_name,
                    &format!("stopped after {secs} s because you paused it (`tabd pause`){waiting}"),
                );
            }
            let again = match self.slot {
                // Owed, not certain: the role's catch_up and stale_after decide at the next start.
                Some(slot) => format!(
                    "its {} slot is owed: tabd runs it again once when it next starts, or says why not",
                    slot.with_timezone(&log.tz()).format("%H:%M")
                ),
                None => "runs again when tabd next starts".into(),
            };
            return log.render_line(
                self.record.started_at,
                self.display_name,
                &format!("stopped after {secs} s when tabd stopped; {again}{waiting}"),
            );
        }
        match (outage, &self.error) {
            (true, Some(msg)) if r.first_notice(&format!("outage: {cause}")) => {
                let waiting = match self.notes {
                    0 => String::new(),
                    n => format!("; {n} note(s) wait in the inbox, no attempt counted"),
                };
                let what = if self.class == Some(FailureClass::Unavailable) {
                    "waiting"
                } else {
                    "paused"
                };
                log.render_line(
                    self.record.started_at,
                    self.display_name,
                    &format!("{what} — {msg}{waiting}"),
                )
            }
            (true, _) => String::new(),
            (false, _) => self.daily_section.clone(),
        }
    }
}

/// Whether `publish` first looks for what a crashed attempt already wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Publish {
    /// A run finishing now: nothing of it is written yet.
    Fresh,
    /// Crash recovery: write only what is missing (reads the day's logs once per run).
    Recover,
}

/// Writes a committed run's logs and moves its notes, then clears it from state. In recovery,
/// nothing is written or moved twice. A log file another process held past the lock's wait (a
/// process stopped while it wrote) keeps the run in state, its notes moved, for what is left to
/// write: the role's next run, or the next start, writes it. The run is safe in state, but a
/// log it could not write is a write that failed: the one sink counts it for status and logs it
/// once, whichever door ran the run.
fn publish(env: &RunEnv, role: &str, p: &PendingRun, how: Publish) {
    env.faults.abort_at("abort-after-commit");
    let mut held = false;
    let mut written = |what: &str, path: &VaultPath, result: Result<(), VaultError>| match result {
        Ok(()) => {}
        // It names the file already.
        Err(e @ VaultError::Held { .. }) => {
            held = true;
            env.side
                .failed(what, &format_args!("{e}; it is written at the role's next run"));
        }
        Err(e) => env.side.failed(what, &format_args!("{path}: {e}")),
    };
    if let Ok(jsonl) = &VaultPath::parse(&p.jsonl, false) {
        if how == Publish::Fresh || !env.log.has_record(jsonl, &p.run_id) {
            written("the run record", jsonl, env.log.append_jsonl(jsonl, &p.record));
        }
    }
    if let (Ok(daily), false) = (&VaultPath::parse(&p.daily, false), p.daily_text.is_empty()) {
        if how == Publish::Fresh || !env.log.daily_has(daily, &p.daily_text) {
            let appended = if p.daily_text.starts_with("- ") {
                env.log.append_event(daily, &p.daily_text)
            } else {
                env.log.append_daily(daily, &p.daily_text)
            };
            written("the run log", daily, appended);
        }
    }
    env.faults.abort_at("abort-after-log");
    move_notes(env, p);
    settle(env, role, p, how, held);
}

/// Publishes `p`, committed to state as pending by another part of `run`, the way crash recovery
/// does: what is already written is not written again (a crash before it was cleared repeats
/// nothing at the next start).
pub(super) fn publish_pending_once(env: &RunEnv, role: &str, p: &PendingRun) {
    publish(env, role, p, Publish::Recover);
}

fn move_notes(env: &RunEnv, p: &PendingRun) {
    for (from, to) in &p.moves {
        let (Ok(f), Ok(t)) = (VaultPath::parse(from, false), VaultPath::parse(to, false)) else {
            continue;
        };
        if !env.vault.exists(&f) {
            continue; // moved already (a recovery after the move), or by a person
        }
        if let Err(e) = inbox::move_note(&env.vault, &f, &t) {
            tracing::warn!("could not move {from} to {to}: {e}");
        }
        if p.moves.len() > 1 {
            env.faults.abort_at("run-note-moved");
        }
    }
}

/// Clears the published run from state; one whose log was held stays, with only its logs left
/// to write (its moves done: a note given the same name later is not moved).
fn settle(env: &RunEnv, role: &str, p: &PendingRun, how: Publish, held: bool) {
    // A fresh run with no notes to move was never pending (`Commit::save`). A recovered one
    // always is, even without moves (a held log's entry has none left): it is cleared here, or
    // it stayed in state and was published again at every run and start.
    if how == Publish::Fresh && p.moves.is_empty() && !held {
        return;
    }
    // Losing this update (a power cut) only means a recovery that finds everything done.
    let settled = env.store.update_with(crate::base::vault::Durability::File, |s| {
        if let Some(r) = s.roles.get_mut(role) {
            r.pending.retain(|x| x.run_id != p.run_id);
        }
        if held {
            s.role(role).pending.push(PendingRun {
                moves: Vec::new(),
                ..p.clone()
            });
        }
    });
    if let Err(e) = settled {
        tracing::warn!("cannot clear the finished run {} from state: {e}", p.run_id);
    }
}

/// Finishes runs a crash interrupted after they were committed. Returns how many.
///
/// Only roles nobody is running are touched: a role whose run lock another process holds may be
/// finishing that very run. `held` is the role whose lock the caller itself holds (`tabd fire`).
pub fn recover(env: &RunEnv, held: Option<&str>) -> usize {
    // First the daily notes a crash left half-written: a run's section asked for below must be
    // found whole, or it is written twice.
    for problem in env.log.finish_interrupted() {
        env.side
            .failed("the daily note (a write a crash cut short)", &problem);
    }
    let state = env.store.load();
    let mut n = 0;
    for (role, rs) in state.roles.iter().filter(|(_, r)| !r.pending.is_empty()) {
        let _lock = if held == Some(role.as_str()) {
            None
        } else {
            match env.vault.lock(&run_lock_path(role), false) {
                Ok(Some(l)) => Some(l),
                Ok(None) => continue, // running elsewhere; that process finishes it
                Err(e) => {
                    tracing::warn!("cannot take the run lock of {role} to finish its last run: {e}");
                    continue;
                }
            }
        };
        n += publish_pending(env, role, &rs.pending);
    }
    n
}

/// Finishes what earlier runs of `role` left in state (a log file another process held, a
/// crash); the caller holds the role's run lock. Returns how many.
pub fn recover_role(env: &RunEnv, role: &str) -> usize {
    let state = env.store.load();
    state
        .roles
        .get(role)
        .map_or(0, |rs| publish_pending(env, role, &rs.pending))
}

/// Publishes the pending runs whose log files nobody holds right now. One still held is not
/// waited for again (at start, ten seconds each could outlast systemd's start time-out): it
/// waits for a later run. Returns how many were published.
fn publish_pending(env: &RunEnv, role: &str, pending: &[PendingRun]) -> usize {
    let held = |path: &str| VaultPath::parse(path, false).is_ok_and(|f| env.vault.held_elsewhere(&f));
    let ready: Vec<&PendingRun> = pending
        .iter()
        .filter(|p| !held(&p.daily) && !held(&p.jsonl))
        .collect();
    for p in &ready {
        publish(env, role, p, Publish::Recover);
    }
    ready.len()
}

/// The role's run lock: one process runs a role at a time (the daemon and `tabd fire` alike).
pub fn run_lock_path(role: &str) -> VaultPath {
    VaultPath::parse(&crate::base::vault::layout::run_lock(role), false).unwrap_or_else(|_| VaultPath::root())
}

/// Why a run was skipped at zero tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skip {
    /// Nothing changed since its last run (`skip_unchanged`).
    Unchanged,
    /// Its day was spent as it was to start (another run spent it since its door looked): its
    /// notes wait in the inbox, no attempt counted.
    DaySpent(crate::records::limits::DailyStop),
}

impl Skip {
    fn why(self) -> &'static str {
        match self {
            Self::Unchanged => "nothing changed since the last run (skip_unchanged)",
            Self::DaySpent(stop) => stop.cause(),
        }
    }

    /// What its one daily-log line a day is keyed on (a spent day: the key the daemon's own
    /// skips use, so the day reads one line per cause whoever skipped).
    fn notice(self) -> &'static str {
        match self {
            Self::Unchanged => "skip_unchanged",
            Self::DaySpent(stop) => stop.cause(),
        }
    }
}

/// A run skipped at zero tokens: a JSONL `skipped` record, and one daily-log line per cause per
/// day.
pub(super) fn skipped(
    env: &RunEnv,
    role: &Role,
    trigger: &Trigger,
    prep: &Prepared,
    skip: Skip,
) -> RunResult {
    let why = skip.why().to_string();
    let record = RunRecord::without_model(
        prep.id.to_string(),
        &role.name,
        TriggerRecord::of(trigger, Vec::new()),
        prep.started,
        (Outcome::Skipped, why.clone()),
    );
    let today = prep.started.with_timezone(&env.log.tz()).date_naive();
    let slot = slot_of(trigger);
    let first = env.store.update(|s| {
        let r = s.role(&role.name);
        r.roll_day(today);
        if let Some(slot) = slot {
            r.slot_finished(slot);
        }
        r.first_notice(skip.notice())
    });
    env.side.check("the state (a skip's notice)", first.as_ref());
    if first.unwrap_or(true) {
        env.side.check(
            "the daily note (a skipped run)",
            env.log
                .write_line(prep.started, &role.display_name, &format!("skipped — {why}")),
        );
    }
    if let Err(e) = env.log.write_record(&record) {
        tracing::warn!("cannot write the skip record: {e}");
    }
    RunResult {
        record,
        summary: String::new(),
        failure: None,
        daily_log: env.log.daily_path(prep.started),
        changes: Vec::new(),
        skipped: Some(why),
        output: None,
        delegated_section: String::new(),
        day_spent: match skip {
            Skip::DaySpent(stop) => vec![(role.name.clone(), stop)],
            Skip::Unchanged => Vec::new(),
        },
    }
}

/// Records a run that crashed (a panic in tabd) as a failed run: its notes count an attempt,
/// so a note that makes tabd fail every time still ends in `failed/` rather than looping.
pub fn record_crash(env: &RunEnv, role: &Role, trigger: Trigger, notes: Vec<Note>, why: &str) -> RunResult {
    record_ended(env, role, trigger, notes, TurnEnd::Crashed(why.to_string()))
}

/// Records a run whose task was cancelled by tabd's own stop before it could record itself.
pub fn record_stopped(env: &RunEnv, role: &Role, trigger: Trigger, notes: Vec<Note>) -> RunResult {
    record_ended(env, role, trigger, notes, TurnEnd::Stopped)
}

fn record_ended(env: &RunEnv, role: &Role, trigger: Trigger, notes: Vec<Note>, end: TurnEnd) -> RunResult {
    let started = env.clock.now();
    let limits = RoleLimits::resolve(role, &env.config.limits);
    let prep = Prepared {
        id: crate::base::run_id::RunId::new(&role.name, started),
        started,
        state: env.store.load(),
        hashes: BTreeMap::new(),
        ttl: crate::base::cost::CacheTtl::FiveMinutes,
        hops: 0,
        limits,
        notes: Vec::new(),
    };
    finish(
        env,
        role,
        (trigger, notes),
        prep,
        TurnOutcome::ended(end),
        Vec::new(),
        None,
    )
}

/// The result of a crashed run when even recording it failed: nothing written, the notes stay
/// in the inbox.
pub fn record_crash_in_memory(role: &Role, why: &str) -> RunResult {
    let now = Utc::now();
    RunResult {
        record: RunRecord::without_model(
            String::new(),
            &role.name,
            TriggerRecord::of(&Trigger::manual(), Vec::new()),
            now,
            (Outcome::Failed, why.to_string()),
        ),
        summary: String::new(),
        failure: Some((FailureClass::RunFailure, why.to_string())),
        daily_log: VaultPath::root(),
        changes: Vec::new(),
        skipped: None,
        output: None,
        delegated_section: String::new(),
        day_spent: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::provider::ProviderError;

    #[test]
    fn what_a_turn_ends_as_decides_the_notes_fate() {
        let ok = decide(&TurnEnd::Done, false, false);
        assert_eq!((ok.outcome, ok.failure.is_none()), (Outcome::Ok, true));
        let limit = decide(&TurnEnd::Limit("max_tool_calls (3)".into()), false, false);
        assert_eq!(limit.outcome, Outcome::Limit);
        assert!(
            limit.failure.is_none(),
            "a limit is not the notes' fault: they move on"
        );
        for end in [
            TurnEnd::ContextExceeded,
            TurnEnd::ToolFatal("disk full".into()),
            TurnEnd::Crashed("panic".into()),
        ] {
            let d = decide(&end, false, false);
            assert_eq!(d.outcome, Outcome::Failed, "{end:?}");
            assert_eq!(
                d.failure.map(|f| f.0),
                Some(FailureClass::RunFailure),
                "{end:?}: counts an attempt"
            );
        }
        let down = decide(
            &TurnEnd::ServerDown {
                cause: "MCP server `x` is down".into(),
                last_output: " — its last output: `boom`".into(),
            },
            false,
            false,
        );
        assert_eq!(
            down.failure.as_ref().map(|f| f.0),
            Some(FailureClass::Unavailable)
        );
        assert_eq!(
            down.cause.as_deref(),
            Some("MCP server `x` is down"),
            "one daily line per cause, whatever the server printed"
        );
        let cli = decide(
            &TurnEnd::Failed(ProviderError::Cli {
                provider: "command",
                message: "Please run /login".into(),
                outage: true,
            }),
            false,
            false,
        );
        assert_eq!(
            cli.failure.map(|f| f.0),
            Some(FailureClass::Outage),
            "no attempt counted"
        );
        // A stop: the notes run again; a slot is owed, and whether it runs again is decided at
        // the next start, so it is not promised.
        assert_eq!(
            decide(&TurnEnd::Stopped, false, false).error.as_deref(),
            Some(STOPPED)
        );
        let slot = decide(&TurnEnd::Stopped, true, false);
        assert_eq!(slot.error.as_deref(), Some(STOPPED_SLOT));
        assert_eq!(slot.failure.map(|f| f.0), Some(FailureClass::Stopped));
        // The person's pause: the same class (no attempt counted), but nothing owed or promised.
        let paused = decide(&TurnEnd::Stopped, true, true);
        assert_eq!(paused.error.as_deref(), Some(STOPPED_PAUSED));
        assert_eq!(paused.failure.map(|f| f.0), Some(FailureClass::Stopped));
    }
}
