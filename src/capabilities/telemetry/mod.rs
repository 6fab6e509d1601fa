//! OpenTelemetry GenAI traces (docs/spec.md §25, `[telemetry]`), following the GenAI semantic
//! conventions v1.41.0 (`gen_ai.provider.name`, not the older `gen_ai.system`): one
//! `invoke_agent {role}` span per run or session, a `chat {model}` child per model request and an
//! `execute_tool {tool}` child per tool call. A delegated run's span is a child of its parent's.
//!
//! Off (`[telemetry]` unset) every handle here is empty: no exporter, no span built, nothing
//! formatted. On, spans go to a batch processor on its own thread (`export`): a run never waits
//! for the collector. No prompt, note, answer or argument text goes in a span unless
//! `content = true`, and then through the environment's redactor: secrets never.

mod export;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

use crate::base::calls::{Risk, ToolResult};
use crate::base::cost::Usage;
use crate::base::environment::Env;
use crate::capabilities::provider::{Block, ProviderError, Request, Response, StopReason};
use crate::setup::config::telemetry::TelemetryConfig;

pub use export::{StartError, MAX_QUEUE};

/// The most of one text (a prompt, an answer, a tool's arguments) a span carries with
/// `content = true`: collectors refuse or cut larger attributes.
pub const MAX_CONTENT: usize = 16 * 1024;
/// How long tabd waits at exit for the last spans to be sent.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// tabd's tracer: empty when `[telemetry]` is unset. Cheap to clone.
#[derive(Clone, Default)]
pub struct Telemetry(Option<Arc<On>>);

struct On {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    content: bool,
    /// For the redactor at the time of use (secrets expanded since start count too).
    env: Env,
    shut: AtomicBool,
}

impl On {
    fn redact(&self, text: &str) -> String {
        self.env.redactor().apply(text)
    }

    /// `text` redacted and cut to `MAX_CONTENT`, for a content attribute.
    fn content(&self, text: &str) -> String {
        let mut t = self.redact(text);
        if t.len() > MAX_CONTENT {
            t.truncate(crate::base::text::floor_boundary(&t, MAX_CONTENT));
            t.push_str("…[cut]");
        }
        t
    }
}

/// What an `invoke_agent` span starts with.
pub struct RunStart<'a> {
    pub role: &'a str,
    pub run_id: &'a str,
    /// `run`, `mcp`, `approved`.
    pub door: &'a str,
    /// `schedule`, `inbox`, `manual`, `delegation`, …
    pub trigger: &'a str,
    /// `anthropic`, `openai`, or the agent CLI's name.
    pub provider: &'a str,
    pub model: &'a str,
}

impl Telemetry {
    /// The tracer `cfg` asks for; none when unset. An exporter that cannot be built is said in
    /// the log and runs go on without traces.
    pub fn start(cfg: Option<&TelemetryConfig>, env: &Env) -> Self {
        let Some(cfg) = cfg else {
            return Self::default();
        };
        match export::provider(cfg, env.redactor()) {
            Ok(provider) => Self(Some(Arc::new(On {
                tracer: provider.tracer("tabd"),
                provider,
                content: cfg.content,
                env: env.clone(),
                shut: AtomicBool::new(false),
            }))),
            Err(e) => {
                tracing::warn!("{e}; runs go on without traces");
                Self::default()
            }
        }
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// A run's (or session's) span, a child of `parent`'s when that is on.
    pub fn run(&self, s: &RunStart<'_>, parent: &RunSpan) -> RunSpan {
        let Some(on) = &self.0 else {
            return RunSpan::default();
        };
        let parent_cx = parent.0.as_ref().map(|p| p.cx.clone()).unwrap_or_default();
        let span = on
            .tracer
            .span_builder(format!("invoke_agent {}", s.role))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.provider.name", s.provider.to_string()),
                KeyValue::new("gen_ai.agent.name", s.role.to_string()),
                KeyValue::new("gen_ai.conversation.id", s.run_id.to_string()),
                KeyValue::new("gen_ai.request.model", s.model.to_string()),
                KeyValue::new("tabd.run.id", s.run_id.to_string()),
                KeyValue::new("tabd.door", s.door.to_string()),
                KeyValue::new("tabd.trigger", s.trigger.to_string()),
            ])
            .start_with_context(&on.tracer, &parent_cx);
        RunSpan(Some(Arc::new(RunOn {
            on: on.clone(),
            cx: parent_cx.with_span(span),
            provider: s.provider.to_string(),
        })))
    }

    /// Sends what is left and stops the exporter, waiting at most `FLUSH_WAIT` (a collector
    /// that is down holds tabd's exit no longer). Once; blocking.
    pub fn shutdown(&self) {
        let Some(on) = &self.0 else { return };
        if on.shut.swap(true, Ordering::SeqCst) {
            return;
        }
        crate::base::blocking::run(|| {
            if let Err(e) = on.provider.shutdown_with_timeout(FLUSH_WAIT) {
                tracing::debug!("telemetry: at exit: {e}");
            }
        });
    }
}

