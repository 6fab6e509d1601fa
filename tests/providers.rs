//! Both providers against the fake model server: exact wire JSON, usage, retries, errors.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tabd::base::environment::Env;
use tabd::capabilities::provider::{
    self, Block, FailureClass, Message, Provider, ProviderError, Request, RetryPolicy, StopReason,
};
use tabd::setup::config;
use tokio::time::Instant;

use crate::support::fake_model::{canned, FakeModel, Reply};

const KEY: &str = "sk-test-SECRET-key-never-logged";

fn make(kind: &str, url: &str, extra: &str) -> std::sync::Arc<dyn Provider> {
    let text =
        format!("[provider]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"test-model\"\n{extra}");
    let cfg = config::parse(&text, Path::new("t.toml"), &Env::default(), None)
        .unwrap()
        .provider;
    let env = Env::from_pairs([("ANTHROPIC_API_KEY", KEY), ("OPENAI_API_KEY", KEY)]);
    provider::build(&cfg, &env).unwrap()
}

fn fast(retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries: retries,
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
        progress: Default::default(),
    }
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

fn read_file_spec() -> tabd::base::calls::ToolSpec {
    tabd::capabilities::tools::all_specs()
        .into_iter()
        .find(|s| s.name == "read_file")
        .unwrap()
}

fn request() -> Request {
    Request {
        model: "test-model".into(),
        system: "You are the Delivery Manager for this project.".into(),
        messages: vec![Message::user(vec![
            Block::Text {
                text: "## Context\nproject/timeline.md".into(),
                cache: true,
            },
            Block::Text {
                text: "## Trigger\nschedule".into(),
                cache: false,
            },
        ])],
        tools: vec![read_file_spec()],
        max_tokens: 1024,
        temperature: None,
        thinking_budget: 0,
        tool_choice_none: false,
        cache_ttl: None,
    }
}

/// Runs one tool round trip: the model asks for read_file, gets a result, then ends its turn.
async fn round_trip(p: &dyn Provider, fake: &FakeModel) -> (provider::Response, provider::Response) {
    let mut req = request();
    let first = provider::complete(p, &req, &fast(0), deadline()).await.unwrap();
    assert_eq!(first.stop, StopReason::ToolUse);
    let (id, name, input) = first
        .tool_uses()
        .next()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.clone()))
        .unwrap();
    assert_eq!(
        (name.as_str(), input),
        ("read_file", json!({"path": "project/timeline.md"}))
    );
    req.messages.push(first.message.clone());
    req.messages.push(Message::user(vec![Block::ToolResult {
        tool_use_id: id,
        content: "# Timeline".into(),
        is_error: false,
    }]));
    let second = provider::complete(p, &req, &fast(0), deadline()).await.unwrap();
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    (first, second)
}

#[tokio::test]
async fn anthropic_tool_round_trip_sends_exact_json() {
    let fake = FakeModel::start();
    fake.script([
        Reply::ok(canned::anthropic_tool_use(
            Some("Checking the timeline."),
            &[("toolu_01", "read_file", json!({"path": "project/timeline.md"}))],
        )),
        Reply::ok(canned::anthropic_text("All on track.")),
    ]);
    let p = make("anthropic", &fake.anthropic_url(), "");
    let (first, second) = round_trip(p.as_ref(), &fake).await;
    assert_eq!(first.text(), "Checking the timeline.");
    assert_eq!(second.text(), "All on track.");
    assert_eq!(second.stop, StopReason::EndTurn);

    let reqs = fake.requests();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].headers["x-api-key"], KEY);
    assert_eq!(reqs[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(reqs[0].headers["content-type"], "application/json");
    let schema = read_file_spec().input_schema;
    assert_eq!(
        reqs[0].body,
        json!({
            "model": "test-model",
            "max_tokens": 1024,
            "system": [{ "type": "text", "text": "You are the Delivery Manager for this project.", "cache_control": { "type": "ephemeral" } }],
            "messages": [{ "role": "user", "content": [
                { "type": "text", "text": "## Context\nproject/timeline.md", "cache_control": { "type": "ephemeral" } },
                { "type": "text", "text": "## Trigger\nschedule" }
            ]}],
            "tools": [{ "name": "read_file", "description": read_file_spec().description, "input_schema": schema }]
        })
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(
        msgs[1]["content"],
        canned::anthropic_tool_use(
            Some("Checking the timeline."),
            &[("toolu_01", "read_file", json!({"path": "project/timeline.md"}))]
        )["content"]
    );
    // docs/spec.md §17: after a run's first request, a breakpoint on the newest message, so the next
    // request reads the conversation so far from cache.
    assert_eq!(
        msgs[2],
        json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "toolu_01", "content": "# Timeline",
                                              "cache_control": { "type": "ephemeral" } }] })
    );
}

