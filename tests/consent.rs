//! A person's notes are theirs (issue 48, item 1; docs/spec.md §26), through the real binary, on a vault
//! shaped like one a person already lives in: Obsidian's Daily Notes in `daily/` (tabd's log moved
//! to `tabd-log/`), a journal note for today, `Personal/`, `Work/`, `Templates/`, `.obsidian/`.
//!
//! - The stock roles as shipped change none of it: each write lands outside their `write_paths`
//!   or in a protected place, and is refused; after a day of runs every file is byte-identical.
//! - A role without that fence asks: each change to the person's notes becomes an approval note
//!   that shows the change, nothing happens until the person approves, then it happens once, and
//!   `tabd undo` puts it back byte for byte. A note tabd makes in the same run is written at once.
//! - An approved change is never written over an edit the person made after it was asked for.
//! - Before it tries, the model is told which notes are the person's (list_files, read_file).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::approvals::{notes, set_status, status_of, wait_status};
use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const KIND: &str = "anthropic";
const T: Duration = Duration::from_secs(30);

/// The folders of the person's own that these tests watch, byte for byte.
const THEIRS: &[&str] = &["daily", "Personal", "Work", "Templates", ".obsidian"];

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

fn journal() -> String {
    format!("daily/{}.md", today())
}

/// The stock vault, unscheduled, its log in `tabd-log/`, and the person's own notes beside it.
fn persons_vault(fake: &FakeModel) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let config = format!("{}[log]\nfolder = \"tabd-log\"\n", daemon_config(""));
    v.use_model(fake, KIND, &config);
    v.write(".obsidian/daily-notes.json", "{\"folder\": \"daily\"}\n");
    v.write(".obsidian/app.json", "{\"vimMode\": true}\n");
    v.write(&journal(), "# Today\n\nSlept badly. Call mum.\n");
    v.write(
        "Personal/ideas.md",
        "# Ideas\n- sail to the islands\n- bake bread\n",
    );
    v.write("Work/plan.md", "# Plan\n- finish the report\n");
    v.write("Templates/daily.md", "# {{date}}\n");
    v
}

/// Every file of the person's folders with its bytes.
fn persons_files(v: &TestVault) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for folder in THEIRS {
        for entry in walkdir(&v.path(folder)) {
            let rel = entry
                .strip_prefix(v.root())
                .unwrap()
                .to_string_lossy()
                .to_string();
            out.insert(rel, std::fs::read(&entry).unwrap());
        }
    }
    out
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// What the new user's run did: add to the journal, rewrite an idea note, change Obsidian's
/// settings, move a work note away, and make a note of its own.
fn the_walks_calls() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "c1",
            "append_file",
            json!({"path": journal(), "content": "- tabd: the client call moved to Friday"}),
        ),
        (
            "c2",
            "write_file",
            json!({"path": "Personal/ideas.md", "content": "# Ideas\n- sail to the islands\n- learn Rust\n"}),
        ),
        (
            "c3",
            "write_file",
            json!({"path": ".obsidian/app.json", "content": "{}"}),
        ),
        (
            "c4",
            "move_file",
            json!({"from": "Work/plan.md", "to": "project/plan.md"}),
        ),
        (
            "c5",
            "write_file",
            json!({"path": "project/call-notes.md", "content": "Call moved to Friday.\n"}),
        ),
    ]
}

/// The stock delivery role as shipped, over several runs of the day: each change to the person's
/// notes is refused (outside its `write_paths`, or Obsidian's settings), its own note is written,
/// no approval is asked for, and every file of the person's is byte-identical afterwards.
#[test]
fn the_stock_roles_as_shipped_change_nothing_of_the_persons() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    let before = persons_files(&v);
    assert_eq!(before.len(), 6, "{before:?}");
    for run in 0..3 {
        fake.script([
            wire::tools(KIND, Some("Updating the notes."), &the_walks_calls()),
            wire::text(KIND, "Done."),
        ]);
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let results = wire::tool_results(&fake.requests()[run * 2 + 1].body);
        for (id, text, is_error) in &results {
            match id.as_str() {
                "c5" => assert!(!is_error, "its own note is written at once: {text}"),
                _ => assert!(*is_error && text.starts_with("refused"), "{id}: {text}"),
            }
        }
    }
    assert_eq!(persons_files(&v), before, "the person's files are byte-identical");
    assert!(notes(&v).is_empty(), "nothing was asked: {:?}", notes(&v));
    assert!(v.read("project/call-notes.md").contains("Friday"));
}

