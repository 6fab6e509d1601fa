//! OpenTelemetry GenAI traces (issue 40, item 3; docs/spec.md §25): `[telemetry] otlp` sends an
//! `invoke_agent` span per run, a `chat` child per model request and an `execute_tool` child per
//! tool call to a collector (here a receiver in the test that decodes the protobuf); no content
//! unless `content = true`, secrets never; a collector that is down costs one warning.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_model::FakeModel;
use crate::support::otlp::{Receiver, Span};
use crate::support::{describe, wire, TestVault, TEST_KEY};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const T: Duration = Duration::from_secs(30);

/// A config for `fake` (a priced model) sending traces to `otlp`; `extra` goes in `[telemetry]`.
fn traced(v: &TestVault, fake: &FakeModel, otlp: &str, extra: &str) {
    v.set_config(&format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nmax_retries = 1\n\n[telemetry]\notlp = \"{otlp}\"\n{extra}",
        fake.anthropic_url()
    ));
}

fn named<'a>(spans: &'a [Span], prefix: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name.starts_with(prefix)).collect()
}

/// The model reads a note and writes one, then answers: one run, two requests, two calls.
fn script_a_run(fake: &FakeModel, written: &str) {
    fake.script([
        wire::tools(
            "anthropic",
            Some("Reading the timeline first."),
            &[
                ("toolu_read", "read_file", json!({"path": "project/timeline.md"})),
                (
                    "toolu_write",
                    "write_file",
                    json!({"path": "project/status.md", "content": written}),
                ),
            ],
        ),
        wire::text("anthropic", "Status written."),
    ]);
}

#[test]
fn a_run_sends_invoke_agent_with_chat_and_execute_tool_children() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let otlp = Receiver::start();
    traced(&v, &fake, &otlp.url(), "");
    v.write(
        "agent/inbox/delivery/ask.md",
        "Please write the weekly status: milestone-zebra.\n",
    );
    script_a_run(&fake, "All on track: status-body-giraffe.");
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    // tabd fire sends what is left before it exits: everything is here when it has.
    let spans = otlp.wait_for(5, T);
    assert_eq!(spans.len(), 5, "{spans:#?}");

    let run = named(&spans, "invoke_agent");
    assert_eq!(run.len(), 1, "{spans:#?}");
    let run = run[0];
    assert_eq!(run.name, "invoke_agent delivery");
    assert!(run.parent_span_id.is_empty(), "a run's span is a root");
    assert_eq!(run.attr("gen_ai.operation.name"), "invoke_agent");
    assert_eq!(run.attr("gen_ai.provider.name"), "anthropic");
    assert_eq!(run.attr("gen_ai.agent.name"), "delivery");
    assert_eq!(run.attr("gen_ai.request.model"), "claude-sonnet-4-5");
    assert_eq!(run.attr("tabd.door"), "run");
    assert_eq!(run.attr("tabd.trigger"), "manual");
    assert_eq!(run.attr("tabd.outcome"), "ok");
    let record = &v.records()[0];
    assert_eq!(run.attr("tabd.run.id"), record["run_id"].as_str().unwrap());
    let cost: f64 = run.attr("tabd.cost_usd").parse().unwrap();
    assert!((cost - record["usage"]["cost_usd"].as_f64().unwrap()).abs() < 1e-9);
    assert_eq!(run.attr("gen_ai.usage.input_tokens"), (472 + 2095).to_string());
    assert_eq!(run.attr("gen_ai.usage.output_tokens"), (89 + 503).to_string());

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for c in &chats {
        assert_eq!(c.name, "chat claude-sonnet-4-5");
        assert_eq!(c.parent_span_id, run.span_id, "a request is a child of its run");
        assert_eq!(c.trace_id, run.trace_id);
        assert_eq!(c.attr("gen_ai.operation.name"), "chat");
        assert_eq!(c.attr("gen_ai.provider.name"), "anthropic");
        assert_eq!(c.attr("gen_ai.request.model"), "claude-sonnet-4-5");
        assert_eq!(c.attr("gen_ai.response.model"), "claude-sonnet-4-5-20250929");
        assert_eq!(c.attr("gen_ai.usage.cache_read.input_tokens"), "0");
        assert_eq!(c.attr("gen_ai.usage.cache_creation.input_tokens"), "0");
        assert!(c.attr("tabd.cost_usd").parse::<f64>().unwrap() > 0.0);
    }
    let first = chats
        .iter()
        .find(|c| c.attr("gen_ai.usage.input_tokens") == "472")
        .unwrap();
    assert_eq!(first.attr("gen_ai.usage.output_tokens"), "89");
    assert_eq!(first.attr("gen_ai.response.finish_reasons"), r#"["tool_use"]"#);
    let last = chats
        .iter()
        .find(|c| c.attr("gen_ai.usage.input_tokens") == "2095")
        .unwrap();
    assert_eq!(last.attr("gen_ai.response.finish_reasons"), r#"["end_turn"]"#);

    let tools = named(&spans, "execute_tool");
    let names: Vec<&str> = tools.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{spans:#?}");
    let read = tools.iter().find(|s| s.name == "execute_tool read_file").unwrap();
    let write = tools
        .iter()
        .find(|s| s.name == "execute_tool write_file")
        .unwrap();
    for (s, id, risk) in [(read, "toolu_read", "read"), (write, "toolu_write", "write")] {
        assert_eq!(s.parent_span_id, run.span_id, "a call is a child of its run");
        assert_eq!(s.attr("gen_ai.operation.name"), "execute_tool");
        assert_eq!(s.attr("gen_ai.tool.call.id"), id);
        assert_eq!(s.attr("gen_ai.tool.type"), "function");
        assert_eq!(s.attr("tabd.tool.risk"), risk);
        assert_eq!(s.attr("tabd.tool.approval"), "allowed");
        assert!(!s.attrs.contains_key("error.type"), "{s:#?}");
    }
    assert_eq!(write.attr("gen_ai.tool.name"), "write_file");

    // No content without `content = true`: not the note, the prompt, the answer or an argument.
    for s in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(!s.attrs.contains_key(key), "{key} on {s:#?}");
        }
    }
    let raw = String::from_utf8_lossy(&otlp.raw()).into_owned();
    for text in [
        "milestone-zebra",
        "status-body-giraffe",
        "Status written",
        "Reading the timeline",
        "project/status.md",
        "Delivery Manager",
    ] {
        assert!(!raw.contains(text), "{text} was sent without content = true");
    }
}

