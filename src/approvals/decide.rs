//! The daemon's side of approvals: one pass over `agent/approvals/` acts on every settled note —
//! `approved` runs the call once (the ledger says `executing`, durably, before it starts),
//! `rejected` is closed, an unanswered note past `expires` expires — and `recover` turns a call a
//! crash interrupted into `unknown`. Only the daemon runs approved calls, one pass at a time, so
//! duplicate events, reloads and two quick edits can never run a note twice.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::note::{self, stamp};
use crate::mcp::client::Connection;
use crate::run::RunEnv;
use crate::state::approvals::{Approval, Phase};
use crate::vault::VaultPath;

/// Longest note read; an approval note is a few KiB.
const MAX_NOTE_BYTES: u64 = 1024 * 1024;
/// Longest result kept in the note (the whole result went to no model: this is for the person).
const MAX_RESULT_IN_NOTE: usize = 16 * 1024;
/// Longest outcome line kept for the role's next prompt.
const MAX_OUTCOME: usize = 600;

/// What one pass did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pass {
    pub ran: Vec<String>,
    pub rejected: Vec<String>,
    pub expired: Vec<String>,
    pub refused: Vec<String>,
    /// When to look again: a note not settled yet, or the next expiry.
    pub next: Option<DateTime<Utc>>,
}

/// A ledger change, durable (fsync) before it returns; off the async runtime's hands.
fn update<T>(
    env: &RunEnv,
    change: impl FnOnce(&mut crate::state::State) -> T,
) -> Result<T, crate::vault::VaultError> {
    crate::blocking::run(|| env.store.update(change))
}

/// After a crash: every call recorded as `executing` may or may not have happened. Each becomes
/// `unknown`, in the ledger and in its note, with a line telling the person how to retry.
pub fn recover(env: &RunEnv) -> usize {
    let now = env.clock.now();
    let interrupted: Vec<(String, Approval)> = match update(env, |s| {
        let mut out = Vec::new();
        for (id, a) in s.approvals.iter_mut() {
            if a.phase == Phase::Executing {
                a.phase = Phase::Unknown;
                a.decided = Some(now);
                a.reported = false;
                a.outcome =
                    Some("unknown: tabd stopped during the call; it may or may not have happened".into());
                out.push((id.clone(), a.clone()));
            }
        }
        out
    }) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!("approvals: cannot read or update the ledger: {e}");
            return 0;
        }
    };
    for (id, a) in &interrupted {
        let line = format!(
            "**Unknown** ({}): tabd stopped while this call was running, so it may or may not have happened. \
             Check, and set `status` to `approved` again if you want it run (once more).",
            stamp(now)
        );
        rewrite(env, &a.note, "unknown", &line);
        daily(
            env,
            a,
            &format!(
                "approval `{id}` ({}) — outcome unknown: tabd stopped during the call",
                a.tool
            ),
        );
    }
    interrupted.len()
}

/// One pass over the folder and the ledger.
pub async fn pass(env: &RunEnv) -> Pass {
    let mut out = Pass::default();
    let now = env.clock.now();
    // One read of the ledger serves the whole pass; a change (an expiry, a run claiming its note)
    // is a fresh, locked update, so a stale snapshot can never run a call twice.
    let ledger = crate::blocking::run(|| env.store.load()).approvals;
    expire(env, &ledger, now, &mut out);
    let settle = chrono::Duration::milliseconds(env.config.inbox.settle_ms as i64);
    let Ok(dir) = VaultPath::parse(super::FOLDER, false) else {
        return out;
    };
    let vault = env.vault.clone();
    let listing = crate::blocking::run(|| vault.list(&dir));
    let Ok(listing) = listing else {
        return out;
    };
    for entry in listing.entries.iter().filter(|e| e.is_file) {
        let name = entry.path.file_name();
        if !name.ends_with(".md") || note::is_conflict_copy(name) {
            continue;
        }
        // A note being saved, or synced in, is read once it has settled (DESIGN §5).
        let modified: Option<DateTime<Utc>> = entry.modified.map(DateTime::<Utc>::from);
        if let Some(m) = modified {
            if m + settle > now {
                let at = m + settle;
                out.next = Some(out.next.map_or(at, |n| n.min(at)));
                continue;
            }
        }
        let text = match crate::blocking::run(|| vault.read_text(&entry.path, MAX_NOTE_BYTES)) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("approvals: cannot read {}: {e}", entry.path);
                continue;
            }
        };
        let read = match note::read(&text) {
            Ok(r) => r,
            Err(why) => {
                tracing::debug!("approvals: {} skipped: {why}", entry.path);
                continue;
            }
        };
        act(env, &ledger, &entry.path, &text, read, &mut out).await;
    }
    let next_expiry = ledger
        .values()
        .filter(|a| a.phase == Phase::Pending)
        .map(|a| a.expires)
        .min();
    if let Some(e) = next_expiry {
        out.next = Some(out.next.map_or(e, |n| n.min(e)));
    }
    out
}

