//! tabd's own MCP server (docs/spec.md §16): a role's harness spoken over MCP. Every call goes through
//! `Harness::call`, exactly as an API run's do — the role's lists, `approve`, the limits, the
//! sandbox, hops and the record — so a client (an agent CLI, Claude Desktop) has the role's
//! authority, no more.
//!
//! Two ways in:
//! - **a run's socket**: a CLI run serves its harness on a Unix socket in the run folder, inside
//!   the run's own process. The CLI starts `tabd mcp serve --run-id ID --socket PATH`, which only
//!   relays bytes (`bridge`): the limits, the hops and the record live in the run, so no process
//!   boundary, restart or relative path can reset or lose them. Only that run's CLI may use it
//!   (docs/spec.md §20): the peer must be a process below the CLI's keeper (the kernel's credentials of
//!   the connection), and its first line must carry the run's key (`relay.key`, 0600 in the run
//!   folder, which every other child is denied);
//! - **stdio** (`tabd mcp serve --role R` for Claude Desktop): the harness runs in that process.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::base::calls::{Risk, ToolCallRecord};
use crate::gate::harness::{Caller, Harness};

/// Called after every call with its record (`tabd mcp serve` writes a daily-log line).
pub type OnCall = Arc<dyn Fn(&ToolCallRecord) + Send + Sync>;

/// Asked before every call of a session that is a run of its own (`tabd mcp serve --role R`):
/// `Err` is why not, which the client gets as the call's result instead of the call. It may
/// read and write files: it runs where blocking is allowed.
pub type Admit = Arc<dyn Fn() -> Result<(), NotAdmitted> + Send + Sync>;

/// Why a call of a session that is a run of its own is not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdmitted {
    /// The role's day is spent; `why` says what (its runs, tokens or dollars).
    #[error(
        "refused: {why}; this `tabd mcp serve` session is a run of the role, and it makes no more calls today"
    )]
    DaySpent { why: String },
    /// A pause holds the role (`tabd pause`); `why` says which and what ends it.
    #[error("refused: {why}; this `tabd mcp serve` session is a run of the role, and it makes no calls while paused")]
    Paused { why: String },
    /// The session could not be counted as a run of `role`: the state file was not written.
    #[error("refused: this session cannot be counted as a run of role `{role}` ({source}); nothing was run")]
    NotCounted {
        role: String,
        source: crate::base::vault::VaultError,
    },
}

/// Longest line tabd reads from an MCP client, on stdin or through a run's relay. The largest
/// message a client has reason to send is a `tools/call` whose arguments carry a note to write:
/// `write_file` and `append_file` take at most `MAX_WRITE_BYTES` (1 MiB), and JSON writes a byte
/// as at most 6 (`\u0000`), so 6 MiB; the rest of a request is small, and an MCP tool's
/// arguments are the same kind of message. 16 MiB leaves that more than twice over; a longer line
/// gets a JSON-RPC error and is never held whole (a peer could send gigabytes with no line end).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
const _: () = assert!(MAX_LINE_BYTES >= 2 * 6 * crate::capabilities::tools::MAX_WRITE_BYTES);

/// Longest first line a connection to a run's relay may send: the key line,
/// `{"tabd_relay_key":"<64 hex digits>"}`, is 86 bytes; 4 KiB is plenty for any spelling of it,
/// and anything longer is not a key (the connection is refused and closed).
const MAX_KEY_LINE_BYTES: usize = 4096;

/// The harness as an MCP server.
#[derive(Clone)]
pub struct HarnessServer {
    harness: Arc<Harness>,
    /// Shown in approval notes as the model's reason (an MCP call carries none).
    reason: &'static str,
    on_call: Option<OnCall>,
    admit: Option<Admit>,
    /// Why a call was refused for `max_tool_calls`, once one was: the session's record says so.
    limit: Arc<std::sync::OnceLock<String>>,
    /// A client finished `initialize`: for a CLI run, proof that tabd's tools reached it.
    connected: Arc<AtomicBool>,
}

