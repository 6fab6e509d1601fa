//! One connection to one MCP server (rmcp's client): start it under its startup timeout, list its
//! tools, call them under the tool timeout (a late call is cancelled with MCP's
//! `notifications/cancelled`), and stop it — the whole process group, so wrappers like `npx`
//! leave no grandchild behind, and every child is reaped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, Implementation,
    InitializeRequestParams, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, RunningServiceCancellationToken,
    ServiceError,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::base::calls::ToolResult;
use crate::base::environment::ExpandError;
use crate::base::environment::CHILD_BASE_ENV;
use crate::base::process::{ChildSpec, Confinement, Folders, Launcher, StartError, Started, Stream, Tenant};
use crate::base::sandbox::explain::Applied;
use crate::base::sandbox::Grants;
use crate::base::vault::leftovers::{self, Stamp, Watch};
use crate::setup::config::mcp::{expand_pairs, PairError, ServerConfig, Transport};

use super::task;

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// The most of one stderr line tabd holds (a line is shown cut to 300 characters): a child that
/// writes without a line end never makes tabd hold more of it than this.
const STDERR_LINE_BYTES: usize = 1200;

/// A tool as the server lists it.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// What a server wrote to stderr: the first lines that name an error (the cause, which a long
/// stack trace would push out of the tail) and the last lines.
#[derive(Debug, Default, Clone)]
pub struct StderrTail(Arc<Mutex<Lines>>);

#[derive(Debug, Default)]
struct Lines {
    errors: Vec<String>,
    tail: VecDeque<String>,
}

/// First lines that name an error, kept whatever follows them.
const ERROR_LINES: usize = 5;

/// Whether a line of stderr names an error (not a frame of a stack trace).
fn names_an_error(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    let trimmed = l.trim_start();
    !trimmed.starts_with("at ")
        && !trimmed.starts_with("file \"")
        && [
            "error",
            "denied",
            "not permitted",
            "cannot",
            "can't",
            "failed",
            "fatal",
            "no such",
            "eacces",
            "eperm",
            "enoent",
        ]
        .iter()
        .any(|w| l.contains(w))
}

impl StderrTail {
    fn push(&self, line: String) {
        let line: String = line.chars().take(300).collect();
        let mut q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if q.errors.len() < ERROR_LINES && names_an_error(&line) {
            q.errors.push(line.clone());
        }
        if q.tail.len() == STDERR_LINES {
            q.tail.pop_front();
        }
        q.tail.push_back(line);
    }

    /// The first error lines (when the tail no longer holds them), then the last lines.
    pub fn text(&self) -> String {
        let q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<String> = q.errors.iter().filter(|e| !q.tail.contains(e)).cloned().collect();
        if !out.is_empty() {
            out.push("…".into());
        }
        out.extend(q.tail.iter().cloned());
        out.join("\n")
    }
}

/// Why a call did not return a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server answered with an error: the call was not carried out.
    #[error("{0}")]
    Refused(String),
    /// No answer (a timeout, a server that died or a connection that closed mid-call): the call
    /// may or may not have happened.
    #[error("{0}")]
    Unknown(String),
}

/// What a server answered a call with.
#[derive(Debug)]
pub enum Answer {
    /// The result.
    Done(CallToolResult),
    /// A task it runs for the call: wait for it (`Connection::wait_task`).
    Task(task::Handle),
}

/// A `tools/call` answer as rmcp gave it.
enum Reply {
    Typed(CallToolResponse),
    /// A raw request's answer (2025 Tasks, which rmcp does not type).
    Plain(Value),
}

impl Reply {
    fn answer(self) -> Result<Answer, CallError> {
        let plain = match self {
            Reply::Typed(CallToolResponse::Complete(r)) => return Ok(Answer::Done(r)),
            Reply::Typed(CallToolResponse::Task(t)) => serde_json::to_value(t).unwrap_or(Value::Null),
            // Questions from a server reach the person, never the model: not built yet (issue
            // 53, item 3). The server ran nothing without the answers.
            Reply::Typed(CallToolResponse::InputRequired(_)) => {
                return Err(CallError::Refused(
                    "the server asked for input before it would run the call, which tabd cannot give it yet".into(),
                ))
            }
            Reply::Typed(_) => {
                return Err(CallError::Unknown(
                    "the server answered with something that is neither a result nor a task; it may or may not have been carried out"
                        .into(),
                ))
            }
            Reply::Plain(v) => v,
        };
        match task::handle_of(&plain) {
            Ok(Some(handle)) => Ok(Answer::Task(handle)),
            Ok(None) => task::result_of(&plain)
                .map(Answer::Done)
                .map_err(|g| CallError::Unknown(format!("the server's answer cannot be read: {g}"))),
            Err(garbage) => Err(CallError::Unknown(format!(
                "the server answered with a task tabd cannot follow: {garbage}; it may or may not have been carried out"
            ))),
        }
    }
}

