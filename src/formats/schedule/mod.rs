//! Schedules: phrases compiled to cron, next fire times from croner in the role's time zone.
//!
//! croner ≥ 4.0.3 gives the DST behaviour docs/spec.md §4 asks for: a fixed-time job in a
//! spring-forward gap runs once at the first valid time after it, and one in an autumn overlap
//! runs once. Pure functions here; the daemon does the waiting.

mod pace;
pub mod phrase;
mod words;
mod zone;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

pub use pace::{duration_words, interval_at_least, Crowded};
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
    /// What the compiled crons mean, in words, for `tabd schedule` (made from croner's fields,
    /// so they say what fires; see `words`).
    pub understood: String,
    /// Readings the person may not have meant, for `tabd validate`.
    pub notes: Vec<String>,
    crons: Vec<(String, Cron)>,
    /// What fires: `crons`, but a clock-time cron naming several times split into one cron per
    /// time. croner gives a cron of one time the fixed-time DST rules and one of several the
    /// interval ones, so `30 2,14 * * *` skipped 02:30 on a spring-forward night and ran it
    /// twice on a fall-back one, where docs/schedules.md promises once.
    fires: Vec<Cron>,
}

impl ScheduleLine {
    /// Compiles `source`; `Ok(None)` for `on-demand` and friends.
    pub fn compile(source: &str, line: usize) -> Result<Option<Self>, PhraseError> {
        let Some(compiled) = phrase::compile(source)? else {
            return Ok(None);
        };
        let mut crons = Vec::with_capacity(compiled.crons.len());
        for expr in compiled.crons {
            let cron = checked_cron(source, &expr)?;
            crons.push((expr, cron));
        }
        let mut fires = Vec::new();
        for (expr, cron) in &crons {
            if compiled.kind == ScheduleKind::ClockTime {
                fires.extend(one_per_time(source, expr, cron)?);
            } else {
                fires.push(cron.clone());
            }
        }
        let mut understood = words::describe(
            crons.iter().map(|(_, c)| c),
            compiled.kind == ScheduleKind::ClockTime,
        );
        if let Some(zone) = compiled.zone {
            understood = format!("{understood} ({})", zone.name());
        }
        Ok(Some(Self {
            source: source.trim().to_string(),
            line,
            kind: compiled.kind,
            zone: compiled.zone,
            understood,
            notes: compiled.notes,
            crons,
            fires,
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
        self.fires
            .iter()
            .filter_map(|c| c.find_next_occurrence(&local, false).ok())
            .map(|t| t.with_timezone(&Utc))
            .min()
    }
}

/// Parses an expression the phrase compiler wrote. It only emits expressions croner accepts; a
/// failure here is a bug in the compiler, reported as an error rather than a panic.
fn checked_cron(source: &str, expr: &str) -> Result<Cron, PhraseError> {
    parse_cron(expr).map_err(|e| {
        PhraseError::new(
            source,
            phrase::Reason::Internal {
                expr: expr.to_string(),
                croner: e.to_string(),
            },
        )
    })
}

/// A clock-time cron as one cron per time of day (`0 9,17 * * 1-5` → `0 0 9 * * 1-5`,
/// `0 0 17 * * 1-5`), the day fields as written, so each keeps croner's fixed-time DST rules.
/// A clock-time line has at most `phrase::MAX_CLOCK_TIMES` times.
fn one_per_time(source: &str, expr: &str, cron: &Cron) -> Result<Vec<Cron>, PhraseError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let days = fields.len().checked_sub(3).map_or(&[][..], |i| &fields[i..]);
    let times = words::times_of_day(&cron.pattern);
    if times.len() == 1 {
        return Ok(vec![cron.clone()]);
    }
    times
        .into_iter()
        .map(|t| {
            let one = format!("{} {} {} {}", t % 60, t / 60 % 60, t / 3600, days.join(" "));
            checked_cron(source, &one)
        })
        .collect()
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

#[cfg(test)]
mod corpus;