/// Pending requests past their `expires` become `expired`.
fn expire(
    env: &RunEnv,
    ledger: &std::collections::BTreeMap<String, Approval>,
    now: DateTime<Utc>,
    out: &mut Pass,
) {
    let due = |a: &Approval| a.phase == Phase::Pending && a.expires <= now;
    // Every pass looks; only a pass that finds one writes (and fsyncs) the ledger.
    if !ledger.values().any(due) {
        return;
    }
    let expired: Vec<(String, Approval)> = update(env, |s| {
        let mut v = Vec::new();
        for (id, a) in s.approvals.iter_mut() {
            if due(a) {
                a.phase = Phase::Expired;
                a.decided = Some(now);
                a.reported = false;
                a.outcome = Some("expired unanswered: nothing was run".into());
                v.push((id.clone(), a.clone()));
            }
        }
        v
    })
    .unwrap_or_default();
    for (id, a) in expired {
        let line = format!(
            "**Expired** ({}): nobody decided in time, so nothing was run. Approving it now does nothing.",
            stamp(now)
        );
        rewrite(env, &a.note, "expired", &line);
        daily(
            env,
            &a,
            &format!("approval `{id}` ({}) expired unanswered", a.tool),
        );
        out.expired.push(id);
    }
}

/// Acts on one settled note.
async fn act(
    env: &RunEnv,
    ledger: &std::collections::BTreeMap<String, Approval>,
    path: &VaultPath,
    text: &str,
    read: note::Read,
    out: &mut Pass,
) {
    let status = read.status.as_deref().unwrap_or("");
    if status != "approved" && status != "rejected" {
        return;
    }
    let now = env.clock.now();
    let record = read
        .id
        .as_ref()
        .and_then(|id| ledger.get(id).cloned().map(|a| (id.clone(), a)));
    let Some((id, a)) = record.filter(|(_, a)| a.note == path.as_str()) else {
        if status == "approved" {
            let line = "**Not run:** tabd has no record of asking for this call (was the note copied or \
                        written by hand?). Only notes tabd wrote can be approved.";
            if let Ok(t) = note::update(text, "invalid", line) {
                let _ = crate::blocking::run(|| env.vault.write_atomic(path, t.as_bytes()));
            }
            out.refused.push(path.to_string());
        }
        return;
    };
    if status == "rejected" {
        if a.phase.may_run() {
            // Decided on the fresh record: one that expired this very pass stays expired.
            let done = update(env, |s| match s.approvals.get_mut(&id) {
                Some(r) if r.phase.may_run() && !(r.phase == Phase::Pending && r.expires <= now) => {
                    r.phase = Phase::Rejected;
                    r.decided = Some(now);
                    r.reported = false;
                    r.outcome = Some("rejected by the person: nothing was run".into());
                    true
                }
                _ => false,
            });
            if done == Ok(true) {
                rewrite(
                    env,
                    &a.note,
                    "rejected",
                    &format!("**Rejected** ({}): nothing was run.", stamp(now)),
                );
                daily(
                    env,
                    &a,
                    &format!("approval `{id}` ({}) rejected — nothing ran", a.tool),
                );
                out.rejected.push(id);
            }
        }
        return;
    }
    // `approved`.
    if !a.phase.may_run() {
        let why = match a.phase {
            Phase::Done | Phase::Failed | Phase::Executing => format!(
                "it already ran ({}); an approval runs at most once. Ask the role again for a new request",
                a.phase.as_str()
            ),
            Phase::Expired => "it expired before it was approved".to_string(),
            _ => format!("it was {}", a.phase.as_str()),
        };
        let phase = if a.phase == Phase::Executing {
            "unknown"
        } else {
            a.phase.as_str()
        };
        rewrite(
            env,
            &a.note,
            phase,
            &format!("**Not run** ({}): {why}.", stamp(now)),
        );
        out.refused.push(id);
        return;
    }
    if a.phase == Phase::Pending && a.expires <= now {
        return; // expired this very pass (the snapshot predates it); `expire` wrote the note
    }
    run_approved(env, &id, &a, read.args, out).await;
}

