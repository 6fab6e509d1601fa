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

/// Waits for `child` and returns its exit code and the most memory it held (its peak resident
/// set, KiB), from the kernel's own count (`wait4`).
fn wait_with_peak(child: std::process::Child) -> (Option<i32>, i64) {
    let mut status = 0;
    // SAFETY: `rusage` is plain data the kernel fills in; the pid is our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(
        pid,
        child.id() as i32,
        "wait4: {}",
        std::io::Error::last_os_error()
    );
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, usage.ru_maxrss)
}

/// An MCP server's stderr is kept a line's start at a time: a server that writes 256 MiB with no
/// line end (a broken or hostile child) made tabd hold all of it in one line — the daemon keeps
/// servers alive, so a long enough line is its death — before its tools were even listed.
#[test]
fn a_server_writing_stderr_without_line_ends_costs_tabd_no_memory_for_it() {
    let v = TestVault::new();
    let log = v.dir.path().join("calls.jsonl");
    v.set_config(&format!(
        "timezone = \"UTC\"\n{}",
        server_config("loud", "stderr-flood", &log, "")
    ));
    let printed = v.dir.path().join("printed.txt");
    let child = v
        .command(&["mcp", "list"])
        .stdout(std::fs::File::create(&printed).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (code, peak_kib) = wait_with_peak(child);
    let printed = std::fs::read_to_string(&printed).unwrap();
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains("loud__echo"), "its tools are listed:\n{printed}");
    assert!(
        peak_kib < 128 * 1024,
        "tabd held {} MiB while the server wrote 256 MiB of stderr",
        peak_kib / 1024
    );
}
