//! MCP servers (docs/spec.md §14) against the in-repo test server (`examples/mcp_test_server.rs`, built
//! by `cargo test`): tools offered with their schemas, calls run and recorded, servers stopped
//! with their whole process group, and every way a server can misbehave ending in bounded time.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::fake_model::{FakeModel, Recorded};
use crate::support::mcp_server::{server_bin, server_config, server_log};
use crate::support::{describe, wire, TestVault};

const KIND: &str = "anthropic";

/// A role `ops` with the given frontmatter lines and tools, and nothing scheduled. Its calls run
/// at once (`approve` auto for every class): these tests are about the MCP side; approvals have
/// their own (tests/approvals.rs).
fn ops_role(v: &TestVault, frontmatter: &str, tools: &[&str]) {
    v.unschedule_stock_roles();
    let tools: String = tools.iter().map(|t| format!("- {t}\n")).collect();
    v.write(
        "roles/ops.md",
        &format!(
            "---\napprove: {{network: auto, destructive: auto}}\n{frontmatter}---\n# Ops\n## Mission\nUse the test server.\n## Tools\n{tools}"
        ),
    );
}

fn tool_names(r: &Recorded) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn tool<'a>(r: &'a Recorded, name: &str) -> &'a Value {
    r.body["tools"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {:?}", tool_names(r)))
}

/// A process is gone when /proc has no entry for it, or only a zombie its parent will reap.
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

