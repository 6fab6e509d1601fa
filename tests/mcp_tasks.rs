//! MCP as of 2026-07-28 (docs/spec.md §29, issue 53): both protocol lines, and long calls answered
//! with a task — against real servers nobody here wrote, installed by
//! `scripts/install-test-clis.sh`: the reference "everything" server (npm; 2025-11-25 with
//! Tasks, `simulate-research-query` requires them) and FastMCP with its Tasks extension (PyPI;
//! 2026-07-28, SEP-2663) running `tests/fixtures/tasks_server.py`. A hostile server in plain
//! Python (`tests/fixtures/garbage_tasks_server.py`) answers garbage task states.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_model::FakeModel;
use crate::support::{describe, wire, TestVault};

const KIND: &str = "anthropic";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The everything server's script, or `None` (said, or a failure under TABD_REQUIRE_NODE=1).
fn everything() -> Option<PathBuf> {
    let script =
        repo().join("target/test-clis/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = std::process::Command::new("node").arg("--version").output();
    if !script.exists() || node.is_err() {
        crate::support::missing(
            "TABD_REQUIRE_NODE",
            "node or the MCP everything server is not installed",
            "install Node.js 18+ and npm, then run scripts/install-test-clis.sh",
        );
        return None;
    }
    Some(script)
}

/// The venv's Python with FastMCP and its Tasks extension, or `None` (said, or a failure under
/// TABD_REQUIRE_PYMCP=1).
fn fastmcp() -> Option<PathBuf> {
    let python = repo().join("target/test-clis/pymcp/bin/python");
    let there = std::process::Command::new(&python)
        .args(["-c", "import fastmcp_tasks"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        crate::support::missing(
            "TABD_REQUIRE_PYMCP",
            "FastMCP with the Tasks extension is not installed",
            "install Python 3.12+, then run scripts/install-test-clis.sh",
        );
        return None;
    }
    Some(python)
}

/// `[mcp.everything]`.
fn everything_config(script: &Path) -> String {
    format!(
        "[mcp.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\nstartup_timeout_s = 60\n",
        script.display()
    )
}

/// `[mcp.py]`: the FastMCP fixture, logging its calls to `log`; `extra` appended.
fn fastmcp_config(python: &Path, log: &Path, extra: &str) -> String {
    format!(
        "[mcp.py]\ncommand = \"{}\"\nargs = [\"{}\"]\nenv = {{ TASKS_LOG = \"{}\" }}\nwritable = [\"{}\"]\nstartup_timeout_s = 60\n{extra}\n",
        python.display(),
        repo().join("tests/fixtures/tasks_server.py").display(),
        log.display(),
        log.parent().unwrap().display()
    )
}

/// `[mcp.garbage]`: the hostile server in `mode`, logging requests to `log`.
fn garbage_config(mode: &str, log: &Path) -> String {
    format!(
        "[mcp.garbage]\ncommand = \"python3\"\nargs = [\"{}\"]\nenv = {{ GARBAGE = \"{mode}\", GARBAGE_LOG = \"{}\" }}\nwritable = [\"{}\"]\ntask_timeout_s = 3\n",
        repo().join("tests/fixtures/garbage_tasks_server.py").display(),
        log.display(),
        log.parent().unwrap().display()
    )
}

/// A role `ops` that may call every tool of `servers` at once.
fn ops_role(v: &TestVault, servers: &[&str]) {
    v.unschedule_stock_roles();
    let tools: String = servers.iter().map(|s| format!("- {s}/*\n")).collect();
    v.write(
        "roles/ops.md",
        &format!("---\napprove: {{network: auto, destructive: auto}}\n---\n# Ops\n## Mission\nWork.\n## Tools\n{tools}"),
    );
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// One call by the model, then a closing text; the call's result (text, is it an error).
fn fire_one_call(v: &TestVault, fake: &FakeModel, tool: &str, input: Value) -> (String, bool) {
    fake.script([
        wire::tools(KIND, None, &[("c1", tool, input)]),
        wire::text(KIND, "Done."),
    ]);
    let out = v.tabd_within(&["fire", "ops"], Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let results = wire::tool_results(&reqs.last().unwrap().body);
    let (_, text, is_error) = results.into_iter().next().expect("a tool result");
    (text, is_error)
}

/// Issue 53, item 1: `tabd mcp list` says which line each server speaks — the FastMCP server
/// 2026-07-28 without a handshake, the everything server the 2025 handshake.
#[test]
fn mcp_list_shows_each_real_servers_protocol_line() {
    let (Some(script), Some(python)) = (everything(), fastmcp()) else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("py/calls.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}{}",
            everything_config(&script),
            fastmcp_config(&python, &log, "")
        ),
    );
    let out = v.tabd(&["mcp", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = |name: &str| {
        listing["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let (e, p) = (server("everything"), server("py"));
    assert_eq!(e["protocol"], "2025-11-25 (handshake)", "{e}");
    assert_eq!(p["protocol"], "2026-07-28 (stateless)", "{p}");
    let names = |s: &Value| -> Vec<String> {
        s["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(&e).contains(&"simulate-research-query".to_string()), "{e}");
    assert!(names(&p).contains(&"slow_sum".to_string()), "{p}");
}

/// Issue 53, item 2 (2025-11-25 Tasks, SEP-1686): the everything server's task-required tool
/// refuses a plain call; tabd calls it as a task, polls it and the model gets the report.
#[test]
fn a_task_required_tool_of_the_everything_server_gets_its_result() {
    let Some(script) = everything() else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, KIND, &everything_config(&script));
    ops_role(&v, &["everything"]);
    let (text, is_error) = fire_one_call(
        &v,
        &fake,
        "everything__simulate-research-query",
        json!({"topic": "tabd tasks"}),
    );
    assert!(!is_error, "{text}");
    assert!(text.contains("Research Report: tabd tasks"), "{text}");
    // A plain call of a plain tool still answers at once on the same line.
    let (text, is_error) = fire_one_call(&v, &fake, "everything__echo", json!({"message": "hi"}));
    assert!(!is_error && text.contains("hi"), "{text}");
}

/// Issue 53, item 2 (2026-07-28, SEP-2663): FastMCP answers the task-required tool with a task;
/// tabd polls it and the model gets the sum. The call is sent once.
#[test]
fn a_task_of_the_fastmcp_server_gets_its_result_and_is_sent_once() {
    let Some(python) = fastmcp() else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("py/calls.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    v.use_model(&fake, KIND, &fastmcp_config(&python, &log, ""));
    ops_role(&v, &["py"]);
    let (text, is_error) = fire_one_call(&v, &fake, "py__slow_sum", json!({"a": 2, "b": 3, "seconds": 3}));
    assert!(!is_error, "{text}");
    assert!(text.contains("the sum is 5"), "{text}");
    assert_eq!(lines(&log), vec!["start 3.0", "end 3.0"], "sent once, ran once");
    // The daily note says the call ran as a task: server, tool, how long.
    let daily = v.daily();
    assert!(
        daily.contains("MCP server `py` ran `slow_sum` as task `") && daily.contains("; it ended after "),
        "{daily}"
    );
}

/// Issue 53, item 2: a task that ends after 90 s — longer than `tool_timeout_s` (60 s), the wall
/// peers hit — gets its result.
#[test]
fn a_task_that_ends_after_90_s_gets_its_result() {
    let Some(python) = fastmcp() else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("py/calls.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    v.use_model(&fake, KIND, &fastmcp_config(&python, &log, "tool_timeout_s = 60"));
    ops_role(&v, &["py"]);
    let (text, is_error) = fire_one_call(&v, &fake, "py__slow_sum", json!({"a": 40, "b": 2, "seconds": 90}));
    assert!(!is_error, "{text}");
    assert!(text.contains("the sum is 42"), "{text}");
    assert_eq!(lines(&log), vec!["start 90.0", "end 90.0"]);
}

/// A task that runs past the server's `task_timeout_s` is cancelled (`tasks/cancel`), and the
/// model is told it may or may not have been done.
#[test]
fn a_task_past_its_task_timeout_is_cancelled() {
    let Some(python) = fastmcp() else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("py/calls.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    v.use_model(&fake, KIND, &fastmcp_config(&python, &log, "task_timeout_s = 3"));
    ops_role(&v, &["py"]);
    let (text, is_error) = fire_one_call(&v, &fake, "py__slow_sum", json!({"a": 1, "b": 1, "seconds": 120}));
    assert!(is_error, "{text}");
    assert!(
        text.contains("task_timeout_s = 3") && text.contains("cancelled"),
        "{text}"
    );
    assert_eq!(
        lines(&log),
        vec!["start 120.0", "cancelled 120.0"],
        "the server's task was cancelled"
    );
}

/// A server's task answers are input: a state no revision has ends the wait and the task is
/// cancelled; a handle whose id is 10 000 characters is refused; a status message that would
/// forge a heading and a task that never ends reach the model as neither.
#[test]
fn a_server_answering_garbage_task_states_is_refused_and_its_task_cancelled() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("g/requests.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    ops_role(&v, &["garbage"]);
    let requests = |log: &Path| -> Vec<String> {
        lines(log)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|r| r["method"].as_str().unwrap_or("").to_string())
            .filter(|m| m.starts_with("tasks/") || m == "tools/call")
            .collect()
    };

    v.use_model(&fake, KIND, &garbage_config("state", &log));
    let (text, is_error) = fire_one_call(&v, &fake, "garbage__work", json!({}));
    assert!(is_error, "{text}");
    assert!(text.contains("does not know"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no terminal escape reaches the model: {text:?}"
    );
    assert_eq!(requests(&log), ["tools/call", "tasks/get", "tasks/cancel"]);

    std::fs::remove_file(&log).unwrap();
    v.use_model(&fake, KIND, &garbage_config("long_id", &log));
    let (text, is_error) = fire_one_call(&v, &fake, "garbage__work", json!({}));
    assert!(is_error, "{text}");
    assert!(text.contains("task id"), "{text}");
    assert_eq!(requests(&log), ["tools/call"], "no handle: nothing polled");

    std::fs::remove_file(&log).unwrap();
    v.use_model(&fake, KIND, &garbage_config("never", &log));
    let (text, is_error) = fire_one_call(&v, &fake, "garbage__work", json!({}));
    assert!(is_error && text.contains("task_timeout_s = 3"), "{text}");
    assert_eq!(requests(&log).last().map(String::as_str), Some("tasks/cancel"));
    let daily = v.daily();
    assert!(!daily.contains("\n# Approved"), "{daily}");
}

/// A 2025-11-25 server that refuses a plain call of its task-required tool with a JSON-RPC error
/// -32601 (not an error result, as the everything server does): tabd calls it again as a task,
/// polls it, and takes the result from `tasks/result`. The plain call was refused, so the tool
/// ran once.
#[test]
fn a_2025_task_refused_as_a_jsonrpc_error_is_called_as_a_task_and_its_result_fetched() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("g/requests.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    ops_role(&v, &["garbage"]);
    v.use_model(&fake, KIND, &garbage_config("legacy", &log));
    let (text, is_error) = fire_one_call(&v, &fake, "garbage__work", json!({}));
    assert!(!is_error, "{text}");
    assert!(text.contains("worked, as a 2025 task"), "{text}");
    let methods: Vec<String> = lines(&log)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["method"].as_str().unwrap_or("").to_string())
        .filter(|m| m.starts_with("tasks/") || m == "tools/call")
        .collect();
    assert_eq!(methods, ["tools/call", "tools/call", "tasks/get", "tasks/result"]);
}

/// Issue 53, item 1: `tabd mcp serve` answers both lines — a 2026-07-28 client with no handshake
/// (`server/discover`, then requests that carry the version in `_meta`), and a 2025 client with
/// `initialize`.
#[test]
fn tabd_mcp_serve_answers_both_protocol_lines() {
    use std::io::{BufRead, Write};
    let v = TestVault::new();
    v.write("notes/plan.md", "The plan: ship it.\n");
    let session = |lines: &[Value]| -> Vec<Value> {
        let mut child = v
            .command(&["mcp", "serve", "--role", "delivery"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut answers = Vec::new();
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
            stdin.flush().unwrap();
            if line.get("id").is_none() {
                continue;
            }
            let mut answer = String::new();
            stdout.read_line(&mut answer).unwrap();
            answers.push(serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}")));
        }
        drop(stdin);
        child.wait().unwrap();
        answers
    };
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let modern = session(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"_meta": meta, "name": "read_file", "arguments": {"path": "notes/plan.md"}}}),
    ]);
    let versions = &modern[0]["result"]["supportedVersions"];
    assert!(
        versions
            .as_array()
            .is_some_and(|a| a.contains(&json!("2026-07-28")) && a.contains(&json!("2025-11-25"))),
        "{}",
        modern[0]
    );
    let tools = modern[1]["result"]["tools"]
        .as_array()
        .expect("tools, with no handshake");
    assert!(tools.iter().any(|t| t["name"] == "read_file"), "{}", modern[1]);
    let text = modern[2]["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("ship it"), "{}", modern[2]);

    let legacy = session(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]);
    assert_eq!(
        legacy[0]["result"]["protocolVersion"], "2025-11-25",
        "{}",
        legacy[0]
    );
    assert!(
        legacy[1]["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{}",
        legacy[1]
    );
}

/// Issue 53, item 2: a run that stops (tabd is stopped) while it waits for a task cancels the
/// task: the server hears `tasks/cancel` before tabd ends its session.
#[test]
fn a_stopped_run_cancels_its_task() {
    use crate::support::daemon::{daemon_config, wait_until, Daemon};
    let Some(python) = fastmcp() else {
        return;
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("py/calls.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    v.use_model(
        &fake,
        KIND,
        &format!("{}{}", daemon_config(""), fastmcp_config(&python, &log, "")),
    );
    ops_role(&v, &["py"]);
    fake.script([
        wire::tools(
            KIND,
            None,
            &[("c1", "py__slow_sum", json!({"a": 1, "b": 2, "seconds": 300}))],
        ),
        wire::text(KIND, "Done."),
    ]);
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/long.md", "Add them, however long it takes.\n");
    wait_until(Duration::from_secs(60), "the task started", || {
        lines(&log).contains(&"start 300.0".to_string())
    });
    d.signal(libc::SIGTERM);
    assert!(d.wait_exit(Duration::from_secs(30)).is_some(), "tabd stopped");
    assert_eq!(
        lines(&log),
        vec!["start 300.0", "cancelled 300.0"],
        "the task was cancelled"
    );
}

/// A server that answers every request it does not know with an empty result (so its answer to
/// `server/discover` is neither discovery nor an error) is started again for the 2025 handshake.
#[test]
fn a_server_that_answers_discover_with_an_empty_result_gets_the_handshake() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[mcp.echo]\ncommand = \"python3\"\nargs = [\"{}\"]\n",
            repo().join("tests/fixtures/echo_server.py").display()
        ),
    );
    let out = v.tabd(&["mcp", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let echo = &listing["servers"][0];
    assert_eq!(echo["protocol"], "2025-11-25 (handshake)", "{echo}");
    assert!(echo["tools"].as_array().is_some_and(|t| t.len() == 2), "{echo}");
}