/// Why a server could not be used.
#[derive(Debug, Clone)]
pub struct ServerDown {
    pub server: String,
    pub why: String,
    pub stderr: String,
}

impl std::fmt::Display for ServerDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP server `{}` {}", self.server, self.why)
    }
}

/// Why a server could not be connected to (said after "MCP server `NAME` ", see `ServerDown`).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("command: {0}")]
    Command(ExpandError),
    #[error("args: {0}")]
    Args(ExpandError),
    /// A `${VAR}` in its `env` or `headers` that could not be filled in.
    #[error(transparent)]
    Pair(#[from] PairError),
    #[error("url: {0}")]
    Url(ExpandError),
    #[error("header {name}: {source}")]
    HeaderName {
        name: String,
        source: reqwest::header::InvalidHeaderName,
    },
    #[error("header {name}: {source}")]
    HeaderValue {
        name: String,
        source: reqwest::header::InvalidHeaderValue,
    },
    /// Its folders or its sandbox (`process::StartError`).
    #[error(transparent)]
    Start(StartError),
    /// The system would not run `program` (as found on `PATH`); `sandbox`: when the sandbox was
    /// the cause, which grant would allow it.
    #[error(
        "could not be started (`{program}`: {source}); is it installed and on PATH?{}",
        sandbox_said(.sandbox)
    )]
    Spawn {
        program: String,
        source: std::io::Error,
        sandbox: Option<String>,
    },
    #[error("its stdio could not be connected")]
    NoStdio,
    /// It exited before it answered `initialize`.
    #[error("exited ({status}) before it finished starting{}", sandbox_said(.sandbox))]
    Exited {
        status: std::process::ExitStatus,
        sandbox: Option<String>,
    },
    /// It did not answer `initialize` as an MCP server does (`init`: in words, see `init_error`).
    #[error("failed to start: {init}{}", sandbox_said(.sandbox))]
    Init { init: String, sandbox: Option<String> },
    /// An HTTP server that could not be reached or refused (`url` without its secrets).
    #[error("could not connect to {url}: {why}")]
    Http { url: String, why: String },
}

/// " — the sandbox refused …", when it did.
fn sandbox_said(sandbox: &Option<String>) -> String {
    sandbox.as_ref().map(|s| format!(" — {s}")).unwrap_or_default()
}

/// Why a server's tools could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("{}", service_error(.0))]
pub struct ListError(ServiceError);

/// Hears `notifications/tools/list_changed`.
#[derive(Clone)]
struct Handler {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> InitializeRequestParams {
        // The Tasks extension (SEP-2663) is declared: a server may answer a long call with a
        // task, which tabd polls (see `task`).
        let mut info = InitializeRequestParams::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tabd", env!("CARGO_PKG_VERSION")),
        );
        // Asked only in the handshake (2026-07-28 has none): the newest version that has one.
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::Relaxed);
    }
}

/// A server's process (a tenant: see `process`). It is reaped by a task of its own the moment it
/// exits (its keeper has killed everything it left by then, so a crashed `npx` wrapper leaves
/// nothing behind), and `exited` says so: a server can die while a grandchild still holds its
/// stdout open, and the connection must not wait for that pipe to close.
struct Child {
    tenant: Arc<Tenant>,
    exited: tokio::sync::watch::Receiver<bool>,
}

impl Drop for Child {
    fn drop(&mut self) {
        // Reached without `stop` only on a panic or a cancelled task: never leave anything.
        if !*self.exited.borrow() {
            self.tenant.kill();
        }
    }
}

