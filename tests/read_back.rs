//! What tabd reads back of its own logs and of a child's files is bounded (issue 36): a byte that
//! is not UTF-8 in a run log, or a named pipe a CLI leaves where its login copy was, neither
//! blinds tabd nor stops it.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{setup, wait_idle, wait_until, Daemon};
use crate::support::describe;

const T: Duration = Duration::from_secs(20);

/// Every file in `dir` (vault-relative), read as bytes: the one there is.
fn only_file(v: &crate::support::TestVault, dir: &str) -> std::path::PathBuf {
    let files = v.files_in(dir);
    assert_eq!(files.len(), 1, "{dir}: {files:?}\n{}", v.listing());
    v.path(&format!("{dir}/{}", files[0]))
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// A crash after the run's logs were written: at the restart tabd looks for its record and its
/// daily section before writing them again. A sync tool's line that is not UTF-8 in each log
/// made both look missing (each file was read whole as text, and that failed): the record and
/// the section were written twice. Now each is found, and written once.
#[test]
fn a_crash_recovery_finds_its_logs_past_bytes_that_are_not_utf8() {
    let (v, fake) = setup("");
    let mut d = Daemon::start_with_env(&v, &[("TABD_FAULTS", "abort-after-log")]);
    v.write("agent/inbox/delivery/n.md", "exactly once");
    d.wait_exit(T);
    drop(d);
    let records = only_file(&v, ".tabd/runs");
    let daily = only_file(&v, "daily");
    for log in [&records, &daily] {
        append(log, b"\xff\xfe from another device\n");
    }
    let _d = Daemon::start(&v);
    wait_until(T, "moved at restart", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
    });
    wait_idle(&v);
    let records = String::from_utf8_lossy(&std::fs::read(&records).unwrap()).to_string();
    assert_eq!(
        records.matches("\"role\":\"delivery\"").count(),
        1,
        "one record:\n{records}"
    );
    let daily = String::from_utf8_lossy(&std::fs::read(&daily).unwrap()).to_string();
    assert_eq!(
        daily.matches("Delivery Manager · inbox").count(),
        1,
        "one section:\n{daily}"
    );
    assert_eq!(fake.requests().len(), 1, "the note ran once");
}

/// An agent CLI that leaves a named pipe where tabd copied its login: tabd looks whether the copy
/// was rewritten after the turn, and its read of the pipe waited for good — the run never ended
/// (in the daemon, the role never ran again). Now it is not waited on: the run ends, and the
/// person is told the copy was rewritten.
#[test]
fn a_named_pipe_a_cli_leaves_for_its_login_copy_does_not_stall_the_run() {
    let (v, _log) = crate::agent_cli::setup("claude", json!([]), "ok", "");
    let person = v.dir.path().join(".claude/.credentials.json");
    std::fs::create_dir_all(person.parent().unwrap()).unwrap();
    std::fs::write(&person, "{\"token\": \"one\"}").unwrap();
    let config = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&config.replace(
        "FAKE_CLI_MODE = \"ok\"",
        "FAKE_CLI_MODE = \"ok\", FAKE_CLI_FIFO = '[\".claude/.credentials.json\"]'",
    ));
    v.write("agent/inbox/ops/a.md", "Run A.\n");
    let out = v.tabd_within(&["fire", "ops"], Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("rewrote its copy of your login"), "{said}");
    assert_eq!(std::fs::read_to_string(&person).unwrap(), "{\"token\": \"one\"}");
}
