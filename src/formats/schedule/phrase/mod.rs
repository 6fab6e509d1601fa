//! Schedule phrases (`9am and 5pm, weekdays`, `every 30 min`) → standard cron expressions.
//!
//! This module only translates words into cron fields; croner parses and evaluates every
//! expression it produces (see `schedule::CronSchedule`). Anything it does not understand is an
//! error that quotes the phrase and says what was understood.

use std::fmt;

use chrono_tz::Tz;

mod hours;
mod near;
mod reader;
mod reason;
mod tokens;

use reader::Reader;
pub use reason::Reason;
use tokens::tokenize;

/// How a schedule line fires: on a fixed grid (`every 30 min`) or at clock times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    Interval,
    ClockTime,
}

/// One schedule phrase compiled to one or more cron expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPhrase {
    pub crons: Vec<String>,
    pub kind: ScheduleKind,
    /// A zone named in the phrase (`every friday at 4pm UTC`); it wins over the role's.
    pub zone: Option<Tz>,
    /// Readings the person may not have meant (`"at 4" read as 16:00`), shown by `validate`.
    pub notes: Vec<String>,
}

impl CompiledPhrase {
    fn plain(cron: &str, kind: ScheduleKind) -> Self {
        Self {
            crons: vec![cron.to_string()],
            kind,
            zone: None,
            notes: Vec::new(),
        }
    }
}

/// Why a phrase could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read schedule \"{phrase}\": {reason}{understood}. Forms like it: {} (every form: \
     docs/schedules.md)",
    near::listed(.phrase)
)]
pub struct PhraseError {
    pub phrase: String,
    pub reason: Reason,
    understood: Understood,
}

impl PhraseError {
    pub(crate) fn new(phrase: &str, reason: Reason) -> Self {
        Self {
            phrase: phrase.trim().to_string(),
            reason,
            understood: Understood::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Understood(Vec<String>);

impl fmt::Display for Understood {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, " (understood so far: {})", self.0.join(", "))
        }
    }
}

/// Cron's `@` shorthands, written out so `tabd schedule` shows what they mean.
const ALIASES: &[(&str, &str, ScheduleKind)] = &[
    ("@hourly", "0 * * * *", ScheduleKind::Interval),
    ("@daily", "0 0 * * *", ScheduleKind::ClockTime),
    ("@midnight", "0 0 * * *", ScheduleKind::ClockTime),
    ("@weekly", "0 0 * * 0", ScheduleKind::ClockTime),
    ("@monthly", "0 0 1 * *", ScheduleKind::ClockTime),
    ("@yearly", "0 0 1 1 *", ScheduleKind::ClockTime),
    ("@annually", "0 0 1 1 *", ScheduleKind::ClockTime),
];

/// Phrases that cannot be a fixed schedule, and what to write instead.
fn refused(norm: &str) -> Option<Reason> {
    let every_n_days = norm
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(3)
        .any(|w| w[0] == "every" && w[1].parse::<u32>().is_ok_and(|n| n > 1) && w[2].starts_with("day"));
    if norm.contains("every other day") || every_n_days {
        return Some(Reason::EveryOtherDay);
    }
    if ["every other week", "biweekly", "bi-weekly", "fortnight"]
        .iter()
        .any(|w| norm.contains(w))
    {
        let day = norm
            .split(|c: char| !c.is_alphabetic())
            .find_map(reader::full_day_name)
            .map(str::to_string);
        return Some(Reason::EveryOtherWeek { day });
    }
    None
}

const NO_SCHEDULE: &[&str] = &[
    "",
    "on-demand",
    "on demand",
    "ondemand",
    "manual",
    "none",
    "never",
];

/// Compiles one schedule phrase. `Ok(None)` means "no schedule" (`on-demand`, `manual`, …).
pub fn compile(phrase: &str) -> Result<Option<CompiledPhrase>, PhraseError> {
    let (rest, zone) = take_zone(phrase).map_err(|reason| PhraseError::new(phrase, reason))?;
    let compiled = compile_without_zone(phrase, &rest)?;
    Ok(compiled.map(|mut c| {
        c.zone = zone;
        c
    }))
}

