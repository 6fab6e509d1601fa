//! The words of a phrase (as tokens) read into days, times, an interval, a window or a day of
//! the month, and those into cron lines. What it read so far is kept for a refusal's message;
//! the words `tabd schedule` shows are made from the crons (`schedule::words`).

use std::collections::BTreeSet;

use super::hours::{self, Part};
use super::tokens::Token;
use super::{CompiledPhrase, Reason, ScheduleKind};
use crate::formats::schedule::words::ordinal_text;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interval {
    Seconds(u32),
    Minutes(u32),
    Hours(u32),
}

#[derive(Debug, Default)]
pub(super) struct Reader {
    interval: Option<Interval>,
    times: Vec<(u32, u32)>,
    window: Option<(u32, u32)>,
    days: BTreeSet<u32>,
    weekly: bool,
    /// `monthly` or `once a month` was written: the 1st, unless an ordinal names the day.
    monthly_word: bool,
    /// The day-of-month field of a monthly schedule (`15`, `L` for the last day).
    month_day: Option<String>,
    /// The day-of-week field of "the nth weekday of the month" (`1#1`, `5#L`).
    nth_weekday: Option<String>,
    /// In a list of times: after `at`, or after a time and `and` or a comma. A bare number
    /// here is an hour (`at 9`, `at 9 and 5`).
    in_times: bool,
    /// The parts of the day the phrase names (`every evening`), found before reading: a bare
    /// hour anywhere in the phrase is read in the part (`every evening at 7`: 19:00).
    parts: Vec<Part>,
    /// The phrase writes clock times (a time, or a number after `at`): a part of the day then
    /// only says which half of the clock they are in, and adds no time of its own.
    has_times: bool,
    /// `except` was read: the days that follow are taken away (`every day except sunday`).
    except: bool,
    /// The days named after `except`, taken from every day the line names once it is read
    /// (from every day when it names none).
    excluded: BTreeSet<u32>,
    /// `except` took every day away (`weekends except saturday and sunday`).
    no_days_left: bool,
    /// Days and times in the order they were written, runs of one kind merged: pairs of them
    /// (`fri at 4pm and mon at 9am`) become one cron each, never a cross product.
    runs: Vec<Run>,
    /// Readings worth a word to the person (`"at 4" read as 16:00`).
    notes: Vec<String>,
    /// The bare hours of 1 to 12 read by the rule, as written, the number and the hour: said
    /// in one note.
    bare_read: Vec<(String, u32, u32)>,
    pub(super) understood: Vec<String>,
}

/// A stretch of the phrase that names days, or one that names times.
#[derive(Debug, Clone)]
enum Run {
    Days(BTreeSet<u32>),
    Times(Vec<(u32, u32)>),
}

/// The days and times of one cron line.
struct Group {
    days: BTreeSet<u32>,
    times: Vec<(u32, u32)>,
}

/// `first` … `fifth` and `last` as cron's `#` suffix.
fn ordinal_word(w: &str) -> Option<&'static str> {
    Some(match w {
        "first" => "1",
        "second" => "2",
        "third" => "3",
        "fourth" => "4",
        "fifth" => "5",
        "last" => "L",
        _ => return None,
    })
}

const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
/// The ways each day is written (0 = sunday), its full name last.
const DAYS_WRITTEN: [&[&str]; 7] = [
    &["sun", "sunday"],
    &["mon", "monday"],
    &["tue", "tues", "tuesday"],
    &["wed", "weds", "wednesday"],
    &["thu", "thur", "thurs", "thursday"],
    &["fri", "friday"],
    &["sat", "saturday"],
];

/// The day a word names, spelled out (`fri` → `friday`), for a refusal's advice.
pub(super) fn full_day_name(word: &str) -> Option<&'static str> {
    day_of(word).and_then(|d| DAYS_WRITTEN[d as usize].last().copied())
}

fn day_of(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('s');
    (0u32..)
        .zip(DAYS_WRITTEN)
        .find(|(_, names)| names.contains(&w) || names.contains(&word))
        .map(|(d, _)| d)
}

/// One end of a window as written: a time (`9am`, `17:00`) or a bare hour (`9`).
#[derive(Debug, Clone, Copy)]
enum End {
    Time(u32, u32),
    Bare(u32),
}

