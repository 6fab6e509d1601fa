//! A stand-in for the claude, codex and gemini CLIs in tabd's tests (`cargo test` builds it; no
//! Node needed). It parses the arguments each profile passes, finds tabd's MCP server the way that
//! CLI would (claude: `--mcp-config FILE`; codex: `-c mcp_servers.tabd.*`; gemini:
//! `.gemini/settings.json` in its working folder), connects to it with rmcp's client, makes the
//! calls `FAKE_CLI_CALLS` lists (a JSON list of `[tool, arguments]`), and prints its result in the
//! CLI's own output shape.
//!
//! `FAKE_CLI_LOG=FILE` gets one JSON line: the arguments, the prompt it read, its working folder,
//! the names of its environment variables, the tools it saw and what each call returned.
//! `FAKE_CLI_MODE`: `ok` (default), `not-logged-in`, `denied`, `hang` (never exits), `crash`
//! (exits 1 with a message on stderr), `old` (`--help` lacks the flags), `no-mcp` (never starts
//! tabd's server, yet reports success). `FAKE_CLI_SESSIONS=2` makes the calls over two sessions
//! (the server restarted between them). `FAKE_CLI_NOKEY=1`: first tries the run's tool socket
//! itself without the run's key (logged as `nokey`). `FAKE_CLI_WAIT=FILE`: waits for FILE to
//! exist before it finishes (so a test can act while the run is going). `FAKE_CLI_WRITE`: a JSON
//! list of files it tries to write (as a compromised CLI would; logged as `writes`).
//! `FAKE_CLI_PLANT`: a JSON list of `[path under its HOME, content]` it leaves in its private
//! folder for a later start (settings with hooks, instructions, a login copy); those named in
//! `FAKE_CLI_FUTURE` (a JSON list) are dated ten years ahead. What it found there when it started
//! is logged: `home_files` (every file under its HOME) and `login` (its claude login copy).
//! `FAKE_CLI_FIFO`: a JSON list of paths under its HOME it replaces with named pipes nobody
//! writes (a read of one waits for good).

// A test double, built for the tests: it may unwrap, and its scenarios read top to bottom.
// `let _ =` guards tabd's own side writes (a dropped daily line, a dropped state write);
// a test harness drops what it does not assert (a kill of a child that may have exited).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::let_underscore_must_use
)]

use std::io::{Read, Write};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = std::env::var("FAKE_CLI_MODE").unwrap_or_else(|_| "ok".into());
    if args.iter().any(|a| a == "--help") {
        if mode != "old" {
            println!(
                "Usage: fake [options]\n  -p --output-format --tools --mcp-config --strict-mcp-config --allowedTools --no-session-persistence --setting-sources\n  exec --json --skip-git-repo-check --ephemeral\n  -o --allowed-mcp-server-names"
            );
        } else {
            println!("Usage: fake [options]\n  -p --output-format");
        }
        return;
    }
    let shape = if args.first().map(String::as_str) == Some("exec") {
        "codex"
    } else if args.iter().any(|a| a == "--allowed-mcp-server-names") {
        "gemini"
    } else {
        "claude"
    };
    // Every CLI reads the prompt on stdin (gemini appends its `-p` text).
    let mut prompt = String::new();
    let _ = std::io::stdin().read_to_string(&mut prompt);
    if shape == "gemini" {
        prompt.push_str(&after(&args, "-p").unwrap_or_default());
    }
    match mode.as_str() {
        "hang" => std::thread::sleep(std::time::Duration::from_secs(3600)),
        "crash" => {
            eprintln!("fatal: something broke inside the CLI");
            std::process::exit(1);
        }
        _ => {}
    }
    // What its private folder held when it started, before it plants anything.
    let home = std::env::var("HOME").unwrap_or_default();
    let home_files = files_under(std::path::Path::new(&home));
    let login = std::env::var("CLAUDE_CONFIG_DIR")
        .ok()
        .and_then(|d| std::fs::read_to_string(std::path::Path::new(&d).join(".credentials.json")).ok());
    plant(std::path::Path::new(&home));
    let writes: serde_json::Map<String, Value> = std::env::var("FAKE_CLI_WRITE")
        .ok()
        .and_then(|s| serde_json::from_str::<Vec<String>>(&s).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let r = std::fs::write(&p, "{\"hooks\": \"pwned\"}");
            (
                p,
                json!(r.map_or_else(|e| format!("denied: {e}"), |_| "ok".into())),
            )
        })
        .collect();
    let nokey = if std::env::var("FAKE_CLI_NOKEY").is_ok() {
        let (_, server_args) = server(shape, &args);
        after(&server_args, "--socket").map(|s| without_key(&s))
    } else {
        None
    };
    let (tools, results) = if mode == "no-mcp" {
        (Vec::new(), Vec::new())
    } else {
        let (command, server_args) = server(shape, &args);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(talk(&command, &server_args))
    };
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let mut env: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    env.sort();
    if let Ok(file) = std::env::var("FAKE_CLI_WAIT") {
        for _ in 0..6000 {
            if std::path::Path::new(&file).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    let log = json!({"shape": shape, "args": args, "prompt": prompt, "tools": tools, "results": results,
        "cwd": cwd, "env": env, "home": home, "nokey": nokey, "writes": writes,
        "claude_config_dir": std::env::var("CLAUDE_CONFIG_DIR").ok(),
        "home_files": home_files, "login": login});
    if let Ok(path) = std::env::var("FAKE_CLI_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{log}");
        }
    }
    print_result(shape, &mode);
}

