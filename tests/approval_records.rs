//! Issue 36, two approval holes (DESIGN §15, §24), through the real binary: a copy of tabd's
//! state restored from before an approved call ran never runs it again (the call's start is
//! marked outside the vault, where a restore cannot undo it), and an approval note tabd cannot
//! read is never skipped without a word (it becomes `invalid` with the reason, keeping every
//! byte the person or tabd wrote in its body).

use std::time::Duration;

use serde_json::Value;

use crate::approvals::{post, setup, tools_reply, KIND};
use crate::support::approvals::{calls_of, notes, set_status, status_of, wait_status};
use crate::support::daemon::{wait_until, Daemon};
use crate::support::{describe, wire, TestVault};

const T: Duration = Duration::from_secs(30);

fn approvals(v: &TestVault) -> Value {
    let out = v.tabd(&["approvals", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)))
}

/// The id of the request whose note is `note`, from tabd's ledger.
fn id_of(v: &TestVault, note: &str) -> String {
    let state = v.state();
    let Some(all) = state["approvals"].as_object() else {
        panic!("no ledger: {state}");
    };
    all.iter()
        .find(|(_, a)| a["note"] == note)
        .map(|(id, _)| id.clone())
        .unwrap_or_else(|| panic!("no request for {note}: {state}"))
}

fn phase_of(v: &TestVault, id: &str) -> Value {
    v.state()["approvals"][id]["phase"].clone()
}

/// The note asking to post `text`.
fn note_with(v: &TestVault, text: &str) -> String {
    notes(v)
        .into_iter()
        .find(|n| v.read(n).contains(text))
        .unwrap_or_else(|| panic!("no note posting {text:?}: {:?}", notes(v)))
}

/// Hole A: a backup or sync tool puts back `.tabd/state.json` as it was before two approved
/// calls ran — one approved with `tabd approve` (the ledger said `approved`), one in its note
/// (the note said `approved`, the ledger `pending`; the note is restored too). Before, the next
/// start ran both again. Now each start of a call is marked outside the vault first, so the
/// restored requests find their marks: neither runs again, the notes, `tabd approvals --json`
/// and the daily log say it was already run and tabd cannot know how it ended. The person may
/// still ask for it once more, knowingly.
#[test]
fn a_restored_state_never_runs_an_approved_call_again() {
    let (v, fake, log) = setup("", "");
    fake.script([
        tools_reply(
            &[
                post("t1", "C1", "approved on the terminal"),
                post("t2", "C2", "approved in the note"),
            ],
            "Two posts.",
        ),
        wire::text(KIND, "Queued both."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let by_terminal = note_with(&v, "approved on the terminal");
    let by_note = note_with(&v, "approved in the note");
    let (id_t, id_n) = (id_of(&v, &by_terminal), id_of(&v, &by_note));
    let out = v.tabd(&["approve", &id_t]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    set_status(&v, &by_note, "approved");
    assert_eq!(
        (phase_of(&v, &id_t), phase_of(&v, &id_n)),
        (Value::from("approved"), Value::from("pending"))
    );
    // The backup: tabd's state and the note, as they are before either call runs.
    let state_copy = std::fs::read(v.path(".tabd/state.json")).unwrap();
    let note_copy = v.read(&by_note);

    let mut d = Daemon::start(&v);
    wait_status(&v, &by_terminal, "done");
    wait_status(&v, &by_note, "done");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(calls_of(&log, "post").len(), 2);

    // The restore.
    std::fs::write(v.path(".tabd/state.json"), &state_copy).unwrap();
    v.write(&by_note, &note_copy);
    let mut d = Daemon::start(&v);
    wait_until(T, "both restored requests acted on", || {
        [&id_t, &id_n].iter().all(|id| {
            let p = phase_of(&v, id);
            p != "approved" && p != "pending" && p != "executing"
        }) && status_of(&v, &by_terminal) != "done"
            || calls_of(&log, "post").len() > 2
    });
    assert_eq!(
        calls_of(&log, "post").len(),
        2,
        "neither call ran again: {:?}",
        calls_of(&log, "post")
    );
    for (id, note) in [(&id_t, &by_terminal), (&id_n, &by_note)] {
        wait_status(&v, note, "unknown");
        let text = v.read(note);
        assert!(
            text.contains("**Not run again**") && text.contains("already started"),
            "{text}"
        );
        assert_eq!(phase_of(&v, id), "unknown");
    }
    let listed = approvals(&v);
    let unknown = listed["unknown"].as_array().cloned().unwrap_or_default();
    for id in [&id_t, &id_n] {
        let a = unknown
            .iter()
            .find(|a| a["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} not listed as unknown: {listed}"));
        assert!(
            a["outcome"].as_str().is_some_and(|o| o.contains("already run")),
            "{a}"
        );
    }
    wait_until(T, "the daily log says so", || {
        v.daily().matches("not run again").count() == 2
    });

    // The person checked, and wants it once more: set `approved` again, it runs once.
    set_status(&v, &by_note, "approved");
    wait_status(&v, &by_note, "done");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let posts = calls_of(&log, "post");
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert_eq!(posts[2]["arguments"]["text"], "approved in the note");
    assert_eq!(v.daily().matches("not run again").count(), 2, "{}", v.daily());
}
