//! Undo (docs/spec.md §19, issue 23): the change journal, `tabd runs` and `tabd undo`, through the real
//! binary: what a run wrote, appended, created and moved goes back — but never over an edit made
//! since.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{wait_idle, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(20);

/// The stock vault (no schedules), delivery allowed to write and move anywhere in project/, the
/// person's notes there too (`person_notes: auto`: these tests are about undo, not consent).
fn vault(fake: &FakeModel) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.grant_person_notes("delivery");
    let d = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &d.replacen("## Tools\n", "## Tools\n- move_file\n", 1),
    );
    // The daemon tests' settle times: a note written in place runs in 0.3 s, not 5 s.
    v.use_model(fake, "anthropic", &crate::support::daemon::daemon_config(""));
    v
}

/// The id `tabd undo` says undoes what it just did: "… undo this undo with `tabd undo ID`".
fn undo_id(out: &str) -> String {
    let after = out.split("tabd undo ").nth(1).expect("an undo id in the output");
    after.split('`').next().unwrap().to_string()
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
            return wire::tools("anthropic", None, &refs);
        }
        wire::text("anthropic", "done")
    });
}

/// The model writes `content` to `path`, then ends.
fn writes(fake: &FakeModel, path: &str, content: &str) {
    script(
        fake,
        vec![("write_file", json!({"path": path, "content": content}))],
    );
}

fn fire(v: &TestVault) -> String {
    let before: Vec<String> = v
        .records()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    v.records()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .find(|id| !before.contains(id))
        .expect("a new run")
}

fn undo(v: &TestVault, args: &[&str]) -> (i32, String) {
    let mut all = vec!["undo"];
    all.extend_from_slice(args);
    let out = v.tabd(&all);
    (out.status.code().unwrap_or(-1), describe(&out))
}

/// Write, append, create and move (a file moved away is "deleted" from where it was) all go
/// back; `tabd runs` lists what the run changed; the daily log says what undo did.
#[test]
fn undo_puts_back_writes_appends_creations_and_moves() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "the person's plan\n");
    v.write("project/log.md", "line 1\n");
    v.write("project/old.md", "an old note\n");
    script(
        &fake,
        vec![
            (
                "write_file",
                json!({"path": "project/plan.md", "content": "the model's plan"}),
            ),
            (
                "append_file",
                json!({"path": "project/log.md", "content": "line 2"}),
            ),
            (
                "write_file",
                json!({"path": "project/new.md", "content": "created"}),
            ),
            (
                "move_file",
                json!({"from": "project/old.md", "to": "project/attic/old.md"}),
            ),
        ],
    );
    let run = fire(&v);
    assert_eq!(v.read("project/plan.md"), "the model's plan");
    assert!(v.daily().contains(&format!("Undo: `tabd undo {run}`")));

    let listed: Value = serde_json::from_str(&stdout(&v.tabd(&["runs", "--json"]))).unwrap();
    let entry = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run.as_str())
        .unwrap();
    let mut changed: Vec<&str> = entry["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "project/attic/old.md",
            "project/log.md",
            "project/new.md",
            "project/old.md",
            "project/plan.md"
        ]
    );
    assert!(
        !changed
            .iter()
            .any(|c| c.starts_with("memory") || c.starts_with("roles")),
        "files only read are not journaled"
    );

    let (code, out) = undo(&v, &["--dry-run", &run[..20]]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would restore  project/plan.md"), "{out}");
    assert_eq!(
        v.read("project/plan.md"),
        "the model's plan",
        "a dry run changes nothing"
    );

    let (code, out) = undo(&v, &[&run[..20]]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "the person's plan\n");
    assert_eq!(v.read("project/log.md"), "line 1\n");
    assert!(
        !v.path("project/new.md").exists(),
        "a file the run created is removed"
    );
    assert_eq!(v.read("project/old.md"), "an old note\n");
    assert!(!v.path("project/attic/old.md").exists());
    assert!(
        v.daily()
            .contains(&format!("undid run `{run}`: 5 restored, 0 skipped")),
        "{}",
        v.daily()
    );

    // The undo is journaled too: undoing it brings the run's changes back.
    let undo_id: String = out
        .split("tabd undo ")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '-')
        .collect();
    let (code, out) = undo(&v, &[&undo_id]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "the model's plan");
}

