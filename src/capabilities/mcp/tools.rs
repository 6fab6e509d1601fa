//! The MCP tools of one run: the servers the role names are started (in parallel, each under its
//! own startup timeout) or taken from the daemon's keep-alive pool; their tools become
//! `server__tool` for the model, filtered by the role's allow and deny lists; each call is
//! checked against the tool's schema, timed out and cancelled if it runs over, and its result
//! turned into text.

use std::sync::Arc;
use tokio::time::Instant;

use serde_json::Value;

use super::client::{Answer, CallError, Connection, ServerDown, ToolInfo};
use super::naming::exposed_name;
use super::pool::Pool;
use super::schema::InputSchema;
use crate::base::calls::ToolSpec;
use crate::base::calls::{Risk, ToolResult};
use crate::base::process::Launcher;
use crate::base::vault::leftovers::Stamp;
use crate::setup::config::Config;
use crate::setup::role::Role;

/// One MCP tool as a run offers it.
pub struct McpTool {
    /// The name the model sees (`server__tool`).
    pub exposed: String,
    pub server: String,
    pub tool: String,
    pub spec: ToolSpec,
    pub risk: Risk,
    schema: InputSchema,
    conn: Arc<Connection>,
    /// When the run must end: a task the server runs for a call is waited for until then at
    /// most (and its `task_timeout`). `None`: the task timeout alone.
    deadline: Option<Instant>,
}

/// A server a run could not use, and whether the role requires it.
#[derive(Debug, Clone)]
pub struct Down {
    pub problem: ServerDown,
    pub required: bool,
}

/// The MCP side of a run.
#[derive(Default)]
pub struct RunTools {
    tools: Vec<McpTool>,
    pub down: Vec<Down>,
    /// Servers started for this run alone, stopped by `close`.
    owned: Vec<Arc<Connection>>,
}

/// A tool's risk class (docs/spec.md §15): the config's `risk` table, else the server's hints, else
/// `network`.
pub fn risk_of(config: &crate::setup::config::mcp::ServerConfig, tool: &ToolInfo) -> Risk {
    if let Some(r) = config.risk.get(&tool.name) {
        return *r;
    }
    if tool.destructive {
        Risk::Destructive
    } else if tool.read_only {
        Risk::Read
    } else {
        Risk::Network
    }
}

impl RunTools {
    /// Opens the servers `role` uses. Never fails: a server that cannot be used is in `down`.
    pub async fn open(role: &Role, config: &Config, launcher: &Launcher, pool: Option<&Pool>) -> Self {
        Self::open_only(role, config, launcher, pool, None).await
    }

    /// Like `open`, for one server only (`None`: all the role uses): an approved call needs one.
    pub async fn open_only(
        role: &Role,
        config: &Config,
        launcher: &Launcher,
        pool: Option<&Pool>,
        only: Option<&str>,
    ) -> Self {
        let mut out = Self::default();
        let wanted: Vec<Arc<crate::setup::config::mcp::ServerConfig>> = role
            .mcp_servers()
            .into_iter()
            .filter(|s| only.is_none_or(|o| o == *s))
            .filter_map(|s| config.mcp.get(s).cloned().map(Arc::new))
            .collect();
        if wanted.is_empty() {
            return out;
        }
        let started = futures::future::join_all(wanted.iter().map(|s| async move {
            match (s.keep_alive, pool) {
                (true, Some(p)) => (s.clone(), p.get(&s.name).await, false),
                _ => (s.clone(), Connection::start(s.clone(), launcher).await, true),
            }
        }))
        .await;
        for (server, result, owned) in started {
            match result {
                Ok(conn) => {
                    if owned {
                        out.owned.push(conn.clone());
                    }
                    out.add_tools(role, &server, conn).await;
                }
                Err(problem) => out.down.push(Down {
                    problem,
                    required: server.required,
                }),
            }
        }
        out
    }

    async fn add_tools(
        &mut self,
        role: &Role,
        server: &crate::setup::config::mcp::ServerConfig,
        conn: Arc<Connection>,
    ) {
        for t in conn.tools().await {
            if !role.allows_mcp(&server.name, &t.name) {
                continue;
            }
            let exposed = exposed_name(&server.name, &t.name);
            if self.tools.iter().any(|x| x.exposed == exposed) {
                // Impossible with valid server names; never let a second tool shadow the first.
                tracing::warn!(
                    "MCP server {}: tool {} would be offered as {exposed}, which another tool has; it is left out",
                    server.name,
                    t.name
                );
                continue;
            }
            let description = if t.description.is_empty() {
                format!("{} (MCP server {})", t.name, server.name)
            } else {
                format!("{} (MCP server {})", t.description, server.name)
            };
            self.tools.push(McpTool {
                schema: InputSchema::new(&exposed, &t.schema),
                spec: ToolSpec {
                    name: exposed.clone(),
                    description,
                    input_schema: t.schema.clone(),
                },
                risk: risk_of(server, &t),
                exposed,
                server: server.name.clone(),
                tool: t.name.clone(),
                conn: conn.clone(),
                deadline: None,
            });
        }
    }

