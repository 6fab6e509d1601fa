//! Input that cannot be read is refused with its reason, never a process abort (docs/spec.md §24,
//! issue 36): deeply nested notes, role files and config, a child's endless output, run through
//! the real binary.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{setup, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Reply};
use crate::support::mcp_server::server_config;
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(30);

/// A note whose frontmatter nests 20,000 lists (`- - - … x`): 40 KB.
fn deep_note() -> String {
    format!(
        "---\nfrom: someone\nx:\n{}x\n---\nplease handle\n",
        "- ".repeat(20_000)
    )
}

/// A role file whose frontmatter nests 100,000 lists.
fn deep_role() -> String {
    format!(
        "---\nmodel:\n{}x\n---\n# Deep\n## Mission\nNothing.\n",
        "- ".repeat(100_000)
    )
}

#[test]
fn a_deeply_nested_note_goes_to_failed_with_its_reason_and_the_daemon_serves_the_rest() {
    let (v, fake) = setup("");
    v.write("agent/inbox/delivery/deep.md", &deep_note());
    v.write(
        "agent/inbox/delivery/broken.md",
        "---\ntitle: Status: weekly\n---\nbody\n",
    );
    // 40 keys that are mappings: each was written into the next as escaped JSON text, doubling.
    v.write(
        "agent/inbox/delivery/keys.md",
        &format!("---\n{}x: 1\n---\n", "? ".repeat(40)),
    );
    v.write("agent/inbox/delivery/good.md", "an ordinary note");
    v.write("agent/inbox/risk/fine.md", "for risk");
    v.write("roles/deep.md", &deep_role());
    let mut d = Daemon::start(&v);
    wait_until(T, "the unreadable notes refused and the others run", || {
        v.files_in("agent/inbox/delivery/failed") == ["broken.md", "deep.md", "keys.md"]
            && v.files_in("agent/inbox/delivery/processed") == ["good.md"]
            && v.files_in("agent/inbox/risk/processed") == ["fine.md"]
    });
    assert_eq!(
        d.child.try_wait().unwrap(),
        None,
        "the daemon is still up:\n{}",
        d.stderr()
    );
    let daily = v.daily();
    assert!(
        daily.contains("[[agent/inbox/delivery/failed/deep]] cannot be read — line 4: the frontmatter nests lists and mappings more than 64 deep"),
        "{daily}"
    );
    assert!(
        daily.contains("[[agent/inbox/delivery/failed/broken]] cannot be read — line 2: the frontmatter is not valid YAML"),
        "{daily}"
    );
    let refused: Vec<_> = v
        .records()
        .into_iter()
        .filter(|r| r["outcome"] == "failed" && r["model"] == "")
        .collect();
    assert_eq!(refused.len(), 3, "one record per refused note: {refused:?}");
    let deep = refused
        .iter()
        .find(|r| r["trigger"]["notes"][0] == "agent/inbox/delivery/deep.md")
        .expect("the deep note's record");
    assert_eq!(deep["moved"][0]["to"], "agent/inbox/delivery/failed/deep.md");
    assert!(
        deep["error"].as_str().unwrap().contains("more than 64 deep"),
        "{deep}"
    );
    let asked: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    assert!(
        !asked.contains("- - - -") && !asked.contains("Status: weekly"),
        "no model saw them"
    );
    // A restart reads the vault again: nothing is left to crash on or to run twice.
    drop(d);
    let _d = Daemon::start(&v);
    assert_eq!(v.files_in("agent/inbox/delivery/failed").len(), 3);
}

