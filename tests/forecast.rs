//! Issue 40, item 5: `tabd cost [--json]` forecasts each role's requests and dollars from its
//! schedule, its wake gate's history and its recent runs, beside its caps; `validate` warns when
//! the forecast crosses a per-day cap.

use chrono::{Duration, Utc};
use serde_json::{json, Value};

use crate::support::{describe, stdout, TestVault};

/// A vault with two scheduled roles and known records: `half` (every 30 minutes, a $0.25 daily
/// budget) ran 4 slots — 2 skipped, 2 at $0.01 / 2 requests and $0.03 / 4 requests — and one inbox
/// run at $0.05; `daily` (9:00 every day) has no record.
fn known() -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.write(
        "roles/half.md",
        "---\ndaily_cost_budget_usd: 0.25\n---\n# Half\n## Mission\nM.\n## Schedule\n*/30 * * * *\n",
    );
    v.write(
        "roles/daily.md",
        "# Daily\n## Mission\nM.\n## Schedule\n0 9 * * *\n",
    );
    let now = Utc::now();
    let at = |mins: i64| (now - Duration::minutes(mins)).to_rfc3339();
    let rec = |mins: i64, kind: &str, outcome: &str, cost: f64, requests: Option<u32>| {
        let mut r = json!({"run_id": format!("r{mins}"), "role": "half", "trigger": {"kind": kind, "notes": []},
            "started_at": at(mins), "ended_at": at(mins), "outcome": outcome, "error": null, "model": "m",
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                      "cost_usd": cost}, "tool_calls": [], "moved": []});
        if let Some(n) = requests {
            r["requests"] = json!(n);
        }
        r.to_string()
    };
    let lines = [
        rec(150, "schedule", "ok", 0.01, Some(2)),
        rec(120, "schedule", "skipped", 0.0, None),
        rec(90, "schedule", "ok", 0.03, Some(4)),
        rec(60, "schedule", "skipped", 0.0, None),
        rec(45, "inbox", "ok", 0.05, Some(1)),
    ];
    let file = format!(".tabd/runs/{}.jsonl", now.format("%Y-%m-%d"));
    v.write(&file, &(lines.join("\n") + "\n"));
    v
}

fn role<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["roles"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["role"] == name))
        .unwrap_or_else(|| panic!("no {name} in {json:#}"))
}

