//! `tabd mcp list [--role ROLE] [--json]`: starts the configured MCP servers, lists their tools
//! with risk classes and the roles that see each, and reports the servers that failed to start
//! with their stderr tail (docs/spec.md §14). `tabd mcp serve`: the role's tools as an MCP server
//! (docs/spec.md §16), for an MCP client, or relayed to a running run's harness for its CLI.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{CliError, Workspace};
use crate::base::calls::ToolCallRecord;
use crate::base::cost::Account;
use crate::base::trigger::Trigger;
use crate::base::vault::Durability;
use crate::capabilities::mcp::client::Connection;
use crate::capabilities::mcp::naming::exposed_name;
use crate::capabilities::mcp::tools::risk_of;
use crate::gate::harness::Harness;
use crate::records::limits::{day_spent, day_stop, stop_sentence, DailyStop};
use crate::records::runlog::{HumanRun, Outcome, RunRecord, TriggerRecord, UsageRecord};
use crate::records::state::LastRun;
use crate::running::mcp_server::{serve_stdio, Admit, HarnessServer, NotAdmitted, OnCall};
use crate::running::run::session::{OpenedBy, Opening, Servers, Session};
use crate::running::run::{RunEnv, RunResult};
use crate::setup::config::mcp::{ServerConfig, Transport};
use crate::setup::role::{Role, RoleSet};

#[derive(Debug, Serialize)]
struct Listing {
    servers: Vec<ServerReport>,
}

#[derive(Debug, Serialize)]
struct ServerReport {
    name: String,
    /// `stdio` or `http`.
    transport: &'static str,
    /// The command line or the URL (never headers or env: they hold secrets).
    target: String,
    keep_alive: bool,
    required: bool,
    /// Roles that use the server at all.
    roles: Vec<String>,
    /// `ok` or `down`.
    status: &'static str,
    error: Option<String>,
    stderr: Option<String>,
    /// The protocol line it speaks (`2026-07-28 (stateless)`, `2025-11-25 (handshake)`; docs/spec.md
    /// §29); none when it is down.
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol: Option<String>,
    /// What a command server may reach (docs/spec.md §20); none for an HTTP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<SandboxReport>,
    tools: Vec<ToolReport>,
}

/// The rules a command server runs under, as applied (docs/spec.md §20).
#[derive(Debug, Serialize)]
struct SandboxReport {
    /// The kernel enforces it (else the server starts unsandboxed, or not at all with
    /// `[sandbox] require`).
    enforced: bool,
    /// Why it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    why_not: Option<String>,
    landlock_abi: u8,
    /// What this kernel cannot enforce of the rules below (each with the kernel that can).
    not_enforced: Vec<String>,
    vault: &'static str,
    network: bool,
    /// Everything is readable but these (the vault, tabd's places, secrets, `deny_read`).
    hidden: Vec<String>,
    /// Readable even so (the vault's entries with `vault = "read"`, `readable`).
    readable: Vec<String>,
    /// Its own folders: writable, checked at every start, outside the vault.
    own: Vec<String>,
    /// Writable beyond its own folders (`writable`, paths named in `env` and `args`, the vault).
    writable: Vec<String>,
    devices: Vec<String>,
    unix_sockets: Vec<String>,
    /// Paths the config named that were granted, and those that were not (and why).
    granted: Vec<String>,
    refused: Vec<String>,
}