#[test]
fn fire_refuses_a_deeply_nested_note_with_an_error_not_an_abort() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.write("agent/inbox/delivery/deep.md", &deep_note());
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("agent/inbox/delivery/deep.md cannot be read (line 4: the frontmatter nests lists and mappings more than 64 deep")
            && err.contains("moved to agent/inbox/delivery/failed/deep.md"),
        "{}",
        describe(&out)
    );
    assert_eq!(v.files_in("agent/inbox/delivery/failed"), ["deep.md"]);
    assert!(
        fake.requests().is_empty(),
        "no model call for a note that cannot be read"
    );
    // With a readable note beside it, that note runs and the other is still refused.
    v.write("agent/inbox/delivery/deep.md", &deep_note());
    v.write("agent/inbox/delivery/ok.md", "hello");
    fake.script([wire::text("anthropic", "done")]);
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        v.files_in("agent/inbox/delivery/failed"),
        ["deep-2.md", "deep.md"]
    );
    assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["ok.md"]);
}

#[test]
fn validate_names_the_file_and_line_of_a_role_nested_too_deep() {
    let v = TestVault::new();
    v.write("roles/deep.md", &deep_role());
    let out = v.tabd_within(&["validate"], T);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stdout(&out).contains(
            "roles/deep.md:3: error: the frontmatter nests lists and mappings more than 64 deep; tabd reads at most 64 levels"
        ),
        "{}",
        describe(&out)
    );
}

/// The most memory process `pid` has held since it started (its peak resident set, KiB), as
/// the kernel counts it for that program alone.
fn peak_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// An MCP server's stderr is kept a line's start at a time: a kept-alive server that writes
/// 256 MiB with no line end (a broken or hostile child) made the daemon hold all of it in one
/// line — a long enough line is the daemon's death.
#[test]
fn a_server_writing_stderr_without_line_ends_costs_the_daemon_no_memory_for_it() {
    let v = TestVault::new();
    let log = v.dir.path().join("calls.jsonl");
    v.set_config(&format!(
        "timezone = \"UTC\"\n{}{}",
        crate::support::daemon::daemon_config(""),
        server_config("loud", "stderr-flood", &log, "keep_alive = true")
    ));
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "# Ops\n## Mission\nUse the server.\n## Tools\n- loud/*\n",
    );
    let mut d = Daemon::start(&v);
    // The server answers only after its stderr is written, all but the pipe's last 64 KiB
    // read by the daemon.
    wait_until(T, "the server up in status.json", || {
        v.status_json().is_some_and(|s| s["mcp_servers"][0]["up"] == true)
    });
    let peak = peak_kib(d.pid());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert!(
        peak < 128 * 1024,
        "the daemon held {} MiB while the server wrote 256 MiB of stderr",
        peak / 1024
    );
}

#[test]
fn a_config_nested_too_deep_is_exit_2_with_a_sentence() {
    let v = TestVault::new();
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for (tail, line) in [
        (format!("[limits]\nx = {}\n", deep(100_000)), ":3: "),
        (
            format!("x = {}1{}\n", "{a=".repeat(100_000), "}".repeat(100_000)),
            ":2: ",
        ),
        (format!("x{} = 1\n", ".a".repeat(100_000)), ": "),
    ] {
        v.set_config(&format!("timezone = \"UTC\"\n{tail}"));
        let out = v.tabd_within(&["validate"], T);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "config.toml{line}error: values nest too deep: tabd's config reader stops at 80 levels"
            )),
            "{}",
            describe(&out)
        );
    }
}

/// `[[[…]]]`, `n` deep, as a value.
fn nested(n: usize) -> serde_json::Value {
    serde_json::from_str(&format!("{}{}", "[".repeat(n), "]".repeat(n))).unwrap()
}

/// What tabd's own folder holds that it set aside as unreadable.
fn set_aside(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd")
        .into_iter()
        .filter(|f| f.contains("corrupt"))
        .collect()
}

