//! Issue 39, item 3: outcomes are what happened. A run that waits for the person reads
//! `waiting` everywhere (daily note, daemon log, run record, `tabd status`, `tabd runs`); a broken
//! role edit is said in the daemon log, the daily note (once the person stops editing) and a
//! `role_broken` notification; a fixed config or role is logged.

use std::time::Duration;

use crate::support::approvals::ops_asks_to_write_the_plan;
use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, TestVault};

const T: Duration = Duration::from_secs(30);

/// The `**Outcome:**` lines of the daily note.
fn outcome_lines(v: &TestVault) -> Vec<String> {
    v.daily()
        .lines()
        .filter(|l| l.starts_with("- **Outcome:**"))
        .map(str::to_string)
        .collect()
}

/// `tabd fire` of a run that waits for approval: the daily note, the run record, `tabd status
/// ops` and `tabd runs` all say it waits — none says `ok`, and status shows the run.
#[test]
fn a_fired_run_that_waits_for_approval_reads_waiting_everywhere() {
    let (v, _fake) = ops_asks_to_write_the_plan();
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let outcomes = outcome_lines(&v);
    assert_eq!(outcomes.len(), 1, "{}", v.daily());
    assert!(
        outcomes[0].starts_with("- **Outcome:** waiting — for your approval"),
        "{}",
        v.daily()
    );
    let records = v.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["ended"], "waiting", "{records:?}");

    let status = stdout(&v.tabd(&["status", "ops"]));
    assert!(!status.contains("last run:  never"), "{status}");
    assert!(
        status.contains("last run:") && status.contains(" waiting"),
        "{status}"
    );
    assert!(status.contains("waits for your decision since"), "{status}");

    let runs = stdout(&v.tabd(&["runs"]));
    let line = runs.lines().find(|l| l.contains("ops")).unwrap_or_default();
    assert!(line.contains("waiting") && !line.contains(" ok "), "{runs}");
    let json: serde_json::Value = serde_json::from_str(&stdout(&v.tabd(&["runs", "--json"]))).unwrap();
    assert_eq!(json["runs"][0]["ended"], "waiting", "{json}");
}

/// The daemon's own log says a waiting run waits, not `finished: ok`.
#[test]
fn the_daemon_log_says_a_run_waits() {
    let (v, _fake) = ops_asks_to_write_the_plan();
    let d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run logged", || !outcome_lines(&v).is_empty());
    wait_until(T, "the daemon's log line", || d.stderr().contains("run of ops"));
    let log = d.stderr();
    assert!(!log.contains("run of ops finished: ok"), "{log}");
    assert!(log.contains("run of ops waits for your approval"), "{log}");
    assert!(
        outcome_lines(&v)[0].starts_with("- **Outcome:** waiting"),
        "{}",
        v.daily()
    );
    let status = stdout(&v.tabd(&["status", "ops"]));
    assert!(status.contains(" waiting"), "{status}");
}

