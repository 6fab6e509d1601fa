//! One run of one role, start to finish: prompt, loop, log, state, note moves (DESIGN §5, §7, §9).
//!
//! Order matters for "nothing lost": the run is logged, the planned moves are written to state,
//! and only then are notes moved. A crash before the log leaves the notes in the inbox (the run
//! happens again); a crash after it is finished at the next start from `pending_moves`.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio::time::Instant;

use crate::config::Config;
use crate::inbox::{self, Note};
use crate::prompt::{self, Prompt, PromptInput, Trigger};
use crate::provider::{FailureClass, Provider, RetryPolicy};
use crate::role::{Role, RoleSet};
use crate::runlog::{HumanRun, Moved, RunLog, RunRecord, TriggerRecord};
use crate::state::{Attempts, LastRun, StateStore};
use crate::tools::{self, AccessPolicy, ToolContext};
use crate::turn::{self, TurnEnd, TurnLimits};
use crate::vault::{Vault, VaultPath};

/// Everything a run needs from the daemon or the command line.
pub struct RunEnv<'a> {
    pub vault: &'a Vault,
    pub config: &'a Config,
    pub roles: &'a RoleSet,
    pub provider: &'a dyn Provider,
    pub retry: RetryPolicy,
    pub store: &'a StateStore,
    pub log: &'a RunLog,
}

/// What a run ended as.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub record: RunRecord,
    pub summary: String,
    /// Set when the run failed; `Outage` means "pause model calls", not "blame the notes".
    pub failure: Option<(FailureClass, String)>,
    pub daily_log: std::path::PathBuf,
    /// Every file the run's tools changed (written, appended, moved to, triggered, remembered).
    pub changes: Vec<crate::tools::Change>,
}