#[test]
fn a_model_response_nested_deeper_than_64_is_refused_and_the_state_stays_readable() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.write("agent/inbox/delivery/n.md", "hello");
    // 120 deep fits serde_json's 128, but not a record around it: tabd's state, holding this
    // call's record, was set aside as unreadable at the end of the run and every count reset.
    let args = json!({"path": "project/x.md", "content": "hi", "extra": nested(120)});
    fake.script([
        wire::tools("anthropic", None, &[("t1", "write_file", args)]),
        wire::text("anthropic", "done"),
    ]);
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the response could not be read: it nests arrays and objects more than 64 deep"),
        "{}",
        describe(&out)
    );
    assert_eq!(set_aside(&v), Vec::<String>::new(), "{}", describe(&out));
    assert!(
        v.state()["roles"]["delivery"].is_object(),
        "{}",
        v.read(".tabd/state.json")
    );
    assert_eq!(v.files_in("agent/inbox/delivery"), ["n.md"], "the note waits");
}

#[test]
fn tool_arguments_nested_deeper_than_64_are_refused_and_not_kept() {
    use std::io::{BufRead, Write};
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    let mut child = v
        .command(&["mcp", "serve", "--role", "delivery"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("tabd mcp serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let args = json!({"path": "project/x.md", "content": "hi", "extra": nested(120)});
    for msg in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_file", "arguments": args}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    stdin.flush().unwrap();
    let answer = lines
        .by_ref()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|m| m["id"] == 1)
        .expect("an answer to the call");
    drop(stdin);
    let _ = child.wait();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("refused: the arguments cannot be read: it nests arrays and objects more than 64 deep"),
        "{answer}"
    );
    assert!(!v.path("project/x.md").exists());
    // Whatever a session records of the call (its records are readable: `records` parses each).
    for r in v.records() {
        for call in r["tool_calls"].as_array().into_iter().flatten() {
            assert_eq!(
                call["input"], "[arguments nested more than 64 deep: not kept]",
                "{r}"
            );
        }
    }
    assert_eq!(set_aside(&v), Vec::<String>::new());
}

#[test]
fn a_model_response_larger_than_32_mib_is_cut_off_not_read_whole() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.write("agent/inbox/delivery/n.md", "hello");
    fake.script([Reply::Raw(
        200,
        format!("{{\"id\": \"{}\"}}", "x".repeat(33 * 1024 * 1024)),
    )]);
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the response could not be read: it is larger than 32 MiB"),
        "{}",
        describe(&out)
    );
    assert_eq!(v.files_in("agent/inbox/delivery"), ["n.md"], "the note waits");
}

/// Issue 49, item 5: no record or name reaches a terminal raw. A role title, a schedule line, a
/// model's answer and a note's text carrying escape sequences (a window title, a screen clear, a
/// bell) and a text-direction override come out of every command that prints them with each such
/// character replaced — never as bytes a terminal would act on.
#[test]
fn no_escape_sequence_reaches_the_terminal_from_any_command() {
    let v = TestVault::new();
    let fake = crate::support::fake_model::FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    let evil = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}";
    let role = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &role
            .replacen("# Delivery Manager", &format!("# Delivery {evil} Manager"), 1)
            .replacen(
                "9am and 5pm, weekdays",
                &format!("9am and 5pm, weekdays\nevery {evil} moon"),
                1,
            ),
    );
    v.write(
        "roles/risk.md",
        &v.read("roles/risk.md")
            .replacen("# Risk Manager", &format!("# Risk {evil}"), 1),
    );
    fake.script([crate::support::wire::text(
        "anthropic",
        &format!("Summary {evil} done"),
    )]);
    v.write("agent/inbox/risk/n.md", &format!("a note {evil}\n"));
    let mut outputs = vec![("fire", v.tabd(&["fire", "risk"]))];
    for args in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["validate"],
        vec!["schedule"],
        vec!["logs"],
        vec!["runs"],
        vec!["cost"],
        vec!["approvals"],
        vec!["prompt", "risk"],
    ] {
        outputs.push((args[0], v.tabd(&args)));
    }
    for (what, out) in outputs {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let raw = bytes.iter().any(|b| *b == 0x1b || *b == 0x07)
                || String::from_utf8_lossy(bytes).contains('\u{202e}');
            assert!(
                !raw,
                "`tabd {what}` wrote a control character to {stream}:\n{}",
                describe(&out)
            );
        }
    }
}