impl Child {
    /// Hands `child` to a reaper task; `on_exit` runs once it is gone.
    fn watch(
        mut child: tokio::process::Child,
        tenant: Tenant,
        on_exit: impl FnOnce() + Send + 'static,
    ) -> Child {
        let (tx, exited) = tokio::sync::watch::channel(false);
        let tenant = Arc::new(tenant);
        let held = tenant.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            drop(held);
            tracing::debug!("MCP server process ended: {status:?}");
            // Fails only when nobody watches any more: the connection is gone already.
            #[expect(clippy::let_underscore_must_use)]
            let _ = tx.send(true);
            on_exit();
        });
        Child { tenant, exited }
    }

    async fn wait_exit(&self, limit: Duration) -> bool {
        let mut exited = self.exited.clone();
        let waited = tokio::time::timeout(limit, exited.wait_for(|e| *e)).await;
        waited.is_ok()
    }

    /// SIGTERM to the server's group, then everything killed after 2 s; reaped either way.
    async fn stop(self) {
        if *self.exited.borrow() {
            return;
        }
        self.tenant.stop();
        if !self.wait_exit(Duration::from_secs(2)).await {
            self.tenant.kill();
            self.wait_exit(Duration::from_secs(5)).await;
        }
    }
}

/// A started server.
pub struct Connection {
    pub server: Arc<ServerConfig>,
    peer: Peer<RoleClient>,
    /// Ends the rmcp service (which runs in its own task, see `connect`).
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
    /// Becomes true when the service has ended, for whatever reason.
    ended: tokio::sync::watch::Receiver<bool>,
    child: tokio::sync::Mutex<Option<Child>>,
    tools: Mutex<Vec<ToolInfo>>,
    tools_changed: Arc<AtomicBool>,
    pub stderr: StderrTail,
    /// The sandbox it runs under (`None`: not sandboxed), to say when a refusal was its doing.
    applied: Option<Arc<Applied>>,
    /// tabd's environment: what a call's error quotes of it is written back as `${VAR}`.
    env: crate::base::environment::Env,
    /// A server granted `vault = "write"`: the vault folders it may write, looked through after
    /// each call for files other programs load that it left there (docs/spec.md §24).
    watch: Option<Leftovers>,
    /// `tasks/cancel` requests of waits a stopped run dropped: `stop` lets them reach the server
    /// before it ends the session.
    pub(super) cancels: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The folders a `vault = "write"` server may write, and the vault they are in.
type Leftovers = (Watch, Arc<crate::base::vault::Vault>);

impl Connection {
    /// When `text` (a tool's error, its stderr) shows that the sandbox refused something: a
    /// sentence naming the path and the grant to add.
    pub fn sandbox_refusal(&self, text: &str) -> Option<String> {
        self.applied.as_ref()?.explain(text)
    }

    /// Starts `server` and lists its tools, all within its `startup_timeout`.
    pub async fn start(
        server: Arc<ServerConfig>,
        launcher: &Launcher,
    ) -> Result<Arc<Connection>, ServerDown> {
        let stderr = StderrTail::default();
        // `${VAR}` values (tokens in a url or header) are written back as `${VAR}` in anything
        // said about the server: errors quote urls, and servers print their settings.
        let secrets = server.vars();
        let down = |why: String, stderr: &StderrTail| ServerDown {
            server: server.name.clone(),
            why: launcher.env.redact(&why, &secrets),
            stderr: launcher.env.redact(&stderr.text(), &secrets),
        };
        let limit = server.startup_timeout;
        let started =
            tokio::time::timeout(limit, Self::connect(server.clone(), launcher, stderr.clone())).await;
        let conn = match started {
            Ok(Ok(c)) => c,
            Ok(Err(why)) => return Err(down(why.to_string(), &stderr)),
            Err(_) => {
                return Err(down(
                    format!(
                        "did not finish starting within {}s (startup_timeout_s)",
                        limit.as_secs()
                    ),
                    &stderr,
                ))
            }
        };
        // The connection is stopped here if listing fails or takes too long.
        match tokio::time::timeout(limit, conn.relist()).await {
            Ok(Ok(())) => Ok(conn),
            Ok(Err(why)) => {
                conn.stop().await;
                Err(down(format!("could not list its tools: {why}"), &stderr))
            }
            Err(_) => {
                conn.stop().await;
                Err(down(
                    format!(
                        "did not list its tools within {}s (startup_timeout_s)",
                        limit.as_secs()
                    ),
                    &stderr,
                ))
            }
        }
    }