impl RunResult {
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

/// The model settings of a role: its own, else the config's.
pub struct ModelSettings {
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub thinking_budget: u32,
}

pub fn model_settings(role: &Role, config: &Config) -> ModelSettings {
    let p = &config.provider;
    ModelSettings {
        model: role.settings.model.clone().unwrap_or_else(|| p.model.clone()),
        max_tokens: role.settings.max_tokens.unwrap_or(p.max_tokens),
        temperature: role.settings.temperature.or(p.temperature),
        thinking_budget: role.settings.thinking_budget.unwrap_or(p.thinking_budget),
    }
}

/// Builds the prompt a run of `role` would send now (also what `tabd prompt` prints).
pub fn build_prompt(
    env: &RunEnv<'_>,
    role: &Role,
    trigger: &Trigger,
    notes: &[Note],
    now: DateTime<Utc>,
) -> Prompt {
    prompt_from_state(env, &env.store.load(), role, trigger, notes, now)
}

fn prompt_from_state(
    env: &RunEnv<'_>,
    state: &crate::state::State,
    role: &Role,
    trigger: &Trigger,
    notes: &[Note],
    now: DateTime<Utc>,
) -> Prompt {
    let rs = state.roles.get(&role.name);
    let previous = rs
        .filter(|r| r.last_success_at.is_some())
        .map(|r| &r.context_hashes);
    prompt::build(&PromptInput {
        vault: env.vault,
        role,
        config: env.config,
        previous,
        now,
        trigger,
        notes,
    })
}

fn run_id(role: &str, at: DateTime<Utc>) -> String {
    format!(
        "{}-{role}-{:04x}",
        at.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u16>()
    )
}

/// Finishes moves a crash interrupted (logged as done, not yet moved). Returns how many.
pub fn finish_pending_moves(vault: &Vault, store: &StateStore) -> usize {
    let pending: Vec<(String, String, String)> = store
        .load()
        .roles
        .iter()
        .flat_map(|(r, s)| {
            s.pending_moves
                .iter()
                .map(move |(a, b)| (r.clone(), a.clone(), b.clone()))
        })
        .collect();
    let mut done = 0;
    for (_, from, to) in &pending {
        let (Ok(f), Ok(t)) = (VaultPath::parse(from, false), VaultPath::parse(to, false)) else {
            continue;
        };
        if vault.exists(&f) && inbox::move_note(vault, &f, &t).is_ok() {
            done += 1;
        }
    }
    if !pending.is_empty() {
        let _ = store.update(|s| s.roles.values_mut().for_each(|r| r.pending_moves.clear()));
    }
    done
}

/// Runs `role` once for `trigger` with `notes` (already chosen, in order).
pub async fn run_role(env: &RunEnv<'_>, role: &Role, trigger: Trigger, notes: Vec<Note>) -> RunResult {
    let started = Utc::now();
    let id = run_id(&role.name, started);
    let limits_cfg = &env.config.limits;
    let ms = model_settings(role, env.config);
    // One read of state serves the prompt (last hashes) and the attempt counts below; the
    // role's run lock keeps anyone else from changing either meanwhile.
    let state_at_start = env.store.load();
    let prompt = prompt_from_state(env, &state_at_start, role, &trigger, &notes, started);
    let hops = notes.iter().map(|n| n.hops).max().unwrap_or(0);
    let policy = AccessPolicy::for_role(role);
    let limits = TurnLimits {
        max_tool_calls: role.settings.max_tool_calls.unwrap_or(limits_cfg.max_tool_calls),
        max_tokens_per_run: role
            .settings
            .max_tokens_per_run
            .unwrap_or(limits_cfg.max_tokens_per_run),
        deadline: Instant::now() + limits_cfg.run_deadline,
    };
    let max_chain_depth = role
        .settings
        .max_chain_depth
        .unwrap_or(limits_cfg.max_chain_depth);
    let tz: Tz = role.schedule.tz;
    let hashes = prompt.hashes.clone();
    let request = prompt.into_request(&ms.model, ms.max_tokens, ms.temperature, ms.thinking_budget);

    let outcome = {
        let mut exec = |name: &str, input: &serde_json::Value| {
            let ctx = ToolContext {
                vault: env.vault,
                role,
                roles: env.roles,
                policy: &policy,
                hops,
                max_chain_depth,
                now: Utc::now().with_timezone(&tz),
            };
            tools::execute(&ctx, name, input)
        };
        turn::run_turn(env.provider, &env.retry, request, &limits, &mut exec).await
    };
    let ended = Utc::now();

    let (outcome_name, error, failure) = match &outcome.end {
        TurnEnd::Done => ("ok", None, None),
        TurnEnd::Limit(why) => ("limit", Some(format!("limit reached: {why}")), None),
        TurnEnd::Failed(e) => ("failed", Some(e.to_string()), Some((e.class(), e.to_string()))),
        TurnEnd::ContextExceeded => {
            let msg = "the conversation outgrew the model's context window; trim the role's context files"
                .to_string();
            ("failed", Some(msg.clone()), Some((FailureClass::RunFailure, msg)))
        }
    };

    // Plan where each note goes.
    let max_attempts = env.config.inbox.max_attempts.max(1);
    let mut moves: Vec<(VaultPath, VaultPath)> = Vec::new();
    let mut human = HumanRun {
        display_name: role.display_name.clone(),
        thinking: outcome.thinking.clone(),
        summary: outcome.summary.clone(),
        changes: outcome.changes.clone(),
        ..HumanRun::default()
    };
    let previous_attempts = state_at_start
        .roles
        .get(&role.name)
        .map(|r| r.attempts.clone())
        .unwrap_or_default();
    let mut attempts_now: Vec<(String, u32)> = Vec::new();
    for note in &notes {
        let sub = match &failure {
            None => Some("processed"),
            Some((FailureClass::RunFailure, _)) => {
                let count = previous_attempts.get(note.path.as_str()).map_or(0, |a| a.count) + 1;
                attempts_now.push((note.path.as_str().to_string(), count));
                (count >= max_attempts).then_some("failed")
            }
            Some((FailureClass::Outage, _)) => None,
        };
        if let Some(sub) = sub {
            let taken: Vec<VaultPath> = moves.iter().map(|(_, d)| d.clone()).collect();
            match inbox::destination(env.vault, &note.path, sub, &taken) {
                Ok(dest) => moves.push((note.path.clone(), dest)),
                Err(e) => tracing::warn!("cannot plan a move for {}: {e}", note.path),
            }
        }
    }
    for (from, to) in &moves {
        if to.parent().file_name() == "failed" {
            let count = attempts_now
                .iter()
                .find(|(n, _)| n == from.as_str())
                .map_or(max_attempts, |a| a.1);
            human.failed_notes.push((to.as_str().to_string(), count));
        }
    }
    for (note, count) in &attempts_now {
        if !moves.iter().any(|(f, _)| f.as_str() == note) {
            human.retry_notes.push((note.clone(), *count));
        }
    }

    let record = RunRecord {
        run_id: id.clone(),
        role: role.name.clone(),
        trigger: TriggerRecord {
            kind: trigger.kind.as_str().to_string(),
            notes: notes.iter().map(|n| n.path.as_str().to_string()).collect(),
            scheduled_for: trigger.scheduled_for,
            cron: trigger.cron.clone(),
        },
        started_at: started,
        ended_at: ended,
        outcome: outcome_name.to_string(),
        error: error.clone(),
        model: outcome.model.clone(),
        usage: outcome.usage,
        tool_calls: outcome.calls.clone(),
        moved: moves
            .iter()
            .map(|(f, t)| Moved {
                from: f.as_str().to_string(),
                to: t.as_str().to_string(),
            })
            .collect(),
    };

    // Log first: the daily note (a section, or for an outage one line per cause per day) and JSONL.
    let today = ended.with_timezone(&env.config.timezone).date_naive();
    let outage_line = match &failure {
        Some((FailureClass::Outage, msg)) => {
            let first = env
                .store
                .update(|s| {
                    let r = s.role(&role.name);
                    r.roll_day(today);
                    r.first_notice(&format!("outage: {msg}"))
                })
                .unwrap_or(true);
            first.then(|| msg.clone())
        }
        _ => None,
    };
    let daily = env.log.daily_path(started);
    let logged = match (&failure, outage_line) {
        (Some((FailureClass::Outage, _)), Some(msg)) => {
            let waiting = match notes.len() {
                0 => String::new(),
                n => format!("; {n} note(s) wait in the inbox, no attempt counted"),
            };
            env.log
                .write_line(started, &role.display_name, &format!("paused — {msg}{waiting}"))
        }
        (Some((FailureClass::Outage, _)), None) => Ok(()),
        _ => env.log.write_run(&record, &human).map(|_| ()),
    };
    if let Err(e) = logged.and_then(|()| env.log.write_record(&record)) {
        tracing::error!(
            "cannot write the run log for {}: {e}; notes stay in the inbox",
            role.name
        );
        return RunResult {
            record,
            summary: outcome.summary,
            failure: Some((FailureClass::RunFailure, e.to_string())),
            daily_log: daily,
            changes: outcome.changes,
        };
    }

    // Then state (with the planned moves), then the moves, then clear them.
    let planned: Vec<(String, String)> = moves
        .iter()
        .map(|(f, t)| (f.as_str().to_string(), t.as_str().to_string()))
        .collect();
    let success = failure.is_none();
    let failure_class = failure.as_ref().map(|(c, _)| *c);
    let trigger_name = trigger.kind.as_str().to_string();
    let usage = outcome.usage;
    let err_text = error.clone();
    let saved = env.store.update(|s| {
        s.add_usage(&role.name, today, usage);
        let r = s.role(&role.name);
        // A run that never reached the model (an outage) does not use up max_runs_per_day.
        if !matches!(failure_class, Some(FailureClass::Outage)) || usage.total() > 0 {
            r.runs_today += 1;
        }
        r.last_run = Some(LastRun {
            run_id: id.clone(),
            started_at: started,
            ended_at: ended,
            // The JSONL record says `failed` (contract); people see that nothing was their fault.
            outcome: if matches!(failure_class, Some(FailureClass::Outage)) {
                "paused".to_string()
            } else {
                outcome_name.to_string()
            },
            error: err_text.clone(),
            tokens: usage.total(),
            trigger: trigger_name.clone(),
        });
        if success {
            r.last_success_at = Some(ended);
            r.context_hashes = hashes;
        }
        for (note, count) in &attempts_now {
            r.attempts.insert(
                note.clone(),
                Attempts {
                    count: *count,
                    last_error: err_text.clone().unwrap_or_default(),
                },
            );
        }
        for (from, _) in &planned {
            r.attempts.remove(from);
        }
        r.pending_moves = planned.clone();
    });
    if let Err(e) = saved {
        tracing::error!("cannot save state for {}: {e}", role.name);
    }
    if !moves.is_empty() {
        for (from, to) in &moves {
            if let Err(e) = inbox::move_note(env.vault, from, to) {
                tracing::warn!("could not move {from} to {to}: {e}");
            }
        }
        // Only needed when there was something to move (it saves an fsync per run otherwise).
        let _ = env.store.update(|s| s.role(&role.name).pending_moves.clear());
    }
    RunResult {
        record,
        summary: outcome.summary,
        failure,
        daily_log: daily,
        changes: outcome.changes,
    }
}

/// The ready notes of `role` for a run: not drafts, in order, at most `max_batch`.
pub fn ready_notes(
    vault: &Vault,
    role: &Role,
    max_batch: usize,
) -> Result<Vec<Note>, crate::vault::VaultError> {
    let inbox = VaultPath::parse(&role.inbox, false)?;
    let mut notes: Vec<Note> = inbox::scan(vault, &inbox)?
        .into_iter()
        .filter(|n| !n.draft)
        .collect();
    inbox::order(&mut notes);
    notes.truncate(max_batch);
    Ok(notes)
}