/// Checks the approved call as it now stands and runs it once.
async fn run_approved(env: &RunEnv, id: &str, a: &Approval, args: Result<Value, String>, out: &mut Pass) {
    let now = env.clock.now();
    let invalid = |why: String| {
        let _ = update(env, |s| {
            if let Some(r) = s.approvals.get_mut(id) {
                r.phase = Phase::Invalid;
                r.decided = Some(now);
                r.outcome = Some(format!("invalid: {why}"));
            }
        });
        rewrite(
            env,
            &a.note,
            "invalid",
            &format!(
                "**Invalid** ({}): {why}. Nothing was run; fix it and set `status` to `approved` again.",
                stamp(now)
            ),
        );
        daily(env, a, &format!("approval `{id}` ({}) not run: {why}", a.tool));
    };
    let args = match args {
        Ok(Value::Object(m)) => m,
        Ok(other) => return invalid(format!("the arguments must be a JSON object, not {other}")),
        Err(why) => return invalid(why),
    };
    let Some(role) = env.roles.roles.get(&a.role) else {
        return invalid(format!("the role {} no longer exists or has errors", a.role));
    };
    if crate::approvals::mode_for(role, &a.tool, a.risk) == crate::calls::Mode::Deny {
        return invalid(format!("the role's `approve` setting now denies {}", a.tool));
    }
    let target = match a.tool.split_once('/') {
        Some((server, tool)) => {
            if !role.allows_mcp(server, tool) {
                return invalid(format!("the role no longer allows {}", a.tool));
            }
            let Some(config) = env.config.mcp.get(server) else {
                return invalid(format!("MCP server `{server}` is no longer in the config"));
            };
            let config = Arc::new(config.clone());
            let (conn, owned) = match (config.keep_alive, env.mcp_pool.as_ref()) {
                (true, Some(pool)) => (pool.get(server).await, false),
                _ => (Connection::start(config.clone(), &env.process_env).await, true),
            };
            let conn = match conn {
                Ok(c) => c,
                Err(down) => return invalid(format!("{down}, so nothing was sent")),
            };
            let schema = conn
                .tools()
                .await
                .into_iter()
                .find(|t| t.name == tool)
                .map(|t| t.schema);
            let Some(schema) = schema else {
                if owned {
                    conn.stop().await;
                }
                return invalid(format!("MCP server `{server}` no longer offers `{tool}`"));
            };
            let checked =
                crate::mcp::schema::InputSchema::new(&a.exposed, &schema).check(&Value::Object(args.clone()));
            if let Err(why) = checked {
                if owned {
                    conn.stop().await;
                }
                return invalid(format!("the arguments do not fit the tool's schema: {why}"));
            }
            Target::Mcp {
                conn,
                owned,
                tool: tool.to_string(),
            }
        }
        None => {
            if !role.has_tool(&a.tool) {
                return invalid(format!("the role no longer has the tool {}", a.tool));
            }
            Target::Vault
        }
    };
    // At most once: the ledger says `executing` (fsynced) before anything is sent.
    let claimed = update(env, |s| match s.approvals.get_mut(id) {
        Some(r) if r.phase.may_run() => {
            r.phase = Phase::Executing;
            r.executions += 1;
            true
        }
        _ => false,
    });
    if claimed != Ok(true) {
        if let Target::Mcp {
            conn, owned: true, ..
        } = &target
        {
            conn.stop().await;
        }
        if let Err(e) = claimed {
            tracing::error!("approvals: cannot record `executing` for {id}, so it does not run yet: {e}");
        }
        return;
    }
    rewrite(env, &a.note, "executing", "");
    let (ok, text) = match &target {
        Target::Mcp { conn, owned, tool } => {
            let r = match conn.call(tool, args.clone()).await {
                Ok(result) => {
                    let (text, is_error) = crate::mcp::content::to_text(&result);
                    (!is_error, text)
                }
                Err(why) => (false, why),
            };
            if *owned {
                conn.stop().await;
            }
            r
        }
        Target::Vault => {
            let policy = crate::access::AccessPolicy::for_role(role);
            let ctx = crate::tools::ToolContext {
                vault: &env.vault,
                role,
                roles: &env.roles,
                policy: &policy,
                hops: 0,
                max_chain_depth: role
                    .settings
                    .max_chain_depth
                    .unwrap_or(env.config.limits.max_chain_depth),
                now: now.with_timezone(&role.schedule.tz),
            };
            let input = Value::Object(args.clone());
            match crate::blocking::run(|| crate::tools::execute(&ctx, &a.tool, &input)) {
                Ok((result, _)) => (result.ok, result.text),
                Err(fatal) => (false, fatal.0),
            }
        }
    };
    let phase = if ok { Phase::Done } else { Phase::Failed };
    let end = env.clock.now();
    let outcome = format!(
        "{}: {}",
        phase.as_str(),
        crate::runlog::one_line(&text, MAX_OUTCOME)
    );
    let _ = update(env, |s| {
        if let Some(r) = s.approvals.get_mut(id) {
            r.phase = phase;
            r.decided = Some(end);
            r.reported = false;
            r.outcome = Some(outcome.clone());
        }
    });
    let shown = crate::mcp::content::cap(text, MAX_RESULT_IN_NOTE);
    // A fence longer than any run of backticks in the result, so the result cannot close it.
    let mut fence = "```".to_string();
    while shown.contains(&fence) {
        fence.push('`');
    }
    rewrite(
        env,
        &a.note,
        phase.as_str(),
        &format!(
            "## Result\nRan {} ({}), approved by you: **{}**.\n\n{fence}\n{shown}\n{fence}\n",
            stamp(end),
            a.tool,
            phase.as_str(),
        ),
    );
    daily(
        env,
        a,
        &format!(
            "approval `{id}` ({}) approved → {} — {}",
            a.tool,
            phase.as_str(),
            crate::runlog::wikilink(&a.note)
        ),
    );
    out.ran.push(id.to_string());
}