    async fn connect(
        server: Arc<ServerConfig>,
        launcher: &Launcher,
        stderr: StderrTail,
    ) -> Result<Arc<Connection>, ConnectError> {
        let tools_changed = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            tools_changed: tools_changed.clone(),
        };
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        let ended_tx = Arc::new(ended_tx);
        let (service, child, applied, watch) = match &server.transport {
            Transport::Stdio {
                command,
                args,
                env: extra,
            } => {
                serve_stdio(
                    handler,
                    (command, args, extra),
                    launcher,
                    &server,
                    &stderr,
                    &ended_tx,
                )
                .await?
            }
            Transport::Http { url, headers } => {
                // `url` may hold `${SECRET}`: expanded only here, never shown expanded.
                let transport = http_transport(url, headers, &launcher.env)?;
                let first = handler.clone().serve_with_lifecycle(transport, lifecycle()).await;
                let served = match first {
                    // As for a command server: a new connection for the 2025 handshake.
                    Err(e) if knows_no_discover(&e) => {
                        let transport = http_transport(url, headers, &launcher.env)?;
                        handler
                            .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                            .await
                    }
                    other => other,
                };
                let s = served.map_err(|e| ConnectError::Http {
                    url: crate::base::text::display_endpoint(url),
                    // The transport's error may quote the URL it was given, a secret path and all.
                    why: crate::base::text::endpoints_shown(&init_error(&e, true)),
                })?;
                (s, None, None, None)
            }
        };
        let peer = service.peer().clone();
        let cancel = service.cancellation_token();
        tokio::spawn(async move {
            // How the session ended (cancelled, closed, a task that panicked) changes nothing:
            // it has ended, and the connection says so; its sender fails only when the
            // connection is gone already.
            #[expect(clippy::let_underscore_must_use)]
            let _ = service.waiting().await;
            #[expect(clippy::let_underscore_must_use)]
            let _ = ended_tx.send(true);
        });
        Ok(Arc::new(Connection {
            server,
            peer,
            cancel: Mutex::new(Some(cancel)),
            ended,
            child: tokio::sync::Mutex::new(child),
            tools: Mutex::new(Vec::new()),
            tools_changed,
            stderr,
            applied,
            env: launcher.env.clone(),
            watch,
            cancels: Mutex::new(Vec::new()),
        }))
    }