/// The system prompt's breakpoint carries the run's TTL, the context's and the conversation's
/// 5 minutes (1h before 5m, as the API requires), and a request never has more than 4.
#[tokio::test]
async fn cache_breakpoints_carry_the_ttl_and_stay_within_four() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    let p = make("anthropic", &fake.anthropic_url(), "");
    let mut req = request();
    req.cache_ttl = Some(tabd::base::cost::CacheTtl::OneHour);
    for i in 0..4 {
        req.messages.push(Message {
            speaker: provider::Speaker::Assistant,
            content: vec![Block::ToolUse {
                id: format!("t{i}"),
                name: "read_file".into(),
                input: json!({"path": "a.md"}),
            }],
            raw: None,
        });
        req.messages.push(Message::user(vec![Block::ToolResult {
            tool_use_id: format!("t{i}"),
            content: format!("result {i}"),
            is_error: false,
        }]));
    }
    provider::complete(p.as_ref(), &req, &fast(0), deadline())
        .await
        .unwrap();
    let body = &fake.requests()[0].body;
    let text = body.to_string();
    let ttl_5m = r#""cache_control":{"ttl":"5m","type":"ephemeral"}"#;
    assert_eq!(
        text.matches("cache_control").count(),
        3,
        "system, context, newest message: {text}"
    );
    assert_eq!(
        text.matches(ttl_5m).count(),
        2,
        "context and conversation: {text}"
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "5m"})
    );
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        last["content"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "5m"})
    );
}

#[tokio::test]
async fn openai_tool_round_trip_sends_exact_json() {
    let fake = FakeModel::start();
    fake.script([
        Reply::ok(canned::openai_tool_calls(
            None,
            &[("call_abc", "read_file", json!({"path": "project/timeline.md"}))],
        )),
        Reply::ok(canned::openai_text("All on track.")),
    ]);
    let p = make("openai", &fake.openai_url(), "");
    let (_, second) = round_trip(p.as_ref(), &fake).await;
    assert_eq!(second.text(), "All on track.");
    let reqs = fake.requests();
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        reqs[0].body,
        json!({
            "model": "test-model",
            "max_tokens": 1024,
            "stream": false,
            "messages": [
                { "role": "system", "content": "You are the Delivery Manager for this project." },
                { "role": "user", "content": "## Context\nproject/timeline.md\n\n## Trigger\nschedule" }
            ],
            "tools": [{ "type": "function", "function": { "name": "read_file", "description": read_file_spec().description, "parameters": read_file_spec().input_schema } }]
        })
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[2],
        json!({ "role": "assistant", "content": null, "tool_calls": [
        { "id": "call_abc", "type": "function", "function": { "name": "read_file", "arguments": "{\"path\":\"project/timeline.md\"}" } }] })
    );
    assert_eq!(
        msgs[3],
        json!({ "role": "tool", "tool_call_id": "call_abc", "content": "# Timeline" })
    );
}

#[tokio::test]
async fn usage_with_cache_fields() {
    let fake = FakeModel::start();
    let mut body = canned::anthropic_text("ok");
    body["usage"] = canned::anthropic_usage(120, 45, 9800, 300);
    let mut oa = canned::openai_text("ok");
    oa["usage"] = canned::openai_usage(1000, 50, 800);
    fake.script([Reply::ok(body), Reply::ok(oa)]);
    let r = provider::complete(
        make("anthropic", &fake.anthropic_url(), "").as_ref(),
        &request(),
        &fast(0),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.cache_read_tokens,
            r.usage.cache_write_tokens
        ),
        (120, 45, 9800, 300)
    );
    assert_eq!(r.usage.total(), 120 + 45 + 9800 + 300);
    let r = provider::complete(
        make("openai", &fake.openai_url(), "").as_ref(),
        &request(),
        &fast(0),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.cache_read_tokens
        ),
        (200, 50, 800)
    );
}

