//! What ends a run's tool calls from inside the harness: `max_tool_calls`, and the day's budgets
//! (docs/spec.md §6, §17) — the `Day` a run provides, which every call asks first: a call is a step.

/// A limit that refused a call and ends the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// `max_tool_calls`: the run ends with a summary.
    ToolCalls(u32),
    /// A daily budget (docs/spec.md §6, §17): the run ends at once — a summary would be spent past it.
    Day(crate::records::limits::Crossed),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ToolCalls(max) => write!(f, "max_tool_calls ({max})"),
            Self::Day(crossed) => crossed.fmt(f),
        }
    }
}

/// The day a run spends in (docs/spec.md §6, §17): told what each of the run's own responses cost, and
/// asked between two steps whether a daily budget is spent. The run layer provides it; every
/// door's calls ask it before they run.
pub trait Day: Send + Sync + std::fmt::Debug {
    /// Counts a response of this run (`tokens`, `usd`) in today's spending.
    fn spent(&self, tokens: u64, usd: f64);
    /// The daily budget spent today, if one is: the run takes no further step.
    fn crossed(&self) -> Option<crate::records::limits::Crossed>;
}
