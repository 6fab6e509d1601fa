//! Issue 40, item 4: `triage_model`. A scheduled run asks the cheaper model first with the same
//! prompt and tools: no tool call ends the run `triaged`; a tool call hands the run to the
//! role's model (the call is not run; the role's model is told what the first look wanted); a
//! first look that fails hands it over too. A manual fire never asks the triage model.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::{canned, FakeModel, Recorded, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(30);
const CHEAP: &str = "cheap-model";
const MAIN: &str = "test-model";

/// A vault whose `ticker` role runs every second (its first slot passes the wake gate, the
/// later ones skip: nothing changes) with `triage_model: cheap-model`; both models priced.
fn ticker(fake: &FakeModel) -> TestVault {
    let prices = "[prices.\"cheap-model\"]\ninput = 1.0\noutput = 5.0\n[prices.\"test-model\"]\ninput = 3.0\noutput = 15.0\n";
    let v = vault_with(fake, &format!("{}{prices}", daemon_config("")));
    v.write("project/ticker.md", "The ticker's notes.");
    v.write(
        "roles/ticker.md",
        "---\ntriage_model: cheap-model\n---\n# Ticker\n## Mission\nWatch the ticker.\n\
         ## Context Files\n- project/ticker.md\n## Tools\n- read_file\n## Schedule\n* * * * * *\n",
    );
    v
}

/// The body of a reply, answered as the model it was asked of (as Anthropic names itself).
fn as_model(req: &Recorded, mut body: Value) -> Reply {
    body["model"] = req.body["model"].clone();
    Reply::ok(body)
}

fn model_of(r: &Recorded) -> &str {
    r.body["model"].as_str().unwrap_or_default()
}

/// The first scheduled run's record, once it is written (the daemon stopped after it).
fn first_run(v: &TestVault) -> Value {
    let run = || {
        v.records()
            .into_iter()
            .find(|r| r["role"] == "ticker" && r["outcome"] != "skipped")
    };
    {
        let _d = Daemon::start(v);
        // Its record, then its daily section: the daemon is killed once both are written.
        wait_until(T, "the ticker's first run", || {
            run().is_some() && v.daily().contains(" · Ticker · schedule\n")
        });
    }
    run().unwrap_or_default()
}