/// The span of one run (empty when telemetry is off). Cheap to clone; it ends at `end`, or when
/// the last clone goes.
#[derive(Clone, Default)]
pub struct RunSpan(Option<Arc<RunOn>>);

impl std::fmt::Debug for RunSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_on() {
            "RunSpan(on)"
        } else {
            "RunSpan(off)"
        })
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_on() {
            "Telemetry(on)"
        } else {
            "Telemetry(off)"
        })
    }
}

struct RunOn {
    on: Arc<On>,
    cx: Context,
    provider: String,
}

/// What a run ended as, for its span.
pub struct RunEnd<'a> {
    /// `ok`, `failed`, `skipped`, `waiting`, `stopped`, …
    pub outcome: &'a str,
    pub usage: &'a Usage,
    pub cost_usd: f64,
    pub model: &'a str,
    pub error: Option<&'a str>,
}

impl RunSpan {
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// A `chat` span for `req`, started now.
    pub fn chat(&self, req: &Request) -> ChatSpan {
        let Some(run) = &self.0 else {
            return ChatSpan(None);
        };
        let on = &run.on;
        let mut span = on
            .tracer
            .span_builder(format!("chat {}", req.model))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.provider.name", run.provider.clone()),
                KeyValue::new("gen_ai.request.model", req.model.clone()),
                KeyValue::new("gen_ai.request.max_tokens", i64::from(req.max_tokens)),
            ])
            .start_with_context(&on.tracer, &run.cx);
        if on.content {
            content::request(on, &mut span, req);
        }
        ChatSpan(Some((on.clone(), span)))
    }

    /// An `execute_tool` span for the model's call of `name`, started now.
    pub fn tool(&self, name: &str, call_id: Option<&str>) -> ToolSpan {
        let Some(run) = &self.0 else {
            return ToolSpan(None);
        };
        let on = &run.on;
        // The model names the tool: what it sends is cut and redacted like any text of its.
        let name = on.redact(&crate::base::text::one_line(name, 100));
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", name.clone()),
        ];
        if let Some(id) = call_id {
            attrs.push(KeyValue::new("gen_ai.tool.call.id", on.redact(id)));
        }
        let span = on
            .tracer
            .span_builder("execute_tool")
            .with_kind(SpanKind::Internal)
            .with_attributes(attrs)
            .start_with_context(&on.tracer, &run.cx);
        ToolSpan(Some((on.clone(), span)))
    }

    /// Ends the span with what the run came to.
    pub fn end(&self, end: &RunEnd<'_>) {
        let Some(run) = &self.0 else { return };
        let span = run.cx.span();
        span.set_attributes(usage_attributes(end.usage));
        span.set_attribute(KeyValue::new("tabd.outcome", end.outcome.to_string()));
        span.set_attribute(KeyValue::new("tabd.cost_usd", end.cost_usd));
        if !end.model.is_empty() {
            span.set_attribute(KeyValue::new("gen_ai.response.model", end.model.to_string()));
        }
        if let Some(e) = end.error {
            span.set_attribute(KeyValue::new("error.type", end.outcome.to_string()));
            span.set_status(Status::error(run.on.redact(e)));
        }
        span.end();
    }
}