fn window_end(token: Option<&Token>) -> Option<End> {
    match token {
        Some(Token::Time(h, m)) => Some(End::Time(*h, *m)),
        Some(Token::Num(n)) if *n <= 23 => Some(End::Bare(*n)),
        _ => None,
    }
}

/// `-`, `to`, `until`, `till`: what joins a window's ends.
fn is_to(token: Option<&Token>) -> bool {
    matches!(token, Some(Token::Dash))
        || matches!(token, Some(Token::Word(w)) if w == "to" || w == "until" || w == "till")
}

/// Words that name days, so `except` goes on taking them (`except saturday and sunday`).
fn names_days(token: &Token) -> bool {
    match token {
        Token::Comma => true,
        Token::Word(w) => {
            day_of(w).is_some() || ["and", "weekday", "weekdays", "weekend", "weekends"].contains(&w.as_str())
        }
        _ => false,
    }
}

/// The first day a stretch of the phrase names, spelled out (`every 2 weeks on fri` → friday).
fn first_day_named(tokens: &[Token]) -> Option<String> {
    tokens.iter().find_map(|t| match t {
        Token::Word(w) => full_day_name(w).map(str::to_string),
        _ => None,
    })
}

/// Why `every other <unit>` (or `every second <day>`) is refused, and what to write: the
/// fortnight advice for weeks and days of the week, every 2 of a unit that has a step.
fn every_other(unit: &str, rest: &[Token]) -> Reason {
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
fn business_days(w: &str, next: Option<&Token>) -> bool {
    ["business", "working", "work"].contains(&w)
        && matches!(next, Some(Token::Word(d)) if d == "day" || d == "days")
}

impl Reader {
    pub(super) fn read(&mut self, tokens: &[Token]) -> Result<(), Reason> {
        self.parts = tokens
            .iter()
            .filter_map(|t| match t {
                Token::Word(w) => Part::of(w),
                _ => None,
            })
            .collect();
        self.has_times = tokens.iter().any(|t| matches!(t, Token::Time(..)))
            || tokens
                .windows(2)
                .any(|w| matches!(w, [Token::Word(at), Token::Num(_)] if at == "at"));
        if self.parts.len() > 1 && self.has_times {
            return Err(Reason::PartsWithTimes);
        }
        let mut i = 0;
        while i < tokens.len() {
            let rest = &tokens[i + 1..];
            if self.except && !names_days(&tokens[i]) {
                self.except = false;
            }
            match &tokens[i] {
                Token::Comma | Token::Dash => i += 1,
                Token::Time(h, m) => {
                    // `9am-6pm`, `9am to 5`, `9:00 until 18:00`: a window.
                    if let (true, Some(end)) = (is_to(rest.first()), window_end(rest.get(1))) {
                        self.set_window_of(End::Time(*h, *m), end)?;
                        self.in_times = false;
                        i += 3;
                        continue;
                    }
                    self.add_time(*h, *m);
                    self.understood.push(format!("at {h:02}:{m:02}"));
                    self.in_times = true;
                    i += 1;
                }
                Token::Num(n) => {
                    let after_at = i > 0 && matches!(&tokens[i - 1], Token::Word(w) if w == "at");
                    i += self.read_number(*n, after_at, rest)?;
                }
                Token::Word(w) => {
                    i += self.read_word(w, rest)?;
                    self.in_times = w == "at" || (w == "and" && self.in_times);
                    continue;
                }
            }
        }
        self.take_excluded();
        Ok(())
    }

    /// The part of the day a bare hour is read in: the one the phrase names, if one.
    fn part(&self) -> Option<Part> {
        match self.parts.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// A bare hour (`9`), by the one rule (`hours::bare`); a reading the person may not have
    /// meant gets a note.
    fn bare_hour(&mut self, n: u32, written: &str) -> Result<u32, Reason> {
        let hour = hours::bare(n, self.part())?;
        if self.part().is_none() && hours::is_ambiguous(n) {
            self.bare_read.push((written.to_string(), n, hour));
        }
        Ok(hour)
    }

    /// One note for the bare hours of a list (`"at 9" read as 09:00 and "5" as 17:00 …`).
    fn bare_note(&self) -> Option<String> {
        let read: Vec<String> = self
            .bare_read
            .iter()
            .enumerate()
            .map(|(i, (written, _, hour))| {
                let verb = if i == 0 { "read " } else { "" };
                format!("\"{written}\" {verb}as {hour:02}:00")
            })
            .collect();
        let others: Vec<String> = self
            .bare_read
            .iter()
            .map(|(_, n, hour)| {
                if hour == n {
                    format!("{n}pm")
                } else {
                    format!("{n}am")
                }
            })
            .collect();
        (!read.is_empty()).then(|| {
            format!(
                "{} (a bare 1 to 6 is the afternoon, 7 to 12 the morning and noon); write {} if you meant that",
                read.join(" and "),
                others.join(" or ")
            )
        })
    }

    /// A window whose ends may be bare hours (`between 9 and 5`, `9-5`, `9am-5`), each read by
    /// the rule of a bare hour. A bare reading that runs past midnight (`between 6 and 10`:
    /// 18:00 to 10:00) is refused with the readings the person more likely meant.
    fn set_window_of(&mut self, from: End, to: End) -> Result<(), Reason> {
        let read = |end: End| match end {
            End::Time(h, m) => Ok((h, m)),
            End::Bare(n) => hours::bare(n, self.part()).map(|h| (h, 0)),
        };
        let (start, end) = (read(from)?, read(to)?);
        let bare = |e: End| match e {
            End::Bare(n) => Some(n),
            End::Time(..) => None,
        };
        if bare(from).is_some() || bare(to).is_some() {
            let written = |e: End, read: (u32, u32)| bare(e).unwrap_or(read.0);
            let (a, b) = (written(from, start), written(to, end));
            // `between 0 and 6`: a 24-hour hour at one end says the person counts on a 24-hour
            // clock, where the rule reads the bare 6 at the other as 18:00.
            let twenty_four = |e: End| bare(e).is_some_and(|n| n == 0 || n >= 13);
            let afternoon = |e: End| bare(e).is_some_and(|n| (1..=6).contains(&n));
            let why = if start.0 > end.0 && end.0 != 0 {
                Some("past midnight")
            } else if (twenty_four(from) && afternoon(to)) || (twenty_four(to) && afternoon(from)) {
                Some("though the other end is on a 24-hour clock")
            } else {
                None
            };
            if let (Some(why), None) = (why, self.part()) {
                return Err(Reason::BareWindowUnclear {
                    from: a,
                    to: b,
                    read_from: start.0,
                    read_to: end.0,
                    why,
                    choices: hours::window_choices(a, b),
                });
            }
            if self.part().is_none()
                && [from, to]
                    .iter()
                    .any(|e| bare(*e).is_some_and(hours::is_ambiguous))
            {
                self.notes.push(format!(
                    "\"{a}\" to \"{b}\" read as {:02}:00 to {:02}:00 (a bare 1 to 6 is the afternoon, 7 to 12 the \
                     morning and noon); write the hours with am/pm if you meant others",
                    start.0, end.0
                ));
            }
        }
        self.set_window(start, end)
    }

    /// A bare number `n` followed by `rest`: an ordinal (`15th`), an hour after `at`, or the
    /// `2x/day` shorthand. Returns the tokens consumed, the number included.
    fn read_number(&mut self, n: u32, after_at: bool, rest: &[Token]) -> Result<usize, Reason> {
        let listing = std::mem::take(&mut self.in_times);
        if let Some(Token::Word(w)) = rest.first() {
            if ["st", "nd", "rd", "th"].contains(&w.as_str()) {
                return Ok(2 + self.read_ordinal(&n.to_string(), n, &rest[1..])?);
            }
        }
        if let Some(Token::Word(w)) = rest.first() {
            if w.starts_with("x/") && w != "x/day" {
                return Err(Reason::NoDaysOrTimes { n, word: w.clone() });
            }
            if w == "x/day" || w == "x" {
                let times: &[(u32, u32)] = match n {
                    1 => &[(9, 0)],
                    2 => &[(9, 0), (17, 0)],
                    _ => return Err(Reason::TimesADay(n)),
                };
                for (h, m) in times {
                    self.add_time(*h, *m);
                }
                self.understood.push(format!("{n}x/day"));
                return Ok(2);
            }
        }
        // `9-5`, `9 to 5pm`: a window, its bare ends read as a bare hour is everywhere.
        if is_to(rest.first()) {
            match (n <= 23, window_end(rest.get(1)), rest.get(1)) {
                (true, Some(end), _) => {
                    self.set_window_of(End::Bare(n), end)?;
                    self.in_times = false;
                    return Ok(3);
                }
                (_, _, Some(Token::Num(to))) => return Err(Reason::BareWindow { from: n, to: *to }),
                _ => {}
            }
        }
        if listing && n <= 23 {
            // `at 9`, `every weekday at 9`, `at 9 and 5`: a bare hour.
            let written = if after_at {
                format!("at {n}")
            } else {
                n.to_string()
            };
            let hour = self.bare_hour(n, &written)?;
            self.in_times = true;
            self.add_time(hour, 0);
            self.understood.push(format!("at {hour:02}:00"));
            return Ok(1);
        }
        Err(Reason::BareNumber(n))
    }

    /// Reads the word `w` (followed by `rest`) and returns how many tokens it consumed.
    fn read_word(&mut self, w: &str, rest: &[Token]) -> Result<usize, Reason> {
        match w {
            "at" | "on" | "and" | "the" | "of" | "in" | "a" | "month" | "months" | "o'clock" => Ok(1),
            "monthly" => {
                self.monthly_word = true;
                self.understood.push("monthly (the 1st)".into());
                Ok(1)
            }
            "once" | "twice" | "thrice" => self.times_a(w, rest),
            // `three times a day` (docs/schedules.md), `two times a day`.
            "two" | "three" if matches!(rest.first(), Some(Token::Word(t)) if t == "times") => {
                let word = if w == "two" { "twice" } else { "thrice" };
                Ok(1 + self.times_a(word, &rest[1..])?)
            }
            "during" | "within" => self.read_during(rest),
            w if ordinal_word(w).is_some() => {
                let which = ordinal_word(w).unwrap_or("1");
                Ok(1 + self.read_ordinal(which, 0, rest)?)
            }
            "every" | "each" => self.read_every(rest).map(|n| n + 1),
            "between" | "from" => match (window_end(rest.first()), rest.get(1), window_end(rest.get(2))) {
                (Some(from), Some(Token::Word(and)), Some(to))
                    if and == "and" || and == "to" || and == "until" || and == "till" =>
                {
                    self.set_window_of(from, to)?;
                    Ok(4)
                }
                _ => Ok(1),
            },
            "hourly" => {
                self.set_interval(Interval::Hours(1))?;
                Ok(1)
            }
            "times" => Ok(1),
            "daily" | "day" | "everyday" => {
                self.add_days(0..7, "every day");
                Ok(1)
            }
            "weekly" | "week" | "weeks" => {
                self.weekly = true;
                self.understood.push("weekly".into());
                Ok(1)
            }
            "weekdays" | "weekday" | "workday" | "workdays" => {
                self.add_days(1..6, "weekdays");
                Ok(1)
            }
            // `business days`, `working days`: Monday to Friday (tabd knows no holidays).
            _ if business_days(w, rest.first()) => {
                self.add_days(1..6, "business days");
                Ok(2)
            }
            "except" | "excluding" => match rest.first() {
                Some(t) if names_days(t) && !matches!(t, Token::Comma) => {
                    self.except = true;
                    Ok(1)
                }
                _ => Err(Reason::ExceptTakesDays),
            },
            w if Part::of(w).is_some() => {
                self.read_part(w);
                Ok(1)
            }
            "weekends" | "weekend" => {
                self.add_days([0, 6], "weekends");
                Ok(1)
            }
            _ => self.read_day(w, rest),
        }
    }

    /// Reads the day `w` (`mon`, `monday`), or the range of days `w-w2` (`mon-fri`, which may
    /// wrap past Sunday); any other word is not understood.
    fn read_day(&mut self, w: &str, rest: &[Token]) -> Result<usize, Reason> {
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

    /// `once`, `twice`, `thrice` (a day): 09:00; 09:00 and 17:00; 09:00, 13:00 and 17:00.
    /// `once a week` is weekly and `once a month` monthly; twice a week or month names no days,
    /// and guessing them would be a schedule the person did not write.
    fn times_a(&mut self, w: &str, rest: &[Token]) -> Result<usize, Reason> {
        let unit = match (rest.first(), rest.get(1)) {
            (Some(Token::Word(a)), Some(Token::Word(u)))
                if ["a", "per", "each", "every"].contains(&a.as_str()) =>
            {
                Some(u.as_str())
            }
            _ => None,
        };
        match unit.map(|u| u.trim_end_matches('s')) {
            Some("week") if w == "once" => {
                self.weekly = true;
                self.understood.push("once a week (monday)".into());
                return Ok(3);
            }
            Some("month") if w == "once" => {
                self.monthly_word = true;
                self.understood.push("once a month (the 1st)".into());
                return Ok(3);
            }
            Some(u @ ("week" | "month")) => {
                return Err(Reason::WhichDays {
                    word: w.to_string(),
                    unit: u.to_string(),
                });
            }
            _ => {}
        }
        let times: &[(u32, u32)] = match w {
            "once" => &[(9, 0)],
            "twice" => &[(9, 0), (17, 0)],
            _ => &[(9, 0), (13, 0), (17, 0)],
        };
        for (h, m) in times {
            self.add_time(*h, *m);
        }
        self.understood.push(format!("{w} a day"));
        Ok(if unit == Some("day") { 3 } else { 1 })
    }

    fn add_time(&mut self, hour: u32, minute: u32) {
        self.times.push((hour, minute));
        match self.runs.last_mut() {
            Some(Run::Times(times)) => times.push((hour, minute)),
            _ => self.runs.push(Run::Times(vec![(hour, minute)])),
        }
    }

    /// The phrase's day and time pairs. One run of days and one of times (in either order) is
    /// one group: `mon and fri at 9am and 5pm` means both days at both times. More runs pair up
    /// in order (`fri at 4pm and mon at 9am`, `9am weekdays, 11am weekends`); a run left without
    /// a partner is refused rather than guessed.
    fn groups(&self) -> Result<Vec<Group>, Reason> {
        if self.runs.len() <= 2 {
            return Ok(vec![Group {
                days: self.days.clone(),
                times: self.times.clone(),
            }]);
        }
        if self.runs.len() % 2 == 1 {
            return Err(Reason::Unpaired);
        }
        Ok(self
            .runs
            .chunks(2)
            .map(|pair| {
                let mut group = Group {
                    days: BTreeSet::new(),
                    times: Vec::new(),
                };
                for run in pair {
                    match run {
                        Run::Days(d) => group.days.extend(d),
                        Run::Times(t) => group.times.extend(t),
                    }
                }
                group
            })
            .collect())
    }

    /// `during work hours` (business, office, working): 09:00–17:00, weekdays unless days are
    /// given. Returns the tokens consumed, the word `during` included.
    fn read_during(&mut self, rest: &[Token]) -> Result<usize, Reason> {
        let hours_words = ["work", "working", "business", "office"];
        match (rest.first(), rest.get(1)) {
            (Some(Token::Word(a)), Some(Token::Word(b)))
                if hours_words.contains(&a.as_str()) && b.starts_with("hour") =>
            {
                self.set_window((9, 0), (17, 0))?;
                if self.days.is_empty() {
                    self.add_days(1..6, "weekdays");
                }
                Ok(3)
            }
            _ => Err(Reason::During),
        }
    }

    /// After an ordinal (`first`, `last`, `1st`, `15th`): a weekday of the month (`first monday
    /// of the month`), the last day (`last day of the month`), or a day of the month (`1st of
    /// the month`, `on the 15th`). Returns the tokens consumed after the ordinal.
    fn read_ordinal(&mut self, which: &str, n: u32, rest: &[Token]) -> Result<usize, Reason> {
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

    fn read_every(&mut self, rest: &[Token]) -> Result<usize, Reason> {
        let unit_of = |w: &str| match w {
            "s" | "sec" | "secs" | "second" | "seconds" => Some(Interval::Seconds(1)),
            "m" | "min" | "mins" | "minute" | "minutes" => Some(Interval::Minutes(1)),
            "h" | "hr" | "hrs" | "hour" | "hours" => Some(Interval::Hours(1)),
            _ => None,
        };
        match (rest.first(), rest.get(1)) {
            // `every other monday`, `every second friday` (but `every second tuesday of the
            // month` is the nth weekday, read by the ordinal).
            (Some(Token::Word(other)), Some(Token::Word(next)))
                if other == "other"
                    || (["second", "third", "fourth", "fifth"].contains(&other.as_str())
                        && day_of(next).is_some()) =>
            {
                let of_month = matches!(rest.get(2), Some(Token::Word(w)) if w == "of");
                if other != "other" && of_month {
                    return Ok(0);
                }
                Err(every_other(next, &rest[1..]))
            }
            (Some(Token::Num(n)), Some(Token::Word(u))) => {
                let interval = match (unit_of(u), u.trim_end_matches('s')) {
                    (Some(Interval::Seconds(_)), _) => Interval::Seconds(*n),
                    (Some(Interval::Minutes(_)), _) => Interval::Minutes(*n),
                    (Some(Interval::Hours(_)), _) => Interval::Hours(*n),
                    (None, "week") if *n == 1 => {
                        self.weekly = true;
                        self.understood.push("weekly".into());
                        return Ok(2);
                    }
                    (None, "month") if *n == 1 => {
                        self.monthly_word = true;
                        self.understood.push("monthly (the 1st)".into());
                        return Ok(2);
                    }
                    (None, "week") => {
                        return Err(Reason::EveryOtherWeek {
                            day: first_day_named(&rest[2..]),
                        })
                    }
                    (None, "month") => return Err(Reason::EveryOtherMonth),
                    (None, _) => {
                        return Err(Reason::EveryUnit {
                            n: *n,
                            unit: u.clone(),
                        })
                    }
                };
                self.set_interval(interval)?;
                Ok(2)
            }
            (Some(Token::Word(u)), _) if unit_of(u).is_some() => {
                self.set_interval(unit_of(u).unwrap_or(Interval::Minutes(1)))?;
                Ok(1)
            }
            // `every day`, `every friday`, `every weekday`: the day words do the work.
            (Some(Token::Word(_)), _) => Ok(0),
            _ => Err(Reason::EveryWhat),
        }
    }

    fn set_interval(&mut self, interval: Interval) -> Result<(), Reason> {
        if self.interval.is_some() {
            return Err(Reason::TwoIntervals);
        }
        let interval = match interval {
            Interval::Minutes(n) if n >= 60 && n % 60 == 0 => Interval::Hours(n / 60),
            other => other,
        };
        let (n, unit, fits) = match interval {
            Interval::Seconds(n) => (n, "seconds", 60 % n.max(1) == 0 && n > 0 && n < 60),
            Interval::Minutes(n) => (n, "min", n > 0 && n < 60 && 60 % n == 0),
            Interval::Hours(n) => (n, "hours", n > 0 && n < 24 && 24 % n == 0),
        };
        if !fits {
            return Err(Reason::NotAligned { n, unit });
        }
        self.understood.push(format!("every {n} {unit}"));
        self.interval = Some(interval);
        Ok(())
    }

    fn set_window(&mut self, start: (u32, u32), end: (u32, u32)) -> Result<(), Reason> {
        if start.1 != 0 || end.1 != 0 {
            return Err(Reason::WindowNotWholeHours);
        }
        if start.0 == end.0 {
            return Err(Reason::WindowOfNoHours);
        }
        self.understood
            .push(format!("between {:02}:00 and {:02}:00", start.0, end.0));
        self.window = Some((start.0, end.0));
        Ok(())
    }

    /// `every evening`, `sunday night`: its time when the phrase writes none (`Part::
    /// default_hour`); otherwise only the half of the clock its times are in.
    fn read_part(&mut self, w: &str) {
        let Some(part) = Part::of(w) else { return };
        if self.has_times {
            self.understood.push(format!("in the {}", part.name()));
            return;
        }
        let hour = part.default_hour();
        self.add_time(hour, 0);
        self.understood.push(format!("{} ({hour:02}:00)", part.name()));
    }

    fn add_days(&mut self, days: impl IntoIterator<Item = u32>, label: &str) {
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
    fn take_excluded(&mut self) {
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

    fn add_days_plain(&mut self, days: impl IntoIterator<Item = u32>) {
        let days: BTreeSet<u32> = days.into_iter().collect();
        self.days.extend(days.iter().copied());
        match self.runs.last_mut() {
            Some(Run::Days(run)) => run.extend(days),
            _ => self.runs.push(Run::Days(days)),
        }
    }

    fn dow_field(&self, days: &BTreeSet<u32>) -> String {
        let mut days = days.clone();
        if self.weekly && days.is_empty() {
            days.insert(1);
        }
        if days.is_empty() || days.len() == 7 {
            return "*".into();
        }
        compress(&days.into_iter().collect::<Vec<_>>())
    }

    fn window_hours(&self) -> Option<Vec<u32>> {
        let (start, end) = self.window?;
        Some(if start < end {
            (start..end).collect()
        } else {
            (start..24).chain(0..end).collect()
        })
    }

    /// The one cron line of an interval (`every 30 min, 9am-6pm weekdays`).
    /// Every written time lies in the part of the day the phrase names (`every evening at
    /// 9am` is refused; a bare hour was read in the part already).
    fn times_in_part(&self) -> Result<(), Reason> {
        let Some(part) = self.part() else {
            return Ok(());
        };
        match self.times.iter().find(|(h, _)| !part.holds(*h)) {
            Some((h, m)) => Err(Reason::NotInPart {
                part: part.name(),
                hours: part.hours(),
                example: part.default_hour() % 12,
                written: format!("{h:02}:{m:02}"),
            }),
            None => Ok(()),
        }
    }

    fn interval_cron(&self, interval: Interval) -> Result<String, Reason> {
        if self.monthly_word || self.month_day.is_some() || self.nth_weekday.is_some() {
            return Err(Reason::IntervalMonthly);
        }
        if !self.times.is_empty() {
            return Err(Reason::IntervalAtTimes);
        }
        let dow = self.dow_field(&self.days);
        let hours = self
            .window_hours()
            .map(|h| compress(&h))
            .unwrap_or_else(|| "*".into());
        Ok(match interval {
            Interval::Seconds(n) => format!("{} * {hours} * * {dow}", step(n)),
            Interval::Minutes(n) => format!("{} {hours} * * {dow}", step(n)),
            Interval::Hours(n) => match self.window_hours() {
                Some(hours) => {
                    let picked: Vec<u32> = hours.iter().step_by(n as usize).copied().collect();
                    format!("0 {} * * {dow}", compress(&picked))
                }
                None => format!("0 {} * * {dow}", step(n)),
            },
        })
    }

    pub(super) fn to_crons(&self) -> Result<CompiledPhrase, Reason> {
        if self.no_days_left {
            return Err(Reason::NoDaysLeft);
        }
        if let (Some(part), Some(_)) = (self.parts.first(), self.interval) {
            return Err(Reason::PartWithInterval(part.name()));
        }
        self.times_in_part()?;
        let groups = self.groups()?;
        let notes: Vec<String> = self.bare_note().into_iter().chain(self.notes.clone()).collect();
        let compiled = |crons: Vec<String>, kind| CompiledPhrase {
            crons,
            kind,
            zone: None,
            notes: notes.clone(),
        };
        if let Some(interval) = self.interval {
            return Ok(compiled(
                vec![self.interval_cron(interval)?],
                ScheduleKind::Interval,
            ));
        }
        if self.window.is_some() {
            return Err(Reason::WindowWithoutInterval);
        }
        let day_named = self.month_day.is_some() || self.nth_weekday.is_some();
        let monthly = self.monthly_word || day_named;
        // `weekly` would put Monday in the day-of-week field, which cron ORs with the month's day.
        if monthly && (!self.days.is_empty() || self.weekly) {
            return Err(Reason::MonthlyWithWeekdays);
        }
        if self.times.is_empty() && self.days.is_empty() && !self.weekly && !monthly {
            return Err(Reason::Nothing);
        }
        let dom = match (&self.month_day, &self.nth_weekday) {
            (Some(day), _) => day.clone(),
            (None, None) if self.monthly_word => "1".into(),
            _ => "*".into(),
        };
        let mut crons = Vec::new();
        for group in &groups {
            let dow = self
                .nth_weekday
                .clone()
                .unwrap_or_else(|| self.dow_field(&group.days));
            let mut times = group.times.clone();
            if times.is_empty() {
                times.push((9, 0));
            }
            times.sort();
            times.dedup();
            // One cron per distinct minute: `30 9` and `0 17` cannot share an expression.
            let mut minutes: Vec<u32> = times.iter().map(|t| t.1).collect();
            minutes.sort();
            minutes.dedup();
            for m in minutes {
                let hours: Vec<u32> = times.iter().filter(|t| t.1 == m).map(|t| t.0).collect();
                crons.push(format!("{m} {} {dom} * {dow}", compress(&hours)));
            }
        }
        Ok(compiled(crons, ScheduleKind::ClockTime))
    }
}

fn step(n: u32) -> String {
    if n == 1 {
        "*".into()
    } else {
        format!("*/{n}")
    }
}

/// `[1,2,3,4,5]` → `1-5`; `[0,6]` → `0,6`; `[9,17]` → `9,17`.
fn compress(values: &[u32]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", sorted[i], sorted[j]));
        } else {
            parts.extend(sorted[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    parts.join(",")
}
