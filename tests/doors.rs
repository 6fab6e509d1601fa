//! Every ceiling holds from every door (docs/spec.md §21, issue 29): the session a door opens carries
//! the run's and the day's limits, the chain depth and the gate of parallel children, whether the
//! calls come from an API run or from an MCP client through `tabd mcp serve`.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_model::{canned, FakeModel, Recorded, Reply};
use crate::support::mcp_client::Client;
use crate::support::{describe, wire, TestVault};

/// A boss that may delegate to a worker, both on demand; the fake model prices its tokens
/// (Sonnet's: $3 in, $15 out per million) so dollars count.
fn vault(fake: &FakeModel, boss: &str, worker: &str, config: &str) -> TestVault {
    let v = TestVault::new();
    v.use_model(
        fake,
        "anthropic",
        &format!("[prices.\"test-model\"]\ninput = 3.0\noutput = 15.0\n{config}"),
    );
    v.unschedule_stock_roles();
    v.write(
        "roles/boss.md",
        &format!("---\ncan_delegate_to: [worker]\n{boss}---\n# Boss\n## Mission\nAsk the worker.\n## Tools\n- read_file\n"),
    );
    v.write(
        "roles/worker.md",
        &format!("---\n{worker}---\n# Worker\n## Mission\nAnswer.\n## Tools\n- read_file\n- trigger_role\n"),
    );
    v
}

/// Whether a request is the worker's (a child run's prompt carries its task).
fn is_worker(r: &Recorded) -> bool {
    wire::all_text(&r.body).contains("## Your task (from Boss)")
}

/// A reply whose usage is what the request really carries (a quarter token per byte), so that
/// what tabd estimates before sending bounds what it is charged.
fn honest(r: &Recorded, text: &str) -> Reply {
    let mut reply = canned::anthropic_text(text);
    let input = r.body.to_string().len() as u64 / 4;
    reply["usage"] = canned::anthropic_usage(input, 100, 0, 0);
    Reply::ok(reply)
}

/// Three `delegate` calls at once through one session hold `max_parallel_delegates: 1`: each
/// child starts only after the one before has been answered.
#[test]
fn parallel_children_are_bounded_per_session_not_per_call() {
    let fake = FakeModel::start();
    let v = vault(&fake, "max_parallel_delegates: 1\n", "", "");
    fake.respond_with(|r, _| honest(r, "done").delayed(Duration::from_millis(300)));
    let mut c = Client::start(&v, "boss");
    for id in 1..=3 {
        c.delegate(id);
    }
    for id in 1..=3 {
        assert_eq!(Client::result(&c.answer(id))["outcome"], "ok");
    }
    c.stop();
    let mut at: Vec<_> = fake
        .requests()
        .iter()
        .filter(|r| is_worker(r))
        .map(|r| r.at)
        .collect();
    at.sort();
    assert_eq!(at.len(), 3);
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(250),
            "a child started while another ran: {:?}",
            pair[1] - pair[0]
        );
    }
}

/// The boss's `max_cost_usd` holds over everything its children spend through `tabd mcp serve`
/// (an MCP client's session has the role's ceilings, like a run).
#[test]
fn the_session_cap_holds_over_children_from_an_mcp_client() {
    let fake = FakeModel::start();
    let v = vault(&fake, "max_cost_usd: 0.012\n", "", "");
    fake.respond_with(|r, _| honest(r, "done"));
    let mut c = Client::start(&v, "boss");
    let mut outcomes = Vec::new();
    for id in 1..=8 {
        c.delegate(id);
        outcomes.push(Client::result(&c.answer(id)));
    }
    c.stop();
    let spent: f64 = outcomes.iter().filter_map(|o| o["cost_usd"].as_f64()).sum();
    assert!(
        spent <= 0.012,
        "children spent ${spent:.4} against a $0.012 cap: {outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|o| o["outcome"] == "failed"
                && o["error"].as_str().is_some_and(|e| e.contains("max_cost_usd"))),
        "the cap stopped the later children: {outcomes:?}"
    );
}

/// A child is a run of its role: it is not started when that role's day is spent.
#[test]
fn a_childs_daily_limits_hold_through_any_door() {
    let fake = FakeModel::start();
    let v = vault(&fake, "", "max_runs_per_day: 1\n", "");
    fake.respond_with(|r, _| honest(r, "done"));
    let mut c = Client::start(&v, "boss");
    c.delegate(1);
    assert_eq!(Client::result(&c.answer(1))["outcome"], "ok");
    c.delegate(2);
    let second = Client::result(&c.answer(2));
    c.stop();
    assert_eq!(second["outcome"], "failed", "{second}");
    assert!(
        second["error"].as_str().unwrap().contains("max_runs_per_day"),
        "{second}"
    );
    assert_eq!(fake.requests().iter().filter(|r| is_worker(r)).count(), 1);
}

/// A child is part of its parent's chain: a parent started one hop deep, whose child triggers
/// the parent again, stops there under `max_chain_depth: 1` (the loop parent → child →
/// `trigger_role` parent once went on and on).
#[test]
fn a_child_carries_its_parents_chain_depth() {
    let fake = FakeModel::start();
    let v = vault(&fake, "", "", "[limits]\nmax_chain_depth = 1\n");
    fake.respond_with(|r, _| {
        let done = !wire::tool_results(&r.body).is_empty();
        match (is_worker(r), done) {
            (true, false) => wire::tools(
                "anthropic",
                Some("Back to the boss."),
                &[("t1", "trigger_role", json!({"role": "boss", "note": "Again."}))],
            ),
            (false, false) => wire::tools(
                "anthropic",
                Some("Ask."),
                &[("d1", "delegate", json!({"role": "worker", "task": "Look."}))],
            ),
            (_, true) => wire::text("anthropic", "done"),
        }
    });
    v.write(
        "agent/inbox/boss/from-someone.md",
        "---\nhops: 1\n---\nPlease look.\n",
    );
    let out = v.tabd(&["fire", "boss"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let worker_done = fake
        .requests()
        .into_iter()
        .find(|r| is_worker(r) && !wire::tool_results(&r.body).is_empty())
        .expect("the worker's second request");
    let results = wire::tool_results(&worker_done.body);
    assert!(
        results[0].2 && results[0].1.contains("max_chain_depth"),
        "{results:?}"
    );
    let inbox: Vec<String> = v.files_in("agent/inbox/boss");
    assert!(inbox.is_empty(), "no new note for the boss: {inbox:?}");
}