impl HarnessServer {
    pub fn new(harness: Arc<Harness>, on_call: Option<OnCall>) -> Self {
        Self {
            harness,
            reason: "(asked through tabd's MCP server; the client gave no reason)",
            on_call,
            admit: None,
            limit: Arc::default(),
            connected: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Asks `admit` before every call (see `Admit`).
    pub fn with_admit(self, admit: Admit) -> Self {
        Self {
            admit: Some(admit),
            ..self
        }
    }

    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// `max_tool_calls (N)` once a call was refused for it.
    pub fn limit_reached(&self) -> Option<String> {
        self.limit.get().cloned()
    }

    /// The role's tools, annotated with their risk class so a client can tell reads from writes.
    fn tools(&self) -> Vec<Tool> {
        self.harness
            .specs()
            .into_iter()
            .map(|s| {
                let risk = self.harness.risk_of(&s.name);
                let schema = s.input_schema.as_object().cloned().unwrap_or_default();
                let tool = Tool::new(s.name, s.description, Arc::new(schema));
                let hints = ToolAnnotations::new();
                match risk {
                    Some(Risk::Read) => tool.annotate(hints.read_only(true)),
                    Some(Risk::Destructive) => tool.annotate(hints.read_only(false).destructive(true)),
                    Some(Risk::Write) => tool.annotate(hints.read_only(false).destructive(false)),
                    _ => tool,
                }
            })
            .collect()
    }
}

impl ServerHandler for HarnessServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tabd", env!("CARGO_PKG_VERSION")))
    }

    async fn on_initialized(&self, _context: NotificationContext<RoleServer>) {
        self.connected.store(true, Ordering::SeqCst);
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
        if let Some(admit) = self.admit.clone() {
            if let Err(why) = crate::base::blocking::run(move || admit()) {
                return Ok(CallToolResult::error(vec![Content::text(why.to_string())]).into());
            }
        }
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let caller = Caller::Model {
            reason: self.reason,
            call_id: None,
        };
        let called = match self.harness.call(&request.name, &input, caller).await {
            Ok(c) => c,
            Err(fatal) => {
                tracing::error!("mcp serve: {fatal}");
                return Err(ErrorData::internal_error(fatal.0, None));
            }
        };
        if let Some(limit) = &called.limit {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "only the first limit the session reached is kept and said"
            )]
            let _ = self.limit.set(limit.to_string());
        }
        if let (Some(record), Some(on_call)) = (&called.record, &self.on_call) {
            on_call(record);
        }
        let content = vec![Content::text(called.result.text)];
        Ok(if called.result.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        }
        .into())
    }
}

/// Serves on stdin/stdout until the client closes the connection. A client that leaves without
/// starting a session (a stateless `server/discover`, a probe) is not an error.
pub async fn serve_stdio(server: HarnessServer) -> anyhow::Result<()> {
    let (read, write) = guarded(tokio::io::stdin(), tokio::io::stdout());
    match server.serve((read, write)).await {
        Ok(service) => service.waiting().await.map(|_| ()).map_err(anyhow::Error::from),
        Err(e) => {
            tracing::debug!("the MCP client ended without starting a session: {e}");
            Ok(())
        }
    }
}

/// The answer JSON-RPC asks for to a line that is not JSON (-32700), or to a `tools/call`
/// whose `name` is missing or whose `arguments` is not an object (-32602); `None` for a line
/// the MCP library should see. (rmcp answers both with "method not found", -32601.)
pub fn protocol_error(line: &str) -> Option<String> {
    let error = |id: serde_json::Value, code: i64, message: &str| {
        Some(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )
    };
    if line.trim().is_empty() {
        return None;
    }
    let Ok(msg) = serde_json::from_str::<Value>(line) else {
        return error(Value::Null, -32700, "Parse error: the line is not JSON");
    };
    if msg.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let params = msg.get("params");
    let name_ok = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !name_ok {
        return error(id, -32602, "Invalid params: tools/call needs a `name` (text)");
    }
    let args = params.and_then(|p| p.get("arguments"));
    if args.is_some_and(|a| !a.is_object() && !a.is_null()) {
        return error(id, -32602, "Invalid params: `arguments` must be an object");
    }
    None
}

