//! Input that cannot be read is refused with its reason, never a process abort (DESIGN §24,
//! issue 36): deeply nested notes, role files and config, a child's endless output, run through
//! the real binary.

use std::time::Duration;

use crate::support::daemon::{setup, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
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
    v.write("agent/inbox/delivery/good.md", "an ordinary note");
    v.write("agent/inbox/risk/fine.md", "for risk");
    v.write("roles/deep.md", &deep_role());
    let mut d = Daemon::start(&v);
    wait_until(T, "the unreadable notes refused and the others run", || {
        v.files_in("agent/inbox/delivery/failed") == ["broken.md", "deep.md"]
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
    assert_eq!(refused.len(), 2, "one record per refused note: {refused:?}");
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
    assert_eq!(v.files_in("agent/inbox/delivery/failed").len(), 2);
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
