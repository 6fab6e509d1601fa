//! Daily budgets are ceilings checked between every two steps of a run (issue 49, item 2; docs/spec.md
//! §6, §17, §22). Found: a role with `daily_token_budget: 20000` made 41 requests in one run,
//! because the day was looked at only when a run started. Here a scripted model whose every
//! response costs the same drives the real daemon: a run that crosses its role's, its parent's or
//! everyone's budget — in tokens or in dollars — ends as `limit` at its next step, its daily
//! section names the budget and the numbers, the person is told once, the next note waits until
//! midnight, and the day stays spent across a restart and a `kill -9`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, run_to_abort, vault_with, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Gate, Recorded, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(30);

/// What every scripted response costs: 500 tokens in, 100 out — 600 tokens, and $0.01 at
/// `PRICES`.
const IN: u64 = 500;
const OUT: u64 = 100;
const PRICES: &str = "[prices.\"test-model\"]\ninput = 10.0\noutput = 50.0\n";

/// `[notify]` through a command that appends each event (one JSON line) to `file`: the
/// `paused` events, and each finished run's `done` — which comes after anything a run's end
/// told, so it is what a test waits for before it counts.
fn notify_to(file: &Path) -> String {
    format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\nevents = [\"paused\", \"done\"]\n",
        file.display()
    )
}

fn events(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind(file: &Path, kind: &str) -> Vec<Value> {
    events(file).into_iter().filter(|e| e["event"] == kind).collect()
}

/// Waits until `role`'s run has told the person it is done: everything its end told is in
/// `file` by then (one channel tries its events in order).
fn wait_done(file: &Path, role: &str) {
    wait_until(T, &format!("the done event of {role}"), || {
        of_kind(file, "done").iter().any(|e| e["role"] == role)
    });
}

/// A place for the events, kept apart from the vault.
fn events_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    (dir, file)
}

/// The run of `who` (a display name) this request belongs to.
fn asks_for(r: &Recorded, who: &str) -> bool {
    wire::all_text(&r.body).contains(&format!("You are the {who} for this project"))
}

/// A request of a run delegated by the Delivery Manager.
fn is_child(r: &Recorded) -> bool {
    wire::all_text(&r.body).contains("## Your task (from Delivery Manager)")
}

/// Another step: `list_files`, at the scripted price.
fn step(n: usize) -> Reply {
    wire::costing(
        wire::tools(
            "anthropic",
            Some("Looking around."),
            &[(&format!("t{n}"), "list_files", json!({}))],
        ),
        IN,
        OUT,
    )
}

fn answer(text: &str) -> Reply {
    wire::costing(wire::text("anthropic", text), IN, OUT)
}

/// Every run of `who` takes another step at every request (a run no `max_tool_calls` of 30 would
/// stop before it spent 30 times its budget); every other run answers at once.
fn runs_on(fake: &FakeModel, who: &'static str) {
    fake.respond_with(move |r, n| {
        if asks_for(r, who) {
            step(n)
        } else {
            answer("Nothing new.")
        }
    });
}

/// The stock vault with `frontmatter` added to the role `role`.
fn with_frontmatter(v: &TestVault, role: &str, frontmatter: &str) {
    let path = format!("roles/{role}.md");
    let text = v.read(&path);
    v.write(
        &path,
        &text.replacen("extends: _base\n", &format!("extends: _base\n{frontmatter}\n"), 1),
    );
}

