//! `tabd mcp list [--role ROLE] [--json]`: starts the configured MCP servers, lists their tools
//! with risk classes and the roles that see each, and reports the servers that failed to start
//! with their stderr tail (DESIGN §14).

use std::sync::Arc;

use serde::Serialize;

use super::{CliError, Workspace};
use crate::config::mcp::{ServerConfig, Transport};
use crate::mcp::client::Connection;
use crate::mcp::naming::exposed_name;
use crate::mcp::tools::risk_of;
use crate::role::RoleSet;

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
    tools: Vec<ToolReport>,
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
        futures::future::join_all(servers.iter().map(|s| inspect(ws, s.clone(), role))).await
    });
    let listing = Listing { servers: reports };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&listing).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        print!("{}", render(&listing));
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
async fn inspect(ws: &Workspace, server: Arc<ServerConfig>, only: Option<&str>) -> ServerReport {
    let role_filter = |r: &&crate::role::Role| only.is_none_or(|o| r.name == o);
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
        Transport::Http { url, .. } => ("http", url.clone()),
    };
    let mut report = ServerReport {
        name: server.name.clone(),
        transport,
        target,
        keep_alive: server.keep_alive,
        required: server.required,
        roles: users,
        status: "ok",
        error: None,
        stderr: None,
        tools: Vec::new(),
    };
    match Connection::start(server.clone(), &ws.env).await {
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
                    description: crate::runlog::one_line(t.description.lines().next().unwrap_or(""), 80),
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

/// `tabd mcp serve --role ROLE [--run-id ID]`: stdout is the MCP connection; logs go to stderr.
pub fn serve(ws: &Workspace, role: &str, run_id: Option<String>) -> Result<u8, CliError> {
    let role = super::fire::runnable_role(ws, role)?;
    if let Some(id) = &run_id {
        if crate::mcp::serve::calls_path(id).is_none() {
            return Err(CliError::usage(format!(
                "--run-id {id}: use letters, digits, - and _ only"
            )));
        }
    }
    let env = ws.run_env()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    rt.block_on(crate::mcp::serve::serve(env, role, run_id))
        .map_err(|e| CliError::failed(format!("mcp serve: {e:#}")))?;
    Ok(0)
}
