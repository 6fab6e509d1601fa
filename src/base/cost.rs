//! What runs cost in US dollars (docs/spec.md §17): built-in prices for Anthropic's models, the
//! config's `[prices."MODEL"]` on top, and the arithmetic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Token counts of one response (or, summed, of a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Everything counted against budgets: all input (cached or not) plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens + self.output_tokens
    }
}

/// Dollars kept to a millionth: sums of float prices carry noise (`0.023637000000000002`) that
/// no record or status file should show.
pub fn round_usd(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Writing the cache with the default 5-minute lifetime.
    #[serde(default = "nan")]
    pub cache_write: f64,
    /// Writing the cache with a 1-hour lifetime.
    #[serde(default = "nan")]
    pub cache_write_1h: f64,
    #[serde(default = "nan")]
    pub cache_read: f64,
}

fn nan() -> f64 {
    f64::NAN
}

impl Price {
    /// Dollars for `usage` at this price, cache writes at the `ttl` rate.
    pub fn cost(&self, usage: &Usage, ttl: CacheTtl) -> f64 {
        let write = match ttl {
            CacheTtl::FiveMinutes => self.cache_write,
            CacheTtl::OneHour => self.cache_write_1h,
        };
        let m = 1_000_000.0;
        usage.input_tokens as f64 * self.input / m
            + usage.output_tokens as f64 * self.output / m
            + usage.cache_write_tokens as f64 * write / m
            + usage.cache_read_tokens as f64 * self.cache_read / m
    }

    /// Every rate is 0: a model that costs nothing (a local one, priced so in the config).
    pub fn is_free(&self) -> bool {
        [
            self.input,
            self.output,
            self.cache_write,
            self.cache_write_1h,
            self.cache_read,
        ]
        .iter()
        .all(|rate| *rate == 0.0)
    }

    /// Anthropic's multipliers fill what a config entry leaves out: cache writes 1.25× (5 min)
    /// and 2× (1 h) the input price, cache reads 0.1×.
    pub fn completed(mut self) -> Self {
        if self.cache_write.is_nan() {
            self.cache_write = self.input * 1.25;
        }
        if self.cache_write_1h.is_nan() {
            self.cache_write_1h = self.input * 2.0;
        }
        if self.cache_read.is_nan() {
            self.cache_read = self.input * 0.1;
        }
        self
    }
}

const fn p(input: f64, output: f64, cache_write: f64, cache_write_1h: f64, cache_read: f64) -> Price {
    Price {
        input,
        output,
        cache_write,
        cache_write_1h,
        cache_read,
    }
}

/// Model id prefixes and their prices; the longest matching prefix wins, so dated ids
/// (`claude-sonnet-4-5-20250929`) find their family. Taken from Anthropic's pricing page
/// (platform.claude.com/docs/en/about-claude/pricing) on 2026-11-22; newer prices go in the config.
const BUILT_IN: &[(&str, Price)] = &[
    ("claude-fable-5", p(10.0, 50.0, 12.5, 20.0, 1.0)),
    ("claude-fable-5-1", p(10.0, 50.0, 12.5, 20.0, 0.25)),
    ("claude-mythos-5", p(10.0, 50.0, 12.5, 20.0, 1.0)),
    ("claude-mythos-5-1", p(10.0, 50.0, 12.5, 20.0, 0.25)),
    ("claude-opus-5", p(5.0, 25.0, 6.25, 10.0, 0.5)),
    ("claude-opus-4-8", p(5.0, 25.0, 6.25, 10.0, 0.5)),
    ("claude-opus-4-7", p(5.0, 25.0, 6.25, 10.0, 0.5)),
    ("claude-opus-4-6", p(5.0, 25.0, 6.25, 10.0, 0.5)),
    ("claude-opus-4-5", p(5.0, 25.0, 6.25, 10.0, 0.5)),
    ("claude-opus-4-1", p(15.0, 75.0, 18.75, 30.0, 1.5)),
    ("claude-opus-4", p(15.0, 75.0, 18.75, 30.0, 1.5)),
    ("claude-sonnet-5", p(2.0, 10.0, 2.5, 4.0, 0.2)),
    ("claude-sonnet-5-5", p(2.0, 10.0, 2.5, 4.0, 0.1)),
    ("claude-sonnet-4", p(3.0, 15.0, 3.75, 6.0, 0.3)),
    ("claude-3-7-sonnet", p(3.0, 15.0, 3.75, 6.0, 0.3)),
    // Haiku 5.5 below 100k prompt tokens; longer prompts cost 5× (not modelled: see docs).
    ("claude-haiku-5-5", p(0.1, 0.5, 0.125, 0.2, 0.01)),
    ("claude-haiku-4-5", p(1.0, 5.0, 1.25, 2.0, 0.1)),
    ("claude-3-5-haiku", p(0.8, 4.0, 1.0, 1.6, 0.08)),
    ("claude-3-haiku", p(0.25, 1.25, 0.3, 0.5, 0.03)),
];