    /// Lists the server's tools again (after `tools/list_changed`).
    pub async fn relist(&self) -> Result<(), ListError> {
        let listed = self.peer.list_all_tools().await.map_err(ListError)?;
        let tools = listed
            .into_iter()
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or("").to_string(),
                schema: Value::Object((*t.input_schema).clone()),
                read_only: t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
                destructive: t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.destructive_hint)
                    .unwrap_or(false),
            })
            .collect();
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools;
        self.tools_changed.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// The tools as last listed; re-listed first when the server said they changed.
    pub async fn tools(&self) -> Vec<ToolInfo> {
        if self.tools_changed.load(Ordering::Relaxed) {
            if let Err(e) = tokio::time::timeout(self.server.startup_timeout, self.relist()).await {
                tracing::warn!(
                    "MCP server {}: re-listing tools timed out ({e})",
                    self.server.name
                );
            }
        }
        self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The protocol line agreed with the server (`None` only before it answered, which a started
    /// connection never is).
    pub fn line(&self) -> Option<Line> {
        let info = self.peer.peer_info()?;
        Some(Line {
            version: info.protocol_version.to_string(),
            stateless: !info.protocol_version.has_initialize(),
        })
    }

    pub fn is_closed(&self) -> bool {
        *self.ended.borrow() || self.peer.is_transport_closed()
    }

    /// The connection's peer, for the task requests (`task`, `wait`).
    pub(super) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// Calls `tool` with `arguments` within the tool timeout; a call that runs over is cancelled.
    /// The server may answer with a task to wait for (`wait_task`) instead of the result.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Answer, CallError> {
        let answer = self.send_call(tool, arguments.clone(), false).await;
        // 2025-11-25: a tool that declared `taskSupport: "required"` refuses a plain call (and ran
        // nothing), as an error result or a JSON-RPC error; rmcp does not keep that declaration,
        // so the refusal is what says it.
        let refused_for_task = match &answer {
            Ok(Answer::Done(r)) => {
                r.is_error.unwrap_or(false) && task::needs_a_task(&super::content::to_text(r).0)
            }
            Err(CallError::Refused(why)) => task::needs_a_task(why),
            Ok(Answer::Task(_)) | Err(CallError::Unknown(_)) => false,
        };
        if refused_for_task && !self.line().is_some_and(|l| l.stateless) {
            return self.send_call(tool, arguments, true).await;
        }
        answer
    }

    /// One `tools/call` (`as_task`: with 2025's `task` parameter) under the tool timeout.
    async fn send_call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        as_task: bool,
    ) -> Result<Answer, CallError> {
        let limit = self.server.tool_timeout;
        let request = async {
            if as_task {
                let v = task::call_as_task(&self.peer, tool, arguments).await?;
                return Ok(Reply::Plain(v));
            }
            let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
            self.peer.call_tool_once(params).await.map(Reply::Typed)
        };
        // Dropping the request on timeout makes rmcp send `notifications/cancelled`. A server that
        // dies mid-call fails the call at once rather than at the timeout.
        let answer = tokio::select! {
            biased;
            answer = tokio::time::timeout(limit, request) => answer,
            () = self.closed() => Ok(Err(ServiceError::TransportClosed)),
        };
        // An error quotes the url (a `${TOKEN}` in it expanded) or the server's last output.
        let secrets = self.server.vars();
        let clean = |m: String| self.env.redact(&m, &secrets);
        let answer = match answer {
            Ok(Ok(reply)) => reply.answer(),
            // The server answered: it refused the call, nothing was done. (Its code is kept where
            // it says "call this as a task": `call` reads it.)
            Ok(Err(ServiceError::McpError(data))) if data.code.0 == -32601 => Err(CallError::Refused(
                format!("the server answered with an error: {} (-32601)", data.message),
            )),
            Ok(Err(ServiceError::McpError(data))) => Err(CallError::Refused(format!(
                "the server answered with an error: {}",
                data.message
            ))),
            // The request may have reached the server before the connection ended.
            Ok(Err(e)) => {
                let mut msg = service_error(&e);
                if self.is_closed() {
                    let tail = self.stderr.text();
                    msg = format!("the server stopped during the call ({msg})");
                    if !tail.is_empty() {
                        msg.push_str(&format!("; its last output: {}", tail.replace('\n', " | ")));
                    }
                }
                Err(CallError::Unknown(format!(
                    "{msg}; it may or may not have been carried out"
                )))
            }
            Err(_) => Err(CallError::Unknown(format!(
                "no answer within {}s (tool_timeout_s); the call was cancelled, but it may or may not have been carried out",
                limit.as_secs()
            ))),
        };
        answer.map_err(|e| match e {
            CallError::Refused(m) => CallError::Refused(clean(m)),
            CallError::Unknown(m) => CallError::Unknown(clean(m)),
        })
    }

    /// After a call (begun at `since`) of a server granted `vault = "write"`: moves aside the
    /// files other programs load that it left in the vault's folders (off the async runtime),
    /// and says so to `result`: a sentence for the model, a line each for the daily log.
    pub async fn leftovers(&self, since: Stamp, result: &mut ToolResult) {
        let Some((watch, vault)) = self.watch.clone() else {
            return;
        };
        let child = watch.child.clone();
        let kept = tokio::task::spawn_blocking(move || watch.sweep(&vault, since))
            .await
            .unwrap_or_default();
        if kept.is_empty() {
            return;
        }
        tracing::warn!("{child}: moved aside what a call left in the vault: {kept:?}");
        result.text = format!("{}\n{}", result.text, leftovers::told(&kept));
        result.notes.extend(kept.iter().map(|k| k.line(&child)));
    }

    /// Ends the session and stops the process group. Safe to call twice.
    pub async fn stop(&self) {
        // A stopped run's tasks are cancelled first (each bounded: see `task::cancel`).
        let cancels = std::mem::take(&mut *self.cancels.lock().unwrap_or_else(|p| p.into_inner()));
        for c in cancels {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "a cancel that failed said so in the log"
            )]
            let _ = c.await;
        }
        let cancel = self.cancel.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(token) = cancel {
            token.cancel();
            // A session that does not close in time is ended with its process below.
            #[expect(clippy::let_underscore_must_use)]
            let _ = tokio::time::timeout(Duration::from_secs(2), self.closed()).await;
        }
        if let Some(child) = self.child.lock().await.take() {
            child.stop().await;
        }
    }

    /// Waits until the server's connection ends (it exited, or `stop` was called).
    pub async fn closed(&self) {
        let mut ended = self.ended.clone();
        // Fails only when the sender is gone, which is the connection's end too.
        #[expect(clippy::let_underscore_must_use)]
        let _ = ended.wait_for(|e| *e).await;
    }
}

