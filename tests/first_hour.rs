//! What a new user trips on in the first hour (issue 21): the daily note they read, a daemon
//! killed without warning, notes left in an inbox no role reads, and what `tabd validate` says.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{setup, wait_until, Daemon};
use crate::support::{stdout, wire, TestVault};

const T: Duration = Duration::from_secs(20);

/// One-line events get an `## Events` heading of their own after a run's section (Obsidian's
/// outline would otherwise file them inside that run), name roles as people see them, and a
/// second event joins the first under the same heading.
#[test]
fn events_sit_under_their_own_heading_with_role_names() {
    let (v, fake) = setup("");
    fake.respond_with(|_, _| wire::text("anthropic", "Nothing to do."));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/q.md", "anything new?");
    wait_until(T, "the run logged", || v.daily().contains("### Summary"));
    let good = v.read("roles/risk.md");
    v.write(
        "roles/risk.md",
        &good.replace("extends: _base", "extends: _base\nmax_tool_calls: lots"),
    );
    wait_until(T, "the role error logged", || {
        v.daily().contains("role file has errors")
    });
    v.write("roles/risk.md", &good);
    wait_until(T, "the fix logged", || v.daily().contains("role file fixed"));

    let daily = v.daily();
    let run = daily.find("### Summary").unwrap();
    let events = daily.find("## Events").expect("an Events heading");
    let error = daily.find("role file has errors").unwrap();
    let fixed = daily.find("role file fixed").unwrap();
    assert!(run < events && events < error && error < fixed, "{daily}");
    assert_eq!(daily.matches("## Events").count(), 1, "{daily}");
    let error_line = daily[..error].rsplit('\n').next().unwrap();
    assert!(
        error_line.contains("· Risk Manager ·") && !error_line.contains("risk.md"),
        "the event names the role, not its file: {error_line}"
    );
}

/// Everything the model said before its summary is Thinking (not only its first message);
/// the trigger note is linked where it is now, by a link that survives `[`, `]` and `#` in its
/// name; counts read as English.
#[test]
fn thinking_keeps_every_word_and_links_resolve() {
    let (v, fake) = setup("");
    fake.respond_with(|_, n| match n {
        0 => wire::tools(
            "anthropic",
            Some("First I look at the timeline."),
            &[("t1", "read_file", json!({"path": "project/timeline.md"}))],
        ),
        1 => wire::tools(
            "anthropic",
            Some("Now I'll record the slip."),
            &[(
                "t2",
                "write_file",
                json!({"path": "project/slip.md", "content": "Slipped a week."}),
            )],
        ),
        2 => wire::text("anthropic", "Recorded the slip."),
        3 => wire::tools(
            "anthropic",
            Some("One look."),
            &[("t3", "read_file", json!({"path": "project/slip.md"}))],
        ),
        _ => wire::text("anthropic", "Still slipped."),
    });
    v.write("project/timeline.md", "Launch on the 1st.");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/plan [v2] #1.md", "did we slip?");
    wait_until(T, "the first run logged", || {
        v.daily().contains("Recorded the slip.")
    });
    let daily = v.daily();
    let thinking = daily.split("### Thinking").nth(1).unwrap();
    let thinking = thinking.split("### Actions").next().unwrap();
    assert!(
        thinking.contains("First I look at the timeline.") && thinking.contains("Now I'll record the slip."),
        "{daily}"
    );
    assert!(daily.contains("· 2 tool calls ·"), "{daily}");
    let link = "[plan \\[v2\\] #1](agent/inbox/delivery/processed/plan%20%5Bv2%5D%20%231.md)";
    assert!(daily.contains(link), "{daily}");
    // The note moves after the log is written (a crash between them finishes at restart).
    wait_until(T, "the note moved to processed/", || {
        v.path("agent/inbox/delivery/processed/plan [v2] #1.md").exists()
    });

    v.write("agent/inbox/delivery/again.md", "and now?");
    wait_until(T, "the second run logged", || {
        v.daily().contains("Still slipped.")
    });
    let daily = v.daily();
    assert!(daily.contains("· 1 tool call ·"), "{daily}");
    assert!(!daily.contains("1 tool calls"), "{daily}");
    assert!(
        daily.contains("[[agent/inbox/delivery/processed/again]]"),
        "{daily}"
    );
}

/// After `kill -9` the status note still carries the dead daemon's words; `tabd status` must
/// not repeat them, and corrects the note.
#[test]
fn a_killed_daemon_is_never_said_to_run() {
    let (v, _fake) = setup("");
    let mut d = Daemon::start(&v);
    let pid = d.pid();
    let claim = format!("written by the running daemon (pid {pid})");
    assert!(v.read("agent/status.md").contains(&claim));
    d.signal(libc::SIGKILL);
    assert!(d.wait_exit(T).is_none(), "killed by a signal, no exit code");

    let text = stdout(&v.tabd(&["status"]));
    assert!(!text.contains(&pid.to_string()), "{text}");
    assert!(text.contains("not running"), "{text}");
    let note = v.read("agent/status.md");
    assert!(!note.contains(&claim), "{note}");
    assert!(note.contains("the daemon was not running"), "{note}");
    let json = v.status_json().unwrap();
    assert!(json["daemon_pid"].is_null(), "{json}");
}

