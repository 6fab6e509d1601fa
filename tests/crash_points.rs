//! Crash points never leave a lie (issue 36, finding 15): the real binary is aborted (SIGABRT, no
//! cleanup, like `kill -9`) at each durable step of an approved call and of a decision from the
//! terminal (`TABD_FAULTS`, see `src/base/faults.rs`), then started again without it. After the
//! restart the call has run at most once, and the note, `tabd approvals` (and `--json`) and the
//! daily log say what is true. And what `tabd approve`/`tabd reject` print as decided is decided.
//! The same for a run's durable steps: its first journaled change, its note moves, the record of
//! a run that waits for the person, and the mark that its second part started.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::approvals::{post, setup, tools_reply, KIND};
use crate::support::approvals::{calls_of, notes, set_status, status_of, wait_status};
use crate::support::daemon::{run_to_abort, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(30);

/// A vault with one pending approval (`ops` asks to post "Weekly update" to C1), made by a
/// `tabd fire` (no daemon runs yet).
struct Waiting {
    v: TestVault,
    _fake: FakeModel,
    /// The MCP test server's record of the calls it received.
    log: PathBuf,
    note: String,
    id: String,
}

fn waiting() -> Waiting {
    let (v, fake, log) = setup("", "");
    fake.script([
        tools_reply(&[post("t1", "C1", "Weekly update")], "The client asked for it."),
        wire::text(KIND, "Queued it."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let note = notes(&v).pop().expect("an approval note");
    let listed = approvals(&v);
    let id = listed["pending"][0]["id"]
        .as_str()
        .expect("one pending")
        .to_string();
    Waiting {
        v,
        _fake: fake,
        log,
        note,
        id,
    }
}

impl Waiting {
    fn posts(&self) -> usize {
        calls_of(&self.log, "post").len()
    }

    /// The request's phase in tabd's ledger.
    fn phase(&self) -> Value {
        self.v.state()["approvals"][&self.id]["phase"].clone()
    }

    /// `tabd run` with the fault set, until it aborts there.
    fn daemon_to_abort(&self, point: &str) {
        run_to_abort(&self.v, self.v.command(&["run"]), point);
    }

    /// Which of `tabd approvals --json`'s lists name the request.
    fn listed_in(&self) -> Vec<String> {
        let all = approvals(&self.v);
        let Some(lists) = all.as_object() else {
            panic!("{all}");
        };
        lists
            .iter()
            .filter(|(_, l)| l.as_array().is_some_and(|l| l.iter().any(|a| a["id"] == self.id)))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

fn approvals(v: &TestVault) -> Value {
    let out = v.tabd(&["approvals", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)))
}

/// After a crash before the call's outcome was recorded: the note says `unknown` with the line
/// that it may or may not have happened, `tabd approvals` lists it as unknown (not pending), the
/// daily log says so once, and nothing runs again until the person approves it again — then
/// once more.
fn assert_unknown_after_restart(w: &Waiting, posts_before: usize) {
    let mut d = Daemon::start(&w.v);
    // Finished before READY: the note never says more than tabd knows.
    assert_eq!(status_of(&w.v, &w.note), "unknown", "{}", w.v.read(&w.note));
    let text = w.v.read(&w.note);
    assert!(text.contains("may or may not have happened"), "{text}");
    assert_eq!(w.listed_in(), ["unknown"]);
    assert_eq!(w.phase(), "unknown");
    assert_eq!(
        w.v.daily().matches("outcome unknown").count(),
        1,
        "{}",
        w.v.daily()
    );
    assert_eq!(w.posts(), posts_before, "not run again by itself");
    set_status(&w.v, &w.note, "approved");
    wait_status(&w.v, &w.note, "done");
    assert_eq!(w.posts(), posts_before + 1, "approved again: run once more");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), posts_before + 1);
}

/// Aborted once the ledger says `executing`, before the note does: the call never started.
#[test]
fn crash_point_approval_claimed() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-claimed");
    assert_eq!(
        (w.phase(), status_of(&w.v, &w.note)),
        (json!("executing"), "approved".into())
    );
    assert_eq!(w.posts(), 0);
    assert_unknown_after_restart(&w, 0);
}

/// Aborted once the call's start is marked outside the vault, before the ledger says
/// `executing`: the restart finds the mark over a request its ledger says never started (as a
/// ledger restored from an older copy would), so it is not run again by itself: `unknown`, with
/// the line saying why; approved again, it runs once.
#[test]
fn crash_point_approval_marked() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-marked");
    assert_eq!(
        (w.phase(), status_of(&w.v, &w.note)),
        (json!("pending"), "approved".into())
    );
    assert_eq!(w.posts(), 0);
    let mut d = Daemon::start(&w.v);
    wait_status(&w.v, &w.note, "unknown");
    let text = w.v.read(&w.note);
    assert!(text.contains("**Not run again**"), "{text}");
    assert_eq!(w.listed_in(), ["unknown"]);
    assert_eq!(w.posts(), 0, "not run by itself");
    set_status(&w.v, &w.note, "approved");
    wait_status(&w.v, &w.note, "done");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), 1, "approved again: run once");
}

