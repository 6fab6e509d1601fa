//! A scheduled slot whose run started and did not finish is owed (docs/spec.md §22, issue 49): the real
//! daemon, in real time, killed (`kill -9`) or stopped while the fake model holds the slot's
//! request, then started again — the slot runs again once, or is recorded as interrupted and
//! said; never silently lost, never run a third time.

use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use serde_json::Value;

use crate::support::daemon::{daemon_config, setup, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Gate, Reply};
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(30);
/// Long enough for the first slot even on a busy machine: a daemon that was slow to start and
/// missed it (its first start records "now", nothing missed) gets the next one a minute later.
pub(crate) const FIRST_SLOT: Duration = Duration::from_secs(90);

/// What the re-run's prompt says of its slot (docs/spec.md §4: a late run states both times).
const RERUN_PROMPT: &str = "did not finish (tabd was stopped, killed or crashed), so it runs once more";

/// A role due once a minute, a few seconds from now (`every 1 min` at a second of our
/// choosing: the test waits seconds, not a minute, for its first slot), with `settings` in its
/// frontmatter.
fn ticker(v: &TestVault, settings: &str) {
    let second = (Utc::now() + chrono::Duration::seconds(4)).second();
    v.write(
        "roles/ticker.md",
        &format!(
            "---\nskip_unchanged: false\n{settings}---\n# Ticker\n## Mission\nTick.\n## Schedule\n{second} * * * * *\n"
        ),
    );
}

/// The fake answers the first `held` requests only once `gate` opens (never, in these tests:
/// the daemon is killed or stopped while it waits), the rest at once.
fn hold_first(fake: &FakeModel, held: usize) -> Gate {
    let gate = Gate::shut();
    let g = gate.clone();
    fake.respond_with(move |_, i| {
        let ok = wire::text("anthropic", "ok");
        if i < held {
            Reply::Held(g.clone(), Box::new(ok))
        } else {
            ok
        }
    });
    gate
}

fn ticker_records(v: &TestVault) -> Vec<Value> {
    v.records()
        .into_iter()
        .filter(|r| r["role"] == "ticker")
        .collect()
}

/// The slot the daemon recorded as started and not finished (read from `.tabd/state.json`;
/// `tests/doctor.rs` too).
pub(crate) fn started_slot(v: &TestVault) -> DateTime<Utc> {
    let mut slot = None;
    wait_until(T, "the slot's start recorded", || {
        slot = v.state()["roles"]["ticker"]["started_slots"][0]["slot"]
            .as_str()
            .and_then(|s| s.parse().ok());
        slot.is_some()
    });
    slot.unwrap()
}

/// The slot a record is for.
fn slot_of(record: &Value) -> Option<DateTime<Utc>> {
    record["trigger"]["scheduled_for"].as_str()?.parse().ok()
}

fn records_for(v: &TestVault, slot: DateTime<Utc>) -> Vec<Value> {
    ticker_records(v)
        .into_iter()
        .filter(|r| slot_of(r) == Some(slot))
        .collect()
}

/// Each (role, slot) has one record at most: no slot ran twice.
fn one_record_per_slot(v: &TestVault) {
    let mut seen = std::collections::BTreeMap::new();
    for r in ticker_records(v) {
        *seen.entry(slot_of(&r)).or_insert(0) += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "a slot recorded twice: {seen:?}");
}

