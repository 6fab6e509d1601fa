//! `tabd fire ROLE [--note FILE]`: one turn now, in the foreground.

use std::path::Path;

use chrono::Utc;

use super::{CliError, Workspace};
use crate::base::signing::Key;
use crate::base::text::thousands;
use crate::base::trigger::Trigger;
use crate::base::vault::{Vault, VaultPath};
use crate::capabilities::provider::FailureClass;
use crate::records::inbox;
use crate::running::run;
use crate::setup::role::Role;

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
            Err(CliError::usage(format!("there is no role `{name}` in {}/roles; roles: {}", ws.root.display(), names.join(", "))))
        }
    }
}

/// Puts `file` into the role's inbox (unless it is already there) and returns its vault path.
fn adopt_note(ws: &Workspace, role: &Role, file: &Path) -> Result<VaultPath, CliError> {
    if ws.config.cluster.is_some() {
        return Err(CliError::failed(format!(
            "with [cluster], a note runs once across devices, on the device whose daemon claims it; \
             put it in {}/ and a daemon runs it (`tabd fire {}` without --note runs the role on its own)",
            role.inbox, role.name
        )));
    }
    let abs = std::fs::canonicalize(file)
        .map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    if let Ok(rel) = abs.strip_prefix(&ws.root) {
        if let Some(rel) = rel.to_str().and_then(|r| VaultPath::parse(r, false).ok()) {
            if rel.parent() == role.inbox {
                return Ok(rel);
            }
        }
    }
    let text = crate::base::vault::read_regular_path(&abs, crate::records::inbox::MAX_NOTE_BYTES)
        .map_err(|e| CliError::usage(format!("--note {}: {e}", file.display())))?;
    let name = abs.file_name().and_then(|n| n.to_str()).unwrap_or("note.md");
    let name = if name.to_lowercase().ends_with(".md") {
        name.to_string()
    } else {
        format!("{name}.md")
    };
    let path = ws
        .vault
        .create_unique(&role.inbox, &name, text.as_bytes())
        .map_err(|e| CliError::failed(e.to_string()))?;
    say!("Copied {} into {path}", file.display());
    Ok(path)
}

/// A manual run respects the daily budgets like any other (a role that spent its tokens is not
/// run again by hand without saying so): `Err` says which and how to override.
fn check_budget(ws: &Workspace, role: &Role) -> Result<(), CliError> {
    let store = crate::records::state::StateStore::new(ws.vault.clone());
    // Today's spend as the run records tell it, should state have lost a run.
    if let Err(e) = crate::records::spent::count_again(&store, ws.config.timezone, Utc::now()) {
        say_err!("warning: cannot count today's spend from the run records: {e}");
    }
    let state = store.load();
    let today = Utc::now().with_timezone(&ws.config.timezone).date_naive();
    let limits = crate::records::limits::RoleLimits::resolve(role, &ws.config.limits);
    let mine = state
        .roles
        .get(&role.name)
        .map(|r| r.today(today))
        .unwrap_or_default();
    let all = state.global.today(today);
    let Some(stop) = crate::records::limits::daily_stop(&limits, &ws.config.limits, mine, all) else {
        return Ok(());
    };
    let used = match stop {
        crate::records::limits::DailyStop::TokenBudget => format!(
            " ({} of {} tokens)",
            thousands(mine.tokens),
            thousands(limits.daily_token_budget)
        ),
        crate::records::limits::DailyStop::GlobalTokenBudget => format!(
            " ({} of {} tokens, all roles)",
            thousands(all.tokens),
            thousands(ws.config.limits.global_daily_token_budget)
        ),
        crate::records::limits::DailyStop::RunsPerDay => format!(" ({} runs)", mine.runs),
        _ => String::new(),
    };
    Err(CliError::failed(format!(
        "{} is stopped for today: {}{used}; it runs again after midnight. To run it now anyway: \
         tabd fire {} --over-budget",
        role.display_name,
        stop.cause(),
        role.name
    )))
}