/// Every file below `dir` (links not followed), as paths relative to it, sorted.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(path),
                Ok(_) => out.push(path.strip_prefix(dir).unwrap_or(&path).display().to_string()),
                Err(_) => {}
            }
        }
    }
    out.sort();
    out
}

/// Leaves `FAKE_CLI_PLANT`'s files under `home`, those in `FAKE_CLI_FUTURE` dated ten years ahead.
#[allow(
    unsafe_code,
    reason = "mkfifo on a NUL-terminated path that lives across the call"
)]
fn plant(home: &std::path::Path) {
    let files: Vec<(String, String)> = std::env::var("FAKE_CLI_PLANT")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let future: Vec<String> = std::env::var("FAKE_CLI_FUTURE")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let fifos: Vec<String> = std::env::var("FAKE_CLI_FIFO")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    for rel in fifos {
        let path = home.join(&rel);
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
        // SAFETY: `c` is a NUL-terminated path that lives across the call.
        unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    }
    for (rel, content) in files {
        let path = home.join(&rel);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::write(&path, content);
        if future.contains(&rel) {
            let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10 * 365 * 86_400);
            if let Ok(f) = std::fs::File::options().write(true).open(&path) {
                let _ = f.set_modified(later);
            }
        }
    }
}

/// Connects to the run's tool socket without its key and asks for `write_file`: what came back.
fn without_key(socket: &str) -> String {
    use std::io::{BufRead, BufReader};
    let stream = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return format!("denied: {e}"),
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let Ok(mut w) = stream.try_clone() else {
        return "denied: no stream".into();
    };
    for l in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nokey", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "hijacked.md", "content": "owned"}}}),
    ] {
        // A relay that refuses closes after the first line: a later write fails (EPIPE), but
        // its answer is already waiting to be read, and the answer is what counts.
        if writeln!(w, "{l}").is_err() {
            break;
        }
    }
    let got: Vec<String> = BufReader::new(stream).lines().map_while(Result::ok).collect();
    got.join("\n")
}

