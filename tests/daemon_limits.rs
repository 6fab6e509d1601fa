//! Limits, pauses and daemon plumbing, end to end: each behaviour the daemon promises and no
//! other test drove.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{setup, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(20);

/// `min_interval` holds back what a loop could cause (a note from another role, a slot, a
/// watched file) — and status says until when and why; a note a person writes runs at once.
#[test]
fn min_interval_holds_back_chains_never_a_persons_note() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let v = vault_with(
        &fake,
        "[limits]\nmin_interval = \"1h\"\n[inbox]\nsettle_ms = 300\n",
    );
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "first");
    wait_until(T, "the first run", || v.records().len() == 1);
    v.write(
        "agent/inbox/delivery/two.md",
        "second, right after: a person's note runs at once",
    );
    wait_until(T, "the second run, without waiting an hour", || {
        v.records().len() == 2
    });
    v.write(
        "agent/inbox/delivery/chained.md",
        "---\nfrom: risk\nhops: 1\n---\nFrom another role: waits for min_interval.\n",
    );
    wait_until(T, "tabd status says it waits, and why", || {
        let text = stdout(&v.tabd(&["status"]));
        text.contains("waits:     until") && text.contains("min_interval 1h")
    });
    // The same report, in the status note (written just before status.json).
    let note = v.read("agent/status.md");
    assert!(
        note.contains("waits until") && note.contains("min_interval 1h"),
        "{note}"
    );
    assert_eq!(v.records().len(), 2, "the chained note has not run");
    assert!(v.path("agent/inbox/delivery/chained.md").exists());
}

/// Issue 48, item 5: a role scheduled `every 1 min` with min_interval 1h does not run at the
/// next minute after a run: `tabd status` and agent/status.md show the real next run — an hour
/// after the last one — and say min_interval holds it back.
#[test]
fn status_shows_the_next_fire_min_interval_allows() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let v = vault_with(
        &fake,
        "[limits]\nmin_interval = \"1h\"\n[inbox]\nsettle_ms = 300\n",
    );
    v.write(
        "roles/ticker.md",
        "# Ticker\n\n## Mission\nTick.\n\n## Schedule\nevery 1 min\n",
    );
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ticker/one.md", "a person's note runs at once");
    wait_until(T, "the run", || !v.records().is_empty());
    let why = "held back by min_interval 1h since its last run";
    wait_until(T, "tabd status shows the held next fire", || {
        stdout(&v.tabd(&["status", "ticker"])).contains(why)
    });
    let status = v.status_json().unwrap();
    let ticker = status["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "ticker")
        .unwrap()
        .clone();
    let next: chrono::DateTime<chrono::Utc> = ticker["next_fire"].as_str().unwrap().parse().unwrap();
    let ended: chrono::DateTime<chrono::Utc> = v.records()[0]["ended_at"].as_str().unwrap().parse().unwrap();
    assert!(
        next >= ended + chrono::Duration::minutes(59),
        "an hour after the run ({ended}), not the next minute: {next}"
    );
    assert_eq!(ticker["next_fire_why"], why);
    assert!(v.read("agent/status.md").contains(why));
}

#[test]
fn an_outage_pauses_model_calls_and_a_config_change_resumes_them() {
    let (v, fake) = setup("");
    fake.respond_with(|_, _| wire::error("anthropic", 401, "authentication_error", "invalid x-api-key"));
    let d = Daemon::start(&v);
    v.write("agent/inbox/delivery/n.md", "waits out the outage");
    wait_until(T, "the pause shown", || {
        v.read("agent/status.md").contains("Model calls are paused")
    });
    assert!(
        v.daily()
            .contains("Delivery Manager · paused — anthropic: HTTP 401"),
        "{}",
        v.daily()
    );
    let requests = fake.requests().len();
    v.write("agent/inbox/risk/m.md", "also waits");
    wait_until(T, "the new note seen", || v.live("risk")["ready"] == 1);
    assert_eq!(fake.requests().len(), requests, "no model call while paused");
    assert_eq!(
        v.files_in("agent/inbox/delivery"),
        ["n.md"],
        "no attempt counted, nothing moved"
    );
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&cfg.replace("max_retries = 1", "max_retries = 2"));
    wait_until(T, "both notes processed after the resume", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
            && v.files_in("agent/inbox/risk/processed") == ["m.md"]
    });
    assert!(d.stderr().contains("config changed"));
    wait_until(T, "the pause cleared", || {
        !v.read("agent/status.md").contains("Model calls are paused")
    });
}

