//! Replies in either wire format, so one test body covers both providers.

use serde_json::{json, Value};

use super::fake_model::{canned, Reply};

pub fn text(kind: &str, text: &str) -> Reply {
    Reply::ok(if kind == "anthropic" {
        canned::anthropic_text(text)
    } else {
        canned::openai_text(text)
    })
}

pub fn tools(kind: &str, text: Option<&str>, calls: &[(&str, &str, Value)]) -> Reply {
    Reply::ok(if kind == "anthropic" {
        canned::anthropic_tool_use(text, calls)
    } else {
        canned::openai_tool_calls(text, calls)
    })
}

pub fn error(kind: &str, status: u16, kind_name: &str, message: &str) -> Reply {
    Reply::status(
        status,
        if kind == "anthropic" {
            canned::anthropic_error(kind_name, message)
        } else {
            canned::openai_error(kind_name, message)
        },
    )
}

/// The tool results a request sends back: (id, content, is_error), in either format.
pub fn tool_results(body: &Value) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        if m["role"] == "tool" {
            let content = m["content"].as_str().unwrap_or("").to_string();
            let is_error = content.starts_with("ERROR: ");
            out.push((
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                content,
                is_error,
            ));
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                out.push((
                    b["tool_use_id"].as_str().unwrap_or("").to_string(),
                    b["content"].as_str().unwrap_or("").to_string(),
                    b["is_error"] == json!(true),
                ));
            }
        }
    }
    out
}

/// All the text a request sends (system and every message), for "does the prompt contain" checks.
pub fn all_text(body: &Value) -> String {
    let mut out = String::new();
    match &body["system"] {
        Value::String(s) => out.push_str(s),
        Value::Array(blocks) => blocks
            .iter()
            .for_each(|b| out.push_str(b["text"].as_str().unwrap_or(""))),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => out.push_str(s),
            Value::Array(blocks) => blocks
                .iter()
                .for_each(|b| out.push_str(b["text"].as_str().unwrap_or(""))),
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// True when the request asks the model not to call tools (the closing summary).
pub fn tools_forbidden(body: &Value) -> bool {
    body["tool_choice"] == json!({"type": "none"}) || body["tool_choice"] == json!("none")
}

/// `reply` as the test's model (`test-model`, the model `TestVault::use_model` names) answers
/// it, costing `input` and `output` tokens — in either wire format: a scripted model whose every
/// response costs what the test says.
pub fn costing(reply: Reply, input: u64, output: u64) -> Reply {
    match reply {
        Reply::Json(status, mut body, headers) => {
            body["model"] = json!("test-model");
            body["usage"] = if body.get("choices").is_some() {
                super::fake_model::canned::openai_usage(input, output, 0)
            } else {
                super::fake_model::canned::anthropic_usage(input, output, 0, 0)
            };
            Reply::Json(status, body, headers)
        }
        other => other,
    }
}
