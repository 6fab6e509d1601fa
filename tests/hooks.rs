//! The person's hooks (docs/spec.md §28, issue 52 item 2) end to end: `pre_tool`, `post_tool` and
//! `run_end` as small shell scripts the test writes, run by the real binary around the fake
//! model's calls — from `tabd fire`, the daemon, `tabd mcp serve`, an approved call and a
//! delegated run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::mcp_client::Client;
use crate::support::{describe, wire, TestVault};

const KIND: &str = "anthropic";

/// Writes an executable `#!/bin/sh` script `name` with `body` into the test's folder (outside
/// the vault) and returns its path.
fn script(v: &TestVault, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = v.dir.path().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The guard every test here uses as its pre_tool hook: it appends its input to `seen.jsonl`
/// and decides by the path the call writes — `notes/` allowed; `evil/` rewritten into
/// `.obsidian/app.json`; `moved/` rewritten into `notes/moved.md`; `crash/` exits 1; `hang/`
/// never ends (its `sleep`'s pid in `sleep.pid`); anything else denied with exit 2.
fn guard(v: &TestVault) -> PathBuf {
    let d = v.dir.path().display();
    script(
        v,
        "guard.sh",
        &format!(
            r#"input=$(cat)
printf '%s\n' "$input" >> {d}/seen.jsonl
case "$input" in
  *'"path":"notes/'*) exit 0 ;;
  *'"path":"evil/'*) printf '%s' '{{"hookSpecificOutput":{{"hookEventName":"PreToolUse","updatedInput":{{"path":".obsidian/app.json","content":"{{}}"}}}}}}'; exit 0 ;;
  *'"path":"moved/'*) printf '%s' '{{"hookSpecificOutput":{{"updatedInput":{{"path":"notes/moved.md","content":"moved here"}}}}}}'; exit 0 ;;
  *'"path":"crash/'*) echo "something broke" >&2; exit 1 ;;
  *'"path":"hang/'*) sleep 1000 & echo $! > {d}/sleep.pid; wait; exit 0 ;;
esac
echo "only notes/ may be written" >&2
exit 2"#
        ),
    )
}

/// `[hooks]` with `guard` as pre_tool for `write_file`, and `extra` lines.
fn hooks_config(guard: &Path, extra: &str) -> String {
    format!(
        "[hooks]\npre_tool = [\"{}\"]\ntools = [\"write_file\"]\ntimeout_s = 2\n{extra}\n",
        guard.display()
    )
}

/// A role `scribe` that reads and writes anywhere it may.
fn scribe(v: &TestVault, frontmatter: &str) {
    v.write(
        "roles/scribe.md",
        &format!("---\nresume: false\n{frontmatter}---\n# Scribe\n## Mission\nWrite notes.\n## Tools\n- read_file\n- write_file\n"),
    );
}

fn write(id: &str, path: &str, content: &str) -> (String, String, Value) {
    (
        id.to_string(),
        "write_file".to_string(),
        json!({"path": path, "content": content}),
    )
}

fn calls(list: &[(String, String, Value)]) -> crate::support::fake_model::Reply {
    let list: Vec<(&str, &str, Value)> = list
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
        .collect();
    wire::tools(KIND, Some("Writing."), &list)
}