fn wait_gone(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_role_gets_the_servers_tools_runs_them_and_leaves_no_process() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    let pid_file = v.dir.path().join("grandchild.pid");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}env = {{ MCP_TEST_LOG = \"{}\", MCP_TEST_GRANDCHILD = \"{}\" }}\nwritable = [\"{}\"]\n",
            format_args!("[mcp.test]\ncommand = \"{}\"\n", server_bin().display()),
            log.display(),
            pid_file.display(),
            v.dir.path().display()
        ),
    );
    ops_role(&v, "", &["read_file", "test/*"]);
    v.write("agent/inbox/ops/hello.md", "Say hello through the test server.\n");
    fake.script([
        wire::tools(
            KIND,
            Some("Echo, add, and look at a big result and an image."),
            &[
                ("t1", "test__echo", json!({"text": "hello from ops"})),
                ("t2", "test__add", json!({"a": 2, "b": 40})),
                ("t3", "test__big", json!({})),
                ("t4", "test__image", json!({})),
            ],
        ),
        wire::text(KIND, "Done with the test server."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let names = tool_names(&reqs[0]);
    for t in [
        "read_file",
        "test__echo",
        "test__add",
        "test__delete_all",
        "test__post",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} missing from {names:?}");
    }
    // The server's own schema and description, as the server gave them.
    let echo = tool(&reqs[0], "test__echo");
    assert_eq!(echo["input_schema"]["properties"]["text"]["type"], "string");
    assert_eq!(echo["input_schema"]["required"], json!(["text"]));
    assert!(
        echo["description"].as_str().unwrap().contains("Echo a text back"),
        "{echo}"
    );

    // Results back to the model: text, the sum, a capped big result, an image summarised.
    let results = wire::tool_results(&reqs[1].body);
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(results[0].1, "hello from ops");
    assert_eq!(results[1].1, "42");
    assert!(!results[2].2, "big is not an error");
    assert!(
        results[2].1.len() <= 64 * 1024 + 200 && results[2].1.len() > 60 * 1024,
        "big result capped at 64 KiB: {} bytes",
        results[2].1.len()
    );
    assert!(
        results[2].1.contains("result cut at 65536 of 102400 bytes"),
        "{}",
        &results[2].1[results[2].1.len() - 200..]
    );
    assert!(results[3].1.contains("image/png"), "{}", results[3].1);

    // The server really ran the calls, with the model's arguments.
    let calls = server_log(&log);
    assert_eq!(
        calls[0],
        json!({"tool": "echo", "arguments": {"text": "hello from ops"}})
    );
    assert_eq!(calls[1], json!({"tool": "add", "arguments": {"a": 2, "b": 40}}));

    // Recorded with the server, in the JSONL record and the daily log's Actions.
    let rec = v.records();
    let r = rec.last().unwrap();
    assert_eq!(r["tool_calls"][0]["name"], "test__echo");
    assert_eq!(r["tool_calls"][0]["server"], "test");
    assert_eq!(r["tool_calls"][0]["ok"], true);
    let daily = v.daily();
    assert!(daily.contains("`test__echo` (test)"), "{daily}");
    assert!(daily.contains("`test__add` (test)"), "{daily}");
    assert_eq!(v.files_in("agent/inbox/ops/processed"), ["hello.md"]);

    // The server and the grandchild it started (as npx does) are gone.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the server started its grandchild")
        .trim()
        .parse()
        .unwrap();
    assert!(wait_gone(pid), "grandchild {pid} survived the run");
}

#[test]
fn allow_lists_deny_tools_and_schemas_are_enforced_by_tabd() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(&fake, KIND, &server_config("test", "normal", &log, ""));
    ops_role(
        &v,
        "deny_tools: [test/delete_all]\n",
        &["test/echo", "test/delete_all", "test/add"],
    );
    fake.script([
        wire::tools(
            KIND,
            None,
            &[
                // Wrong type: refused before the server sees it.
                ("t1", "test__add", json!({"a": "two", "b": 3})),
                // Denied: never listed, and refused at call time.
                ("t2", "test__delete_all", json!({})),
                // Not in the allow list.
                ("t3", "test__post", json!({"channel": "general", "text": "hi"})),
                ("t4", "test__echo", json!({"text": "allowed"})),
            ],
        ),
        wire::text(KIND, "ok"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let mut names = tool_names(&reqs[0]);
    names.retain(|n| n.starts_with("test__"));
    names.sort();
    assert_eq!(names, ["test__add", "test__echo"]);
    let results = wire::tool_results(&reqs[1].body);
    assert!(
        results[0].2 && results[0].1.contains("invalid input"),
        "{results:?}"
    );
    assert!(results[1].2, "{results:?}");
    assert!(results[2].2, "{results:?}");
    assert_eq!(results[3].1, "allowed");
    // Only the allowed, valid call reached the server.
    assert_eq!(
        server_log(&log),
        [json!({"tool": "echo", "arguments": {"text": "allowed"}})]
    );
}

/// Each way a server can misbehave at start ends within its startup timeout; an optional server
/// being down is the model's business (it is told), and the run log carries the stderr tail.
#[test]
fn misbehaving_servers_at_start_end_in_bounded_time_and_the_model_is_told() {
    for (mode, says) in [
        ("silent", "startup_timeout_s"),
        ("flood", ""),
        ("garbage", ""),
        ("exit", "SLACK_MCP_XOXP_TOKEN is not set"),
    ] {
        let v = TestVault::new();
        let fake = FakeModel::start();
        let log = v.dir.path().join("calls.jsonl");
        v.use_model(
            &fake,
            KIND,
            &server_config("bad", mode, &log, "startup_timeout_s = 1"),
        );
        ops_role(&v, "", &["read_file", "bad/*"]);
        fake.script([wire::text(KIND, "Worked without the server.")]);
        let started = Instant::now();
        let out = v.tabd_within(&["fire", "ops"], Duration::from_secs(30));
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", describe(&out));
        assert!(took < Duration::from_secs(20), "{mode}: took {took:?}");
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 1, "{mode}");
        assert!(
            !tool_names(&reqs[0]).iter().any(|n| n.starts_with("bad__")),
            "{mode}"
        );
        let prompt = wire::all_text(&reqs[0].body);
        assert!(
            prompt.contains("MCP server `bad`") && prompt.contains("not available in this run"),
            "{mode}: the model is told\n{prompt}"
        );
        let daily = v.daily();
        assert!(daily.contains("**MCP server down:** `bad`"), "{mode}: {daily}");
        assert!(daily.contains(says), "{mode}: {daily}");
        assert!(daily.contains("- **Outcome:** ok"), "{mode}: {daily}");
    }
}

#[test]
fn a_required_server_down_pauses_the_role_without_an_attempt_and_keeps_the_note() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(
        &fake,
        KIND,
        &server_config("bad", "exit", &log, "required = true"),
    );
    ops_role(&v, "", &["bad/*"]);
    v.write("agent/inbox/ops/task.md", "Needs the server.\n");
    for _ in 0..2 {
        let out = v.tabd(&["fire", "ops"]);
        assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    }
    assert!(
        fake.requests().is_empty(),
        "no model call without a required server"
    );
    assert_eq!(v.files_in("agent/inbox/ops"), ["task.md"], "{}", v.listing());
    assert!(v.files_in("agent/inbox/ops/failed").is_empty());
    // One "waiting" line for the cause (not one per fire), with the server's last words.
    let daily = v.daily();
    assert_eq!(
        daily.matches("· Ops · waiting — MCP server `bad` exited").count(),
        1,
        "{daily}"
    );
    assert!(daily.contains("SLACK_MCP_XOXP_TOKEN is not set"), "{daily}");
    assert!(daily.contains("no attempt counted"), "{daily}");
    let status = v.tabd(&["status", "--json"]);
    let status: Value = serde_json::from_slice(&status.stdout).expect("status json");
    let ops = status["roles"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["role"] == "ops"))
        .expect("ops in status");
    assert_eq!(ops["last_run"]["outcome"], "paused", "{status}");
}