#[test]
fn with_content_the_prompt_and_arguments_are_sent_and_secrets_never() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let otlp = Receiver::start();
    let token = "otlp-secret-token-7f3a9c";
    traced(
        &v,
        &fake,
        &otlp.url(),
        "content = true\nheaders = { Authorization = \"Bearer ${OTLP_TOKEN}\" }\n",
    );
    // The secrets reach the model's view: a note holds the API key, the model writes the token.
    v.write(
        "agent/inbox/delivery/ask.md",
        &format!("Status please: milestone-zebra. (pasted by mistake: {TEST_KEY})\n"),
    );
    script_a_run(&fake, &format!("status-body-giraffe, token {token}"));
    let out = v
        .command(&["fire", "delivery"])
        .env("OTLP_TOKEN", token)
        .output()
        .expect("run tabd");
    assert!(out.status.success(), "{}", describe(&out));
    let spans = otlp.wait_for(5, T);

    let chats = named(&spans, "chat ");
    let first = chats
        .iter()
        .find(|c| c.attr("gen_ai.usage.input_tokens") == "472")
        .unwrap();
    assert!(first
        .attr("gen_ai.system_instructions")
        .contains("Delivery Manager"));
    let input = first.attr("gen_ai.input.messages");
    assert!(input.contains("milestone-zebra"), "{input}");
    assert!(
        input.contains("${ANTHROPIC_API_KEY}"),
        "the key is shown by its name: {input}"
    );
    let output = first.attr("gen_ai.output.messages");
    assert!(
        output.contains("Reading the timeline first.") && output.contains("tool_call"),
        "{output}"
    );
    let write = named(&spans, "execute_tool write_file")[0];
    let args = write.attr("gen_ai.tool.call.arguments");
    assert!(
        args.contains("status-body-giraffe") && args.contains("${OTLP_TOKEN}"),
        "{args}"
    );
    assert!(write
        .attr("gen_ai.tool.call.result")
        .contains("project/status.md"));

    let raw = String::from_utf8_lossy(&otlp.raw()).into_owned();
    assert!(raw.contains("milestone-zebra"), "content = true sends the note");
    for secret in [TEST_KEY, token] {
        assert!(!raw.contains(secret), "{secret} reached the collector's spans");
    }
    // The header is the collector's credential, sent as configured (and only there).
    let auth = otlp.headers()[0]["authorization"].to_str().unwrap().to_string();
    assert_eq!(auth, format!("Bearer {token}"));
}

#[test]
fn a_collector_that_is_down_costs_one_warning_and_the_run_is_ok() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    // A port nothing listens on: bound, then let go.
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    traced(&v, &fake, &format!("http://{down}"), "");
    script_a_run(&fake, "status");
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(v.records()[0]["outcome"], "ok");
    let err = stderr(&out);
    assert_eq!(err.matches("telemetry: cannot send traces").count(), 1, "{err}");
    assert!(err.contains(&format!("http://{down}/v1/traces")), "{err}");
}

