//! The think-then-act loop of one run (docs/spec.md §7.2): call the model, run its tool calls in
//! order, send the results back, until it ends its turn or a limit ends the run.

use serde_json::Value;
use tokio::time::Instant;

use crate::base::calls::{Change, ToolCallRecord};
use crate::base::cost::{Account, Usage};
use crate::base::cost::{CacheTtl, Price};
use crate::capabilities::provider::{
    self, Block, Message, Provider, ProviderError, Request, RetryPolicy, StopReason,
};
use crate::capabilities::tools::FatalToolError;
use crate::gate::harness::{Limit, ToolExecutor};
use crate::records::limits::Crossed;

/// Limits that end a run (docs/spec.md §6, §17, §18).
#[derive(Debug, Clone)]
pub struct TurnLimits {
    /// What the run may spend (`max_tokens_per_run`, `max_cost_usd`), shared with the runs it
    /// delegates to and counted in the runs that delegated to it.
    pub account: Account,
    /// The model's price, for `max_cost_usd` (none: the cost limit cannot apply).
    pub price: Option<Price>,
    pub cache_ttl: CacheTtl,
    pub deadline: Instant,
    /// The final answer's contract (`output.schema`): checked when the model ends its turn.
    pub output: Option<std::sync::Arc<jsonschema::Validator>>,
    /// A call that waits for the person's approval suspends the turn (role `resume`, default
    /// on): it goes on with the call's result once decided, instead of with "queued".
    pub suspend: bool,
    /// The run's span: each model request gets a `chat` child (nothing when telemetry is off).
    pub trace: crate::capabilities::telemetry::RunSpan,
    /// The day the run spends in (docs/spec.md §6, §17): each response is counted in it, and between
    /// two steps the daily budgets are checked. `None`: no daily budget applies here.
    pub day: Option<std::sync::Arc<dyn crate::gate::harness::Day>>,
    /// `checkpoint_every` (docs/spec.md §28): none, or when the run waits for the person at a
    /// checkpoint (only a turn that may suspend has one).
    pub checkpoint: Option<Checkpoints>,
}

/// Every `every` tool calls of the run, it waits at a checkpoint: between two steps, after the
/// Nth call's result and before the next request, like a budget check.
#[derive(Clone)]
pub struct Checkpoints {
    pub every: u32,
    /// The tool calls the run made before this turn (its earlier parts'): the count goes on.
    pub before: u32,
    /// Writes the checkpoint's request and note; its note's path, or why not. None for a run
    /// that cannot wait for the person (a delegated child, `resume: false`): it ends at its
    /// checkpoint instead, saying what it did.
    pub ask: Option<std::sync::Arc<dyn AskCheckpoint>>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Checkpoints(every {}, {} before)", self.every, self.before)
    }
}

/// The run layer's side of a checkpoint: its request in the ledger and its note.
pub trait AskCheckpoint: Send + Sync {
    fn ask(&self, at: &crate::gate::approvals::checkpoint::At) -> Result<String, String>;
}

/// The call id a checkpoint waits under in a suspended turn (no model's call is answered by it).
pub const CHECKPOINT_CALL: &str = "tabd-checkpoint";

impl TurnLimits {
    fn cost(&self, usage: &Usage) -> Option<f64> {
        self.price.map(|p| p.cost(usage, self.cache_ttl))
    }
}