/// The built-in price of `model`, by longest prefix.
pub fn built_in(model: &str) -> Option<Price> {
    BUILT_IN
        .iter()
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, price)| *price)
}

/// How long cache entries written by a request live (docs/spec.md §17 `cache_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub enum CacheTtl {
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FiveMinutes => "5m",
            Self::OneHour => "1h",
        }
    }
}

/// Prices as configured: the config's entries, then the built-in table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook {
    overrides: BTreeMap<String, Price>,
}

impl PriceBook {
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Self {
            overrides: overrides.into_iter().map(|(k, v)| (k, v.completed())).collect(),
        }
    }

    /// The price of `model`: an exact config entry, else the longest config prefix, else the
    /// built-in table.
    pub fn price(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.overrides.get(model) {
            return Some(*p);
        }
        self.overrides
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
            .or_else(|| built_in(model))
    }

    /// Dollars for `usage` of `model`; `None` when tabd knows no price for it.
    pub fn cost(&self, model: &str, usage: &Usage, ttl: CacheTtl) -> Option<f64> {
        self.price(model).map(|p| p.cost(usage, ttl))
    }
}

/// Dollars as the logs show them: `$0.031`, `$1.24`, `<$0.001`.
pub fn dollars(d: f64) -> String {
    if d <= 0.0 {
        "$0".into()
    } else if d < 0.001 {
        "<$0.001".into()
    } else if d < 1.0 {
        format!("${d:.3}")
    } else {
        format!("${d:.2}")
    }
}

/// What one run, and every run it delegated to, has spent — with the run's ceilings
/// (`max_tokens_per_run`, `max_cost_usd`) and those of the runs above it (docs/spec.md §18). Shared:
/// children running in parallel charge it the moment a response arrives, so a parent's ceiling
/// holds across all of them.
#[derive(Debug, Clone)]
pub struct Account(std::sync::Arc<AccountInner>);

#[derive(Debug)]
struct AccountInner {
    max_tokens: u64,
    max_usd: Option<f64>,
    /// Tokens and dollars spent, and dollars held by requests still in flight.
    spent: std::sync::Mutex<(u64, f64, f64)>,
    parent: Option<Account>,
    /// Shared by the whole chain: a reservation checks and holds on every account at once.
    gate: std::sync::Arc<std::sync::Mutex<()>>,
}

/// Dollars a request holds on every account up the chain while it is in flight: what it could
/// cost at most. Released when dropped (after its response was charged).
#[derive(Debug)]
pub struct Reservation {
    account: Account,
    usd: f64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _gate = self.account.0.gate.lock().unwrap_or_else(|p| p.into_inner());
        for a in self.account.chain() {
            let mut s = a.spent.lock().unwrap_or_else(|p| p.into_inner());
            s.2 = (s.2 - self.usd).max(0.0);
        }
    }
}

impl Account {
    /// A run's account, under its own ceilings only.
    pub fn new(max_tokens: u64, max_usd: Option<f64>) -> Self {
        Self(std::sync::Arc::new(AccountInner {
            max_tokens,
            max_usd,
            spent: std::sync::Mutex::new((0, 0.0, 0.0)),
            parent: None,
            gate: Default::default(),
        }))
    }