#[test]
fn a_call_that_never_answers_is_cancelled_and_a_crash_mid_call_is_an_error_for_the_model() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(
        &fake,
        KIND,
        &server_config("test", "normal", &log, "tool_timeout_s = 1"),
    );
    ops_role(&v, "", &["test/*"]);
    fake.script([
        wire::tools(KIND, None, &[("t1", "test__slow", json!({}))]),
        wire::tools(KIND, None, &[("t2", "test__crash", json!({}))]),
        wire::tools(
            KIND,
            None,
            &[("t3", "test__echo", json!({"text": "after the crash"}))],
        ),
        wire::text(KIND, "The server is gone."),
    ]);
    let started = Instant::now();
    let out = v.tabd_within(&["fire", "ops"], Duration::from_secs(40));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(started.elapsed() < Duration::from_secs(30));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    let slow = wire::tool_results(&reqs[1].body);
    assert!(slow[0].2 && slow[0].1.contains("tool_timeout_s"), "{slow:?}");
    let crash = wire::tool_results(&reqs[2].body);
    assert!(crash[0].2, "{crash:?}");
    let after = wire::tool_results(&reqs[3].body);
    assert!(after[0].2, "a dead server answers nothing: {after:?}");
    // The server heard the cancellation (MCP `notifications/cancelled`).
    let calls = server_log(&log);
    assert!(calls.contains(&json!({"cancelled": "slow"})), "{calls:?}");
}

#[test]
fn unknown_servers_in_roles_and_bad_server_config_are_validate_errors_with_lines() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(&fake, KIND, &server_config("test", "normal", &log, ""));
    ops_role(&v, "", &["read_file", "slack/*"]);
    let out = v.tabd(&["validate"]);
    assert_ne!(out.status.code(), Some(0));
    let text = describe(&out);
    assert!(
        text.contains("roles/ops.md:9") && text.contains("slack"),
        "{text}"
    );

    v.use_model(
        &fake,
        KIND,
        &format!("{}colour = \"blue\"\n", server_config("test", "normal", &log, "")),
    );
    ops_role(&v, "", &["test/*"]);
    let out = v.tabd(&["validate"]);
    assert_ne!(out.status.code(), Some(0));
    let text = describe(&out);
    let config = std::fs::read_to_string(v.dir.path().join("config.toml")).unwrap();
    let line = config.lines().position(|l| l.starts_with("colour")).unwrap() + 1;
    assert!(
        text.contains(&format!("config.toml:{line}: error: unknown field `colour`")),
        "{text}"
    );
}