/// Two runs changed the same note: undoing the first (out of order) skips it and names the
/// second; undoing the second, then the first, goes all the way back.
#[test]
fn a_chain_undone_in_the_wrong_order_names_the_later_run() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "v0\n");
    writes(&fake, "project/plan.md", "v1");
    let first = fire(&v);
    writes(&fake, "project/plan.md", "v2");
    let second = fire(&v);

    let (code, out) = undo(&v, &[&first]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("changed since by run {second}")), "{out}");
    assert_eq!(v.read("project/plan.md"), "v2");

    assert_eq!(undo(&v, &[&second]).0, 0);
    assert_eq!(v.read("project/plan.md"), "v1");
    assert_eq!(undo(&v, &[&first]).0, 0);
    assert_eq!(v.read("project/plan.md"), "v0\n");
}

/// Run B undone, then the person edits the note: undoing run A names the person's edit, with
/// when it was made, and never B, whose change is gone (issue 39, item 5).
#[test]
fn after_an_undone_run_and_an_edit_undo_names_the_edit_not_the_run() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "v0\n");
    writes(&fake, "project/plan.md", "v1");
    let first = fire(&v);
    writes(&fake, "project/plan.md", "v2");
    let second = fire(&v);
    let (code, out) = undo(&v, &[&second]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "v1");
    v.write("project/plan.md", "v1, then the person's edit\n");

    let (code, out) = undo(&v, &[&first]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("skip     project/plan.md: changed since by you (or another program) at 20"),
        "{out}"
    );
    assert!(!out.contains(&second), "names the undone run: {out}");
    assert_eq!(v.read("project/plan.md"), "v1, then the person's edit\n");
}

/// An undo that put nothing back has no journal: it offers no undo of itself, in its output or
/// in the daily note (issue 39, item 5).
#[test]
fn an_undo_that_restored_nothing_offers_no_undo_of_it() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "original\n");
    writes(&fake, "project/plan.md", "by the model");
    let run = fire(&v);
    v.write("project/plan.md", "edited by the person\n");

    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("undid nothing of {run}: 0 files restored, 1 skipped")),
        "{out}"
    );
    assert!(!out.contains("undo this undo"), "{out}");
    let daily = v.daily();
    let line = daily
        .lines()
        .find(|l| l.contains(&format!("undid run `{run}`")))
        .expect("the undo's daily line");
    assert!(!line.contains("undo it"), "{line}");
}

/// Issue 37, item 3: what `tabd undo` cannot write of its own record is not dropped: its line in
/// the daily note (the daily folder is a file here) and its journal's closing line are each named
/// on stderr, and the exit is 1, though the files are back.
#[test]
fn an_undo_whose_own_record_cannot_be_written_says_so_and_exits_1() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "original\n");
    writes(&fake, "project/plan.md", "by the model");
    let run = fire(&v);

    let out = v
        .command(&["undo", &run])
        .env("TABD_FAULTS", "undo-unsealed")
        .output()
        .unwrap();
    let said = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("undid {run}: 1 file restored")), "{said}");
    assert!(
        said.contains("warning: the journal of this undo could not be closed"),
        "{said}"
    );
    assert!(!said.contains("the daily note has no line"), "{said}");
    assert_eq!(v.read("project/plan.md"), "original\n");

    writes(&fake, "project/plan.md", "by the model again");
    let run = fire(&v);
    std::fs::remove_dir_all(v.path("daily")).unwrap();
    std::fs::write(v.path("daily"), "not a folder").unwrap();
    let (code, said) = undo(&v, &[&run]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains(&format!("undid {run}: 1 file restored")), "{said}");
    assert!(
        said.contains("warning: the daily note has no line of this undo"),
        "{said}"
    );
    assert!(!said.contains("could not be closed"), "{said}");
    assert_eq!(v.read("project/plan.md"), "original\n");
}