enum Target {
    Mcp {
        conn: Arc<Connection>,
        owned: bool,
        tool: String,
    },
    Vault,
}

/// Sets the note's status and appends `line`; a note the person deleted stays deleted.
fn rewrite(env: &RunEnv, note_path: &str, status: &str, line: &str) {
    crate::blocking::run(|| rewrite_now(env, note_path, status, line));
}

fn rewrite_now(env: &RunEnv, note_path: &str, status: &str, line: &str) {
    let Ok(path) = VaultPath::parse(note_path, false) else {
        return;
    };
    let Ok(text) = env.vault.read_text(&path, MAX_NOTE_BYTES) else {
        return;
    };
    match note::update(&text, status, line) {
        Ok(t) => {
            if let Err(e) = env.vault.write_atomic(&path, t.as_bytes()) {
                tracing::error!("approvals: cannot update {path}: {e}");
            }
        }
        Err(e) => {
            tracing::warn!("approvals: {path}: its frontmatter cannot be read ({e}); status not updated")
        }
    }
}

fn daily(env: &RunEnv, a: &Approval, text: &str) {
    let who = env
        .roles
        .roles
        .get(&a.role)
        .map_or(a.role.as_str(), |r| r.display_name.as_str());
    if let Err(e) = crate::blocking::run(|| env.log.write_line(env.clock.now(), who, text)) {
        tracing::warn!("approvals: cannot write the daily log: {e}");
    }
}
