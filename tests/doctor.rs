//! Issue 52, item 3: `tabd doctor` (docs/spec.md §28) — what a working setup needs, one line each,
//! exit 1 when something must be fixed. A good setup first (the key in the env file, the unit
//! `tabd service install` writes, a webhook), then one broken thing at a time: each is named as
//! the one check to fix.
//!
//! The fake model answers the key check and stands for the webhook's server too (`/hook`
//! accepts, `/refuse` answers 403); `systemctl` is the stand-in `tests/service.rs` writes.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::service::fake_systemctl;
use crate::support::daemon::{wait_until, Daemon};
use crate::support::fake_model::{canned, FakeModel, Reply};
use crate::support::nats::Nats;
use crate::support::{describe, stdout, wire, TestVault, TEST_KEY};
use tabd::capabilities::cluster::Cluster;
use tabd::setup::config::cluster::{ClusterConfig, WhenAlone};

/// Every check, in the order doctor says them (the JSON's `name`s, for scripts).
const CHECKS: [&str; 12] = [
    "config",
    "roles",
    "key",
    "env_file",
    "unit",
    "notify",
    "cluster",
    "landlock",
    "clock",
    "daily_notes",
    "disk",
    "overdue",
];

/// What this machine decides, not the setup: a kernel without Landlock, a clock nothing keeps
/// in step (a VM without NTP), a fuller disk are warnings here; never a fix in these tests.
const THIS_MACHINE: [&str; 3] = ["landlock", "clock", "disk"];

/// A setup that works: the fake model as the provider, the key in the env file (0600) and not
/// in the shell, the unit `tabd service install` wrote for this binary and vault, a webhook that
/// takes what it is sent. `extra` goes into the config.
struct Setup {
    v: TestVault,
    fake: FakeModel,
    /// PATH with the stand-in `systemctl` first.
    path_var: String,
}

fn good_with(extra: &str) -> Setup {
    let fake = FakeModel::start();
    fake.respond_with(|req, _| match req.path.as_str() {
        "/hook" => Reply::ok(json!({})),
        "/refuse" => Reply::status(403, json!({"error": "forbidden"})),
        _ => wire::text("anthropic", "pong"),
    });
    let v = TestVault::new();
    v.use_model(
        &fake,
        "anthropic",
        &format!("[notify]\nwebhook = \"{}/hook\"\n{extra}", fake.anthropic_url()),
    );
    let (path_var, _calls) = fake_systemctl(&v, "");
    let out = v
        .command(&["service", "install"])
        .env("PATH", &path_var)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // As a person has it: the key where the service reads it, not in the shell.
    v.with_key.set(false);
    std::fs::write(env_file(&v), format!("ANTHROPIC_API_KEY={TEST_KEY}\n")).unwrap();
    Setup { v, fake, path_var }
}

fn good() -> Setup {
    good_with("")
}

fn env_file(v: &TestVault) -> std::path::PathBuf {
    v.dir.path().join("xdg/tabd/env")
}

fn unit_file(v: &TestVault) -> std::path::PathBuf {
    v.dir.path().join("xdg/systemd/user/tabd.service")
}

/// `tabd doctor --json ARGS`: its output and the JSON it printed.
fn doctor(s: &Setup, args: &[&str]) -> (Output, Value) {
    doctor_of(&s.v, &s.path_var, args)
}

fn doctor_of(v: &TestVault, path_var: &str, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(args);
    let out = v.command(&all).env("PATH", path_var).output().unwrap();
    let json =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", describe(&out)));
    (out, json)
}

/// The check named `name`: its status and message.
fn check(json: &Value, name: &str) -> (String, String) {
    let c = json["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name}: {json:#}"));
    (
        c["status"].as_str().unwrap().to_string(),
        c["message"].as_str().unwrap().to_string(),
    )
}

/// The names of the checks to fix.
fn fixes(json: &Value) -> Vec<String> {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fix")
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// Exit 1, and `name` is the one check to fix, with `says` in its message.
fn only_to_fix(out: &Output, json: &Value, name: &str, says: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", describe(out));
    assert_eq!(fixes(json), [name], "{json:#}");
    assert_eq!(json["must_fix"], 1, "{json:#}");
    let (_, message) = check(json, name);
    assert!(message.contains(says), "{name}: {message}");
}

fn model_requests(fake: &FakeModel) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .map(|r| r.body)
        .collect()
}

