//! Agent CLIs as the model (DESIGN §16), with `examples/fake_agent_cli.rs` standing in for claude,
//! codex and gemini: it connects to tabd's MCP server exactly as each CLI would, so every call
//! goes through tabd's harness. The real claude CLI is in `agent_cli_real_claude` below.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::{describe, TestVault};

fn fake_cli() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_tabd"));
    let p = bin.parent().expect("target dir").join("examples/fake_agent_cli");
    assert!(p.exists(), "{} missing: run through `cargo test`", p.display());
    p
}

/// A vault whose provider is the fake CLI under `profile`, making `calls`; `extra` goes into the
/// profile's env (`FAKE_CLI_MODE` …) and `config` is appended.
fn setup(profile: &str, calls: Value, mode: &str, config: &str) -> (TestVault, PathBuf) {
    let v = TestVault::new();
    let log = v.dir.path().join("cli.jsonl");
    v.set_config(&format!(
        "timezone = \"UTC\"\n{}\n[provider]\nkind = \"command\"\nprofile = \"{profile}\"\n\n[profiles.{profile}]\ncommand = \"{}\"\nenv = {{ FAKE_CLI_LOG = \"{}\", FAKE_CLI_MODE = \"{mode}\", FAKE_CLI_CALLS = '{}' }}\n{config}",
        daemon_config(""),
        fake_cli().display(),
        log.display(),
        calls
    ));
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "---\nwrite_paths: [project/**]\napprove:\n  append_file: ask\n---\n# Ops\n## Mission\nKeep the project log.\n## Tools\n- read_file\n- write_file\n- append_file\n",
    );
    v.write("project/brief.md", "The brief: ship on Friday.\n");
    (v, log)
}

fn cli_log(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn calls() -> Value {
    json!([
        ["read_file", {"path": "project/brief.md"}],
        ["write_file", {"path": "../escape.md", "content": "pwned"}],
        ["write_file", {"path": "roles/ops.md", "content": "pwned"}],
        ["append_file", {"path": "project/log.md", "content": "shipped"}],
    ])
}

#[test]
fn a_claude_run_uses_only_tabds_tools_under_its_sandbox_and_is_logged_like_an_api_run() {
    let (v, log) = setup("claude", calls(), "ok", "");
    v.write("agent/inbox/ops/ship.md", "Log that we shipped.\n");
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    let seen = cli_log(&log);
    assert_eq!(seen.len(), 1);
    let run = &seen[0];
    assert_eq!(
        run["tools"],
        json!(["read_file", "write_file", "append_file"]),
        "only tabd's tools"
    );
    let args: Vec<&str> = run["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--tools"), "", "no built-in tools");
    assert_eq!(after("--output-format"), "json");
    assert_eq!(
        after("--allowedTools"),
        "mcp__tabd__read_file,mcp__tabd__write_file,mcp__tabd__append_file"
    );
    assert!(args.contains(&"--strict-mcp-config") && args.contains(&"--no-session-persistence"));
    let prompt = run["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("Keep the project log") && prompt.contains("Log that we shipped"),
        "{prompt}"
    );

    let results = run["results"].as_array().unwrap();
    assert_eq!(results[0]["error"], false);
    assert!(results[0]["text"].as_str().unwrap().contains("ship on Friday"));
    assert_eq!(results[1]["error"], true, "{results:?}");
    assert_eq!(results[2]["error"], true, "{results:?}");
    assert!(
        results[3]["text"]
            .as_str()
            .unwrap()
            .contains("queued for approval"),
        "{results:?}"
    );
    assert!(!v.dir.path().join("escape.md").exists());
    assert!(!v.read("roles/ops.md").contains("pwned"));
    assert!(!v.path("project/log.md").exists(), "the ask call did not run");
    assert_eq!(
        v.files_in("agent/approvals").len(),
        1,
        "it became an approval note"
    );

    // Logged and moved exactly as an API run.
    assert_eq!(v.files_in("agent/inbox/ops/processed").len(), 1);
    let rec = v.records().pop().unwrap();
    assert_eq!(rec["outcome"], "ok", "{rec}");
    assert_eq!(rec["tool_calls"].as_array().unwrap().len(), 4, "{rec}");
    assert_eq!(rec["usage"]["cost_usd"], 0.0421, "the CLI's own cost");
    assert_eq!(rec["usage"]["input_tokens"], 1200);
    let daily = v.daily();
    assert!(daily.contains("$0.042"), "{daily}");
    assert!(
        daily.contains("Handled the note through tabd's tools."),
        "{daily}"
    );
    assert!(daily.contains("`read_file` project/brief.md"), "{daily}");
    assert!(
        v.files_in(".tabd/cli").is_empty(),
        "the run's files are cleaned up"
    );
}