fn sandbox_report(
    server: &ServerConfig,
    launcher: &crate::base::process::Launcher,
    support: &crate::base::sandbox::Support,
) -> Option<SandboxReport> {
    let grants = crate::capabilities::mcp::client::planned_grants(server, launcher)?;
    let show = |v: &[std::path::PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
    let spec = &grants.spec;
    Some(SandboxReport {
        enforced: support.enforced(),
        why_not: (!support.enforced()).then(|| support.describe()),
        landlock_abi: support.abi(),
        not_enforced: if support.enforced() {
            support.gaps()
        } else {
            Vec::new()
        },
        vault: server.sandbox.vault.as_str(),
        network: spec.network,
        hidden: show(&spec.hidden),
        readable: show(&spec.readable),
        own: show(&spec.private),
        writable: show(&spec.writable),
        devices: show(&spec.devices),
        unix_sockets: show(&spec.sockets),
        granted: grants.granted,
        refused: grants.refused,
    })
}

#[derive(Debug, Serialize)]
struct ToolReport {
    name: String,
    /// The name the model sees.
    exposed: String,
    risk: &'static str,
    description: String,
    /// Roles allowed to call it.
    roles: Vec<String>,
}

pub fn list(ws: &Workspace, role: Option<&str>, json: bool) -> Result<u8, CliError> {
    let servers: Vec<Arc<ServerConfig>> = match role {
        None => ws.config.mcp.values().cloned().map(Arc::new).collect(),
        Some(name) => {
            let Some(r) = ws.roles.roles.get(name) else {
                return Err(CliError::usage(unknown_role(&ws.roles, name)));
            };
            r.mcp_servers()
                .into_iter()
                .filter_map(|s| ws.config.mcp.get(s).cloned().map(Arc::new))
                .collect()
        }
    };
    if servers.is_empty() {
        let msg = match role {
            Some(r) => {
                format!("Role {r} uses no MCP server (see `## Tools` in its role file and docs/mcp.md).")
            }
            None => "No MCP servers are configured. Add an [mcp.NAME] table to the config: see docs/mcp.md."
                .into(),
        };
        if json {
            say!("{{\"servers\":[]}}");
        } else {
            say!("{msg}");
        }
        return Ok(0);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    let reports = rt.block_on(async {
        // Whether the kernel can sandbox is asked once for all servers.
        let support = crate::base::sandbox::Probe::default().support();
        futures::future::join_all(servers.iter().map(|s| inspect(ws, s.clone(), role, &support))).await
    });
    let listing = Listing { servers: reports };
    // The grants name paths expanded from `${VAR}`; a server's error may quote its settings.
    let secrets = ws.env.redactor();
    if json {
        let mut value = serde_json::to_value(&listing).map_err(|e| CliError::failed(e.to_string()))?;
        secrets.apply_json(&mut value);
        say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        say_raw!("{}", secrets.apply(&render(&listing)));
    }
    Ok(if listing.servers.iter().any(|s| s.status == "down") {
        1
    } else {
        0
    })
}

fn unknown_role(roles: &RoleSet, name: &str) -> String {
    if roles.broken.contains_key(name) {
        return format!("role {name} has errors; run `tabd validate` to see them");
    }
    let known: Vec<&str> = roles.roles.keys().map(String::as_str).collect();
    format!("no role named {name} (roles: {})", known.join(", "))
}

/// Starts one server, lists its tools and stops it.
async fn inspect(
    ws: &Workspace,
    server: Arc<ServerConfig>,
    only: Option<&str>,
    support: &crate::base::sandbox::Support,
) -> ServerReport {
    let role_filter = |r: &&crate::setup::role::Role| only.is_none_or(|o| r.name == o);
    let users: Vec<String> = ws
        .roles
        .roles
        .values()
        .filter(role_filter)
        .filter(|r| r.mcp_servers().contains(&server.name.as_str()))
        .map(|r| r.name.clone())
        .collect();
    let (transport, target) = match &server.transport {
        Transport::Stdio { command, args, .. } => {
            let mut line = vec![command.clone()];
            line.extend(args.iter().cloned());
            ("stdio", line.join(" "))
        }
        Transport::Http { url, .. } => ("http", crate::base::text::display_endpoint(url)),
    };
    let mut report = ServerReport {
        name: server.name.clone(),
        transport,
        target,
        keep_alive: server.keep_alive,
        required: server.required,
        roles: users,
        sandbox: sandbox_report(&server, &ws.launcher(None), support),
        status: "ok",
        error: None,
        stderr: None,
        protocol: None,
        tools: Vec::new(),
    };
    match Connection::start(server.clone(), &ws.launcher(None)).await {
        Ok(conn) => {
            report.protocol = conn.line().map(|l| l.to_string());
            for t in conn.tools().await {
                let roles = ws
                    .roles
                    .roles
                    .values()
                    .filter(role_filter)
                    .filter(|r| r.allows_mcp(&server.name, &t.name))
                    .map(|r| r.name.clone())
                    .collect();
                report.tools.push(ToolReport {
                    exposed: exposed_name(&server.name, &t.name),
                    risk: risk_of(&server, &t).as_str(),
                    description: crate::base::text::one_line(t.description.lines().next().unwrap_or(""), 80),
                    name: t.name,
                    roles,
                });
            }
            conn.stop().await;
        }
        Err(down) => {
            report.status = "down";
            report.error = Some(down.why);
            report.stderr = (!down.stderr.is_empty()).then_some(down.stderr);
        }
    }
    report
}

fn render(listing: &Listing) -> String {
    let mut out = String::new();
    for s in &listing.servers {
        let life = if s.keep_alive { "kept alive" } else { "per run" };
        let req = if s.required { ", required" } else { "" };
        let users = if s.roles.is_empty() {
            "no role uses it".to_string()
        } else {
            format!("used by {}", s.roles.join(", "))
        };
        out.push_str(&format!(
            "{} ({} `{}`, {life}{req}) — {users}\n",
            s.name, s.transport, s.target
        ));
        if let Some(p) = &s.protocol {
            out.push_str(&format!("  protocol: MCP {p}\n"));
        }
        if let Some(sb) = &s.sandbox {
            out.push_str(&render_sandbox(sb));
        }
        if let Some(e) = &s.error {
            out.push_str(&format!("  DOWN: {e}\n"));
            if let Some(tail) = &s.stderr {
                out.push_str("  its last output:\n");
                for line in tail.lines() {
                    out.push_str(&format!("    | {line}\n"));
                }
            }
            out.push('\n');
            continue;
        }
        if s.tools.is_empty() {
            out.push_str("  (no tools)\n\n");
            continue;
        }
        let width = s.tools.iter().map(|t| t.exposed.len()).max().unwrap_or(0);
        for t in &s.tools {
            let who = if t.roles.is_empty() {
                "no role".to_string()
            } else {
                t.roles.join(", ")
            };
            out.push_str(&format!(
                "  {:<width$}  {:<11}  {:<20}  {}\n",
                t.exposed, t.risk, who, t.description
            ));
        }
        out.push('\n');
    }
    out
}

fn render_sandbox(sb: &SandboxReport) -> String {
    let writes: Vec<&str> = sb.own.iter().chain(&sb.writable).map(String::as_str).collect();
    let mut out = format!(
        "  sandbox: {} · vault {} · {} · reads all but {} hidden places · writes {}{}\n",
        if sb.enforced { "enforced" } else { "NOT ENFORCED" },
        sb.vault,
        if sb.network { "network" } else { "no network" },
        sb.hidden.len(),
        writes.join(", "),
        sb.why_not.as_ref().map_or(String::new(), |w| format!(" ({w})"))
    );
    if !sb.unix_sockets.is_empty() {
        out.push_str(&format!("  sockets: {}\n", sb.unix_sockets.join(", ")));
    }
    for gap in &sb.not_enforced {
        out.push_str(&format!("  this kernel cannot enforce: {gap}\n"));
    }
    for note in &sb.granted {
        out.push_str(&format!("  granted: {note}\n"));
    }
    for note in &sb.refused {
        out.push_str(&format!("  not granted: {note}\n"));
    }
    out
}

/// `tabd mcp serve --role ROLE`: the role's tools for an MCP client (Claude Desktop, Claude Code),
/// through the same harness as a run; stdout is the MCP connection, logs go to stderr. A session
/// is a run of the role (`ServeRun`): refused at start when the role is disabled or its day is
/// spent; each call gets a line in today's daily log as it happens, and the session its record
/// and daily section when it ends.
pub fn serve(ws: &Workspace, role: &str) -> Result<u8, CliError> {
    let role = super::fire::runnable_role(ws, role)?.clone();
    super::pause::refuse_if_paused(ws, &role, "`tabd mcp serve` (a session is a run of the role)")?;
    let env = ws.run_env()?;
    may_serve(&env, &role)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    let telemetry = env.telemetry.clone();
    let served = rt.block_on(serve_session(env, role));
    telemetry.shutdown();
    served.map_err(|e| CliError::failed(format!("mcp serve: {e:#}")))?;
    Ok(0)
}

/// A session the role's state does not allow is refused before it starts, with the check the
/// daemon makes before a run: a disabled role (exit 2: its file says so), or a day spent — its
/// runs per day, its daily or the global budget (exit 1, as `tabd fire` says it).
fn may_serve(env: &RunEnv, role: &Role) -> Result<(), CliError> {
    if !role.enabled() {
        return Err(CliError::usage(format!(
            "role `{}` is disabled (`enabled: false` in {}), and a `tabd mcp serve` session is a run of it: set `enabled: true` to serve it",
            role.name,
            role.path.display()
        )));
    }
    let today = env.clock.now().with_timezone(&env.config.timezone).date_naive();
    // Today's spend as the run records tell it, should state have lost a run.
    if let Err(e) = crate::records::spent::count_again(&env.store, env.config.timezone, env.clock.now()) {
        tracing::warn!("cannot count today's spend from the run records: {e}");
    }
    match day_spent(role, &env.config.limits, &env.store.load(), today) {
        Some(why) => Err(CliError::failed(format!(
            "{why}, and a `tabd mcp serve` session is a run of the role: it is served again after midnight"
        ))),
        None => Ok(()),
    }
}

async fn serve_session(env: RunEnv, role: Role) -> anyhow::Result<()> {
    // A session like a run's: its own id and journal (undoable), the role's ceilings on what
    // it and its children spend, a chain that starts here (hops 0).
    let now = env.clock.now();
    let trigger = Trigger::manual();
    let session = Session::open(
        &env,
        Opening {
            opened_by: OpenedBy::McpServe,
            role: &role,
            trigger: &trigger,
            id: crate::base::run_id::RunId::new(&role.name, now),
            started: now,
            hops: 0,
            lineage: Default::default(),
            servers: Servers::All,
            depth_left: None,
        },
    )
    .await;
    for d in &session.mcp.down {
        tracing::warn!("mcp serve: {}; its tools are not offered", d.problem);
    }
    // One harness for the whole session: `max_tool_calls` counts every call the client makes.
    let harness = Arc::new(session.harness(session.ticket(Some(session.asks()), Default::default())));
    let run = Arc::new(ServeRun {
        env: env.clone(),
        role: role.clone(),
        id: session.id.to_string(),
        started: session.started,
        account: session.account.clone(),
        day: Mutex::default(),
    });
    let on_call: OnCall = {
        let run = run.clone();
        Arc::new(move |record| run.called(record))
    };
    let admit: Admit = {
        let run = run.clone();
        Arc::new(move || run.admit())
    };
    let server = HarnessServer::new(harness.clone(), Some(on_call)).with_admit(admit);
    let served = until_stopped(serve_stdio(server.clone())).await;
    run.close(&session, &harness, server.limit_reached());
    session.close(&[]).await;
    served
}

/// Serves until the client leaves, or until SIGTERM or SIGINT (a client may stop its server so):
/// either way the session is then closed and recorded.
async fn until_stopped(serving: impl std::future::Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        served = serving => served,
        () = terminated => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// A `tabd mcp serve` session as a run of its role (docs/spec.md §6, §21): it counts in the role's
/// runs per day from its first call (a client that only looks at the tools has not run the
/// role), what it spends (its delegated runs) counts in the role's day as it goes, a call after
/// the day is spent is refused with a sentence the client reads, and when it ends it is recorded
/// as the other doors' runs are: a JSONL record, a daily section, the role's last run.
/// `max_tool_calls` holds for the whole session: its one harness counts every call.
struct ServeRun {
    env: RunEnv,
    role: Role,
    id: String,
    started: DateTime<Utc>,
    /// The session's account: what its delegated runs spent.
    account: Account,
    day: Mutex<ServeDay>,
}

/// Where a session stands in its role's day.
#[derive(Default)]
struct ServeDay {
    /// Counted in the role's runs per day (at its first call).
    counted: bool,
    /// Tokens and dollars already added to the role's day.
    settled: (u64, f64),
    /// Why every call is refused from now on (the role's day was spent during the session).
    refused: Option<String>,
}

impl ServeRun {
    fn today(&self) -> chrono::NaiveDate {
        self.env
            .clock
            .now()
            .with_timezone(&self.env.config.timezone)
            .date_naive()
    }

    fn day(&self) -> std::sync::MutexGuard<'_, ServeDay> {
        self.day.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before each call. The first counts the session as a run of the role if its day allows one
    /// more (checked and counted in one update: two sessions cannot both take the last run);
    /// every later one checks the day's tokens and dollars (its own run is counted already).
    fn admit(&self) -> Result<(), NotAdmitted> {
        // A pause that lands while the session is open refuses its calls from then on.
        let pauses =
            crate::records::state::pause::PauseStore::new(self.env.vault.clone(), Some(self.env.key.clone()));
        if let Some(why) = pauses.refusal(&self.role.name, self.env.clock.now(), self.env.config.timezone) {
            return Err(NotAdmitted::Paused { why });
        }
        let mut day = self.day();
        if let Some(why) = &day.refused {
            return Err(NotAdmitted::DaySpent { why: why.clone() });
        }
        let (today, global) = (self.today(), &self.env.config.limits);
        let stop = if day.counted {
            day_stop(&self.role, global, &self.env.store.load(), today)
                .filter(|s| *s != DailyStop::RunsPerDay)
        } else {
            let counted = self.env.store.update(|s| {
                let stop = day_stop(&self.role, global, s, today);
                if stop.is_none() {
                    let r = s.role(&self.role.name);
                    r.roll_day(today);
                    r.runs_today += 1;
                }
                stop
            });
            match counted {
                Ok(stop) => {
                    day.counted = stop.is_none();
                    stop
                }
                Err(source) => {
                    return Err(NotAdmitted::NotCounted {
                        role: self.role.name.clone(),
                        source,
                    })
                }
            }
        };
        let Some(stop) = stop else { return Ok(()) };
        let why = stop_sentence(&self.role, stop);
        self.env.side.check(
            "the daily note (a session's calls refused)",
            self.env.log.write_line(
                self.env.clock.now(),
                &self.role.display_name,
                &format!("via MCP: calls refused from now on — {why}"),
            ),
        );
        day.refused = Some(why.clone());
        Err(NotAdmitted::DaySpent { why })
    }

    /// After each call: its daily-log line, and what the session spent counted in the role's day.
    fn called(&self, record: &ToolCallRecord) {
        crate::base::blocking::run(|| {
            self.env.side.check(
                "the daily note (a session's call)",
                self.env
                    .log
                    .write_line(self.env.clock.now(), &self.role.display_name, &call_line(record)),
            );
            self.settle();
        });
    }

    /// Adds to the role's day what the session spent since the last time (its delegated runs
    /// counted it in their own roles' days and the global one already, as under a run).
    fn settle(&self) {
        let (tokens, usd) = self.account.spent();
        let mut day = self.day();
        let (more_tokens, more_usd) = (tokens.saturating_sub(day.settled.0), usd - day.settled.1);
        if more_tokens == 0 && more_usd <= 0.0 {
            return;
        }
        let today = self.today();
        let added = self.env.store.update_with(Durability::File, |s| {
            let r = s.role(&self.role.name);
            r.roll_day(today);
            r.tokens_today += more_tokens;
            r.cost_today_usd += more_usd;
        });
        match added {
            Ok(()) => day.settled = (tokens, usd),
            Err(e) => tracing::warn!(
                "mcp serve: cannot count what the session spent in role {}'s day: {e}",
                self.role.name
            ),
        }
    }

    /// Once the client has gone: the session's record, daily section and the role's last run —
    /// for a session that was a run (one that made no call leaves nothing but its closed journal).
    fn close(&self, session: &Session, harness: &Harness, limit: Option<String>) {
        crate::base::blocking::run(|| self.settle());
        let children = session.take_children();
        let (counted, refused) = {
            let day = self.day();
            (day.counted, day.refused.clone())
        };
        if !counted {
            for child in &children {
                self.env.side.check(
                    "the daily note (a delegated run's section)",
                    self.env
                        .log
                        .append_daily(&child.daily_log, &child.delegated_section),
                );
            }
            return;
        }
        let (record, human) = self.record(harness, limit.or(refused), &children);
        crate::running::run::session::end_trace(&session.trace, &record);
        crate::base::blocking::run(|| self.write(&record, &human));
    }

    /// The session as a run's record and daily section.
    fn record(
        &self,
        harness: &Harness,
        limit: Option<String>,
        children: &[RunResult],
    ) -> (RunRecord, HumanRun) {
        let log = harness.log();
        let record = RunRecord {
            run_id: self.id.clone(),
            role: self.role.name.clone(),
            trigger: TriggerRecord::of(&Trigger::manual(), Vec::new()),
            started_at: self.started,
            ended_at: self.env.clock.now(),
            outcome: if limit.is_some() {
                Outcome::Limit
            } else {
                Outcome::Ok
            },
            error: limit.map(|l| format!("limit reached: {l}")),
            model: String::new(),
            requests: 0,
            usage: UsageRecord::default(),
            tool_calls: log.calls,
            moved: Vec::new(),
            children: children.iter().map(|c| c.record.run_id.clone()).collect(),
            ended: None,
            notes_truncated: Vec::new(),
            triage: None,
        };
        let mut notes = vec!["**Session:** an MCP client's, through `tabd mcp serve`".to_string()];
        notes.extend(log.notes);
        let human = HumanRun {
            display_name: self.role.display_name.clone(),
            changes: log.changes,
            notes,
            children: children.iter().map(|c| c.delegated_section.clone()).collect(),
            children_spent: children.iter().fold((0, 0.0), |(t, d), c| {
                (t + c.record.usage.tokens.total(), d + c.record.usage.cost_usd)
            }),
            ..HumanRun::default()
        };
        (record, human)
    }

    fn write(&self, record: &RunRecord, human: &HumanRun) {
        let log = &self.env.log;
        if let Err(e) = log.append_daily(&log.daily_path(record.started_at), &log.render_run(record, human)) {
            tracing::error!("mcp serve: cannot write the session's daily section: {e}");
        }
        if let Err(e) = log.write_record(record) {
            tracing::error!("mcp serve: cannot write the session's run record: {e}");
        }
        let last = LastRun {
            run_id: record.run_id.clone(),
            started_at: record.started_at,
            ended_at: record.ended_at,
            outcome: record.outcome.as_str().to_string(),
            error: record.error.clone(),
            tokens: record.usage.tokens.total(),
            trigger: record.trigger.kind.as_str().to_string(),
            cost_usd: record.usage.cost_usd,
        };
        let kept = self.env.store.update_with(Durability::File, |s| {
            s.role(&self.role.name).last_run = Some(last);
        });
        if let Err(e) = kept {
            tracing::error!("mcp serve: cannot record the session as the role's last run: {e}");
        }
    }
}

/// One call of an interactive session, for the daily log.
fn call_line(record: &ToolCallRecord) -> String {
    let mut text = format!("via MCP: `{}`", record.name);
    if let Some(p) = record.input.get("path").and_then(serde_json::Value::as_str) {
        text.push_str(&format!(" {p}"));
    }
    if let Some(note) = &record.approval {
        text.push_str(&format!(
            " — waiting for approval in {}",
            crate::records::runlog::wikilink(note)
        ));
    } else if let Some(e) = &record.error {
        text.push_str(&format!(" — {}", crate::base::text::one_line(e, 160)));
    }
    text
}

/// `tabd mcp serve --run-id ID --socket PATH`: relays to a running run's tools (no vault, no
/// config needed: the run holds the authority).
pub fn bridge(socket: &std::path::Path) -> Result<u8, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    rt.block_on(crate::running::mcp_server::bridge(socket))
        .map_err(|e| CliError::failed(format!("mcp serve: {e:#}")))?;
    Ok(0)
}