/// A note the person edited after the run is never overwritten — unless they say --force.
#[test]
fn the_persons_edit_is_kept_unless_forced() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("project/plan.md", "original\n");
    writes(&fake, "project/plan.md", "by the model");
    let run = fire(&v);
    v.write("project/plan.md", "by the model, then edited by the person\n");

    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("changed since by you (or another program) at 20"),
        "{out}"
    );
    assert_eq!(
        v.read("project/plan.md"),
        "by the model, then edited by the person\n"
    );

    // The dry run of --force says whose edit would be lost, before it is.
    let (_, out) = undo(&v, &["--force", "--dry-run", &run]);
    assert!(
        out.contains("would restore  project/plan.md — would overwrite the change made to it at 20")
            && out.contains("(by you or another program)"),
        "{out}"
    );
    assert_eq!(
        v.read("project/plan.md"),
        "by the model, then edited by the person\n"
    );
    let (code, out) = undo(&v, &["--force", &run]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "original\n");
    // Undo the undo, and undo that: each id has the one shape, however deep it goes.
    let mut id = undo_id(&out);
    let shape = id.len();
    for _ in 0..3 {
        let (code, out) = undo(&v, &[&id]);
        assert_eq!(code, 0, "{out}");
        id = undo_id(&out);
        assert_eq!(id.len(), shape, "{id}");
        assert!(id.contains("-delivery-"), "{id}");
    }
}

/// --requeue puts the notes the run handled back into the inbox.
#[test]
fn requeue_moves_the_handled_notes_back() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("agent/inbox/delivery/ask.md", "please plan");
    writes(&fake, "project/plan.md", "planned");
    let run = fire(&v);
    assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["ask.md"]);

    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        v.files_in("agent/inbox/delivery/processed"),
        ["ask.md"],
        "not without --requeue"
    );

    let v2 = vault(&fake);
    v2.write("agent/inbox/delivery/ask.md", "please plan");
    let run = fire(&v2);
    let (code, out) = undo(&v2, &["--requeue", &run]);
    assert_eq!(code, 0, "{out}");
    assert!(v2.files_in("agent/inbox/delivery/processed").is_empty());
    assert_eq!(v2.read("agent/inbox/delivery/ask.md"), "please plan");
    assert!(!v2.path("project/plan.md").exists());
}

/// A delivery run that wrote `project/plan.md` ("before the crash" → "mid-crash") and was killed
/// after its changes and record, before its journal was closed. Returns its id.
fn crashed_run(v: &TestVault, fake: &FakeModel) -> String {
    v.write("project/plan.md", "before the crash\n");
    v.write("agent/inbox/delivery/ask.md", "please plan");
    writes(fake, "project/plan.md", "mid-crash");
    let out = v
        .command(&["fire", "delivery"])
        .env("TABD_FAULTS", "abort-after-commit")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the fault aborted it: {}", describe(&out));
    assert_eq!(v.read("project/plan.md"), "mid-crash");
    let listed = stdout(&v.tabd(&["runs"]));
    listed
        .split_whitespace()
        .find(|w| w.contains("-delivery-"))
        .unwrap_or_else(|| panic!("{listed}"))
        .to_string()
}

/// tabd killed after the run's changes and record but before the journal was closed: undo
/// knows what the run left from its record after the call, and puts it back.
#[test]
fn a_run_that_crashed_can_still_be_undone() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    let run = crashed_run(&v, &fake);
    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "before the crash\n");
}