    /// The account of a run delegated from this one: its own ceilings, and every charge counts
    /// here (and above) too.
    pub fn child(&self, max_tokens: u64, max_usd: Option<f64>) -> Self {
        Self(std::sync::Arc::new(AccountInner {
            max_tokens,
            max_usd,
            spent: std::sync::Mutex::new((0, 0.0, 0.0)),
            parent: Some(self.clone()),
            gate: self.0.gate.clone(),
        }))
    }

    fn chain(&self) -> impl Iterator<Item = &AccountInner> {
        std::iter::successors(Some(&*self.0), |a| a.parent.as_ref().map(|p| &*p.0))
    }

    fn spent_of(a: &AccountInner) -> (u64, f64, f64) {
        *a.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `tokens` and `usd` here and in every account above.
    pub fn charge(&self, tokens: u64, usd: f64) {
        for a in self.chain() {
            let mut s = a.spent.lock().unwrap_or_else(|p| p.into_inner());
            s.0 += tokens;
            s.1 += usd;
        }
    }

    /// Tokens and dollars spent by this run and its children.
    pub fn spent(&self) -> (u64, f64) {
        let (t, u, _) = Self::spent_of(&self.0);
        (t, u)
    }

    /// Dollars that may still be spent under every dollar ceiling up the chain, less what
    /// requests in flight hold (`None`: no ceiling applies).
    pub fn usd_left(&self) -> Option<f64> {
        self.chain()
            .filter_map(|a| {
                a.max_usd.map(|m| {
                    let (_, spent, held) = Self::spent_of(a);
                    m - spent - held
                })
            })
            .reduce(f64::min)
    }

    /// Holds `usd` (what a request could cost at most) on every account up the chain, if it
    /// fits under every dollar ceiling once what is spent and held is counted: siblings running
    /// in parallel cannot each spend the same dollars left. `None` when it does not fit.
    pub fn reserve(&self, usd: f64) -> Option<Reservation> {
        let _gate = self.0.gate.lock().unwrap_or_else(|p| p.into_inner());
        if self.usd_left().is_some_and(|left| usd > left) {
            return None;
        }
        for a in self.chain() {
            a.spent.lock().unwrap_or_else(|p| p.into_inner()).2 += usd;
        }
        Some(Reservation {
            account: self.clone(),
            usd,
        })
    }

    /// Tokens that may still be spent under every token ceiling up the chain.
    pub fn tokens_left(&self) -> u64 {
        self.chain()
            .map(|a| a.max_tokens.saturating_sub(Self::spent_of(a).0))
            .min()
            .unwrap_or(0)
    }

    /// The ceiling reached, if one is, in words: the run's own, or one of a run above it.
    pub fn exhausted(&self) -> Option<String> {
        for (level, a) in self.chain().enumerate() {
            let (tokens, usd, _) = Self::spent_of(a);
            let whose = if level == 0 {
                ""
            } else {
                " of the run that delegated this task"
            };
            if tokens >= a.max_tokens {
                return Some(format!("max_tokens_per_run ({}){whose}", a.max_tokens));
            }
            if let Some(max) = a.max_usd.filter(|m| usd >= *m) {
                return Some(format!(
                    "max_cost_usd ({}; spent {}){whose}",
                    dollars(max),
                    dollars(usd)
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Children in parallel (issue 29): each request holds what it could cost until its response
    /// is charged, so two siblings cannot each spend the same dollars left.
    #[test]
    fn reservations_keep_parallel_siblings_under_the_parents_cap() {
        let parent = Account::new(u64::MAX, Some(0.05));
        let (a, b) = (parent.child(u64::MAX, None), parent.child(u64::MAX, None));
        let held = a.reserve(0.04).expect("fits");
        assert!(b.reserve(0.04).is_none(), "b cannot take what a holds");
        assert!((b.usd_left().unwrap() - 0.01).abs() < 1e-9);
        a.charge(100, 0.03);
        drop(held);
        assert!(
            (parent.usd_left().unwrap() - 0.02).abs() < 1e-9,
            "released, the charge stays"
        );
        assert!(b.reserve(0.02).is_some());
        assert!(
            Account::new(1, None).reserve(1e9).is_some(),
            "no dollar cap: anything fits"
        );
    }

    #[test]
    fn a_childs_spending_counts_up_the_chain_and_the_tightest_ceiling_wins() {
        let parent = Account::new(10_000, Some(1.0));
        let a = parent.child(8_000, None);
        let b = parent.child(8_000, Some(0.5));
        a.charge(6_000, 0.3);
        b.charge(3_000, 0.4);
        assert_eq!(parent.spent(), (9_000, 0.7));
        assert_eq!(
            a.tokens_left(),
            1_000,
            "the parent's 1,000 left is less than a's own 2,000"
        );
        assert!((b.usd_left().unwrap() - 0.1).abs() < 1e-9, "b's own $0.10 left");
        assert!(
            (a.usd_left().unwrap() - 0.3).abs() < 1e-9,
            "a has no cap: the parent's $0.30"
        );
        assert_eq!(a.exhausted(), None);
        b.charge(1_000, 0.0);
        assert_eq!(
            a.exhausted().as_deref(),
            Some("max_tokens_per_run (10000) of the run that delegated this task"),
            "a sibling's spending stops a"
        );
        assert_eq!(parent.exhausted().as_deref(), Some("max_tokens_per_run (10000)"));
    }

    #[test]
    fn dated_ids_find_their_family_and_the_longest_prefix_wins() {
        assert_eq!(built_in("claude-sonnet-4-5-20250929").unwrap().input, 3.0);
        assert_eq!(built_in("claude-opus-4-1-20250805").unwrap().input, 15.0);
        assert_eq!(built_in("claude-opus-4-5").unwrap().input, 5.0);
        assert_eq!(built_in("claude-sonnet-5-5").unwrap().cache_read, 0.1);
        assert_eq!(built_in("claude-sonnet-5").unwrap().cache_read, 0.2);
        assert!(built_in("qwen2.5-coder").is_none());
    }

    #[test]
    fn cost_of_a_run_with_cache() {
        let book = PriceBook::default();
        let usage = Usage {
            input_tokens: 2_000,
            output_tokens: 700,
            cache_read_tokens: 10_000,
            cache_write_tokens: 4_000,
        };
        // Sonnet 4.5: 2000×3 + 700×15 + 4000×3.75 + 10000×0.30, per million.
        let c = book
            .cost("claude-sonnet-4-5", &usage, CacheTtl::FiveMinutes)
            .unwrap();
        assert!((c - 0.0345).abs() < 1e-9, "{c}");
        let c1h = book.cost("claude-sonnet-4-5", &usage, CacheTtl::OneHour).unwrap();
        assert!((c1h - (c + 4_000.0 * (6.0 - 3.75) / 1e6)).abs() < 1e-9);
    }

    #[test]
    fn config_prices_win_and_fill_cache_rates() {
        let book = PriceBook::new(BTreeMap::from([
            (
                "claude-sonnet-4-5".to_string(),
                Price {
                    input: 1.0,
                    output: 2.0,
                    cache_write: f64::NAN,
                    cache_write_1h: f64::NAN,
                    cache_read: f64::NAN,
                },
            ),
            (
                "qwen".to_string(),
                Price {
                    input: 0.0,
                    output: 0.0,
                    cache_write: f64::NAN,
                    cache_write_1h: f64::NAN,
                    cache_read: f64::NAN,
                },
            ),
        ]));
        let p = book.price("claude-sonnet-4-5").unwrap();
        assert_eq!(
            (p.input, p.cache_write, p.cache_write_1h, p.cache_read),
            (1.0, 1.25, 2.0, 0.1)
        );
        assert_eq!(
            book.cost("qwen2.5-coder:1.5b", &Usage::default(), CacheTtl::FiveMinutes),
            Some(0.0)
        );
        assert_eq!(
            book.cost("mystery", &Usage::default(), CacheTtl::FiveMinutes),
            None
        );
        assert!(
            book.price("qwen2.5-coder:1.5b").unwrap().is_free(),
            "cache rates follow input"
        );
        assert!(!book.price("claude-sonnet-4-5").unwrap().is_free());
    }

    #[test]
    fn dollars_read_well() {
        assert_eq!(dollars(0.0), "$0");
        assert_eq!(dollars(0.0004), "<$0.001");
        assert_eq!(dollars(0.0312), "$0.031");
        assert_eq!(dollars(1.2449), "$1.24");
    }
}