/// The most `req` can cost, in dollars: every byte of its text read as a token at the dearer of
/// the input and cache-write prices (3 bytes a token: more tokens than real text has), and
/// `max_tokens` of output. `max_cost_usd` is a ceiling: a request is sent only if this fits.
fn worst_case_cost(req: &Request, price: &Price, ttl: CacheTtl) -> f64 {
    let mut bytes = req.system.len();
    for m in &req.messages {
        for b in &m.content {
            bytes += match b {
                Block::Text { text, .. } | Block::Thinking { text, .. } => text.len(),
                Block::ToolUse { input, name, .. } => input.to_string().len() + name.len(),
                Block::ToolResult { content, .. } => content.len(),
            };
        }
    }
    bytes += req
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum::<usize>();
    let input_tokens = bytes.div_ceil(3) as u64;
    let write = match ttl {
        CacheTtl::FiveMinutes => price.cache_write,
        CacheTtl::OneHour => price.cache_write_1h,
    };
    let per_input = price.input.max(write);
    let m = 1_000_000.0;
    input_tokens as f64 * per_input / m + f64::from(req.max_tokens) * price.output / m
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
    /// The final answer did not satisfy the role's output schema, even after one repair turn.
    OutputInvalid(String),
    /// A tool call hit a failure of the vault itself (disk full, read-only).
    ToolFatal(String),
    /// tabd itself failed during the run (a panic, caught by the daemon). Never set by the loop.
    Crashed(String),
    /// tabd was stopped (a restart, Ctrl-C) before the run ended: nobody's fault, the notes run
    /// again. Never set by the loop.
    Stopped,
    /// `max_cost_usd` is less than the run's first request could cost: it was not sent.
    CapTooLow(String),
    /// A server the role requires could not be used; the model was not called. `cause` names the
    /// server and why (one daily line per cause); `last_output` is what it printed last, if any.
    ServerDown { cause: String, last_output: String },
    /// A call waits for the person's approval: the turn is saved (`TurnOutcome::suspension`) and
    /// goes on once it is decided.
    Suspended,
    /// The person stopped the run at a checkpoint (`checkpoint_every`), or let it expire; the
    /// text says which. Never set by the loop.
    StoppedByYou(String),
    /// A run that cannot wait for the person (a delegated child) reached its checkpoint: it ends
    /// there, its next call never made; the text says so, with each call it made.
    AtCheckpoint(String),
}

/// A turn stopped at a call waiting for approval: everything needed to go on from there.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Suspension {
    /// The conversation so far, its last message the model's, with the calls.
    pub request: Request,
    /// Every call's result in that message, in order; those waiting say "queued" for now.
    pub results: Vec<Block>,
    /// The waiting calls: the model's call id and the approval note.
    pub waiting: Vec<(String, String)>,
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
    /// The run's cost as an agent CLI reported it (docs/spec.md §16); `None`: computed from prices.
    pub cost_usd: Option<f64>,
    /// The final answer as JSON, when the role has an output schema and it satisfied it.
    pub output: Option<Value>,
    /// Set when the turn ended `Suspended`.
    pub suspension: Option<Suspension>,
    /// The first look of the role's `triage_model`, when the run had one (docs/spec.md §25). When its
    /// verdict is `Nothing`, the whole turn was that one request.
    pub triage: Option<triage::Triage>,
}

impl TurnOutcome {
    /// A turn that ended before the model was called.
    pub fn ended(end: TurnEnd) -> Self {
        Self {
            end,
            thinking: String::new(),
            summary: String::new(),
            calls: Vec::new(),
            changes: Vec::new(),
            usage: Usage::default(),
            model: String::new(),
            requests: 0,
            cost_usd: None,
            output: None,
            suspension: None,
            triage: None,
        }
    }
}

/// Fewest output tokens worth a request under `max_cost_usd` (less could not finish a tool call).
const MIN_OUTPUT: u32 = 256;
/// Fewest output tokens worth a closing summary.
const MIN_SUMMARY: u32 = 64;

/// Most model calls one run may make, whatever else happens (a safety net for pause_turn
/// loops and models that call one tool at a time up to the limit).
const MAX_MODEL_CALLS: u32 = 200;

/// What the loop keeps between requests.
struct Loop<'a> {
    provider: &'a dyn Provider,
    retry: &'a RetryPolicy,
    limits: &'a TurnLimits,
    out: TurnOutcome,
    thinking_blocks: Vec<String>,
    /// The text of every model message, in order: all but the last are the run's thinking
    /// ("Now I'll record the slip" between tool calls is kept), the last is its summary.
    texts: Vec<String>,
    seen_tool: bool,
    /// The text of the latest model message: the reason for the calls it asks for.
    last_text: String,
    /// Tool calls made in this turn.
    made: u32,
}

