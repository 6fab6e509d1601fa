//! Approvals (docs/spec.md §15) end to end: the real binary, the in-repo MCP test server and the fake
//! model. A network call becomes a pending note and does not run; the person's decision in the
//! note (or from the terminal) runs it exactly once, or not at all.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::approvals::{calls_of, notes, set_status, status_of, wait_status};
use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::mcp_server::server_config;
use crate::support::{describe, wire, TestVault};

pub(crate) const KIND: &str = "anthropic";

/// A vault whose role `ops` may use the test server; `approvals` is appended to the config and
/// `frontmatter` to the role. These tests look at the approval itself, so the role's runs do not
/// wait for it (`resume: false`) unless `frontmatter` says otherwise (see `tests/resume.rs`).
pub(crate) fn setup(approvals: &str, frontmatter: &str) -> (TestVault, FakeModel, PathBuf) {
    let frontmatter = if frontmatter.contains("resume:") {
        frontmatter.to_string()
    } else {
        format!("resume: false\n{frontmatter}")
    };
    let v = TestVault::new();
    let fake = FakeModel::start();
    let log = v.dir.path().join("calls.jsonl");
    v.use_model(
        &fake,
        KIND,
        &format!(
            "{}{approvals}\n{}",
            daemon_config(""),
            server_config("test", "normal", &log, "tool_timeout_s = 30")
        ),
    );
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        &format!(
            "---\n{frontmatter}---\n# Ops\n## Mission\nTell the team.\n## Tools\n- read_file\n- write_file\n- test/*\n"
        ),
    );
    (v, fake, log)
}

pub(crate) fn post(id: &str, channel: &str, text: &str) -> (String, String, Value) {
    (
        id.to_string(),
        "test__post".to_string(),
        json!({"channel": channel, "text": text}),
    )
}

pub(crate) fn tools_reply(calls: &[(String, String, Value)], why: &str) -> crate::support::fake_model::Reply {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
        .collect();
    wire::tools(KIND, Some(why), &calls)
}

