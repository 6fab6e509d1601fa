//! The days a phrase names: days of the week (`mon-fri`, `weekends`, `business days`), `except`,
//! and days of the month (`15th`, `first monday`, `last business day`), into cron's day fields.

use std::collections::BTreeSet;

use super::{compress, Reader, Run};
use crate::formats::schedule::phrase::tokens::Token;
use crate::formats::schedule::phrase::Reason;
use crate::formats::schedule::words::ordinal_text;

pub(super) const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// The ways each day is written (0 = sunday), its full name last.
pub(super) const DAYS_WRITTEN: [&[&str]; 7] = [
    &["sun", "sunday"],
    &["mon", "monday"],
    &["tue", "tues", "tuesday"],
    &["wed", "weds", "wednesday"],
    &["thu", "thur", "thurs", "thursday"],
    &["fri", "friday"],
    &["sat", "saturday"],
];

/// The day a word names, spelled out (`fri` → `friday`), for a refusal's advice.
pub(in crate::formats::schedule::phrase) fn full_day_name(word: &str) -> Option<&'static str> {
    day_of(word).and_then(|d| DAYS_WRITTEN[d as usize].last().copied())
}

pub(super) fn day_of(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('s');
    (0u32..)
        .zip(DAYS_WRITTEN)
        .find(|(_, names)| names.contains(&w) || names.contains(&word))
        .map(|(d, _)| d)
}

/// Words that name days, so `except` goes on taking them (`except saturday and sunday`).
pub(super) fn names_days(token: &Token) -> bool {
    match token {
        Token::Comma => true,
        Token::Word(w) => {
            day_of(w).is_some() || ["and", "weekday", "weekdays", "weekend", "weekends"].contains(&w.as_str())
        }
        _ => false,
    }
}

/// The first day a stretch of the phrase names, spelled out (`every 2 weeks on fri` → friday).
pub(super) fn first_day_named(tokens: &[Token]) -> Option<String> {
    tokens.iter().find_map(|t| match t {
        Token::Word(w) => full_day_name(w).map(str::to_string),
        _ => None,
    })
}

/// Why `every other <unit>` (or `every second <day>`) is refused, and what to write: the
/// fortnight advice for weeks and days of the week, every 2 of a unit that has a step.
pub(super) fn every_other(unit: &str, rest: &[Token]) -> Reason {
    match unit.trim_end_matches('s') {
        "day" | "weekday" => Reason::EveryOtherDay,
        "month" => Reason::EveryOtherMonth,
        "hour" | "hr" => Reason::EveryOther {
            unit: "hour",
            written: "every 2 hours",
        },
        "minute" | "min" => Reason::EveryOther {
            unit: "minute",
            written: "every 2 min",
        },
        "week" | "fortnight" => Reason::EveryOtherWeek {
            day: first_day_named(rest),
        },
        _ if day_of(unit).is_some() => Reason::EveryOtherWeek {
            day: first_day_named(rest),
        },
        _ => Reason::UnknownWord(unit.to_string()),
    }
}

/// `business day(s)`, `working day(s)`, `work day(s)`: the word `w` and the one after it.
pub(super) fn business_days(w: &str, next: Option<&Token>) -> bool {
    ["business", "working", "work"].contains(&w)
        && matches!(next, Some(Token::Word(d)) if d == "day" || d == "days")
}

impl Reader {
    /// Reads the day `w` (`mon`, `monday`), or the range of days `w-w2` (`mon-fri`, which may
    /// wrap past Sunday); any other word is not understood.
    pub(super) fn read_day(&mut self, w: &str, rest: &[Token]) -> Result<usize, Reason> {
        let Some(day) = day_of(w) else {
            return Err(Reason::UnknownWord(w.to_string()));
        };
        // `mon-fri`: a range of days.
        if let (Some(Token::Dash), Some(Token::Word(w2))) = (rest.first(), rest.get(1)) {
            if let Some(end) = day_of(w2) {
                let days: Vec<u32> = if day <= end {
                    (day..=end).collect()
                } else {
                    (day..7).chain(0..=end).collect()
                };
                self.add_days(
                    days,
                    &format!("{}-{}", DAY_NAMES[day as usize], DAY_NAMES[end as usize]),
                );
                return Ok(3);
            }
        }
        self.add_days([day], DAY_NAMES[day as usize]);
        Ok(1)
    }