/// Takes a time zone out of the phrase (`… 4pm UTC`, `… at 9am in Europe/Lisbon`): an IANA
/// name, or UTC/GMT. Abbreviations like EST or CET are refused, because they name a fixed offset
/// that the person almost never means (New York's clocks change; EST does not).
fn take_zone(phrase: &str) -> Result<(String, Option<Tz>), Reason> {
    let mut zone: Option<Tz> = None;
    let mut kept: Vec<&str> = Vec::new();
    let words: Vec<&str> = phrase.split_whitespace().collect();
    for (i, raw) in words.iter().enumerate() {
        let word = raw.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | '.'));
        let found = match word.to_ascii_lowercase().as_str() {
            "utc" | "gmt" | "z" => Some(Tz::UTC),
            _ if word.contains('/') && word.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                Some(super::zone::parse_tz(word)?)
            }
            "est" | "edt" | "cst" | "cdt" | "mst" | "mdt" | "pst" | "pdt" | "cet" | "cest" | "bst"
            | "ist" | "eet" | "eest" | "wet" | "west" | "jst" | "aest" => {
                return Err(Reason::ZoneAbbreviation(word.to_string()))
            }
            _ => None,
        };
        match (found, zone) {
            (Some(z), Some(before)) if z != before => return Err(Reason::TwoZones(before, z)),
            (Some(z), _) => {
                zone = Some(z);
                // `in UTC`, `in Europe/Lisbon`: the `in` goes with the zone.
                if kept.last().is_some_and(|w| w.eq_ignore_ascii_case("in")) && i > 0 {
                    kept.pop();
                }
                // A trailing comma belongs to the phrase's structure, not the zone.
                if raw.ends_with(',') {
                    kept.push(",");
                }
            }
            (None, _) => kept.push(raw),
        }
    }
    Ok((kept.join(" "), zone))
}

fn compile_without_zone(phrase: &str, rest: &str) -> Result<Option<CompiledPhrase>, PhraseError> {
    let norm = normalize(rest);
    if NO_SCHEDULE.contains(&norm.as_str()) {
        return Ok(None);
    }
    if let Some((_, cron, kind)) = ALIASES.iter().find(|(a, _, _)| *a == norm) {
        return Ok(Some(CompiledPhrase::plain(cron, *kind)));
    }
    if let Some(reason) = refused(&norm) {
        return Err(PhraseError::new(phrase, reason));
    }
    if looks_like_cron(&norm) {
        return compile_cron(rest.trim()).map(Some);
    }
    let tokens = tokenize(&norm).map_err(|reason| PhraseError {
        phrase: phrase.trim().to_string(),
        reason,
        understood: Understood::default(),
    })?;
    let mut reader = Reader::default();
    match reader.read(&tokens).and_then(|()| reader.to_crons()) {
        Ok(compiled) => Ok(Some(compiled)),
        Err(reason) => Err(PhraseError {
            phrase: phrase.trim().to_string(),
            reason,
            understood: Understood(reader.understood),
        }),
    }
}

fn normalize(phrase: &str) -> String {
    let lower = phrase.trim().to_lowercase().replace(['–', '—'], "-");
    let lower = lower.trim_end_matches('.').trim();
    lower.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn looks_like_cron(norm: &str) -> bool {
    let fields: Vec<&str> = norm.split_whitespace().collect();
    (5..=6).contains(&fields.len())
        && fields[0]
            .chars()
            .all(|c| c.is_ascii_digit() || "*/,-?".contains(c))
        && fields[1]
            .chars()
            .all(|c| c.is_ascii_digit() || "*/,-?".contains(c))
}

fn compile_cron(expr: &str) -> Result<CompiledPhrase, PhraseError> {
    let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    let cron = super::parse_cron(&expr).map_err(|e| PhraseError {
        phrase: expr.clone(),
        reason: Reason::Cron(e.to_string()),
        understood: Understood::default(),
    })?;
    let fields: Vec<&str> = expr.split_whitespace().collect();
    // With a leading seconds field the minute and hour fields move one to the right.
    let (min, hour) = if fields.len() == 6 {
        (fields[1], fields[2])
    } else {
        (fields[0], fields[1])
    };
    let is_grid = |f: &str| f.contains('*') || f.contains('/');
    let grid = is_grid(min) || is_grid(hour) || (fields.len() == 6 && is_grid(fields[0]));
    // `0-59 0-23 * * *` names 1,440 times: a grid, not clock times to keep one by one.
    let many = super::words::times_of_day(&cron.pattern).len() > MAX_CLOCK_TIMES;
    let kind = if grid || many {
        ScheduleKind::Interval
    } else {
        ScheduleKind::ClockTime
    };
    Ok(CompiledPhrase::plain(&expr, kind))
}

/// The most times of day a cron line of clock times names; more is a grid (`ScheduleKind::
/// Interval`). A phrase names far fewer.
pub(super) const MAX_CLOCK_TIMES: usize = 24;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod refusal_tests;