/// Aborted once the note says `executing`, before the call was sent.
#[test]
fn crash_point_approval_note_executing() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-note-executing");
    assert_eq!(status_of(&w.v, &w.note), "executing");
    assert_eq!(w.posts(), 0);
    assert_unknown_after_restart(&w, 0);
}

/// Aborted when the call came back, before its outcome was recorded: it ran, tabd cannot know.
#[test]
fn crash_point_approval_call_returned() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-call-returned");
    assert_eq!(w.phase(), "executing");
    assert_eq!(w.posts(), 1);
    assert_unknown_after_restart(&w, 1);
}

/// Aborted once the ledger holds the outcome, before the note: the note said `executing` for
/// ever (the bug). Now the restart writes the result into the note, and the daily line, once.
#[test]
fn crash_point_approval_recorded() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-recorded");
    assert_eq!(
        (w.phase(), status_of(&w.v, &w.note)),
        (json!("done"), "executing".into())
    );
    assert_eq!(w.posts(), 1);

    let mut d = Daemon::start(&w.v);
    assert_eq!(status_of(&w.v, &w.note), "done", "{}", w.v.read(&w.note));
    let text = w.v.read(&w.note);
    assert!(
        text.contains("## Result") && text.contains("posted to C1"),
        "{text}"
    );
    assert_eq!(w.listed_in(), Vec::<String>::new(), "neither pending nor unknown");
    assert_eq!(
        w.v.daily().matches("(test/post) approved → done").count(),
        1,
        "{}",
        w.v.daily()
    );
    // Approving it again runs nothing.
    set_status(&w.v, &w.note, "approved");
    wait_status(&w.v, &w.note, "done");
    assert!(w.v.read(&w.note).contains("**Not run**"), "{}", w.v.read(&w.note));
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), 1, "ran once");
}

/// Aborted after the daily line, before the note got its result (the note is written last, so
/// a note that says `done` always has its daily line): the restart writes the note, once, does
/// not write the daily line again, and the ledger no longer owes anything.
#[test]
fn crash_point_approval_daily_written() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-daily-written");
    assert_eq!(status_of(&w.v, &w.note), "executing");
    assert_eq!(
        w.v.daily().matches("(test/post) approved → done").count(),
        1,
        "{}",
        w.v.daily()
    );

    let _d = Daemon::start(&w.v);
    assert_eq!(status_of(&w.v, &w.note), "done", "{}", w.v.read(&w.note));
    assert_eq!(
        w.v.daily().matches("(test/post) approved → done").count(),
        1,
        "{}",
        w.v.daily()
    );
    assert!(
        w.v.state()["approvals"][&w.id].get("followup").is_none(),
        "{}",
        w.v.state()
    );
    assert_eq!(w.v.read(&w.note).matches("## Result").count(), 1);
    assert_eq!(w.posts(), 1);
}

