//! Reload (issue 37, item 2): the daemon builds a whole new run environment from an edited config,
//! or refuses the edit with its reason and keeps the old one whole; a run keeps the environment it
//! started with, whatever is reloaded while it runs.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{daemon_config, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Gate, Reply};
use crate::support::{stdout, wire};

const T: Duration = Duration::from_secs(30);

/// A config whose `[provider]` cannot be made (a `base_url` that starts like one but is no URL)
/// is refused whole — its new model and time zone too — with the reason in the daemon's log,
/// `tabd status`, the daily note and agent/status.md; runs go on with the old config and the old
/// provider. (Adopting the rest with the old provider would send the new model's name to the old
/// server, and say nothing.)
#[test]
fn a_config_whose_provider_cannot_be_made_is_refused_and_the_old_one_kept_whole() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let d = Daemon::start(&v);
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    let broken = cfg
        .replace(&fake.anthropic_url(), "http://model server:8080")
        .replace("model = \"test-model\"", "model = \"new-model\"")
        .replace("timezone = \"UTC\"", "timezone = \"Pacific/Kiritimati\"");
    assert_ne!(broken, cfg);
    v.set_config(&broken);
    wait_until(T, "the edit refused in the daemon's log", || {
        d.stderr().contains("keeping the previous one")
    });
    let log = d.stderr();
    assert!(log.contains("[provider] base_url"), "{log}");
    assert!(!log.contains("config changed; reloaded"), "{log}");
    assert!(
        !log.contains("model server"),
        "the URL itself is never printed: {log}"
    );
    wait_until(T, "tabd status saying so", || {
        let status = stdout(&v.tabd(&["status"]));
        status.contains("CONFIG ERROR") && status.contains("[provider] base_url")
    });
    wait_until(T, "agent/status.md saying so", || {
        let note = v.read("agent/status.md");
        note.contains("The config file has an error") && note.contains("[provider] base_url")
    });
    wait_until(T, "the daily note saying so", || {
        v.daily().contains("keeping the previous one")
    });

    v.write("agent/inbox/delivery/after.md", "after the refused edit");
    wait_until(T, "processed with the old config", || {
        v.files_in("agent/inbox/delivery/processed") == ["after.md"]
    });
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "test-model", "the old config, whole");
    let record = &v.records()[0];
    assert_eq!(record["outcome"], "ok", "{record}");
}

/// A run keeps what it started with: the config reloaded while it waits for the model (a new
/// time zone and model) changes nothing in it — its next request names its model, and its
/// section and record are in its own time zone — while a run started after the reload (another
/// role's, during the first one) has the new config.
#[test]
fn a_reload_in_the_middle_of_a_run_changes_nothing_in_that_run() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write("project/plan.md", "the plan");
    // The first request (delivery's) is answered once the reload is done and a run started
    // after it has asked the model; delivery then reads a note and ends.
    let (arrived_tx, arrived_rx) = mpsc::channel::<()>();
    let arrived_tx = Mutex::new(arrived_tx);
    let gate = Gate::shut();
    let held = gate.clone();
    fake.respond_with(move |_, i| {
        if i > 0 {
            return wire::text("anthropic", "done");
        }
        let _ = arrived_tx.lock().unwrap().send(());
        let call = ("r1", "read_file", json!({"path": "project/plan.md"}));
        Reply::Held(held.clone(), Box::new(wire::tools("anthropic", None, &[call])))
    });
    let d = Daemon::start(&v);
    v.write("agent/inbox/delivery/during.md", "a run the reload happens in");
    arrived_rx.recv_timeout(T).expect("the run's first request");
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(
        &cfg.replace("model = \"test-model\"", "model = \"reloaded-model\"")
            .replace("timezone = \"UTC\"", "timezone = \"Pacific/Kiritimati\""),
    );
    wait_until(T, "the reload", || {
        d.stderr().contains("config changed; reloaded")
    });
    // A note written now starts a run once the reload is done (the daemon reloads in one turn
    // of its loop): its request shows the new config is the daemon's.
    v.write("agent/inbox/comms/after.md", "a run after the reload");
    fake.wait_for_requests(2, T);
    assert_eq!(
        fake.requests()[1].body["model"],
        "reloaded-model",
        "the new config"
    );
    wait_until(T, "the run after the reload ended", || {
        v.files_in("agent/inbox/comms/processed") == ["after.md"]
    });
    gate.open();
    wait_until(T, "the first run processed its note", || {
        v.files_in("agent/inbox/delivery/processed") == ["during.md"]
    });
    wait_idle(&v);

    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        3,
        "two requests of the first run, one of the second"
    );
    let second_part = requests
        .iter()
        .find(|r| !wire::tool_results(&r.body).is_empty())
        .expect("the first run's request with its tool's result");
    assert_eq!(
        second_part.body["model"], "test-model",
        "the model it started with"
    );
    // Its record and its section are in the time zone it started in (UTC), not Kiritimati's.
    let record = v
        .records()
        .into_iter()
        .find(|r| r["role"] == "delivery")
        .expect("the first run's record");
    let started: chrono::DateTime<chrono::Utc> = record["started_at"].as_str().unwrap().parse().unwrap();
    let utc_day = started.format("%Y-%m-%d").to_string();
    let daily = std::fs::read_to_string(v.path(&format!("daily/{utc_day}.md"))).unwrap_or_default();
    let heading = format!("## {} · Delivery Manager", started.format("%H:%M"));
    assert!(daily.contains(&heading), "{heading} in\n{daily}");
    let kiritimati = started.with_timezone(&chrono_tz::Pacific::Kiritimati);
    let their_heading = format!("## {} · Delivery Manager", kiritimati.format("%H:%M"));
    for note in v.files_in("daily") {
        let text = v.read(&format!("daily/{note}"));
        assert!(
            !text.contains(&their_heading),
            "{their_heading} in {note}:\n{text}"
        );
    }
    let records = v.read(&format!(".tabd/runs/{utc_day}.jsonl"));
    assert!(
        records.contains(record["run_id"].as_str().unwrap()),
        "the record in UTC's day: {records}"
    );
}