#[tokio::test]
async fn retries_429_honouring_retry_after_then_529_then_dropped_connection() {
    for kind in ["anthropic", "openai"] {
        let fake = FakeModel::start();
        let (err_body, ok_body) = match kind {
            "anthropic" => (
                canned::anthropic_error(
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
                canned::anthropic_text("done"),
            ),
            _ => (
                canned::openai_error("rate_limit_exceeded", "Rate limit reached for requests"),
                canned::openai_text("done"),
            ),
        };
        fake.script([
            Reply::status(429, err_body).with_header("retry-after", "1"),
            Reply::status(529, canned::anthropic_error("overloaded_error", "Overloaded")),
            Reply::DropMidBody,
            Reply::ok(ok_body),
        ]);
        let url = if kind == "anthropic" {
            fake.anthropic_url()
        } else {
            fake.openai_url()
        };
        let r = provider::complete(make(kind, &url, "").as_ref(), &request(), &fast(4), deadline())
            .await
            .unwrap();
        assert_eq!(r.text(), "done");
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 4, "{kind}: three failures then success");
        let waited = reqs[1].at - reqs[0].at;
        assert!(
            waited >= Duration::from_millis(990),
            "{kind}: retry-after 1s honoured, waited {waited:?}"
        );
    }
}

#[tokio::test]
async fn no_retry_on_400_or_401_and_the_message_is_surfaced() {
    let fake = FakeModel::start();
    fake.script([
        Reply::status(
            400,
            canned::anthropic_error(
                "invalid_request_error",
                "messages: text content blocks must be non-empty",
            ),
        ),
        Reply::status(
            401,
            canned::anthropic_error("authentication_error", "invalid x-api-key"),
        ),
    ]);
    let p = make("anthropic", &fake.anthropic_url(), "");
    let e = provider::complete(p.as_ref(), &request(), &fast(4), deadline())
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert_eq!(e.class(), FailureClass::RunFailure);
    assert!(
        e.to_string().contains("text content blocks must be non-empty"),
        "{e}"
    );
    let e = provider::complete(p.as_ref(), &request(), &fast(4), deadline())
        .await
        .unwrap_err();
    assert_eq!(e.class(), FailureClass::Outage);
    let msg = e.to_string();
    assert!(
        msg.contains("anthropic: HTTP 401: invalid x-api-key") && msg.contains("check it"),
        "{msg}"
    );
    assert!(!msg.contains(KEY), "the key never appears in errors");
    assert_eq!(fake.requests().len(), 2, "one request each: no retries");

    let fake = FakeModel::start();
    fake.script([Reply::status(
        400,
        canned::openai_error("invalid_request_error", "Invalid 'messages[1].content'"),
    )]);
    let e = provider::complete(
        make("openai", &fake.openai_url(), "").as_ref(),
        &request(),
        &fast(4),
        deadline(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("Invalid 'messages[1].content'"), "{e}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn spend_limit_429_is_never_retried() {
    let fake = FakeModel::start();
    fake.script([Reply::status(
        429,
        canned::openai_error("insufficient_quota", "You exceeded your current quota"),
    )]);
    let e = provider::complete(
        make("openai", &fake.openai_url(), "").as_ref(),
        &request(),
        &fast(4),
        deadline(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("spend limit or quota"), "{e}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn per_request_timeout_and_retries_stop_at_the_deadline() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("late")).delayed(Duration::from_secs(3)));
    let p = make("anthropic", &fake.anthropic_url(), "timeout_s = 1\n");
    let e = provider::complete(p.as_ref(), &request(), &fast(0), deadline())
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("no answer within 1s"), "{e}");

    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::status(503, json!({"error": {"message": "down"}})));
    let p = make("anthropic", &fake.anthropic_url(), "");
    let started = std::time::Instant::now();
    let policy = RetryPolicy {
        max_retries: 100,
        min_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(200),
        progress: Default::default(),
    };
    let e = provider::complete(
        p.as_ref(),
        &request(),
        &policy,
        Instant::now() + Duration::from_millis(2000),
    )
    .await
    .unwrap_err();
    // Even when the deadline falls during a retry, the error is the failure that was retried.
    assert_eq!(e.status(), Some(503), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "gave up at the deadline, not after 100 retries"
    );
    assert!(fake.requests().len() < 20);
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    let fake = FakeModel::start();
    fake.script([
        Reply::Raw(200, "{\"id\": \"msg_1\", \"content\": [".into()),
        Reply::Raw(200, "<html>502 Bad Gateway</html>".into()),
    ]);
    let p = make("anthropic", &fake.anthropic_url(), "");
    let e = provider::complete(p.as_ref(), &request(), &fast(0), deadline())
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("anthropic: the response could not be read: not JSON"),
        "{e}"
    );
    let p = make("openai", &fake.openai_url(), "");
    let e = provider::complete(p.as_ref(), &request(), &fast(0), deadline())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("<html>502"), "{e}");
    let fake = FakeModel::start();
    fake.script([Reply::ok(json!({"object": "chat.completion", "choices": []}))]);
    let e = provider::complete(
        make("openai", &fake.openai_url(), "").as_ref(),
        &request(),
        &fast(0),
        deadline(),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("no `choices`"), "{e}");
}