/// Issue 49, item 2: the response that crosses the role's daily token budget is the run's last
/// step — its tool call does not run, no summary is asked for past the ceiling — the run is
/// recorded as `limit` naming the budget and the numbers, the person is told once, and the next
/// note waits for midnight (said once in the daily note).
#[test]
fn a_daily_token_budget_ends_the_run_at_the_step_after_it_is_crossed() {
    let fake = FakeModel::start();
    let (_events, told) = events_file();
    let v = vault_with(
        &fake,
        &format!(
            "{}{}",
            daemon_config("daily_token_budget = 1500"),
            notify_to(&told)
        ),
    );
    runs_on(&fake, "Delivery Manager");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "Tidy the blockers.");
    wait_until(T, "the run's record", || !v.records().is_empty());
    let rec = &v.records()[0];
    let why = "daily token budget of role `delivery` (1,800 of 1,500 tokens spent today)";
    assert_eq!(rec["outcome"], "limit", "{rec}");
    assert_eq!(rec["error"], format!("limit reached: {why}"));
    assert_eq!(
        rec["requests"], 3,
        "the third response crossed it: no fourth request"
    );
    assert_eq!(
        rec["tool_calls"].as_array().unwrap().len(),
        2,
        "the crossing response's call did not run"
    );
    assert!(
        fake.requests().iter().all(|r| !wire::tools_forbidden(&r.body)),
        "no summary request past the budget"
    );
    // The record is written before the run's daily section: wait for the line itself.
    let line = format!("**Outcome:** limit — limit reached: {why}");
    wait_until(T, "the run's outcome in the daily note", || {
        v.daily().contains(&line)
    });
    let state = v.state();
    assert_eq!(state["roles"]["delivery"]["tokens_today"], 1800);
    assert_eq!(state["global"]["tokens_today"], 1800);

    // The next note waits for midnight; the skip is said once in the daily note.
    v.write("agent/inbox/delivery/two.md", "And the risks.");
    wait_until(T, "the skip said", || {
        v.daily()
            .contains("Delivery Manager · skipped — daily token budget spent")
    });
    assert_eq!(fake.requests().len(), 3, "no request over the budget");
    assert_eq!(v.files_in("agent/inbox/delivery"), ["two.md"]);
    let status = stdout(&v.tabd(&["status"]));
    assert!(
        status.contains("delivery (Delivery Manager) — stopped: daily token budget spent"),
        "{status}"
    );

    // Another role runs; its `done` comes after anything the skip could have told.
    v.write("agent/inbox/risk/r.md", "Anything new?");
    wait_done(&told, "risk");
    let paused = of_kind(&told, "paused");
    assert_eq!(paused.len(), 1, "told once: {:?}", events(&told));
    assert_eq!(paused[0]["role"], "delivery");
    assert_eq!(paused[0]["title"], "Delivery Manager stopped for today");
    assert_eq!(
        paused[0]["message"],
        "Daily token budget spent; its work waits until midnight."
    );
}

/// Peer story 14 (multica#4076, agent-os#473, opencompany#331): a daily cap of $0.025 and a model
/// that costs $0.01 a call — a hard stop in the middle of the turn, one notification, and the cap
/// holds after the daemon restarts.
#[test]
fn a_daily_cost_budget_crossed_mid_run_holds_across_a_restart() {
    let fake = FakeModel::start();
    let (_events, told) = events_file();
    let v = vault_with(
        &fake,
        &format!(
            "{}{PRICES}{}",
            daemon_config("daily_cost_budget_usd = 0.025"),
            notify_to(&told)
        ),
    );
    runs_on(&fake, "Delivery Manager");
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "Tidy the blockers.");
    wait_until(T, "the run's record", || !v.records().is_empty());
    let rec = &v.records()[0];
    assert_eq!(rec["outcome"], "limit", "{rec}");
    assert_eq!(
        rec["error"],
        "limit reached: daily cost budget of role `delivery` ($0.030 of $0.025 spent today)"
    );
    assert_eq!(rec["requests"], 3);
    assert!((rec["usage"]["cost_usd"].as_f64().unwrap() - 0.03).abs() < 1e-9);
    wait_done(&told, "delivery");
    assert_eq!(of_kind(&told, "paused").len(), 1);

    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    drop(d);
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/two.md", "After the restart.");
    wait_until(T, "the skip said after the restart", || {
        v.daily()
            .contains("Delivery Manager · skipped — daily cost budget spent")
    });
    assert_eq!(fake.requests().len(), 3, "still no request over the budget");
    assert_eq!(v.files_in("agent/inbox/delivery"), ["two.md"]);
    v.write("agent/inbox/risk/r.md", "Anything new?");
    wait_done(&told, "risk");
    assert_eq!(
        of_kind(&told, "paused").len(),
        1,
        "not told again after the restart: {:?}",
        events(&told)
    );
}

