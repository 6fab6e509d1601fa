//! A turn through an agent CLI (docs/spec.md §16). The run serves its own harness on a Unix socket in
//! a private folder outside the vault; the CLI runs in that folder (so nothing a role wrote into
//! the vault can become its settings, hooks, MCP config or instructions) and reaches tabd's
//! tools through `tabd mcp serve --run-id ID --socket PATH`, which only relays. The limits, hops
//! and the record therefore stay in this process.

use std::path::Path;
use std::sync::Arc;

use super::env::RunEnv;
use super::prepare::Prepared;
use crate::base::process::Launcher;
use crate::capabilities::agent_cli::{self, CliEnd, CliTurn, ServerCommand};
use crate::capabilities::provider::{Block, ProviderError, Request};
use crate::gate::harness::Harness;
use crate::running::mcp_server::{HarnessServer, RelayGate, SocketServer};
use crate::running::turn::{TurnEnd, TurnOutcome};
use crate::setup::role::Role;

fn failed(message: String, outage: bool) -> TurnOutcome {
    TurnOutcome::ended(TurnEnd::Failed(ProviderError::Cli {
        provider: "command",
        message,
        outage,
    }))
}

/// The prompt as one text: the system prompt, then the first user message.
pub fn prompt_text(req: &Request) -> String {
    let user: Vec<&str> = req
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    format!("{}\n\n---\n\n{}\n", req.system.trim_end(), user.join("\n\n"))
}

/// Why a run's private folder could not be made.
#[derive(Debug, thiserror::Error)]
enum RunFolderError {
    #[error(transparent)]
    Root(#[from] crate::base::sandbox::folders::FolderError),
    #[error(transparent)]
    Made(#[from] std::io::Error),
}

/// A private folder (0700) of the run's own, removed when it is dropped: under tabd's own state
/// folder outside the vault (private to tabd's user, hidden from every other child), never the
/// vault or a shared temp folder.
fn run_folder(launcher: &Launcher, role: &Role) -> Result<tempfile::TempDir, RunFolderError> {
    let root = crate::base::sandbox::folders::make_root(&launcher.places().runs())?;
    Ok(tempfile::Builder::new()
        .prefix(&format!("{}-", role.name))
        .tempdir_in(root)?)
}

/// tabd's own executable, for the CLI to start as its MCP server.
fn tabd_exe() -> String {
    std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "tabd".into())
}

pub(super) async fn turn(
    env: &RunEnv,
    role: &Role,
    prep: &Prepared,
    request: &Request,
    harness: Arc<Harness>,
) -> TurnOutcome {
    let Some(profile) = env.config.provider.profile.clone() else {
        return failed("kind = \"command\" without a profile".into(), true);
    };
    let child_env = match agent_cli::child_env(&profile, &env.launcher.env) {
        Ok(e) => e,
        Err(why) => return failed(why.to_string(), true),
    };
    if let Err(why) = env
        .probes
        .check(&profile, &child_env, &env.launcher, env.clock.instant())
        .await
    {
        return failed(why.to_string(), true);
    }
    let dir = match run_folder(&env.launcher, role) {
        Ok(d) => d,
        Err(e) => return failed(format!("cannot make the run's folder: {e}"), false),
    };
    let socket_path = dir.path().join("mcp.sock");
    let (gate, keeper) = match RelayGate::new(&socket_path) {
        Ok(g) => g,
        Err(e) => return failed(format!("cannot make the run's key: {e}"), false),
    };
    // Kept to read what limit ended its calls, once the CLI is done.
    let tools_server = HarnessServer::new(harness.clone(), None);
    let server = match SocketServer::start(tools_server.clone(), &socket_path, gate) {
        Ok(s) => s,
        Err(e) => return failed(format!("cannot serve tabd's tools to the CLI: {e}"), false),
    };
    let tools: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
    let text = prompt_text(request);
    env.progress.emit(crate::base::progress::Step::Starting(format!(
        "the {} CLI",
        profile.name
    )));
    let kept_aside = std::sync::Mutex::new(Vec::new());
    let end = agent_cli::run(CliTurn {
        profile: &profile,
        prompt: &text,
        dir: dir.path(),
        relay: &socket_path,
        started: Some(&keeper),
        server: serve_command(role, &prep.id, &socket_path),
        tools: &tools,
        env: child_env,
        deadline: prep.limits.run_deadline,
        launcher: &env.launcher,
        kept_aside: &kept_aside,
    })
    .await;
    for line in kept_aside.into_inner().unwrap_or_else(|p| p.into_inner()) {
        harness.note(line);
    }
    let connected = server.connected();
    drop(server);
    outcome_of(end, connected, dir.path(), tools_server.limit_reached())
}

/// `tabd mcp serve --role R --run-id ID --socket PATH` (docs/spec.md §16's command, with the socket).
fn serve_command(role: &Role, run_id: &str, socket: &Path) -> ServerCommand {
    ServerCommand {
        command: tabd_exe(),
        args: vec![
            "mcp".into(),
            "serve".into(),
            "--role".into(),
            role.name.clone(),
            "--run-id".into(),
            run_id.into(),
            "--socket".into(),
            socket.to_string_lossy().into_owned(),
        ],
    }
}

/// What the CLI's turn came to; `limit`: the limit that refused one of its calls (the day's
/// budget, `max_tool_calls`) — its run ends as `limit`, as an API run's would.
fn outcome_of(end: CliEnd, connected: bool, dir: &Path, limit: Option<String>) -> TurnOutcome {
    match end {
        CliEnd::NotStarted { message, outage } => failed(message, outage),
        CliEnd::Deadline => {
            TurnOutcome::ended(TurnEnd::Failed(ProviderError::Deadline { provider: "command" }))
        }
        CliEnd::Finished(report) => {
            let failure = match report.failure {
                Some((message, outage)) => Some((message, outage)),
                // A CLI that never reached tabd's tools did nothing tabd can vouch for: its
                // notes must not move to processed/ as if the run had worked.
                None if !connected => Some((
                    format!(
                        "the CLI never connected to tabd's tools (its MCP server, started from {}); \
                         check that the CLI can run `tabd` and reads its --mcp-config",
                        dir.display()
                    ),
                    true,
                )),
                None => None,
            };
            let mut o = TurnOutcome::ended(match failure {
                None => limit.map_or(TurnEnd::Done, TurnEnd::Limit),
                Some((message, outage)) => TurnEnd::Failed(ProviderError::Cli {
                    provider: "command",
                    message,
                    outage,
                }),
            });
            o.summary = report.summary;
            o.usage = report.usage;
            o.cost_usd = report.cost_usd;
            o.model = report.model;
            o.requests = 1;
            o
        }
    }
}