/// Issue 29, item 4: after a crashed run, the person edits the file; the real undo does what
/// its dry run said — it skips the edit — and a forged journal is refused whole.
#[test]
fn after_a_crash_the_real_undo_does_what_the_dry_run_said() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    let run = crashed_run(&v, &fake);
    v.write("project/plan.md", "the person's edit\n");
    let (dry, said) = undo(&v, &[&run, "--dry-run"]);
    let (real, did) = undo(&v, &[&run]);
    assert_eq!((dry, real), (1, 1), "both skip:\n{said}\n{did}");
    assert!(said.contains("skip") && did.contains("skip"), "{said}\n{did}");
    assert_eq!(v.read("project/plan.md"), "the person's edit\n");
    // A journal written into the vault by someone else: refused, nothing restored.
    let forged = v.path(".tabd/journal/runs/20261101T000000Z-delivery-00000000.jsonl");
    std::fs::write(&forged, "{\"kind\":\"header\",\"run_id\":\"20261101T000000Z-delivery-00000000\",\"role\":\"delivery\",\"started_at\":\"2026-11-01T00:00:00Z\",\"trigger\":\"manual\"}\n{\"kind\":\"before\",\"path\":\"project/plan.md\",\"before\":null}\n").unwrap();
    let (code, out) = undo(&v, &["20261101T000000Z-delivery-00000000"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not signed by this machine's key"), "{out}");
    assert_eq!(v.read("project/plan.md"), "the person's edit\n");
}

/// With the daemon running: undo waits for no one (the role is idle), and the restored note is
/// a change the daemon sees like any other — a role watching it fires.
#[test]
fn undo_while_the_daemon_runs_is_seen_as_a_change() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    let d = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &d.replacen(
            "extends: _base\n",
            "extends: _base\nwatch: [project/plan.md]\nmin_interval: 0s\n",
            1,
        ),
    );
    v.write("project/plan.md", "original\n");
    writes(&fake, "project/plan.md", "by the model");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/ask.md", "please plan");
    wait_until(T, "the run that writes", || v.records().len() == 1);
    // Its record is written before the run lets go of its lock: wait until it has ended.
    wait_idle(&v);
    let run = v.records()[0]["run_id"].as_str().unwrap().to_string();
    fake.respond_with(|_, _| wire::text("anthropic", "saw the plan change back"));

    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(v.read("project/plan.md"), "original\n");
    wait_until(T, "a watch run after the undo", || {
        v.records().iter().any(|r| r["trigger"]["kind"] == "watch")
    });
}

/// An id is checked before it names a file: one that would climb out of the journal's folder,
/// name a subfolder or a path, or run on past any id tabd makes is refused with the rule, even
/// where a journal of that name exists.
#[test]
fn a_hostile_run_id_is_refused_before_it_names_a_path() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    writes(&fake, "project/a.md", "a");
    fire(&v);
    let run = v.records()[0]["run_id"].as_str().unwrap().to_string();
    // The run's journal, copied where each hostile id would find it if it were used as a path.
    let journal = v.read(&format!(".tabd/journal/runs/{run}.jsonl"));
    v.write(".tabd/journal/x.jsonl", &journal);
    v.write(&format!(".tabd/journal/runs/sub/{run}.jsonl"), &journal);
    let (just_over, long) = ("a".repeat(129), "a".repeat(200));
    for (id, rule) in [
        ("../x", "only letters, digits"),
        (&format!("sub/{run}") as &str, "only letters, digits"),
        ("a/b", "only letters, digits"),
        ("/etc/passwd", "only letters, digits"),
        (&just_over, "at most 128 characters"),
        (&long, "at most 128 characters"),
        ("", "cannot be empty"),
    ] {
        let (code, out) = undo(&v, &[id]);
        assert_eq!(code, 2, "{id}: {out}");
        assert!(out.contains(rule), "{id}: {out}");
    }
    assert_eq!(v.read("project/a.md"), "a", "nothing was undone");
}