/// The daemon keeps a `keep_alive` server up across runs: it re-lists tools when the server says
/// they changed, restarts it after a crash, and stops it (and its grandchild) when it stops.
#[test]
fn the_daemon_supervises_keep_alive_servers() {
    use crate::support::daemon::{daemon_config, Daemon};
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    let pid_file = v.dir.path().join("grandchild.pid");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}[mcp.test]\ncommand = \"{}\"\nkeep_alive = true\nenv = {{ MCP_TEST_LOG = \"{}\", MCP_TEST_GRANDCHILD = \"{}\" }}\nwritable = [\"{}\"]\n",
            daemon_config(""),
            server_bin().display(),
            log.display(),
            pid_file.display(),
            v.dir.path().display()
        ),
    );
    ops_role(&v, "", &["test/*"]);
    fake.script([
        wire::tools(KIND, None, &[("t1", "test__grow", json!({}))]),
        wire::text(KIND, "grown"),
        wire::tools(
            KIND,
            None,
            &[("t2", "test__grown", json!({})), ("t3", "test__crash", json!({}))],
        ),
        wire::text(KIND, "crashed it"),
        wire::tools(KIND, None, &[("t4", "test__echo", json!({"text": "back again"}))]),
        wire::text(KIND, "it is back"),
    ]);
    let mut d = Daemon::start(&v);
    let first_grandchild: i32 = {
        crate::support::daemon::wait_until(Duration::from_secs(10), "keep-alive server started", || {
            std::fs::read_to_string(&pid_file).is_ok_and(|s| !s.trim().is_empty())
        });
        std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };

    v.write("agent/inbox/ops/one.md", "Grow a tool.\n");
    let reqs = fake.wait_for_requests(2, Duration::from_secs(20));
    assert!(!tool_names(&reqs[0]).contains(&"test__grown".to_string()));

    v.write(
        "agent/inbox/ops/two.md",
        "Use the new tool, then crash the server.\n",
    );
    let reqs = fake.wait_for_requests(4, Duration::from_secs(20));
    assert!(
        tool_names(&reqs[2]).contains(&"test__grown".to_string()),
        "re-listed after tools/list_changed: {:?}",
        tool_names(&reqs[2])
    );
    let results = wire::tool_results(&reqs[3].body);
    assert_eq!(results[0].1, "the new tool works");
    assert!(results[1].2, "the crash is an error for the model: {results:?}");

    // The next run waits for the restart (1 s backoff) instead of going on without the server.
    v.write("agent/inbox/ops/three.md", "Is it back?\n");
    let reqs = fake.wait_for_requests(6, Duration::from_secs(30));
    let results = wire::tool_results(&reqs[5].body);
    assert_eq!(results[0].1, "back again", "{results:?}");
    let calls: Vec<Value> = server_log(&log)
        .into_iter()
        .filter_map(|c| c.get("tool").cloned())
        .collect();
    assert_eq!(
        calls,
        [json!("grow"), json!("grown"), json!("crash"), json!("echo")]
    );

    // The first server's group died with it; the restarted one's dies with the daemon.
    assert!(
        wait_gone(first_grandchild),
        "grandchild of the crashed server survived"
    );
    let second: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(second, first_grandchild, "the server was restarted");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
    assert!(
        wait_gone(second),
        "keep-alive server's grandchild survived the daemon"
    );
}

