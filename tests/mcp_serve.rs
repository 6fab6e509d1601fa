//! `tabd mcp serve --role R` is a run of the role (issue 36, finding 14): refused at start when
//! the role is disabled or its day is spent, counted as one run that the next `tabd fire` and
//! `tabd status` see, `max_tool_calls` over the whole session, and what it spends counted in the
//! role's day as it goes. And the relay a CLI run serves its tools on reads a bounded first line.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::fake_model::FakeModel;
use crate::support::mcp_client::Client;
use crate::support::{describe, wire, TestVault};

/// A vault with the role `desk` (its frontmatter lines given; it reads and writes `project/`) and
/// the worker it may delegate to, nothing scheduled, the fake model answering every request with
/// text (2,095 tokens in, 503 out: 2,598 a request).
fn vault(fake: &FakeModel, desk: &str) -> TestVault {
    let v = TestVault::new();
    v.use_model(fake, "anthropic", "");
    v.unschedule_stock_roles();
    v.write(
        "roles/desk.md",
        &format!("---\nwrite_paths: [project/**]\ncan_delegate_to: [worker]\n{desk}---\n# Desk\n## Mission\nKeep the project notes.\n## Tools\n- read_file\n- write_file\n"),
    );
    v.write(
        "roles/worker.md",
        "---\n---\n# Worker\n## Mission\nAnswer.\n## Tools\n- read_file\n",
    );
    v.write("project/brief.md", "Ship on Friday.\n");
    fake.respond_with(|_, _| wire::text("anthropic", "done"));
    v
}