/// Waits for the record of `slot` that says it was interrupted and not run again, ending with
/// `why`; the daily note says the same in one line.
fn recorded_interrupted(v: &TestVault, slot: DateTime<Utc>, why: &str) {
    wait_until(T, "the slot recorded as interrupted", || {
        !records_for(v, slot).is_empty()
    });
    let rec = &records_for(v, slot)[0];
    assert_eq!(
        (rec["outcome"].as_str(), rec["ended"].as_str()),
        (Some("skipped"), Some("interrupted")),
        "{rec:#}"
    );
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(error.ends_with(why), "{error}");
    let line = format!(
        "Ticker · interrupted — the {} run (started ",
        slot.format("%H:%M")
    );
    let daily = v.daily();
    let said: Vec<&str> = daily
        .lines()
        .filter(|l| l.contains(&line) && l.contains("not run again"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {daily}");
    assert!(said[0].ends_with(why), "{daily}");
}

fn reruns_asked(fake: &FakeModel) -> usize {
    fake.requests()
        .iter()
        .filter(|r| wire::all_text(&r.body).contains(RERUN_PROMPT))
        .count()
}

/// Starts the daemon (with `env`), waits for the slot's request (held by the fake), and kills it
/// (`kill -9`). Returns the slot.
fn kill_during_the_slot(v: &TestVault, fake: &FakeModel, env: &[(&str, &str)]) -> DateTime<Utc> {
    let d = Daemon::start_with_env(v, env);
    fake.wait_for_requests(1, FIRST_SLOT);
    let slot = started_slot(v);
    d.signal(libc::SIGKILL);
    drop(d);
    slot
}

/// A vault whose ticker (with `settings`) had its first slot's run killed: the fake holds the
/// first `held` requests. Returns the vault, the fake, its gate (kept shut) and the slot.
fn killed_ticker(settings: &str, held: usize) -> (TestVault, FakeModel, Gate, DateTime<Utc>) {
    let (v, fake, gate) = ticker_vault(settings, held);
    let slot = kill_during_the_slot(&v, &fake, &[]);
    (v, fake, gate, slot)
}

/// A vault with the ticker (with `settings`), the fake holding its first `held` requests.
pub(crate) fn ticker_vault(settings: &str, held: usize) -> (TestVault, FakeModel, Gate) {
    let (v, fake) = setup("");
    ticker(&v, settings);
    let gate = hold_first(&fake, held);
    (v, fake, gate)
}

#[test]
fn a_slot_killed_mid_run_runs_again_once_at_the_next_start_and_says_which() {
    let (v, fake, _gate, slot) = killed_ticker("", 1);
    assert!(ticker_records(&v).is_empty(), "killed: no record yet");
    let _d = Daemon::start(&v);
    wait_until(T, "the slot's re-run recorded", || {
        !records_for(&v, slot).is_empty()
    });
    let rec = &records_for(&v, slot)[0];
    assert_eq!(rec["outcome"], "ok", "{rec:#}");
    assert_eq!(
        rec["trigger"]["rerun"]["slot"]
            .as_str()
            .map(|s| s.parse::<DateTime<Utc>>().unwrap()),
        Some(slot),
        "{rec:#}"
    );
    assert!(
        rec["trigger"]["rerun"]["interrupted_run_started_at"].is_string(),
        "{rec:#}"
    );
    // Its prompt states the scheduled and the actual time, and why it runs again.
    let rerun = fake
        .requests()
        .into_iter()
        .map(|r| wire::all_text(&r.body))
        .find(|t| t.contains(RERUN_PROMPT))
        .expect("the re-run's request");
    let due = format!(
        "this run was due at {} and runs now, at ",
        slot.format("%Y-%m-%d %H:%M:%S")
    );
    assert!(rerun.contains(&due), "{rerun}");
    wait_idle(&v);
    assert_eq!(reruns_asked(&fake), 1, "run again exactly once");
    assert_eq!(records_for(&v, slot).len(), 1, "one record for the slot");
    one_record_per_slot(&v);
    let daily = v.daily();
    let hhmm = slot.format("%H:%M").to_string();
    assert_eq!(
        daily
            .matches(&format!("Ticker · interrupted — the {hhmm} run (started "))
            .count(),
        1,
        "{daily}"
    );
    assert!(
        daily.contains(
            "did not finish: tabd was killed, crashed or lost power during it; running it again once now"
        ),
        "{daily}"
    );
    assert_eq!(
        daily
            .matches(&format!("(due {hhmm}, run again: its run that started"))
            .count(),
        1,
        "one section for the re-run: {daily}"
    );
    assert!(
        v.state()["roles"]["ticker"]["started_slots"].is_null(),
        "nothing owed once the re-run finished: {:#}",
        v.state()["roles"]["ticker"]
    );
}

/// Peer story #1 (claude-code#82517): a slot killed mid-run and restarted twice runs once in all
/// — one run per (role, slot) in the ledger and one delivery.
#[test]
fn a_slot_killed_mid_run_and_restarted_twice_runs_once_and_is_delivered_once() {
    let fake = FakeModel::start();
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\nevents = [\"done\"]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            daemon_config(""),
            events.display()
        ),
    );
    ticker(&v, "");
    let _gate = hold_first(&fake, 1);
    let slot = kill_during_the_slot(&v, &fake, &[]);
    let d = Daemon::start(&v);
    wait_until(T, "the re-run recorded", || !records_for(&v, slot).is_empty());
    // Every finished run of the role is delivered once (a `done` event): the re-run, and any
    // later slot that comes due meanwhile.
    let delivered = || {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "done" && e["role"] == "ticker")
            .count()
    };
    let finished = || ticker_records(&v).iter().filter(|r| r["outcome"] == "ok").count();
    wait_until(T, "the re-run delivered", || delivered() == 1);
    d.signal(libc::SIGKILL);
    drop(d);
    let _d = Daemon::start(&v);
    wait_idle(&v);
    wait_until(T, "every finished run delivered", || delivered() == finished());
    assert_eq!(
        reruns_asked(&fake),
        1,
        "run again exactly once across two restarts"
    );
    assert_eq!(
        records_for(&v, slot).len(),
        1,
        "one run of the slot in the ledger"
    );
    assert_eq!(records_for(&v, slot)[0]["outcome"], "ok");
    one_record_per_slot(&v);
    assert_eq!(delivered(), finished(), "one delivery per run, the slot's once");
}