/// Two crashes: mid-call, then at the restart after the ledger said `unknown` and before the
/// note did. The note still says `approved` over a request that may run again; it must not be
/// taken for a new approval (it was: the call ran a second time by itself).
#[test]
fn crash_point_approval_unknown_recorded() {
    let w = waiting();
    set_status(&w.v, &w.note, "approved");
    w.daemon_to_abort("approval-claimed");
    w.daemon_to_abort("approval-unknown-recorded");
    assert_eq!(
        (w.phase(), status_of(&w.v, &w.note)),
        (json!("unknown"), "approved".into())
    );

    let mut d = Daemon::start(&w.v);
    assert_eq!(status_of(&w.v, &w.note), "unknown", "{}", w.v.read(&w.note));
    assert_eq!(w.listed_in(), ["unknown"]);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), 0, "not run by itself");
}

/// `tabd reject` said "nothing will run", and a second later `tabd approve` was accepted and
/// ran. A rejection is recorded in the ledger before it is printed; a later approve is refused.
#[test]
fn a_rejection_printed_is_final() {
    let w = waiting();
    let mut d = Daemon::start(&w.v);
    let out = w.v.tabd(&["reject", &w.id]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(stdout(&out).contains("nothing will run"), "{}", describe(&out));
    assert_eq!(w.phase(), "rejected", "decided when printed");
    assert_eq!(status_of(&w.v, &w.note), "rejected");
    let out = w.v.tabd(&["approve", &w.id]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was rejected"),
        "{}",
        describe(&out)
    );
    // The person flips the note too: refused in the note.
    set_status(&w.v, &w.note, "approved");
    wait_status(&w.v, &w.note, "rejected");
    wait_until(T, "the rejection in the daily log", || {
        w.v.daily().contains("(test/post) rejected — nothing ran")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), 0, "nothing ran");
    assert_eq!(w.v.daily().matches("rejected — nothing ran").count(), 1);
}

/// `tabd approve` printed "runs": a `tabd reject` after it is refused, and the call runs once.
#[test]
fn an_approval_printed_is_final() {
    let w = waiting();
    let out = w.v.tabd(&["approve", &w.id]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(w.phase(), "approved", "decided when printed");
    assert_eq!(w.listed_in(), ["approved"]);
    let out = w.v.tabd(&["reject", &w.id]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("can no longer be rejected"),
        "{}",
        describe(&out)
    );
    // Approving twice is the same decision.
    let out = w.v.tabd(&["approve", &w.id]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(stdout(&out).contains("approved already"), "{}", describe(&out));
    let _d = Daemon::start(&w.v);
    wait_status(&w.v, &w.note, "done");
    assert_eq!(w.posts(), 1);
}

/// `tabd reject` aborted once the ledger holds the decision, before the note: the decision stands
/// (`tabd approvals` no longer lists it as pending, an approve is refused), and the note is
/// written by whoever comes next.
#[test]
fn crash_point_approval_decided() {
    let w = waiting();
    run_to_abort(&w.v, w.v.command(&["reject", &w.id]), "approval-decided");
    assert_eq!(
        (w.phase(), status_of(&w.v, &w.note)),
        (json!("rejected"), "pending".into())
    );
    assert_eq!(w.listed_in(), Vec::<String>::new(), "not pending any more");
    let out = w.v.tabd(&["approve", &w.id]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was rejected"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        status_of(&w.v, &w.note),
        "rejected",
        "finished by the next command"
    );
    let mut d = Daemon::start(&w.v);
    wait_until(T, "the rejection in the daily log", || {
        w.v.daily().contains("(test/post) rejected — nothing ran")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.v.read(&w.note).matches("**Rejected**").count(), 1);
    assert_eq!(w.posts(), 0);
}

/// The person approves in the note while the daemon runs and, at once, rejects from the
/// terminal: the daemon's claim and the command's decision go through the ledger's lock, so
/// whichever wins, what the command printed is what happened.
#[test]
fn the_terminal_and_the_daemon_decide_through_one_lock() {
    let w = waiting();
    let mut d = Daemon::start(&w.v);
    set_status(&w.v, &w.note, "approved");
    let out = w.v.tabd(&["reject", &w.id]);
    let rejected = out.status.code() == Some(0);
    if rejected {
        assert!(stdout(&out).contains("nothing will run"), "{}", describe(&out));
        wait_until(T, "the rejection in the daily log", || {
            w.v.daily().contains("rejected — nothing ran")
        });
    } else {
        wait_status(&w.v, &w.note, "done");
    }
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(w.posts(), usize::from(!rejected), "{}", describe(&out));
}

/// `tabd approve` finds what `tabd approvals` lists by the same lookup: the id as listed, in
/// capitals, a unique start of it, or the note's name; and a ledger that cannot be read is an
/// error, never "no approvals" (or "no approval ID").
#[test]
fn the_terminal_finds_what_it_lists_and_never_reads_an_unreadable_ledger_as_empty() {
    let w = waiting();
    let name = w.note.rsplit('/').next().unwrap().to_string();
    for given in [w.id.to_uppercase(), w.id[..4].to_string(), name.clone()] {
        let out = w.v.tabd(&["approve", &given]);
        assert_eq!(out.status.code(), Some(0), "{given}: {}", describe(&out));
    }
    let out = w.v.tabd(&["approve", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no approval nope"),
        "{}",
        describe(&out)
    );

    let state = w.v.path(".tabd/state.json");
    let kept = std::fs::read(&state).unwrap();
    std::fs::remove_file(&state).unwrap();
    std::fs::create_dir(&state).unwrap();
    for args in [&["approvals"][..], &["approvals", "--json"], &["reject", &w.id]] {
        let out = w.v.tabd(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot") && !err.contains("no approval"),
            "{args:?}: {}",
            describe(&out)
        );
    }
    std::fs::remove_dir(&state).unwrap();
    std::fs::write(&state, kept).unwrap();
    assert_eq!(w.phase(), "approved");
}

/// A vault whose `ops` role writes `project/plan.md` ("after") once per run, on the fake model.
/// The plan is the person's, and `ops` may change their notes (`person_notes: auto`): these
/// tests are about crashes, not consent.
fn writer() -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = crate::support::daemon::vault_with(&fake, &crate::support::daemon::daemon_config(""));
    v.write(
        "roles/ops.md",
        "---\napprove: {person_notes: auto}\n---\n# Ops\n## Mission\nKeep the plan.\n## Tools\n- read_file\n- write_file\n",
    );
    v.write("project/plan.md", "before\n");
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                KIND,
                Some("Writing the plan."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "project/plan.md", "content": "after\n"}),
                )],
            )
        } else {
            wire::text(KIND, "Wrote the plan.")
        }
    });
    (v, fake)
}