/// A started connection's parts: rmcp's service, the server's process (none over HTTP), its
/// sandbox and the vault folders it may write.
type Served = (
    rmcp::service::RunningService<RoleClient, Handler>,
    Option<Child>,
    Option<Arc<Applied>>,
    Option<Leftovers>,
);

/// Starts a command server and serves rmcp's client over its stdio: the automatic lifecycle,
/// and once more with the 2025 handshake where its process answered `server/discover` oddly.
async fn serve_stdio(
    handler: Handler,
    (command, args, extra): (&str, &[String], &[(String, String)]),
    launcher: &Launcher,
    server: &ServerConfig,
    stderr: &StderrTail,
    ended_tx: &Arc<tokio::sync::watch::Sender<bool>>,
) -> Result<Served, ConnectError> {
    let mut modes = [lifecycle(), ClientLifecycleMode::Initialize]
        .into_iter()
        .peekable();
    loop {
        let mode = modes.next().unwrap_or(ClientLifecycleMode::Initialize);
        let (mut child, tenant, stdout, stdin, stderr_done, (applied, watch)) =
            spawn(command, args, extra, launcher, server, stderr)?;
        match handler.clone().serve_with_lifecycle((stdout, stdin), mode).await {
            Ok(s) => {
                let token = s.cancellation_token();
                let tx = ended_tx.clone();
                let child = Child::watch(child, tenant, move || {
                    // Fails only when the connection is gone already.
                    #[expect(clippy::let_underscore_must_use)]
                    let _ = tx.send(true);
                    token.cancel();
                });
                return Ok((s, Some(child), applied, watch));
            }
            // It answered `server/discover` with something else: it is alive but knows
            // only the handshake, and this connection is spent. Started again for it.
            Err(e) if knows_no_discover(&e) && modes.peek().is_some() => {
                tracing::info!(
                    "MCP server {}: it answered `server/discover` oddly; started again for the 2025 handshake",
                    server.name
                );
                tenant.kill();
                #[expect(
                    clippy::let_underscore_must_use,
                    reason = "only to reap it: it was just killed"
                )]
                let _ = child.wait().await;
                drop(stderr_done);
            }
            Err(e) => {
                let why = init_error(&e, false);
                return Err(failed_start(child, tenant, stderr_done, why, applied, stderr).await);
            }
        }
    }
}

type Spawned = (
    tokio::process::Child,
    Tenant,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
    tokio::task::JoinHandle<()>,
    (Option<Arc<Applied>>, Option<Leftovers>),
);

/// Starts a stdio server through the launcher (a tenant, sandboxed: see `process::launch`),
/// stderr captured line by line.
fn spawn(
    command: &str,
    args: &[String],
    extra: &[(String, String)],
    launcher: &Launcher,
    server: &ServerConfig,
    stderr: &StderrTail,
) -> Result<Spawned, ConnectError> {
    let env = &launcher.env;
    // `${VAR}` in the command, its arguments and its environment are read now, at start, the
    // same way for all three: an unset one stops this server, not tabd.
    let command = env.expand(command).map_err(ConnectError::Command)?;
    let args: Vec<String> = args
        .iter()
        .map(|a| env.expand(a))
        .collect::<Result<_, _>>()
        .map_err(ConnectError::Args)?;
    let extra = expand_pairs(extra, env)?;
    let mut spec = server_spec(server, launcher, command, args, extra);
    let program = crate::base::process::find_program(&spec.program, env);
    if program.as_deref().is_some_and(crate::base::sandbox::is_tabd) {
        // `tabd mcp serve` is tabd: its tools go through the harness, under the role's rules,
        // and it must reach the vault to do that.
        spec.confined = None;
    }
    let started = launcher.start(&spec).map_err(|e| match e {
        StartError::Spawn { source, applied, .. } => {
            let program = program.map_or_else(|| spec.program.clone(), |p| p.display().to_string());
            let sandbox = applied.and_then(|a| a.explain(&format!("{program}: {source}")));
            ConnectError::Spawn {
                program,
                source,
                sandbox,
            }
        }
        other => ConnectError::Start(other),
    })?;
    let Started {
        mut child,
        tenant,
        applied,
        watch,
        ..
    } = started;
    let watch = watch.zip(launcher.vault.clone());
    let (Some(stdout), Some(stdin), Some(err)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(ConnectError::NoStdio);
    };
    let tail = stderr.clone();
    let name = server.name.clone();
    let stderr_done = tokio::spawn(each_line(err, move |line| {
        tracing::debug!("mcp {name}: {line}");
        tail.push(line);
    }));
    Ok((child, tenant, stdout, stdin, stderr_done, (applied, watch)))
}