    /// The run's deadline: no call waits for a task past it.
    pub fn until(mut self, deadline: Instant) -> Self {
        for t in &mut self.tools {
            t.deadline = Some(deadline);
        }
        self
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    pub fn get(&self, exposed: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.exposed == exposed)
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.exposed.as_str()).collect()
    }

    /// The first required server that is down: the run cannot go on.
    pub fn required_down(&self) -> Option<&Down> {
        self.down.iter().find(|d| d.required)
    }

    /// What the model is told about servers that are down (optional ones: the run goes on).
    pub fn notice(&self) -> Option<(String, String)> {
        if self.down.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .down
            .iter()
            .map(|d| format!("- {}: its tools are not available in this run.", d.problem))
            .collect();
        Some(("Tools that are down".into(), lines.join("\n")))
    }

    /// Stops the servers started for this run (keep-alive ones stay up).
    pub async fn close(&self) {
        futures::future::join_all(self.owned.iter().map(|c| c.stop())).await;
    }
}

impl McpTool {
    /// Runs the call: arguments checked against the schema, then sent; never panics on model
    /// input.
    pub async fn call(&self, input: &Value) -> ToolResult {
        let since = Stamp::now();
        let mut result = self.call_server(input).await;
        // Whatever the answer (an error or a time-out too): what the call left is looked at.
        self.conn.leftovers(since, &mut result).await;
        if result.ok {
            return result;
        }
        // The server says only "permission denied": read against its sandbox, say who refused.
        // (Its answer only: its stderr may hold a refusal from long before that it got over.)
        match self.conn.sandbox_refusal(&result.text) {
            Some(sentence) => result.refused_by_sandbox(sentence),
            None => result,
        }
    }

    async fn call_server(&self, input: &Value) -> ToolResult {
        let args = match (self.schema.check(input), input.as_object()) {
            (Err(why), _) => return ToolResult::error(format!("invalid input: {why}")),
            (Ok(()), None) => {
                return ToolResult::error("invalid input: expected a JSON object of arguments".into())
            }
            (Ok(()), Some(args)) => args.clone(),
        };
        let mut waited = None;
        let answer = match self.conn.call(&self.tool, args).await {
            Ok(Answer::Done(r)) => Ok(r),
            Ok(Answer::Task(handle)) => {
                let (id, started) = (handle.id.clone(), Instant::now());
                let answer = self.wait(handle).await;
                waited = Some(self.waited_line(&id, started.elapsed(), answer.is_ok()));
                answer
            }
            Err(e) => Err(e),
        };
        let mut result = match answer {
            Ok(r) => {
                // A task's result is a tool result like any other: the same handling.
                let (text, is_error) = super::content::to_text(&r);
                let bytes = text.len() as u64;
                if is_error {
                    ToolResult::error(text)
                } else {
                    ToolResult::ok(text, bytes, Vec::new())
                }
            }
            Err(CallError::Refused(why)) => ToolResult::error(format!("{} failed: {why}", self.exposed)),
            Err(CallError::Unknown(why)) => ToolResult::unknown(format!("{}: {why}", self.exposed)),
        };
        result.notes.extend(waited);
        result
    }

    /// The daily note's line for a call that ran as a task: server, tool, how long it was waited
    /// for (the task id bounded and plain: see `task`).
    fn waited_line(&self, id: &str, waited: std::time::Duration, ended: bool) -> String {
        let how = if ended {
            "ended after"
        } else {
            "was given up after"
        };
        format!(
            "MCP server `{}` ran `{}` as task `{id}`; it {how} {}",
            self.server,
            self.tool,
            super::wait::shown(waited)
        )
    }

    /// Waits for the task the server started for the call: until the run's deadline or the
    /// server's `task_timeout`, whichever comes first.
    async fn wait(&self, handle: super::task::Handle) -> Result<rmcp::model::CallToolResult, CallError> {
        let timeout = self.conn.server.task_timeout;
        let by_timeout = Instant::now() + timeout;
        let (until, why) = match self.deadline {
            Some(d) if d < by_timeout => (d, "the run's deadline".to_string()),
            _ => (by_timeout, format!("task_timeout_s = {}", timeout.as_secs())),
        };
        tracing::info!(
            "MCP server {}: {} runs as task {}; waiting for it",
            self.server,
            self.tool,
            handle.id
        );
        let (server, tool) = (self.server.clone(), self.tool.clone());
        self.conn
            .wait_task(handle, until, &why, |p| {
                if let Some(status) = &p.status {
                    tracing::info!("MCP server {server}: task of {tool}: {status}");
                }
            })
            .await
    }
}
