//! Anthropic Messages API: `POST {base_url}/v1/messages`.

use std::sync::atomic::{AtomicU8, Ordering};

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::http::{post_json, Endpoint};
use super::{
    Block, BoxFuture, Message, Provider, ProviderError, Request, Response, Secret, Speaker, StopReason,
};
use crate::config::ProviderConfig;
use crate::cost::CacheTtl;
use crate::cost::Usage;

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
        // The system prompt (with the tools before it) is what the role's next run can reuse: it
        // gets the run's TTL. The context and the conversation change between runs and are only
        // read back within the run, seconds later: 5 minutes, which also keeps every 1h
        // breakpoint before every 5m one, as the API requires.
        let stable = cache_control(req.cache_ttl);
        let short = cache_control(req.cache_ttl.map(|_| CacheTtl::FiveMinutes));
        if !req.system.is_empty() {
            body.insert(
                "system".into(),
                json!([{ "type": "text", "text": req.system, "cache_control": stable }]),
            );
        }
        let mut messages: Vec<Value> = req.messages.iter().map(|m| message_json(m, &short)).collect();
        // After a run's first request, a breakpoint on the newest message lets the next request
        // read the whole conversation so far from cache (at most 3 breakpoints: system, context,
        // this one; the API allows 4).
        // Only on a user message: assistant turns are echoed back exactly as received.
        let last_is_user = req.messages.last().is_some_and(|m| m.speaker == Speaker::User);
        if req.messages.len() > 1 && last_is_user {
            if let Some(last) = messages
                .last_mut()
                .and_then(|m| m.get_mut("content"))
                .and_then(Value::as_array_mut)
                .and_then(|c| c.last_mut())
            {
                last["cache_control"] = short.clone();
            }
        }
        body.insert("messages".into(), Value::Array(messages));
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

/// The `cache_control` of every breakpoint: ephemeral, with the configured lifetime.
fn cache_control(ttl: Option<CacheTtl>) -> Value {
    match ttl {
        None => json!({ "type": "ephemeral" }),
        Some(t) => json!({ "type": "ephemeral", "ttl": t.as_str() }),
    }
}

fn message_json(m: &Message, cache: &Value) -> Value {
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
                Some(json!({ "type": "text", "text": text, "cache_control": cache }))
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

/// A Messages API response body, as far as tabd reads it. `content` stays raw: assistant turns
/// are echoed back exactly (thinking blocks carry signatures).
#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    error: Option<Value>,
    content: Option<Vec<Value>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
    #[serde(default)]
    model: String,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

/// One content block. A `tool_use` must have its `id`, `name` and `input`: without them the
/// result could not be matched to the call, so the response is refused as malformed.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    RedactedThinking {},
    /// Block kinds tabd does not use (server tool results, citations…) are skipped.
    #[serde(other)]
    Other,
}

/// Parses a Messages API response body.
pub(crate) fn parse(v: Value) -> Result<Response, ProviderError> {
    let wire: WireResponse =
        serde_json::from_value(v).map_err(|e| bad(format!("unexpected response shape: {e}")))?;
    if wire.kind.as_deref() == Some("error") {
        return Err(bad(format!(
            "an error in a 200 response: {}",
            wire.error.unwrap_or(Value::Null)
        )));
    }
    let raw = wire.content.ok_or_else(|| bad("no `content` in the response"))?;
    let mut content = Vec::with_capacity(raw.len());
    for item in &raw {
        let block: WireBlock = serde_json::from_value(item.clone())
            .map_err(|e| bad(format!("a content block could not be read ({e}): {item}")))?;
        content.push(match block {
            WireBlock::Text { text } => Block::Text { text, cache: false },
            WireBlock::ToolUse { id, name, input } => Block::ToolUse { id, name, input },
            WireBlock::Thinking { thinking } => Block::Thinking {
                text: thinking,
                raw: Some(item.clone()),
            },
            WireBlock::RedactedThinking {} => Block::Thinking {
                text: "[redacted thinking]".into(),
                raw: Some(item.clone()),
            },
            WireBlock::Other => continue,
        });
    }
    let stop = match wire.stop_reason.as_deref().unwrap_or("") {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        other => StopReason::Other(other.to_string()),
    };
    let u = wire.usage;
    let usage = Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
    };
    Ok(Response {
        message: Message {
            speaker: Speaker::Assistant,
            content,
            raw: Some(Value::Array(raw)),
        },
        stop,
        usage,
        model: wire.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_use_without_an_id_is_a_malformed_response() {
        let body = json!({"type": "message", "content": [{"type": "tool_use", "name": "read_file", "input": {}}],
                          "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}});
        let err = parse(body).unwrap_err();
        assert!(err.to_string().contains("missing field `id`"), "{err}");
    }

    #[test]
    fn unknown_blocks_are_skipped_and_missing_usage_is_zero() {
        let body = json!({"content": [{"type": "server_tool_use", "id": "x"}, {"type": "text", "text": "hi"}],
                          "stop_reason": "end_turn"});
        let r = parse(body).unwrap();
        assert_eq!(r.text(), "hi");
        assert_eq!(r.usage, Usage::default());
    }
}