#[test]
fn an_overflowing_event_queue_is_rescanned_and_no_note_is_missed() {
    let (v, fake) = setup("");
    let d = Daemon::start_with_env(&v, &[("TABD_TEST_EVENT_CAPACITY", "2")]);
    for i in 0..40 {
        v.write(
            &format!("agent/inbox/delivery/n{i:02}.md"),
            &format!("marker-{i:02}"),
        );
    }
    wait_until(T, "all 40 processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 40
    });
    assert!(
        d.stderr()
            .contains("file events overflowed; rescanning every inbox"),
        "{}",
        d.stderr()
    );
    wait_idle(&v);
    let all: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    for i in 0..40 {
        assert_eq!(all.matches(&format!("marker-{i:02}")).count(), 1, "note {i} once");
    }
}

#[test]
fn ready_status_and_watchdog_reach_systemd() {
    let (v, _fake) = setup("");
    // WATCHDOG_USEC as systemd sets it for WatchdogSec=; pings come every half of it.
    let mut d = Daemon::start_with_env(&v, &[("WATCHDOG_USEC", "400000")]);
    let ping = d.await_message("WATCHDOG=1", T);
    assert!(ping.contains("WATCHDOG=1"));
    let again = d.await_message("WATCHDOG=1", T);
    assert!(again.contains("WATCHDOG=1"), "pings keep coming");
    v.write("roles/extra.md", "# Extra\n## Mission\nx\n");
    let status = d.await_message("STATUS=", T);
    assert!(status.contains("STATUS=5 roles;"), "{status}");
}

#[test]
fn a_413_and_the_run_deadline_fail_the_run_and_count_an_attempt() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "[limits]\nrun_deadline = \"1s\"\n");
    v.write("agent/inbox/delivery/n.md", "too much");
    fake.script([wire::error(
        "anthropic",
        413,
        "request_too_large",
        "Request exceeds the maximum size",
    )]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("HTTP 413") && err.contains("trim the role's context files"),
        "{}",
        describe(&out)
    );
    assert!(err.contains("its notes count an attempt"));
    fake.script([wire::text("anthropic", "late").delayed(Duration::from_secs(5))]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the run's deadline passed"),
        "{}",
        describe(&out)
    );
    let state = v.state();
    assert_eq!(
        state["roles"]["delivery"]["attempts"]["agent/inbox/delivery/n.md"]["count"],
        2
    );
    assert!(v
        .daily()
        .contains("**Will retry:** [[agent/inbox/delivery/n]] (attempt 2 failed)"));
}

#[test]
fn max_tokens_per_run_ends_a_run_with_a_summary() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "[limits]\nmax_tokens_per_run = 500\n");
    fake.script([
        wire::tools("anthropic", None, &[("t1", "list_files", json!({}))]),
        wire::text(
            "anthropic",
            "Stopped at the token limit; next run: read the timeline.",
        ),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let rec = &v.records()[0];
    assert_eq!(rec["outcome"], "limit");
    assert_eq!(rec["error"], "limit reached: max_tokens_per_run (500)");
    assert!(wire::tools_forbidden(&fake.requests()[1].body));
    assert!(v.daily().contains("Stopped at the token limit"));
}

#[test]
fn a_role_file_deleted_at_runtime_is_dropped_quietly() {
    let (v, _fake) = setup("");
    v.write("roles/temp.md", "# Temp\n## Mission\nBriefly.\n");
    let mut d = Daemon::start(&v);
    wait_until(T, "listed", || {
        v.read("agent/status.md").contains("| Temp (temp) |")
    });
    std::fs::remove_file(v.path("roles/temp.md")).unwrap();
    wait_until(T, "gone from status", || {
        !v.read("agent/status.md").contains("| Temp (temp) |")
    });
    assert!(
        !v.daily().contains("error"),
        "a deleted role is not an error:\n{}",
        v.daily()
    );
    v.write("agent/inbox/delivery/n.md", "still serving");
    wait_until(T, "others still served", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
    });
    assert!(d.child.try_wait().unwrap().is_none());
}

/// A manual fire respects the daily budget, or says it overrides it (issue 21).
#[test]
fn tabd_fire_respects_the_daily_budget_unless_told_to_override() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let v = vault_with(&fake, "[limits]\ndaily_token_budget = 10\n");
    let first = v.tabd(&["fire", "delivery"]);
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    let second = v.tabd(&["fire", "delivery"]);
    assert_eq!(second.status.code(), Some(1), "{}", describe(&second));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("daily token budget spent") && err.contains("--over-budget"),
        "{err}"
    );
    assert_eq!(fake.requests().len(), 1, "nothing was sent");
    let third = v.tabd(&["fire", "delivery", "--over-budget"]);
    assert_eq!(third.status.code(), Some(0), "{}", describe(&third));
    assert_eq!(fake.requests().len(), 2);
}