#[test]
fn mcp_list_shows_tools_risk_classes_roles_and_servers_that_fail_with_their_output() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}{}",
            server_config("test", "normal", &log, "risk = { echo = \"read\" }"),
            server_config("bad", "exit", &log, "")
        ),
    );
    ops_role(&v, "deny_tools: [test/delete_all]\n", &["test/*", "bad/*"]);
    v.write(
        "roles/watcher.md",
        "# Watcher\n## Mission\nWatch.\n## Tools\n- test/add\n",
    );

    let out = v.tabd(&["mcp", "list", "--json"]);
    assert_eq!(out.status.code(), Some(1), "a server is down: {}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let servers = listing["servers"].as_array().unwrap();
    let test = servers.iter().find(|s| s["name"] == "test").unwrap();
    assert_eq!(test["status"], "ok");
    assert_eq!(test["transport"], "stdio");
    // Issue 53, item 1: an rmcp 3.11 server speaks 2026-07-28, without a handshake.
    assert_eq!(test["protocol"], "2026-07-28 (stateless)", "{test}");
    assert_eq!(test["roles"], json!(["ops", "watcher"]));
    let t = |name: &str| {
        test["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {test}"))
            .clone()
    };
    assert_eq!(t("echo")["risk"], "read", "the config's risk table wins");
    assert_eq!(t("echo")["exposed"], "test__echo");
    assert_eq!(t("add")["risk"], "read", "readOnlyHint");
    assert_eq!(t("add")["roles"], json!(["ops", "watcher"]));
    assert_eq!(t("post")["risk"], "network", "no hints");
    assert_eq!(t("post")["roles"], json!(["ops"]));
    assert_eq!(t("delete_all")["risk"], "destructive");
    assert_eq!(t("delete_all")["roles"], json!([]), "denied to ops");
    let bad = servers.iter().find(|s| s["name"] == "bad").unwrap();
    assert_eq!(bad["status"], "down");
    assert!(bad["error"].as_str().unwrap().contains("exited"), "{bad}");
    assert!(
        bad["stderr"].as_str().unwrap().contains("fatal"),
        "stderr tail: {bad}"
    );
    assert!(server_log(&log).is_empty(), "listing calls no tool");

    // Text, filtered to one role.
    let out = v.tabd(&["mcp", "list", "--role", "watcher"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(text.contains("test (stdio"), "{text}");
    assert!(text.contains("protocol: MCP 2026-07-28 (stateless)"), "{text}");
    assert!(!text.contains("bad ("), "watcher does not use bad: {text}");
    assert!(
        text.lines()
            .any(|l| l.contains("test__add") && l.contains("read") && l.contains("watcher")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("test__post") && l.contains("no role")),
        "{text}"
    );

    let out = v.tabd(&["mcp", "list", "--role", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no role named nobody"));
}

#[test]
fn tabd_prompt_shows_the_mcp_tools_a_role_would_get_and_leaves_no_process() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    let pid_file = v.dir.path().join("grandchild.pid");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[mcp.test]\ncommand = \"{}\"\nenv = {{ MCP_TEST_LOG = \"{}\", MCP_TEST_GRANDCHILD = \"{}\" }}\nwritable = [\"{}\"]\n{}",
            server_bin().display(),
            log.display(),
            pid_file.display(),
            v.dir.path().display(),
            server_config("bad", "exit", &log, "")
        ),
    );
    ops_role(
        &v,
        "deny_tools: [test/delete_all]\n",
        &["read_file", "test/*", "bad/*"],
    );
    let out = v.tabd(&["prompt", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["read_file", "test__echo", "test__post", "test__add"] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert!(!text.contains("test__delete_all"), "denied tool shown:\n{text}");
    assert!(text.contains("\"text\""), "the server's schema is shown: {text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MCP server `bad`"), "{err}");
    assert!(fake.requests().is_empty(), "no model call");
    let grandchild: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_gone(grandchild), "the server's group was stopped");
}

