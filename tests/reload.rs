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