#[test]
fn a_bad_otlp_address_is_named_at_its_line() {
    let v = TestVault::new();
    v.set_config("timezone = \"UTC\"\n\n[telemetry]\notlp = \"grpc://collector:4317\"\n");
    let out = v.tabd(&["validate"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("config.toml:4: error: [telemetry] otlp = \"grpc://collector:4317\": OTLP over HTTP takes http:// or https://"),
        "{err}"
    );
    // A secret in the address is never printed.
    v.set_config("timezone = \"UTC\"\n[telemetry]\notlp = \"${OTLP_URL}\"\n");
    let out = v
        .command(&["validate"])
        .env("OTLP_URL", "ftp://user:hunter2-secret@collector")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("config.toml:3:"), "{err}");
    assert!(!err.contains("hunter2-secret"), "{err}");
    v.set_config("timezone = \"UTC\"\n[telemetry]\ncontent = true\n");
    let err = stderr(&v.tabd(&["validate"]));
    assert!(err.contains("[telemetry] needs otlp = "), "{err}");
}

#[test]
fn a_child_runs_span_is_under_its_parent_and_each_call_says_how_it_was_let_through() {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let fake = FakeModel::start();
    let otlp = Receiver::start();
    let d = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &d.replacen(
            "extends: _base\n",
            "extends: _base\ncan_delegate_to: [risk]\napprove:\n  write_file: ask\n",
            1,
        ),
    );
    traced(&v, &fake, &otlp.url(), "");
    fake.respond_with(|r, _| {
        let text = wire::all_text(&r.body);
        if text.contains("## Your task (from Delivery Manager)") {
            return wire::text("anthropic", "Risk: high.");
        }
        if wire::tool_results(&r.body).is_empty() {
            return wire::tools(
                "anthropic",
                None,
                &[
                    (
                        "t1",
                        "delegate",
                        json!({"role": "risk", "task": "Rate the slip."}),
                    ),
                    (
                        "t2",
                        "write_file",
                        json!({"path": "project/plan.md", "content": "x"}),
                    ),
                    ("t3", "run_shell", json!({"command": "true"})),
                ],
            );
        }
        wire::text("anthropic", "done")
    });
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    // The parent's run, its request and three calls (then it waits for the person: the write
    // asks); the child's run and its request.
    let spans = otlp.wait_for(7, T);
    assert_eq!(spans.len(), 7, "{spans:#?}");
    let parent = named(&spans, "invoke_agent delivery")[0];
    assert_eq!(parent.attr("tabd.outcome"), "waiting");
    let child = named(&spans, "invoke_agent risk")[0];
    assert_eq!(child.parent_span_id, parent.span_id, "{spans:#?}");
    assert_eq!(child.trace_id, parent.trace_id);
    assert_eq!(child.attr("tabd.trigger"), "delegate");
    let child_chat = spans
        .iter()
        .find(|s| s.name.starts_with("chat ") && s.parent_span_id == child.span_id)
        .expect("the child's request under the child's span");
    assert_eq!(child_chat.attr("gen_ai.operation.name"), "chat");

    let approval = |name: &str| named(&spans, name)[0].attr("tabd.tool.approval").to_string();
    assert_eq!(approval("execute_tool delegate"), "allowed");
    assert_eq!(approval("execute_tool write_file"), "asked");
    let shell = spans
        .iter()
        .find(|s| {
            s.name == "execute_tool"
                && s.attrs.get("gen_ai.tool.name").map(String::as_str) == Some("run_shell")
        })
        .expect("a call of a tool the role does not have is traced, by the name asked for");
    assert_eq!(shell.attr("tabd.tool.approval"), "refused");
    assert_eq!(shell.attr("error.type"), "refused");
    assert_eq!(shell.status, 2, "an error status");
    assert_eq!(
        shell.status_message, "",
        "a refusal's words stay out without content = true"
    );
}

/// `tabd mcp serve` is a door too: the session is an `invoke_agent` span (door `mcp`) and each
/// call the client makes an `execute_tool` child, sent when the session ends.
#[test]
fn an_mcp_serve_session_is_traced_like_a_run() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let otlp = Receiver::start();
    v.unschedule_stock_roles();
    v.write(
        "roles/desk.md",
        "---\nwrite_paths: [project/**]\n---\n# Desk\n## Mission\nKeep the notes.\n## Tools\n- read_file\n- write_file\n",
    );
    traced(&v, &fake, &otlp.url(), "");
    let mut c = crate::support::mcp_client::Client::start(&v, "desk");
    let (text, error) = crate::support::mcp_client::Client::text(&c.call(
        1,
        "write_file",
        json!({"path": "project/plan.md", "content": "plan-body-okapi"}),
    ));
    assert!(!error, "{text}");
    c.stop();
    let spans = otlp.wait_for(2, T);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let session = named(&spans, "invoke_agent desk")[0];
    assert_eq!(session.attr("tabd.door"), "mcp");
    assert_eq!(session.attr("tabd.outcome"), "ok");
    let call = named(&spans, "execute_tool write_file")[0];
    assert_eq!(call.parent_span_id, session.span_id);
    assert_eq!(call.attr("tabd.tool.approval"), "allowed");
    assert!(
        !call.attrs.contains_key("gen_ai.tool.call.id"),
        "MCP has no model call id"
    );
    assert!(!String::from_utf8_lossy(&otlp.raw()).contains("plan-body-okapi"));
}
