//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! Spoken by OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio and OpenRouter, each with its
//! own quirks; the parser is lenient where they differ (noted inline).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};

use super::http::{post_json, Endpoint};
use super::{
    Block, BoxFuture, Message, Provider, ProviderError, Request, Response, Secret, Speaker, StopReason, Usage,
};
use crate::config::ProviderConfig;

pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    key: Option<Secret>,
    key_env: String,
    timeout: std::time::Duration,
    /// For tool calls that arrive without an id.
    made_up_ids: AtomicU64,
}

impl OpenAiProvider {
    pub fn new(client: reqwest::Client, cfg: &ProviderConfig, key: Option<Secret>) -> Self {
        Self {
            client,
            url: format!("{}/chat/completions", cfg.base_url.trim_end_matches('/')),
            key,
            key_env: cfg.api_key_env.clone(),
            timeout: cfg.timeout,
            made_up_ids: AtomicU64::new(0),
        }
    }

    /// The request body, exactly as sent.
    pub fn body(&self, req: &Request) -> Value {
        let mut messages = Vec::new();
        if !req.system.is_empty() {
            messages.push(json!({ "role": "system", "content": req.system }));
        }
        for m in &req.messages {
            append_messages(m, &mut messages);
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        body.insert("messages".into(), Value::Array(messages));
        body.insert("max_tokens".into(), json!(req.max_tokens));
        body.insert("stream".into(), json!(false));
        if let Some(t) = req.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if !req.tools.is_empty() {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    json!({ "type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.input_schema } })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            if req.tool_choice_none {
                body.insert("tool_choice".into(), json!("none"));
            }
        }
        Value::Object(body)
    }

    fn parse(&self, v: Value) -> Result<Response, ProviderError> {
        let bad = |m: &str| ProviderError::BadResponse {
            provider: "openai",
            message: m.to_string(),
        };
        let choice = v
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| bad("no `choices` in the response"))?;
        let msg = choice
            .get("message")
            .ok_or_else(|| bad("no `message` in the first choice"))?;
        let mut content = Vec::new();
        // llama.cpp, vLLM and DeepSeek put reasoning in `reasoning_content`; Ollama in `reasoning`.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(r) = msg
                .get(key)
                .and_then(Value::as_str)
                .filter(|r| !r.trim().is_empty())
            {
                content.push(Block::Thinking {
                    text: r.to_string(),
                    raw: None,
                });
                break;
            }
        }
        if let Some(text) = text_of(msg.get("content")) {
            content.push(Block::Text { text, cache: false });
        }
        let calls = msg
            .get("tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for call in &calls {
            let f = call.get("function").unwrap_or(call);
            let name = f.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            // Some local servers omit the id; the model still needs one to match the result.
            let id = match call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                Some(id) => id.to_string(),
                None => format!(
                    "call_tabd_{}",
                    self.made_up_ids.fetch_add(1, Ordering::Relaxed) + 1
                ),
            };
            content.push(Block::ToolUse {
                id,
                name,
                input: arguments(f.get("arguments")),
            });
        }
        let finish = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("");
        let stop = if !calls.is_empty() {
            // Ollama and some llama.cpp templates report `stop` even when they called tools.
            StopReason::ToolUse
        } else {
            match finish {
                "stop" | "" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                other => StopReason::Other(other.to_string()),
            }
        };
        let u = v.get("usage").cloned().unwrap_or(Value::Null);
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = u
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let usage = Usage {
            input_tokens: n("prompt_tokens").saturating_sub(cached),
            output_tokens: n("completion_tokens"),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        };
        Ok(Response {
            message: Message {
                speaker: Speaker::Assistant,
                content,
                raw: None,
            },
            stop,
            usage,
            model: v.get("model").and_then(Value::as_str).unwrap_or("").to_string(),
        })
    }
}

/// `content` as a string; some servers send a list of `{type: text, text}` parts.
fn text_of(v: Option<&Value>) -> Option<String> {
    let text = match v? {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Tool arguments: a JSON string per the spec; an object from Ollama; anything else is kept
/// as a string so the tool registry can tell the model its arguments were not valid JSON.
fn arguments(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(other) => other.clone(),
    }
}

fn append_messages(m: &Message, out: &mut Vec<Value>) {
    match m.speaker {
        Speaker::Assistant => {
            let text = m.texts();
            let calls: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => {
                        let args = match input {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        Some(json!({ "id": id, "type": "function", "function": { "name": name, "arguments": args } }))
                    }
                    _ => None,
                })
                .collect();
            let mut msg = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text.join("\n\n")) } });
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
        Speaker::User => {
            // Tool results first: they must directly follow the assistant's tool calls.
            for b in &m.content {
                if let Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = b
                {
                    let content = if *is_error {
                        format!("ERROR: {content}")
                    } else {
                        content.clone()
                    };
                    out.push(json!({ "role": "tool", "tool_call_id": tool_use_id, "content": content }));
                }
            }
            let text: Vec<&str> = m.texts().into_iter().filter(|t| !t.is_empty()).collect();
            if !text.is_empty() {
                out.push(json!({ "role": "user", "content": text.join("\n\n") }));
            }
        }
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            let ep = Endpoint {
                provider: "openai",
                url: &self.url,
                key_env: &self.key_env,
                model: &req.model,
                timeout: self.timeout,
            };
            let auth = self.key.as_ref().map(|k| format!("Bearer {}", k.expose()));
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| vec![("authorization", a)])
                .unwrap_or_default();
            let value = post_json(&self.client, &ep, &headers, &self.body(req)).await?;
            self.parse(value)
        })
    }
}
