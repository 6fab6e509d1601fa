//! The run log never writes into a person's note (issue 39, item 1; docs/spec.md §26), through the real
//! binary: a daily note tabd did not make stays byte for byte and the day goes to `agent/log/`;
//! a role cannot forge tabd's marker into a place tabd would append to; `[log] folder` moves the
//! log and every reader and protection with it; `.obsidian/daily-notes.json` is read by `init`,
//! `validate` and `run` — garbage is a warning, never a crash.

use serde_json::json;

use crate::support::daemon::vault_with;
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const KIND: &str = "anthropic";

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

fn fire(v: &TestVault, fake: &FakeModel) -> std::process::Output {
    fake.script([wire::text(KIND, "Looked around; nothing to change.")]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    out
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The person's journal for today (Obsidian's Daily Notes in `daily/`): a run never touches it —
/// not a byte, CRLF and a last line without its end included — and logs the day in
/// `agent/log/`, said in the daemon's log, `tabd validate` and `tabd status`; `tabd logs` reads
/// it there.
#[test]
fn a_persons_daily_note_is_left_byte_for_byte_and_the_day_is_logged_in_agent_log() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "");
    let mine = format!("daily/{}.md", today());
    let journal = "# My day\r\n\r\n- [ ] call the bank\r\nDear diary, today I".as_bytes();
    std::fs::create_dir_all(v.path("daily")).unwrap();
    std::fs::write(v.path(&mine), journal).unwrap();
    let out = fire(&v, &fake);
    assert_eq!(
        std::fs::read(v.path(&mine)).unwrap(),
        journal,
        "the person's note changed"
    );
    let elsewhere = format!("agent/log/{}.md", today());
    let log = v.read(&elsewhere);
    assert!(
        log.starts_with(&format!("---\ntabd: run-log\n---\n# {}\n\n## ", today()))
            && log.contains(" · Delivery Manager · manual\n"),
        "{log}"
    );
    assert!(
        stderr(&out).contains(&format!("logs that day in {elsewhere} instead")),
        "{}",
        describe(&out)
    );
    // A second run: the same, the person's note still untouched.
    fire(&v, &fake);
    assert_eq!(std::fs::read(v.path(&mine)).unwrap(), journal);
    assert_eq!(
        v.read(&elsewhere).matches("· Delivery Manager · manual").count(),
        2
    );
    let logs = stdout(&v.tabd(&["logs"]));
    assert_eq!(logs.matches("Delivery Manager · manual").count(), 2, "{logs}");
    assert!(!logs.contains("call the bank"), "{logs}");
    let validate = v.tabd(&["validate"]);
    assert!(
        stdout(&validate).contains(&format!("{mine}: warning: {mine} is a note tabd did not make")),
        "{}",
        describe(&validate)
    );
    let status = stdout(&v.tabd(&["status"]));
    assert!(
        status.contains(&format!("log: {mine} is a note tabd did not make")),
        "{status}"
    );
    let json: serde_json::Value = serde_json::from_slice(&v.tabd(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["log"]["today"], elsewhere.as_str());
}

