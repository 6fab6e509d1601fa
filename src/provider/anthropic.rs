//! Anthropic Messages API: `POST {base_url}/v1/messages`.

use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{json, Map, Value};

use super::http::{post_json, Endpoint};
use super::{
    Block, BoxFuture, Message, Provider, ProviderError, Request, Response, Secret, Speaker, StopReason, Usage,
};
use crate::config::ProviderConfig;

const API_VERSION: &str = "2023-06-01";

/// Models that take only `thinking: {type: adaptive}` and reject a fixed `budget_tokens`.
/// Unknown models are detected from the API's 400 and remembered (see `send`).
const ADAPTIVE_ONLY: &[&str] = &["claude-opus-4-7", "claude-opus-5", "claude-sonnet-5"];

const MODE_UNKNOWN: u8 = 0;
const MODE_BUDGET: u8 = 1;
const MODE_ADAPTIVE: u8 = 2;

pub struct AnthropicProvider {
    client: reqwest::Client,
    url: String,
    key: Option<Secret>,
    key_env: String,
    timeout: std::time::Duration,
    /// Which form of extended thinking this model accepts, once learned.
    thinking_mode: AtomicU8,
}

impl AnthropicProvider {
    pub fn new(client: reqwest::Client, cfg: &ProviderConfig, key: Option<Secret>) -> Self {
        Self {
            client,
            url: format!("{}/v1/messages", cfg.base_url.trim_end_matches('/')),
            key,
            key_env: cfg.api_key_env.clone(),
            timeout: cfg.timeout,
            thinking_mode: AtomicU8::new(MODE_UNKNOWN),
        }
    }

    fn adaptive(&self, model: &str) -> bool {
        match self.thinking_mode.load(Ordering::Relaxed) {
            MODE_ADAPTIVE => true,
            MODE_BUDGET => false,
            _ => ADAPTIVE_ONLY.iter().any(|m| model.starts_with(m)),
        }
    }

    /// The request body, exactly as sent.
    pub fn body(&self, req: &Request) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        let mut max_tokens = req.max_tokens;
        if req.thinking_budget > 0 {
            if self.adaptive(&req.model) {
                body.insert("thinking".into(), json!({ "type": "adaptive" }));
            } else {
                // max_tokens covers thinking and answer together; keep the answer's share.
                max_tokens = req.max_tokens.saturating_add(req.thinking_budget);
                body.insert(
                    "thinking".into(),
                    json!({ "type": "enabled", "budget_tokens": req.thinking_budget }),
                );
            }
        } else if let Some(t) = req.temperature {
            // Extended thinking requires the default temperature, so it is only sent without it.
            body.insert("temperature".into(), json!(t));
        }
        body.insert("max_tokens".into(), json!(max_tokens));
        if !req.system.is_empty() {
            body.insert(
                "system".into(),
                json!([{ "type": "text", "text": req.system, "cache_control": { "type": "ephemeral" } }]),
            );
        }
        body.insert(
            "messages".into(),
            Value::Array(req.messages.iter().map(message_json).collect()),
        );
        if !req.tools.is_empty() {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            if req.tool_choice_none {
                body.insert("tool_choice".into(), json!({ "type": "none" }));
            }
        }
        Value::Object(body)
    }

    async fn send_once(&self, req: &Request) -> Result<Response, ProviderError> {
        let Some(key) = &self.key else {
            return Err(ProviderError::MissingKey {
                provider: "anthropic",
                env: self.key_env.clone(),
            });
        };
        let ep = Endpoint {
            provider: "anthropic",
            url: &self.url,
            key_env: &self.key_env,
            model: &req.model,
            timeout: self.timeout,
        };
        let headers = [("x-api-key", key.expose()), ("anthropic-version", API_VERSION)];
        let value = post_json(&self.client, &ep, &headers, &self.body(req)).await?;
        parse(value)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            match self.send_once(req).await {
                // The model wants the other form of extended thinking: learn it and ask again.
                Err(ProviderError::Http {
                    status: 400, message, ..
                }) if req.thinking_budget > 0
                    && (message.contains("adaptive") || message.contains("budget_tokens")) =>
                {
                    let now_adaptive = !self.adaptive(&req.model);
                    let mode = if now_adaptive { MODE_ADAPTIVE } else { MODE_BUDGET };
                    self.thinking_mode.store(mode, Ordering::Relaxed);
                    tracing::info!(
                        "anthropic: switching to {} thinking for {}",
                        if now_adaptive { "adaptive" } else { "budgeted" },
                        req.model
                    );
                    self.send_once(req).await
                }
                other => other,
            }
        })
    }
}

fn message_json(m: &Message) -> Value {
    let role = match m.speaker {
        Speaker::User => "user",
        Speaker::Assistant => "assistant",
    };
    if let (Speaker::Assistant, Some(raw)) = (m.speaker, &m.raw) {
        // Echo the assistant turn exactly as received: thinking blocks keep their signatures.
        return json!({ "role": role, "content": raw });
    }
    let content: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text, .. } if text.is_empty() => None,
            Block::Text { text, cache: true } => {
                Some(json!({ "type": "text", "text": text, "cache_control": { "type": "ephemeral" } }))
            }
            Block::Text { text, cache: false } => Some(json!({ "type": "text", "text": text })),
            Block::ToolUse { id, name, input } => {
                Some(json!({ "type": "tool_use", "id": id, "name": name, "input": input }))
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut v = json!({ "type": "tool_result", "tool_use_id": tool_use_id, "content": content });
                if *is_error {
                    v["is_error"] = json!(true);
                }
                Some(v)
            }
            Block::Thinking { raw, .. } => raw.clone(),
        })
        .collect();
    json!({ "role": role, "content": content })
}

fn bad(message: impl Into<String>) -> ProviderError {
    ProviderError::BadResponse {
        provider: "anthropic",
        message: message.into(),
    }
}

/// Parses a Messages API response body.
pub(crate) fn parse(v: Value) -> Result<Response, ProviderError> {
    if v.get("type").and_then(Value::as_str) == Some("error") {
        return Err(bad(format!("an error in a 200 response: {}", v["error"])));
    }
    let raw = v
        .get("content")
        .cloned()
        .ok_or_else(|| bad("no `content` in the response"))?;
    let items = raw.as_array().ok_or_else(|| bad("`content` is not a list"))?;
    let mut content = Vec::with_capacity(items.len());
    for item in items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let block = match kind {
            "text" => Block::Text {
                text: str_field(item, "text"),
                cache: false,
            },
            "tool_use" => Block::ToolUse {
                id: str_field(item, "id"),
                name: str_field(item, "name"),
                input: item.get("input").cloned().unwrap_or_else(|| json!({})),
            },
            "thinking" => Block::Thinking {
                text: str_field(item, "thinking"),
                raw: Some(item.clone()),
            },
            "redacted_thinking" => Block::Thinking {
                text: "[redacted thinking]".into(),
                raw: Some(item.clone()),
            },
            _ => continue,
        };
        content.push(block);
    }
    let stop = match v.get("stop_reason").and_then(Value::as_str).unwrap_or("") {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        other => StopReason::Other(other.to_string()),
    };
    let u = &v["usage"];
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
    };
    Ok(Response {
        message: Message {
            speaker: Speaker::Assistant,
            content,
            raw: Some(raw),
        },
        stop,
        usage,
        model: str_field(&v, "model"),
    })
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}