/// `tabd fire` while the daemon runs (the service): the daemon's status shows the fired run and
/// the decision it waits for.
#[test]
fn a_run_fired_beside_the_daemon_shows_in_its_status() {
    let (v, _fake) = ops_asks_to_write_the_plan();
    let _d = Daemon::start(&v);
    let out = v.tabd(&["fire", "ops"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    // Typed right after `tabd fire` returns: the daemon has not written its status since.
    let status = stdout(&v.tabd(&["status", "ops"]));
    assert!(
        status.contains("waits for your decision since") && status.contains(" waiting ·"),
        "{status}"
    );
}

/// The events a `[notify] command` wrote down, one JSON object a line.
fn events_in(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A role file broken by a person typing in Obsidian (autosaves, each broken a new way): the
/// daemon's log says each broken state at once; once the edits stop, the daily note gets one
/// line and the person one `role_broken` event, for the state the file was left in; the fix is
/// logged in both.
#[test]
fn a_broken_role_edit_is_logged_noted_once_and_told() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            daemon_config(""),
            events.display()
        ),
    );
    let d = Daemon::start(&v);
    let good = v.read("roles/risk.md");
    for typed in ["9", "9am and", "9am and 5", "9am and 5p"] {
        v.write("roles/risk.md", &format!("{good}\n## Schedule\n{typed}\n"));
        std::thread::sleep(Duration::from_millis(150));
    }
    wait_until(T, "the error in the daily note", || {
        v.daily().contains("role file has errors")
    });
    wait_until(T, "the role_broken event", || {
        events_in(&events).iter().any(|e| e["event"] == "role_broken")
    });
    let told: Vec<serde_json::Value> = events_in(&events)
        .into_iter()
        .filter(|e| e["event"] == "role_broken")
        .collect();
    assert_eq!(
        told.len(),
        1,
        "one event for the state the file was left in: {told:?}"
    );
    assert_eq!(told[0]["role"], "risk", "{told:?}");
    assert_eq!(told[0]["note"], "roles/risk.md", "{told:?}");
    assert!(
        told[0]["title"]
            .as_str()
            .unwrap_or_default()
            .contains("Risk Manager")
            && told[0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("9am and 5p"),
        "{told:?}"
    );
    assert_eq!(
        v.daily().matches("role file has errors").count(),
        1,
        "{}",
        v.daily()
    );
    let log = d.stderr();
    assert!(
        log.contains("roles/risk.md: role file has errors") && log.contains("9am and 5p"),
        "the daemon's log says it: {log}"
    );

    v.write("roles/risk.md", &good);
    wait_until(T, "the fix in the daily note", || {
        v.daily().contains("role file fixed")
    });
    wait_until(T, "the fix in the daemon's log", || {
        d.stderr()
            .contains("roles/risk.md: fixed; running the new version")
    });
    assert_eq!(
        events_in(&events)
            .iter()
            .filter(|e| e["event"] == "role_broken")
            .count(),
        1,
        "a fix is no event"
    );
}

/// A config edit with an error is logged (the daemon keeps the previous config); its fix is
/// logged too, in the daemon's log and the daily note.
#[test]
fn a_fixed_config_is_logged() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    let d = Daemon::start(&v);
    let good = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&format!("{good}\n[limits]\nmax_tool_calls = \"lots\"\n"));
    wait_until(T, "the config error logged", || {
        d.stderr().contains("config has errors")
    });
    v.set_config(&good);
    wait_until(T, "the fix logged", || d.stderr().contains("fixed; using it now"));
    wait_until(T, "the fix in the daily note", || {
        v.daily().contains("config fixed; using it now")
    });
}

/// Issue 48, item 4: one typo in `_base.md`, which every stock role extends, is one event — one
/// line in the daemon's log, one in the daily note, one `role_broken` notification — naming the
/// file, its line and the roles that extend it, with what happens to them; never one per role,
/// and the abstract `_base` is never said to be "still running". Its fix is one line too.
#[test]
fn a_typo_in_the_base_role_is_one_event_naming_the_roles_that_extend_it() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            daemon_config(""),
            events.display()
        ),
    );
    let d = Daemon::start(&v);
    let good = v.read("roles/_base.md");
    assert!(good.lines().nth(3) == Some("max_tool_calls: 30"), "{good}");
    v.write(
        "roles/_base.md",
        &good.replace("max_tool_calls: 30", "max_tool_calls: lots"),
    );
    wait_until(T, "the role_broken event", || {
        events_in(&events).iter().any(|e| e["event"] == "role_broken")
    });
    v.write("roles/_base.md", &good);
    // The fix is written after everything the broken state wrote.
    wait_until(T, "the fix in the daily note", || {
        v.daily().contains("role file fixed")
    });
    wait_until(T, "the fix in the daemon's log", || {
        d.stderr().contains("roles/_base.md: fixed")
    });

    let extenders =
        "4 roles that extend it: comms, delivery, product, risk keep running their last good versions";
    let daily = v.daily();
    let errors: Vec<&str> = daily
        .lines()
        .filter(|l| l.contains("role file has errors"))
        .collect();
    assert_eq!(errors.len(), 1, "one daily line:\n{daily}");
    assert!(
        errors[0].contains("roles/_base.md:4: error:") && errors[0].contains(extenders),
        "{}",
        errors[0]
    );
    assert!(!daily.contains("still running"), "{daily}");
    let fixes: Vec<&str> = daily.lines().filter(|l| l.contains("role file fixed")).collect();
    assert_eq!(fixes.len(), 1, "{daily}");
    assert!(
        fixes[0].contains("run their new versions too: comms, delivery, product, risk"),
        "{}",
        fixes[0]
    );

    let told: Vec<serde_json::Value> = events_in(&events)
        .into_iter()
        .filter(|e| e["event"] == "role_broken")
        .collect();
    assert_eq!(told.len(), 1, "one notification: {told:?}");
    assert_eq!(told[0]["note"], "roles/_base.md", "{told:?}");
    let message = told[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("roles/_base.md:4") && message.contains(extenders),
        "{message}"
    );

    let log = d.stderr();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("role file has errors"))
        .collect();
    assert_eq!(said.len(), 1, "one line in the daemon's log:\n{log}");
    assert!(
        said[0].contains("roles/_base.md: role file has errors (an abstract role"),
        "{}",
        said[0]
    );
}