/// Puts `protocol_error` in front of the MCP library: lines it answers go straight back out,
/// the rest reach rmcp through an in-memory pipe. Returns rmcp's side of the pipe. A line from
/// the peer is held up to `MAX_LINE_BYTES`; what rmcp writes back (tabd's own answers) is passed
/// on in pieces as it comes, one line at a time, never held whole.
pub fn guarded<R, W>(
    input: R,
    output: W,
) -> (
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::AsyncWriteExt;
    let (rmcp_side, our_side) = tokio::io::duplex(256 * 1024);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(our_side);
    let out = Arc::new(tokio::sync::Mutex::new(output));
    let answers = out.clone();
    tokio::spawn(async move {
        let mut input = tokio::io::BufReader::new(input);
        let mut line = Vec::new();
        loop {
            let answer = match read_line_within(&mut input, &mut line, MAX_LINE_BYTES).await {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong { ended }) => {
                    if !ended && skip_line(&mut input).await.is_err() {
                        break;
                    }
                    Some(too_long(MAX_LINE_BYTES))
                }
                Ok(Line::Read) => match std::str::from_utf8(&line) {
                    Err(_) => Some(parse_error("Parse error: the line is not UTF-8")),
                    Ok(text) => protocol_error(text),
                },
            };
            match answer {
                Some(answer) => {
                    let mut o = answers.lock().await;
                    #[expect(
                        clippy::let_underscore_must_use,
                        reason = "a client that is gone cannot be told; its next read ends this loop"
                    )]
                    let _ = o.write_all(format!("{answer}\n").as_bytes()).await;
                    #[expect(
                        clippy::let_underscore_must_use,
                        reason = "a client that is gone cannot be told; its next read ends this loop"
                    )]
                    let _ = o.flush().await;
                }
                None => {
                    line.push(b'\n');
                    if to_rmcp.write_all(&line).await.is_err() {
                        break;
                    }
                }
            }
        }
        #[expect(
            clippy::let_underscore_must_use,
            reason = "rmcp's side ends with this task either way"
        )]
        let _ = to_rmcp.shutdown().await;
    });
    tokio::spawn(pass_lines(from_rmcp, out));
    tokio::io::split(rmcp_side)
}

/// Copies rmcp's lines to `out`, each whole under the lock (an answer of `guarded`'s never lands
/// inside one), in pieces as they come: tabd's own answers are never held twice.
async fn pass_lines<R, W>(from: R, out: Arc<tokio::sync::Mutex<W>>)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut from = tokio::io::BufReader::new(from);
    loop {
        match from.fill_buf().await {
            Ok([]) | Err(_) => return,
            Ok(_) => {}
        }
        let mut o = out.lock().await;
        loop {
            let (used, ended) = match from.fill_buf().await {
                Ok([]) | Err(_) => return,
                Ok(buf) => {
                    let (used, ended) = match buf.iter().position(|&b| b == b'\n') {
                        Some(end) => (end + 1, true),
                        None => (buf.len(), false),
                    };
                    if o.write_all(&buf[..used]).await.is_err() {
                        return;
                    }
                    (used, ended)
                }
            };
            from.consume(used);
            if ended {
                break;
            }
        }
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a client that is gone fails the next write, which ends this loop"
        )]
        let _ = o.flush().await;
    }
}

/// What `read_line_within` found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line is in the buffer, without its end (`\n` or `\r\n`); the last one may have none.
    Read,
    /// The line runs past the bound: what was read of it is dropped; `ended`: its end was read
    /// too, else the rest of it is still to come (`skip_line`).
    TooLong { ended: bool },
    /// The peer closed.
    End,
}

/// Reads the next line into `line`, holding at most `max` bytes of it.
async fn read_line_within<R>(input: &mut R, line: &mut Vec<u8>, max: usize) -> std::io::Result<Line>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    use tokio::io::AsyncBufReadExt;
    line.clear();
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { Line::End } else { Line::Read });
        }
        let (used, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buf.len(), false),
        };
        let text = &buf[..used - usize::from(ended)];
        if line.len() + text.len() > max {
            input.consume(used);
            line.clear();
            return Ok(Line::TooLong { ended });
        }
        line.extend_from_slice(text);
        input.consume(used);
        if ended {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Line::Read);
        }
    }
}
/// Reads past the end of the current line, holding nothing of it.
async fn skip_line<R>(input: &mut R) -> std::io::Result<()>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    use tokio::io::AsyncBufReadExt;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                return Ok(());
            }
            None => {
                let all = buf.len();
                input.consume(all);
            }
        }
    }
}

/// A JSON-RPC parse error (-32700) for a line that cannot be read, with no id (none was read).
fn parse_error(message: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": message}})
        .to_string()
}