#[test]
fn a_slot_whose_rerun_is_killed_too_is_given_up_recorded_and_said() {
    let (v, fake, _gate, slot) = killed_ticker("", 2);
    // The re-run's request is held too: killed again during it.
    let d = Daemon::start(&v);
    fake.wait_for_requests(2, T);
    wait_until(T, "the re-run's start recorded", || {
        v.state()["roles"]["ticker"]["started_slots"][0]["starts"] == 2
    });
    d.signal(libc::SIGKILL);
    drop(d);
    let _d = Daemon::start(&v);
    recorded_interrupted(
        &v,
        slot,
        "not run again: its re-run did not finish either (a slot is run again at most once)",
    );
    wait_idle(&v);
    assert_eq!(reruns_asked(&fake), 1, "never run a third time");
    assert_eq!(records_for(&v, slot).len(), 1);
    one_record_per_slot(&v);
    assert!(v.state()["roles"]["ticker"]["started_slots"].is_null());
}

#[test]
fn with_catch_up_skip_an_interrupted_slot_is_recorded_and_said_not_run_again() {
    let (v, fake, _gate, slot) = killed_ticker("catch_up: skip\n", 1);
    let _d = Daemon::start(&v);
    recorded_interrupted(&v, slot, "not run again: catch_up: skip");
    wait_idle(&v);
    assert_eq!(reruns_asked(&fake), 0);
}