/// Rename or delete a role and its inbox keeps its notes: tabd never moves them, and says so in
/// `tabd validate`, `tabd status`, the status note and (once) the daily log.
#[test]
fn notes_no_role_reads_are_reported_and_kept() {
    let (v, fake) = setup("");
    v.write("agent/inbox/old-delivery/left.md", "who reads me?");
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert!(
        text.contains("no role reads agent/inbox/old-delivery/ (1 note)"),
        "{text}"
    );
    assert!(text.contains("0 errors, 1 warning"), "{text}");
    assert_eq!(out.status.code(), Some(0), "a warning is not an error");

    let _d = Daemon::start(&v);
    wait_until(T, "the daily log says it", || {
        v.daily().contains("no role reads agent/inbox/old-delivery/")
    });
    assert!(v.read("agent/status.md").contains("old-delivery"));
    assert!(stdout(&v.tabd(&["status"])).contains("old-delivery"));
    // A later scan does not repeat it.
    v.write("agent/inbox/delivery/q.md", "hello");
    wait_until(T, "a run", || !v.records().is_empty());
    assert_eq!(v.daily().matches("no role reads").count(), 1);
    assert_eq!(v.files_in("agent/inbox/old-delivery"), ["left.md"]);
    assert!(fake
        .requests()
        .iter()
        .all(|r| !wire::all_text(&r.body).contains("who reads me?")));
}

/// Issue 39, item 8: the inbox folder of a deleted role stays; `tabd validate` and `tabd status`
/// name it even when it is empty, count what waits there and in its `failed/`, and say what to do.
#[test]
fn the_inbox_folder_of_a_deleted_role_is_named_with_what_waits_there() {
    let (v, _fake) = setup("");
    std::fs::create_dir_all(v.path("agent/inbox/gone")).unwrap();
    let text = stdout(&v.tabd(&["validate"]));
    assert!(
        text.contains(
            "warning: no role reads agent/inbox/gone/ (empty) — there is no roles/gone.md (a role renamed or deleted?). Delete the folder, or add the role again"
        ),
        "{text}"
    );
    v.write("agent/inbox/gone/n.md", "who reads me?");
    v.write("agent/inbox/gone/failed/old.md", "given up on");
    let text = stdout(&v.tabd(&["status"]));
    assert!(
        text.contains(
            "no role reads agent/inbox/gone/ (1 note; 1 more in failed/) — none of them runs: there is no roles/gone.md (a role renamed or deleted?). Move the notes to a role's inbox, like agent/inbox/"
        ),
        "{text}"
    );
}

/// `tabd validate` counts what it printed, and warns about what a run would only discover:
/// a context entry that matches nothing, an agent CLI that is not installed.
#[test]
fn validate_warns_about_missing_context_and_a_missing_cli() {
    let v = TestVault::new();
    v.set_config(
        "timezone = \"UTC\"\n[provider]\nkind = \"command\"\nprofile = \"claude\"\n\n[profiles.claude]\ncommand = \"tabd-test-no-such-cli\"\n",
    );
    let role = v.read("roles/delivery.md");
    let role = role.replacen(
        "## Context Files\n",
        "## Context Files\n- notes/no-such-note.md\n",
        1,
    );
    v.write("roles/delivery.md", &role);
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert!(
        text.contains("context entry `notes/no-such-note.md` matches no file"),
        "{text}"
    );
    assert!(
        text.contains("`tabd-test-no-such-cli` is not installed or not on PATH"),
        "{text}"
    );
    let warnings = text.lines().filter(|l| l.contains("warning:")).count();
    assert!(warnings >= 2, "{text}");
    assert!(
        text.contains(&format!("0 errors, {warnings} warnings")),
        "the count matches what was printed: {text}"
    );
}

/// Notes in the wrong place are reported the moment they land — a typo'd or miscased inbox
/// folder (with a did-you-mean), a note in `agent/inbox/` itself, a folder inside an inbox, a
/// `.txt` — and none of them is moved, lost or sent.
#[test]
fn notes_in_the_wrong_place_are_reported_at_once() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    let misplaced = [
        ("agent/inbox/deliverry/a.md", "no role reads agent/inbox/deliverry/ (1 note) — did you mean agent/inbox/delivery/?"),
        ("agent/inbox/Delivery/b.md", "no role reads agent/inbox/Delivery/ (1 note) — did you mean agent/inbox/delivery/?"),
        ("agent/inbox/c.md", "no role reads agent/inbox/c.md — a note directly in agent/inbox/ is in no role's inbox"),
        ("agent/inbox/delivery/misc/d.md", "tabd does not read agent/inbox/delivery/misc/ — a folder: tabd reads only notes directly in the inbox"),
        ("agent/inbox/delivery/e.txt", "tabd does not read agent/inbox/delivery/e.txt — not a Markdown note"),
    ];
    for (path, said) in misplaced {
        v.write(path, "please look at this");
        wait_until(T, said, || v.daily().contains(said));
    }
    // `tabd status` reads .tabd/status.json, which the daemon writes at the end of the tick that
    // logged the line, just after it: wait for that write.
    wait_until(T, "the status written after the last line", || {
        v.status_json().is_some_and(|s| s.to_string().contains("e.txt"))
    });
    let status = stdout(&v.tabd(&["status"]));
    assert!(status.contains("did you mean agent/inbox/delivery/?"), "{status}");
    assert!(status.contains("e.txt"), "{status}");
    for (path, _) in misplaced {
        assert!(v.path(path).is_file(), "{path} stays where it is");
    }
    assert!(fake.requests().is_empty(), "nothing misplaced was sent");
    let out = v.tabd(&["validate"]);
    assert!(
        stdout(&out).contains("did you mean agent/inbox/delivery/?"),
        "{}",
        stdout(&out)
    );
}
