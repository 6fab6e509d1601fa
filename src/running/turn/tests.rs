//! The loop and the retry loop against an in-memory provider, in tokio's paused time.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::base::calls::{ToolResult, ToolSpec};
use crate::capabilities::provider::{BoxFuture, Speaker};
use crate::gate::harness::Called;
use crate::records::limits::Crossed;

/// Answers from a script and keeps every request.
#[derive(Default)]
struct Scripted {
    replies: Mutex<VecDeque<Result<provider::Response, ProviderError>>>,
    seen: Mutex<Vec<Request>>,
}

impl Scripted {
    fn new(replies: Vec<Result<provider::Response, ProviderError>>) -> Self {
        Self {
            replies: Mutex::new(replies.into()),
            seen: Mutex::default(),
        }
    }
    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

impl Provider for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<provider::Response, ProviderError>> {
        self.seen.lock().unwrap().push(req.clone());
        let next = self.replies.lock().unwrap().pop_front();
        Box::pin(async move { next.unwrap_or_else(|| Ok(text("script exhausted"))) })
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

fn reply(content: Vec<Block>, stop: StopReason, u: Usage) -> provider::Response {
    provider::Response {
        message: Message {
            speaker: Speaker::Assistant,
            content,
            raw: None,
        },
        stop,
        usage: u,
        model: "m".into(),
    }
}

fn text(t: &str) -> provider::Response {
    reply(
        vec![Block::Text {
            text: t.into(),
            cache: false,
        }],
        StopReason::EndTurn,
        usage(10, 5),
    )
}

fn call(id: &str, name: &str) -> provider::Response {
    reply(
        vec![
            Block::Text {
                text: format!("I will use {name}."),
                cache: false,
            },
            Block::ToolUse {
                id: id.into(),
                name: name.into(),
                input: json!({"path": "x.md"}),
            },
        ],
        StopReason::ToolUse,
        usage(100, 20),
    )
}

/// Echoes every call, refusing past `max` calls as the harness does; `fatal` names a tool whose
/// call fails the vault.
struct Echo {
    fatal: Option<&'static str>,
    max: u32,
    ran: AtomicU32,
}

fn echo() -> Echo {
    Echo {
        fatal: None,
        max: 5,
        ran: AtomicU32::new(0),
    }
}

impl ToolExecutor for Echo {
    fn call<'a>(
        &'a self,
        _id: &'a str,
        name: &'a str,
        input: &'a Value,
        _reason: &'a str,
    ) -> BoxFuture<'a, Result<Called, FatalToolError>> {
        Box::pin(async move {
            if self.fatal == Some(name) {
                return Err(FatalToolError("disk full".into()));
            }
            if self.ran.load(Ordering::SeqCst) >= self.max {
                return Ok(Called {
                    result: ToolResult::error(format!(
                        "not run: this run reached its limit of {} tool calls",
                        self.max
                    )),
                    limit: Some(crate::gate::harness::Limit::ToolCalls(self.max)),
                    record: None,
                });
            }
            self.ran.fetch_add(1, Ordering::SeqCst);
            let result = ToolResult::ok(format!("ran {name}"), 1, vec![]);
            let record = crate::base::calls::record_of(name, input, &result, None);
            Ok(Called {
                result,
                limit: None,
                record: Some(record),
            })
        })
    }
}

fn request() -> Request {
    Request {
        model: "m".into(),
        system: "sys".into(),
        messages: vec![Message::user(vec![Block::Text {
            text: "go".into(),
            cache: true,
        }])],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "d".into(),
            input_schema: json!({}),
        }],
        max_tokens: 100,
        temperature: None,
        thinking_budget: 0,
        tool_choice_none: false,
        cache_ttl: None,
    }
}

