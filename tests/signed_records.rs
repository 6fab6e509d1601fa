//! Issue 36, findings 7–9 (docs/spec.md §24): what tabd reads back from disk that decides an action —
//! the undo journal, suspended runs, process-group files — is signed with a key outside the
//! vault and checked against the world, so a forged, edited, cut or restored copy decides
//! nothing. Through the real binary.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::approvals::{notes, ops_asks_to_write_the_plan, set_status};
use crate::support::daemon::{daemon_config, wait_idle, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, wire, TestVault};

const T: Duration = Duration::from_secs(30);
const KIND: &str = "anthropic";

/// Where the key is for a test vault (`$HOME/.local/state/tabd`, HOME being the test's folder).
fn key_file(v: &TestVault) -> PathBuf {
    v.dir.path().join(".local/state/tabd/journal.key")
}

/// The model makes `calls` in its first request, then ends.
fn script(fake: &FakeModel, calls: Vec<(&'static str, Value)>) {
    fake.respond_with(move |r, _| {
        if wire::tool_results(&r.body).is_empty() {
            let named: Vec<(String, &str, Value)> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| (format!("t{i}"), *name, input.clone()))
                .collect();
            let refs: Vec<(&str, &str, Value)> = named
                .iter()
                .map(|(id, n, i)| (id.as_str(), *n, i.clone()))
                .collect();
            return wire::tools(KIND, None, &refs);
        }
        wire::text(KIND, "done")
    });
}

/// The stock vault (no schedules), the delivery role writing in project/, the person's notes
/// there too (these tests are about the journal's signatures, not consent).
fn undo_vault(fake: &FakeModel) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.grant_person_notes("delivery");
    v.use_model(fake, KIND, &daemon_config(""));
    v
}

/// `tabd fire delivery`; the new run's id.
fn fire(v: &TestVault) -> String {
    let before: Vec<Value> = v.records();
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    v.records()
        .into_iter()
        .filter(|r| !before.contains(r))
        .find_map(|r| r["run_id"].as_str().map(String::from))
        .expect("a new run")
}

fn journal_of(v: &TestVault, run: &str) -> PathBuf {
    v.path(&format!(".tabd/journal/runs/{run}.jsonl"))
}

/// Finding 9: an empty key file (what a crash between creating and writing it used to leave) is
/// refused with what to do — never used, never silently replaced — and a journal signed with
/// the empty key is not restored from.
#[test]
fn an_empty_journal_key_is_refused_not_used() {
    let fake = FakeModel::start();
    let v = undo_vault(&fake);
    v.write("project/plan.md", "the person's plan\n");
    let key = key_file(&v);
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, b"").unwrap();
    script(
        &fake,
        vec![(
            "write_file",
            json!({"path": "project/plan.md", "content": "the model's plan"}),
        )],
    );
    let out = v.tabd(&["fire", "delivery"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&key.display().to_string()) && said.contains("at least 32"),
        "{said}"
    );
    assert_eq!(v.read("project/plan.md"), "the person's plan\n", "nothing ran");
    assert!(fake.requests().is_empty());
    assert_eq!(
        std::fs::read(&key).unwrap(),
        b"",
        "not replaced behind the person's back"
    );

    // A journal signed with the empty key (as an older tabd would have): undo refuses it.
    let id = "20261101T000000Z-delivery-0badc0de";
    // The fields in the order tabd writes them (what the MAC was over).
    let lines = [
        format!(
            r#"{{"kind":"header","run_id":"{id}","role":"delivery","started_at":"2026-11-01T00:00:00Z","trigger":"manual"}}"#
        ),
        r#"{"kind":"before","path":"project/plan.md","before":null}"#.to_string(),
    ];
    let mut text = String::new();
    for body in lines {
        let mac = hmac_hex(b"", &format!("{id}\n{body}"));
        text.push_str(&format!("{},\"mac\":\"{mac}\"}}\n", &body[..body.len() - 1]));
    }
    std::fs::create_dir_all(journal_of(&v, id).parent().unwrap()).unwrap();
    std::fs::write(journal_of(&v, id), text).unwrap();
    let out = v.tabd(&["undo", id]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(v.path("project/plan.md").exists(), "{}", describe(&out));

    // What the message says to do: move the short key away; a new one is made, private.
    std::fs::rename(&key, key.with_extension("key.short")).unwrap();
    fire(&v);
    let made = std::fs::metadata(&key).unwrap();
    assert!(made.len() >= 32, "{} bytes", made.len());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(made.permissions().mode() & 0o777, 0o600);
}