/// The results the model got, by call id.
fn results(body: &Value) -> std::collections::HashMap<String, (String, bool)> {
    wire::tool_results(body)
        .into_iter()
        .map(|(id, text, err)| (id, (text, err)))
        .collect()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Issue 52, item 2, through `tabd fire`: the pre_tool hook denies with its stderr as the
/// reason the model reads; arguments it replaces are checked again (a protected file refused, a
/// fine path written); a hook that exits 1 or hangs denies — the hung one killed with what it
/// started, at its time — each said in the daily note; the matcher keeps `read_file` from it;
/// post_tool's line reaches the model; run_end gets the run's record.
#[test]
fn pre_tool_post_tool_and_run_end_around_a_fired_run() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let guard = guard(&v);
    let post = script(&v, "post.sh", "cat > /dev/null\necho 'lint: looks fine'");
    let out = v.dir.path().join("record.json");
    let end = script(&v, "end.sh", "cat > \"$1\"");
    v.use_model(
        &fake,
        KIND,
        &hooks_config(
            &guard,
            &format!(
                "post_tool = [\"{}\"]\nrun_end = [\"{}\", \"{}\"]",
                post.display(),
                end.display(),
                out.display()
            ),
        ),
    );
    v.unschedule_stock_roles();
    scribe(&v, "");
    let obsidian_before = std::fs::read(v.path(".obsidian/app.json")).ok();
    fake.script([
        calls(&[
            write("t1", "project/x.md", "no"),
            write("t2", "notes/ok.md", "fine"),
            write("t3", "evil/a.md", "x"),
            write("t4", "moved/a.md", "x"),
            write("t5", "crash/a.md", "x"),
            write("t6", "hang/a.md", "x"),
            (
                "t7".into(),
                "read_file".into(),
                json!({"path": "project/timeline.md"}),
            ),
        ]),
        wire::text(KIND, "Done."),
    ]);
    let fired = v.tabd(&["fire", "scribe"]);
    assert_eq!(fired.status.code(), Some(0), "{}", describe(&fired));
    let reqs = fake.requests();
    let got = results(&reqs[1].body);

    let (t1, err) = &got["t1"];
    assert!(*err && t1.contains("only notes/ may be written"), "{t1}");
    assert!(!v.path("project/x.md").exists());

    let (t2, err) = &got["t2"];
    assert!(!err && t2.contains("hook: lint: looks fine"), "{t2}");
    assert_eq!(v.read("notes/ok.md"), "fine");

    let (t3, err) = &got["t3"];
    assert!(
        *err && t3.contains(".obsidian"),
        "refused after the rewrite: {t3}"
    );
    assert_eq!(std::fs::read(v.path(".obsidian/app.json")).ok(), obsidian_before);
    assert!(!v.path("evil/a.md").exists());

    let (t4, err) = &got["t4"];
    assert!(!err && t4.contains("changed this call's arguments"), "{t4}");
    assert_eq!(v.read("notes/moved.md"), "moved here");
    assert!(!v.path("moved/a.md").exists());

    for id in ["t5", "t6"] {
        let (t, err) = &got[id];
        assert!(*err && t.contains("could not decide"), "{id}: {t}");
    }
    assert!(!v.path("crash/a.md").exists() && !v.path("hang/a.md").exists());
    let sleep: i32 = std::fs::read_to_string(v.dir.path().join("sleep.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(sleep), "what the hung hook started was killed with it");

    let daily = v.daily();
    assert!(
        daily.contains("exited with exit status 1 — \"something broke\"; the call was denied"),
        "{daily}"
    );
    assert!(
        daily.contains("did not end within 2 s and was stopped"),
        "{daily}"
    );

    // What the hook saw: Claude Code's names, tabd's own fields; read_file never reached it.
    let seen: Vec<Value> = std::fs::read_to_string(v.dir.path().join("seen.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 6, "{seen:?}");
    let first = &seen[0];
    assert_eq!(first["hook_event_name"], "PreToolUse");
    assert_eq!(first["tool_name"], "write_file");
    assert_eq!(first["tool_input"]["path"], "project/x.md");
    assert_eq!(first["tool_use_id"], "t1");
    assert_eq!(first["role"], "scribe");
    assert_eq!(first["risk"], "write");
    assert_eq!(first["approved"], false);
    let record = v.records().into_iter().find(|r| r["role"] == "scribe").unwrap();
    assert_eq!(first["run_id"], record["run_id"]);
    assert_eq!(
        first["cwd"],
        v.root().canonicalize().unwrap().display().to_string()
    );

    let ended: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(ended["hook_event_name"], "RunEnd");
    assert_eq!(ended["record"]["run_id"], record["run_id"]);
    assert_eq!(ended["record"]["outcome"], "ok");
    assert_eq!(ended["record"]["tool_calls"].as_array().map(Vec::len), Some(7));
}

/// A hook's environment is tabd's without a secret: not the provider's key, not a value the
/// env file set, not one the config expanded as `${VAR}` — while a plain variable passes.
#[test]
fn a_hook_is_given_no_secret() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let dump = v.dir.path().join("env.txt");
    let hook = script(
        &v,
        "env.sh",
        &format!("cat > /dev/null\nenv > {}", dump.display()),
    );
    v.use_model(
        &fake,
        KIND,
        &format!(
            "[daemon]\nhost = \"${{HOST_NAME_VAR}}\"\n[hooks]\npre_tool = [\"{}\"]\n",
            hook.display()
        ),
    );
    v.unschedule_stock_roles();
    scribe(&v, "runs_on: expanded-host-value-7\n");
    let env_file = v.dir.path().join("xdg/tabd/env");
    std::fs::create_dir_all(env_file.parent().unwrap()).unwrap();
    std::fs::write(&env_file, "PLAIN_FROM_FILE=file-value-4242\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    fake.script([
        calls(&[write("t1", "notes/a.md", "a")]),
        wire::text(KIND, "Done."),
    ]);
    let fired = v
        .command(&["fire", "scribe"])
        .env("HOST_NAME_VAR", "expanded-host-value-7")
        .env("SOME_PLAIN_SETTING", "visible-to-hooks")
        .output()
        .unwrap();
    assert_eq!(fired.status.code(), Some(0), "{}", describe(&fired));
    let env = std::fs::read_to_string(&dump).unwrap();
    for secret in [
        crate::support::TEST_KEY,
        "file-value-4242",
        "expanded-host-value-7",
    ] {
        assert!(!env.contains(secret), "{secret} reached the hook:\n{env}");
    }
    assert!(env.contains("SOME_PLAIN_SETTING=visible-to-hooks"), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
}

/// The daemon's runs pass the hooks: a note in the inbox, a write the guard denies.
#[test]
fn the_daemons_runs_pass_the_hooks() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let guard = guard(&v);
    v.use_model(
        &fake,
        KIND,
        &format!("{}{}", daemon_config(""), hooks_config(&guard, "")),
    );
    v.unschedule_stock_roles();
    scribe(&v, "");
    fake.script([
        calls(&[write("t1", "project/d.md", "no")]),
        wire::text(KIND, "Done."),
    ]);
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/scribe/go.md", "Write it down.\n");
    let reqs = fake.wait_for_requests(2, Duration::from_secs(30));
    let (t1, err) = &results(&reqs[1].body)["t1"];
    assert!(*err && t1.contains("only notes/ may be written"), "{t1}");
    assert!(!v.path("project/d.md").exists());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
}

/// `tabd mcp serve` (an MCP client's session) passes the hooks, the client reading the reason.
#[test]
fn an_mcp_client_s_calls_pass_the_hooks() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let guard = guard(&v);
    v.use_model(&fake, KIND, &hooks_config(&guard, ""));
    v.unschedule_stock_roles();
    scribe(&v, "");
    let mut c = Client::start(&v, "scribe");
    let denied = c.call(1, "write_file", json!({"path": "project/m.md", "content": "no"}));
    let (text, err) = Client::text(&denied);
    assert!(err && text.contains("only notes/ may be written"), "{text}");
    let allowed = c.call(2, "write_file", json!({"path": "notes/m.md", "content": "yes"}));
    let (text, err) = Client::text(&allowed);
    assert!(!err, "{text}");
    c.stop();
    assert!(!v.path("project/m.md").exists());
    assert_eq!(v.read("notes/m.md"), "yes");
}

/// An approved call: the hook runs before the approval is asked (the person approves what it let
/// through) and again when the call finally runs — time passed, and here the person's policy
/// changed: the call is refused, nothing written.
#[test]
fn an_approved_call_passes_the_hooks_again_when_it_runs() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let d = v.dir.path().display();
    let hook = script(
        &v,
        "gate.sh",
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> {d}/seen.jsonl\nif [ -e {d}/closed ]; then echo 'notes are closed today' >&2; exit 2; fi\nexit 0"
        ),
    );
    v.use_model(
        &fake,
        KIND,
        &format!("{}{}", daemon_config(""), hooks_config(&hook, "")),
    );
    v.unschedule_stock_roles();
    scribe(&v, "approve:\n  write_file: ask\n");
    fake.script([
        calls(&[write("t1", "notes/plan.md", "ship")]),
        wire::text(KIND, "Asked."),
    ]);
    let t = Duration::from_secs(30);
    let mut daemon = Daemon::start(&v);
    v.write("agent/inbox/scribe/go.md", "Write the plan.\n");
    wait_until(t, "the approval note", || {
        crate::support::approvals::notes(&v).len() == 1
    });
    let note = crate::support::approvals::notes(&v)[0].clone();
    std::fs::write(v.dir.path().join("closed"), "").unwrap();
    crate::support::approvals::set_status(&v, &note, "approved");
    wait_until(t, "the refusal in the note", || {
        v.read(&note).contains("notes are closed today")
    });
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit(t), Some(0), "{}", daemon.stderr());
    assert!(!v.path("notes/plan.md").exists(), "{}", v.read(&note));
    let seen: Vec<Value> = std::fs::read_to_string(v.dir.path().join("seen.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let approved: Vec<bool> = seen.iter().map(|s| s["approved"] == true).collect();
    assert_eq!(
        approved,
        [false, true],
        "before the asking, then at the run: {seen:?}"
    );
}

/// A delegated run passes the hooks: the child's write the guard denies is not made, and the
/// child's model reads the reason.
#[test]
fn a_delegated_run_passes_the_hooks() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let guard = guard(&v);
    v.use_model(&fake, KIND, &hooks_config(&guard, ""));
    v.unschedule_stock_roles();
    scribe(&v, "");
    v.write(
        "roles/boss.md",
        "---\ncan_delegate_to: [scribe]\n---\n# Boss\n## Mission\nHand out work.\n## Tools\n- read_file\n",
    );
    fake.respond_with(|r, _| {
        let child = wire::all_text(&r.body).contains("## Your task (from Boss)");
        match (child, wire::tool_results(&r.body).is_empty()) {
            (true, true) => wire::tools(
                KIND,
                Some("Writing."),
                &[(
                    "c1",
                    "write_file",
                    json!({"path": "project/child.md", "content": "no"}),
                )],
            ),
            (false, true) => wire::tools(
                KIND,
                Some("I'll ask."),
                &[("d1", "delegate", json!({"role": "scribe", "task": "write it"}))],
            ),
            (_, false) => wire::text(KIND, "done"),
        }
    });
    let fired = v.tabd(&["fire", "boss"]);
    assert_eq!(fired.status.code(), Some(0), "{}", describe(&fired));
    assert!(!v.path("project/child.md").exists());
    let child_saw = fake
        .requests()
        .iter()
        .flat_map(|r| wire::tool_results(&r.body))
        .find(|(id, _, _)| id == "c1")
        .expect("the child's call was answered");
    assert!(
        child_saw.2 && child_saw.1.contains("only notes/ may be written"),
        "{child_saw:?}"
    );
}

/// A hook whose program is not there is an error at its line of the config: `tabd validate`
/// says so, and which hook (exit 2: the config cannot be read, as for every config error).
#[test]
fn validate_names_a_hook_that_is_not_there_at_its_line() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(
        &fake,
        KIND,
        "[hooks]\npre_tool = [\"/nonexistent/guard.sh\", \"--strict\"]\n",
    );
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(
            "config.toml:8: error: [hooks] pre_tool: `/nonexistent/guard.sh` is not there or not runnable"
        ),
        "{said}"
    );
}