/// Runs the loop.
pub async fn run_turn(
    provider: &dyn Provider,
    retry: &RetryPolicy,
    mut req: Request,
    limits: &TurnLimits,
    exec: &dyn ToolExecutor,
) -> TurnOutcome {
    req.cache_ttl = Some(limits.cache_ttl);
    let mut l = Loop {
        provider,
        retry,
        limits,
        out: TurnOutcome {
            model: req.model.clone(),
            ..TurnOutcome::ended(TurnEnd::Done)
        },
        thinking_blocks: Vec::new(),
        texts: Vec::new(),
        seen_tool: false,
        last_text: String::new(),
        made: 0,
    };
    loop {
        if let Some(end) = l.may_not_ask() {
            l.out.end = end;
            break;
        }
        let held = match l.fit_under_cap(&mut req, MIN_OUTPUT) {
            Ok(held) => held,
            Err(too_dear) => {
                let why = too_dear.to_string();
                l.out.end = if l.out.requests == 0 {
                    TurnEnd::CapTooLow(why)
                } else {
                    TurnEnd::Limit(why)
                };
                break;
            }
        };
        let asked = l.ask(&mut req).await;
        drop(held); // charged now: what it held goes back
        let Some(uses) = asked else {
            l.check_output(&mut req).await;
            break;
        };
        if uses.is_empty() {
            continue; // a paused turn, sent back to continue
        }
        let made_before = l.made;
        let (results, limit, waiting) = l.run_tools(uses, exec).await;
        if let TurnEnd::ToolFatal(_) = l.out.end {
            break;
        }
        if limits.suspend && !waiting.is_empty() {
            l.suspend(req, results, waiting);
            break;
        }
        match limit {
            Some(Ends::AtOnce(why)) => {
                l.out.end = TurnEnd::Limit(why);
                break;
            }
            Some(Ends::WithSummary(reason)) => {
                l.summarize(&mut req, results, reason).await;
                break;
            }
            None => {}
        }
        if l.checkpoint_due(made_before) {
            l.at_checkpoint(req, results);
            break;
        }
        req.messages.push(Message::user(results));
    }
    l.finish()
}

