//! The think-then-act loop of one run (DESIGN §7.2): call the model, run its tool calls in
//! order, send the results back, until it ends its turn or a limit ends the run.

use serde_json::Value;
use tokio::time::Instant;

use crate::provider::{
    self, Block, Message, Provider, ProviderError, Request, RetryPolicy, StopReason, Usage,
};
use crate::tools::{Change, ToolCallRecord, ToolResult};

/// Limits that end a run (DESIGN §6).
#[derive(Debug, Clone)]
pub struct TurnLimits {
    pub max_tool_calls: u32,
    pub max_tokens_per_run: u64,
    pub deadline: Instant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    /// The model ended its turn.
    Done,
    /// A limit ended the run; the text says which.
    Limit(String),
    /// The model could not be used, or rejected the request.
    Failed(ProviderError),
    /// The conversation outgrew the model's context window.
    ContextExceeded,
}

#[derive(Debug, Clone)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    /// Thinking blocks and the text before the first tool call.
    pub thinking: String,
    /// The model's last text.
    pub summary: String,
    pub calls: Vec<ToolCallRecord>,
    pub changes: Vec<Change>,
    pub usage: Usage,
    pub model: String,
    /// Model requests made (retries not counted).
    pub requests: u32,
}

/// Most model calls one run may make, whatever else happens (a safety net for pause_turn
/// loops and models that call one tool at a time up to the limit).
const MAX_MODEL_CALLS: u32 = 200;

/// Runs the loop. `exec` runs one tool call (name, input) and returns its result and record.
pub async fn run_turn(
    provider: &dyn Provider,
    retry: &RetryPolicy,
    mut req: Request,
    limits: &TurnLimits,
    exec: &mut (dyn FnMut(&str, &Value) -> (ToolResult, ToolCallRecord) + Send),
) -> TurnOutcome {
    let mut out = TurnOutcome {
        end: TurnEnd::Done,
        thinking: String::new(),
        summary: String::new(),
        calls: Vec::new(),
        changes: Vec::new(),
        usage: Usage::default(),
        model: req.model.clone(),
        requests: 0,
    };
    let mut thinking_blocks: Vec<String> = Vec::new();
    let mut pre_tool_text: Vec<String> = Vec::new();
    let mut seen_tool = false;

    loop {
        if out.requests >= MAX_MODEL_CALLS {
            out.end = TurnEnd::Limit(format!("{MAX_MODEL_CALLS} model calls"));
            break;
        }
        out.requests += 1;
        let resp = match provider::complete(provider, &req, retry, limits.deadline).await {
            Ok(r) => r,
            Err(e) => {
                out.end = TurnEnd::Failed(e);
                break;
            }
        };
        out.usage.add(resp.usage);
        if !resp.model.is_empty() {
            out.model = resp.model.clone();
        }
        for block in &resp.message.content {
            match block {
                Block::Thinking { text, .. } if !seen_tool && !text.trim().is_empty() => {
                    thinking_blocks.push(text.trim().to_string())
                }
                Block::Text { text, .. } if !text.trim().is_empty() => {
                    if !seen_tool {
                        pre_tool_text.push(text.trim().to_string());
                    }
                    out.summary = text.trim().to_string();
                }
                Block::ToolUse { .. } => seen_tool = true,
                _ => {}
            }
        }
        let uses: Vec<(String, String, Value)> = resp
            .tool_uses()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        req.messages.push(resp.message.clone());
        match resp.stop {
            StopReason::ContextWindowExceeded => {
                out.end = TurnEnd::ContextExceeded;
                break;
            }
            StopReason::PauseTurn if uses.is_empty() => continue,
            _ if uses.is_empty() => break,
            _ => {}
        }

        let mut results = Vec::with_capacity(uses.len());
        let mut limit: Option<String> = None;
        for (id, name, input) in uses {
            if out.calls.len() as u32 >= limits.max_tool_calls {
                limit = Some(format!("max_tool_calls ({})", limits.max_tool_calls));
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content: format!(
                        "not run: this run reached its limit of {} tool calls",
                        limits.max_tool_calls
                    ),
                    is_error: true,
                });
                continue;
            }
            let (result, record) = exec(&name, &input);
            out.calls.push(record);
            out.changes.extend(result.changes.iter().cloned());
            results.push(Block::ToolResult {
                tool_use_id: id,
                content: result.text,
                is_error: !result.ok,
            });
        }
        if limit.is_none() && out.usage.total() >= limits.max_tokens_per_run {
            limit = Some(format!("max_tokens_per_run ({})", limits.max_tokens_per_run));
        }
        if let Some(reason) = limit {
            results.push(Block::Text {
                text: format!(
                    "This run has reached its limit ({reason}). Do not call any more tools. Reply now with a short \
                     summary of what you did and what is left for the next run."
                ),
                cache: false,
            });
            req.messages.push(Message::user(results));
            req.tool_choice_none = true;
            out.requests += 1;
            if let Ok(resp) = provider::complete(provider, &req, retry, limits.deadline).await {
                out.usage.add(resp.usage);
                let text = resp.text();
                if !text.trim().is_empty() {
                    out.summary = text.trim().to_string();
                }
            }
            out.end = TurnEnd::Limit(reason);
            break;
        }
        req.messages.push(Message::user(results));
    }

    let mut thinking = thinking_blocks;
    if seen_tool {
        thinking.extend(pre_tool_text);
    }
    out.thinking = thinking.join("\n\n");
    out
}