/// The answer to a line longer than `max` bytes.
fn too_long(max: usize) -> String {
    parse_error(&format!(
        "Parse error: the line is longer than {max} bytes, the most tabd reads of one message; it was not read"
    ))
}

/// The file beside a run's socket that holds its key.
pub fn key_file(socket: &Path) -> PathBuf {
    socket.with_file_name("relay.key")
}

/// The first line a relay sends: the run's key.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeyLine {
    tabd_relay_key: String,
}

/// Who may use a run's relay: processes below the CLI's keeper (its pid, known once the CLI has
/// started), holding the run's key.
#[derive(Clone)]
pub struct RelayGate {
    key: Arc<String>,
    keeper: tokio::sync::watch::Receiver<Option<i32>>,
}

/// Tells the gate which process the CLI's keeper is.
pub type KeeperSetter = tokio::sync::watch::Sender<Option<i32>>;

impl RelayGate {
    /// A new key for a run, written 0600 beside `socket`; the setter names the CLI's keeper.
    pub fn new(socket: &Path) -> std::io::Result<(Self, KeeperSetter)> {
        use rand::RngCore;
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(key_file(socket))?
            .write_all(key.as_bytes())?;
        let (set, keeper) = tokio::sync::watch::channel(None);
        Ok((
            Self {
                key: Arc::new(key),
                keeper,
            },
            set,
        ))
    }

    /// Lets the connection in, or says why not.
    async fn admit(&self, stream: &tokio::net::UnixStream, first_line: &str) -> Result<(), Refused> {
        let peer = stream.peer_cred().map_err(Refused::NoCredentials)?;
        if peer.uid() != rustix::process::geteuid().as_raw() {
            return Err(Refused::OtherUser { uid: peer.uid() });
        }
        let mut keeper = self.keeper.clone();
        let keeper = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            keeper.wait_for(Option::is_some),
        )
        .await
        .ok()
        .and_then(|k| k.ok().and_then(|k| *k))
        .ok_or(Refused::CliNotStarted)?;
        let pid = peer.pid().ok_or(Refused::NoPid)?;
        if !crate::base::process::descends_from(pid, keeper) {
            return Err(Refused::NotTheCli { pid });
        }
        let given = serde_json::from_str::<KeyLine>(first_line)
            .map(|k| k.tabd_relay_key)
            .unwrap_or_default();
        if !same_secret(given.as_bytes(), self.key.as_bytes()) {
            return Err(Refused::WrongKey { pid });
        }
        Ok(())
    }
}

/// Why a connection to a run's relay was refused (the run's log says it; the connection gets a
/// refusal line).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("no key line")]
    NoKeyLine,
    #[error("its first line runs past {MAX_KEY_LINE_BYTES} bytes: it is not a key line")]
    KeyLineTooLong,
    #[error("no credentials: {0}")]
    NoCredentials(std::io::Error),
    #[error("a process of another user ({uid})")]
    OtherUser { uid: u32 },
    #[error("the run's CLI has not started")]
    CliNotStarted,
    #[error("no peer pid")]
    NoPid,
    #[error("process {pid} is not the run's CLI nor started by it")]
    NotTheCli { pid: i32 },
    #[error("process {pid} did not give the run's key")]
    WrongKey { pid: i32 },
}

/// Compares without stopping at the first difference.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A run's harness served on a Unix socket for the run's agent CLI; stops when dropped.
pub struct SocketServer {
    pub path: PathBuf,
    server: HarnessServer,
    task: tokio::task::JoinHandle<()>,
}

impl SocketServer {
    /// Listens on `path` (in the run's private folder). Every connection the gate admits is a
    /// session of the same harness: a CLI that restarts its MCP server keeps the run's limits
    /// and record.
    pub fn start(server: HarnessServer, path: &Path, gate: RelayGate) -> std::io::Result<Self> {
        let listener = tokio::net::UnixListener::bind(path)?;
        let accept = server.clone();
        let task = tokio::spawn(async move {
            let mut sessions = tokio::task::JoinSet::new();
            loop {
                let (stream, _) = match listener.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("run MCP socket: {e}");
                        break;
                    }
                };
                let server = accept.clone();
                let gate = gate.clone();
                sessions.spawn(async move { serve_admitted(server, gate, stream).await });
            }
        });
        Ok(Self {
            path: path.to_path_buf(),
            server,
            task,
        })
    }

    pub fn connected(&self) -> bool {
        self.server.connected()
    }
}