/// The token counts as the conventions count them: input includes what was read from and
/// written to the cache, with both also given apart.
fn usage_attributes(u: &Usage) -> [KeyValue; 4] {
    let all_input = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    [
        KeyValue::new("gen_ai.usage.input_tokens", int(all_input)),
        KeyValue::new("gen_ai.usage.output_tokens", int(u.output_tokens)),
        KeyValue::new("gen_ai.usage.cache_read.input_tokens", int(u.cache_read_tokens)),
        KeyValue::new(
            "gen_ai.usage.cache_creation.input_tokens",
            int(u.cache_write_tokens),
        ),
    ]
}

/// One model request's span (empty when telemetry is off).
pub struct ChatSpan(Option<(Arc<On>, opentelemetry_sdk::trace::Span)>);

impl ChatSpan {
    /// The model answered; `cost_usd` from the price book, when the model has a price.
    pub fn answered(self, resp: &Response, cost_usd: Option<f64>) {
        let Some((on, mut span)) = self.0 else { return };
        span.set_attributes(usage_attributes(&resp.usage));
        if !resp.model.is_empty() {
            span.set_attribute(KeyValue::new("gen_ai.response.model", resp.model.clone()));
        }
        span.set_attribute(KeyValue::new(
            "gen_ai.response.finish_reasons",
            Value::Array(vec![StringValue::from(finish_reason(&resp.stop))].into()),
        ));
        if let Some(c) = cost_usd {
            span.set_attribute(KeyValue::new("tabd.cost_usd", c));
        }
        if on.content {
            content::response(&on, &mut span, resp);
        }
        span.end();
    }

    /// An agent CLI's whole turn ended (one `chat` span for it: tabd sees no single request):
    /// what it reported using, its cost, or why it failed.
    pub fn cli_turn(
        self,
        usage: &Usage,
        model: &str,
        cost_usd: Option<f64>,
        failure: Option<&ProviderError>,
    ) {
        if let Some(e) = failure {
            return self.failed(e);
        }
        let Some((_, mut span)) = self.0 else { return };
        span.set_attributes(usage_attributes(usage));
        if !model.is_empty() {
            span.set_attribute(KeyValue::new("gen_ai.response.model", model.to_string()));
        }
        if let Some(c) = cost_usd {
            span.set_attribute(KeyValue::new("tabd.cost_usd", c));
        }
        span.end();
    }

    /// The request failed (after its retries).
    pub fn failed(self, e: &ProviderError) {
        let Some((on, mut span)) = self.0 else { return };
        span.set_attribute(KeyValue::new("error.type", error_type(e)));
        span.set_status(Status::error(on.redact(&e.to_string())));
        span.end();
    }
}

/// The stop reason as the provider's word for it.
fn finish_reason(stop: &StopReason) -> String {
    match stop {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::StopSequence => "stop_sequence".into(),
        StopReason::PauseTurn => "pause_turn".into(),
        StopReason::Refusal => "refusal".into(),
        StopReason::ContextWindowExceeded => "context_window_exceeded".into(),
        StopReason::Other(s) => crate::base::text::one_line(s, 40),
    }
}

/// A failed request's `error.type`: the HTTP status, or what kind of failure (few values).
fn error_type(e: &ProviderError) -> String {
    match e {
        ProviderError::Http { status, .. } => status.to_string(),
        ProviderError::MissingKey { .. } => "missing_key".into(),
        ProviderError::Transport { .. } => "transport".into(),
        ProviderError::Timeout { .. } => "timeout".into(),
        ProviderError::BadResponse { .. } => "bad_response".into(),
        ProviderError::Deadline { .. } => "deadline".into(),
        ProviderError::Cli { .. } => "cli".into(),
    }
}

/// How the harness let a call through (`tabd.tool.approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// `approve: auto`: it ran.
    Allowed,
    /// `approve: ask`: queued for the person (an approval note).
    Asked,
    /// The person approved it in a note: it ran.
    Approved,
    /// Refused: not the role's, denied, too deep, over `max_tool_calls`, or the cluster lease lost.
    Refused,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Asked => "asked",
            Self::Approved => "approved",
            Self::Refused => "refused",
        }
    }
}

/// One tool call's span (empty when telemetry is off).
pub struct ToolSpan(Option<(Arc<On>, opentelemetry_sdk::trace::Span)>);