/// A role cannot make tabd append to a note it should not: writing or moving a note that
/// carries tabd's marker into the log folder or `agent/log/` is refused (both are tabd's), and
/// the marker in a note anywhere else changes nothing — the person's note stays untouched.
#[test]
fn a_role_cannot_forge_the_marker_into_a_place_tabd_appends_to() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "");
    v.write_anywhere("delivery");
    let day = today();
    let mine = format!("daily/{day}.md");
    v.write(&mine, "# Today\n\nmy own words\n");
    let forged = format!("---\ntabd: run-log\n---\n# {day}\n\n");
    let calls = [
        (
            "f1",
            "write_file",
            json!({"path": "daily/2099-01-01.md", "content": forged}),
        ),
        (
            "f2",
            "write_file",
            json!({"path": format!("agent/log/{day}.md"), "content": forged}),
        ),
        (
            "f3",
            "write_file",
            json!({"path": "notes/template.md", "content": forged}),
        ),
        (
            "f4",
            "move_file",
            json!({"from": "notes/template.md", "to": "daily/2099-01-02.md"}),
        ),
        (
            "f5",
            "move_file",
            json!({"from": "notes/template.md", "to": "Agent/Log/2099-01-02.md"}),
        ),
        ("f6", "write_file", json!({"path": mine, "content": forged})),
    ];
    fake.script([
        wire::tools(KIND, Some("Making the log mine."), &calls),
        wire::text(KIND, "Done."),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    for (id, text, is_error) in &results {
        if id == "f3" {
            assert!(!is_error, "a note elsewhere is the role's to write: {text}");
        } else {
            assert!(
                *is_error && text.contains("tabd's own"),
                "{id} must be refused: {text}"
            );
        }
    }
    assert_eq!(results.len(), 6);
    assert!(!v.path("daily/2099-01-01.md").exists() && !v.path("daily/2099-01-02.md").exists());
    assert_eq!(v.read(&mine), "# Today\n\nmy own words\n");
    let log = v.read(&format!("agent/log/{day}.md"));
    assert!(log.contains("Delivery Manager · manual"), "{log}");
}

/// `[log] folder` moves the log: the run's section, its Undo line and events go there; `tabd
/// logs` and `tabd status` read it there; a role cannot write it in any spelling, and `daily/`
/// is the person's again. A folder that would meet tabd's other places is a config error at its
/// line.
#[test]
fn the_log_folder_is_a_config_key_every_reader_and_protection_follows() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "[log]\nfolder = \"Logs/tabd\"\n");
    v.write_anywhere("delivery");
    let calls = [
        (
            "w1",
            "write_file",
            json!({"path": "daily/journal.md", "content": "mine"}),
        ),
        (
            "w2",
            "write_file",
            json!({"path": "logs/TABD/x.md", "content": "forged"}),
        ),
    ];
    fake.script([
        wire::tools(KIND, Some("Writing."), &calls),
        wire::text(KIND, "Done."),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    assert!(!results[0].2, "daily/ is the person's now: {:?}", results[0]);
    assert!(
        results[1].2 && results[1].1.contains("tabd's own"),
        "{:?}",
        results[1]
    );
    let log = v.read(&format!("Logs/tabd/{}.md", today()));
    assert!(
        log.contains("Delivery Manager · manual") && log.contains("Undo: `tabd undo "),
        "{log}"
    );
    assert!(!v.path(&format!("daily/{}.md", today())).exists());
    assert!(stdout(&v.tabd(&["logs"])).contains("Delivery Manager · manual"));
    let json: serde_json::Value = serde_json::from_slice(&v.tabd(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["log"]["folder"], "Logs/tabd");
    for (folder, says) in [
        ("agent/inbox/log", "agent/inbox"),
        (".logs", "hidden"),
        ("../log", "inside the vault"),
    ] {
        v.use_model(&fake, KIND, &format!("[log]\nfolder = \"{folder}\"\n"));
        let out = v.tabd(&["validate"]);
        let said = describe(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(
            said.contains("config.toml:8:") && said.contains(says),
            "{folder}: {said}"
        );
    }
}

/// Obsidian's Daily Notes in `daily/`, the log folder: tabd makes no note there (Obsidian would
/// open it as the person's journal), logs in `agent/log/`, and `validate` says the config lines
/// that keep them apart. Settings that are garbage, huge or odd are a warning; runs go on.
#[test]
fn daily_notes_settings_are_read_and_garbage_is_only_a_warning() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "");
    v.write(
        ".obsidian/daily-notes.json",
        r#"{"folder": "daily", "format": "YYYY-MM-DD", "template": "t"}"#,
    );
    let out = fire(&v, &fake);
    assert!(
        !v.path(&format!("daily/{}.md", today())).exists(),
        "{}",
        v.listing()
    );
    assert!(v
        .read(&format!("agent/log/{}.md", today()))
        .contains("Delivery Manager · manual"));
    assert!(
        stderr(&out).contains("Obsidian's Daily Notes keep your notes in daily/"),
        "{}",
        describe(&out)
    );
    let said = stdout(&v.tabd(&["validate"]));
    assert!(
        said.contains(".obsidian/daily-notes.json: warning: ")
            && said.contains("add to ")
            && said.contains(":\n  [log]\n  folder = \"tabd-log\""),
        "{said}"
    );
    let huge = format!("{{\"folder\": \"{}\"}}", "d".repeat(200_000));
    let deep = "[".repeat(50_000);
    for (garbage, says) in [
        ("{\"folder\": ", "not JSON"),
        (deep.as_str(), "not JSON"),
        ("[\"daily\"]", "not a JSON object"),
        ("{\"folder\": 42}", "`folder` is a number"),
        ("{\"folder\": \"daily\\u001b[2J\"}", "control characters"),
        (huge.as_str(), "more than Daily Notes' settings ever take"),
    ] {
        v.write(".obsidian/daily-notes.json", garbage);
        let out = v.tabd(&["validate"]);
        assert_eq!(out.status.code(), Some(0), "{says}: {}", describe(&out));
        assert!(stdout(&out).contains(says), "{says}: {}", describe(&out));
    }
    std::fs::write(v.path(".obsidian/daily-notes.json"), [0xff, 0xfe, 0, 1]).unwrap();
    fire(&v, &fake);
    assert!(v
        .read(&format!("daily/{}.md", today()))
        .contains("Delivery Manager · manual"));
}

/// Issue 48: `init` on a tabd vault (its folders at the root) whose Obsidian Daily Notes keep the
/// person's notes in `daily/`, where the log goes: the log moves apart for that vault alone, in its
/// own `[vaults."…"]` table of the config; a second vault's `init` changes nothing of the first's,
/// and each vault's status says its own log folder.
#[test]
fn init_keeps_the_log_apart_for_that_vault_only() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "");
    v.write(".obsidian/daily-notes.json", r#"{"folder":"daily/"}"#);
    let config = v.root().with_file_name("new-config.toml");
    let init = |vault: &std::path::Path| {
        v.command_with_config(&config, &["init", vault.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let root = std::fs::canonicalize(v.root()).unwrap();
    let out = init(&root);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stdout(&out).contains("tabd's run log goes to tabd-log/"),
        "{}",
        describe(&out)
    );
    let first = std::fs::read_to_string(&config).unwrap();
    assert!(
        first.contains(&format!("vault = \"{}\"", root.display())),
        "{first}"
    );
    assert!(
        first.contains(&format!("[vaults.\"{}\"]\nlog = \"tabd-log\"", root.display())),
        "{first}"
    );
    assert!(!first.contains("[log]"), "never every vault's log: {first}");

    let second = v.root().with_file_name("second-vault");
    let out = init(&second);
    assert!(out.status.success(), "{}", describe(&out));
    let after = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        after, first,
        "the second vault's init changed nothing of the first's"
    );
    let log_of = |vault: &std::path::Path| {
        let out = v
            .command_on(&config, vault, &["status", "--json"])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["log"]["folder"].as_str().unwrap().to_string()
    };
    assert_eq!(log_of(&root), "tabd-log");
    assert_eq!(log_of(&second), "daily");
}

/// One `## Events` heading a day (issue 39, item 8): runs and event lines in turn — a note that
/// cannot be read is an event line — leave one heading, the note's last section, every event
/// under it and every run's section before it.
#[test]
fn a_day_of_runs_and_events_has_one_events_heading() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, "");
    fake.respond_with(|_, _| wire::text(KIND, "Nothing to change."));
    for n in 0..3 {
        std::fs::create_dir_all(v.path("agent/inbox/delivery")).unwrap();
        std::fs::write(
            v.path(&format!("agent/inbox/delivery/bad-{n}.md")),
            [0xff, 0xfe, 0, 0x9f],
        )
        .unwrap();
        let _ = v.tabd(&["fire", "delivery"]);
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    let log = v.read(&format!("daily/{}.md", today()));
    assert_eq!(log.matches("## Events").count(), 1, "{log}");
    let events = &log[log.find("## Events").unwrap()..];
    assert_eq!(events.matches("cannot be read").count(), 3, "{log}");
    assert!(
        !events.contains("\n## "),
        "a run's section after the events: {log}"
    );
    assert!(log.matches("· Delivery Manager · manual").count() >= 3, "{log}");
}
