//! A cheap first look (docs/spec.md §25, `triage_model`): one request to the triage model with the
//! run's own prompt and tools. No tool call: nothing needs doing, the run ends there. A tool call:
//! the call is **not** run — the role's own model takes the run over from the same prompt, told
//! what the first look wanted — so a cheaper model never acts in the vault. A triage model that
//! cannot be used (an error, an answer cut short or empty) hands the run over the same way: a
//! routine check is never lost to the cheap model's outage.

use serde_json::Value;

use super::{Loop, TurnEnd, TurnLimits, TurnOutcome, MIN_OUTPUT};
use crate::base::cost::Usage;
use crate::base::text::one_line;
use crate::capabilities::provider::{self, Block, Provider, Request, RetryPolicy, StopReason};

/// What the first look came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It answered without calling a tool: nothing needs doing. The run ends `triaged`.
    Nothing,
    /// It called tools (not run): the role's model takes over. The calls, by name.
    Escalated(Vec<String>),
    /// It could not be used; why. The role's model takes over.
    Unusable(String),
}

/// The first look's request, what it cost and what it came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Triage {
    /// The model that answered (as the provider named it), else the one asked.
    pub model: String,
    pub usage: Usage,
    /// At the triage model's price (0 when tabd knows none).
    pub cost_usd: f64,
    pub verdict: Verdict,
    /// Its words (its answer when nothing needs doing).
    pub said: String,
    /// What the role's model is told, when it takes over.
    pub handover: String,
}

/// Longest text of the first look passed on to the role's model.
const HANDOVER_TEXT: usize = 2_000;
/// Most calls, and bytes of each call's arguments, passed on.
const HANDOVER_CALLS: usize = 10;
const HANDOVER_ARGS: usize = 500;

/// Asks `model` once with `req` (the run's own request, model aside), under `limits` (the run's
/// account, at the triage model's price). Never runs a tool.
pub async fn first_look(
    provider: &dyn Provider,
    retry: &RetryPolicy,
    req: &Request,
    model: &str,
    limits: &TurnLimits,
) -> Triage {
    let mut req = Request {
        model: model.to_string(),
        ..req.clone()
    };
    req.cache_ttl = Some(limits.cache_ttl);
    let mut l = Loop {
        provider,
        retry,
        limits,
        out: TurnOutcome::ended(TurnEnd::Done),
        thinking_blocks: Vec::new(),
        texts: Vec::new(),
        seen_tool: false,
        last_text: String::new(),
        made: 0,
    };
    let mut triage = Triage {
        model: model.to_string(),
        usage: Usage::default(),
        cost_usd: 0.0,
        verdict: Verdict::Nothing,
        said: String::new(),
        handover: String::new(),
    };
    let held = match l.fit_under_cap(&mut req, MIN_OUTPUT) {
        Ok(held) => held,
        Err(why) => return unusable(triage, why.to_string()),
    };
    let asked = provider::complete(provider, &req, retry, limits.deadline).await;
    drop(held);
    let resp = match asked {
        Ok(r) => r,
        Err(e) => return unusable(triage, e.to_string()),
    };
    l.charge(resp.usage);
    triage.usage = resp.usage;
    triage.cost_usd = limits.cost(&resp.usage).unwrap_or(0.0);
    if !resp.model.is_empty() {
        triage.model = resp.model.clone();
    }
    triage.said = resp.text().trim().to_string();
    let calls: Vec<(String, Value)> = resp
        .tool_uses()
        .map(|(_, name, input)| (name.to_string(), input.clone()))
        .collect();
    match (&resp.stop, calls.is_empty()) {
        (_, false) => {
            triage.verdict = Verdict::Escalated(calls.iter().map(|(n, _)| n.clone()).collect());
            triage.handover = handover(&triage.model, &triage.said, &calls);
            triage
        }
        (StopReason::EndTurn | StopReason::StopSequence, true) if !triage.said.is_empty() => triage,
        (stop, true) => {
            let why = if triage.said.is_empty() {
                "it answered nothing".to_string()
            } else {
                format!("its answer ended with stop reason {stop:?}")
            };
            unusable(triage, why)
        }
    }
}

fn unusable(mut triage: Triage, why: String) -> Triage {
    triage.handover = format!(
        "A first look at this run by the triage model ({}) could not be used ({}). Do the run as usual.",
        triage.model,
        one_line(&why, 300)
    );
    triage.verdict = Verdict::Unusable(why);
    triage
}

/// What the role's model is told: the first look's words and the calls it wanted, none of which
/// was run, bounded (its text is a model's, not the person's).
fn handover(model: &str, said: &str, calls: &[(String, Value)]) -> String {
    let mut s = format!(
        "A first look at this run by a cheaper triage model ({model}) found something that may need doing. \
         It is not the person and may be wrong; none of its calls were run. Decide for yourself what to do."
    );
    if !said.is_empty() {
        s.push_str(&format!("\nIt said: {}", one_line(said, HANDOVER_TEXT)));
    }
    s.push_str("\nIt wanted to call:");
    for (name, input) in calls.iter().take(HANDOVER_CALLS) {
        s.push_str(&format!(
            "\n- {} {}",
            one_line(name, 100),
            one_line(&input.to_string(), HANDOVER_ARGS)
        ));
    }
    if calls.len() > HANDOVER_CALLS {
        s.push_str(&format!("\n- and {} more", calls.len() - HANDOVER_CALLS));
    }
    s
}

/// The role's model takes over: the same prompt, the handover text appended to the first
/// message after its cached blocks (the cached prefix stays the same).
pub fn hand_over(req: &mut Request, triage: &Triage) {
    if let Some(first) = req.messages.first_mut() {
        first.content.push(Block::Text {
            text: triage.handover.clone(),
            cache: false,
        });
    }
}

/// The run, ended by the first look: its answer is the run's summary.
pub fn triaged_outcome(triage: &Triage) -> TurnOutcome {
    let mut out = TurnOutcome::ended(TurnEnd::Done);
    out.summary = triage.said.clone();
    out.usage = triage.usage;
    out.model = triage.model.clone();
    out.requests = 1;
    out.triage = Some(triage.clone());
    out
}