fn limits() -> TurnLimits {
    TurnLimits {
        account: crate::base::cost::Account::new(1_000_000, None),
        price: None,
        cache_ttl: CacheTtl::OneHour,
        deadline: Instant::now() + Duration::from_secs(600),
        output: None,
        suspend: false,
        trace: Default::default(),
        day: None,
        checkpoint: None,
    }
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        min_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(4),
        progress: Default::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn tool_results_answer_their_calls_and_the_text_is_kept() {
    let p = Scripted::new(vec![Ok(call("t1", "read_file")), Ok(text("All done."))]);
    let out = run_turn(&p, &fast_retry(), request(), &limits(), &echo()).await;
    assert_eq!(out.end, TurnEnd::Done);
    assert_eq!(out.summary, "All done.");
    assert_eq!(out.thinking, "I will use read_file.");
    assert!(out.calls.is_empty(), "calls are the harness's to record");
    assert_eq!(out.requests, 2);
    assert_eq!(out.usage.total(), 135);
    let second = &p.seen()[1];
    assert_eq!(second.cache_ttl, Some(CacheTtl::OneHour));
    let last = second.messages.last().unwrap();
    assert_eq!(
        last.content,
        [Block::ToolResult {
            tool_use_id: "t1".into(),
            content: "ran read_file".into(),
            is_error: false
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn max_tool_calls_ends_with_a_summary_and_tools_forbidden() {
    let p = Scripted::new(vec![
        Ok(call("a", "read_file")),
        Ok(call("b", "read_file")),
        Ok(call("c", "read_file")),
        Ok(text("Summary: three reads.")),
    ]);
    let exec = Echo { max: 2, ..echo() };
    let out = run_turn(&p, &fast_retry(), request(), &limits(), &exec).await;
    assert_eq!(out.end, TurnEnd::Limit("max_tool_calls (2)".into()));
    assert_eq!(exec.ran.load(Ordering::SeqCst), 2);
    assert_eq!(out.summary, "Summary: three reads.");
    let seen = p.seen();
    assert!(
        seen.last().unwrap().tool_choice_none,
        "the summary call forbids tools"
    );
    let results: Vec<&Block> = seen
        .last()
        .unwrap()
        .messages
        .last()
        .unwrap()
        .content
        .iter()
        .collect();
    assert!(
        matches!(results[0], Block::ToolResult { is_error: true, content, .. } if content.contains("limit of 2")),
        "{results:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn token_and_dollar_limits_end_the_run() {
    let p = Scripted::new(vec![Ok(call("a", "read_file")), Ok(text("stopped"))]);
    let lim = TurnLimits {
        account: crate::base::cost::Account::new(100, None),
        ..limits()
    };
    let out = run_turn(&p, &fast_retry(), request(), &lim, &echo()).await;
    assert_eq!(out.end, TurnEnd::Limit("max_tokens_per_run (100)".into()));
}

/// `max_cost_usd` is a ceiling (issue 21): no request is sent whose cost could cross it — its
/// output is shortened to fit, and when not even a short answer fits, the run ends before it.
#[tokio::test(start_paused = true)]
async fn max_cost_usd_is_a_ceiling_never_crossed() {
    let price = crate::base::cost::built_in("claude-sonnet-4-5");
    let big = |id: &str| {
        let mut r = call(id, "read_file");
        r.usage = usage(10_000, 1_000); // $0.045 at Sonnet 4.5 prices
        r
    };
    // Room after the first call: the second request's output is cut to what still fits.
    let p = Scripted::new(vec![Ok(big("a")), Ok(text("done"))]);
    let lim = TurnLimits {
        account: crate::base::cost::Account::new(1_000_000, Some(0.08)),
        price,
        ..limits()
    };
    let mut req = request();
    req.max_tokens = 4096;
    let out = run_turn(&p, &fast_retry(), req.clone(), &lim, &echo()).await;
    assert_eq!(out.end, TurnEnd::Done);
    let seen = p.seen();
    assert_eq!(seen[0].max_tokens, 4096, "the first request fits whole");
    assert!(
        seen[1].max_tokens < 4096 && seen[1].max_tokens >= 256,
        "the second is cut to fit under the cap: {}",
        seen[1].max_tokens
    );
    // Spent on the first request, plus the most the second could add in output, fits the cap.
    let spent_first = 10_000.0 * 3.0 / 1e6 + 1_000.0 * 15.0 / 1e6;
    assert!(spent_first + f64::from(seen[1].max_tokens) * 15.0 / 1e6 <= 0.08);

    // No room for even a short answer: the run ends before the request, with no wrap-up call.
    let p = Scripted::new(vec![Ok(big("a")), Ok(text("never sent"))]);
    let lim = TurnLimits {
        account: crate::base::cost::Account::new(1_000_000, Some(0.048)),
        price,
        ..limits()
    };
    let out = run_turn(&p, &fast_retry(), req.clone(), &lim, &echo()).await;
    assert!(
        matches!(&out.end, TurnEnd::Limit(why) if why.starts_with("max_cost_usd (")),
        "{:?}",
        out.end
    );
    assert_eq!(p.seen().len(), 1, "nothing was sent that could cross the cap");

    // A cap below what the very first request could cost: nothing is sent, and it is a failure
    // of the run (its notes must not move on as if handled).
    let p = Scripted::new(vec![Ok(text("never sent"))]);
    let lim = TurnLimits {
        account: crate::base::cost::Account::new(1_000_000, Some(0.0001)),
        price,
        ..limits()
    };
    let out = run_turn(&p, &fast_retry(), req, &lim, &echo()).await;
    assert!(matches!(out.end, TurnEnd::CapTooLow(_)), "{:?}", out.end);
    assert!(p.seen().is_empty());
}

/// A model that prices only its input (issue 29, item 2): the input is bounded too — a request
/// whose input alone could cross the cap is never sent, whatever its output would cost.
#[tokio::test(start_paused = true)]
async fn max_cost_usd_counts_the_input_of_a_model_that_prices_only_input() {
    let input_only = crate::base::cost::Price {
        input: 3.0,
        output: 0.0,
        cache_write: 3.0,
        cache_write_1h: 3.0,
        cache_read: 3.0,
    };
    let big = |id: &str| {
        let mut r = call(id, "read_file");
        r.usage = usage(40_000, 10); // $0.12 of input
        r
    };
    let p = Scripted::new(vec![Ok(big("a")), Ok(big("b")), Ok(text("never sent"))]);
    let lim = TurnLimits {
        account: crate::base::cost::Account::new(10_000_000, Some(0.15)),
        price: Some(input_only),
        ..limits()
    };
    // The conversation the second request would carry is large: its input alone is dearer
    // than the $0.03 left.
    let mut req = request();
    req.max_tokens = 4096;
    req.system = "x".repeat(60_000);
    let out = run_turn(&p, &fast_retry(), req, &lim, &echo()).await;
    assert!(
        matches!(&out.end, TurnEnd::Limit(why) if why.starts_with("max_cost_usd (")),
        "{:?}",
        out.end
    );
    assert_eq!(
        p.seen().len(),
        1,
        "the second request could cross the cap: not sent"
    );
    let (_, spent) = lim.account.spent();
    assert!(spent <= 0.15, "spent {spent}");
}

/// A day whose budget is `budget` tokens: told what the run spends, crossed once it is all
/// spent (what `run::RunDay` does with state).
#[derive(Debug)]
struct Budget {
    budget: u64,
    spent: Mutex<u64>,
    asked: AtomicU32,
}

impl Budget {
    fn of(budget: u64) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            budget,
            spent: Mutex::new(0),
            asked: AtomicU32::new(0),
        })
    }
}

impl crate::gate::harness::Day for Budget {
    fn spent(&self, tokens: u64, _usd: f64) {
        *self.spent.lock().unwrap() += tokens;
    }

    fn crossed(&self) -> Option<Crossed> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let spent = *self.spent.lock().unwrap();
        (spent >= self.budget).then(|| Crossed {
            stop: crate::records::limits::DailyStop::TokenBudget,
            role: "ops".into(),
            spent: spent as f64,
            budget: self.budget as f64,
        })
    }
}

fn within(day: &std::sync::Arc<Budget>) -> TurnLimits {
    TurnLimits {
        day: Some(day.clone()),
        ..limits()
    }
}

/// Issue 49, item 2: a daily budget is checked between every two steps — the response that
/// crosses it is counted, and the run ends before its next request, as `limit`, naming the
/// budget, with no summary request (a summary would be spent past the ceiling).
#[tokio::test(start_paused = true)]
async fn a_daily_budget_ends_the_run_at_the_step_after_it_is_crossed() {
    let script: Vec<_> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| Ok(call(id, "read_file")))
        .collect();
    let p = Scripted::new(script);
    let day = Budget::of(240); // two responses of 120 tokens
    let exec = echo();
    let out = run_turn(&p, &fast_retry(), request(), &within(&day), &exec).await;
    assert_eq!(
        out.end,
        TurnEnd::Limit("daily token budget of role `ops` (240 of 240 tokens spent today)".into())
    );
    assert_eq!(out.requests, 2, "the response that crossed it was the last");
    assert_eq!(p.seen().len(), 2, "no summary request past the budget");
    assert_eq!(
        *day.spent.lock().unwrap(),
        240,
        "each response counted in the day"
    );
    assert_eq!(out.usage.total(), 240);
    assert_eq!(
        exec.ran.load(Ordering::SeqCst),
        2,
        "a response's calls are the harness's to refuse"
    );
}

/// The harness found the day spent at a call (another run spent it, or a child): no later call
/// of that response runs and no further request is made, not even for a summary — and a run
/// limit reached at the same time does not get its summary either.
#[tokio::test(start_paused = true)]
async fn a_call_refused_for_the_day_ends_the_run_at_once() {
    struct DaySpentAt(u32, AtomicU32);
    impl ToolExecutor for DaySpentAt {
        fn call<'a>(
            &'a self,
            _id: &'a str,
            name: &'a str,
            input: &'a Value,
            _reason: &'a str,
        ) -> BoxFuture<'a, Result<Called, FatalToolError>> {
            Box::pin(async move {
                let n = self.1.fetch_add(1, Ordering::SeqCst);
                if n >= self.0 {
                    let crossed = Crossed {
                        stop: crate::records::limits::DailyStop::GlobalCostBudget,
                        role: "ops".into(),
                        spent: 2.5,
                        budget: 2.0,
                    };
                    return Ok(Called {
                        result: ToolResult::error("not run: the day is spent".into()),
                        limit: Some(crate::gate::harness::Limit::Day(crossed)),
                        record: None,
                    });
                }
                let result = ToolResult::ok(format!("ran {name}"), 1, vec![]);
                let record = crate::base::calls::record_of(name, input, &result, None);
                Ok(Called {
                    result,
                    limit: None,
                    record: Some(record),
                })
            })
        }
    }
    let three = reply(
        ["a", "b", "c"]
            .iter()
            .map(|id| Block::ToolUse {
                id: id.to_string(),
                name: "read_file".into(),
                input: json!({"path": "x.md"}),
            })
            .collect(),
        StopReason::ToolUse,
        usage(100, 20),
    );
    let p = Scripted::new(vec![Ok(three), Ok(text("never sent"))]);
    let exec = DaySpentAt(1, AtomicU32::new(0));
    let out = run_turn(&p, &fast_retry(), request(), &limits(), &exec).await;
    assert_eq!(
        out.end,
        TurnEnd::Limit("global daily cost budget ($2.50 of $2.00 spent today by all roles)".into())
    );
    assert_eq!(exec.1.load(Ordering::SeqCst), 2, "the third call was not tried");
    assert_eq!(p.seen().len(), 1);

    // max_tool_calls and the day at once: no summary request.
    let p = Scripted::new(vec![
        Ok(call("a", "read_file")),
        Ok(call("b", "read_file")),
        Ok(text("no")),
    ]);
    let day = Budget::of(240);
    let exec = Echo { max: 1, ..echo() };
    let out = run_turn(&p, &fast_retry(), request(), &within(&day), &exec).await;
    assert!(
        matches!(&out.end, TurnEnd::Limit(why) if why.starts_with("daily token budget")),
        "{:?}",
        out.end
    );
    assert_eq!(p.seen().len(), 2, "no summary past the day's budget");
}