#[test]
fn unknown_and_ambiguous_ids_are_usage_errors() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    let (code, out) = undo(&v, &["20991231"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no journaled run `20991231`"), "{out}");
    writes(&fake, "project/a.md", "a");
    fire(&v);
    writes(&fake, "project/b.md", "b");
    fire(&v);
    let (code, out) = undo(&v, &["20"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("could be any of 2 runs"), "{out}");
}

/// `tabd runs` reads a day's records line by line (issue 36), each at most 64 MiB: a longer line
/// in `.tabd/runs/` — garbage a sync tool or another program put there, no line end for 64 MiB —
/// is passed over with one warning that names its file and line, as is a line that is not UTF-8,
/// and the records before and after them are listed as they were (it read the whole file into
/// memory, up to 512 MiB, and one byte that was not UTF-8 anywhere in it listed nothing of that
/// day).
#[test]
fn tabd_runs_passes_over_a_line_over_the_cap_and_names_it() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    writes(&fake, "project/plan.md", "a plan");
    let first = fire(&v);
    let before = v.tabd(&["runs"]);
    assert!(before.status.success(), "{}", describe(&before));
    let before = stdout(&before);
    assert!(before.contains(&first), "{before}");
    let days = v.files_in(".tabd/runs");
    assert_eq!(days.len(), 1, "{days:?}");
    let day = format!(".tabd/runs/{}", days[0]);
    let lines = v.read(&day).lines().count();
    let cap = 64 * 1024 * 1024;
    let mut garbage = "{\"run_id\": \"".to_string();
    garbage.push_str(&"x".repeat(cap + 1 - garbage.len()));
    garbage.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(v.path(&day))
        .unwrap();
    std::io::Write::write_all(&mut file, garbage.as_bytes()).unwrap();
    std::io::Write::write_all(&mut file, b"\xff\xfe\n").unwrap();
    drop(file);
    writes(&fake, "project/plan.md", "a second plan");
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));

    let after = v.tabd(&["runs"]);
    assert!(after.status.success(), "{}", describe(&after));
    let shown = stdout(&after);
    let (header, listed) = shown.split_once('\n').unwrap();
    let (newest, rest) = listed.split_once('\n').unwrap();
    assert!(before.starts_with(&format!("{header}\n")), "{before}");
    assert_eq!(
        rest,
        before
            .lines()
            .nth(1)
            .map(|l| format!("{l}\n"))
            .unwrap_or_default(),
        "the first run is listed as it was"
    );
    assert!(!newest.contains(&first) && newest.contains("delivery"), "{shown}");
    let warned = String::from_utf8_lossy(&after.stderr).to_string();
    let said = format!(
        "warning: {day}:{}: a line of 67,108,865 bytes, over the 67,108,864 bytes a run record may take; skipped\n\
         warning: {day}:{}: not a run record: not JSON (expected value at column 1); skipped",
        lines + 1,
        lines + 2
    );
    assert_eq!(warned.trim_end(), said, "{}", describe(&after));
    let listed: Value = serde_json::from_str(&stdout(&v.tabd(&["runs", "--json"]))).unwrap();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 2, "{listed}");
}

/// A vault whose journal keeps at most 1 MiB of one file (`[journal] max_mib = 1`).
fn vault_keeping_one_mib(fake: &FakeModel) -> TestVault {
    let v = vault(fake);
    let config = format!(
        "{}[journal]\nmax_mib = 1\n",
        crate::support::daemon::daemon_config("")
    );
    v.use_model(fake, "anthropic", &config);
    v
}

/// Issue 36: a prior copy in `.tabd/journal/blobs/` is read for undo only up to what tabd keeps
/// of one file (`[journal] max_mib`): one larger — tabd never writes such a copy, so someone else
/// put it there — is not read; undo says it cannot restore that file and why, restores the rest
/// and exits 1 (it read any copy whole, whatever its size).
#[test]
fn undo_reads_no_copy_larger_than_the_journal_keeps() {
    let fake = FakeModel::start();
    let v = vault_keeping_one_mib(&fake);
    v.write("project/a.md", "a as it was\n");
    v.write("project/b.md", "b as it was\n");
    script(
        &fake,
        vec![
            (
                "write_file",
                json!({"path": "project/a.md", "content": "a by the model"}),
            ),
            (
                "write_file",
                json!({"path": "project/b.md", "content": "b by the model"}),
            ),
        ],
    );
    let run = fire(&v);
    let blobs = ".tabd/journal/blobs";
    let copy = v
        .files_in(blobs)
        .into_iter()
        .find(|b| v.read(&format!("{blobs}/{b}")) == "a as it was\n")
        .unwrap_or_else(|| panic!("a's copy\n{}", v.listing()));
    let mib = 1024 * 1024;
    v.write(&format!("{blobs}/{copy}"), &"x".repeat(mib + 1));
    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "refuse   project/a.md: project/a.md cannot be restored: the journal's copy of it is 1,048,577 bytes, \
             more than the 1,048,576 bytes ([journal] max_mib = 1) tabd keeps of one file, so tabd did not write it"
        ),
        "{out}"
    );
    assert_eq!(v.read("project/a.md"), "a by the model");
    assert_eq!(v.read("project/b.md"), "b as it was\n", "{out}");
    assert!(out.contains("1 file restored, 1 skipped"), "{out}");
}