/// A run killed (`kill -9`, here an abort at the point) right after the response that crossed
/// its budget was counted, before anything of its end was written: what it spent is in the day
/// already, so after the restart its note and the next one wait for midnight, and the person is
/// told once — the run that was killed never got to say it.
#[test]
fn a_run_killed_after_crossing_its_budget_leaves_the_day_spent() {
    let fake = FakeModel::start();
    let (_events, told) = events_file();
    let v = vault_with(
        &fake,
        &format!(
            "{}{}",
            daemon_config("daily_token_budget = 1500"),
            notify_to(&told)
        ),
    );
    runs_on(&fake, "Delivery Manager");
    v.write("agent/inbox/delivery/one.md", "Tidy the blockers.");
    run_to_abort(&v, v.command(&["fire", "delivery"]), "day-crossed");
    assert!(v.records().is_empty(), "killed before its record");
    assert_eq!(fake.requests().len(), 3);
    let state = v.state();
    assert_eq!(
        state["roles"]["delivery"]["tokens_today"], 1800,
        "every response it got is counted: {state}"
    );
    assert_eq!(state["global"]["tokens_today"], 1800);

    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/two.md", "After the crash.");
    wait_until(T, "the skip said", || {
        v.daily()
            .contains("Delivery Manager · skipped — daily token budget spent")
    });
    v.write("agent/inbox/risk/r.md", "Anything new?");
    wait_done(&told, "risk");
    assert_eq!(fake.requests().len(), 4, "only risk's");
    assert_eq!(v.files_in("agent/inbox/delivery"), ["one.md", "two.md"]);
    let paused = of_kind(&told, "paused");
    assert_eq!(paused.len(), 1, "{:?}", events(&told));
    assert_eq!(paused[0]["role"], "delivery");
}