/// Before its first step a run is its door's to check (the daemon's dispatch, `tabd fire`, the
/// delegating run): the turn asks the day only once the run has spent something.
#[tokio::test(start_paused = true)]
async fn the_day_is_asked_between_steps_not_before_the_first() {
    let p = Scripted::new(vec![Ok(text("done at once"))]);
    let day = Budget::of(0);
    let out = run_turn(&p, &fast_retry(), request(), &within(&day), &echo()).await;
    assert_eq!(out.end, TurnEnd::Done);
    assert_eq!(day.asked.load(Ordering::SeqCst), 0);
    assert_eq!(*day.spent.lock().unwrap(), 15, "its one response still counts");
}

#[tokio::test(start_paused = true)]
async fn a_paused_turn_continues_and_a_full_context_window_ends_it() {
    let paused = reply(vec![], StopReason::PauseTurn, usage(1, 1));
    let full = reply(vec![], StopReason::ContextWindowExceeded, usage(1, 1));
    let p = Scripted::new(vec![Ok(paused), Ok(full)]);
    let out = run_turn(&p, &fast_retry(), request(), &limits(), &echo()).await;
    assert_eq!(out.end, TurnEnd::ContextExceeded);
    assert_eq!(out.requests, 2, "the paused turn was sent back once");
}