pub fn run(ws: &Workspace, role_name: &str, note: Option<&Path>, over_budget: bool) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    super::pause::refuse_if_paused(ws, role, "`tabd fire`")?;
    if !over_budget {
        check_budget(ws, role)?;
    }
    let mut guard = take_run_lock(ws, role)?;
    let mut env = ws.run_env()?;
    // Who holds it, for the message another `tabd fire` gives.
    env.side.check(
        "the run lock's holder",
        guard.set_content(&format!("tabd fire (pid {})", std::process::id())),
    );
    let spinner = spinner(&role.display_name);
    if let Some(bar) = &spinner {
        env.progress = progress_of(bar.clone());
    }
    let recovered = run::recover(&env, Some(&role.name));
    if recovered > 0 {
        say!("Finished {recovered} run(s) a crash had interrupted.");
    }
    let adopted = match note {
        Some(file) => Some(adopt_note(ws, role, file)?),
        None => None,
    };
    let (notes, unreadable) = notes_for(ws, role, adopted.as_ref())?;
    let refused = refuse_unreadable(&env, role, &unreadable, spinner.as_ref())?;
    if notes.is_empty() && refused > 0 {
        if let Some(bar) = spinner {
            bar.finish_and_clear();
        }
        return Err(CliError::failed(format!(
            "nothing to run: the inbox's {} could not be read (see above)",
            if refused == 1 { "note" } else { "notes" }
        )));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    let started = Utc::now();
    let trigger = Trigger {
        over_budget,
        ..Trigger::manual()
    };
    let result = rt.block_on(run_until_ctrl_c(&env, role, trigger, notes));
    if let Some(bar) = spinner {
        bar.finish_and_clear();
    }
    print_result(role, &result, started);
    print_log_place(&env, &result);
    say_if_waiting(&env.vault, &env.key, &result);
    Ok(exit_code(ws, &result))
}

/// The role's run lock, or why it cannot be had: the daemon or another `tabd fire` runs the role
/// (its holder says which).
fn take_run_lock(ws: &Workspace, role: &Role) -> Result<crate::base::vault::FileLock, CliError> {
    let lock_path = run::run_lock_path(&role.name);
    ws.vault
        .lock(&lock_path, false)
        .map_err(|e| CliError::failed(format!("cannot take the run lock: {e}")))?
        .ok_or_else(|| {
            let holder = ws.vault.read_text(&lock_path, 256).unwrap_or_default();
            let who = if holder.trim().starts_with("tabd fire") {
                format!("in another `{}`", holder.trim())
            } else {
                "in the daemon".to_string()
            };
            CliError::failed(format!(
                "{} is running right now ({who}); try again when it finishes",
                role.name
            ))
        })
}

/// `tabd fire`'s exit status: 0 for a run that ended well, else 1, with why on stderr and what
/// became of its notes.
fn exit_code(ws: &Workspace, result: &run::RunResult) -> u8 {
    match &result.failure {
        None => 0,
        Some((class, msg)) => {
            let what = match class {
                FailureClass::Outage => {
                    "the model could not be used; the notes stay in the inbox, no attempt counted"
                }
                FailureClass::RunFailure => "the run failed; its notes count an attempt",
                FailureClass::Unavailable => {
                    "a server this role requires is down; the notes stay in the inbox, no attempt counted"
                }
                FailureClass::Stopped => {
                    "stopped before it ended; the notes stay in the inbox, no attempt counted"
                }
            };
            let msg = ws.env.redactor().apply(msg);
            say_err!("error: {msg}\n({what})");
            1
        }
    }
}

/// The notes the run takes (the one `--note` named first) and those it must refuse.
fn notes_for(
    ws: &Workspace,
    role: &Role,
    adopted: Option<&VaultPath>,
) -> Result<(Vec<inbox::Note>, Vec<inbox::Note>), CliError> {
    let ready = inbox::ready_notes(&ws.vault, &role.inbox, ws.config.inbox.max_batch)
        .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
    let (mut notes, mut unreadable) = (ready.notes, ready.unreadable);
    if let Some(path) = adopted {
        if !notes.iter().chain(&unreadable).any(|n| &n.path == path) {
            let n = inbox::read_note(&ws.vault, path).map_err(|e| CliError::failed(e.to_string()))?;
            if n.unreadable().is_some() {
                unreadable.push(n);
            } else {
                notes.insert(0, n);
            }
        }
    }
    Ok((leave_to_the_cluster(ws, notes), unreadable))
}

/// With `[cluster]` the inbox's notes are the daemons' (each claimed by one device, docs/spec.md §23):
/// `tabd fire` runs the role without them, and says so, so it never runs a note another device
/// is running or has run.
fn leave_to_the_cluster(ws: &Workspace, notes: Vec<inbox::Note>) -> Vec<inbox::Note> {
    if ws.config.cluster.is_none() || notes.is_empty() {
        return notes;
    }
    say_err!(
        "{} inbox note(s) left to the daemons: with [cluster] each note runs once, on the device that claims it",
        notes.len()
    );
    Vec::new()
}

/// Moves the notes that cannot be read to `failed/`, saying so on stderr; returns how many.
fn refuse_unreadable(
    env: &run::RunEnv,
    role: &Role,
    notes: &[inbox::Note],
    spinner: Option<&indicatif::ProgressBar>,
) -> Result<usize, CliError> {
    for note in notes {
        let why = run::refuse::unreadable(note).unwrap_or("it cannot be read");
        let refused = run::refuse::refuse(env, role, &Trigger::manual(), note, why).map_err(|e| {
            CliError::failed(format!(
                "{} cannot be read ({why}), nor moved to failed/: {e}",
                note.path
            ))
        })?;
        let say = || {
            say_err!("error: {refused}");
            for e in &refused.log_errors {
                say_err!("warning: cannot write {e}");
            }
        };
        match spinner {
            Some(bar) => bar.suspend(say),
            None => say(),
        }
    }
    Ok(notes.len())
}