#[tokio::test]
async fn thinking_blocks_are_passed_back_intact() {
    let fake = FakeModel::start();
    let thinking = json!({ "type": "thinking", "thinking": "The timeline slipped; check blockers.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" });
    let first = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [thinking, { "type": "tool_use", "id": "toolu_9", "name": "read_file", "input": { "path": "project/timeline.md" } }],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": canned::anthropic_usage(10, 10, 0, 0)
    });
    fake.script([Reply::ok(first.clone()), Reply::ok(canned::anthropic_text("ok"))]);
    let p = make("anthropic", &fake.anthropic_url(), "thinking_budget = 2048\n");
    let mut req = request();
    req.thinking_budget = 2048;
    req.temperature = Some(0.2);
    let r = provider::complete(p.as_ref(), &req, &fast(0), deadline())
        .await
        .unwrap();
    assert!(
        matches!(&r.message.content[0], Block::Thinking { text, .. } if text.contains("timeline slipped"))
    );
    req.messages.push(r.message.clone());
    req.messages.push(Message::user(vec![Block::ToolResult {
        tool_use_id: "toolu_9".into(),
        content: "x".into(),
        is_error: false,
    }]));
    provider::complete(p.as_ref(), &req, &fast(0), deadline())
        .await
        .unwrap();
    let reqs = fake.requests();
    assert_eq!(
        reqs[0].body["thinking"],
        json!({ "type": "enabled", "budget_tokens": 2048 })
    );
    assert_eq!(reqs[0].body["max_tokens"], 1024 + 2048);
    assert!(
        reqs[0].body.get("temperature").is_none(),
        "thinking requires the default temperature"
    );
    assert_eq!(
        reqs[1].body["messages"][1]["content"], first["content"],
        "echoed unchanged, signature included"
    );
}

#[tokio::test]
async fn adaptive_thinking_is_learned_from_the_api() {
    let fake = FakeModel::start();
    fake.script([
        Reply::status(
            400,
            canned::anthropic_error(
                "invalid_request_error",
                "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive instead.",
            ),
        ),
        Reply::ok(canned::anthropic_text("ok")),
        Reply::ok(canned::anthropic_text("ok again")),
    ]);
    let p = make("anthropic", &fake.anthropic_url(), "");
    let mut req = request();
    req.thinking_budget = 4000;
    provider::complete(p.as_ref(), &req, &fast(0), deadline())
        .await
        .unwrap();
    provider::complete(p.as_ref(), &req, &fast(0), deadline())
        .await
        .unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs[0].body["thinking"]["type"], "enabled");
    assert_eq!(reqs[1].body["thinking"], json!({ "type": "adaptive" }));
    assert_eq!(
        reqs[2].body["thinking"],
        json!({ "type": "adaptive" }),
        "remembered"
    );
}

#[tokio::test]
async fn openai_leniency_with_local_servers() {
    let fake = FakeModel::start();
    fake.script([Reply::ok(json!({
        "model": "qwen2.5-coder",
        "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "",
            "reasoning_content": "I should read the file.",
            "tool_calls": [
                { "type": "function", "function": { "name": "read_file", "arguments": "{\"path\": \"a.md\"" } },
                { "id": "", "type": "function", "function": { "name": "list_files", "arguments": { "path": "project" } } },
                { "id": "call_3", "type": "function", "function": { "name": "list_files", "arguments": "" } }
            ] } }]
    }))]);
    let r = provider::complete(
        make("openai", &fake.openai_url(), "").as_ref(),
        &request(),
        &fast(0),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(
        r.stop,
        StopReason::ToolUse,
        "tool_calls with finish_reason stop still means tool use"
    );
    let calls: Vec<(String, String, Value)> = r
        .tool_uses()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.clone()))
        .collect();
    assert_eq!(calls.len(), 3);
    assert!(
        calls[0].0.starts_with("call_tabd_")
            && calls[1].0.starts_with("call_tabd_")
            && calls[0].0 != calls[1].0,
        "made-up ids"
    );
    assert_eq!(
        calls[0].2,
        json!("{\"path\": \"a.md\""),
        "invalid JSON kept as a string for the tool layer to refuse"
    );
    assert_eq!(
        calls[1].2,
        json!({"path": "project"}),
        "object arguments (Ollama) accepted"
    );
    assert_eq!(calls[2].2, json!({}), "empty arguments are an empty object");
    assert!(
        matches!(&r.message.content[0], Block::Thinking { text, .. } if text == "I should read the file.")
    );
    assert_eq!(r.usage.total(), 0, "missing usage counts as zero, not a crash");
}