#[test]
fn codex_and_gemini_shapes_run_through_the_same_server() {
    for profile in ["codex", "gemini"] {
        let (v, log) = setup(
            profile,
            json!([["read_file", {"path": "project/brief.md"}]]),
            "ok",
            "",
        );
        v.write("agent/inbox/ops/go.md", "Read the brief.\n");
        let out = v.tabd(&["fire", "ops"]);
        assert_eq!(out.status.code(), Some(0), "{profile}: {}", describe(&out));
        let run = cli_log(&log).pop().unwrap();
        assert_eq!(run["shape"], profile);
        assert_eq!(run["tools"], json!(["read_file", "write_file", "append_file"]));
        assert!(run["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ship on Friday"));
        assert!(run["prompt"].as_str().unwrap().contains("Read the brief"));
        let rec = v.records().pop().unwrap();
        assert_eq!(rec["outcome"], "ok", "{profile}: {rec}");
        assert_eq!(rec["tool_calls"][0]["name"], "read_file");
        assert!(rec["usage"]["output_tokens"].as_u64().unwrap() > 0, "{rec}");
        assert_eq!(v.files_in("agent/inbox/ops/processed").len(), 1);
    }
}

#[test]
fn cli_outages_pause_without_an_attempt_and_bad_runs_count_one() {
    // (mode, outage?, what stderr says)
    let cases = [
        ("not-logged-in", true, "/login"),
        ("old", true, "lacks --tools"),
        ("denied", false, "refused 1 tool call"),
        ("crash", false, "something broke inside the CLI"),
    ];
    for (mode, outage, says) in cases {
        let (v, _) = setup("claude", json!([]), mode, "");
        v.write("agent/inbox/ops/n.md", "Do it.\n");
        let out = v.tabd(&["fire", "ops"]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", describe(&out));
        assert!(err.contains(says), "{mode}: {err}");
        if outage {
            assert!(err.contains("no attempt counted"), "{mode}: {err}");
        } else {
            assert!(err.contains("count an attempt"), "{mode}: {err}");
        }
        assert!(v.path("agent/inbox/ops/n.md").exists(), "{mode}: the note stays");
    }

    let (v, _) = setup("claude", json!([]), "ok", "");
    let config = std::fs::read_to_string(v.dir.path().join("config.toml")).unwrap();
    v.set_config(&config.replace(&fake_cli().display().to_string(), "/nonexistent/claude"));
    v.write("agent/inbox/ops/n.md", "Do it.\n");
    let out = v.tabd(&["fire", "ops"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not installed") && err.contains("no attempt counted"),
        "{err}"
    );
}

#[test]
fn a_cli_that_never_ends_is_killed_with_its_group_at_the_deadline() {
    let (v, _) = setup("claude", json!([]), "hang", "");
    let config = std::fs::read_to_string(v.dir.path().join("config.toml")).unwrap();
    v.set_config(&config.replace("[limits]\n", "[limits]\nrun_deadline = \"2s\"\n"));
    v.write("agent/inbox/ops/n.md", "Do it.\n");
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("deadline"),
        "{}",
        describe(&out)
    );
    // No process still has this vault's run folder on its command line.
    let marker = v.root().join(".tabd/cli").display().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_daemon_runs_a_role_through_the_cli_too() {
    let (v, log) = setup(
        "claude",
        json!([["read_file", {"path": "project/brief.md"}]]),
        "ok",
        "",
    );
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/go.md", "Read the brief.\n");
    wait_until(Duration::from_secs(30), "the run moved its note", || {
        v.files_in("agent/inbox/ops/processed").len() == 1
    });
    assert_eq!(cli_log(&log).len(), 1);
    let rec = v.records().pop().unwrap();
    assert_eq!(rec["outcome"], "ok", "{rec}");
    assert_eq!(rec["tool_calls"][0]["name"], "read_file");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}