/// Issue 36: what a run changes is kept for undo only up to what the journal keeps of one file;
/// a larger file is not changed (it was read whole into memory to be kept, a move of a file of
/// any size): the call is refused with why, and the run goes on.
#[test]
fn a_file_larger_than_the_journal_keeps_is_not_changed() {
    let fake = FakeModel::start();
    let v = vault_keeping_one_mib(&fake);
    let big = "y".repeat(1024 * 1024 + 1);
    v.write("project/recording.txt", &big);
    script(
        &fake,
        vec![
            (
                "move_file",
                json!({"from": "project/recording.txt", "to": "project/attic/recording.txt"}),
            ),
            (
                "write_file",
                json!({"path": "project/recording.txt", "content": "gone"}),
            ),
            (
                "write_file",
                json!({"path": "project/small.md", "content": "kept"}),
            ),
        ],
    );
    let run = fire(&v);
    let results = wire::tool_results(&fake.requests()[1].body);
    assert_eq!(results.len(), 3, "{results:?}");
    for (id, text, is_error) in &results[..2] {
        assert!(
            *is_error
                && text.contains(
                    "project/recording.txt is 1,048,577 bytes, more than the 1,048,576 bytes ([journal] max_mib = 1) \
                     the undo journal keeps of one file: it is not changed, since the change could not be undone"
                ),
            "{id}: {text}"
        );
    }
    assert!(!results[2].2, "{results:?}");
    assert_eq!(v.read("project/recording.txt"), big);
    assert!(!v.path("project/attic").exists());
    assert_eq!(v.read("project/small.md"), "kept");
    let records = v.records();
    let record = records.iter().find(|r| r["run_id"] == run.as_str()).unwrap();
    assert_eq!(record["outcome"], "ok", "{record}");
}

/// `tabd runs` lines its columns up whatever the role names' lengths (issue 39, item 8): the
/// role, trigger, outcome and cost of a long-named role's run start where a short one's do.
#[test]
fn tabd_runs_columns_line_up_for_long_role_names() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    writes(&fake, "project/plan.md", "a plan");
    let run = fire(&v);
    let days = v.files_in(".tabd/runs");
    let day = format!(".tabd/runs/{}", days[0]);
    let record = v.read(&day);
    let line = record
        .lines()
        .find(|l| l.contains(&run))
        .expect("the run's record");
    let long = line.replace("delivery", "weekly-review-of-everything");
    v.write(&day, &format!("{record}{long}\n"));

    let out = v.tabd(&["runs"]);
    assert!(out.status.success(), "{}", describe(&out));
    let shown = stdout(&out);
    let lines: Vec<&str> = shown.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{shown}");
    let at = |l: &str, word: &str| l.find(word).unwrap_or_else(|| panic!("{word} in {l}"));
    for word in ["manual", "$"] {
        assert_eq!(
            at(lines[0], word),
            at(lines[1], word),
            "{word} starts in one column:\n{shown}"
        );
    }
    let role = |l: &str| {
        at(
            l,
            if l.contains("weekly") {
                "weekly-review-of-everything "
            } else {
                "delivery "
            },
        )
    };
    assert_eq!(role(lines[0]), role(lines[1]), "{shown}");
}

/// Issue 48: a run whose write the person approved — the call ran later, on its own, with its
/// own undo id. `tabd undo RUN` names it and how to undo it; `--with-approved` undoes it too.
#[test]
fn undo_of_a_run_names_its_approved_calls_and_with_approved_undoes_them() {
    let (v, _fake, run) = crate::support::approvals::ops_run_approved_and_resumed();
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    let (code, out) = undo(&v, &[&run]);
    assert_eq!(code, 0, "{out}");
    let named = out
        .lines()
        .find(|l| l.contains("ran as "))
        .unwrap_or_else(|| panic!("the approved call is named: {out}"));
    let call = named.split("ran as ").nth(1).unwrap().split(':').next().unwrap();
    assert!(
        named.contains("(write_file)") && named.contains(&format!("undo it with `tabd undo {call}`")),
        "{out}"
    );
    assert!(
        out.contains(&format!("`tabd undo {run} --with-approved`")),
        "{out}"
    );
    assert_eq!(v.read("project/plan.md"), "ship on Friday", "not undone: {out}");

    let (code, out) = undo(&v, &[&run, "--with-approved", "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would remove   project/plan.md"), "{out}");
    assert!(v.path("project/plan.md").exists(), "a dry run: {out}");

    let (code, out) = undo(&v, &[&run, "--with-approved"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("approved call {call} (approval ")), "{out}");
    assert!(
        !v.path("project/plan.md").exists(),
        "the approved write is undone: {out}"
    );
}