/// A role the person took the fence off (no `write_paths`): its changes to their notes wait for
/// approval, each note showing the change; the note it makes is written at once. Approved, each
/// change happens once and the run goes on; `tabd undo` puts each back byte for byte.
#[test]
fn without_a_fence_each_change_waits_then_happens_once_and_undoes() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    v.write_anywhere("delivery");
    let before = persons_files(&v);
    let calls = the_walks_calls();
    fake.respond_with(move |req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(KIND, Some("Updating the notes."), &calls)
        } else {
            wire::text(KIND, "Done.")
        }
    });
    let _d = Daemon::start(&v);
    v.write(
        "agent/inbox/delivery/call.md",
        "The client call moved to Friday.\n",
    );
    // The calls run in order: the three asks, then the note of its own.
    wait_until(T, "three approval notes and its own note", || {
        notes(&v).len() == 3 && v.path("project/call-notes.md").exists()
    });
    assert_eq!(
        persons_files(&v),
        before,
        "nothing of theirs changed before approval"
    );
    assert_eq!(v.read("project/call-notes.md"), "Call moved to Friday.\n");
    let asks: Vec<(String, String)> = notes(&v).into_iter().map(|n| (n.clone(), v.read(&n))).collect();
    let find = |tool: &str| {
        asks.iter()
            .find(|(n, _)| n.contains(&format!("-delivery-{tool}-")))
            .unwrap_or_else(|| panic!("an approval for {tool}: {asks:?}"))
            .clone()
    };
    let (append_note, append_text) = find("append_file");
    assert!(append_text.contains("## Your note changes"), "{append_text}");
    assert!(
        append_text.contains("+- tabd: the client call moved to Friday"),
        "{append_text}"
    );
    assert!(
        append_text.contains("(your note)"),
        "the title says whose: {append_text}"
    );
    let (write_note, write_text) = find("write_file");
    assert!(
        write_text.contains("-- bake bread") && write_text.contains("+- learn Rust"),
        "{write_text}"
    );
    let (move_note, move_text) = find("move_file");
    assert!(move_text.contains("It moves to `project/plan.md`"), "{move_text}");

    for note in [&append_note, &write_note] {
        set_status(&v, note, "approved");
        wait_status(&v, note, "done");
    }
    set_status(&v, &move_note, "rejected");
    wait_until(T, "the run's second part", || fake.requests().len() >= 2);
    let journal_now = v.read(&journal());
    assert_eq!(
        journal_now
            .matches("tabd: the client call moved to Friday")
            .count(),
        1,
        "the approved append ran once: {journal_now}"
    );
    assert!(v.read("Personal/ideas.md").contains("learn Rust"));
    assert!(
        v.path("Work/plan.md").exists(),
        "the rejected move did not happen"
    );
    assert_eq!(
        v.read(".obsidian/app.json"),
        "{\"vimMode\": true}\n",
        "refused outright"
    );

    // Each approved change undoes back to the person's bytes, once the run has ended.
    crate::support::daemon::wait_idle(&v);
    for note in [&append_note, &write_note] {
        let text = v.read(note);
        let undo = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("Undo: `tabd undo ")
                    .and_then(|r| r.strip_suffix('`'))
            })
            .unwrap_or_else(|| panic!("an undo line in {note}: {text}"))
            .to_string();
        let out = v.tabd(&["undo", &undo]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    assert_eq!(
        persons_files(&v),
        before,
        "undo put each of their notes back byte for byte"
    );
}

/// The person edits their note after the change was asked for, then approves: the change shown
/// is no longer what would happen, so it is not written over their edit; the note says why.
#[test]
fn an_approved_change_is_not_written_over_an_edit_made_since() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    v.write_anywhere("delivery");
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                KIND,
                Some("Rewriting the ideas."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "Personal/ideas.md", "content": "# Ideas\n- only this\n"}),
                )],
            )
        } else {
            wire::text(KIND, "Done.")
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/go.md", "Tidy my ideas.\n");
    wait_until(T, "an approval note", || notes(&v).len() == 1);
    let note = notes(&v).remove(0);
    let edited = "# Ideas\n- sail to the islands\n- bake bread\n- a new one, written meanwhile\n";
    v.write("Personal/ideas.md", edited);
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "failed");
    assert_eq!(v.read("Personal/ideas.md"), edited, "their edit stands");
    let text = v.read(&note);
    assert!(
        text.contains("Personal/ideas.md changed after this was asked for"),
        "{text}"
    );
    assert_eq!(status_of(&v, &note), "failed");
}

