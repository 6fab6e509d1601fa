//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! Spoken by OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio and OpenRouter, each with its
//! own quirks; the parser is lenient where they differ (noted inline).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::http::{post_json, Endpoint};
use super::{
    Block, BoxFuture, Message, Provider, ProviderError, Request, Response, Secret, Speaker, StopReason,
};
use crate::base::cost::Usage;
use crate::setup::config::ProviderConfig;

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

    /// The request body, exactly as sent, serialized from borrowed parts (see `http::to_bytes`).
    pub fn body(&self, req: &Request) -> Vec<u8> {
        let mut messages = Vec::new();
        if !req.system.is_empty() {
            messages.push(ChatOut::System { content: &req.system });
        }
        for m in &req.messages {
            append_messages(m, &mut messages);
        }
        let tools = req
            .tools
            .iter()
            .map(|t| FunctionTool {
                kind: "function",
                function: FunctionSpec {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.input_schema,
                },
            })
            .collect();
        let body = ChatBody {
            model: &req.model,
            messages,
            max_tokens: req.max_tokens,
            stream: false,
            temperature: req.temperature,
            tools,
            tool_choice: (req.tool_choice_none && !req.tools.is_empty()).then_some("none"),
        };
        super::http::to_bytes(&body, super::http::size_hint(req))
    }

    fn parse(&self, v: Value) -> Result<Response, ProviderError> {
        let bad = |m: String| ProviderError::BadResponse {
            provider: "openai",
            message: m,
        };
        let wire: ChatResponse =
            serde_json::from_value(v).map_err(|e| bad(format!("unexpected response shape: {e}")))?;
        let choice = wire
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| bad("no `choices` in the response".into()))?;
        let msg = choice.message;
        let mut content = Vec::new();
        // llama.cpp, vLLM and DeepSeek put reasoning in `reasoning_content`; Ollama in `reasoning`.
        if let Some(r) = msg
            .reasoning_content
            .or(msg.reasoning)
            .filter(|r| !r.trim().is_empty())
        {
            content.push(Block::Thinking { text: r, raw: None });
        }
        if let Some(text) = text_of(msg.content.as_ref()) {
            content.push(Block::Text { text, cache: false });
        }
        let called = !msg.tool_calls.is_empty();
        for call in msg.tool_calls {
            content.push(self.tool_use(call)?);
        }
        let stop = if called {
            // Lenient: Ollama and some llama.cpp templates report `stop` even when they called tools.
            StopReason::ToolUse
        } else {
            match choice.finish_reason.as_deref().unwrap_or("") {
                "stop" | "" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                other => StopReason::Other(other.to_string()),
            }
        };
        let u = wire.usage.unwrap_or_default();
        let cached = u.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0);
        let usage = Usage {
            input_tokens: u.prompt_tokens.saturating_sub(cached),
            output_tokens: u.completion_tokens,
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
            model: wire.model,
        })
    }

    /// One tool call, with the leniency local servers need: a missing id gets one made up (the
    /// result must still be matched to the call); `name`/`arguments` may sit at the top level.
    fn tool_use(&self, call: ChatToolCall) -> Result<Block, ProviderError> {
        let (name, args) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (call.name, call.arguments),
        };
        let name = name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ProviderError::BadResponse {
                provider: "openai",
                message: "a tool call without a function name".into(),
            })?;
        let id = match call.id.filter(|s| !s.is_empty()) {
            Some(id) => id,
            None => format!(
                "call_tabd_{}",
                self.made_up_ids.fetch_add(1, Ordering::Relaxed) + 1
            ),
        };
        Ok(Block::ToolUse {
            id,
            name,
            input: arguments(args.as_ref()),
        })
    }
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    model: String,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    /// A string, or a list of `{type: text, text}` parts (some servers).
    #[serde(default)]
    content: Option<Value>,
    #[serde(default, deserialize_with = "null_as_empty")]
    tool_calls: Vec<ChatToolCall>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatToolCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<ChatFunction>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ChatFunction {
    #[serde(default)]
    name: Option<String>,
    /// A JSON string per the spec; an object from Ollama.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ChatToolCall>, D::Error> {
    Ok(Option::<Vec<ChatToolCall>>::deserialize(d)?.unwrap_or_default())
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

/// Tool arguments: a JSON string per the spec; an object from Ollama; anything else (or JSON
/// nested deeper than tabd reads) is kept as a string so the tool registry can tell the model its
/// arguments were not valid JSON.
fn arguments(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => crate::formats::json::parse(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(other) => other.clone(),
    }
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<ChatOut<'a>>,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
}

#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionSpec<'a>,
}

#[derive(Serialize)]
struct FunctionSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// One chat message as sent.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum ChatOut<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallOut<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    /// A JSON string, as the spec wants.
    arguments: Cow<'a, str>,
}

fn append_messages<'a>(m: &'a Message, out: &mut Vec<ChatOut<'a>>) {
    match m.speaker {
        Speaker::Assistant => {
            let text = m.texts();
            let tool_calls = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => Some(CallOut {
                        id,
                        kind: "function",
                        function: CallFunction {
                            name,
                            arguments: match input {
                                Value::String(raw) => Cow::Borrowed(raw.as_str()),
                                other => Cow::Owned(other.to_string()),
                            },
                        },
                    }),
                    _ => None,
                })
                .collect();
            out.push(ChatOut::Assistant {
                content: (!text.is_empty()).then(|| text.join("\n\n")),
                tool_calls,
            });
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
                        Cow::Owned(format!("ERROR: {content}"))
                    } else {
                        Cow::Borrowed(content.as_str())
                    };
                    out.push(ChatOut::Tool {
                        tool_call_id: tool_use_id,
                        content,
                    });
                }
            }
            let text: Vec<&str> = m.texts().into_iter().filter(|t| !t.is_empty()).collect();
            let content = match text.as_slice() {
                [] => return,
                [one] => Cow::Borrowed(*one),
                many => Cow::Owned(many.join("\n\n")),
            };
            out.push(ChatOut::User { content });
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
            let value = post_json(&self.client, &ep, &headers, self.body(req)).await?;
            self.parse(value)
        })
    }
}