/// A run that waits for the person's decision says so: it goes on once they decide.
fn say_if_waiting(vault: &Vault, key: &Key, result: &run::RunResult) {
    let id = crate::base::run_id::RunId::parse(&result.record.run_id);
    if id.is_ok_and(|id| run::suspend::load(vault, key, &id).is_ok()) {
        say!(
            "The run waits for your decision and goes on with the result once you decide — in the running \
             daemon, or when `tabd run` next starts."
        );
    }
}

/// Runs the role; Ctrl-C stops the run where it is and records it as stopped (its notes stay,
/// no attempt counted), a second Ctrl-C leaves at once.
async fn run_until_ctrl_c(
    env: &run::RunEnv,
    role: &Role,
    trigger: Trigger,
    notes: Vec<inbox::Note>,
) -> run::RunResult {
    let stop = env.stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            say_err!("\nstopping the run (Ctrl-C again to leave at once)…");
            stop.request();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let result = run::run_role(env, role, trigger, notes).await;
    // The run's spans are sent before tabd exits, within a bounded wait.
    env.telemetry.shutdown();
    result
}

/// A spinner on stderr while the run goes on — only on a terminal (a script gets plain output).
fn spinner(who: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {prefix} · {elapsed} · {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_prefix(who.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(bar)
}

/// What the run is doing, on the spinner: the step, and how many tool calls so far.
fn progress_of(bar: indicatif::ProgressBar) -> crate::base::progress::Progress {
    use crate::base::progress::Step;
    let calls = std::sync::atomic::AtomicU32::new(0);
    crate::base::progress::Progress::to(move |step| {
        let n = calls.load(std::sync::atomic::Ordering::Relaxed);
        let msg = match step {
            Step::Preparing => "reading the context".to_string(),
            Step::Starting(what) => format!("starting {what}"),
            Step::Asking(1) => "asking the model".to_string(),
            Step::Asking(k) => format!(
                "asking the model (request {k}, {n} tool call{} so far)",
                if n == 1 { "" } else { "s" }
            ),
            Step::Retrying { wait, why } => format!("retrying in {:.0} s: {why}", wait.as_secs_f64()),
            Step::Tool { name, subject } => {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                format!("{name} {subject}")
            }
            Step::Finishing => "writing the logs, moving the notes".to_string(),
        };
        bar.set_message(msg);
    })
}

fn print_result(role: &Role, result: &run::RunResult, started: chrono::DateTime<Utc>) {
    let rec = &result.record;
    let u = &rec.usage.tokens;
    let cost = if rec.usage.cost_usd > 0.0 {
        format!(" · {}", crate::base::cost::dollars(rec.usage.cost_usd))
    } else {
        String::new()
    };
    let calls = rec.tool_calls.len();
    say!(
        "{} · {} · {:.1} s · {calls} tool call{} · {} tokens in / {} out{cost}",
        role.display_name,
        rec.ended.as_deref().unwrap_or(rec.outcome.as_str()),
        (Utc::now() - started).num_milliseconds() as f64 / 1000.0,
        if calls == 1 { "" } else { "s" },
        thousands(u.input_tokens + u.cache_read_tokens + u.cache_write_tokens),
        thousands(u.output_tokens)
    );
    if !result.summary.trim().is_empty() {
        say!(
            "\n{}\n",
            crate::base::text::without_controls(result.summary.trim())
        );
    }
    for m in &rec.moved {
        say!("moved {} → {}", m.from, m.to);
    }
    for t in &rec.notes_truncated {
        say!(
            "{} is larger than one prompt: the model saw {} of its {} bytes ({} in the prompt, {} read in pages)",
            t.path,
            thousands(t.included_bytes + t.read_bytes),
            thousands(t.bytes),
            thousands(t.included_bytes),
            thousands(t.read_bytes)
        );
    }
    let waiting: Vec<&str> = rec
        .tool_calls
        .iter()
        .filter_map(|c| c.approval.as_deref())
        .collect();
    if !waiting.is_empty() {
        say!(
            "{} call{} wait{} for your approval: {} — set `status: approved` in the note, or `tabd approvals`",
            waiting.len(),
            if waiting.len() == 1 { "" } else { "s" },
            if waiting.len() == 1 { "s" } else { "" },
            waiting.join(", ")
        );
    }
}

/// Where the run's section went — or, when it could not be written, that it was not, and why: a
/// `Log:` line must never point at a section that is not there.
fn print_log_place(env: &run::RunEnv, result: &run::RunResult) {
    match env.side.failure_of("the run log") {
        Some(why) => say!(
            "Log: not written ({why}); the run's record is in {}",
            env.log.jsonl_path(result.record.started_at)
        ),
        None => say!("Log: {}", result.daily_log),
    }
}
