//! tabd in the vault a person already has (issue 48, items 2 and 3; docs/spec.md §26), through the
//! real binary: `init` adds only tabd's own folder and names the vault in the config; the daemon,
//! `status`, `validate` and the tools follow tabd's folders there; a `roles/` of the person's
//! own is never read as roles; a folder with no roles is refused, not idled in.

use std::time::Duration;

use serde_json::json;

use crate::support::approvals::notes;
use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const KIND: &str = "anthropic";
const T: Duration = Duration::from_secs(30);

/// A vault shaped like a person's: Obsidian's settings and Daily Notes, a journal, their own
/// `roles/` (a note about hobbits), `Personal/` and `Templates/`.
const THEIRS: &[(&str, &str)] = &[
    (".obsidian/app.json", "{}\n"),
    (".obsidian/daily-notes.json", "{\"folder\": \"daily\"}\n"),
    ("daily/2026-11-28.md", "# Yesterday\nSlept well.\n"),
    ("roles/frodo.md", "Frodo: hobbit\n"),
    ("Personal/ideas.md", "# Ideas\n- sail\n"),
    ("Templates/daily.md", "# {{date}}\n"),
    ("README.md", "my vault's own readme\n"),
];

fn top_level(v: &TestVault) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(v.root())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `init` on it adds one name (`tabd/`, and `.tabd/`), makes no sample note, lists each file with
/// its absolute path, and writes a config that names the vault and its folder — so `validate`,
/// `status` and the daemon work without `--vault`, and a note in tabd's inbox there runs, its log
/// in `tabd/log/`, its status note in `tabd/agent/status.md`. Every note of the person's is as it
/// was; `roles/frodo.md` never became a role.
#[test]
fn init_on_a_vault_with_notes_adds_one_folder_and_everything_follows_it() {
    let v = TestVault::existing(THEIRS);
    let mut names = top_level(&v);
    names.retain(|n| {
        !THEIRS
            .iter()
            .any(|(p, _)| p.split('/').next() == Some(n.as_str()))
    });
    assert_eq!(names, [".tabd", "tabd"], "only tabd's own names were added");
    for (path, text) in THEIRS {
        assert_eq!(&v.read(path), text, "{path} is as it was");
    }
    assert!(
        !v.path("tabd/project").exists() && !v.path("tabd/memory.md").exists(),
        "no samples"
    );
    let config = std::fs::read_to_string(&v.config).unwrap();
    let root = std::fs::canonicalize(v.root()).unwrap();
    assert!(
        config.contains(&format!("vault = \"{}\"", root.display())),
        "{config}"
    );
    assert!(config.contains("folder = \"tabd\""), "{config}");

    let fake = FakeModel::start();
    v.use_model(&fake, KIND, &daemon_config(""));
    // Without --vault: the config names it.
    let validate = v.bare_command(&["validate"]).output().unwrap();
    let said = describe(&validate);
    assert!(said.contains("roles: 4 ok"), "{said}");
    assert!(
        !said.contains("frodo"),
        "the person's roles/ is not tabd's: {said}"
    );
    // The stock roles' project notes are theirs to write: not there yet, not missing.
    assert!(
        said.contains("context entry `tabd/project/scope.md` is not there yet"),
        "{said}"
    );
    assert!(!said.contains("matches no file"), "{said}");
    assert!(said.contains("0 errors, 0 warnings"), "{said}");
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                KIND,
                Some("Noting it."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "tabd/project/call.md", "content": "Call on Friday.\n"}),
                )],
            )
        } else {
            wire::text(KIND, "Noted.")
        }
    });
    let _d = Daemon::start_command(&v, v.bare_command(&["run"]));
    v.write("tabd/agent/inbox/delivery/call.md", "The call moved to Friday.\n");
    wait_until(T, "the note handled", || {
        v.files_in("tabd/agent/inbox/delivery/processed") == ["call.md"]
    });
    wait_until(T, "the run's log in tabd/log/", || {
        v.files_in("tabd/log")
            .iter()
            .any(|f| v.read(&format!("tabd/log/{f}")).contains("Noted."))
    });
    wait_until(T, "the status note in tabd/agent/", || {
        v.path("tabd/agent/status.md").exists()
    });
    assert_eq!(v.read("tabd/project/call.md"), "Call on Friday.\n");
    assert!(!v.path("agent").exists(), "nothing at the root's agent/");
    let status = v.bare_command(&["status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", describe(&status));
    assert!(stdout(&status).contains("delivery"), "{}", describe(&status));
    for (path, text) in THEIRS {
        assert_eq!(&v.read(path), text, "{path} is as it was after a run");
    }
}

