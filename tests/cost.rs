//! What runs cost (issue 12, docs/spec.md §17): dollars in every log, cache lifetimes by schedule,
//! dollar budgets.

use std::time::Duration;

use crate::support::daemon::{daemon_config, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(20);

/// A config for `fake` with a priced model name (Sonnet 4.5: $3 in, $15 out per million).
fn priced(v: &TestVault, fake: &FakeModel, extra: &str) {
    v.set_config(&format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nmax_retries = 1\n{extra}",
        fake.anthropic_url()
    ));
}

#[test]
fn a_run_costs_dollars_and_every_log_says_so() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    priced(&v, &fake, "");
    fake.script([wire::text("anthropic", "done")]); // usage: 2,095 in, 503 out
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stdout(&out).contains("· $0.014"), "{}", describe(&out));
    let cost = v.records()[0]["usage"]["cost_usd"].as_f64().unwrap();
    let want = 2095.0 * 3.0 / 1e6 + 503.0 * 15.0 / 1e6;
    assert!((cost - want).abs() < 1e-9, "{cost} vs {want}");
    assert!(v.daily().contains("2,095 in / 503 out · $0.014"), "{}", v.daily());
    let status = stdout(&v.tabd(&["status"]));
    assert!(
        status.contains("last run:") && status.contains("· $0.014"),
        "{status}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&v.tabd(&["status", "--json"]))).unwrap();
    assert!((json["cost_today_usd"].as_f64().unwrap() - want).abs() < 1e-9);
}

#[test]
fn a_local_model_priced_at_zero_costs_nothing() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(
        &fake,
        "openai",
        "[prices.\"test-model\"]\ninput = 0\noutput = 0\n",
    );
    fake.script([wire::text("openai", "done")]);
    assert!(v.tabd(&["fire", "delivery"]).status.success());
    assert_eq!(v.records()[0]["usage"]["cost_usd"], 0.0);
    // Shown, not hidden: a person sees it cost nothing (issue 21).
    assert!(v.daily().contains(" · $0\n"), "{}", v.daily());
}

#[test]
fn frequent_roles_cache_for_an_hour_and_others_for_five_minutes() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    priced(&v, &fake, "");
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    // comms runs every 30 minutes in working hours: what one run caches, the next one reads.
    assert!(v.tabd(&["fire", "comms"]).status.success());
    assert!(v.tabd(&["fire", "delivery"]).status.success());
    let reqs = fake.requests();
    let ttl = |i: usize| reqs[i].body["system"][0]["cache_control"]["ttl"].clone();
    assert_eq!(ttl(0), "1h");
    assert_eq!(ttl(1), "5m");
    let context = &reqs[0].body["messages"][0]["content"][0];
    assert_eq!(
        context["cache_control"],
        serde_json::json!({"type": "ephemeral", "ttl": "5m"}),
        "the context changes between runs: only the system prompt is kept for an hour"
    );
}

#[test]
fn the_daily_cost_budget_stops_a_role() {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let fake = FakeModel::start();
    priced(&v, &fake, &daemon_config("daily_cost_budget_usd = 0.01"));
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "costs $0.014");
    wait_until(T, "the first run", || {
        v.files_in("agent/inbox/delivery/processed") == ["one.md"]
    });
    v.write("agent/inbox/delivery/two.md", "over the budget");
    wait_until(T, "the stop logged", || {
        v.daily()
            .contains("Delivery Manager · skipped — daily cost budget spent")
    });
    assert_eq!(fake.requests().len(), 1);
    assert!(
        v.read("agent/status.md")
            .contains("stopped: daily cost budget spent"),
        "{}",
        v.read("agent/status.md")
    );
}