/// A good setup: exit 0, each check ok or skipped (this machine's own may warn), the key tried
/// with one tiny request, a test push only because it was asked for; and the JSON's shape.
#[test]
fn a_good_setup_is_all_ok_and_the_json_has_its_shape() {
    let s = good();
    let (out, json) = doctor(&s, &["--push"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let mut keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["checks", "must_fix"]);
    assert_eq!(json["must_fix"], 0);
    let checks = json["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS);
    for c in checks {
        let mut fields: Vec<&String> = c.as_object().unwrap().keys().collect();
        fields.sort();
        assert_eq!(fields, ["message", "name", "status"], "{c}");
        let status = c["status"].as_str().unwrap();
        let allowed: &[&str] = if THIS_MACHINE.contains(&c["name"].as_str().unwrap()) {
            &["ok", "warning", "skipped"]
        } else {
            &["ok", "skipped"]
        };
        assert!(allowed.contains(&status), "{c}");
        assert!(!c["message"].as_str().unwrap().contains('\n'), "one line: {c}");
    }
    for name in [
        "config",
        "roles",
        "key",
        "env_file",
        "unit",
        "notify",
        "daily_notes",
    ] {
        assert_eq!(check(&json, name).0, "ok", "{name}: {json:#}");
    }
    assert_eq!(check(&json, "cluster").0, "skipped");
    assert_eq!(check(&json, "overdue").0, "skipped", "nothing on record yet");
    let (_, key) = check(&json, "key");
    assert!(
        key.contains("(one request to the provider, a few tokens)"),
        "{key}"
    );
    // The one request: a word, one token back, the key from the env file.
    let asked = s.fake.requests();
    let model: Vec<_> = asked.iter().filter(|r| r.path == "/v1/messages").collect();
    assert_eq!(model.len(), 1, "{asked:?}");
    assert_eq!(model[0].body["max_tokens"], 1);
    assert!(model[0]
        .body
        .get("tools")
        .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)));
    assert_eq!(model[0].headers["x-api-key"], TEST_KEY);
    let pushes: Vec<_> = asked.iter().filter(|r| r.path == "/hook").collect();
    assert_eq!(pushes.len(), 1, "{asked:?}");
    assert_eq!(pushes[0].body["event"], "test");
    let printed = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!printed.contains(TEST_KEY), "{printed}");

    // The same as lines a person reads: one a check, then the count.
    let out =
        s.v.command(&["doctor", "--offline"])
            .env("PATH", &s.path_var)
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), CHECKS.len() + 1, "{text}");
    for (line, name) in lines.iter().zip(CHECKS) {
        let (word, rest) = line.split_once(' ').unwrap();
        assert!(["ok", "warning", "skipped"].contains(&word), "{line}");
        assert!(rest.trim_start().starts_with(&format!("{name}: ")), "{line}");
    }
    assert!(lines[CHECKS.len()].starts_with("0 to fix"), "{text}");
    assert_eq!(
        model_requests(&s.fake).len(),
        1,
        "--offline asks nothing of the network"
    );
}