/// Under tabd's folder its places are protected as at the root: a role cannot write the roles,
/// the approvals, the log or the status there, while the person's own `roles/` and `daily/` at
/// the root are plain notes of theirs (a change to one waits for approval, it is not "tabd's").
#[test]
fn tabds_places_are_protected_where_they_moved() {
    let v = TestVault::existing(THEIRS);
    let fake = FakeModel::start();
    v.use_model(&fake, KIND, &daemon_config(""));
    v.write(
        "tabd/roles/ops.md",
        "---\nresume: false\n---\n# Ops\n## Mission\nTry.\n## Tools\n- write_file\n",
    );
    let calls = [
        (
            "a",
            "write_file",
            json!({"path": "tabd/roles/delivery.md", "content": "x"}),
        ),
        (
            "b",
            "write_file",
            json!({"path": "tabd/agent/approvals/x.md", "content": "x"}),
        ),
        (
            "c",
            "write_file",
            json!({"path": "tabd/log/2099-01-01.md", "content": "x"}),
        ),
        (
            "d",
            "write_file",
            json!({"path": "tabd/agent/status.md", "content": "x"}),
        ),
        (
            "e",
            "write_file",
            json!({"path": "tabd/agent/inbox/risk/x.md", "content": "x"}),
        ),
        (
            "f",
            "write_file",
            json!({"path": "roles/frodo.md", "content": "x"}),
        ),
        (
            "g",
            "write_file",
            json!({"path": "tabd/notes/mine.md", "content": "x"}),
        ),
    ];
    fake.script([wire::tools(KIND, None, &calls), wire::text(KIND, "Done.")]);
    let out = v.bare_command(&["fire", "ops"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    for (id, text, is_error) in &results {
        match id.as_str() {
            "f" => assert!(
                text.contains("queued for approval"),
                "the person's note asks: {text}"
            ),
            "g" => assert!(!is_error, "a new note of its own: {text}"),
            _ => assert!(*is_error && text.starts_with("refused"), "{id}: {text}"),
        }
    }
    assert_eq!(notes_in(&v).len(), 1);
    assert_eq!(v.read("roles/frodo.md"), "Frodo: hobbit\n");
}

fn notes_in(v: &TestVault) -> Vec<String> {
    v.files_in("tabd/agent/approvals")
        .into_iter()
        .filter(|f| f.ends_with(".md"))
        .collect()
}

/// A `roles/` of tabd's (the root layout) that holds a note that is not a role: it is named by
/// `validate`, never loaded, and gets no inbox.
#[test]
fn a_note_that_is_not_a_role_is_named_and_left_alone() {
    let v = TestVault::new();
    v.write("roles/frodo.md", "Frodo: hobbit\n");
    let out = v.tabd(&["validate"]);
    let said = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("roles/frodo.md: warning: this note is not a role"),
        "{said}"
    );
    assert!(said.contains("roles: 4 ok"), "{said}");
    let schedule = stdout(&v.tabd(&["schedule", "--json"]));
    assert!(!schedule.contains("frodo"), "{schedule}");
    assert!(notes(&v).is_empty());
}

/// `tabd run` on a folder with no roles refuses, names `tabd init`, and writes nothing there;
/// `run --init` sets tabd up; run again with `--init`, it says why it made nothing.
#[test]
fn run_without_roles_refuses_and_run_init_says_what_it_did() {
    let v = TestVault::existing(THEIRS);
    let empty = v.dir.path().join("no-roles");
    std::fs::create_dir_all(empty.join("Notes")).unwrap();
    std::fs::write(empty.join("Notes/a.md"), "mine\n").unwrap();
    let run = |args: &[&str]| {
        let mut cmd = v.bare_command(args);
        cmd.arg("--vault").arg(&empty);
        cmd
    };
    let out = run(&["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = describe(&out);
    assert!(
        said.contains("has no roles to run") && said.contains("tabd init"),
        "{said}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&empty)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["Notes"], "nothing written: {said}");

    // --init sets it up, says what it made, and the daemon starts there.
    let fake = FakeModel::start();
    v.use_model(&fake, KIND, &daemon_config(""));
    let d = Daemon::start_command(&v, run(&["run", "--init"]));
    assert!(d.stderr().contains("--init: set tabd up in"), "{}", d.stderr());
    assert!(empty.join("tabd/roles/delivery.md").is_file());
    drop(d);
    let again = Daemon::start_command(&v, run(&["run", "--init"]));
    let said = again.stderr();
    assert!(
        said.contains("tabd is set up in") && said.contains("nothing to create"),
        "{said}"
    );
}

/// `init` again, on a vault the config names in another spelling (`~/vault`, as a person writes
/// it): the config already has its table, so none is added beside it — a second table for the
/// same vault would silently win over the person's own, and their later change to it would do
/// nothing.
#[test]
fn init_again_adds_no_second_table_for_a_vault_named_with_a_tilde() {
    let v = TestVault::existing(THEIRS);
    std::fs::write(
        &v.config,
        "timezone = \"UTC\"\nvault = \"~/vault\"\n\n[vaults.\"~/vault\"]\nfolder = \"tabd\"\nlog = \"tabd/log\"\n",
    )
    .unwrap();
    let out = v
        .bare_command(&["init", v.root().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let config = std::fs::read_to_string(&v.config).unwrap();
    assert_eq!(config.matches("[vaults.").count(), 1, "{config}");
    // The person moves the log in their own table: it moves.
    std::fs::write(
        &v.config,
        config.replace("log = \"tabd/log\"", "log = \"tabd/runs\""),
    )
    .unwrap();
    let out = v.bare_command(&["status", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(json["log"]["folder"], "tabd/runs", "{}", describe(&out));
}

/// A config kept elsewhere and linked into place (a dotfiles repository): `init` writes into the
/// file the link leads to and leaves the link a link.
#[test]
fn init_writes_through_a_linked_config_and_keeps_the_link() {
    let v = TestVault::existing(THEIRS);
    let kept = v.root().with_file_name("dotfiles-config.toml");
    std::fs::rename(&v.config, &kept).unwrap();
    std::os::unix::fs::symlink(&kept, &v.config).unwrap();
    let second = v.root().with_file_name("second");
    std::fs::create_dir_all(second.join("Notes")).unwrap();
    std::fs::write(second.join("Notes/a.md"), "mine\n").unwrap();
    let out = v
        .bare_command(&["init", second.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        std::fs::symlink_metadata(&v.config)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is still a link"
    );
    let second = std::fs::canonicalize(&second).unwrap();
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(
        text.contains(&format!("[vaults.\"{}\"]", second.display())),
        "{text}"
    );
}