#[tokio::test(start_paused = true)]
async fn a_fatal_tool_error_ends_the_run_at_once() {
    let p = Scripted::new(vec![Ok(call("a", "write_file")), Ok(text("never asked"))]);
    let out = run_turn(
        &p,
        &fast_retry(),
        request(),
        &limits(),
        &Echo {
            fatal: Some("write_file"),
            ..echo()
        },
    )
    .await;
    assert_eq!(out.end, TurnEnd::ToolFatal("disk full".into()));
    assert_eq!(p.seen().len(), 1, "no further model call");
}

fn http(status: u16, retry_after: Option<Duration>) -> ProviderError {
    ProviderError::Http {
        provider: "scripted",
        status,
        message: "m".into(),
        retry_after,
        spend_limit: false,
        advice: None,
    }
}

#[tokio::test(start_paused = true)]
async fn retries_honour_retry_after_and_never_retry_a_400() {
    let p = Scripted::new(vec![
        Err(http(429, Some(Duration::from_secs(7)))),
        Err(http(529, None)),
        Ok(text("finally")),
    ]);
    let t0 = Instant::now();
    let r = provider::complete(&p, &request(), &fast_retry(), t0 + Duration::from_secs(600)).await;
    assert_eq!(r.unwrap().text(), "finally");
    assert!(t0.elapsed() >= Duration::from_secs(7), "waited the retry-after");
    assert_eq!(p.seen().len(), 3);

    let p = Scripted::new(vec![Err(http(400, None)), Ok(text("no"))]);
    let r = provider::complete(
        &p,
        &request(),
        &fast_retry(),
        Instant::now() + Duration::from_secs(600),
    )
    .await;
    assert_eq!(r.unwrap_err().status(), Some(400));
    assert_eq!(p.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn retries_never_wait_past_the_deadline() {
    let p = Scripted::new(vec![
        Err(http(429, Some(Duration::from_secs(3600)))),
        Ok(text("late")),
    ]);
    let t0 = Instant::now();
    let r = provider::complete(&p, &request(), &fast_retry(), t0 + Duration::from_secs(60)).await;
    assert_eq!(
        r.unwrap_err().status(),
        Some(429),
        "gave up instead of sleeping an hour"
    );
    assert!(t0.elapsed() < Duration::from_secs(60));
}