/// `tabd mcp serve --role desk` with a client that only looks (stdin closed at once).
fn serve_refused(v: &TestVault) -> std::process::Output {
    v.command(&["mcp", "serve", "--role", "desk"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn desk_status(v: &TestVault) -> Value {
    let out = v.tabd(&["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    status["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "desk")
        .cloned()
        .unwrap()
}

fn desk_records(v: &TestVault) -> Vec<Value> {
    v.records().into_iter().filter(|r| r["role"] == "desk").collect()
}

/// A disabled role is not served: exit 2 (its file says so), one sentence, no session.
#[test]
fn a_disabled_role_is_not_served() {
    let fake = FakeModel::start();
    let v = vault(&fake, "enabled: false\n");
    let out = serve_refused(&v);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: role `desk` is disabled (`enabled: false` in"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no MCP session: {}", describe(&out));
}

/// A role that has used its `max_runs_per_day` (here by `tabd fire`) is not served: exit 1.
#[test]
fn a_role_that_used_its_runs_today_is_not_served() {
    let fake = FakeModel::start();
    let v = vault(&fake, "max_runs_per_day: 1\n");
    let out = v.tabd(&["fire", "desk"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = serve_refused(&v);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: role `desk`: max_runs_per_day reached, and a `tabd mcp serve` session is a run of the role"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no MCP session: {}", describe(&out));
}

/// A role that spent its daily token budget (here by `tabd fire`) is not served: exit 1.
#[test]
fn a_role_that_spent_its_daily_budget_is_not_served() {
    let fake = FakeModel::start();
    let v = vault(&fake, "daily_token_budget: 1000\n");
    let out = v.tabd(&["fire", "desk"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = serve_refused(&v);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: role `desk`: daily token budget spent"),
        "{err}"
    );
}

/// `max_tool_calls` counts every call of the session: the third of `max_tool_calls: 2` is refused
/// with a sentence the client reads, and the session's record ends as `limit`.
#[test]
fn max_tool_calls_holds_across_the_whole_session() {
    let fake = FakeModel::start();
    let v = vault(&fake, "max_tool_calls: 2\n");
    let mut c = Client::start(&v, "desk");
    let read = json!({"path": "project/brief.md"});
    for id in 1..=2 {
        let (text, error) = Client::text(&c.call(id, "read_file", read.clone()));
        assert!(!error && text.contains("Ship on Friday."), "{text}");
    }
    let (text, error) = Client::text(&c.call(3, "read_file", read));
    assert!(error, "the third call ran: {text}");
    assert!(text.contains("reached its limit of 2 tool calls"), "{text}");
    c.stop();
    let records = desk_records(&v);
    assert_eq!(records.len(), 1, "one run: {records:?}");
    assert_eq!(records[0]["outcome"], "limit", "{}", records[0]);
    assert_eq!(records[0]["error"], "limit reached: max_tool_calls (2)");
    assert_eq!(records[0]["tool_calls"].as_array().unwrap().len(), 2);
}

/// A session is one run of the role: a client that only looks is not one; one that calls is,
/// and the next `tabd fire`, the next session and `tabd status` see it; it has a record and a
/// daily section like a run's, with its undo.
#[test]
fn a_session_counts_as_a_run_of_the_role() {
    let fake = FakeModel::start();
    let v = vault(&fake, "max_runs_per_day: 1\n");
    let out = serve_refused(&v);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(desk_status(&v)["runs_today"], 0, "a client that only looked");

    let mut c = Client::start(&v, "desk");
    let (text, error) = Client::text(&c.call(
        1,
        "write_file",
        json!({"path": "project/plan.md", "content": "Plan."}),
    ));
    assert!(!error, "{text}");
    c.stop();
    let records = desk_records(&v);
    assert_eq!(records.len(), 1, "{records:?}");
    let id = records[0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(records[0]["tool_calls"][0]["name"], "write_file");

    let desk = desk_status(&v);
    assert_eq!(desk["runs_today"], 1, "{desk}");
    assert_eq!(desk["last_run"]["outcome"], "ok", "{desk}");
    let daily = v.daily();
    assert!(daily.contains("· Desk · manual\n"), "{daily}");
    assert!(
        daily.contains("**Session:** an MCP client's, through `tabd mcp serve`"),
        "{daily}"
    );
    assert!(daily.contains(&format!("Undo: `tabd undo {id}`")), "{daily}");

    let out = v.tabd(&["fire", "desk"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_runs_per_day reached"),
        "{}",
        describe(&out)
    );
    assert_eq!(serve_refused(&v).status.code(), Some(1), "the next session");
}

/// What a session spends (its delegated runs) counts in the role's day as it goes: once the day's
/// budget is spent, the next call is refused with a sentence the client reads, not a crash.
#[test]
fn a_session_that_spends_its_daily_budget_refuses_further_calls() {
    let fake = FakeModel::start();
    let v = vault(&fake, "daily_token_budget: 1000\n");
    let mut c = Client::start(&v, "desk");
    let answer = c.call(
        1,
        "delegate",
        json!({"role": "worker", "task": "Read the brief."}),
    );
    assert_eq!(Client::result(&json!({"result": answer}))["outcome"], "ok");
    let (text, error) = Client::text(&c.call(2, "read_file", json!({"path": "project/brief.md"})));
    assert!(error, "a call after the day's budget was spent ran: {text}");
    assert!(
        text.contains("refused: role `desk`: daily token budget spent"),
        "{text}"
    );
    c.stop();
    let desk = desk_status(&v);
    assert_eq!(
        desk["tokens_today"], 2598,
        "the worker's tokens, in desk's day: {desk}"
    );
    let records = desk_records(&v);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "limit", "{}", records[0]);
    assert!(v
        .daily()
        .contains("· Desk · via MCP: calls refused from now on — role `desk`: daily token budget spent"));
}

/// The relay a CLI run serves its tools on reads at most 4 KiB of a connection's first line (the
/// key line): a peer that sends 128 MiB with no line end is refused and cut off after that, never
/// read whole, and the run goes on. Before, the relay read it all into memory and waited 10 s for
/// a line end.
#[test]
fn a_huge_key_line_to_a_runs_relay_is_cut_off_and_the_run_goes_on() {
    use std::io::{BufRead, Write};
    let v = TestVault::new();
    let home = v.dir.path().canonicalize().unwrap();
    let log = home.join("cli.jsonl");
    let release = home.join("release");
    let calls = json!([["read_file", {"path": "project/brief.md"}]]);
    v.set_config(&format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"command\"\nprofile = \"claude\"\n\n[profiles.claude]\ncommand = \"{}\"\nenv = {{ FAKE_CLI_LOG = \"{}\", FAKE_CLI_CALLS = '{calls}', FAKE_CLI_WAIT = \"{}\" }}\n",
        crate::support::mcp_server::example_bin("fake_agent_cli").display(),
        log.display(),
        release.display(),
    ));
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "---\n---\n# Ops\n## Mission\nRead the brief.\n## Tools\n- read_file\n",
    );
    v.write("project/brief.md", "Ship on Friday.\n");
    let run = v
        .command(&["fire", "ops"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = wait_for(|| {
        std::fs::read_dir(home.join(".local/state/tabd/runs"))
            .ok()?
            .flatten()
            .map(|e| e.path().join("mcp.sock"))
            .find(|p| p.exists())
    });
    // The socket's file appears at bind(), a moment before listen(): wait for the listener.
    let stream = wait_for(|| match std::os::unix::net::UnixStream::connect(&socket) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => None,
        other => Some(other.unwrap()),
    });
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut w = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        (0..128).try_for_each(|_| w.write_all(&chunk))
    });
    let mut answer = String::new();
    let _ = std::io::BufReader::new(&stream).read_line(&mut answer);
    let sent = sender.join().unwrap();
    let peak = peak_kib(run.id() as i32);
    std::fs::write(&release, "").unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(answer.contains("refused"), "{answer}\n{}", describe(&out));
    assert!(
        sent.is_err(),
        "the relay read all 128 MiB of a line with no end\n{}",
        describe(&out)
    );
    // `tabd fire` itself peaks near 40 MiB here; holding the line took it past 170 MiB.
    assert!(
        peak < 96 * 1024,
        "the run held {} MiB while a peer sent 128 MiB: {}",
        peak / 1024,
        describe(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("its first line runs past 4096 bytes"),
        "{}",
        describe(&out)
    );
    assert_eq!(out.status.code(), Some(0), "the run went on: {}", describe(&out));
    let seen: Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().next().unwrap()).unwrap();
    assert!(
        seen["results"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ship on Friday.")),
        "the CLI's own call: {seen}"
    );
}

fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..2000 {
        if let Some(t) = f() {
            return t;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("never happened");
}

/// The most memory process `pid` has held since it started (its peak resident set, KiB).
fn peak_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