impl Loop<'_> {
    /// What ends the run before its next request, if anything: the most model calls a run may
    /// make, a ceiling of the run (or of a run above it), a daily budget.
    fn may_not_ask(&self) -> Option<TurnEnd> {
        if self.out.requests >= MAX_MODEL_CALLS {
            return Some(TurnEnd::Limit(format!("{MAX_MODEL_CALLS} model calls")));
        }
        if let Some(why) = self.spending_limit() {
            // Spent before this run asked anything: a parent's children used it all up.
            return Some(if self.out.requests == 0 {
                TurnEnd::CapTooLow(why)
            } else {
                TurnEnd::Limit(why)
            });
        }
        // The day's budget is a ceiling: no request past it, not even for a summary.
        self.day_crossed()
            .map(|crossed| TurnEnd::Limit(crossed.to_string()))
    }

    /// One model call. `None`: the turn is over (ended, failed); else the tool calls to run
    /// (empty for a paused turn that continues).
    async fn ask(&mut self, req: &mut Request) -> Option<Vec<(String, String, Value)>> {
        self.out.requests += 1;
        self.retry
            .progress
            .emit(crate::base::progress::Step::Asking(self.out.requests));
        let resp = match self.complete(req).await {
            Ok(r) => r,
            Err(e) => {
                self.out.end = TurnEnd::Failed(e);
                return None;
            }
        };
        self.charge(resp.usage);
        if !resp.model.is_empty() {
            self.out.model = resp.model.clone();
        }
        self.note_text(&resp.message.content);
        self.last_text = resp
            .message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } if !text.trim().is_empty() => Some(text.trim()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let uses: Vec<(String, String, Value)> = resp
            .tool_uses()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        req.messages.push(resp.message);
        match resp.stop {
            StopReason::ContextWindowExceeded => {
                self.out.end = TurnEnd::ContextExceeded;
                None
            }
            StopReason::PauseTurn if uses.is_empty() => Some(Vec::new()),
            _ if uses.is_empty() => None,
            _ => Some(uses),
        }
    }

    /// One request, with the provider's retries, in a `chat` span of the run's.
    async fn complete(&self, req: &Request) -> Result<provider::Response, ProviderError> {
        let span = self.limits.trace.chat(req);
        let answer = provider::complete(self.provider, req, self.retry, self.limits.deadline).await;
        match &answer {
            Ok(resp) => span.answered(resp, self.limits.cost(&resp.usage)),
            Err(e) => span.failed(e),
        }
        answer
    }

    fn note_text(&mut self, content: &[Block]) {
        let mut message = Vec::new();
        for block in content {
            match block {
                Block::Thinking { text, .. } if !self.seen_tool && !text.trim().is_empty() => {
                    self.thinking_blocks.push(text.trim().to_string())
                }
                Block::Text { text, .. } if !text.trim().is_empty() => {
                    message.push(text.trim());
                    self.out.summary = text.trim().to_string();
                }
                Block::ToolUse { .. } => self.seen_tool = true,
                _ => {}
            }
        }
        if !message.is_empty() {
            self.texts.push(message.join("\n\n"));
        }
    }

    /// The person decides: the turn goes on from here, later, with the calls' real results.
    fn suspend(&mut self, request: Request, results: Vec<Block>, waiting: Vec<(String, String)>) {
        self.out.end = TurnEnd::Suspended;
        self.out.suspension = Some(Suspension {
            request,
            results,
            waiting,
        });
    }

    /// Whether the calls of the last response crossed a multiple of `checkpoint_every` (counted
    /// over the whole run, its earlier parts too).
    fn checkpoint_due(&self, made_before: u32) -> bool {
        let Some(c) = &self.limits.checkpoint else {
            return false;
        };
        let every = c.every.max(1);
        (c.before + made_before) / every < (c.before + self.made) / every
    }

    /// The run stops at its checkpoint. It waits for the person, as for an approval, when it can;
    /// a checkpoint that cannot be written ends it: it does not go on past one the person cannot
    /// see. A run that cannot wait (a delegated child) ends there, its next call never made.
    fn at_checkpoint(&mut self, req: Request, results: Vec<Block>) {
        let Some(c) = self.limits.checkpoint.clone() else {
            return;
        };
        let (tokens, usd) = self.limits.account.spent();
        let at = crate::gate::approvals::checkpoint::At {
            calls: c.before + self.made,
            every: c.every,
            lines: call_lines(&req, &results),
            next: self.last_text.clone(),
            tokens,
            usd,
        };
        match c.ask.filter(|_| self.limits.suspend) {
            Some(ask) => match ask.ask(&at) {
                Ok(note) => self.suspend(req, results, vec![(CHECKPOINT_CALL.to_string(), note)]),
                Err(why) => self.out.end = TurnEnd::Limit(format!("checkpoint not written: {why}")),
            },
            None => self.out.end = TurnEnd::AtCheckpoint(at.ended()),
        }
    }

    /// Runs the calls in order; returns their results, what ends the run (if anything) and the
    /// calls that wait for approval (call id, note). Each call is a step: once the harness finds
    /// the day's budget spent, no later call of the response runs.
    async fn run_tools(
        &mut self,
        uses: Vec<(String, String, Value)>,
        exec: &dyn ToolExecutor,
    ) -> (Vec<Block>, Option<Ends>, Vec<(String, String)>) {
        let mut results = Vec::with_capacity(uses.len());
        let mut limit = None;
        let mut waiting = Vec::new();
        for (id, name, input) in uses {
            self.made += 1;
            match exec.call(&id, &name, &input, &self.last_text).await {
                Ok(called) => {
                    let day = match called.limit {
                        Some(Limit::Day(crossed)) => Some(crossed),
                        Some(calls @ Limit::ToolCalls(_)) => {
                            limit.get_or_insert(Ends::WithSummary(calls.to_string()));
                            None
                        }
                        None => None,
                    };
                    if let Some(note) = called.record.as_ref().and_then(|r| r.approval.clone()) {
                        waiting.push((id.clone(), note));
                    }
                    results.push(Block::ToolResult {
                        tool_use_id: id,
                        content: called.result.text,
                        is_error: !called.result.ok,
                    });
                    if let Some(crossed) = day {
                        return (results, Some(Ends::AtOnce(crossed.to_string())), waiting);
                    }
                }
                Err(FatalToolError(why)) => {
                    self.out.end = TurnEnd::ToolFatal(why);
                    return (results, None, waiting);
                }
            }
        }
        if limit.is_none() {
            limit = self.spending_limit().map(Ends::WithSummary);
        }
        (results, limit, waiting)
    }

    /// Counts a response's usage in the run, in its account (and the accounts above it) and in
    /// the day it spends in.
    fn charge(&mut self, usage: Usage) {
        self.out.usage.add(usage);
        let usd = self.limits.cost(&usage).unwrap_or(0.0);
        self.limits.account.charge(usage.total(), usd);
        if let Some(day) = &self.limits.day {
            crate::base::blocking::run(|| day.spent(usage.total(), usd));
        }
    }

    /// The token or dollar limit the run (or a run that delegated to it) has reached, if any.
    fn spending_limit(&self) -> Option<String> {
        self.limits.account.exhausted()
    }

    /// The daily budget spent, if one is — asked between two steps: once the run has spent
    /// something (its start is its door's to check: the daemon's dispatch, `tabd fire`, the run
    /// that delegates), before each request it makes.
    fn day_crossed(&self) -> Option<Crossed> {
        let day = self.limits.day.as_ref()?;
        let (tokens, usd) = self.limits.account.spent();
        if tokens == 0 && usd <= 0.0 {
            return None;
        }
        crate::base::blocking::run(|| day.crossed())
    }

    /// Makes `req` unable to cross `max_cost_usd` (the run's, or that of a run above it): its
    /// input must fit in what is left, and its output is shortened so that what it can cost at
    /// most fits too; that most is then held on the account (and every account above) until the
    /// response is charged, so runs in parallel cannot spend the same dollars. `Err` (why) when
    /// not even `min_output` tokens would fit: the request must not be sent.
    fn fit_under_cap(
        &self,
        req: &mut Request,
        min_output: u32,
    ) -> Result<Option<crate::base::cost::Reservation>, TooDear> {
        let (Some(left), Some(price)) = (self.limits.account.usd_left(), self.limits.price) else {
            return Ok(None);
        };
        let too_dear = || TooDear { left };
        let input_only = Request {
            max_tokens: 0,
            ..req.clone()
        };
        // The input alone must fit, whatever the output costs (a model that prices only input).
        let room = left - worst_case_cost(&input_only, &price, self.limits.cache_ttl);
        if room < 0.0 {
            return Err(too_dear());
        }
        let fits = if price.output > 0.0 {
            (room * 1_000_000.0 / price.output).floor()
        } else {
            f64::from(req.max_tokens)
        };
        if fits < f64::from(min_output) {
            return Err(too_dear());
        }
        req.max_tokens = req.max_tokens.min(fits as u32);
        let most = worst_case_cost(req, &price, self.limits.cache_ttl);
        self.limits.account.reserve(most).map(Some).ok_or_else(too_dear)
    }

    /// The model ended its turn: with an output schema, its last words must be a JSON object
    /// that fits. One repair turn (tools forbidden) with the errors; still wrong, the run fails.
    async fn check_output(&mut self, req: &mut Request) {
        let Some(schema) = self.limits.output.clone() else {
            return;
        };
        if self.out.end != TurnEnd::Done {
            return;
        }
        let errors = match answer_json(&self.out.summary, &schema) {
            Ok(v) => {
                self.out.output = Some(v);
                return;
            }
            Err(errors) => errors,
        };
        req.messages.push(Message::user(vec![Block::Text {
            text: format!(
                "Your final answer must be one JSON object that satisfies the output schema, and it does not: \
                 {errors}. Reply now with the corrected JSON object only, no other text."
            ),
            cache: false,
        }]));
        req.tool_choice_none = true;
        if let Some(crossed) = self.day_crossed() {
            self.out.end = TurnEnd::OutputInvalid(format!("{errors} (no repair turn: the {crossed})"));
            return;
        }
        let _held = match self.fit_under_cap(req, MIN_OUTPUT) {
            Ok(held) => held,
            Err(why) => {
                self.out.end = TurnEnd::OutputInvalid(format!("{errors} (no repair turn: {why})"));
                return;
            }
        };
        self.out.requests += 1;
        match self.complete(req).await {
            Ok(resp) => {
                self.charge(resp.usage);
                let text = resp.text();
                match answer_json(text.trim(), &schema) {
                    Ok(v) => {
                        self.out.summary = text.trim().to_string();
                        self.out.output = Some(v);
                    }
                    Err(still) => {
                        self.out.end = TurnEnd::OutputInvalid(format!("{still} (after one repair turn)"))
                    }
                }
            }
            Err(e) => self.out.end = TurnEnd::Failed(e),
        }
    }

    /// A limit was reached: one last call, tools forbidden, for a summary — only if it fits
    /// under `max_cost_usd` (its output is shortened to fit; a cap is a ceiling).
    async fn summarize(&mut self, req: &mut Request, mut results: Vec<Block>, reason: String) {
        results.push(Block::Text {
            text: format!(
                "This run has reached its limit ({reason}). Do not call any more tools. Reply now with a short \
                 summary of what you did and what is left for the next run."
            ),
            cache: false,
        });
        req.messages.push(Message::user(results));
        req.tool_choice_none = true;
        if let Some(crossed) = self.day_crossed() {
            // The day's budget is spent too: no summary past it; the run ends on what the model
            // last said.
            self.out.end = TurnEnd::Limit(crossed.to_string());
            return;
        }
        let Ok(_held) = self.fit_under_cap(req, MIN_SUMMARY) else {
            // No room for a summary under the cap: the run ends on what the model last said.
            self.out.end = TurnEnd::Limit(reason);
            return;
        };
        self.out.requests += 1;
        if let Ok(resp) = self.complete(req).await {
            self.charge(resp.usage);
            let text = resp.text();
            if !text.trim().is_empty() {
                self.out.summary = text.trim().to_string();
            }
        }
        self.out.end = TurnEnd::Limit(reason);
    }

    fn finish(mut self) -> TurnOutcome {
        let mut thinking = self.thinking_blocks;
        if self.seen_tool {
            // Everything the model said on the way; its last words are the summary.
            let said = self.texts.len().saturating_sub(1);
            thinking.extend(self.texts.into_iter().take(said));
        }
        self.out.thinking = thinking.join("\n\n");
        self.out
    }
}