/// The ids of the runs that have a journal.
fn journaled(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd/journal/runs")
        .into_iter()
        .filter_map(|f| f.strip_suffix(".jsonl").map(str::to_string))
        .collect()
}

/// Aborted once the run's first change is journaled, before the file is written: nothing was
/// changed, the note was not handled, so it runs again at the next start (once) and its write
/// happens then. The cut-off run's journal never undoes what the later run did.
#[test]
fn crash_point_journal_first_change() {
    let (v, fake) = writer();
    v.write("agent/inbox/ops/plan.md", "Write the plan down.\n");
    run_to_abort(&v, v.command(&["fire", "ops"]), "journal-first-change");
    assert_eq!(v.read("project/plan.md"), "before\n", "not written yet");
    let cut = journaled(&v);
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert!(v.records().is_empty(), "no record of a run that did not finish");

    let mut d = Daemon::start(&v);
    wait_until(T, "the note handled at the restart", || {
        v.files_in("agent/inbox/ops/processed") == ["plan.md"]
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(v.read("project/plan.md"), "after\n");
    let records = v.records();
    assert_eq!(records.len(), 1, "one run finished: {records:?}");
    assert_eq!(
        fake.requests().len(),
        3,
        "the cut-off run's one request, then the rerun's two"
    );

    // Undoing the cut-off run changes nothing the later run did.
    let out = v.tabd(&["undo", &cut[0]]);
    assert_eq!(v.read("project/plan.md"), "after\n", "{}", describe(&out));
    assert!(
        stdout(&out).contains("the run ended before it recorded what it left"),
        "{}",
        describe(&out)
    );
    let rerun = records[0]["run_id"].as_str().unwrap().to_string();
    let out = v.tabd(&["undo", &rerun]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        v.read("project/plan.md"),
        "before\n",
        "the run that wrote it is undone"
    );
}

/// Aborted after a run's record and logs, with one of its two notes moved to `processed/` and
/// the other not: the restart moves the other, runs neither again and logs nothing twice.
#[test]
fn crash_point_run_note_moved() {
    let (v, fake) = writer();
    v.write("agent/inbox/ops/a.md", "First.\n");
    v.write("agent/inbox/ops/b.md", "Second.\n");
    run_to_abort(&v, v.command(&["fire", "ops"]), "run-note-moved");
    assert_eq!(v.files_in("agent/inbox/ops/processed").len(), 1, "one moved");
    assert_eq!(v.files_in("agent/inbox/ops").len(), 1, "one not");
    let _d = Daemon::start(&v);
    // Finished before READY.
    assert_eq!(v.files_in("agent/inbox/ops/processed"), ["a.md", "b.md"]);
    assert!(v.files_in("agent/inbox/ops").is_empty());
    let records = v.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        records[0]["moved"].as_array().map(Vec::len),
        Some(2),
        "{}",
        records[0]
    );
    assert_eq!(v.daily().matches("· Ops · manual").count(), 1, "{}", v.daily());
    assert_eq!(fake.requests().len(), 2, "ran once");
}

/// A vault whose `ops` role asks before `write_file` and waits for the decision (resume): the
/// model writes the plan, then (given the result) says it recorded it.
fn asker() -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = crate::support::daemon::vault_with(&fake, &crate::support::daemon::daemon_config(""));
    v.write(
        "roles/ops.md",
        "---\napprove:\n  write_file: ask\n---\n# Ops\n## Mission\nKeep the plan.\n## Tools\n- read_file\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                KIND,
                Some("Record the plan."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "project/plan.md", "content": "ship on Friday"}),
                )],
            )
        } else {
            wire::text(KIND, "Recorded the plan.")
        }
    });
    v.write("agent/inbox/ops/plan.md", "Write the plan down.\n");
    (v, fake)
}