/// What a stdio server is, with its command, arguments and `env` expanded (docs/spec.md §20): the
/// basics of tabd's environment, its own `env`, its folders kept outside the vault from one start
/// to the next (its `HOME` unless its `env` sets one), and what its `[mcp.NAME]` table grants.
fn server_spec(
    server: &ServerConfig,
    launcher: &Launcher,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
) -> ChildSpec {
    ChildSpec {
        name: server.name.clone(),
        program: command,
        args,
        inherited: launcher.env.subset(CHILD_BASE_ENV),
        env,
        cwd: None,
        stdin: Stream::Piped,
        stdout: Stream::Piped,
        stderr: Stream::Piped,
        confined: Some(Confinement {
            sandbox: server.sandbox.clone(),
            table: format!("[mcp.{}]", server.name),
            label: format!("MCP server `{}`", server.name),
            folders: Folders::Kept,
            ..Confinement::default()
        }),
    }
}

/// Calls `each` with every line of `pipe` (without its end), holding at most
/// `STDERR_LINE_BYTES` of a line however long it runs, and reading to the end whatever the bytes
/// are: a line of 256 MiB with no end cost tabd 256 MiB (`lines()` holds a line whole), and a byte
/// that is not UTF-8 stopped the reading, so the server blocked once the pipe was full.
async fn each_line<R: tokio::io::AsyncRead + Unpin>(pipe: R, mut each: impl FnMut(String)) {
    let mut reader = tokio::io::BufReader::new(pipe);
    let mut line = Vec::new();
    let mut emit = |line: &mut Vec<u8>| {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        each(String::from_utf8_lossy(line).into_owned());
        line.clear();
    };
    loop {
        let (used, ended) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => {
                let (used, ended) = match buf.iter().position(|&b| b == b'\n') {
                    Some(end) => (end + 1, true),
                    None => (buf.len(), false),
                };
                let room = STDERR_LINE_BYTES.saturating_sub(line.len());
                line.extend_from_slice(&buf[..(used - usize::from(ended)).min(room)]);
                (used, ended)
            }
        };
        reader.consume(used);
        if ended {
            emit(&mut line);
        }
    }
    if !line.is_empty() {
        emit(&mut line);
    }
}

/// Why a server that did not finish `initialize` failed. One that exits at once usually said why
/// on stderr: wait for it to be read, prefer "exited with status 1" to transport jargon, and say
/// when the sandbox was the cause.
async fn failed_start(
    mut child: tokio::process::Child,
    tenant: Tenant,
    stderr_done: tokio::task::JoinHandle<()>,
    init: String,
    applied: Option<Arc<Applied>>,
    stderr: &StderrTail,
) -> ConnectError {
    let exited = tokio::time::timeout(Duration::from_millis(500), child.wait())
        .await
        .ok()
        .and_then(Result::ok);
    tenant.kill();
    if exited.is_none() {
        // Only to reap it: it was just killed, and how it ended says nothing more.
        #[expect(clippy::let_underscore_must_use)]
        let _ = child.wait().await;
    }
    drop(tenant);
    // What it wrote before it died, read for as long as it takes (or half a second): a reader
    // that fails has read all there is.
    #[expect(clippy::let_underscore_must_use)]
    let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
    let sandbox = applied.and_then(|a| a.explain(&stderr.text()));
    match exited {
        Some(status) => ConnectError::Exited { status, sandbox },
        None => ConnectError::Init { init, sandbox },
    }
}

