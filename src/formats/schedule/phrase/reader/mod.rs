//! The words of a phrase (as tokens) read into days, times, an interval, a window or a day of
//! the month, and those into cron lines. What it read so far is kept for a refusal's message;
//! the words `tabd schedule` shows are made from the crons (`schedule::words`).

use std::collections::BTreeSet;

use super::hours::Part;
use super::tokens::Token;
use super::{CompiledPhrase, Reason, ScheduleKind};

mod clock;
mod days;

use clock::{is_to, window_end, End};
pub(super) use days::full_day_name;
use days::{business_days, day_of, every_other, first_day_named, names_days};

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