#[test]
fn a_slot_older_than_stale_after_at_the_next_start_is_recorded_not_run_again() {
    let (v, fake, _gate) = ticker_vault("", 1);
    // The next start is three hours later (the daemon's wall clock, as after a long power cut).
    let offset = v.dir.path().join("clock-offset");
    std::fs::write(&offset, "0").unwrap();
    let clock = [("TABD_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())];
    let slot = kill_during_the_slot(&v, &fake, &clock);
    std::fs::write(&offset, "10800").unwrap();
    let _d = Daemon::start_with_env(&v, &clock);
    recorded_interrupted(
        &v,
        slot,
        "not run again: stale — it was due more than 2h ago (stale_after)",
    );
    wait_idle(&v);
    assert_eq!(reruns_asked(&fake), 0);
}

#[test]
fn a_slot_stopped_by_sigterm_mid_run_is_owed_and_runs_again_once() {
    let (v, fake, _gate) = ticker_vault("", 1);
    let mut d = Daemon::start(&v);
    fake.wait_for_requests(1, FIRST_SLOT);
    let slot = started_slot(&v);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    drop(d);
    let stopped = records_for(&v, slot);
    assert_eq!(stopped.len(), 1, "the stop is recorded");
    assert_eq!(stopped[0]["ended"], "stopped");
    assert!(
        stopped[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("its slot is owed")),
        "{:#}",
        stopped[0]
    );
    let hhmm = slot.format("%H:%M").to_string();
    assert!(
        v.daily().contains(&format!(
            "when tabd stopped; its {hhmm} slot is owed: tabd runs it again once when it next starts, or says why not"
        )),
        "{}",
        v.daily()
    );
    let _d = Daemon::start(&v);
    wait_until(T, "the re-run recorded", || records_for(&v, slot).len() == 2);
    wait_idle(&v);
    let recs = records_for(&v, slot);
    assert_eq!(recs.len(), 2, "the stopped run and its one re-run: {recs:#?}");
    assert_eq!(recs[1]["outcome"], "ok");
    assert!(recs[1]["trigger"]["rerun"].is_object(), "{:#}", recs[1]);
    assert_eq!(reruns_asked(&fake), 1);
    assert!(
        v.daily()
            .contains("did not finish: tabd was stopped during it; running it again once now"),
        "{}",
        v.daily()
    );
}

/// With `[cluster]`, the re-run is claimed like any slot: the killed run's claim is held (by
/// this very device, before it was killed) until its lease lapses, then taken over and run
/// again once here.
#[test]
fn with_a_cluster_the_rerun_is_claimed_and_runs_once_the_killed_runs_claim_lapses() {
    let Some(mut d) = crate::cluster_daemons::Devices::new("owed_slot_with_a_cluster", 3, "") else {
        return;
    };
    ticker(&d.v, "");
    let _gate = hold_first(&d.fake, 1);
    d.start("laptop");
    d.fake.wait_for_requests(1, FIRST_SLOT);
    d.daemons.remove("laptop").expect("daemon").signal(libc::SIGKILL);
    d.start("laptop");
    let rerun = |d: &crate::cluster_daemons::Devices| {
        d.ok_records("ticker")
            .into_iter()
            .filter(|(_, r)| r["trigger"]["rerun"].is_object())
            .collect::<Vec<_>>()
    };
    d.wait(T, "the slot run again", || !rerun(&d).is_empty());
    let (device, rec) = &rerun(&d)[0];
    assert_eq!(device, "laptop");
    let slot = slot_of(rec).expect("its slot");
    assert_eq!(
        rec["trigger"]["rerun"]["slot"]
            .as_str()
            .and_then(|s| s.parse().ok()),
        Some(slot)
    );
    let of_slot = |d: &crate::cluster_daemons::Devices| {
        d.records()
            .into_iter()
            .filter(|(_, r)| r["role"] == "ticker" && slot_of(r) == Some(slot))
            .count()
    };
    assert_eq!(of_slot(&d), 1, "one run of the slot across the cluster");
    assert_eq!(reruns_asked(&d.fake), 1);
}

/// Paused means skipped: a slot whose run a pause stopped is not owed — resumed and started
/// again, tabd does not run it once more (nor does a restart while still paused).
#[test]
fn a_slot_whose_run_a_pause_stopped_is_not_owed() {
    let (v, fake, _gate) = ticker_vault("", 1);
    let mut d = Daemon::start(&v);
    fake.wait_for_requests(1, FIRST_SLOT);
    let slot = started_slot(&v);
    let out = v.tabd(&["pause", "ticker"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    wait_until(T, "the run stopped by the pause", || {
        records_for(&v, slot).iter().any(|r| r["ended"] == "stopped")
    });
    assert!(
        v.state()["roles"]["ticker"]["started_slots"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "the paused slot is not owed: {:#}",
        v.state()["roles"]["ticker"]
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    drop(d);
    let out = v.tabd(&["resume", "ticker"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let _d = Daemon::start(&v);
    wait_idle(&v);
    assert_eq!(reruns_asked(&fake), 0, "the paused slot was run again");
    assert!(!v.daily().contains("running it again once now"), "{}", v.daily());
}