/// What a stdio server would be granted at its next start (`None` for an HTTP server), for
/// `tabd mcp list` and `tabd validate`: nothing is made or started; `${VAR}`s unset here are
/// left out.
pub fn planned_grants(server: &ServerConfig, launcher: &Launcher) -> Option<Grants> {
    let Transport::Stdio { command, args, env } = &server.transport else {
        return None;
    };
    let expand = |v: &String| launcher.env.expand(v).ok();
    let args: Vec<String> = args.iter().filter_map(expand).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .filter_map(|(k, v)| expand(v).map(|v| (k.clone(), v)))
        .collect();
    launcher.plan(&server_spec(server, launcher, command.clone(), args, env))
}

fn http_transport(
    url: &str,
    headers: &[(String, String)],
    env: &crate::base::environment::Env,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, ConnectError> {
    let url = env.expand(url).map_err(ConnectError::Url)?;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    crate::capabilities::provider::install_tls();
    let mut map = std::collections::HashMap::new();
    for (k, v) in expand_pairs(headers, env)? {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|source| {
            ConnectError::HeaderName {
                name: k.clone(),
                source,
            }
        })?;
        let value =
            reqwest::header::HeaderValue::from_str(&v).map_err(|source| ConnectError::HeaderValue {
                name: k.clone(),
                source,
            })?;
        map.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(map);
    Ok(rmcp::transport::StreamableHttpClientTransport::from_config(
        config,
    ))
}

/// Both protocol lines (docs/spec.md §29): `server/discover` first (2026-07-28, stateless), the
/// 2025 `initialize` handshake where the server does not know it (it answers with an error, or
/// not within rmcp's 10 s).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Whether a start failed because the server answered `server/discover` with something that is
/// neither its answer nor an error (some servers answer every request they do not know with an
/// empty result): rmcp's automatic lifecycle falls back only on an error.
fn knows_no_discover(e: &rmcp::service::ClientInitializeError) -> bool {
    matches!(
        e,
        rmcp::service::ClientInitializeError::ExpectedInitResult(Some(_))
    )
}

/// Which protocol line a connection speaks, for `tabd mcp list` and the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The version agreed on (`2026-07-28`, `2025-11-25`, …).
    pub version: String,
    /// Stateless (`server/discover`, no session) or the `initialize` handshake.
    pub stateless: bool,
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.stateless { "stateless" } else { "handshake" };
        write!(f, "{} ({how})", self.version)
    }
}

/// Why `initialize` failed, in words a person can act on (rmcp's own text names Rust types).
fn init_error(e: &rmcp::service::ClientInitializeError, http: bool) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        // Over HTTP the transport's error is the server's answer (a 401, a 404): say it.
        E::TransportError { error, .. } if http => {
            let answer = error.error.to_string();
            let answer = answer.trim().trim_end_matches(':');
            format!("it refused the connection ({answer}); check the url and headers")
        }
        E::ConnectionClosed(_) | E::TransportError { .. } => {
            "it closed the connection before answering `initialize`".into()
        }
        E::ExpectedInitResponse(_) | E::ExpectedInitResult(_) => {
            "it answered `initialize` with something else (is it an MCP server?)".into()
        }
        E::JsonRpcError(data) => format!("it refused `initialize`: {}", data.message),
        // It knew neither `server/discover` nor `initialize`: the handshake's failure says why.
        E::LegacyFallbackFailed { fallback, .. } => init_error(fallback, http),
        E::NoCompatibleProtocolVersion { server_supported, .. } => {
            format!("it speaks no MCP version tabd knows ({server_supported:?})")
        }
        other => other.to_string(),
    }
}

fn service_error(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) => format!("the server answered with an error: {}", data.message),
        ServiceError::TransportClosed => "the connection to the server closed".into(),
        // A transport's error may quote the server's URL, a secret path and all.
        other => crate::base::text::endpoints_shown(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        each_line(bytes, |l| out.push(l)).await;
        out
    }

    #[tokio::test]
    async fn stderr_lines_keep_their_start_and_reading_goes_on_past_bytes_that_are_not_utf8() {
        let mut long = vec![b'x'; 3 * STDERR_LINE_BYTES];
        long.extend_from_slice(b"\nnext\r\n\xff\xfe bad\nlast");
        let lines = lines_of(&long).await;
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[0], "x".repeat(STDERR_LINE_BYTES));
        assert_eq!(lines[1], "next");
        assert_eq!(lines[2], "\u{fffd}\u{fffd} bad");
        assert_eq!(lines[3], "last");
    }
}