/// Issue 48, item 4: the env file is read again when it is saved, as the config is. A daemon
/// started without a key pauses on the first note (the note stays, no attempt is counted) and
/// says what to do — the variable, the env file's path, that tabd reads it on save; the key
/// saved there is used for the next try without a restart; a key taken out of the file again
/// stops being used. No value is ever printed: only the variable's name.
#[test]
fn a_key_saved_in_the_env_file_is_used_without_a_restart() {
    const KEY: &str = "sk-ant-saved-while-running-0042";
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.with_key.set(false);
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let env_file = v.dir.path().join("xdg/tabd/env");
    std::fs::create_dir_all(env_file.parent().unwrap()).unwrap();
    let d = Daemon::start(&v);

    v.write("agent/inbox/delivery/first.md", "before the key");
    let paused = |v: &crate::support::TestVault| {
        v.status_json()
            .and_then(|s| s["provider_paused"].as_str().map(str::to_string))
    };
    wait_until(T, "model calls paused for want of a key", || {
        paused(&v).is_some_and(|p| p.contains("no API key"))
    });
    let reason = paused(&v).unwrap();
    let file = env_file.display().to_string();
    assert!(
        reason.contains(&format!("put ANTHROPIC_API_KEY=… in {file}"))
            && reason.contains("tabd reads that file again when you save it"),
        "the pause says what to do: {reason}"
    );
    wait_until(T, "the pause line in the daily note", || {
        v.daily().contains("paused — anthropic: no API key")
    });
    assert!(v.daily().contains(&file), "{}", v.daily());
    let status = stdout(&v.tabd(&["status"]));
    assert!(status.contains(&format!("PAUSED: {reason}")), "{status}");
    assert!(
        stdout(&v.tabd(&["validate"])).contains(&format!(
            "ANTHROPIC_API_KEY is not set, neither in tabd's environment nor in {file}"
        )),
        "validate says what the daemon has"
    );
    assert_eq!(v.files_in("agent/inbox/delivery"), ["first.md"]);
    assert!(fake.requests().is_empty());
    let attempts = &v.state()["roles"]["delivery"]["attempts"];
    assert!(
        attempts.as_object().is_none_or(|a| a.is_empty()),
        "no attempt counted: {attempts}"
    );

    write_private(&env_file, &format!("# for tabd\nANTHROPIC_API_KEY={KEY}\n"));
    wait_until(T, "the note run with the saved key", || {
        v.files_in("agent/inbox/delivery/processed") == ["first.md"]
    });
    assert_eq!(fake.requests()[0].headers["x-api-key"], KEY);
    assert!(d.stderr().contains("(ANTHROPIC_API_KEY added)"), "{}", d.stderr());
    wait_until(T, "the pause over in the status", || {
        v.status_json().is_some_and(|s| s["provider_paused"].is_null())
    });
    assert!(!stdout(&v.tabd(&["validate"])).contains("ANTHROPIC_API_KEY is not set"));

    // Taken out of the file, the key is no longer used.
    write_private(&env_file, "# the key moved elsewhere\nOTHER_SETTING=1\n");
    wait_until(T, "the key's removal read", || {
        d.stderr().contains("ANTHROPIC_API_KEY removed")
    });
    v.write("agent/inbox/delivery/second.md", "after the key went");
    wait_until(T, "paused again", || {
        paused(&v).is_some_and(|p| p.contains("no API key"))
    });
    assert_eq!(v.files_in("agent/inbox/delivery"), ["second.md"]);
    assert_eq!(fake.requests().len(), 1);

    for (what, text) in [
        ("the daemon's log", d.stderr()),
        ("the daily note", v.daily()),
        ("the status note", v.read("agent/status.md")),
        ("the status", stdout(&v.tabd(&["status", "--json"]))),
    ] {
        assert!(!text.contains(KEY), "the key's value in {what}:\n{text}");
    }
}