    /// After an ordinal (`first`, `last`, `1st`, `15th`): a weekday of the month (`first monday
    /// of the month`), the last day (`last day of the month`), or a day of the month (`1st of
    /// the month`, `on the 15th`). Returns the tokens consumed after the ordinal.
    pub(super) fn read_ordinal(&mut self, which: &str, n: u32, rest: &[Token]) -> Result<usize, Reason> {
        // Cron ORs a day of the month with a day of the week: two days would fire on both, or
        // one would be dropped (`1st and 15th` ran on the 15th only).
        if self.month_day.is_some() || self.nth_weekday.is_some() {
            return Err(Reason::TwoDaysOfTheMonth);
        }
        if let Some(Token::Word(w)) = rest.first() {
            // `first business day of the month`, `last weekday of the month`: croner's `1W` (the
            // weekday nearest the 1st, which never leaves the month: the 1st weekday) and `LW`.
            let business = business_days(w, rest.get(1));
            if business || w == "weekday" || w == "workday" {
                let dom = match which {
                    "1" => "1W",
                    "L" => "LW",
                    _ => return Err(Reason::NthBusinessDay(which.parse().unwrap_or(n))),
                };
                self.month_day = Some(dom.into());
                let nth = if which == "L" { "last" } else { "first" };
                self.understood
                    .push(format!("the {nth} business day of the month"));
                return Ok(if business { 2 } else { 1 });
            }
            if let Some(day) = day_of(w) {
                let nth = match which {
                    "L" => "L".to_string(),
                    digit if digit.len() == 1 && digit != "0" && digit <= "5" => digit.to_string(),
                    _ => {
                        return Err(Reason::NoNthWeekday {
                            nth: which.parse().unwrap_or(n),
                            day: w.clone(),
                        })
                    }
                };
                self.nth_weekday = Some(format!("{day}#{nth}"));
                self.understood.push(format!(
                    "the {} {} of the month",
                    if nth == "L" {
                        "last".to_string()
                    } else {
                        ordinal_text(nth.parse().unwrap_or(1))
                    },
                    DAY_NAMES[day as usize]
                ));
                return Ok(1);
            }
            if w == "day" && which == "L" {
                self.month_day = Some("L".into());
                self.understood.push("the last day of the month".into());
                return Ok(1);
            }
        }
        let day = if which == "L" {
            0
        } else if n > 0 {
            n
        } else {
            which.parse().unwrap_or(0)
        };
        if !(1..=31).contains(&day) {
            return Err(Reason::NotADayOfTheMonth(which.to_string()));
        }
        if day > 28 {
            return Err(Reason::NotInEveryMonth(day));
        }
        self.month_day = Some(day.to_string());
        self.understood
            .push(format!("the {} of the month", ordinal_text(day)));
        Ok(0)
    }

    pub(super) fn add_days(&mut self, days: impl IntoIterator<Item = u32>, label: &str) {
        let days: Vec<u32> = days.into_iter().collect();
        if self.except {
            self.excluded.extend(days);
            self.understood.push(format!("except {label}"));
            return;
        }
        self.add_days_plain(days);
        self.understood.push(label.to_string());
    }

    /// `except sunday`, wherever it stands in the line: its days taken from every run of days
    /// (from every day when the line names none), so `except sunday, daily at 9` is no
    /// different from `daily at 9 except sunday`.
    pub(super) fn take_excluded(&mut self) {
        if self.excluded.is_empty() {
            return;
        }
        if self.days.is_empty() {
            self.days = (0..7).collect();
        }
        self.days.retain(|d| !self.excluded.contains(d));
        let mut emptied = self.days.is_empty();
        for run in &mut self.runs {
            if let Run::Days(days) = run {
                days.retain(|d| !self.excluded.contains(d));
                emptied |= days.is_empty();
            }
        }
        self.no_days_left = emptied;
    }

    pub(super) fn add_days_plain(&mut self, days: impl IntoIterator<Item = u32>) {
        let days: BTreeSet<u32> = days.into_iter().collect();
        self.days.extend(days.iter().copied());
        match self.runs.last_mut() {
            Some(Run::Days(run)) => run.extend(days),
            _ => self.runs.push(Run::Days(days)),
        }
    }

    pub(super) fn dow_field(&self, days: &BTreeSet<u32>) -> String {
        let mut days = days.clone();
        if self.weekly && days.is_empty() {
            days.insert(1);
        }
        if days.is_empty() || days.len() == 7 {
            return "*".into();
        }
        compress(&days.into_iter().collect::<Vec<_>>())
    }
}