/// The role's explicit word decides: `person_notes: deny` refuses outright (no note); `auto`
/// changes at once; a `write_paths` entry naming the folder is a grant where the role says nothing.
#[test]
fn deny_refuses_auto_and_a_named_folder_grant() {
    for (frontmatter, expect_ok) in [
        ("approve: {person_notes: deny}", false),
        ("approve: {person_notes: auto}", true),
        ("write_paths: [Personal/]", true),
    ] {
        let fake = FakeModel::start();
        let v = persons_vault(&fake);
        v.write(
            "roles/ops.md",
            &format!("---\n{frontmatter}\n---\n# Ops\n## Mission\nTidy.\n## Tools\n- write_file\n"),
        );
        fake.script([
            wire::tools(
                KIND,
                None,
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "Personal/ideas.md", "content": "changed"}),
                )],
            ),
            wire::text(KIND, "Done."),
        ]);
        let out = v.tabd(&["fire", "ops"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let (_, text, is_error) = wire::tool_results(&fake.requests()[1].body).remove(0);
        assert_eq!(!is_error, expect_ok, "{frontmatter}: {text}");
        assert_eq!(
            v.read("Personal/ideas.md") == "changed",
            expect_ok,
            "{frontmatter}"
        );
        if !expect_ok {
            assert!(text.contains("person_notes: deny"), "{text}");
        }
        assert!(notes(&v).is_empty(), "{frontmatter}: nothing asked");
    }
}

/// Before it tries, the model is told: `list_files` marks the person's notes (not the notes tabd
/// made, nor tabd's own files), `read_file` says so above the text, and the write tools' own
/// descriptions say the rule.
#[test]
fn the_model_is_told_which_notes_are_the_persons() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    v.write_anywhere("delivery");
    fake.script([
        wire::tools(
            KIND,
            None,
            &[
                ("l1", "list_files", json!({"recursive": true})),
                ("r1", "read_file", json!({"path": "Personal/ideas.md"})),
                ("r2", "read_file", json!({"path": "project/scope.md"})),
            ],
        ),
        wire::text(KIND, "Done."),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let first = &fake.requests()[0].body;
    let write_tool = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "write_file")
        .unwrap();
    assert!(
        write_tool["description"]
            .as_str()
            .unwrap()
            .contains("waits for their approval"),
        "{write_tool}"
    );
    let results = wire::tool_results(&fake.requests()[1].body);
    let listing = &results[0].1;
    let line = |path: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(path))
            .unwrap_or_else(|| panic!("{path} in {listing}"))
    };
    assert!(line("Personal/ideas.md").contains("person's"), "{listing}");
    assert!(line(&journal()).contains("person's"), "{listing}");
    assert!(
        !line("project/scope.md").contains("person's"),
        "init made it: {listing}"
    );
    assert!(!line("memory.md").contains("person's"), "tabd's own: {listing}");
    assert!(
        results[1].1.starts_with("[the person's own note"),
        "{}",
        results[1].1
    );
    assert!(!results[2].1.contains("person's own note"), "{}", results[2].1);
    // `tabd status` and validate are untouched by any of it.
    assert!(stdout(&v.tabd(&["validate"])).contains("0 errors"));
}