/// The triage model answers text only: one request, to it; the run ends `triaged` in the record,
/// the daily note, `tabd runs` and `tabd status`, at its price. A manual fire skips the triage.
#[test]
fn a_first_look_that_calls_no_tool_ends_the_run_triaged() {
    let fake = FakeModel::start();
    fake.respond_with(|req, _| as_model(req, canned::anthropic_text("Nothing new on the ticker.")));
    let v = ticker(&fake);
    let rec = first_run(&v);
    let asked: Vec<Recorded> = fake.requests();
    assert_eq!(asked.len(), 1, "one request while the gate stays shut");
    assert_eq!(model_of(&asked[0]), CHEAP);
    assert!(
        !asked[0].body["tools"].as_array().unwrap().is_empty(),
        "the role's tools are offered"
    );
    assert_eq!(rec["outcome"], "ok", "{rec}");
    assert_eq!(rec["ended"], "triaged", "{rec}");
    assert_eq!(rec["model"], CHEAP, "{rec}");
    assert_eq!(rec["triage"]["verdict"], "nothing", "{rec}");
    assert_eq!(rec["requests"], 1, "{rec}");
    // 2,095 in / 503 out at $1 / $5 per million.
    let cost = rec["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - (2095.0 * 1.0 + 503.0 * 5.0) / 1e6).abs() < 1e-6, "{rec}");
    let daily = v.daily();
    assert!(
        daily.contains("- **Outcome:** triaged — cheap-model found nothing that needs doing"),
        "{daily}"
    );
    assert!(daily.contains("Nothing new on the ticker."), "{daily}");
    let runs = stdout(&v.tabd(&["runs"]));
    assert!(
        runs.lines()
            .any(|l| l.contains("ticker") && l.contains("triaged")),
        "{runs}"
    );
    let status = stdout(&v.tabd(&["status", "ticker"]));
    assert!(status.contains("triaged"), "{status}");

    let out = v.tabd(&["fire", "ticker"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let asked = fake.requests();
    assert_eq!(asked.len(), 2);
    assert_eq!(
        model_of(&asked[1]),
        MAIN,
        "a manual run asks the role's model only"
    );
}

/// The triage model calls a tool: the call is not run, the next request goes to the role's model
/// with the same prompt and what the first look wanted; the record and the daily note name both
/// models and both costs.
#[test]
fn a_first_look_that_calls_a_tool_hands_the_run_to_the_roles_model() {
    let fake = FakeModel::start();
    fake.respond_with(|req, _| {
        if model_of(req) == CHEAP {
            as_model(
                req,
                canned::anthropic_tool_use(
                    Some("The ticker moved; reading it."),
                    &[("toolu_t1", "read_file", json!({"path": "project/ticker.md"}))],
                ),
            )
        } else {
            as_model(req, canned::anthropic_text("Looked; all in order."))
        }
    });
    let v = ticker(&fake);
    let rec = first_run(&v);
    let asked = fake.requests();
    assert_eq!(asked.len(), 2, "the first look, then the role's model");
    assert_eq!((model_of(&asked[0]), model_of(&asked[1])), (CHEAP, MAIN));
    assert_eq!(
        asked[0].body["system"], asked[1].body["system"],
        "the same prompt"
    );
    assert_eq!(asked[0].body["tools"], asked[1].body["tools"], "the same tools");
    let main = wire::all_text(&asked[1].body);
    assert!(main.contains("cheaper triage model (cheap-model)"), "{main}");
    assert!(main.contains("It said: The ticker moved; reading it."), "{main}");
    assert!(
        main.contains("- read_file {\"path\":\"project/ticker.md\"}"),
        "{main}"
    );
    assert!(
        wire::tool_results(&asked[1].body).is_empty(),
        "the first look's call was not run"
    );
    assert_eq!(rec["ended"], Value::Null, "{rec}");
    assert_eq!(rec["model"], MAIN, "{rec}");
    assert_eq!(rec["tool_calls"], json!([]), "{rec}");
    assert_eq!(rec["triage"]["verdict"], "escalated", "{rec}");
    assert_eq!(rec["triage"]["wanted"], json!(["read_file"]), "{rec}");
    assert_eq!(rec["requests"], 2, "the first look and the role's model's: {rec}");
    // The canned tool call is 472 in / 89 out, the text 2,095 / 503.
    let first = (472.0 * 1.0 + 89.0 * 5.0) / 1e6;
    let second = (2095.0 * 3.0 + 503.0 * 15.0) / 1e6;
    let cost = rec["usage"]["cost_usd"].as_f64().unwrap();
    assert!(
        (rec["triage"]["usage"]["cost_usd"].as_f64().unwrap() - first).abs() < 1e-6,
        "{rec}"
    );
    assert!((cost - first - second).abs() < 1e-6, "both costs count: {rec}");
    assert_eq!(rec["usage"]["input_tokens"], 472 + 2095, "{rec}");
    let daily = v.daily();
    assert!(
        daily.contains(
            "- **Models:** triage cheap-model (wanted read_file, not run) <$0.001 → test-model $0.014"
        ),
        "{daily}"
    );
}

/// A triage model that fails (a 404: no such model) does not lose the routine check: the role's
/// model does the run, told the first look could not be used; the record says why.
#[test]
fn a_first_look_that_fails_hands_the_run_to_the_roles_model() {
    let fake = FakeModel::start();
    fake.respond_with(|req, _| {
        if model_of(req) == CHEAP {
            wire::error("anthropic", 404, "not_found_error", "model: cheap-model")
        } else {
            as_model(req, canned::anthropic_text("Checked the ticker."))
        }
    });
    let v = ticker(&fake);
    let rec = first_run(&v);
    let asked = fake.requests();
    assert_eq!(asked.len(), 2, "{}", v.daily());
    assert_eq!(model_of(&asked[1]), MAIN);
    assert!(wire::all_text(&asked[1].body).contains("could not be used"));
    assert_eq!(rec["outcome"], "ok", "{rec}");
    assert_eq!(rec["model"], MAIN, "{rec}");
    assert_eq!(rec["triage"]["verdict"], "failed", "{rec}");
    assert!(rec["triage"]["error"].as_str().unwrap().contains("404"), "{rec}");
    assert!(
        v.daily()
            .contains("- **Models:** triage cheap-model (could not be used: "),
        "{}",
        v.daily()
    );
}

/// `validate` says at the setting's line when `triage_model` cannot work as written; a bad value
/// is an error there.
#[test]
fn validate_checks_triage_model_at_its_line() {
    let fake = FakeModel::start();
    let v = ticker(&fake);
    v.write(
        "roles/same.md",
        "---\nextends: _base\ntriage_model: test-model\n---\n# Same\n## Mission\nM.\n",
    );
    v.write(
        "roles/unpriced.md",
        "---\nextends: _base\ntriage_model: claude-haiku-9\n---\n# Unpriced\n## Mission\nM.\n",
    );
    v.write(
        "roles/spaced.md",
        "---\ntriage_model: two words\n---\n# Spaced\n## Mission\nM.\n",
    );
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        text.contains("roles/same.md:3: warning: `triage_model` is the role's own model (test-model)"),
        "{text}"
    );
    assert!(
        text.contains("roles/spaced.md:2: error: `triage_model` must be a model name of one word"),
        "{text}"
    );
    assert!(
        !text.contains("roles/ticker.md:2"),
        "cheap-model has a price: {text}"
    );
    // The anthropic kind knows its prices: a name it has none for is said.
    assert!(
        text.contains("roles/unpriced.md:3: warning: `triage_model` claude-haiku-9 has no price tabd knows"),
        "{text}"
    );
}

/// The same hand-over on the OpenAI-compatible wire (an Ollama pair, say): the first look's
/// call is not sent back as a call (the fake checks every tool result answers a call), the role's
/// model gets the note in its prompt.
#[test]
fn on_the_openai_wire_a_first_look_hands_over_the_same_way() {
    let fake = FakeModel::start();
    fake.respond_with(|req, _| {
        let mut body = if model_of(req) == CHEAP {
            canned::openai_tool_calls(
                None,
                &[("call_t1", "read_file", json!({"path": "project/ticker.md"}))],
            )
        } else {
            canned::openai_text("Looked; all in order.")
        };
        body["model"] = req.body["model"].clone();
        Reply::ok(body)
    });
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.use_model(&fake, "openai", &daemon_config(""));
    v.write("project/ticker.md", "The ticker's notes.");
    v.write(
        "roles/ticker.md",
        "---\ntriage_model: cheap-model\n---\n# Ticker\n## Mission\nWatch the ticker.\n\
         ## Context Files\n- project/ticker.md\n## Tools\n- read_file\n## Schedule\n* * * * * *\n",
    );
    let rec = first_run(&v);
    let asked = fake.requests();
    assert_eq!(asked.len(), 2, "{}", v.daily());
    assert_eq!((model_of(&asked[0]), model_of(&asked[1])), (CHEAP, MAIN));
    let main = wire::all_text(&asked[1].body);
    assert!(
        main.contains("- read_file {\"path\":\"project/ticker.md\"}"),
        "{main}"
    );
    assert!(wire::tool_results(&asked[1].body).is_empty(), "{main}");
    assert_eq!(rec["triage"]["verdict"], "escalated", "{rec}");
    assert_eq!(rec["model"], MAIN, "{rec}");
}