/// Writes `text` into `path` readable by its owner only, as a person keeps an env file.
fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The process's environment keeps priority over the env file (systemd's `EnvironmentFile=`
/// puts the file's values into it once, at the service's start): a key changed in the file
/// while tabd runs is not used, and tabd says so — the variable by name, and to restart.
#[test]
fn a_key_tabd_was_started_with_wins_over_the_env_file_and_tabd_says_so() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let env_file = v.dir.path().join("xdg/tabd/env");
    std::fs::create_dir_all(env_file.parent().unwrap()).unwrap();
    let d = Daemon::start(&v);
    write_private(&env_file, "ANTHROPIC_API_KEY=sk-ant-rotated-in-the-file-77\n");
    wait_until(T, "the override said", || {
        d.stderr()
            .contains("sets ANTHROPIC_API_KEY otherwise than tabd was started with")
    });
    assert!(d.stderr().contains("restart tabd"), "{}", d.stderr());
    v.write("agent/inbox/delivery/note.md", "which key");
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["note.md"]
    });
    assert_eq!(
        fake.requests()[0].headers["x-api-key"],
        crate::support::TEST_KEY,
        "the process's key"
    );
    for text in [d.stderr(), v.daily()] {
        assert!(!text.contains("sk-ant-rotated-in-the-file-77"), "{text}");
        assert!(!text.contains(crate::support::TEST_KEY), "{text}");
    }
}

/// Issue 48, item 4: a role file added, switched off and on (`enabled`) or removed while the
/// daemon runs is said — in its log and one line in the daily note — with when the role runs
/// next (or that only its inbox starts it).
#[test]
fn roles_added_switched_and_removed_are_each_said_with_their_next_fire() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    let d = Daemon::start(&v);
    let scout = "# Scout\n\n## Mission\nLook around.\n\n## Schedule\ndaily at 9:00\n";
    let said = |what: &str| {
        let line = format!("· Scout · {what}");
        wait_until(T, &line, || v.daily().contains(&line));
    };
    v.write("roles/scout.md", scout);
    said("role added; next fire ");
    assert!(
        d.stderr().contains("roles/scout.md: role added; next fire "),
        "{}",
        d.stderr()
    );
    v.write("roles/scout.md", &format!("---\nenabled: false\n---\n{scout}"));
    said("switched off (enabled: false); it runs no more");
    v.write("roles/scout.md", scout);
    said("switched on (enabled: true); next fire ");
    std::fs::remove_file(v.path("roles/scout.md")).unwrap();
    said("role removed (roles/scout.md is gone)");
    v.write("roles/helper.md", "# Helper\n\n## Mission\nHelp.\n");
    wait_until(T, "the inbox-only role said", || {
        v.daily()
            .contains("· Helper · role added; inbox only (no schedule")
    });
    let daily = v.daily();
    assert_eq!(daily.matches("· Scout · role added").count(), 1, "{daily}");
    assert_eq!(daily.matches("role removed").count(), 1, "{daily}");
}
