//! Issue 36, two approval holes (docs/spec.md §15, §24), through the real binary: a copy of tabd's
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

/// `text` with its frontmatter (up to the closing `---` line) replaced by `frontmatter`; the body
/// as it was.
fn with_frontmatter(text: &str, frontmatter: &str) -> String {
    let body_at = text[4..].find("\n---\n").expect("a frontmatter block") + 4 + 5;
    format!("{frontmatter}{}", &text[body_at..])
}

/// The note's text after its frontmatter.
fn body_of(text: &str) -> &str {
    let body_at = text[4..].find("\n---\n").expect("a frontmatter block") + 4 + 5;
    &text[body_at..]
}

/// Hole B: notes whose properties tabd cannot read — nested deeper than the parser's bound, and
/// larger than it reads — were skipped without a word (a debug log line), so the person who set
/// `status: approved` saw nothing happen. Now each becomes `invalid` with the reason, in the note,
/// the daily log and `tabd approvals`; the call never runs. The note gets readable properties
/// again from tabd's record, its body as it was, so the person can approve it again.
#[test]
fn a_note_whose_properties_cannot_be_read_is_invalid_with_the_reason_and_never_runs() {
    let (v, fake, log) = setup("", "");
    fake.script([
        tools_reply(
            &[post("t1", "C1", "too deep"), post("t2", "C2", "too large")],
            "Two posts.",
        ),
        wire::text(KIND, "Queued both."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let deep = note_with(&v, "too deep");
    let large = note_with(&v, "too large");
    let (id_d, id_l) = (id_of(&v, &deep), id_of(&v, &large));
    let mut d = Daemon::start(&v);
    let nested = format!("{}x{}", "[".repeat(80), "]".repeat(80));
    let deep_fm = format!("---\nstatus: approved\nid: {id_d}\ntool: test/post\nnested: {nested}\n---\n");
    let large_fm = format!(
        "---\nstatus: approved\nid: {id_l}\ntool: test/post\npadding: \"{}\"\n---\n",
        "x".repeat(300 * 1024)
    );
    let deep_body = body_of(&v.read(&deep)).to_string();
    v.write(&deep, &with_frontmatter(&v.read(&deep), &deep_fm));
    v.write(&large, &with_frontmatter(&v.read(&large), &large_fm));
    for (note, id, reason, fm) in [
        (&deep, &id_d, "64 deep", &deep_fm),
        (&large, &id_l, "256 KiB", &large_fm),
    ] {
        wait_status(&v, note, "invalid");
        let text = v.read(note);
        assert!(
            text.contains("**Invalid**") && text.contains("cannot read the note's properties"),
            "{text}"
        );
        assert!(text.contains(reason), "the reason, {reason:?}: {text}");
        assert!(text.contains(fm.as_str()), "the properties as they were, kept");
        assert!(
            text.contains(&format!("id: {id}\n")) || text.contains(&format!("id: \"{id}\"\n")),
            "readable again: {text}"
        );
        assert_eq!(phase_of(&v, id), "invalid");
    }
    assert!(v.read(&deep).contains(&deep_body), "the body kept");
    let listed = approvals(&v);
    for id in [&id_d, &id_l] {
        let a = listed["invalid"]
            .as_array()
            .and_then(|l| l.iter().find(|a| a["id"] == id.as_str()).cloned())
            .unwrap_or_else(|| panic!("{id} not listed as invalid: {listed}"));
        assert!(
            a["outcome"]
                .as_str()
                .is_some_and(|o| o.contains("cannot read the note's properties")),
            "{a}"
        );
    }
    let out = v.tabd(&["approvals"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("Invalid, not run") && shown.contains("64 deep"),
        "{}",
        describe(&out)
    );
    wait_until(T, "a daily line for each", || {
        let daily = v.daily();
        [&id_d, &id_l]
            .iter()
            .all(|id| daily.contains(&format!("approval `{id}` (test/post) not run: tabd cannot read")))
    });
    assert!(calls_of(&log, "post").is_empty(), "neither call ran");

    // The person approves the note as tabd wrote it back: it runs, once.
    set_status(&v, &deep, "approved");
    wait_status(&v, &deep, "done");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let posts = calls_of(&log, "post");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["arguments"]["text"], "too deep");
}

/// Hole B: when tabd rewrites a note as `invalid` it keeps the person's text — the `## Arguments`
/// block as they edited it (a long text in a block of its own included) byte for byte — and the
/// properties it could not read, as they were. Only the status and the reason change.
#[test]
fn a_malformed_note_rewritten_as_invalid_keeps_its_arguments_byte_for_byte() {
    let (v, fake, log) = setup("", "");
    fake.script([
        tools_reply(
            &[post("t1", "C1", "first line\nsecond line\n")],
            "A post of two lines.",
        ),
        wire::text(KIND, "Queued."),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let note = notes(&v).pop().expect("an approval note");
    let id = id_of(&v, &note);
    let mut d = Daemon::start(&v);
    // The person edits the arguments and approves — and breaks the YAML on the way.
    let text = v.read(&note);
    assert!(text.contains("\n### text\n"), "{text}");
    let edited = text
        .replace("second line", "second line, edited by the person")
        .replace("\"channel\": \"C1\"", "\"channel\": \"C9\"")
        .replace("status: pending", "status: approved")
        .replace("tool: test/post", "tool: [test/post");
    v.write(&note, &edited);
    let args_at = edited.find("## Arguments").unwrap();
    let arguments = &edited[args_at..];
    let broken = &edited[..edited.len() - body_of(&edited).len()];
    wait_status(&v, &note, "invalid");
    let after = v.read(&note);
    assert!(
        after.contains(arguments),
        "the Arguments block byte for byte:\n--- before\n{arguments}\n--- after\n{after}"
    );
    assert!(
        after.contains(body_of(&edited)),
        "the whole body byte for byte: {after}"
    );
    assert!(after.contains(broken), "the broken properties kept: {after}");
    assert!(
        after.contains("**Invalid**") && after.contains("line 5: the frontmatter is not valid YAML"),
        "the reason, with its line: {after}"
    );
    assert_eq!(phase_of(&v, &id), "invalid");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert!(calls_of(&log, "post").is_empty(), "never ran");
}