/// Two roles running at the same time share one global budget: each counts what the other has
/// spent so far, so together they stop at it — each at its next step, at most one response in
/// flight each past it — and the person is told once for every role.
#[test]
fn the_global_budget_stops_two_roles_running_at_once_and_is_told_once() {
    let fake = FakeModel::start();
    let (_events, told) = events_file();
    let v = vault_with(
        &fake,
        &format!(
            "{}{}",
            daemon_config("global_daily_token_budget = 3000"),
            notify_to(&told)
        ),
    );
    // Each run's first request waits until both runs have asked: they go on side by side.
    let both = Gate::shut();
    let held = both.clone();
    fake.respond_with(move |r, n| {
        let first = wire::tool_results(&r.body).is_empty();
        match first {
            true => Reply::Held(held.clone(), Box::new(step(n))),
            false => step(n),
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "Tidy the blockers.");
    v.write("agent/inbox/risk/one.md", "Look for risks.");
    fake.wait_for_requests(2, T);
    both.open();
    wait_until(T, "both runs' records", || v.records().len() == 2);
    for rec in v.records() {
        assert_eq!(rec["outcome"], "limit", "{rec}");
        let error = rec["error"].as_str().unwrap();
        assert!(
            error.starts_with("limit reached: global daily token budget (")
                && error.ends_with(" of 3,000 tokens spent today by all roles)"),
            "{error}"
        );
    }
    let requests = fake.requests().len() as u64;
    assert!(
        (5..=6).contains(&requests),
        "the fifth response spends it; only the other run's request in flight may follow: {requests}"
    );
    let state = v.state();
    assert_eq!(
        state["global"]["tokens_today"].as_u64().unwrap(),
        requests * (IN + OUT)
    );
    wait_done(&told, "delivery");
    wait_done(&told, "risk");
    let paused = of_kind(&told, "paused");
    assert_eq!(paused.len(), 1, "told once for every role: {:?}", events(&told));
    assert_eq!(paused[0]["role"], "");
    assert_eq!(paused[0]["title"], "Every role stopped for today");
    assert_eq!(
        paused[0]["message"],
        "Global daily token budget spent; every role's work waits until midnight."
    );
}

/// A delegated child spends in its own role's day: when it crosses that role's budget it ends as
/// `limit` at its next step, its parent goes on with its answer, the parent's day counts what
/// the child spent, and the child's role is stopped for today — said once.
#[test]
fn a_delegated_child_crossing_its_roles_day_stops_there() {
    let fake = FakeModel::start();
    let (_events, told) = events_file();
    let v = vault_with(&fake, &format!("{}{}", daemon_config(""), notify_to(&told)));
    with_frontmatter(&v, "delivery", "can_delegate_to: [risk]");
    with_frontmatter(&v, "risk", "daily_token_budget: 1500");
    fake.respond_with(|r, n| {
        if is_child(r) {
            return step(n);
        }
        if asks_for(r, "Delivery Manager") && wire::tool_results(&r.body).is_empty() {
            let task = json!({"role": "risk", "task": "Look for new risks."});
            return wire::costing(
                wire::tools("anthropic", None, &[("d1", "delegate", task)]),
                IN,
                OUT,
            );
        }
        answer("Done; risk stopped for today.")
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "Ask risk to look.");
    wait_done(&told, "delivery");
    let records = v.records();
    let child = records.iter().find(|r| r["role"] == "risk").unwrap();
    let parent = records.iter().find(|r| r["role"] == "delivery").unwrap();
    assert_eq!(child["outcome"], "limit", "{child}");
    assert_eq!(
        child["error"],
        "limit reached: daily token budget of role `risk` (1,800 of 1,500 tokens spent today)"
    );
    assert_eq!(child["requests"], 3);
    assert_eq!(parent["outcome"], "ok", "{parent}");
    let state = v.state();
    assert_eq!(state["roles"]["risk"]["tokens_today"], 1800);
    assert_eq!(
        state["roles"]["delivery"]["tokens_today"],
        1800 + 2 * (IN + OUT),
        "the parent's day counts its child"
    );
    assert_eq!(state["global"]["tokens_today"], 1800 + 2 * (IN + OUT));
    let paused = of_kind(&told, "paused");
    assert_eq!(paused.len(), 1, "{:?}", events(&told));
    assert_eq!(paused[0]["title"], "Risk Manager stopped for today");

    v.write("agent/inbox/risk/r.md", "Anything new?");
    wait_until(T, "the risk note held back", || {
        v.daily()
            .contains("Risk Manager · skipped — daily token budget spent")
    });
    assert_eq!(fake.requests().len(), 5, "no request of risk today");
}

/// Through `tabd fire`: a child's spending counts against its parent's role, whose budget stops
/// the child at its next step and then the parent; `--over-budget` lifts the fired role's budget
/// for that run, every step of it.
#[test]
fn a_childs_spending_stops_it_and_its_parent_at_the_parents_budget() {
    let fake = FakeModel::start();
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.use_model(&fake, "anthropic", "");
    with_frontmatter(
        &v,
        "delivery",
        "can_delegate_to: [risk]\ndaily_token_budget: 2000",
    );
    fake.respond_with(|r, n| {
        if is_child(r) {
            return step(n);
        }
        if wire::tool_results(&r.body).is_empty() {
            let task = json!({"role": "risk", "task": "Look for new risks."});
            return wire::costing(
                wire::tools("anthropic", None, &[("d1", "delegate", task)]),
                IN,
                OUT,
            );
        }
        answer("never asked")
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let why = "limit reached: daily token budget of role `delivery` (2,400 of 2,000 tokens spent today)";
    let records = v.records();
    let child = records.iter().find(|r| r["role"] == "risk").unwrap();
    let parent = records.iter().find(|r| r["role"] == "delivery").unwrap();
    assert_eq!(
        (&child["outcome"], &child["error"]),
        (&json!("limit"), &json!(why))
    );
    assert_eq!(child["requests"], 3);
    assert_eq!(
        (&parent["outcome"], &parent["error"]),
        (&json!("limit"), &json!(why))
    );
    assert_eq!(parent["requests"], 1, "stopped before its next request");
    assert_eq!(fake.requests().len(), 4);

    // Run anyway: the lifted budget does not stop any step of the fired run.
    fake.respond_with(|r, n| match wire::tool_results(&r.body).len() {
        0..=2 => step(n),
        _ => answer("Three more looks, over budget as asked."),
    });
    let out = v.tabd(&["fire", "delivery", "--over-budget"]);
    assert!(out.status.success(), "{}", describe(&out));
    let last = v.records().pop().unwrap();
    assert_eq!(last["outcome"], "ok", "{last}");
    assert_eq!(last["requests"], 4);
}

/// An agent CLI reports what it spent only when it ends: then it is counted, the role whose day it
/// crossed is stopped for today (told once), and the next note does not start the CLI again.
#[test]
fn an_agent_clis_spending_counts_when_it_ends_and_the_next_note_waits() {
    let (_events, told) = events_file();
    let (v, log) = crate::agent_cli::setup(
        "claude",
        json!([["read_file", {"path": "project/brief.md"}]]),
        "ok",
        &notify_to(&told),
    );
    with_frontmatter_of(&v, "ops", "daily_token_budget: 1000");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/one.md", "Read the brief.");
    wait_done(&told, "ops");
    let rec = &v.records()[0];
    assert_eq!(rec["outcome"], "ok", "it ended by itself: {rec}");
    assert_eq!(
        v.state()["roles"]["ops"]["tokens_today"],
        1580,
        "the CLI's own report"
    );
    let paused = of_kind(&told, "paused");
    assert_eq!(paused.len(), 1, "{:?}", events(&told));
    assert_eq!(paused[0]["title"], "Ops stopped for today");
    v.write("agent/inbox/ops/two.md", "Again.");
    wait_until(T, "the skip said", || {
        v.daily().contains("Ops · skipped — daily token budget spent")
    });
    let runs = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(runs.lines().count(), 1, "the CLI ran once");
}

/// An agent CLI's calls are steps of its run: once its role's day is spent — here by the run it
/// delegated to, whose CLI reported its spending when it ended — its next call is refused, and
/// the run is recorded as `limit`, naming the budget.
#[test]
fn an_agent_clis_next_call_is_refused_once_its_day_is_spent() {
    let calls = json!([
        ["delegate", {"role": "risk", "task": "Look for new risks."}],
        ["read_file", {"path": "project/brief.md"}],
    ]);
    let (v, log) = crate::agent_cli::setup("claude", calls, "ok", "");
    with_frontmatter_of(&v, "ops", "daily_token_budget: 1000\ncan_delegate_to: [risk]");
    v.write("agent/inbox/ops/one.md", "Ask risk, then read the brief.");
    let out = v.tabd(&["fire", "ops"]);
    assert!(out.status.success(), "{}", describe(&out));
    let why = "daily token budget of role `ops` (1,580 of 1,000 tokens spent today)";
    let records = v.records();
    let parent = records.iter().find(|r| r["role"] == "ops").unwrap();
    assert_eq!(parent["outcome"], "limit", "{parent}");
    assert_eq!(parent["error"], format!("limit reached: {why}"));
    let child = records.iter().find(|r| r["role"] == "risk").unwrap();
    assert_eq!(child["outcome"], "ok", "{child}");
    let runs: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let parents = runs
        .iter()
        .find(|r| r["results"][0]["tool"] == "delegate" && r["results"][0]["error"] == false)
        .unwrap_or_else(|| panic!("{runs:?}"));
    let read = &parents["results"][1];
    assert_eq!(read["error"], true, "{read}");
    assert!(
        read["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("not run: the {why}")),
        "{read}"
    );
    assert_eq!(
        v.state()["roles"]["ops"]["tokens_today"],
        2 * 1580,
        "its own spending counted at its end, its child's as it ended"
    );
}

/// `setup`'s `ops` role (it has frontmatter of its own) with `line` added to it.
fn with_frontmatter_of(v: &TestVault, role: &str, line: &str) {
    let path = format!("roles/{role}.md");
    let text = v.read(&path);
    v.write(&path, &text.replacen("---\n", &format!("---\n{line}\n"), 1));
}
