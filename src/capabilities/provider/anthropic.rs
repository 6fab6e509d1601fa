//! Anthropic Messages API: `POST {base_url}/v1/messages`.

use std::sync::atomic::{AtomicU8, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::http::{post_json, Endpoint};
use super::{
    Block, BoxFuture, Message, Provider, ProviderError, Request, Response, Secret, Speaker, StopReason,
};
use crate::base::cost::CacheTtl;
use crate::base::cost::Usage;
use crate::setup::config::ProviderConfig;

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
    /// The env file a missing key is put in (named in the error).
    env_file: Option<String>,
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
            env_file: None,
            timeout: cfg.timeout,
            thinking_mode: AtomicU8::new(MODE_UNKNOWN),
        }
    }

    /// Names `path` (the env file tabd reads) as where a missing key goes.
    pub fn with_env_file(mut self, path: Option<String>) -> Self {
        self.env_file = path;
        self
    }

    fn adaptive(&self, model: &str) -> bool {
        match self.thinking_mode.load(Ordering::Relaxed) {
            MODE_ADAPTIVE => true,
            MODE_BUDGET => false,
            _ => ADAPTIVE_ONLY.iter().any(|m| model.starts_with(m)),
        }
    }

    /// The request body, exactly as sent: serialized straight from the request (borrowed, no
    /// copy of the context into a `Value` tree) into a buffer sized for it.
    pub fn body(&self, req: &Request) -> Vec<u8> {
        let mut max_tokens = req.max_tokens;
        let mut thinking = None;
        let mut temperature = None;
        if req.thinking_budget > 0 {
            if self.adaptive(&req.model) {
                thinking = Some(Thinking::Adaptive);
            } else {
                // max_tokens covers thinking and answer together; keep the answer's share.
                max_tokens = req.max_tokens.saturating_add(req.thinking_budget);
                thinking = Some(Thinking::Enabled {
                    budget_tokens: req.thinking_budget,
                });
            }
        } else {
            // Extended thinking requires the default temperature, so it is only sent without it.
            temperature = req.temperature;
        }
        // The system prompt (with the tools before it) is what the role's next run can reuse: it
        // gets the run's TTL. The context and the conversation change between runs and are only
        // read back within the run, seconds later: 5 minutes, which also keeps every 1h
        // breakpoint before every 5m one, as the API requires.
        let stable = CacheControl::new(req.cache_ttl);
        let short = CacheControl::new(req.cache_ttl.map(|_| CacheTtl::FiveMinutes));
        // After a run's first request, a breakpoint on the newest message lets the next request
        // read the whole conversation so far from cache (at most 3 breakpoints: system, context,
        // this one; the API allows 4).
        // Only on a user message: assistant turns are echoed back exactly as received.
        let last_is_user = req.messages.last().is_some_and(|m| m.speaker == Speaker::User);
        let mark_last = req.messages.len() > 1 && last_is_user;
        let count = req.messages.len();
        let messages = req
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| wire_message(m, short, mark_last && i + 1 == count))
            .collect();
        let system = (!req.system.is_empty()).then(|| {
            [SystemBlock {
                kind: "text",
                text: &req.system,
                cache_control: stable,
            }]
        });
        let tools = req
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.input_schema,
            })
            .collect();
        let body = Body {
            model: &req.model,
            thinking,
            temperature,
            max_tokens,
            system,
            messages,
            tools,
            tool_choice: (req.tool_choice_none && !req.tools.is_empty()).then_some(ToolChoice::None),
        };
        super::http::to_bytes(&body, super::http::size_hint(req))
    }

    async fn send_once(&self, req: &Request) -> Result<Response, ProviderError> {
        let Some(key) = &self.key else {
            return Err(ProviderError::MissingKey {
                provider: "anthropic",
                env: self.key_env.clone(),
                file: self.env_file.clone(),
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
        let value = post_json(&self.client, &ep, &headers, self.body(req)).await?;
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
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn new(ttl: Option<CacheTtl>) -> Self {
        Self {
            kind: "ephemeral",
            ttl: ttl.map(CacheTtl::as_str),
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Thinking {
    Adaptive,
    Enabled { budget_tokens: u32 },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ToolChoice {
    None,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: WireContent<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireContent<'a> {
    /// An assistant turn echoed exactly as received: thinking blocks keep their signatures.
    Raw(&'a Value),
    Blocks(Vec<OutBlock<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// A thinking block as received, with its signature.
    #[serde(untagged)]
    Raw(&'a Value),
}

impl OutBlock<'_> {
    fn mark(&mut self, cache: CacheControl) {
        match self {
            OutBlock::Text { cache_control, .. } | OutBlock::ToolResult { cache_control, .. } => {
                *cache_control = Some(cache)
            }
            // Echoed blocks stay exactly as received.
            OutBlock::ToolUse { .. } | OutBlock::Raw(_) => {}
        }
    }
}

/// One message on the wire; `mark` puts a cache breakpoint on its last block.
fn wire_message(m: &Message, cache: CacheControl, mark: bool) -> WireMessage<'_> {
    let role = match m.speaker {
        Speaker::User => "user",
        Speaker::Assistant => "assistant",
    };
    if let (Speaker::Assistant, Some(raw)) = (m.speaker, &m.raw) {
        return WireMessage {
            role,
            content: WireContent::Raw(raw),
        };
    }
    let mut blocks: Vec<OutBlock> = m
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text, .. } if text.is_empty() => None,
            Block::Text { text, cache: c } => Some(OutBlock::Text {
                text,
                cache_control: c.then_some(cache),
            }),
            Block::ToolUse { id, name, input } => Some(OutBlock::ToolUse { id, name, input }),
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Some(OutBlock::ToolResult {
                tool_use_id,
                content,
                is_error: *is_error,
                cache_control: None,
            }),
            Block::Thinking { raw, .. } => raw.as_ref().map(OutBlock::Raw),
        })
        .collect();
    if mark {
        if let Some(last) = blocks.last_mut() {
            last.mark(cache);
        }
    }
    WireMessage {
        role,
        content: WireContent::Blocks(blocks),
    }
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
    use serde_json::json;

    fn provider() -> AnthropicProvider {
        let cfg = ProviderConfig {
            kind: crate::setup::config::ProviderKind::Anthropic,
            model: "claude-x".into(),
            base_url: "http://127.0.0.1:9".into(),
            api_key_env: "ANTHROPIC_API_KEY".into(),
            max_tokens: 100,
            timeout: std::time::Duration::from_secs(1),
            max_retries: 0,
            thinking_budget: 0,
            temperature: None,
            cache_ttl: None,
            profile: None,
        };
        crate::capabilities::provider::install_tls();
        AnthropicProvider::new(reqwest::Client::new(), &cfg, None)
    }

    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "one request and the body it makes, read side by side; length is a production rule"
    )]
    fn the_body_carries_every_block_in_the_wire_shape() {
        let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "s1"});
        let req = Request {
            model: "claude-x".into(),
            system: "You are.".into(),
            messages: vec![
                Message {
                    speaker: Speaker::User,
                    content: vec![
                        Block::Text {
                            text: "ctx".into(),
                            cache: true,
                        },
                        Block::Text {
                            text: String::new(),
                            cache: false,
                        },
                        Block::Text {
                            text: "go".into(),
                            cache: false,
                        },
                    ],
                    raw: None,
                },
                Message {
                    speaker: Speaker::Assistant,
                    content: vec![
                        Block::Thinking {
                            text: "hm".into(),
                            raw: Some(thinking.clone()),
                        },
                        Block::ToolUse {
                            id: "t1".into(),
                            name: "read_file".into(),
                            input: json!({"path": "a.md"}),
                        },
                    ],
                    raw: None,
                },
                Message {
                    speaker: Speaker::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: "t1".into(),
                        content: "no".into(),
                        is_error: true,
                    }],
                    raw: None,
                },
            ],
            tools: vec![],
            max_tokens: 100,
            temperature: Some(0.5),
            thinking_budget: 0,
            tool_choice_none: true,
            cache_ttl: Some(CacheTtl::OneHour),
        };
        let body: Value = serde_json::from_slice(&provider().body(&req)).unwrap();
        let five = json!({"type": "ephemeral", "ttl": "5m"});
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "temperature": 0.5,
                "max_tokens": 100,
                "system": [{"type": "text", "text": "You are.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "ctx", "cache_control": five},
                        {"type": "text", "text": "go"}]},
                    {"role": "assistant", "content": [
                        thinking,
                        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.md"}}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "no", "is_error": true, "cache_control": five}]},
                ],
            })
        );
    }

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