#[tokio::test]
async fn missing_key_is_an_outage_with_advice_and_no_request() {
    let fake = FakeModel::start();
    let text = format!(
        "[provider]\nkind = \"anthropic\"\nbase_url = \"{}\"\n",
        fake.anthropic_url()
    );
    let cfg = config::parse(&text, Path::new("t.toml"), &Env::default(), None)
        .unwrap()
        .provider;
    let p = provider::build(&cfg, &Env::default()).unwrap();
    let e = provider::complete(p.as_ref(), &request(), &fast(3), deadline())
        .await
        .unwrap_err();
    assert_eq!(e.class(), FailureClass::Outage);
    assert!(e.to_string().contains("set ANTHROPIC_API_KEY"), "{e}");
    assert!(fake.requests().is_empty());
    // A local OpenAI-compatible server needs no key: no Authorization header is sent.
    fake.script([Reply::ok(canned::openai_text("hi"))]);
    let text = format!(
        "[provider]\nkind = \"openai\"\nbase_url = \"{}\"\n",
        fake.openai_url()
    );
    let cfg = config::parse(&text, Path::new("t.toml"), &Env::default(), None)
        .unwrap()
        .provider;
    let p = provider::build(&cfg, &Env::default()).unwrap();
    provider::complete(p.as_ref(), &request(), &fast(0), deadline())
        .await
        .unwrap();
    assert!(!fake.requests()[0].headers.contains_key("authorization"));
}

#[tokio::test]
async fn connection_refused_is_an_outage() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let e = provider::complete(
        make("anthropic", &url, "").as_ref(),
        &request(),
        &fast(1),
        deadline(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.class(), FailureClass::Outage);
    assert!(e.to_string().contains("cannot reach"), "{e}");
}

#[tokio::test]
async fn every_anthropic_stop_reason_is_understood() {
    let fake = FakeModel::start();
    let reasons = [
        ("end_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("pause_turn", StopReason::PauseTurn),
        ("refusal", StopReason::Refusal),
        ("model_context_window_exceeded", StopReason::ContextWindowExceeded),
    ];
    for (wire_name, _) in &reasons {
        let mut body = canned::anthropic_text("x");
        body["stop_reason"] = json!(wire_name);
        fake.script([Reply::ok(body)]);
    }
    let p = make("anthropic", &fake.anthropic_url(), "");
    for (wire_name, want) in reasons {
        let r = provider::complete(p.as_ref(), &request(), &fast(0), deadline())
            .await
            .unwrap();
        assert_eq!(r.stop, want, "{wire_name}");
    }
}

/// Issue 29, item 7: a password and a key in `base_url` never reach the daily note (which every
/// role can read), the run record or the output, even in the error that names the URL.
#[test]
fn secrets_in_the_base_url_never_reach_a_note_or_a_record() {
    use crate::support::{describe, TestVault};
    let v = TestVault::new();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    v.set_config(&format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"anthropic\"\nbase_url = \"http://user:PASSWORD1@{dead}/?api_key=${{TOKEN}}\"\nmodel = \"m\"\nmax_retries = 1\n"
    ));
    v.unschedule_stock_roles();
    v.write("roles/ops.md", "# Ops\n## Mission\nM.\n");
    v.write("agent/inbox/ops/a.md", "Go.\n");
    let out = v
        .command(&["fire", "ops"])
        .env("TOKEN", "tok-abcdef123456")
        .output()
        .unwrap();
    let records: String = v.records().iter().map(|r| r.to_string()).collect();
    let all = format!(
        "{}{}{}{}{}",
        v.daily(),
        records,
        std::fs::read_to_string(v.path(".tabd/state.json")).unwrap_or_default(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains(&dead.to_string()),
        "the error was written: {}",
        describe(&out)
    );
    assert!(!all.contains("PASSWORD1"), "{all}");
    assert!(!all.contains("tok-abcdef123456"), "{all}");
}
