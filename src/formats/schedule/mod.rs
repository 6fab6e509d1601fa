//! Schedules: phrases compiled to cron, next fire times from croner in the role's time zone.
//!
//! croner ≥ 4.0.3 gives the DST behaviour DESIGN §4 asks for: a fixed-time job in a
//! spring-forward gap runs once at the first valid time after it, and one in an autumn overlap
//! runs once. Pure functions here; the daemon does the waiting.

pub mod phrase;
mod zone;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

pub use phrase::{CompiledPhrase, PhraseError, ScheduleKind};
pub use zone::{parse_tz, system_tz, UnknownZone};

/// Parses a 5-field (or 6-field, leading seconds) cron expression with croner.
pub fn parse_cron(expr: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
}

/// One line of a role's `## Schedule`, compiled.
#[derive(Debug, Clone)]
pub struct ScheduleLine {
    /// The text as the person wrote it.
    pub source: String,
    /// 1-based line in the role file.
    pub line: usize,
    pub kind: ScheduleKind,
    /// A zone the line names itself (`… 4pm UTC`); otherwise the role's.
    pub zone: Option<Tz>,
    /// What tabd understood, in words, for `tabd schedule`.
    pub understood: String,
    /// Readings the person may not have meant, for `tabd validate`.
    pub notes: Vec<String>,
    crons: Vec<(String, Cron)>,
}

impl ScheduleLine {
    /// Compiles `source`; `Ok(None)` for `on-demand` and friends.
    pub fn compile(source: &str, line: usize) -> Result<Option<Self>, PhraseError> {
        let Some(compiled) = phrase::compile(source)? else {
            return Ok(None);
        };
        let mut crons = Vec::with_capacity(compiled.crons.len());
        for expr in compiled.crons {
            // The phrase compiler only emits expressions croner accepts; a failure here is a
            // bug in the compiler, reported as an error rather than a panic.
            let cron = parse_cron(&expr).map_err(|e| {
                PhraseError::new(
                    source,
                    phrase::Reason::Internal {
                        expr: expr.clone(),
                        croner: e.to_string(),
                    },
                )
            })?;
            crons.push((expr, cron));
        }
        Ok(Some(Self {
            source: source.trim().to_string(),
            line,
            kind: compiled.kind,
            zone: compiled.zone,
            understood: compiled.understood,
            notes: compiled.notes,
            crons,
        }))
    }

    /// Whether the line ever fires (`0 0 31 2 *` — February 31st — never does): checked over the
    /// next eight years from a fixed date, so the answer does not depend on today.
    pub fn ever_fires(&self) -> bool {
        let from = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|_| Utc::now());
        let until = from + chrono::Duration::days(8 * 366);
        self.next_after(from, chrono_tz::UTC).is_some_and(|t| t < until)
    }

    /// The normalized cron expressions of this line.
    pub fn cron_exprs(&self) -> impl Iterator<Item = &str> {
        self.crons.iter().map(|(e, _)| e.as_str())
    }

    /// The first fire strictly after `after`, in the line's own zone if it names one, else `tz`.
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone.unwrap_or(tz));
        self.crons
            .iter()
            .filter_map(|(_, c)| c.find_next_occurrence(&local, false).ok())
            .map(|t| t.with_timezone(&Utc))
            .min()
    }
}

/// All schedule lines of a role, in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub lines: Vec<ScheduleLine>,
    pub tz: Tz,
}

impl Schedule {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The first fire of any line strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.lines
            .iter()
            .filter_map(|l| l.next_after(after, self.tz))
            .min()
    }

    /// The next `n` fires strictly after `after`, strictly increasing.
    pub fn next_n(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut t = after;
        while out.len() < n {
            match self.next_after(t) {
                Some(next) => {
                    out.push(next);
                    t = next;
                }
                None => break,
            }
        }
        out
    }

    /// Every fire in `(after, until]`, oldest first, at most `cap`.
    pub fn fires_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        cap: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut t = after;
        while let Some(next) = self.next_after(t) {
            if next > until || out.len() >= cap {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }

    /// The normalized cron expressions of every line.
    pub fn cron_exprs(&self) -> Vec<String> {
        self.lines
            .iter()
            .flat_map(|l| l.cron_exprs().map(str::to_string))
            .collect()
    }

    /// The shortest gap between consecutive fires over the next week (`None`: never fires).
    pub fn shortest_gap(&self, from: DateTime<Utc>) -> Option<chrono::Duration> {
        let fires = self.fires_between(from, from + chrono::Duration::days(7), 2_000);
        fires.windows(2).map(|w| w[1] - w[0]).min()
    }

    /// True when every line is an interval grid (`every 30 min`): `skip_unchanged` defaults on.
    pub fn is_interval(&self) -> bool {
        !self.lines.is_empty() && self.lines.iter().all(|l| l.kind == ScheduleKind::Interval)
    }
}

#[cfg(test)]
mod tests;