/// As every command: a config it cannot read, or flags that contradict, exit 2.
#[test]
fn a_config_error_or_contradicting_flags_exit_2() {
    let s = good();
    let out = s.v.tabd(&["doctor", "--push", "--offline"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let config = std::fs::read_to_string(&s.v.config).unwrap();
    std::fs::write(
        &s.v.config,
        format!("{config}\n[limits]\nmax_tool_calls = \"many\"\n"),
    )
    .unwrap();
    let out = s.v.tabd(&["doctor", "--offline"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config.toml:11: error:"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_role_file_with_an_error_is_to_fix() {
    let s = good();
    s.v.write("roles/broken.md", "---\nmax_tool_calls: many\n---\n# Broken\n");
    let (out, json) = doctor(&s, &["--offline"]);
    only_to_fix(&out, &json, "roles", "roles/broken.md");
    assert!(check(&json, "roles").1.contains("`tabd validate` lists each"));
}

/// No key anywhere: said as `validate` says it, and no request is made to learn it.
#[test]
fn a_missing_key_is_to_fix_without_asking_the_provider() {
    let s = good();
    std::fs::write(env_file(&s.v), "# no key yet\n").unwrap();
    let (out, json) = doctor(&s, &[]);
    only_to_fix(&out, &json, "key", "ANTHROPIC_API_KEY is not set");
    assert!(model_requests(&s.fake).is_empty());
}

/// The provider refuses the key (401): to fix, from the one request. A provider out of reach
/// says nothing of the key: a warning.
#[test]
fn a_key_the_provider_rejects_is_to_fix_and_an_unreachable_provider_is_a_warning() {
    let s = good();
    s.fake.script([Reply::status(
        401,
        canned::anthropic_error("authentication_error", "invalid x-api-key"),
    )]);
    let (out, json) = doctor(&s, &[]);
    only_to_fix(&out, &json, "key", "401");
    assert!(check(&json, "key").1.contains("was rejected"), "{json:#}");
    assert_eq!(model_requests(&s.fake).len(), 1, "one request, not retried");

    let port = crate::support::nats::free_port();
    let config = std::fs::read_to_string(&s.v.config).unwrap();
    let moved = config.replace(&s.fake.anthropic_url(), &format!("http://127.0.0.1:{port}"));
    std::fs::write(&s.v.config, moved).unwrap();
    let (out, json) = doctor(&s, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (status, message) = check(&json, "key");
    assert_eq!(status, "warning", "{message}");
    assert!(message.contains("cannot reach"), "{message}");
}

#[test]
fn an_env_file_others_can_read_is_to_fix() {
    let s = good();
    std::fs::set_permissions(env_file(&s.v), std::fs::Permissions::from_mode(0o644)).unwrap();
    let (out, json) = doctor(&s, &["--offline"]);
    only_to_fix(&out, &json, "env_file", "chmod 600");
    assert!(check(&json, "env_file").1.contains("mode 644"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(TEST_KEY));
}

/// The unit runs another binary (moved, or upgraded elsewhere), one that is gone, or another
/// vault: each is to fix, with `tabd service install` again as the way.
#[test]
fn a_unit_that_runs_another_binary_or_vault_is_to_fix() {
    let s = good();
    let written = std::fs::read_to_string(unit_file(&s.v)).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_tabd")).unwrap();
    let exe = format!("\"{}\"", exe.display());
    assert!(written.contains(&exe), "{written}");
    for (instead, says) in [
        ("\"/bin/true\"", "not this tabd"),
        ("\"/nowhere/tabd\"", "which is not there"),
    ] {
        std::fs::write(unit_file(&s.v), written.replace(&exe, instead)).unwrap();
        let (out, json) = doctor(&s, &["--offline"]);
        only_to_fix(&out, &json, "unit", says);
        assert!(check(&json, "unit").1.contains("`tabd service install` again"));
    }
    let root = std::fs::canonicalize(s.v.root()).unwrap();
    let elsewhere = s.v.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let other = written.replace(
        &format!("\"{}\"", root.display()),
        &format!("\"{}\"", elsewhere.display()),
    );
    assert_ne!(other, written, "the unit names the vault: {written}");
    std::fs::write(unit_file(&s.v), other).unwrap();
    let (out, json) = doctor(&s, &["--offline"]);
    only_to_fix(&out, &json, "unit", "not on this vault");
}

/// Obsidian's Daily Notes in the log's folder: the log goes elsewhere day by day, and the
/// config line that keeps them apart is the fix.
#[test]
fn daily_notes_in_the_logs_folder_are_to_fix() {
    let s = good();
    s.v.write(".obsidian/daily-notes.json", r#"{"folder": "daily"}"#);
    let (out, json) = doctor(&s, &["--offline"]);
    only_to_fix(&out, &json, "daily_notes", "[log]");
}

/// A webhook that refuses is found by the test push — sent only with `--push`, since it reaches
/// the person.
#[test]
fn a_webhook_that_refuses_the_test_push_is_to_fix() {
    let s = good_with("");
    let config = std::fs::read_to_string(&s.v.config).unwrap();
    std::fs::write(&s.v.config, config.replace("/hook", "/refuse")).unwrap();
    let (out, json) = doctor(&s, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(check(&json, "notify").1.contains("--push"), "{json:#}");
    assert!(
        !s.fake.requests().iter().any(|r| r.path == "/refuse"),
        "no push unasked"
    );
    let (out, json) = doctor(&s, &["--push"]);
    only_to_fix(&out, &json, "notify", "HTTP 403");
    let pushes = s.fake.requests().iter().filter(|r| r.path == "/refuse").count();
    assert_eq!(pushes, 1, "one try, no retry");
}

/// A vault whose `hourly` role had its first slot taken by a daemon whose clock stood two days
/// back, then stopped: its ledger says two days ago. The clock offset's file is returned.
fn hourly_two_days_ago() -> (TestVault, FakeModel, std::path::PathBuf) {
    let (v, fake) = crate::support::daemon::setup("");
    v.write(
        "roles/hourly.md",
        "# Hourly\n## Mission\nLook around.\n## Schedule\nevery hour\n",
    );
    let offset = v.dir.path().join("clock-offset");
    std::fs::write(&offset, "-172800").unwrap();
    let mut d = Daemon::start_with_env(&v, &[("TABD_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())]);
    wait_until(Duration::from_secs(20), "the hourly role's ledger", || {
        v.state()["roles"]["hourly"]["last_slot"].is_string()
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
    (v, fake, offset)
}

/// A role whose slot passed while no tabd ran: a daemon whose clock stood two days back took
/// its first slot then (its ledger), and none ran since. Started again at the real time it
/// catches up, and the role is on time.
#[test]
fn a_role_that_missed_its_slot_is_to_fix_until_the_daemon_runs_it() {
    let (v, fake, offset) = hourly_two_days_ago();
    let path_var = std::env::var("PATH").unwrap_or_default();
    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    only_to_fix(&out, &json, "overdue", "hourly missed its slot of");
    let (_, said) = check(&json, "overdue");
    assert!(said.contains("no run of it is on record"), "{said}");
    assert!(said.contains("no tabd runs for this vault"), "{said}");

    // At the real time the daemon catches the newest slot up, and the role is on time again.
    std::fs::write(&offset, "0").unwrap();
    let mut d = Daemon::start_with_env(&v, &[("TABD_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())]);
    let recent = chrono::Utc::now() - chrono::Duration::hours(2);
    wait_until(Duration::from_secs(20), "the catch-up recorded", || {
        v.state()["roles"]["hourly"]["last_slot"]
            .as_str()
            .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
            .is_some_and(|t| t > recent)
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(Duration::from_secs(20)), Some(0), "{}", d.stderr());
    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (status, said) = check(&json, "overdue");
    assert_eq!(status, "ok", "{said}");
    assert!(said.contains("none missed a slot"), "{said}");
    drop(fake);
}

/// With `[cluster]`: a quorum takes the probe's write (ok, the devices' heartbeats named) —
/// beside this device's running daemon, whose heartbeat doctor leaves alone (the daemon never
/// sees its name taken twice); two servers of three down, none takes it: to fix.
#[test]
fn with_a_cluster_doctor_asks_a_quorum_to_take_a_write() {
    let Some(mut nats) = Nats::three("doctor_asks_a_quorum") else {
        return;
    };
    let s = good_with(&nats.config("laptop", 3, ""));
    let d = Daemon::start(&s.v);
    // An observer of the heartbeats, under a name of its own.
    let observer = ClusterConfig {
        nats: nats.urls(),
        creds: None,
        device: "observer".into(),
        lease: Duration::from_secs(3),
        when_alone: WhenAlone::Skip,
        key: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let vault = s.v.root().file_name().unwrap().to_string_lossy().into_owned();
    let c = rt.block_on(Cluster::connect(&observer, &vault)).unwrap();
    let laptop_after = |t: chrono::DateTime<chrono::Utc>| {
        rt.block_on(c.devices())
            .unwrap_or_default()
            .iter()
            .any(|seen| seen.device == "laptop" && seen.last_heartbeat > t)
    };
    // READY comes before the daemon's first heartbeat: doctor names what the servers hold.
    wait_until(Duration::from_secs(20), "the daemon's first heartbeat", || {
        laptop_after(chrono::DateTime::<chrono::Utc>::MIN_UTC)
    });
    let (out, json) = doctor(&s, &[]);
    let done = chrono::Utc::now();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (status, said) = check(&json, "cluster");
    assert_eq!(status, "ok", "{said}");
    assert!(
        said.contains("a quorum of the servers took a write as device laptop"),
        "{said}"
    );
    assert!(said.contains("heartbeats seen: laptop ("), "{said}");
    // The daemon's next heartbeat, after doctor's: written over its own last one.
    wait_until(Duration::from_secs(20), "the daemon's next heartbeat", || {
        laptop_after(done)
    });
    assert!(
        !d.stderr().contains("also calls itself"),
        "doctor wrote under the daemon's name:\n{}",
        d.stderr()
    );
    drop(d);
    nats.kill(1);
    nats.kill(2);
    let (out, json) = doctor(&s, &[]);
    only_to_fix(&out, &json, "cluster", "no quorum");
}

/// A slot whose run was cut short (`kill -9` while the model held its request) and no tabd since:
/// owed, said with what the next start does with it. While the daemon runs, the same entry is a
/// run still going: not said.
#[test]
fn a_slot_whose_run_was_cut_short_is_owed_while_no_tabd_runs() {
    let (v, fake, _gate) = crate::owed_slots::ticker_vault("", 1);
    let path_var = std::env::var("PATH").unwrap_or_default();
    let mut d = Daemon::start(&v);
    fake.wait_for_requests(1, crate::owed_slots::FIRST_SLOT);
    let slot = crate::owed_slots::started_slot(&v);

    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    let (status, said) = check(&json, "overdue");
    assert_eq!(status, "ok", "the run is going: {said}");
    assert!(
        !fixes(&json).contains(&"overdue".to_string()),
        "{}",
        describe(&out)
    );

    d.signal(libc::SIGKILL);
    assert!(
        d.wait_exit(Duration::from_secs(20)).is_none(),
        "killed, no exit code"
    );
    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    only_to_fix(&out, &json, "overdue", "ticker owes a slot: the ");
    let (_, said) = check(&json, "overdue");
    let at = slot.format("%H:%M").to_string(); // the test config's timezone is UTC
    assert!(said.contains(&format!("the {at} run (started ")), "{said}");
    assert!(said.contains("tabd was killed, crashed or lost power"), "{said}");
    assert!(said.contains("started now, tabd runs it again once"), "{said}");
    assert!(said.contains("no tabd runs for this vault"), "{said}");
}

/// The slots a pause held are not missed: `hourly` paused since before its ledger (a pause asked
/// three days ago, as `tabd pause` writes it), then resumed — the next start records those slots
/// as paused, never runs them late, so doctor does not call them missed.
#[test]
fn the_slots_a_pause_held_are_not_missed() {
    let (v, _fake, _offset) = hourly_two_days_ago();
    let path_var = std::env::var("PATH").unwrap_or_default();
    let out = v.tabd(&["pause", "hourly"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let book = v.root().join(".tabd/pause/pauses.json");
    let mut b: Value = serde_json::from_slice(&std::fs::read(&book).unwrap()).unwrap();
    b["pauses"][0]["since"] = json!((chrono::Utc::now() - chrono::Duration::days(3)).to_rfc3339());
    std::fs::write(&book, serde_json::to_vec(&b).unwrap()).unwrap();

    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "paused: {}", describe(&out));
    assert_eq!(check(&json, "overdue").0, "ok", "{json:#}");

    let out = v.tabd(&["resume", "hourly"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let (out, json) = doctor_of(&v, &path_var, &["--offline"]);
    assert_eq!(out.status.code(), Some(0), "resumed: {}", describe(&out));
    assert_eq!(check(&json, "overdue").0, "ok", "{json:#}");
}
