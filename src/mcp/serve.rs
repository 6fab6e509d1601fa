//! `tabd mcp serve --role ROLE [--run-id ID]` (DESIGN §16): the role's tools as an MCP server on
//! stdio. Every call goes through the same harness as an API run — the role's tool list, the vault
//! sandbox, `deny_tools`, `approve` and `max_tool_calls` — so a CLI agent (or Claude Desktop) driving
//! tabd's tools has exactly the authority the role has, no more.
//!
//! With `--run-id`, every call is appended to `.tabd/calls/<run-id>.jsonl`, from which the run that
//! started the CLI builds its record. Without it (interactive use), each call gets a daily-log line.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::calls::ToolCallRecord;
use crate::run::RunEnv;
use crate::toolbox::Toolbox;
use crate::turn::ToolExecutor;
use crate::vault::VaultPath;

/// The folder of per-run call records (tabd's own: roles can neither read nor write it).
pub const CALLS_DIR: &str = ".tabd/calls";

/// The call record file of run `run_id`.
pub fn calls_path(run_id: &str) -> Option<VaultPath> {
    let safe = run_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
    if !safe || run_id.is_empty() || run_id.len() > 120 {
        return None;
    }
    VaultPath::parse(&format!("{CALLS_DIR}/{run_id}.jsonl"), false).ok()
}

/// One recorded call: what the run record shows, and what it changed in the vault (so the daemon
/// knows its own writes, as for an API run, and a role never fires itself through a CLI).
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorded {
    call: ToolCallRecord,
    #[serde(default)]
    changes: Vec<crate::calls::Change>,
}

/// Reads the calls a `tabd mcp serve --run-id` recorded, and their changes (lines that do not
/// parse are skipped).
pub fn read_calls(env: &RunEnv, run_id: &str) -> (Vec<ToolCallRecord>, Vec<crate::calls::Change>) {
    let Some(path) = calls_path(run_id) else {
        return Default::default();
    };
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    for line in env
        .vault
        .read_text(&path, 64 * 1024 * 1024)
        .unwrap_or_default()
        .lines()
    {
        if let Ok(r) = serde_json::from_str::<Recorded>(line) {
            calls.push(r.call);
            changes.extend(r.changes);
        }
    }
    (calls, changes)
}

#[derive(Clone)]
struct Server {
    toolbox: Arc<Toolbox>,
    env: RunEnv,
    run_id: Option<String>,
    max_tool_calls: u32,
    calls: Arc<AtomicU32>,
}

impl Server {
    /// The role's tools, annotated with their risk class so a client (or another tabd) can tell
    /// reads from writes.
    fn tools(&self) -> Vec<Tool> {
        use crate::calls::Risk;
        self.toolbox
            .specs()
            .into_iter()
            .map(|s| {
                let risk = crate::tools::vault_risk(&s.name)
                    .or_else(|| self.toolbox.mcp.get(&s.name).map(|t| t.risk));
                let schema = s.input_schema.as_object().cloned().unwrap_or_default();
                let tool = Tool::new(s.name, s.description, Arc::new(schema));
                let hints = ToolAnnotations::new();
                match risk {
                    Some(Risk::Read) => tool.annotate(hints.read_only(true)),
                    Some(Risk::Destructive) => tool.annotate(hints.destructive(true)),
                    Some(Risk::Write) => tool.annotate(hints.read_only(false).destructive(false)),
                    _ => tool,
                }
            })
            .collect()
    }

    fn record(&self, record: &ToolCallRecord, changes: &[crate::calls::Change]) {
        match &self.run_id {
            Some(id) => {
                let Some(path) = calls_path(id) else { return };
                let entry = Recorded {
                    call: record.clone(),
                    changes: changes.to_vec(),
                };
                let mut line = serde_json::to_string(&entry).unwrap_or_default();
                line.push('\n');
                if let Err(e) = self.env.vault.append(&path, &line, None, false) {
                    tracing::error!("mcp serve: cannot record the call in {path}: {e}");
                }
            }
            None => {
                let mut text = format!("via MCP: `{}`", record.name);
                if let Some(p) = record.input.get("path").and_then(Value::as_str) {
                    text.push_str(&format!(" {p}"));
                }
                if let Some(note) = &record.approval {
                    text.push_str(&format!(
                        " — waiting for approval in {}",
                        crate::runlog::wikilink(note)
                    ));
                } else if let Some(e) = &record.error {
                    text.push_str(&format!(" — {}", crate::runlog::one_line(e, 160)));
                }
                let _ = self
                    .env
                    .log
                    .write_line(self.env.clock.now(), &self.toolbox.role.display_name, &text);
            }
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n > self.max_tool_calls {
            let text = format!(
                "not run: this run reached its limit of {} tool calls; finish with a summary",
                self.max_tool_calls
            );
            return Ok(CallToolResult::error(vec![Content::text(text)]).into());
        }
        let reason = "(asked through tabd's MCP server; the client gave no reason)";
        let answer = self.toolbox.call(&request.name, &input, reason).await;
        let (result, record) = match answer {
            Ok(r) => r,
            Err(fatal) => {
                tracing::error!("mcp serve: {fatal}");
                return Err(ErrorData::internal_error(fatal.0, None));
            }
        };
        self.record(&record, &result.changes);
        let content = vec![Content::text(result.text)];
        Ok(if result.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        }
        .into())
    }
}

/// Serves `role`'s tools on stdin/stdout until the client closes the connection.
pub async fn serve(env: RunEnv, role: &crate::role::Role, run_id: Option<String>) -> anyhow::Result<()> {
    let limits = crate::limits::RoleLimits::resolve(role, &env.config.limits);
    let mut toolbox = Toolbox::new(
        env.vault.clone(),
        role,
        env.roles.clone(),
        0,
        limits.max_chain_depth,
        env.clock.clone(),
    );
    let mcp = Arc::new(crate::mcp::tools::RunTools::open(role, &env.config, &env.process_env, None).await);
    for d in &mcp.down {
        tracing::warn!("mcp serve: {}; its tools are not offered", d.problem);
    }
    toolbox.mcp = mcp.clone();
    let now = env.clock.now();
    toolbox.approvals = Some(crate::approvals::request::AskContext {
        run_id: run_id
            .clone()
            .unwrap_or_else(|| format!("{}-{}-mcp", now.format("%Y%m%dT%H%M%SZ"), role.name)),
        run_log: env.log.daily_path(now).as_str().to_string(),
        expire_after: env.config.approvals.expire_after,
        tz: env.config.timezone,
    });
    let server = Server {
        toolbox: Arc::new(toolbox),
        env: env.clone(),
        run_id,
        max_tool_calls: limits.max_tool_calls,
        calls: Arc::new(AtomicU32::new(0)),
    };
    let transport = (tokio::io::stdin(), tokio::io::stdout());
    let result = match server.serve(transport).await {
        Ok(service) => service.waiting().await.map(|_| ()).map_err(anyhow::Error::from),
        Err(e) => Err(anyhow::anyhow!("the MCP client did not start a session: {e}")),
    };
    mcp.close().await;
    result
}