/// HMAC-SHA256 of `text` under `key`, hex (what the older journal format signed).
fn hmac_hex(key: &[u8], text: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    m.update(text.as_bytes());
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Finding 9: one signed line removed from a journal — the line of a file the run changed, or its
/// closing line — is refused with a message and a non-zero exit; nothing is restored (it used to
/// skip that file silently and exit 0).
#[test]
fn a_journal_missing_a_line_is_refused() {
    let fake = FakeModel::start();
    let v = undo_vault(&fake);
    v.write("project/a.md", "a before\n");
    v.write("project/b.md", "b before\n");
    script(
        &fake,
        vec![
            (
                "write_file",
                json!({"path": "project/a.md", "content": "a after"}),
            ),
            (
                "write_file",
                json!({"path": "project/b.md", "content": "b after"}),
            ),
        ],
    );
    let run = fire(&v);
    let path = journal_of(&v, &run);
    let whole = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    assert!(lines.len() >= 4, "{whole}");

    // The line that says what b.md held before the run: gone.
    let without_b: String = lines
        .iter()
        .filter(|l| !(l.contains("\"before\"") && l.contains("project/b.md")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without_b, whole);
    std::fs::write(&path, &without_b).unwrap();
    let out = v.tabd(&["undo", &run]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing"),
        "{}",
        describe(&out)
    );
    assert_eq!(v.read("project/a.md"), "a after", "nothing restored");
    assert_eq!(v.read("project/b.md"), "b after");

    // Its closing line cut off (the journal now ends as a crashed run's would).
    let cut: String = lines[..lines.len() - 1]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, &cut).unwrap();
    let out = v.tabd(&["undo", &run]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v.read("project/a.md"), "a after", "nothing restored");

    // Whole again: undone.
    std::fs::write(&path, &whole).unwrap();
    let out = v.tabd(&["undo", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v.read("project/a.md"), "a before\n");
    assert_eq!(v.read("project/b.md"), "b before\n");
}

/// The start time of `pid` (clock ticks since boot), from /proc, as tabd records it.
fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A pid no process has (for the dead tabd a groups file is named after).
fn dead_pid() -> u32 {
    (4_000_000..4_100_000)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
}

/// Finding 7: a process-group file written into `.tabd/groups/` naming one of the person's
/// processes, with its right start time, signals nothing: the person's `sleep` lives on.
#[test]
fn a_forged_groups_file_signals_none_of_the_persons_processes() {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let mut sleep = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    let pid = sleep.id();
    let forged = v.path(&format!(".tabd/groups/{}.json", dead_pid()));
    std::fs::create_dir_all(forged.parent().unwrap()).unwrap();
    let text = json!([{"pid": pid, "start": start_ticks(pid), "name": "mcp-server"}]).to_string();
    std::fs::write(&forged, text).unwrap();
    let mut d = Daemon::start(&v);
    wait_until(T, "the groups file read", || !forged.exists());
    d.signal(libc::SIGTERM);
    d.wait_exit(T);
    let alive = sleep.try_wait().unwrap().is_none();
    let _ = sleep.kill();
    let _ = sleep.wait();
    assert!(alive, "the person's process was signalled:\n{}", d.stderr());
    assert!(
        d.stderr().contains("a process-group file tabd did not write"),
        "{}",
        d.stderr()
    );
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0): count it as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Finding 7, the other side: a keeper a killed tabd really left behind (it missed its parent's
/// death, as one forked by a thread that had ended would) is still stopped by the next start —
/// with its server and the server's own child.
#[test]
fn a_keeper_a_killed_tabd_left_behind_is_stopped_at_the_next_start() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let pid_file = v.dir.path().join("grandchild.pid");
    // A server that never answers (and so outlives tabd's end of its pipes), with a grandchild.
    let server = format!(
        "[mcp.kept]\ncommand = \"{}\"\nkeep_alive = true\nstartup_timeout_s = 600\nenv = {{ MCP_TEST_MODE = \"silent\", MCP_TEST_GRANDCHILD = \"{}\" }}\nwritable = [\"{}\"]\n",
        crate::support::mcp_server::server_bin().display(),
        pid_file.display(),
        v.dir.path().display()
    );
    v.use_model(&fake, KIND, &format!("{}{server}", daemon_config("")));
    v.unschedule_stock_roles();
    let mut d = Daemon::start_with_env(&v, &[("TABD_FAULTS", "keeper-misses-parent-death")]);
    let read_pid = || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    wait_until(T, "the grandchild started", || read_pid().is_some());
    let grandchild = read_pid().unwrap();
    let registry = v.path(&format!(".tabd/groups/{}.json", d.pid()));
    wait_until(T, "the server written down", || registry.exists());
    let written = std::fs::read_to_string(&registry).unwrap();
    let list = written.lines().last().unwrap();
    let keeper = serde_json::from_str::<Value>(list).unwrap()[0]["pid"]
        .as_i64()
        .unwrap() as i32;
    d.signal(libc::SIGKILL);
    d.wait_exit(T);
    assert!(
        alive(keeper) && alive(grandchild),
        "the keeper missed tabd's death"
    );

    let mut d2 = Daemon::start(&v);
    wait_until(T, "the orphans stopped", || !alive(keeper) && !alive(grandchild));
    d2.signal(libc::SIGTERM);
    d2.wait_exit(T);
    assert!(
        d2.stderr().contains("left running: kept (process"),
        "{}",
        d2.stderr()
    );
}

/// The suspended records (not a temp file a write in progress has made).
fn suspended(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd/suspended")
        .into_iter()
        .filter(|f| f.ends_with(".json") && !f.starts_with('.'))
        .collect()
}

/// Finding 8: a copy of the suspended record saved before the run went on, put back after it
/// finished (a backup restore, a sync tool): the next start does not run the second part again.
#[test]
fn a_restored_suspended_record_does_not_run_the_second_part_again() {
    let (v, fake) = ops_asks_to_write_the_plan();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    let name = suspended(&v).pop().unwrap();
    let record = v.path(&format!(".tabd/suspended/{name}"));
    let backup = std::fs::read(&record).unwrap();
    set_status(&v, &notes(&v)[0], "approved");
    fake.wait_for_requests(2, T);
    wait_until(T, "the run done", || {
        suspended(&v).is_empty() && v.daily().contains("Recorded the plan.")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));

    std::fs::write(&record, &backup).unwrap();
    let mut d = Daemon::start(&v);
    wait_until(T, "the old copy set aside", || suspended(&v).is_empty());
    wait_idle(&v);
    d.signal(libc::SIGTERM);
    d.wait_exit(T);
    assert_eq!(fake.requests().len(), 2, "no third request:\n{}", d.stderr());
    assert_eq!(
        v.daily().matches("**Resumed:**").count(),
        1,
        "one second part:\n{}",
        v.daily()
    );
    assert!(
        v.daily().contains("its second part started already"),
        "the daily note says why:\n{}",
        v.daily()
    );
    assert!(
        v.path(&format!(".tabd/suspended/refused/{name}")).exists(),
        "kept aside"
    );
}

/// Finding 8: a suspended record written by someone else — a copy of the real one with its
/// counters zeroed, or one pointing at another run's approval — is not resumed: kept aside and
/// said, never sent to the model.
#[test]
fn a_forged_suspended_record_is_not_resumed() {
    let (v, fake) = ops_asks_to_write_the_plan();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    let name = suspended(&v).pop().unwrap();
    let record = v.path(&format!(".tabd/suspended/{name}"));
    let text = std::fs::read_to_string(&record).unwrap();
    // The record's JSON (an older tabd wrote it bare; a signed one carries it after its seal).
    let at = text.find("{\"run_id\"").expect("the record");
    let mut rec: Value = serde_json::from_str(&text[at..]).unwrap();
    rec["tool_calls"] = json!(0);
    rec["spent_tokens"] = json!(0);
    std::fs::write(&record, format!("{}{rec}", &text[..at])).unwrap();
    set_status(&v, &notes(&v)[0], "approved");
    let mut d = Daemon::start(&v);
    wait_until(T, "the approved call ran", || v.path("project/plan.md").exists());
    wait_until(T, "the forged record set aside", || suspended(&v).is_empty());
    wait_idle(&v);
    d.signal(libc::SIGTERM);
    d.wait_exit(T);
    assert_eq!(fake.requests().len(), 1, "not resumed:\n{}", d.stderr());
    assert!(
        d.stderr().contains("not signed"),
        "the log says why:\n{}",
        d.stderr()
    );
    assert!(v.daily().contains("does not go on"), "{}", v.daily());
    assert!(
        v.path(&format!(".tabd/suspended/refused/{name}")).exists(),
        "kept aside"
    );
}

/// A run that waits twice (its second part asks again): each wait's second part goes on once —
/// the mark of the first does not hold back the second.
#[test]
fn a_run_that_waits_twice_goes_on_twice() {
    let (v, fake) = ops_asks_to_write_the_plan();
    fake.respond_with(|req, _| {
        let results = wire::tool_results(&req.body);
        let write = |id: &str, path: &str| {
            wire::tools(
                KIND,
                Some("Write it."),
                &[(id, "write_file", json!({"path": path, "content": id}))],
            )
        };
        match results.last().map(|r| r.0.as_str()) {
            None => write("w1", "project/one.md"),
            Some("w1") => write("w2", "project/two.md"),
            _ => wire::text(KIND, "Both written."),
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/go.md", "Write both.");
    wait_until(T, "the first wait", || notes(&v).len() == 1);
    set_status(&v, &notes(&v)[0], "approved");
    wait_until(T, "the second wait", || {
        notes(&v).len() == 2 && suspended(&v).len() == 1
    });
    let second = notes(&v)
        .into_iter()
        .find(|n| crate::support::approvals::status_of(&v, n) == "pending")
        .expect("the second note waits");
    set_status(&v, &second, "approved");
    wait_until(T, "the run done", || {
        suspended(&v).is_empty() && v.daily().contains("Both written.")
    });
    assert_eq!(v.read("project/two.md"), "w2");
    assert_eq!(fake.requests().len(), 3);
}