/// Every door goes through the one harness (non-negotiable 8): a client of `tabd mcp serve` (an
/// agent CLI, Claude Desktop) that writes over the person's note, appends to their journal or
/// moves it gets no change made — each is queued for their approval or refused — while a note of
/// its own is written at once.
#[test]
fn the_mcp_serve_door_asks_too() {
    use crate::support::mcp_client::Client;
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    v.write(
        "roles/desk.md",
        "---\n---\n# Desk\n## Mission\nKeep notes.\n## Tools\n- write_file\n- append_file\n- move_file\n",
    );
    // A link of the role's own folder to their note: the change is to their note all the same.
    std::fs::create_dir_all(v.path("desk")).unwrap();
    std::os::unix::fs::symlink("../Personal/ideas.md", v.path("desk/link.md")).unwrap();
    let before = persons_files(&v);
    let mut c = Client::start(&v, "desk");
    let tries = [
        (
            "write_file",
            json!({"path": "Personal/ideas.md", "content": "gone"}),
        ),
        ("append_file", json!({"path": journal(), "content": "a line"})),
        ("move_file", json!({"from": "Work/plan.md", "to": "elsewhere.md"})),
        // Through a parent: still their note.
        (
            "write_file",
            json!({"path": "project/../Personal/ideas.md", "content": "gone"}),
        ),
        (
            "append_file",
            json!({"path": "desk/link.md", "content": "through a link"}),
        ),
    ];
    for (id, (tool, args)) in tries.iter().enumerate() {
        let (text, _) = Client::text(&c.call(id as u64 + 1, tool, args.clone()));
        assert!(
            text.contains("queued for approval") || text.starts_with("refused"),
            "{tool} {args}: {text}"
        );
    }
    let (text, error) =
        Client::text(&c.call(9, "write_file", json!({"path": "desk/new.md", "content": "mine"})));
    assert!(!error, "{text}");
    c.stop();
    assert_eq!(
        persons_files(&v),
        before,
        "nothing of theirs changed through mcp serve"
    );
    assert_eq!(v.read("desk/new.md"), "mine");
}

/// A note tabd made stays tabd's through an undo: changed by a second run, that run undone, a
/// third run changes it again at once — the record followed the undo (without it, the note's
/// bytes would no longer be what tabd last left, and it would count as the person's).
#[test]
fn a_note_tabd_made_stays_tabds_through_an_undo() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    let write = |content: &str| {
        fake.script([
            wire::tools(
                KIND,
                None,
                &[(
                    "w",
                    "write_file",
                    json!({"path": "project/made.md", "content": content}),
                )],
            ),
            wire::text(KIND, "Done."),
        ]);
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        v.records().last().unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    write("v1\n");
    let second = write("v2\n");
    let out = v.tabd(&["undo", &second]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v.read("project/made.md"), "v1\n");
    write("v3\n");
    assert_eq!(v.read("project/made.md"), "v3\n", "written at once");
    assert!(notes(&v).is_empty(), "nothing asked: {:?}", notes(&v));
}

/// A call asked for while its note was not the person's — not there yet, or tabd's own — and
/// approved after the person wrote theirs at that path: the change shown (a new note, or a
/// change to tabd's) is not what would happen, and it would write over their words. Not run.
#[test]
fn an_approved_call_is_not_written_over_a_note_that_became_the_persons_since() {
    let fake = FakeModel::start();
    let v = persons_vault(&fake);
    // tabd's own note, made by an earlier run of the role.
    fake.script([
        wire::tools(
            KIND,
            None,
            &[(
                "w0",
                "write_file",
                json!({"path": "project/made.md", "content": "tabd's\n"}),
            )],
        ),
        wire::text(KIND, "Done."),
    ]);
    v.write(
        "roles/ops.md",
        "---\n---\n# Ops\n## Mission\nTidy.\n## Tools\n- write_file\n",
    );
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v.read("project/made.md"), "tabd's\n");
    v.write(
        "roles/ops.md",
        "---\napprove: {write_file: ask}\n---\n# Ops\n## Mission\nTidy.\n## Tools\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                KIND,
                None,
                &[
                    (
                        "w1",
                        "write_file",
                        json!({"path": "Personal/new.md", "content": "the model's\n"}),
                    ),
                    (
                        "w2",
                        "write_file",
                        json!({"path": "project/made.md", "content": "the model's\n"}),
                    ),
                ],
            )
        } else {
            wire::text(KIND, "Done.")
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/go.md", "Write the notes.\n");
    wait_until(T, "two approval notes", || notes(&v).len() == 2);
    let asked = notes(&v);
    for n in &asked {
        assert!(
            !v.read(n).contains("## Your note changes"),
            "neither is theirs yet: {}",
            v.read(n)
        );
    }
    // Meanwhile the person writes a note of their own at the one path, and edits tabd's note.
    v.write("Personal/new.md", "my own new note\n");
    v.write("project/made.md", "tabd's\nand my line\n");
    for n in &asked {
        set_status(&v, n, "approved");
        wait_status(&v, n, "failed");
    }
    assert_eq!(
        v.read("Personal/new.md"),
        "my own new note\n",
        "their note stands"
    );
    assert_eq!(
        v.read("project/made.md"),
        "tabd's\nand my line\n",
        "their edit stands"
    );
    for n in &asked {
        assert!(v.read(n).contains("is your note now"), "{}", v.read(n));
    }
}
