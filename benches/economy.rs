//! `cargo bench --bench economy`: what a stock weekday costs.
//!
//! The stock vault from `tabd init`, every scheduled slot of a Tuesday (risk 08:30, delivery
//! 09:00 and 17:00, comms every 30 minutes 09:00–17:30) run through tabd's real run pipeline
//! in simulated time, against an in-process fake Anthropic server that prices each request the
//! way Anthropic's prompt cache does: prefixes up to each `cache_control` breakpoint are written
//! (5m or 1h, as the request says, each segment at its breakpoint's price) and read back by a
//! later request whose prefix matches at a breakpoint or up to 20 blocks before one (the API's
//! lookback), while they live; nothing under 1,024 tokens is cached; tokens ≈ bytes / 4.
//! Sonnet 4.5 prices (Haiku 4.5 for the triage model). Set `ECONOMY_TRACE=1` to see every request's breakpoints, reads and writes.
//!
//! Two days: **idle** (nothing in the vault changes; the model answers in one request) and
//! **typical** (before every slot a context file of that role changes; each run is 6 requests —
//! 5 `read_file` calls and a summary — with ~700 output tokens). Each is run as tabd does it now
//! and as it did before (no wake gate for clock-time roles, no breakpoint on the conversation,
//! 5-minute cache) and with no caching at all; and as now with `triage_model: claude-haiku-4-5`
//! on every stock role (issue 40), where a given share of the first looks calls a tool (and hands
//! the run to Sonnet) — 0 % on the idle day, 0–100 % on the typical one. Each model is priced and
//! cached on its own. Nothing is asserted; the figures are printed.

// A benchmark is a test harness: it may unwrap, and its scenarios read top to bottom.
// `let _ =` guards tabd's own side writes (a dropped daily line, a dropped state write);
// a test harness drops what it does not assert (a kill of a child that may have exited).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::let_underscore_must_use
)]

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use fake_model::{canned, FakeModel, Reply};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_tabd");
/// The role's model.
const MAIN: &str = "claude-sonnet-4-5";
/// The triage models (`triage_model`) a day may have: Haiku 4.5 (the brief's example) and
/// Haiku 5.5 (Anthropic's current Haiku).
const TRIAGE_MODELS: [&str; 2] = ["claude-haiku-4-5", "claude-haiku-5-5"];

/// A model's list price (US dollars per million tokens: input, output, 5m and 1h cache writes,
/// cache reads) and the shortest prefix Anthropic caches for it. Sonnet 4.5: $3 / $15, 1,024
/// tokens; Haiku 4.5: $1 / $5, 4,096 tokens (platform.claude.com's pricing and prompt-caching
/// pages, 2026-11); Haiku 5.5: $0.10 / $0.50 (tabd's built-in table), its cache minimum taken as
/// Haiku 4.5's.
struct Rates {
    input: f64,
    output: f64,
    write_5m: f64,
    write_1h: f64,
    read: f64,
    min_cache: u64,
}

