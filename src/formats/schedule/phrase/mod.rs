//! Schedule phrases (`9am and 5pm, weekdays`, `every 30 min`) → standard cron expressions.
//!
//! This module only translates words into cron fields; croner parses and evaluates every
//! expression it produces (see `schedule::CronSchedule`). Anything it does not understand is an
//! error that quotes the phrase and says what was understood.

use std::collections::BTreeSet;
use std::fmt;

use chrono_tz::Tz;

mod tokens;

use tokens::{tokenize, Token};

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
    /// What tabd understood, in words (`fri at 16:00; mon at 09:00`), for `tabd schedule`.
    pub understood: String,
    /// Readings the person may not have meant (`"at 4" read as 16:00`), shown by `validate`.
    pub notes: Vec<String>,
}

impl CompiledPhrase {
    fn plain(cron: &str, kind: ScheduleKind, understood: String) -> Self {
        Self {
            crons: vec![cron.to_string()],
            kind,
            zone: None,
            understood,
            notes: Vec::new(),
        }
    }
}

/// Why a phrase could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read schedule \"{phrase}\": {reason}{understood}. Accepted forms: {ACCEPTED}")]
pub struct PhraseError {
    pub phrase: String,
    pub reason: String,
    understood: Understood,
}

impl PhraseError {
    pub(crate) fn new(phrase: &str, reason: impl Into<String>) -> Self {
        Self {
            phrase: phrase.trim().to_string(),
            reason: reason.into(),
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

/// Shown in every schedule error so the person can copy a working form.
pub const ACCEPTED: &str = "`0 9,17 * * 1-5` (cron) · `@daily` · `9am and 5pm, weekdays` · `every 30 min` · \
`every 2 hours` · `hourly` · `every 30 min, 9am-6pm weekdays` · `every 15 min during work hours` · \
`daily at 8:30` · `at 9` · `at noon` · `twice a day` · `mondays at 10am` · `every friday at 4pm` · \
`weekly on monday` · `weekends at 11am` · `tue,thu at 14:00` · `monthly` · `1st of the month at 9am` · \
`first monday of the month` · `last friday of the month` · `1x/day` · `2x/day` · `on-demand` \
(see docs/schedules.md)";

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
fn refused(norm: &str) -> Option<String> {
    let every_n_days = norm
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(3)
        .any(|w| w[0] == "every" && w[1].parse::<u32>().is_ok_and(|n| n > 1) && w[2].starts_with("day"));
    if norm.contains("every other day") || every_n_days {
        return Some(
            "a run every other day (or every N days) drifts against weeks and months, which a clock schedule \
             cannot follow; write the days, like `mon,wed,fri at 9am`, or `daily at 9am` with `skip_unchanged: true`"
                .into(),
        );
    }
    if ["every other week", "biweekly", "bi-weekly", "fortnight"]
        .iter()
        .any(|w| norm.contains(w))
    {
        return Some(
            "every other week cannot be a fixed clock schedule; write a weekly one (`mondays at 9am`), or two \
             days of the month (`1st and 15th of the month at 9am` is not possible either: use two lines, \
             `1st of the month at 9am` and `15th of the month at 9am`)"
                .into(),
        );
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
        if let Some(zone) = zone {
            c.understood = format!("{} ({})", c.understood, zone.name());
            c.zone = Some(zone);
        }
        c
    }))
}

/// Takes a time zone out of the phrase (`… 4pm UTC`, `… at 9am in Europe/Lisbon`): an IANA
/// name, or UTC/GMT. Abbreviations like EST or CET are refused, because they name a fixed offset
/// that the person almost never means (New York's clocks change; EST does not).
fn take_zone(phrase: &str) -> Result<(String, Option<Tz>), String> {
    let mut zone: Option<Tz> = None;
    let mut kept: Vec<&str> = Vec::new();
    let words: Vec<&str> = phrase.split_whitespace().collect();
    for (i, raw) in words.iter().enumerate() {
        let word = raw.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | '.'));
        let found = match word.to_ascii_lowercase().as_str() {
            "utc" | "gmt" | "z" => Some(Tz::UTC),
            _ if word.contains('/') && word.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                Some(super::zone::parse_tz(word).map_err(|e| e.to_string())?)
            }
            "est" | "edt" | "cst" | "cdt" | "mst" | "mdt" | "pst" | "pdt" | "cet" | "cest" | "bst"
            | "ist" | "eet" | "eest" | "wet" | "west" | "jst" | "aest" => {
                return Err(format!(
                    "\"{word}\" is an abbreviation, not a time zone: write an IANA name (America/New_York, \
                     Europe/Berlin, …), whose clocks change with daylight saving as people's do"
                ))
            }
            _ => None,
        };
        match (found, zone) {
            (Some(z), Some(before)) if z != before => {
                return Err(format!(
                    "two time zones in one line ({} and {}): put each on its own line",
                    before.name(),
                    z.name()
                ))
            }
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
        return Ok(Some(CompiledPhrase::plain(
            cron,
            *kind,
            format!("{norm} (`{cron}`)"),
        )));
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
    super::parse_cron(&expr).map_err(|e| PhraseError {
        phrase: expr.clone(),
        reason: format!("not a valid cron expression ({e})"),
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
    let kind = if is_grid(min) || is_grid(hour) || (fields.len() == 6 && is_grid(fields[0])) {
        ScheduleKind::Interval
    } else {
        ScheduleKind::ClockTime
    };
    Ok(CompiledPhrase::plain(&expr, kind, format!("cron `{expr}`")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interval {
    Seconds(u32),
    Minutes(u32),
    Hours(u32),
}

#[derive(Debug, Default)]
struct Reader {
    interval: Option<Interval>,
    times: Vec<(u32, u32)>,
    window: Option<(u32, u32)>,
    days: BTreeSet<u32>,
    weekly: bool,
    /// The day-of-month field of a monthly schedule (`1`, `15`, `L` for the last day).
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
    understood: Vec<String>,
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
    fn read(&mut self, tokens: &[Token]) -> Result<(), String> {
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
    fn read_number(&mut self, n: u32, rest: &[Token]) -> Result<usize, String> {
        if let Some(Token::Word(w)) = rest.first() {
            if ["st", "nd", "rd", "th"].contains(&w.as_str()) {
                return Ok(2 + self.read_ordinal(&n.to_string(), n, &rest[1..])?);
            }
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
                return Err(format!(
                    "\"{n}{w}\" names no days or times: write them, like `mon,thu at 9am`"
                ));
            }
            if w == "x/day" || w == "x" {
                let times: &[(u32, u32)] = match n {
                    1 => &[(9, 0)],
                    2 => &[(9, 0), (17, 0)],
                    _ => {
                        return Err(format!(
                            "\"{n}x/day\" is not supported: use 1x/day, 2x/day or list the times"
                        ))
                    }
                };
                for (h, m) in times {
                    self.add_time(*h, *m);
                }
                self.understood.push(format!("{n}x/day"));
                return Ok(2);
            }
        }
        Err(format!(
            "\"{n}\" is not a time: write 9am, 17:00 or `every {n} min`"
        ))
    }

    /// Reads the word `w` (followed by `rest`) and returns how many tokens it consumed.
    fn read_word(&mut self, w: &str, rest: &[Token]) -> Result<usize, String> {
        match w {
            "at" | "on" | "and" | "the" | "of" | "in" | "a" | "month" | "months" | "o'clock" => Ok(1),
            "monthly" => {
                self.month_day.get_or_insert_with(|| "1".into());
                self.understood.push("monthly (the 1st)".into());
                Ok(1)
            }
            "once" | "twice" | "thrice" => self.times_a(w, rest),
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
            _ => {
                let Some(day) = day_of(w) else {
                    return Err(format!("\"{w}\" is not a time, day or interval word"));
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
        }
    }

    /// `once`, `twice`, `thrice` (a day): 09:00; 09:00 and 17:00; 09:00, 13:00 and 17:00.
    /// `once a week` is weekly and `once a month` monthly; twice a week or month names no days,
    /// and guessing them would be a schedule the person did not write.
    fn times_a(&mut self, w: &str, rest: &[Token]) -> Result<usize, String> {
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
                self.month_day.get_or_insert_with(|| "1".into());
                self.understood.push("once a month (the 1st)".into());
                return Ok(3);
            }
            Some(u @ ("week" | "month")) => {
                let example = if u == "week" {
                    "`mon,thu at 9am`"
                } else {
                    "two lines, `1st of the month at 9am` and `15th of the month at 9am`"
                };
                return Err(format!(
                    "\"{w} a {u}\" does not say which days: write them, like {example}"
                ));
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
    fn groups(&self) -> Result<Vec<Group>, String> {
        if self.runs.len() <= 2 {
            return Ok(vec![Group {
                days: self.days.clone(),
                times: self.times.clone(),
            }]);
        }
        if self.runs.len() % 2 == 1 {
            return Err(
                "it names days and times that do not pair up, so tabd cannot tell which time goes with \
                 which days: write one pair per line or join them with `;`, like `fri at 4pm; mon at 9am`"
                    .into(),
            );
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
    fn read_during(&mut self, rest: &[Token]) -> Result<usize, String> {
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
            _ => Err("\"during\" takes `work hours` (9am–5pm, weekdays) or a window like 9am-6pm".into()),
        }
    }

    /// After an ordinal (`first`, `last`, `1st`, `15th`): a weekday of the month (`first monday
    /// of the month`), the last day (`last day of the month`), or a day of the month (`1st of
    /// the month`, `on the 15th`). Returns the tokens consumed after the ordinal.
    fn read_ordinal(&mut self, which: &str, n: u32, rest: &[Token]) -> Result<usize, String> {
        if let Some(Token::Word(w)) = rest.first() {
            if let Some(day) = day_of(w) {
                let nth = match which {
                    "L" => "L".to_string(),
                    digit if digit.len() == 1 && digit != "0" && digit <= "5" => digit.to_string(),
                    _ => return Err(format!("there is no {which}th {w} in a month")),
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
            return Err(format!(
                "\"{which}\" is not a day of the month: use 1st to 31st, or `last day of the month`"
            ));
        }
        if day > 28 {
            return Err(format!(
                "the {} does not come in every month (February has 28 or 29 days): use `last day of the month`, or 28th or earlier",
                ordinal_text(day)
            ));
        }
        self.month_day = Some(day.to_string());
        self.understood
            .push(format!("the {} of the month", ordinal_text(day)));
        Ok(0)
    }

    fn read_every(&mut self, rest: &[Token]) -> Result<usize, String> {
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
                        return Err(format!(
                            "\"every {n} {u}\": the unit must be min, hours or seconds"
                        ))
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
            _ => {
                Err("\"every\" must be followed by an interval (every 30 min) or a day (every friday)".into())
            }
        }
    }

    fn set_interval(&mut self, interval: Interval) -> Result<(), String> {
        if self.interval.is_some() {
            return Err("only one interval per line: put each on its own line".into());
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
            return Err(format!(
                "\"every {n} {unit}\" does not divide the {} evenly, so it cannot stay aligned to \
                 the clock: use one of {}",
                if unit == "hours" { "day" } else { "hour" },
                if unit == "hours" {
                    "1, 2, 3, 4, 6, 8, 12 hours"
                } else {
                    "1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30"
                }
            ));
        }
        self.understood.push(format!("every {n} {unit}"));
        self.interval = Some(interval);
        Ok(())
    }

    fn set_window(&mut self, start: (u32, u32), end: (u32, u32)) -> Result<(), String> {
        if start.1 != 0 || end.1 != 0 {
            return Err("a time window takes whole hours, like 9am-6pm".into());
        }
        if start.0 == end.0 {
            return Err("the time window starts and ends at the same hour".into());
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
    fn interval_cron(&self, interval: Interval) -> Result<String, String> {
        if self.month_day.is_some() || self.nth_weekday.is_some() {
            return Err("an interval cannot also be monthly: use one line for each".into());
        }
        if !self.times.is_empty() {
            return Err(
                "an interval cannot also have clock times: use a window, like `every 30 min, 9am-6pm`".into(),
            );
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

    fn to_crons(&self) -> Result<CompiledPhrase, String> {
        let groups = self.groups()?;
        let compiled = |crons: Vec<String>, kind, understood: String| CompiledPhrase {
            crons,
            kind,
            zone: None,
            understood,
            notes: self.notes.clone(),
        };
        if let Some(interval) = self.interval {
            return Ok(compiled(
                vec![self.interval_cron(interval)?],
                ScheduleKind::Interval,
                self.understood.join(", "),
            ));
        }
        if self.window.is_some() {
            return Err("a time window needs an interval, like `every 30 min, 9am-6pm`".into());
        }
        let monthly = self.month_day.is_some() || self.nth_weekday.is_some();
        if monthly && !self.days.is_empty() {
            return Err(
                "a monthly schedule names its day once: `first monday of the month`, not also a weekday list"
                    .into(),
            );
        }
        if self.times.is_empty() && self.days.is_empty() && !self.weekly && !monthly {
            return Err("no time, day or interval found".into());
        }
        let dom = self.month_day.clone().unwrap_or_else(|| "*".into());
        let mut crons = Vec::new();
        let mut said = Vec::new();
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
            let when = if monthly {
                self.understood
                    .iter()
                    .find(|u| u.contains("month"))
                    .cloned()
                    .unwrap_or_else(|| "monthly".into())
            } else {
                describe_days(&self.dow_field(&group.days))
            };
            said.push(format!("{when} at {}", describe_times(&times)));
        }
        Ok(compiled(crons, ScheduleKind::ClockTime, said.join("; ")))
    }
}

/// A cron day-of-week field in words: `*` every day, `1-5` weekdays, `5` fri.
fn describe_days(dow: &str) -> String {
    match dow {
        "*" => "every day".into(),
        "1-5" => "weekdays".into(),
        "0,6" => "weekends".into(),
        _ => dow
            .split(',')
            .map(|part| match part.split_once('-') {
                Some((a, b)) => format!("{}-{}", day_name(a), day_name(b)),
                None => day_name(part).to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn day_name(n: &str) -> &'static str {
    n.parse::<usize>()
        .ok()
        .and_then(|n| DAY_NAMES.get(n))
        .copied()
        .unwrap_or("?")
}

/// `09:00 and 17:00`, `09:00, 13:00 and 17:00`.
fn describe_times(times: &[(u32, u32)]) -> String {
    let each: Vec<String> = times.iter().map(|(h, m)| format!("{h:02}:{m:02}")).collect();
    match each.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// A bare hour after `at`: 1 to 6 is the afternoon (people schedule work, not 4 am), 7 to 12
/// and 0, 13 to 23 are read as written. Documented in docs/schedules.md.
fn bare_hour(n: u32) -> u32 {
    if (1..=6).contains(&n) {
        n + 12
    } else {
        n
    }
}

fn ordinal_text(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
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

#[cfg(test)]
mod tests;
