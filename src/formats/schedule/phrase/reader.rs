//! The words of a phrase (as tokens) read into days, times, an interval, a window or a day of
//! the month, and those into cron lines. What it read so far is kept for a refusal's message;
//! the words `tabd schedule` shows are made from the crons (`schedule::words`).

use std::collections::BTreeSet;

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
    /// The last word read was `at`: a bare number after it is an hour (`at 9`).
    after_at: bool,
    /// Days and times in the order they were written, runs of one kind merged: pairs of them
    /// (`fri at 4pm and mon at 9am`) become one cron each, never a cross product.
    runs: Vec<Run>,
    /// Readings worth a word to the person (`"at 4" read as 16:00`).
    notes: Vec<String>,
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

fn day_of(word: &str) -> Option<u32> {
    let w = word.trim_end_matches('s');
    let table: [(&[&str], u32); 7] = [
        (&["sun", "sunday"], 0),
        (&["mon", "monday"], 1),
        (&["tue", "tues", "tuesday"], 2),
        (&["wed", "weds", "wednesday"], 3),
        (&["thu", "thur", "thurs", "thursday"], 4),
        (&["fri", "friday"], 5),
        (&["sat", "saturday"], 6),
    ];
    table
        .iter()
        .find(|(names, _)| names.contains(&w) || names.contains(&word))
        .map(|(_, d)| *d)
}

impl Reader {
    pub(super) fn read(&mut self, tokens: &[Token]) -> Result<(), Reason> {
        let mut i = 0;
        while i < tokens.len() {
            let next = tokens.get(i + 1);
            match &tokens[i] {
                Token::Comma | Token::Dash => i += 1,
                Token::Time(h, m) => {
                    // `9am-6pm`, `9am to 6pm`, `9:00 until 18:00`: a window.
                    let is_to = |t: Option<&Token>| {
                        matches!(t, Some(Token::Dash))
                            || matches!(t, Some(Token::Word(w)) if w == "to" || w == "until" || w == "till")
                    };
                    if is_to(next) {
                        if let Some(Token::Time(h2, m2)) = tokens.get(i + 2) {
                            self.set_window((*h, *m), (*h2, *m2))?;
                            i += 3;
                            continue;
                        }
                    }
                    self.add_time(*h, *m);
                    self.understood.push(format!("at {h:02}:{m:02}"));
                    i += 1;
                }
                Token::Num(n) => i += self.read_number(*n, &tokens[i + 1..])?,
                Token::Word(w) => {
                    i += self.read_word(w, &tokens[i + 1..])?;
                    self.after_at = w == "at";
                    continue;
                }
            }
        }
        Ok(())
    }

    /// A bare number `n` followed by `rest`: an ordinal (`15th`), an hour after `at`, or the
    /// `2x/day` shorthand. Returns the tokens consumed, the number included.
    fn read_number(&mut self, n: u32, rest: &[Token]) -> Result<usize, Reason> {
        if let Some(Token::Word(w)) = rest.first() {
            if ["st", "nd", "rd", "th"].contains(&w.as_str()) {
                return Ok(2 + self.read_ordinal(&n.to_string(), n, &rest[1..])?);
            }
        }
        // `9-5`: hours without am/pm as a window.
        if let (Some(Token::Dash), Some(Token::Num(to))) = (rest.first(), rest.get(1)) {
            return Err(Reason::BareWindow { from: n, to: *to });
        }
        if self.after_at && n <= 23 {
            // `at 9`, `every weekday at 9`: a bare hour.
            self.after_at = false;
            let hour = bare_hour(n);
            if (1..=12).contains(&n) {
                let other = if hour == n {
                    format!("{n}pm")
                } else {
                    format!("{n}am")
                };
                self.notes.push(format!(
                    "\"at {n}\" read as {hour:02}:00 (a bare 1 to 6 is the afternoon, 7 to 12 the \
                     morning and noon); write {other} if you meant that"
                ));
            }
            self.add_time(hour, 0);
            self.understood.push(format!("at {hour:02}:00"));
            return Ok(1);
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
            "between" | "from" => match (rest.first(), rest.get(1), rest.get(2)) {
                (Some(Token::Time(h, m)), Some(Token::Word(and)), Some(Token::Time(h2, m2)))
                    if and == "and" || and == "to" || and == "until" =>
                {
                    self.set_window((*h, *m), (*h2, *m2))?;
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
            "weekdays" | "weekday" => {
                self.add_days(1..6, "weekdays");
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
            (Some(Token::Num(n)), Some(Token::Word(u))) => {
                let interval = match unit_of(u) {
                    Some(Interval::Seconds(_)) => Interval::Seconds(*n),
                    Some(Interval::Minutes(_)) => Interval::Minutes(*n),
                    Some(Interval::Hours(_)) => Interval::Hours(*n),
                    None => {
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

    fn add_days(&mut self, days: impl IntoIterator<Item = u32>, label: &str) {
        let days: Vec<u32> = days.into_iter().collect();
        self.days.extend(days.iter().copied());
        match self.runs.last_mut() {
            Some(Run::Days(run)) => run.extend(days),
            _ => self.runs.push(Run::Days(days.into_iter().collect())),
        }
        self.understood.push(label.to_string());
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
        let groups = self.groups()?;
        let compiled = |crons: Vec<String>, kind| CompiledPhrase {
            crons,
            kind,
            zone: None,
            notes: self.notes.clone(),
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

/// A bare hour after `at`: 1 to 6 is the afternoon (people schedule work, not 4 am), 7 to 12
/// and 0, 13 to 23 are read as written. Documented in docs/schedules.md.
pub(super) fn bare_hour(n: u32) -> u32 {
    if (1..=6).contains(&n) {
        n + 12
    } else {
        n
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