fn rates(model: &str) -> Rates {
    if model == "claude-haiku-5-5" {
        Rates {
            input: 0.10,
            output: 0.50,
            write_5m: 0.125,
            write_1h: 0.20,
            read: 0.01,
            min_cache: 4096,
        }
    } else if model == "claude-haiku-4-5" {
        Rates {
            input: 1.0,
            output: 5.0,
            write_5m: 1.25,
            write_1h: 2.0,
            read: 0.10,
            min_cache: 4096,
        }
    } else {
        Rates {
            input: 3.0,
            output: 15.0,
            write_5m: 3.75,
            write_1h: 6.0,
            read: 0.30,
            min_cache: 1024,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Now,
    Before,
    NoCache,
}

/// The prompt cache, as Anthropic's works, in simulated time: entries are kept per model (a
/// prefix Sonnet cached is not read by Haiku).
struct Cache {
    mode: Mode,
    now: DateTime<Utc>,
    entries: HashMap<u64, DateTime<Utc>>,
    totals: Totals,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    requests: u64,
    /// Of which to the triage model.
    triage_requests: u64,
    input: u64,
    write: u64,
    write_1h: u64,
    read: u64,
    output: u64,
    /// Dollars, each request at its model's price.
    usd: f64,
}

impl Totals {
    fn dollars(&self) -> f64 {
        self.usd
    }
}

fn hash(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Cache {
    /// Prices one request body: returns (input, cache write, cache read) tokens.
    fn price(&mut self, body: &Value, output: u64) -> (u64, u64, u64) {
        let model = body["model"].as_str().unwrap_or(MAIN).to_string();
        let r = rates(&model);
        // The cached prefix order: tools, system, then every message's blocks (after the model:
        // each model has its own cache).
        let mut blocks: Vec<(String, Option<String>, bool)> =
            vec![(format!("{model}{}", body["tools"]), None, false)];
        for b in body["system"].as_array().into_iter().flatten() {
            blocks.push((
                b.to_string(),
                b["cache_control"]["ttl"].as_str().map(str::to_string),
                !b["cache_control"].is_null(),
            ));
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        for (i, m) in messages.iter().enumerate() {
            for b in m["content"].as_array().into_iter().flatten() {
                let mut marked = !b["cache_control"].is_null();
                // "Before": breakpoints only on the system prompt and the context block.
                if self.mode == Mode::Before && i > 0 {
                    marked = false;
                }
                let ttl = b["cache_control"]["ttl"].as_str().map(str::to_string);
                let mut plain = b.clone();
                if let Some(o) = plain.as_object_mut() {
                    o.remove("cache_control");
                }
                blocks.push((plain.to_string(), ttl, marked));
            }
        }
        // Every block boundary: (prefix hash, tokens). A breakpoint looks for a cached prefix at
        // its own boundary and up to 20 blocks before it (Anthropic's lookback).
        let mut prefix = String::new();
        let mut bounds: Vec<(u64, u64)> = Vec::new();
        let mut marks: Vec<(usize, u64, bool)> = Vec::new(); // (boundary index, tokens, 1h)
        for (text, ttl, marked) in &blocks {
            prefix.push_str(text);
            bounds.push((hash(&prefix), prefix.len() as u64 / 4));
            if *marked && self.mode != Mode::NoCache {
                let one_hour = self.mode == Mode::Now && ttl.as_deref() == Some("1h");
                marks.push((bounds.len() - 1, prefix.len() as u64 / 4, one_hour));
            }
        }
        let total = prefix.len() as u64 / 4;
        let marks: Vec<_> = marks.into_iter().filter(|m| m.1 >= r.min_cache).collect();
        let mut read = 0;
        for (at, _, _) in &marks {
            for i in (at.saturating_sub(20)..=*at).rev() {
                let (h, tokens) = bounds[i];
                if tokens > read && self.entries.get(&h).is_some_and(|exp| *exp > self.now) {
                    read = tokens;
                    break;
                }
            }
        }
        // A hit refreshes the entry it hit (with the TTL it was written with; approximated by 5m
        // unless a 1h breakpoint covers it).
        if let Some((h, _)) = bounds.iter().find(|b| b.1 == read && read > 0) {
            let one_hour = marks.iter().any(|m| m.2 && m.1 >= read);
            let ttl = if one_hour {
                Duration::hours(1)
            } else {
                Duration::minutes(5)
            };
            self.entries.insert(*h, self.now + ttl);
        }
        let last = marks.last().map_or(0, |m| m.1);
        // Each segment past the cached prefix is written at its own breakpoint's TTL price.
        let (mut write, mut write_1h) = (0, 0);
        let mut done = read;
        for (at, tokens, one_hour) in &marks {
            if *tokens > done {
                if *one_hour {
                    write_1h += tokens - done;
                } else {
                    write += tokens - done;
                }
                done = *tokens;
            }
            let ttl = if *one_hour {
                Duration::hours(1)
            } else {
                Duration::minutes(5)
            };
            self.entries.insert(bounds[*at].0, self.now + ttl);
        }
        if std::env::var("ECONOMY_TRACE").is_ok() {
            let sizes: Vec<String> = marks
                .iter()
                .map(|m| format!("{}{}", m.1, if m.2 { "(1h)" } else { "" }))
                .collect();
            eprintln!(
                "{} total {total} · breakpoints at {} · read {read} · write {write}+{write_1h}",
                self.now.format("%H:%M"),
                sizes.join(", ")
            );
        }
        let t = &mut self.totals;
        t.requests += 1;
        t.triage_requests += u64::from(model != MAIN);
        let uncached = total - last.max(read);
        t.input += uncached;
        t.write += write;
        t.write_1h += write_1h;
        t.read += read;
        t.output += output;
        t.usd += (uncached as f64 * r.input
            + write as f64 * r.write_5m
            + write_1h as f64 * r.write_1h
            + read as f64 * r.read
            + output as f64 * r.output)
            / 1e6;
        (total - last.max(read), write + write_1h, read)
    }
}

fn usage(input: u64, write: u64, read: u64, output: u64) -> Value {
    canned::anthropic_usage(input, output, read, write)
}

/// A day with `triage_model: MODEL` on the stock roles: the share of its first looks that call a
/// tool (and so hand the run to Sonnet), spread evenly over the day.
#[derive(Clone, Copy)]
struct Triage {
    model: &'static str,
    escalate: f64,
}

/// Whether the `n`th first look (from 0) of a day that escalates `share` of them calls a tool.
fn escalates(n: u64, share: f64) -> bool {
    ((n + 1) as f64 * share).floor() > (n as f64 * share).floor()
}

/// One weekday in `mode`; `typical` decides whether anything changes and how runs go.
fn day(mode: Mode, typical: bool, triage: Option<Triage>) -> Totals {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("vault");
    let out = std::process::Command::new(BIN)
        .args(["init", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let root = std::fs::canonicalize(&root).unwrap();
    if let Some(triage) = triage {
        // Every stock role extends _base: one line sets the triage model on all of them.
        let base = root.join("roles/_base.md");
        let text = std::fs::read_to_string(&base).unwrap();
        let text = text.replacen("---\n", &format!("---\ntriage_model: {}\n", triage.model), 1);
        std::fs::write(&base, text).unwrap();
    }
    let cache = Arc::new(Mutex::new(Cache {
        mode,
        now: Utc::now(),
        entries: HashMap::new(),
        totals: Totals::default(),
    }));
    let fake = FakeModel::start();
    let sim = cache.clone();
    let first_looks = Arc::new(std::sync::atomic::AtomicU64::new(0));
    fake.respond_with(move |req, _| {
        if req.body["model"] != MAIN {
            let n = first_looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let share = triage.map_or(0.0, |t| t.escalate);
            let output = 60;
            let (i, w, r) = sim.lock().unwrap().price(&req.body, output);
            let mut body = if typical && escalates(n, share) {
                canned::anthropic_tool_use(
                    Some("The timeline changed; reading it."),
                    &[("toolu_t", "read_file", json!({"path": "project/timeline.md"}))],
                )
            } else {
                canned::anthropic_text("Nothing here needs doing now.")
            };
            body["model"] = req.body["model"].clone();
            body["usage"] = usage(i, w, r, output);
            return Reply::ok(body);
        }
        let turns = req.body["messages"].as_array().map_or(0, |m| m.len());
        let steps = if typical { 6 } else { 1 };
        let step = turns / 2; // each step adds an assistant turn and a user turn
        let output = if typical { 117 } else { 60 };
        let (i, w, r) = sim.lock().unwrap().price(&req.body, output);
        let body = if step + 1 < steps {
            let files = [
                "project/timeline.md",
                "project/scope.md",
                "project/team.md",
                "memory.md",
                "project/blockers/auth-delay.md",
            ];
            canned::anthropic_tool_use(
                Some("Checking what changed."),
                &[(
                    &format!("toolu_{step}"),
                    "read_file",
                    json!({"path": files[step % files.len()]}),
                )],
            )
        } else {
            canned::anthropic_text("Reviewed the changes; nothing else needs doing now.")
        };
        let mut body = body;
        body["usage"] = usage(i, w, r, output);
        Reply::ok(body)
    });
    let config_text = format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"{MAIN}\"\nmax_retries = 0\n{}",
        fake.anthropic_url(),
        if mode == Mode::Before { "cache_ttl = \"5m\"\n" } else { "" }
    );
    let env = tabd::base::environment::Env::from_pairs([("ANTHROPIC_API_KEY", "bench")]);
    let config = tabd::setup::config::parse(&config_text, Path::new("c"), &env, None).unwrap();
    let vault = Arc::new(tabd::base::vault::Vault::open(&root).unwrap());
    let roles = tabd::setup::role::RoleSet::load(
        &vault,
        &tabd::setup::role::LoadContext::new(chrono_tz::UTC, env.clone()),
    );
    let provider = tabd::capabilities::provider::build(&config.provider, &env).unwrap();
    // Tuesday 2026-11-24, local midnight to midnight: every slot of every stock role.
    let start: DateTime<Utc> = "2026-11-24T00:00:00Z".parse().unwrap();
    let mut slots: Vec<(DateTime<Utc>, String)> = roles
        .runnable()
        .flat_map(|r| {
            r.schedule
                .fires_between(start, start + Duration::days(1), 1000)
                .into_iter()
                .map(|t| (t, r.name.clone()))
        })
        .collect();
    slots.sort();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (n, (at, name)) in slots.iter().enumerate() {
        let role = &roles.roles[name];
        if typical {
            // Something in the role's context changed since its last run.
            let note = root.join("project/timeline.md");
            let mut text = std::fs::read_to_string(&note).unwrap();
            text.push_str(&format!("\n- {} update {n}\n", at.format("%H:%M")));
            std::fs::write(&note, text).unwrap();
        }
        cache.lock().unwrap().now = *at;
        let run_env = tabd::running::run::RunEnv {
            key: std::sync::Arc::new(tabd::base::signing::Key::from_bytes(&[7; 32])),
            vault: vault.clone(),
            config: Arc::new(config.clone()),
            roles: Arc::new(roles.clone()),
            provider: provider.clone(),
            store: tabd::records::state::StateStore::new(vault.clone()),
            log: Arc::new(tabd::records::runlog::RunLog::new(vault.clone(), chrono_tz::UTC)),
            clock: Arc::new(tabd::base::clock::ManualClock::new(*at)),
            faults: Default::default(),
            launcher: Default::default(),
            mcp_pool: None,
            fence: Default::default(),
            telemetry: Default::default(),
            side: Default::default(),
            probes: Default::default(),
            progress: Default::default(),
            stop: Default::default(),
        };
        // Before: clock-time roles did not skip, and memory.md kept every role's gate open.
        let gate = mode == Mode::Now && role.skip_unchanged();
        let cron = role.schedule.cron_exprs().join(" | ");
        let trigger = tabd::base::trigger::Trigger::schedule(*at, cron, 1, gate);
        let result = rt.block_on(tabd::running::run::run_role(&run_env, role, trigger, vec![]));
        assert!(result.failure.is_none(), "{:?}", result.failure);
    }
    let t = cache.lock().unwrap().totals;
    t
}

fn show(label: &str, t: Totals) -> Value {
    println!(
        "{label:<44} {:>4} requests ({:>3} triage) · {:>7} uncached / {:>7} cache write (of which 1h {:>6}) / {:>7} cache read / {:>6} out · ${:.3}",
        t.requests,
        t.triage_requests,
        t.input,
        t.write + t.write_1h,
        t.write_1h,
        t.read,
        t.output,
        t.dollars()
    );
    json!({ "requests": t.requests, "triage_requests": t.triage_requests, "uncached": t.input, "cache_write": t.write + t.write_1h, "cache_write_1h": t.write_1h,
            "cache_read": t.read, "output": t.output, "usd": t.dollars() })
}

fn main() {
    println!("tabd economy — a stock weekday (Sonnet 4.5, and Haiku 4.5 or 5.5 for triage, at list prices; tokens ≈ bytes/4)");
    let mut out = json!({});
    for (typical, name) in [(false, "idle"), (true, "typical")] {
        for (mode, label) in [
            (Mode::Now, "now"),
            (Mode::Before, "before"),
            (Mode::NoCache, "no caching"),
        ] {
            let t = day(mode, typical, None);
            out[name][label] = show(&format!("{name} weekday, {label}"), t);
        }
        // triage_model on every stock role; on a typical day, the share of first looks that find
        // work (idle days find none: nothing changed).
        let shares: &[f64] = if typical {
            &[0.0, 0.25, 0.5, 0.75, 1.0]
        } else {
            &[0.0]
        };
        for model in TRIAGE_MODELS {
            for &share in shares {
                let t = day(
                    Mode::Now,
                    typical,
                    Some(Triage {
                        model,
                        escalate: share,
                    }),
                );
                let label = format!("triage {model} {:.0}%", share * 100.0);
                out[name][&label] = show(&format!("{name}, {label} escalate"), t);
            }
        }
    }
    println!("{}", serde_json::to_string(&out).unwrap());
}