#[test]
fn tabd_cost_forecasts_from_schedule_gate_history_and_recent_runs() {
    let v = known();
    let out = v.tabd(&["cost", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let half = role(&json, "half");
    // 48 slots a day, half skipped, $0.02 and 3 requests a run (medians of the two runs).
    assert_eq!(half["slots_per_day"], 48.0, "{half:#}");
    assert_eq!(half["busiest_day_slots"], 48, "{half:#}");
    assert_eq!(half["skipped_share"], 0.5, "{half:#}");
    assert_eq!(half["runs_per_day"], 24.0, "{half:#}");
    assert_eq!(half["usd_per_run"], 0.02, "{half:#}");
    assert_eq!(half["requests_per_run"], 3.0, "{half:#}");
    assert_eq!(half["requests_per_day"], 72.0, "{half:#}");
    assert_eq!(half["usd_per_day"], 0.48, "{half:#}");
    assert_eq!(half["usd_per_month"], 14.4, "{half:#}");
    assert_eq!(half["other_usd_per_day"], 0.05, "{half:#}");
    assert_eq!(half["caps"]["daily_cost_budget_usd"], 0.25, "{half:#}");
    assert_eq!(half["basis"]["recent_runs"], 2, "{half:#}");
    assert_eq!(half["basis"]["scheduled_slots"], 4, "{half:#}");
    assert!(
        half["over"][0]
            .as_str()
            .unwrap()
            .contains("over daily_cost_budget_usd $0.250"),
        "{half:#}"
    );
    let daily = role(&json, "daily");
    assert_eq!(daily["slots_per_day"], 1.0, "{daily:#}");
    assert_eq!(daily["usd_per_run"], 0.021, "assumed: {daily:#}");
    assert_eq!(daily["usd_per_month"], 0.63, "{daily:#}");
    assert_eq!(
        daily["basis"]["assumed"].as_array().unwrap().len(),
        2,
        "{daily:#}"
    );
    assert_eq!(role(&json, "delivery")["slots_per_day"], 0.0, "an on-demand role");
    assert_eq!(json["total"]["usd_per_day"], 0.501, "{json:#}");

    let table = stdout(&v.tabd(&["cost"]));
    let line = table.lines().find(|l| l.starts_with("half ")).unwrap_or_default();
    for cell in [
        "48.0",
        "50%",
        "24.0",
        "$0.020",
        "72.0",
        "$0.480",
        "$14.40",
        "$0.050",
        "$0.250 a day",
    ] {
        assert!(line.contains(cell), "{cell} in {line}\n{table}");
    }
    assert!(
        table.contains("daily: assumed — no scheduled run on record"),
        "{table}"
    );
    assert!(
        table.contains("half: warning — forecast $0.480 on its busiest day"),
        "{table}"
    );
}

#[test]
fn validate_warns_when_a_forecast_crosses_a_daily_cap() {
    let v = known();
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning, not an error: {}",
        describe(&out)
    );
    assert!(
        text.contains(
            "roles/half.md: warning: forecast $0.480 on its busiest day (24 runs at $0.020 each) is over daily_cost_budget_usd $0.250"
        ),
        "{text}"
    );
    assert!(!text.contains("roles/daily.md: warning: forecast"), "{text}");
}

/// Issue 48: a free local model was forecast at $8 a month. A model with no price known forecasts
/// no dollars — `null` and why in the JSON, `unknown` in the table — and one priced at 0 in the
/// config forecasts $0; requests are forecast either way.
#[test]
fn an_unpriced_model_forecasts_no_dollars_and_a_free_one_zero() {
    let v = TestVault::new();
    let local = "timezone = \"UTC\"\n[provider]\nkind = \"openai\"\nmodel = \"qwen2.5:7b-instruct\"\n";
    v.set_config(local);
    let out = v.tabd(&["cost", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let comms = role(&json, "comms");
    assert!(comms["slots_per_day"].as_f64().unwrap() > 1.0, "{comms:#}");
    assert!(comms["requests_per_day"].as_f64().unwrap() > 1.0, "{comms:#}");
    for field in [
        "usd_per_run",
        "usd_per_day",
        "usd_per_month",
        "busiest_day_usd",
        "other_usd_per_day",
    ] {
        assert_eq!(comms[field], Value::Null, "{field}: {comms:#}");
    }
    assert!(
        comms["price_unknown"]
            .as_str()
            .unwrap()
            .contains("no price for model qwen2.5:7b-instruct"),
        "{comms:#}"
    );
    assert_eq!(json["total"]["usd_per_month"], Value::Null, "{json:#}");
    assert_eq!(
        json["total"]["price_unknown"],
        json!(["comms", "delivery", "product", "risk"]),
        "{json:#}"
    );
    let table = stdout(&v.tabd(&["cost"]));
    let line = table
        .lines()
        .find(|l| l.starts_with("comms "))
        .unwrap_or_default();
    assert!(line.contains("unknown") && !line.contains('$'), "{line}\n{table}");
    assert!(
        table.contains("comms, delivery, product, risk: price unknown — tabd knows no price"),
        "said once for the roles of one model: {table}"
    );

    v.set_config(&format!("{local}[prices.\"qwen2.5\"]\ninput = 0\noutput = 0\n"));
    let json: Value = serde_json::from_str(&stdout(&v.tabd(&["cost", "--json"]))).expect("JSON");
    let comms = role(&json, "comms");
    assert_eq!(comms["usd_per_run"], 0.0, "{comms:#}");
    assert_eq!(comms["usd_per_month"], 0.0, "{comms:#}");
    assert_eq!(comms["price_unknown"], Value::Null, "{comms:#}");
    assert_eq!(json["total"]["usd_per_month"], 0.0, "{json:#}");
    assert_eq!(json["total"]["price_unknown"], json!([]), "{json:#}");
    let table = stdout(&v.tabd(&["cost"]));
    let line = table.lines().find(|l| l.starts_with("all ")).unwrap_or_default();
    assert!(
        line.contains("$0") && !line.contains("unknown"),
        "{line}\n{table}"
    );
}