#[test]
fn an_approved_call_runs_once_as_edited_and_the_next_prompt_carries_the_result() {
    let (v, fake, log) = setup("", "");
    fake.script([
        tools_reply(
            &[post("t1", "C1", "Weekly update: on track")],
            "The client asked for a weekly update.",
        ),
        wire::text(KIND, "Queued the update for approval."),
        wire::text(KIND, "Noted that the update went out."),
    ]);
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/update.md", "Send the weekly update.\n");
    let reqs = fake.wait_for_requests(2, Duration::from_secs(20));
    let results = wire::tool_results(&reqs[1].body);
    assert!(!results[0].2, "queued is not an error: {results:?}");
    assert!(results[0].1.contains("queued for approval"), "{results:?}");
    assert!(results[0].1.contains("[[agent/approvals/"), "{results:?}");
    assert!(
        calls_of(&log, "post").is_empty(),
        "nothing ran before the decision"
    );

    let all = notes(&v);
    assert_eq!(all.len(), 1, "{all:?}");
    let note = &all[0];
    assert!(note.contains("-ops-test-post-"), "{note}");
    let text = v.read(note);
    for want in [
        "status: pending",
        "role: ops",
        "tool: test/post",
        "risk: network",
        "**Why:**\n\n> The client asked for a weekly update.",
        // The title names the channel, by the argument's name (issue 39, item 4).
        "\n# Ops asks to run test/post (channel: C1)\n",
        "\"text\": \"Weekly update: on track\"",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    wait_until(Duration::from_secs(20), "the run's daily-log section", || {
        v.daily().contains("waiting for approval in [[agent/approvals/")
    });

    wait_until(
        Duration::from_secs(20),
        "agent/status.md shows the approval",
        || {
            std::fs::read_to_string(v.path("agent/status.md"))
                .is_ok_and(|t| t.contains("1 awaiting approval"))
        },
    );
    // A sync tool's conflict copy saying `approved` is never acted on.
    let copy = note.replace(".md", ".sync-conflict-20261122-090000-ABCDEFG.md");
    v.write(
        &copy,
        &v.read(note).replace("status: pending", "status: approved"),
    );

    // The person edits the text and approves, in the file.
    let edited = v
        .read(note)
        .replace("Weekly update: on track", "Weekly update: on track, demo Friday")
        .replace("status: pending", "status: approved");
    v.write(note, &edited);
    wait_status(&v, note, "done");
    let posts = calls_of(&log, "post");
    assert_eq!(
        posts.len(),
        1,
        "the note ran, its conflict copy did not: {posts:?}"
    );
    assert_eq!(status_of(&v, &copy), "approved", "the copy is left alone");
    assert_eq!(
        posts[0]["arguments"]["text"],
        "Weekly update: on track, demo Friday"
    );
    let text = v.read(note);
    assert!(text.contains("## Result"), "{text}");
    assert!(
        text.contains("posted to C1"),
        "the server's answer is in the note:\n{text}"
    );
    wait_until(Duration::from_secs(20), "the decision in the daily log", || {
        v.daily().contains("(test/post) approved → done")
    });

    // Approving again, or a duplicate save, never runs it twice.
    set_status(&v, note, "approved");
    wait_status(&v, note, "done");
    assert!(v.read(note).contains("**Not run**"), "{}", v.read(note));
    assert_eq!(calls_of(&log, "post").len(), 1);

    // The next run is told the outcome, without a run spent on it.
    assert_eq!(fake.requests().len(), 2, "the decision started no run");
    v.write("agent/inbox/ops/next.md", "Anything new?\n");
    let reqs = fake.wait_for_requests(3, Duration::from_secs(20));
    let body = reqs[2].body.to_string();
    assert!(body.contains("Approvals decided since your last run"), "{body}");
    assert!(
        body.contains("test__post") && body.contains("done: posted to C1"),
        "{body}"
    );
    // … once.
    fake.script([wire::text(KIND, "quiet")]);
    v.write("agent/inbox/ops/third.md", "And now?\n");
    let reqs = fake.wait_for_requests(4, Duration::from_secs(20));
    assert!(!reqs[3].body.to_string().contains("Approvals decided"));
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}

#[test]
fn rejected_invalid_and_expired_calls_run_nothing_and_identical_requests_share_a_note() {
    let (v, fake, log) = setup("[approvals]\nexpire_after = \"4s\"\n", "");
    fake.script([
        tools_reply(
            &[
                post("t1", "C1", "first"),
                post("t2", "C2", "second"),
                post("t3", "C1", "first"),
            ],
            "Three posts, one of them twice.",
        ),
        wire::text(KIND, "queued"),
    ]);
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/go.md", "Post.\n");
    let reqs = fake.wait_for_requests(2, Duration::from_secs(20));
    let results = wire::tool_results(&reqs[1].body);
    assert!(results[2].1.contains("already waiting"), "{results:?}");
    let all = notes(&v);
    assert_eq!(all.len(), 2, "the identical call reused its note: {all:?}");
    let first = all
        .iter()
        .find(|n| v.read(n).contains("\"first\""))
        .unwrap()
        .clone();
    let second = all
        .iter()
        .find(|n| v.read(n).contains("\"second\""))
        .unwrap()
        .clone();

    // Rejected: nothing runs.
    set_status(&v, &first, "rejected");
    wait_until(Duration::from_secs(20), "rejection recorded", || {
        v.read(&first).contains("**Rejected**")
    });
    assert_eq!(status_of(&v, &first), "rejected");

    // Invalid edit: refused with the reason; fixed: runs.
    let text = v.read(&second);
    v.write(
        &second,
        &text
            .replace("\"channel\": \"C2\"", "\"channel\": 42")
            .replace("status: pending", "status: approved"),
    );
    wait_status(&v, &second, "invalid");
    assert!(v.read(&second).contains("schema"), "{}", v.read(&second));
    // The fix arrives as a sync tool delivers it: a temp file renamed over the note.
    let text = v.read(&second);
    v.write(
        "agent/approvals/.syncthing.note.tmp",
        &text
            .replace("\"channel\": 42", "\"channel\": \"C2\"")
            .replace("status: invalid", "status: approved"),
    );
    std::fs::rename(v.path("agent/approvals/.syncthing.note.tmp"), v.path(&second)).unwrap();
    wait_status(&v, &second, "done");
    let posts = calls_of(&log, "post");
    assert_eq!(posts.len(), 1, "only the fixed one ran: {posts:?}");
    assert_eq!(posts[0]["arguments"]["channel"], "C2");

    // Expiry: a new request left alone expires, and approving it later does nothing.
    fake.script([
        tools_reply(&[post("t4", "C3", "late")], "One more."),
        wire::text(KIND, "queued"),
    ]);
    v.write("agent/inbox/ops/late.md", "Post late.\n");
    fake.wait_for_requests(4, Duration::from_secs(20));
    let late = notes(&v)
        .into_iter()
        .find(|n| v.read(n).contains("\"late\""))
        .unwrap();
    wait_status(&v, &late, "expired");
    set_status(&v, &late, "approved");
    wait_status(&v, &late, "expired");
    assert!(
        v.read(&late).contains("it expired before it was approved"),
        "{}",
        v.read(&late)
    );
    assert_eq!(calls_of(&log, "post").len(), 1);
    wait_until(Duration::from_secs(20), "both decisions in the daily log", || {
        let daily = v.daily();
        daily.contains("rejected — nothing ran") && daily.contains("expired unanswered")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}

#[test]
fn a_crash_during_an_approved_call_leaves_unknown_and_never_runs_it_again_by_itself() {
    let (v, fake, log) = setup("", "approve:\n  test/slow: ask\n");
    fake.script([
        wire::tools(KIND, Some("Slow thing."), &[("t1", "test__slow", json!({}))]),
        wire::text(KIND, "queued"),
    ]);
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/slow.md", "Do the slow thing.\n");
    fake.wait_for_requests(2, Duration::from_secs(20));
    let note = notes(&v).remove(0);
    set_status(&v, &note, "approved");
    wait_until(Duration::from_secs(20), "the slow call started", || {
        !calls_of(&log, "slow").is_empty()
    });
    assert_eq!(status_of(&v, &note), "executing");
    d.signal(libc::SIGKILL);
    d.wait_exit(Duration::from_secs(10));

    let mut d = Daemon::start(&v);
    wait_status(&v, &note, "unknown");
    let text = v.read(&note);
    assert!(text.contains("may or may not have happened"), "{text}");
    assert!(text.contains("set `status` to `approved` again"), "{text}");
    wait_until(Duration::from_secs(20), "the daily log says unknown", || {
        v.daily().contains("outcome unknown")
    });
    // A restart and more events change nothing: no second call unless the person asks.
    d.signal(libc::SIGHUP);
    let out = v.tabd(&["approvals", "--json"]);
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listing["pending"], json!([]), "unknown is not pending");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
    assert_eq!(
        calls_of(&log, "slow").len(),
        1,
        "the interrupted call was not repeated"
    );
}

#[test]
fn the_terminal_lists_approves_and_rejects_and_roles_can_never_touch_the_notes() {
    let (v, fake, log) = setup(
        "",
        "write_paths: [\"agent/approvals/**\", \"project/**\"]\napprove:\n  test/echo: deny\n",
    );
    fake.script([
        tools_reply(&[post("t1", "C1", "one"), post("t2", "C2", "two")], "Two posts."),
        wire::tools(
            KIND,
            Some("Let me approve my own post."),
            &[
                (
                    "t3",
                    "write_file",
                    json!({"path": "agent/approvals/mine.md", "content": "---\nstatus: approved\n---\n"}),
                ),
                ("t4", "test__echo", json!({"text": "hi"})),
            ],
        ),
        wire::text(KIND, "done"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let results = wire::tool_results(&reqs[2].body);
    let result = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert!(
        result("t3").2 && result("t3").1.contains("cannot approve its own calls"),
        "{results:?}"
    );
    assert!(
        result("t4").2 && result("t4").1.contains("denies `test/echo`"),
        "{results:?}"
    );
    assert!(!v.path("agent/approvals/mine.md").exists());
    assert!(calls_of(&log, "echo").is_empty());

    let status: Value = serde_json::from_slice(&v.tabd(&["status", "--json"]).stdout).unwrap();
    let ops = status["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "ops")
        .unwrap();
    assert_eq!(ops["pending_approvals"].as_array().unwrap().len(), 2, "{ops}");
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(text.contains("approvals: 2 waiting for you"), "{text}");

    let out = v.tabd(&["approvals", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pending = listing["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{listing}");
    assert!(pending
        .iter()
        .all(|p| p["role"] == "ops" && p["tool"] == "test/post" && p["risk"] == "network"));
    let text = String::from_utf8_lossy(&v.tabd(&["approvals"]).stdout).to_string();
    assert!(
        text.contains("test/post") && text.contains("tabd approve ID"),
        "{text}"
    );

    let id = |i: usize| pending[i]["id"].as_str().unwrap().to_string();
    let note = |i: usize| pending[i]["note"].as_str().unwrap().to_string();
    let out = v.tabd(&["approve", &id(0)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no daemon is running"));
    assert_eq!(status_of(&v, &note(0)), "approved");
    let out = v.tabd(&["reject", &id(1)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(status_of(&v, &note(1)), "rejected");
    let out = v.tabd(&["approve", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no approval nope"));

    // The daemon picks both up when it starts.
    let mut d = Daemon::start(&v);
    wait_status(&v, &note(0), "done");
    wait_until(Duration::from_secs(20), "rejection recorded", || {
        v.read(&note(1)).contains("**Rejected**")
    });
    let posts = calls_of(&log, "post");
    assert_eq!(posts.len(), 1, "{posts:?}");
    let out = v.tabd(&["approve", &id(0)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a done approval cannot be approved again"
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}

/// Issue 37, item 3: a decision's daily line that cannot be written (the daily folder is a
/// file here) is named on stderr and `tabd reject` exits 1, though the decision is recorded and
/// its note says so. Before, the line was dropped with a log line and the exit was 0.
#[test]
fn a_decisions_daily_line_that_cannot_be_written_is_named() {
    let (v, fake, _log) = setup("", "");
    fake.script([
        tools_reply(&[post("t1", "C1", "one")], "One post."),
        wire::text(KIND, "done"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let listing: Value = serde_json::from_slice(&v.tabd(&["approvals", "--json"]).stdout).unwrap();
    let pending = &listing["pending"][0];
    let id = pending["id"].as_str().unwrap();
    let note = pending["note"].as_str().unwrap();
    std::fs::remove_dir_all(v.path("daily")).unwrap();
    std::fs::write(v.path("daily"), "not a folder").unwrap();

    let out = v.tabd(&["reject", id]);
    let said = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("nothing will run"), "{said}");
    assert!(
        said.contains(&format!(
            "warning: the daily note has no line of approval {id}'s decision"
        )),
        "{said}"
    );
    assert_eq!(status_of(&v, note), "rejected");
}

/// A call `tabd fire` sends for approval while the daemon runs shows in `tabd status` and
/// `agent/status.md` at once (not after the daemon's next own run), and `fire` says it waits.
#[test]
fn a_call_fire_queues_while_the_daemon_runs_shows_in_status_at_once() {
    let (v, fake, _log) = setup("", "");
    fake.script([
        tools_reply(&[post("t1", "C1", "Weekly update")], "The client asked for it."),
        wire::text(KIND, "Queued it."),
    ]);
    let d = Daemon::start(&v);
    let generation = v.generation();
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains("· 1 tool call ·"), "{said}");
    assert!(
        said.contains("1 call waits for your approval: agent/approvals/"),
        "{said}"
    );
    let note = notes(&v).pop().expect("an approval note");
    wait_until(
        Duration::from_secs(20),
        "the daemon's status listing the approval",
        || v.generation() > generation && v.read("agent/status.md").contains(note.trim_end_matches(".md")),
    );
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(text.contains("approvals: 1 waiting for you"), "{text}");
    drop(d);
}

/// An approved call that changed a file says in its note (and the daily log) how to undo it, and
/// that undo works; a file's content waits in the note as text the person can edit, and what
/// runs is what they left there. A run that changed nothing has no `Undo:` line.
#[test]
fn an_approved_write_shows_its_content_as_text_and_its_undo() {
    let (v, fake, _log) = setup("", "approve:\n  write_file: ask\n");
    fake.script([
        wire::tools(
            KIND,
            Some("Record the plan."),
            &[(
                "w1",
                "write_file",
                json!({"path": "project/plan.md", "content": "# Plan\n\n- ship\n"}),
            )],
        ),
        wire::text(KIND, "Queued the plan."),
    ]);
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.\n");
    wait_until(Duration::from_secs(20), "an approval note", || {
        notes(&v).len() == 1
    });
    let note = notes(&v).pop().unwrap();
    let text = v.read(&note);
    assert!(
        text.contains("### content\n```text\n# Plan\n\n- ship\n\n```"),
        "{text}"
    );
    wait_until(Duration::from_secs(20), "the run's section", || {
        v.daily().contains("Queued the plan.")
    });
    assert!(
        !v.daily().contains("Undo: `tabd undo"),
        "the run itself changed nothing:\n{}",
        v.daily()
    );
    // The person edits the content as text, then approves.
    v.write(&note, &text.replace("- ship\n", "- ship on Friday\n"));
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "done");
    assert_eq!(v.read("project/plan.md"), "# Plan\n\n- ship on Friday\n");
    let done = v.read(&note);
    let undo = done
        .lines()
        .find_map(|l| {
            l.strip_prefix("Undo: `tabd undo ")
                .and_then(|r| r.strip_suffix('`'))
        })
        .unwrap_or_else(|| panic!("no undo line in\n{done}"))
        .to_string();
    assert!(
        v.daily().contains(&format!("undo: `tabd undo {undo}`")),
        "{}",
        v.daily()
    );
    let out = v.tabd(&["undo", &undo]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        !v.path("project/plan.md").exists(),
        "the approved write is undone"
    );
}