/// Issue 48: `tabd runs` has a header, and shows a run that waited for approval as one run — its
/// second part and the call the person approved indented under it; `--json` keeps its contract
/// (each record, newest first) and names each part's run.
#[test]
fn tabd_runs_lists_a_runs_parts_under_it_with_a_header() {
    let (v, _fake, run) = crate::support::approvals::ops_run_approved_and_resumed();
    let out = v.tabd(&["runs"]);
    assert!(out.status.success(), "{}", describe(&out));
    let shown = stdout(&out);
    let lines: Vec<&str> = shown.lines().collect();
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        words,
        ["started", "run", "role", "trigger", "outcome", "cost", "changed"],
        "{shown}"
    );
    assert_eq!(lines.len(), 4, "one run, two parts under it:\n{shown}");
    assert!(
        lines[1].contains(&run) && lines[1].contains(" waiting "),
        "the run first:\n{shown}"
    );
    let column = lines[1].find(&run).unwrap();
    let mut parts: Vec<&str> = lines[2..]
        .iter()
        .map(|l| {
            assert_eq!(l.find('└'), Some(column), "indented under the run:\n{shown}");
            l.split('└').nth(1).unwrap().split_whitespace().next().unwrap()
        })
        .collect();
    parts.sort();
    assert_eq!(parts, ["approved", "resumed"], "{shown}");
    let call = lines[2..].iter().find(|l| l.contains("└ approved")).unwrap();
    assert!(call.contains("project/plan.md"), "{shown}");

    let json: Value = serde_json::from_str(&stdout(&v.tabd(&["runs", "--json"]))).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{json:#}");
    for r in runs {
        for field in [
            "run_id",
            "role",
            "started_at",
            "trigger",
            "outcome",
            "cost_usd",
            "changed",
        ] {
            assert!(r.get(field).is_some(), "{field} in {r}");
        }
    }
    let first = runs.iter().find(|r| r["ended"] == "waiting").unwrap();
    assert_eq!(
        (first["run_id"].as_str(), first.get("parent")),
        (Some(run.as_str()), None)
    );
    let part = |kind: &str| {
        runs.iter()
            .find(|r| r["part"] == kind)
            .unwrap_or_else(|| panic!("{kind}: {json:#}"))
    };
    assert_eq!(part("resumed")["parent"], run.as_str());
    assert_eq!(part("resumed")["run_id"], run.as_str());
    assert_eq!(part("approved")["parent"], run.as_str());
    assert_eq!(part("approved")["changed"], json!(["project/plan.md"]));
}

/// Issue 48: an odd record — a role of 70,000 characters with terminal escapes, a run id that
/// writes the clipboard, a non-string trigger — made `tabd runs` panic (`Formatting argument out
/// of range`: a column width past 65,535). It is listed: no escape reaches the terminal, every
/// line bounded; the JSON keeps the record's text.
#[test]
fn tabd_runs_lists_an_odd_record_without_a_panic_or_an_escape() {
    let v = TestVault::new();
    let role = format!("\u{1b}[2J\u{1b}[31mrole{}", "x".repeat(70_000));
    let record = json!({"run_id": "\u{1b}]52;c;aGk=\u{7}id\nforged line", "role": role,
        "trigger": {"kind": 7, "parent_run_id": "\u{1b}[1m"}, "started_at": "\u{1b}[1Ayesterday",
        "outcome": "ok\r\u{8}failed", "usage": {"cost_usd": 1e300}, "changed": []});
    v.write(".tabd/runs/2026-11-24.jsonl", &format!("{record}\n"));
    let out = v.tabd(&["runs"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let shown = stdout(&out);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\r'),
        "{shown:?}"
    );
    assert_eq!(
        shown.lines().count(),
        2,
        "a header and the record, one line each: {shown:?}"
    );
    for line in shown.lines() {
        assert!(
            line.chars().count() < 400,
            "bounded: {} characters",
            line.chars().count()
        );
    }
    let json: Value = serde_json::from_str(&stdout(&v.tabd(&["runs", "--json"]))).unwrap();
    assert_eq!(
        json["runs"][0]["role"],
        role.as_str(),
        "the JSON keeps the record's text"
    );
}