/// The saved records of waiting runs.
fn suspended(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd/suspended")
        .into_iter()
        .filter(|f| f.ends_with(".json") && !f.starts_with('.'))
        .collect()
}

/// Aborted once a waiting run's record is saved (its first part logged, its note handled): the
/// restart carries it on when the person decides — the call once, the second part once.
#[test]
fn crash_point_suspend_written() {
    let (v, fake) = asker();
    run_to_abort(&v, v.command(&["fire", "ops"]), "suspend-written");
    assert_eq!(suspended(&v).len(), 1);
    assert_eq!(v.files_in("agent/inbox/ops/processed"), ["plan.md"]);
    let note = notes(&v).pop().expect("an approval note");

    let mut d = Daemon::start(&v);
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "done");
    wait_until(T, "the second part logged", || {
        suspended(&v).is_empty() && v.daily().contains("Recorded the plan.")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    assert_eq!(fake.requests().len(), 2, "the first part, then the second once");
    assert_eq!(
        v.daily().matches("Recorded the plan.").count(),
        1,
        "{}",
        v.daily()
    );
    assert_eq!(
        v.daily().matches("(write_file) approved → done").count(),
        1,
        "{}",
        v.daily()
    );
}

/// Aborted after the first part is logged and before the record is saved: the run cannot go on,
/// so the decision reaches the role's next run instead — never both.
#[test]
fn crash_point_suspend_unsaved() {
    let (v, fake) = asker();
    run_to_abort(&v, v.command(&["fire", "ops"]), "suspend-unsaved");
    assert!(suspended(&v).is_empty());
    assert_eq!(
        v.files_in("agent/inbox/ops/processed"),
        ["plan.md"],
        "the first part handled it"
    );
    let note = notes(&v).pop().expect("an approval note");

    let mut d = Daemon::start(&v);
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "done");
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    v.write("agent/inbox/ops/next.md", "Anything new?\n");
    let reqs = fake.wait_for_requests(2, T);
    let body = reqs[1].body.to_string();
    assert!(body.contains("Approvals decided since your last run"), "{body}");
    wait_until(T, "the next run handled", || {
        v.files_in("agent/inbox/ops/processed").len() == 2
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert!(!v.daily().contains("· resume"), "no second part:\n{}", v.daily());
    assert_eq!(fake.requests().len(), 2);
}

/// Aborted once the second part is marked as started, before anything is sent: the approved
/// call ran once, and the second part is not started again; the daily note says so.
#[test]
fn crash_point_resume_marked() {
    let (v, fake) = asker();
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let note = notes(&v).pop().expect("an approval note");
    set_status(&v, &note, "approved");
    run_to_abort(&v, v.command(&["run"]), "resume-marked");
    assert_eq!(v.read("project/plan.md"), "ship on Friday", "the call ran");
    assert_eq!(status_of(&v, &note), "done");

    let mut d = Daemon::start(&v);
    wait_until(T, "the cut-off second part in the daily log", || {
        v.daily()
            .contains("was cut off when tabd stopped; it does not start twice")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(
        fake.requests().len(),
        1,
        "the second part never reached the model"
    );
    assert_eq!(
        v.daily().matches("(write_file) approved → done").count(),
        1,
        "{}",
        v.daily()
    );
    assert_eq!(approvals(&v)["pending"], json!([]));
}

/// Aborted half-way through writing a run's section over the daily note's `## Events` (the
/// section goes in before them, and they are written again after it): before, the restart found
/// the note torn — the events gone, half a section — and wrote the section again after it. The
/// write is recorded first (`.tabd/splices/`), so the restart finishes it before it looks for
/// the section: every section and event line is there once, the events last.
#[test]
fn crash_point_daily_splice_torn() {
    let (v, fake) = writer();
    v.write("agent/inbox/ops/a.md", "First.\n");
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = v.records()[0]["run_id"].as_str().unwrap().to_string();
    // An event line: the undo of the first run, under `## Events`.
    let out = v.tabd(&["undo", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let undone = format!("undid run `{first}`");
    let line_end = v
        .daily()
        .lines()
        .find(|l| l.contains(&undone))
        .map(|l| format!("{l}\n"))
        .unwrap_or_else(|| panic!("no undo line:\n{}", v.daily()));

    v.write("agent/inbox/ops/b.md", "Second.\n");
    run_to_abort(&v, v.command(&["fire", "ops"]), "daily-splice-torn");
    let torn = v.daily();
    assert!(!torn.ends_with(&line_end), "cut in the middle:\n{torn}");
    assert_eq!(v.files_in(".tabd/splices").len(), 1, "its record is there");

    let _d = Daemon::start(&v);
    // Finished before READY.
    let daily = v.daily();
    let records = v.records();
    assert_eq!(records.len(), 2, "{records:?}");
    let second = records[1]["run_id"].as_str().unwrap();
    assert_eq!(daily.matches("· Ops · manual").count(), 2, "{daily}");
    assert_eq!(
        daily.matches(&format!("`tabd undo {first}`")).count(),
        1,
        "{daily}"
    );
    assert_eq!(
        daily.matches(&format!("`tabd undo {second}`")).count(),
        1,
        "{daily}"
    );
    assert_eq!(daily.matches(&undone).count(), 1, "{daily}");
    assert_eq!(daily.matches("## Events").count(), 1, "{daily}");
    assert!(
        daily.rfind("· Ops · manual") < daily.find("## Events") && daily.ends_with(&line_end),
        "the events last:\n{daily}"
    );
    assert!(v.files_in(".tabd/splices").is_empty());
    assert_eq!(v.files_in("agent/inbox/ops/processed"), ["a.md", "b.md"]);
    assert_eq!(fake.requests().len(), 4, "each run once, two requests each");
}