fn after(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The MCP server's command and arguments, found as the real CLI would.
fn server(shape: &str, args: &[String]) -> (String, Vec<String>) {
    let config: Value = match shape {
        "claude" => {
            let file = after(args, "--mcp-config").expect("--mcp-config");
            let v: Value =
                serde_json::from_str(&std::fs::read_to_string(file).expect("config")).expect("json");
            v["mcpServers"]["tabd"].clone()
        }
        "gemini" => {
            let v: Value =
                serde_json::from_str(&std::fs::read_to_string(".gemini/settings.json").expect("settings"))
                    .expect("json");
            v["mcpServers"]["tabd"].clone()
        }
        _ => {
            let mut command = Value::Null;
            let mut sargs = Value::Null;
            for (i, a) in args.iter().enumerate() {
                if a != "-c" {
                    continue;
                }
                let Some(kv) = args.get(i + 1) else { continue };
                if let Some(v) = kv.strip_prefix("mcp_servers.tabd.command=") {
                    command = serde_json::from_str(v).expect("command");
                }
                if let Some(v) = kv.strip_prefix("mcp_servers.tabd.args=") {
                    sargs = serde_json::from_str(v).expect("args");
                }
            }
            json!({"command": command, "args": sargs})
        }
    };
    let command = config["command"].as_str().expect("command").to_string();
    let args = config["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    (command, args)
}

async fn talk(command: &str, args: &[String]) -> (Vec<String>, Vec<Value>) {
    let calls: Vec<(String, Value)> = std::env::var("FAKE_CLI_CALLS")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let sessions: usize = std::env::var("FAKE_CLI_SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let per = calls.len().div_ceil(sessions).max(1);
    let mut tools = Vec::new();
    let mut results = Vec::new();
    for chunk in calls.chunks(per) {
        let (t, r) = session(command, args, chunk).await;
        tools = t;
        results.extend(r);
    }
    if calls.is_empty() {
        tools = session(command, args, &[]).await.0;
    }
    (tools, results)
}

/// One session with tabd's MCP server: start it, list the tools, make `calls`, stop it.
async fn session(command: &str, args: &[String], calls: &[(String, Value)]) -> (Vec<String>, Vec<Value>) {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args);
    let transport = TokioChildProcess::new(cmd).expect("spawn the MCP server");
    let client = ().serve(transport).await.expect("initialize");
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut results = Vec::new();
    for (name, arguments) in calls {
        let params = CallToolRequestParams::new(name.clone())
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let r = match client.call_tool(params).await {
            Ok(r) => {
                let text: Vec<String> = r
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                    .collect();
                json!({"tool": name, "error": r.is_error.unwrap_or(false), "text": text.join("\n")})
            }
            Err(e) => json!({"tool": name, "error": true, "text": e.to_string()}),
        };
        results.push(r);
    }
    let _ = client.cancel().await;
    (tools, results)
}

fn print_result(shape: &str, mode: &str) {
    let summary = "Handled the note through tabd's tools.";
    let out = match (shape, mode) {
        ("claude", "not-logged-in") => json!({"type": "result", "subtype": "success", "is_error": true,
            "result": "Invalid API key · Please run /login", "total_cost_usd": 0, "usage": {"input_tokens": 0, "output_tokens": 0}}),
        ("claude", "denied") => {
            json!({"type": "result", "subtype": "success", "is_error": false, "result": summary,
            "total_cost_usd": 0.001, "usage": {"input_tokens": 10, "output_tokens": 5},
            "permission_denials": [{"tool_name": "Bash", "tool_use_id": "x", "tool_input": {"command": "rm -rf /"}}]})
        }
        ("claude", _) => json!({"type": "result", "subtype": "success", "is_error": false, "result": summary,
            "total_cost_usd": 0.0421, "usage": {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
            "modelUsage": {"claude-sonnet-4-5": {}}, "permission_denials": []}),
        ("codex", _) => {
            for line in [
                json!({"type": "thread.started", "thread_id": "t1"}),
                json!({"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": summary}}),
                json!({"type": "turn.completed", "usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 70}}),
            ] {
                println!("{line}");
            }
            return;
        }
        _ => {
            json!({"response": summary, "stats": {"models": {"gemini-2.5-pro": {"tokens": {"prompt": 800, "candidates": 60, "cached": 0, "total": 860}}}}})
        }
    };
    println!("{out}");
}