/// Each tool call of the conversation (and of `pending`, results not yet in it) and its result,
/// one line each: `write_file {"path":"a.md"} → wrote a.md`.
fn call_lines(req: &Request, pending: &[Block]) -> Vec<String> {
    let blocks = || req.messages.iter().flat_map(|m| m.content.iter()).chain(pending);
    let result_of = |id: &str| {
        blocks().find_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } if tool_use_id == id => Some(if *is_error {
                format!("error: {content}")
            } else {
                content.clone()
            }),
            _ => None,
        })
    };
    blocks()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some(format!(
                "{name} {} → {}",
                crate::base::text::one_line(&input.to_string(), 120),
                crate::base::text::one_line(&result_of(id).unwrap_or_default(), 120)
            )),
            _ => None,
        })
        .collect()
}

/// Why the run ends after a response's tool calls.
enum Ends {
    /// A limit of the run (`max_tool_calls`, `max_tokens_per_run`, `max_cost_usd`): one last
    /// request, tools forbidden, asks for a summary.
    WithSummary(String),
    /// A daily budget is spent: the run ends at once (a summary would be spent past it).
    AtOnce(String),
}

/// A request that `max_cost_usd` (the run's, or a run's above it) cannot pay for: `left` is
/// what was left of it.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("max_cost_usd ({} left, and the next request could cost more)", crate::base::cost::dollars(.left.max(0.0)))]
pub struct TooDear {
    left: f64,
}

/// Why a final answer does not meet the role's output contract.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is not a JSON object ({0})")]
    NotJson(crate::formats::json::JsonError),
    #[error(transparent)]
    Mismatch(#[from] crate::capabilities::mcp::schema::Mismatch),
}

/// The JSON object in a final answer (bare, or in one ```json fence), checked against `schema`.
pub fn answer_json(answer: &str, schema: &jsonschema::Validator) -> Result<Value, AnswerError> {
    let text = answer.trim();
    let inner = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.trim_end().strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let value: Value = crate::formats::json::parse(inner).map_err(AnswerError::NotJson)?;
    crate::capabilities::mcp::schema::problems(schema, &value, 10)?;
    Ok(value)
}

pub mod triage;

#[cfg(test)]
mod tests;
