//! `tabd mcp list [--role ROLE] [--json]`: starts the configured MCP servers, lists their tools
//! with risk classes and the roles that see each, and reports the servers that failed to start
//! with their stderr tail (DESIGN §14). `tabd mcp serve`: the role's tools as an MCP server
//! (DESIGN §16), for an MCP client, or relayed to a running run's harness for its CLI.

use std::sync::Arc;

use serde::Serialize;

use super::{CliError, Workspace};
use crate::base::calls::ToolCallRecord;
use crate::capabilities::mcp::client::Connection;
use crate::capabilities::mcp::naming::exposed_name;
use crate::capabilities::mcp::tools::risk_of;
use crate::running::mcp_server::{serve_stdio, HarnessServer, OnCall};
use crate::running::run::session::{self, Door, Opening, Servers, Session};
use crate::setup::config::mcp::{ServerConfig, Transport};
use crate::setup::role::RoleSet;

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
    /// What a command server may reach (DESIGN §20); none for an HTTP server.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<SandboxReport>,
    tools: Vec<ToolReport>,
}

/// The rules a command server runs under, as applied (DESIGN §20).
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
            println!("{{\"servers\":[]}}");
        } else {
            println!("{msg}");
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
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        print!("{}", secrets.apply(&render(&listing)));
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
        Transport::Http { url, .. } => ("http", crate::base::text::display_url(url)),
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
        tools: Vec::new(),
    };
    match Connection::start(server.clone(), &ws.launcher(None)).await {
        Ok(conn) => {
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
/// through the same harness as a run; stdout is the MCP connection, logs go to stderr. Each call
/// gets a line in today's daily log.
pub fn serve(ws: &Workspace, role: &str) -> Result<u8, CliError> {
    let role = super::fire::runnable_role(ws, role)?.clone();
    let env = ws.run_env()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    rt.block_on(async move {
        // A session like a run's: its own id and journal (undoable), the role's ceilings on what
        // it and its children spend, a chain that starts here (hops 0).
        let now = env.clock.now();
        let trigger = crate::base::trigger::Trigger::manual();
        let session = Session::open(
            &env,
            Opening {
                door: Door::McpServe,
                role: &role,
                trigger: &trigger,
                id: session::new_id(&role.name, now),
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
        let harness = Arc::new(session.harness(session.ticket(Some(session.asks()), Default::default())));
        let log_env = env.clone();
        let display = role.display_name.clone();
        let on_call: OnCall = Arc::new(move |record| {
            let _ = log_env
                .log
                .write_line(log_env.clock.now(), &display, &call_line(record));
        });
        let served = serve_stdio(HarnessServer::new(harness, Some(on_call))).await;
        // Its children have no section of a run to sit in: each gets its own.
        for child in session.take_children() {
            let _ = env.log.append_daily(&child.daily_log, &child.delegated_section);
        }
        session.close(&[]).await;
        served
    })
    .map_err(|e| CliError::failed(format!("mcp serve: {e:#}")))?;
    Ok(0)
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