impl ToolSpan {
    /// The harness knows the tool: its name in the role file, its risk, its MCP server if any.
    pub fn known(&mut self, key: &str, risk: Risk, server: Option<&str>) {
        let Some((_, span)) = &mut self.0 else { return };
        span.update_name(format!("execute_tool {key}"));
        span.set_attribute(KeyValue::new("tabd.tool.risk", risk.as_str()));
        let kind = if server.is_some() { "extension" } else { "function" };
        span.set_attribute(KeyValue::new("gen_ai.tool.type", kind));
        if let Some(s) = server {
            span.set_attribute(KeyValue::new("tabd.tool.server", s.to_string()));
        }
    }

    /// Ends the span: how the harness let it through, and what came of it.
    pub fn end(self, approval: Approval, args: &serde_json::Value, result: Result<&ToolResult, &str>) {
        let Some((on, mut span)) = self.0 else { return };
        span.set_attribute(KeyValue::new("tabd.tool.approval", approval.as_str()));
        let error = match result {
            Err(fatal) => Some(("fatal", fatal.to_string())),
            Ok(_) if approval == Approval::Refused => Some(("refused", String::new())),
            Ok(r) if !r.ok => Some(("tool_error", String::new())),
            Ok(_) => None,
        };
        if let Some((kind, why)) = error {
            span.set_attribute(KeyValue::new("error.type", kind));
            let why = match (why.is_empty(), result) {
                (false, _) => why,
                (true, Ok(r)) => crate::base::text::one_line(&r.text, 200),
                (true, Err(_)) => String::new(),
            };
            // A refusal's words are tabd's, but may quote the model's arguments: content only.
            span.set_status(Status::error(if on.content {
                on.content(&why)
            } else {
                String::new()
            }));
        }
        if on.content {
            let args = match crate::formats::json::check(args) {
                Ok(()) => on.content(&args.to_string()),
                Err(_) => "[arguments nested too deep: not kept]".into(),
            };
            span.set_attribute(KeyValue::new("gen_ai.tool.call.arguments", args));
            if let Ok(r) = result {
                span.set_attribute(KeyValue::new("gen_ai.tool.call.result", on.content(&r.text)));
            }
        }
        span.end();
    }
}

/// What `content = true` adds to a `chat` span, in the conventions' message shape.
mod content {
    use super::*;

    /// The system prompt at a run's first request, and the newest message (the prompt with its
    /// notes, or the tool results the model is answered with).
    pub(super) fn request(on: &On, span: &mut opentelemetry_sdk::trace::Span, req: &Request) {
        if req.messages.len() <= 1 {
            let system = serde_json::json!([{"type": "text", "content": on.content(&req.system)}]);
            span.set_attribute(KeyValue::new("gen_ai.system_instructions", system.to_string()));
        }
        if let Some(last) = req.messages.last() {
            let role = match last.speaker {
                crate::capabilities::provider::Speaker::User => "user",
                crate::capabilities::provider::Speaker::Assistant => "assistant",
            };
            let msg = serde_json::json!([{"role": role, "parts": parts(on, &last.content)}]);
            span.set_attribute(KeyValue::new("gen_ai.input.messages", msg.to_string()));
        }
    }

    pub(super) fn response(on: &On, span: &mut opentelemetry_sdk::trace::Span, resp: &Response) {
        let msg = serde_json::json!([{
            "role": "assistant",
            "parts": parts(on, &resp.message.content),
            "finish_reason": finish_reason(&resp.stop),
        }]);
        span.set_attribute(KeyValue::new("gen_ai.output.messages", msg.to_string()));
    }

    fn parts(on: &On, blocks: &[Block]) -> Vec<serde_json::Value> {
        blocks
            .iter()
            .map(|b| match b {
                Block::Text { text, .. } => serde_json::json!({"type": "text", "content": on.content(text)}),
                Block::Thinking { text, .. } => {
                    serde_json::json!({"type": "reasoning", "content": on.content(text)})
                }
                Block::ToolUse { id, name, input } => serde_json::json!({
                    "type": "tool_call", "id": on.redact(id), "name": on.redact(name),
                    "arguments": on.content(&input.to_string()),
                }),
                Block::ToolResult {
                    tool_use_id, content, ..
                } => serde_json::json!({
                    "type": "tool_call_response", "id": on.redact(tool_use_id),
                    "response": on.content(content),
                }),
            })
            .collect()
    }
}