/// The real `@modelcontextprotocol/server-memory`, installed the way people install it (npm into
/// node_modules, by `scripts/install-test-clis.sh`): run as `node …/dist/index.js` and through its
/// `.bin` link, sandboxed with nothing granted, it keeps its graph in a file outside the vault
/// (`MEMORY_FILE_PATH`, whose own folder tabd grants) across a restart of the server.
#[test]
fn real_memory_server_keeps_its_graph_outside_the_vault_across_a_restart() {
    let modules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-clis/node_modules");
    let script = modules.join("@modelcontextprotocol/server-memory/dist/index.js");
    let node = std::process::Command::new("node").arg("--version").output();
    if !script.exists() || node.is_err() {
        crate::support::missing(
            "TABD_REQUIRE_NODE",
            "node or the MCP memory server is not installed",
            "install Node.js 18+ and npm (apt-get install nodejs npm), then run scripts/install-test-clis.sh",
        );
        return;
    }
    let v = TestVault::new();
    let fake = FakeModel::start();
    let home = v.dir.path().canonicalize().unwrap();
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[mcp.memory]\ncommand = \"node\"\nargs = [\"{}\"]\nenv = {{ MEMORY_FILE_PATH = \"${{HOME}}/tabd-memory/memory.jsonl\" }}\nstartup_timeout_s = 60\n\n[mcp.linked]\ncommand = \"{}\"\nenv = {{ MEMORY_FILE_PATH = \"${{HOME}}/linked/graph.jsonl\" }}\nstartup_timeout_s = 60\n",
            script.display(),
            modules.join(".bin/mcp-server-memory").display()
        ),
    );
    ops_role(&v, "", &["memory/*", "linked/*"]);
    let entity =
        |what: &str| json!({"entities": [{"name": "Acme", "entityType": "client", "observations": [what]}]});
    fake.script([
        wire::tools(
            KIND,
            None,
            &[
                ("a", "memory__create_entities", entity("go-live 3 March")),
                ("b", "linked__create_entities", entity("kick-off 1 May")),
            ],
        ),
        wire::text(KIND, "Remembered."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    assert!(results.iter().all(|r| !r.2), "both writes worked: {results:?}");
    // A new run starts the servers again: the graph is read back from the file.
    fake.script([
        wire::tools(
            KIND,
            None,
            &[
                ("c", "memory__read_graph", json!({})),
                ("d", "linked__read_graph", json!({})),
            ],
        ),
        wire::text(KIND, "Read."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[3].body);
    assert!(results[0].1.contains("go-live 3 March"), "{results:?}");
    assert!(results[1].1.contains("kick-off 1 May"), "{results:?}");
    let stored = std::fs::read_to_string(home.join("tabd-memory/memory.jsonl")).unwrap();
    assert!(stored.contains("go-live 3 March"), "{stored}");
    assert!(std::fs::read_to_string(home.join("linked/graph.jsonl"))
        .unwrap()
        .contains("kick-off"));
}

/// A real published server: `@modelcontextprotocol/server-memory` through `npx` (the wrapper that
/// leaves grandchildren). Needs Node and the npm registry (or npm's cache), so it is ignored by
/// default; run it with `cargo test --test integration real_npm -- --ignored`.
#[test]
#[ignore = "needs npx and the npm registry; run with --ignored"]
fn real_npm_memory_server_through_npx() {
    if std::process::Command::new("npx")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::missing(
            "TABD_REQUIRE_NODE",
            "npx is not installed",
            "install Node.js 18+ and npm (apt-get install nodejs npm)",
        );
        return;
    }
    let v = TestVault::new();
    let fake = FakeModel::start();
    // Sandboxed (docs/spec.md §20): npx's cache lands in its own folder (its HOME); the graph in a file
    // outside the vault, in a folder of its own that tabd grants because the config names it.
    let memory = v.dir.path().join("graphs/memory.jsonl");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[mcp.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\nenv = {{ MEMORY_FILE_PATH = \"{}\" }}\nstartup_timeout_s = 180\n",
            memory.display()
        ),
    );
    ops_role(&v, "deny_tools: [memory/delete_entities]\n", &["memory/*"]);
    v.write(
        "agent/inbox/ops/remember.md",
        "Remember that Acme's go-live is 3 March.\n",
    );
    let entity =
        json!({"entities": [{"name": "Acme", "entityType": "client", "observations": ["go-live 3 March"]}]});
    fake.script([
        wire::tools(KIND, None, &[("t1", "memory__create_entities", entity)]),
        wire::text(KIND, "Remembered."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let names = tool_names(&reqs[0]);
    assert!(names.contains(&"memory__read_graph".to_string()), "{names:?}");
    assert!(
        !names.contains(&"memory__delete_entities".to_string()),
        "{names:?}"
    );
    let results = wire::tool_results(&reqs[1].body);
    assert!(!results[0].2, "the call succeeded: {results:?}");
    let stored = std::fs::read_to_string(&memory).expect("the server wrote its file in its state folder");
    assert!(stored.contains("go-live 3 March"), "{stored}");
    let out = v.tabd(&["mcp", "list", "--json"]);
    let listing: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let tools = listing["servers"][0]["tools"].as_array().unwrap();
    let read_graph = tools.iter().find(|t| t["name"] == "read_graph").unwrap();
    assert_eq!(read_graph["risk"], "read", "readOnlyHint from the real server");
}

/// `tabd mcp serve` is an MCP server like any other: here tabd itself is the client. The served
/// role's sandbox, tool list and approvals hold for every call, and calls are recorded.
#[test]
fn tabd_mcp_serve_offers_exactly_the_roles_tools_under_its_sandbox() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let tabd = env!("CARGO_BIN_EXE_tabd");
    let vault = v.root();
    let config = v.dir.path().join("config.toml");
    let serve = |extra: &str| {
        format!(
            "command = \"{tabd}\"\nargs = [\"--vault\", \"{}\", \"--config\", \"{}\", \"mcp\", \"serve\", \"--role\", \"inner\"{extra}]\n",
            vault.display(),
            config.display()
        )
    };
    v.use_model(&fake, KIND, &format!("[mcp.vault]\n{}\n", serve("")));
    v.unschedule_stock_roles();
    v.write(
        "roles/inner.md",
        "---\nwrite_paths: [project/**]\ndeny_tools: [search_files]\n---\n# Inner\n## Mission\nServed.\n## Tools\n- read_file\n- write_file\n- search_files\n",
    );
    ops_role(&v, "", &["vault/*"]);

    let out = v.tabd(&["mcp", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let served = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "vault")
        .unwrap();
    let names: Vec<&str> = served["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["read_file", "write_file"],
        "the role's tools, minus its deny_tools"
    );
    assert_eq!(served["tools"][0]["risk"], "read", "annotated read-only");

    fake.script([
        wire::tools(
            KIND,
            Some("Write inside and outside the sandbox."),
            &[
                (
                    "t1",
                    "vault__write_file",
                    json!({"path": "project/ok.md", "content": "fine"}),
                ),
                (
                    "t2",
                    "vault__write_file",
                    json!({"path": "roles/inner.md", "content": "pwned"}),
                ),
                (
                    "t3",
                    "vault__write_file",
                    json!({"path": "../escape.md", "content": "pwned"}),
                ),
                ("t4", "vault__read_file", json!({"path": "project/ok.md"})),
            ],
        ),
        wire::text(KIND, "done"),
    ]);
    v.write("agent/inbox/ops/go.md", "Go.\n");
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let results = wire::tool_results(&reqs[1].body);
    let result = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert!(!result("t1").2, "{results:?}");
    assert_eq!(v.read("project/ok.md"), "fine");
    assert!(result("t2").2 && result("t2").1.contains("roles/"), "{results:?}");
    assert!(result("t3").2, "{results:?}");
    assert!(!v.dir.path().join("escape.md").exists());
    assert!(!v.read("roles/inner.md").contains("pwned"));
    assert!(result("t4").1.ends_with("\n\nfine"), "{results:?}");

    // An interactive session's calls are daily-log lines.
    let daily = v.daily();
    assert!(
        daily.contains("· Inner · via MCP: `write_file` project/ok.md"),
        "{daily}"
    );
}

/// A keep-alive server that cannot start is shown in the daemon's status, with why.
#[test]
fn keep_alive_server_health_is_in_the_daemons_status() {
    use crate::support::daemon::{daemon_config, wait_until, Daemon};
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}{}{}",
            daemon_config(""),
            server_config("good", "normal", &log, "keep_alive = true"),
            server_config("broken", "exit", &log, "keep_alive = true")
        ),
    );
    ops_role(&v, "", &["good/*", "broken/*"]);
    let mut d = Daemon::start(&v);
    wait_until(Duration::from_secs(20), "both servers in status.json", || {
        v.status_json().is_some_and(|s| {
            let m = &s["mcp_servers"];
            m.as_array().is_some_and(|a| a.len() == 2)
                && m[0]["name"] == "broken"
                && m[0]["up"] == false
                && m[0]["error"].as_str().is_some_and(|e| e.contains("exited"))
                && m[1]["name"] == "good"
                && m[1]["up"] == true
        })
    });
    wait_until(Duration::from_secs(20), "agent/status.md warns", || {
        std::fs::read_to_string(v.path("agent/status.md"))
            .is_ok_and(|t| t.contains("MCP server `broken` is down"))
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}

/// A streamable-HTTP server (the test server in `http` mode, rmcp's HTTP server side), with its
/// bearer token from tabd's environment through `headers = { … "${VAR}" }`: calls work, a wrong
/// token is a server that is down with why, and the token appears in no log.
#[test]
fn a_streamable_http_server_with_a_token_from_the_environment() {
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    let addr_file = v.dir.path().join("addr");
    let _server = Killed(
        std::process::Command::new(server_bin())
            .env("MCP_TEST_MODE", "http")
            .env("MCP_TEST_TOKEN", "s3cret-token")
            .env("MCP_TEST_ADDR_FILE", &addr_file)
            .env("MCP_TEST_LOG", &log)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    crate::support::daemon::wait_until(Duration::from_secs(20), "the HTTP server's address", || {
        std::fs::read_to_string(&addr_file).is_ok_and(|a| a.contains(':'))
    });
    let addr = std::fs::read_to_string(&addr_file).unwrap();
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[mcp.remote]\nurl = \"http://{addr}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\nstartup_timeout_s = 10\n"
        ),
    );
    ops_role(&v, "", &["remote/echo"]);
    fake.script([
        wire::tools(
            KIND,
            None,
            &[("t1", "remote__echo", json!({"text": "hello over http"}))],
        ),
        wire::text(KIND, "done"),
    ]);
    v.write("agent/inbox/ops/go.md", "Echo over HTTP.\n");
    let out = v
        .command(&["fire", "ops"])
        .env("REMOTE_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    assert_eq!(tool_names(&reqs[0]), ["remote__echo"]);
    let results = wire::tool_results(&reqs[1].body);
    assert_eq!(results[0].1, "hello over http", "{results:?}");
    assert_eq!(server_log(&log).iter().filter(|c| c["tool"] == "echo").count(), 1);

    let out = v
        .command(&["mcp", "list", "--json"])
        .env("REMOTE_TOKEN", "wrong")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let remote = &listing["servers"][0];
    assert_eq!(remote["transport"], "http");
    assert_eq!(remote["status"], "down", "{remote}");
    assert!(
        remote["error"]
            .as_str()
            .unwrap()
            .contains("refused the connection (unexpected server response: HTTP 401 Unauthorized)"),
        "{remote}"
    );
    assert!(server_log(&log).iter().any(|c| c.get("refused").is_some()));
    let logs = format!("{}{:?}", v.daily(), v.records());
    assert!(!logs.contains("s3cret-token"), "the token leaked into a log");
}

/// What the MCP conformance suite found (issue 21): a line that is not JSON gets -32700, a
/// `tools/call` without a name or with non-object arguments gets -32602 (not "method not found"),
/// the server calls itself tabd, and a client that leaves without a session is not an error.
#[test]
fn tabd_mcp_serve_answers_protocol_errors_by_the_book() {
    use std::io::{BufRead, Write};
    let v = TestVault::new();
    let mut child = v
        .command(&["mcp", "serve", "--role", "delivery"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: &str| -> Value {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"))
    };
    assert_eq!(ask("this is not json")["error"]["code"], -32700);
    let a = ask(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}"#);
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (json!(5), json!(-32602)),
        "{a}"
    );
    let a = ask(
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_file","arguments":[1]}}"#,
    );
    assert_eq!(a["error"]["code"], -32602, "{a}");
    let init = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "tabd", "{init}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "the session ended cleanly: {status:?}");

    // A client that only probes and leaves: exit 0.
    let out = v
        .command(&["mcp", "serve", "--role", "delivery"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// Issue 49, item 7: a secret written into an MCP server's URL path (not as `${VAR}`) is shown
/// neither by `tabd mcp list` nor in the line that says the server cannot be reached.
#[test]
fn a_literal_secret_in_a_server_url_path_is_never_shown() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    // Port 9 (discard): nothing listens on loopback there, so the connection is refused.
    let secret = "sk8Hq2pLx7Vb3nRt9wZk";
    v.use_model(
        &fake,
        KIND,
        &format!("[mcp.zap]\nurl = \"http://127.0.0.1:9/api/{secret}/mcp\"\nstartup_timeout_s = 5\n"),
    );
    ops_role(&v, "", &["zap/*"]);
    for args in [vec!["mcp", "list"], vec!["mcp", "list", "--json"]] {
        let out = v.tabd(&args);
        let said = describe(&out);
        assert!(!said.contains(secret), "{args:?}: {said}");
        assert!(said.contains("http://127.0.0.1:9/api/…/mcp"), "{args:?}: {said}");
    }
}