/// One connection to a run's socket: its first line is the key (read up to `MAX_KEY_LINE_BYTES`,
/// for at most 10 s); refused, it is closed with a line saying why (and the run's log says so);
/// admitted, the rest is an MCP session.
async fn serve_admitted(server: HarnessServer, gate: RelayGate, stream: tokio::net::UnixStream) {
    use tokio::io::AsyncWriteExt;
    let (read, mut write) = stream.into_split();
    let mut read = tokio::io::BufReader::new(read);
    let mut first = Vec::new();
    let line = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        read_line_within(&mut read, &mut first, MAX_KEY_LINE_BYTES),
    )
    .await;
    let stream = read.get_ref().as_ref();
    let verdict = match line {
        Ok(Ok(Line::Read)) => gate.admit(stream, String::from_utf8_lossy(&first).trim()).await,
        Ok(Ok(Line::TooLong { .. })) => Err(Refused::KeyLineTooLong),
        _ => Err(Refused::NoKeyLine),
    };
    if let Err(why) = verdict {
        tracing::warn!("refused a connection to the run's tool relay: {why}");
        let refusal = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "refused: only this run's CLI may use its tools"}});
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a refused client that is gone needs no refusal; the refusal is logged above"
        )]
        let _ = write.write_all(format!("{refusal}\n").as_bytes()).await;
        return;
    }
    let (read, write) = guarded(read, write);
    match server.serve((read, write)).await {
        Ok(service) => {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "the session is over either way; no one is left to tell"
            )]
            let _ = service.waiting().await;
        }
        Err(e) => tracing::debug!("run MCP socket: a client did not start a session: {e}"),
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `tabd mcp serve --run-id ID --socket PATH`: relays stdin/stdout to the run's socket, byte for
/// byte, until either side closes, after the run's key (from `relay.key` beside the socket). It
/// holds no authority of its own.
pub async fn bridge(socket: &Path) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let key = std::fs::read_to_string(key_file(socket)).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the run's key beside {} ({e}); is the run still going?",
            socket.display()
        )
    })?;
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach the run's tool server at {} ({e}); is the run still going?",
            socket.display()
        )
    })?;
    let (mut from_run, mut to_run) = stream.into_split();
    let line = serde_json::to_string(&KeyLine {
        tabd_relay_key: key.trim().to_string(),
    })?;
    to_run.write_all(format!("{line}\n").as_bytes()).await?;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        #[expect(
            clippy::let_underscore_must_use,
            reason = "either side closing ends the bridge; it has no one else to tell"
        )]
        let _ = tokio::io::copy(&mut stdin, &mut to_run).await;
        #[expect(
            clippy::let_underscore_must_use,
            reason = "either side closing ends the bridge; it has no one else to tell"
        )]
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_run).await;
    };
    let down = async {
        #[expect(
            clippy::let_underscore_must_use,
            reason = "either side closing ends the bridge; it has no one else to tell"
        )]
        let _ = tokio::io::copy(&mut from_run, &mut stdout).await;
        #[expect(
            clippy::let_underscore_must_use,
            reason = "either side closing ends the bridge; it has no one else to tell"
        )]
        let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
    };
    // The session is over when the run closes its side; a client closing stdin ends it too.
    tokio::select! {
        () = down => {}
        () = async { up.await; std::future::pending::<()>().await } => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> Option<i64> {
        protocol_error(line).map(|a| {
            serde_json::from_str::<serde_json::Value>(&a).unwrap()["error"]["code"]
                .as_i64()
                .unwrap()
        })
    }

    #[test]
    fn bad_lines_get_the_json_rpc_error_codes() {
        assert_eq!(code("this is not json"), Some(-32700));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#),
            Some(-32602)
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":"x"}}"#
            ),
            Some(-32602)
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}"#
            ),
            None
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#), None);
        let a: serde_json::Value = serde_json::from_str(
            &protocol_error(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#).unwrap(),
        )
        .unwrap();
        assert_eq!(a["id"], 7, "the answer carries the request's id");
    }

    /// A peer's line past the bound is answered with a parse error and never reaches rmcp; the
    /// session goes on with the next line.
    #[tokio::test]
    async fn a_line_longer_than_the_bound_gets_an_error_and_the_next_line_goes_through() {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let (client, ours) = tokio::io::duplex(64 * 1024);
        let (ours_read, ours_write) = tokio::io::split(ours);
        let (rmcp_read, _rmcp_write) = guarded(ours_read, ours_write);
        let (client_read, mut client_write) = tokio::io::split(client);
        // Well-formed JSON, only too long: a reader without the bound passes it on to rmcp.
        let huge = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "a.md", "content": "x".repeat(MAX_LINE_BYTES)}}})
        .to_string();
        let good = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let writer = tokio::spawn(async move {
            client_write.write_all(huge.as_bytes()).await.unwrap();
            client_write
                .write_all(format!("\n{good}\n").as_bytes())
                .await
                .unwrap();
            client_write
        });
        // What reaches rmcp is read beside: a reader without the bound must not block on it.
        let reached = tokio::spawn(async move {
            let mut passed = String::new();
            let mut rmcp = tokio::io::BufReader::new(rmcp_read);
            rmcp.read_line(&mut passed).await.unwrap();
            passed
        });
        let mut answer = String::new();
        let mut client = tokio::io::BufReader::new(client_read);
        // Bounded so that a reader without the bound fails here instead of waiting for ever.
        tokio::time::timeout(std::time::Duration::from_secs(60), client.read_line(&mut answer))
            .await
            .expect("no answer to the line longer than the bound")
            .unwrap();
        let a: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(a["error"]["code"], -32700, "{answer}");
        let message = a["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("longer than {MAX_LINE_BYTES} bytes")),
            "{message}"
        );
        let passed = reached.await.unwrap();
        assert_eq!(passed, format!("{good}\n"), "only the next line reaches rmcp");
        let _client_write = writer.await.unwrap();
    }

    /// `ops`, which may read notes, served over MCP on a vault of its own.
    fn read_server(dir: &Path) -> HarnessServer {
        std::fs::write(dir.join("a.md"), "a note\n").unwrap();
        let text = "# Ops\n## Mission\nRead.\n## Tools\n- read_file\n";
        HarnessServer::new(Arc::new(crate::gate::harness::for_test(dir, text, 10_000)), None)
    }

    /// One line an MCP client might send: deep, huge and malformed JSON, JSON-RPC of the wrong
    /// shape, bytes that are not text.
    fn hostile_line() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use crate::formats::frontmatter::hostile;
        use proptest::prelude::*;
        let call = |args: String| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"read_file","arguments":{args}}}}}"#
            )
        };
        let shapes = prop_oneof![
            Just(r#"{"jsonrpc":"2.0","id":{"a":[1]},"method":"tools/list"}"#.to_string()),
            Just(r#"{"jsonrpc":"2.0","id":1,"method":7,"params":[]}"#.to_string()),
            Just(r#"{"jsonrpc":"1.0","id":null,"method":"tools/call","params":"x"}"#.to_string()),
            Just(
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"","arguments":[]}}"#
                    .to_string()
            ),
            Just(r#"[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]"#.to_string()),
            Just(r#"{"jsonrpc":"2.0","id":4,"result":{}}"#.to_string()),
            "[a-z/]{0,20}"
                .prop_map(|m| format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{m}","params":{{}}}}"#)),
        ];
        let huge = (1usize..4).prop_map(move |n| call(format!(r#"{{"path":"{}"}}"#, "a".repeat(n << 19))));
        prop_oneof![
            3 => hostile::deep_json().prop_map(move |j| call(j).into_bytes()),
            2 => hostile::deep_json().prop_map(String::into_bytes),
            3 => hostile::any_json().prop_map(String::into_bytes),
            3 => shapes.prop_map(String::into_bytes),
            1 => huge.prop_map(String::into_bytes),
            1 => proptest::collection::vec(any::<u8>(), 0..200),
        ]
    }

    /// One session: `input` sent, then the client closes. Every line that came back, or why the
    /// session did not end within `within` or ended in a panic.
    async fn session(
        server: HarnessServer,
        input: Vec<u8>,
        within: std::time::Duration,
    ) -> Result<Vec<String>, String> {
        use tokio::io::AsyncReadExt;
        let (mut client, ours) = tokio::io::duplex(1 << 20);
        let (_, to_client) = tokio::io::split(ours);
        let transport = guarded(std::io::Cursor::new(input), to_client);
        let served = tokio::spawn(async move {
            // A client that never started a session is a clean end too.
            if let Ok(service) = server.serve(transport).await {
                #[expect(
                    clippy::let_underscore_must_use,
                    reason = "the test asserts what the client read, however the session ended"
                )]
                let _ = service.waiting().await;
            }
        });
        let mut out = Vec::new();
        match tokio::time::timeout(within, client.read_to_end(&mut out)).await {
            Err(_) => {
                return Err(format!(
                    "the session did not end within {within:?} of the client closing"
                ))
            }
            Ok(Err(e)) => return Err(format!("reading the answers: {e}")),
            Ok(Ok(_)) => {}
        }
        served.await.map_err(|e| format!("the server ended in {e}"))?;
        let out = String::from_utf8(out).map_err(|_| "an answer that is not UTF-8".to_string())?;
        Ok(out.lines().map(str::to_string).collect())
    }

    /// Issue 36, finding 1, for MCP messages: whatever lines a client sends `tabd mcp serve` —
    /// nested past every bound, megabytes long, not JSON, JSON-RPC of the wrong shape, not text
    /// — each answer is a JSON-RPC response, a line that is not JSON is answered with a parse
    /// error, and the session ends when the client closes, in bounded time, never in a panic or
    /// an overflow (which would abort this test's process).
    #[test]
    fn any_lines_a_client_sends_get_answers_or_a_clean_close() {
        use proptest::prelude::*;
        let initialize = concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","#,
            r#""capabilities":{},"clientInfo":{"name":"proptest","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let server = read_server(dir.path());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let lines = proptest::collection::vec(hostile_line(), 1..4);
        let mut runner =
            proptest::test_runner::TestRunner::new(crate::formats::frontmatter::hostile::config(40));
        runner
            .run(&(any::<bool>(), lines), |(start, lines)| {
                let mut input = if start {
                    initialize.as_bytes().to_vec()
                } else {
                    Vec::new()
                };
                for line in &lines {
                    input.extend_from_slice(line);
                    input.push(b'\n');
                }
                let within = std::time::Duration::from_secs(30);
                let answers = rt
                    .block_on(session(server.clone(), input, within))
                    .map_err(TestCaseError::fail)?;
                for answer in &answers {
                    let a: Value = serde_json::from_str(answer)
                        .map_err(|e| TestCaseError::fail(format!("{e}: {answer:.300}")))?;
                    prop_assert!(
                        a["jsonrpc"] == "2.0" && (a.get("result").is_some() || a.get("error").is_some()),
                        "not a JSON-RPC response: {answer:.300}"
                    );
                }
                // The first line, when it is not JSON, is answered: nothing can have closed yet.
                let first = lines[0].split(|b| *b == b'\n').next().unwrap_or_default();
                let first = first.strip_suffix(b"\r").unwrap_or(first);
                let not_json = std::str::from_utf8(first).map_or(true, |t| {
                    !t.trim().is_empty() && serde_json::from_str::<Value>(t).is_err()
                });
                let parse_error =
                    |a: &String| serde_json::from_str::<Value>(a).is_ok_and(|a| a["error"]["code"] == -32700);
                prop_assert!(
                    !not_json || answers.iter().any(parse_error),
                    "no parse error for {:.300}: {answers:?}",
                    String::from_utf8_lossy(first)
                );
                Ok(())
            })
            .unwrap();
    }

    #[tokio::test]
    async fn a_bounded_line_is_read_whole_or_dropped_wherever_its_end_falls() {
        async fn lines(bytes: &[u8], max: usize) -> Vec<Result<String, bool>> {
            // A reader whose buffer (8 bytes) ends lines inside and outside one piece.
            let mut r = tokio::io::BufReader::with_capacity(8, bytes);
            let (mut line, mut out) = (Vec::new(), Vec::new());
            loop {
                match read_line_within(&mut r, &mut line, max).await.unwrap() {
                    Line::End => return out,
                    Line::Read => out.push(Ok(String::from_utf8(line.clone()).unwrap())),
                    Line::TooLong { ended } => {
                        if !ended {
                            skip_line(&mut r).await.unwrap();
                        }
                        out.push(Err(ended));
                    }
                }
            }
        }
        let got = lines(b"short\r\n0123456789abcdefghij\nnext\n0123456789\nlast", 9).await;
        assert_eq!(
            got,
            [
                Ok("short".into()),
                Err(false),
                Ok("next".into()),
                Err(true),
                Ok("last".into())
            ]
        );
    }
}
