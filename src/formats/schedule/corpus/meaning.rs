//! The words `tabd schedule` shows, read back into days and times, and the fires they promise
//! computed from those alone: a date walk, each time of day placed in the zone by chrono-tz with
//! the DST rules docs/schedules.md states. Nothing here uses croner or `schedule::words`.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Which days a group of words names.
#[derive(Debug, Clone)]
pub enum Days {
    Every,
    Weekdays(BTreeSet<u32>),
    DatesOf(BTreeSet<u32>),
    LastDay,
    /// The first (`true`) or last Monday-to-Friday day of the month.
    Workday(bool),
    /// The nth (1–5; `None`: the last) weekday of the month.
    Nth(Option<u32>, u32),
    Any(Vec<Days>),
    InMonths(Box<Days>, BTreeSet<u32>),
}

impl Days {
    pub fn matches(&self, d: NaiveDate) -> bool {
        let dow = d.weekday().num_days_from_sunday();
        match self {
            Days::Every => true,
            Days::Weekdays(set) => set.contains(&dow),
            Days::DatesOf(set) => set.contains(&d.day()),
            Days::LastDay => (d + Duration::days(1)).month() != d.month(),
            Days::Workday(first) => {
                let workday = |d: NaiveDate| (1..=5).contains(&d.weekday().num_days_from_sunday());
                let step = if *first { -1 } else { 1 };
                // A workday with none before it (after it, for the last) in its month.
                workday(d)
                    && (1..=3)
                        .map(|k| d + Duration::days(step * k))
                        .take_while(|x| x.month() == d.month())
                        .all(|x| !workday(x))
            }
            Days::Nth(Some(n), wd) => *wd == dow && (d.day() - 1) / 7 + 1 == *n,
            Days::Nth(None, wd) => *wd == dow && (d + Duration::days(7)).month() != d.month(),
            Days::Any(all) => all.iter().any(|x| x.matches(d)),
            Days::InMonths(days, months) => months.contains(&d.month()) && days.matches(d),
        }
    }
}

/// One `DAYS at …` or `DAYS, every …` group: its days and its times of day in seconds, each
/// with whether it is a clock time (fixed-time DST rules) or on a grid.
#[derive(Debug, Clone)]
pub struct Group {
    pub days: Days,
    pub times: Vec<(u32, bool)>,
}

#[derive(Debug, Clone)]
pub struct Meaning {
    pub groups: Vec<Group>,
    pub zone: Option<Tz>,
}

impl Meaning {
    /// The times of day (seconds) this meaning fires at on `d`, ascending.
    pub fn times_on(&self, d: NaiveDate) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .groups
            .iter()
            .filter(|g| g.days.matches(d))
            .flat_map(|g| g.times.iter().map(|(t, _)| *t))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The first `n` fires in `(after, until]`, in the words' zone or else `tz`: a clock
    /// time in a spring-forward gap runs once at the first wall time after it that exists, and
    /// in a repeated hour once, the first time; a grid time runs at every instant its wall time
    /// has, none in a gap and both in a repeat.
    pub fn fires(&self, tz: Tz, after: DateTime<Utc>, until: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let tz = self.zone.unwrap_or(tz);
        let mut date = after.with_timezone(&tz).date_naive() - Duration::days(1);
        let mut out = BTreeSet::new();
        let last = until.with_timezone(&tz).date_naive() + Duration::days(1);
        while date <= last {
            for g in self.groups.iter().filter(|g| g.days.matches(date)) {
                for (t, clock) in &g.times {
                    for at in place(tz, date, *t, *clock) {
                        if at > after && at <= until {
                            out.insert(at);
                        }
                    }
                }
            }
            if out.len() >= n {
                break;
            }
            date += Duration::days(1);
        }
        out.into_iter().take(n).collect()
    }
}

fn place(tz: Tz, date: NaiveDate, t: u32, clock: bool) -> Vec<DateTime<Utc>> {
    let Some(mut wall) = date.and_hms_opt(t / 3600, t / 60 % 60, t % 60) else {
        panic!("{t} is not a time of day");
    };
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(x) => vec![x.with_timezone(&Utc)],
        LocalResult::Ambiguous(a, _) if clock => vec![a.with_timezone(&Utc)],
        LocalResult::Ambiguous(a, b) => vec![a.with_timezone(&Utc), b.with_timezone(&Utc)],
        // The first whole minute after it that exists (the gap's end).
        LocalResult::None if clock => loop {
            wall += Duration::minutes(1);
            if let LocalResult::Single(x) | LocalResult::Ambiguous(x, _) = tz.from_local_datetime(&wall) {
                break vec![x.with_timezone(&Utc)];
            }
        },
        LocalResult::None => Vec::new(),
    }
}

/// Reads `words` (as `tabd schedule` prints them after "understood:") back into a meaning.
pub fn read(words: &str) -> Result<Meaning, String> {
    let (body, zone) = match words.strip_suffix(')').and_then(|w| w.rsplit_once(" (")) {
        Some((body, zone)) => {
            let tz: Tz = zone.parse().map_err(|_| format!("zone {zone:?}"))?;
            (body, Some(tz))
        }
        None => (words, None),
    };
    let groups = body.split("; ").map(group).collect::<Result<_, _>>()?;
    Ok(Meaning { groups, zone })
}

fn group(text: &str) -> Result<Group, String> {
    let grid_at = [", every ", ", at "].iter().filter_map(|m| text.find(m)).min();
    if let Some(i) = grid_at {
        let mut times = Vec::new();
        for part in text[i + 2..].split(" and ") {
            times.extend(grid_part(part)?.into_iter().map(|t| (t, false)));
        }
        return Ok(Group {
            days: days(&text[..i])?,
            times,
        });
    }
    let i = text.find(" at ").ok_or_else(|| format!("no times in {text:?}"))?;
    let times = text[i + 4..]
        .replace(" and ", ", ")
        .split(", ")
        .map(|t| clock(t).map(|t| (t, true)))
        .collect::<Result<_, _>>()?;
    Ok(Group {
        days: days(&text[..i])?,
        times,
    })
}

/// `at 05:00`, `every 30 min`, `every 2 hours from 09:00 to 17:00`.
fn grid_part(part: &str) -> Result<Vec<u32>, String> {
    if let Some(t) = part.strip_prefix("at ") {
        return Ok(vec![clock(t)?]);
    }
    let rest = part.strip_prefix("every ").ok_or_else(|| format!("{part:?}"))?;
    let (step, span) = match rest.split_once(" from ") {
        Some((step, span)) => (step, Some(span)),
        None => (rest, None),
    };
    let step = match step.split_once(' ') {
        None => unit(step)?,
        Some((n, u)) => n.parse::<u32>().map_err(|e| format!("{n}: {e}"))? * unit(u)?,
    };
    let (from, to) = match span {
        Some(span) => {
            let (a, b) = span.split_once(" to ").ok_or_else(|| format!("{span:?}"))?;
            (clock(a)?, clock(b)?)
        }
        None => (0, 86_400 - step),
    };
    Ok((from..=to).step_by(step as usize).collect())
}

fn unit(u: &str) -> Result<u32, String> {
    Ok(match u {
        "second" | "seconds" => 1,
        "minute" | "min" => 60,
        "hour" | "hours" => 3600,
        _ => return Err(format!("unit {u:?}")),
    })
}

fn clock(t: &str) -> Result<u32, String> {
    let parts: Vec<u32> = t
        .split(':')
        .map(|p| p.parse::<u32>().map_err(|e| format!("{t:?}: {e}")))
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [h, m] if *h < 24 && *m < 60 => Ok(h * 3600 + m * 60),
        [h, m, s] if *h < 24 && *m < 60 && *s < 60 => Ok(h * 3600 + m * 60 + s),
        _ => Err(format!("not a time: {t:?}")),
    }
}

fn days(text: &str) -> Result<Days, String> {
    if text.contains(" or ") {
        return text
            .split(" or ")
            .map(days)
            .collect::<Result<_, _>>()
            .map(Days::Any);
    }
    if let Some((rest, months)) = text.rsplit_once(" in ") {
        return Ok(Days::InMonths(Box::new(days(rest)?), names(months, &MONTHS, 1)?));
    }
    if let Some(inner) = text.strip_prefix("the ") {
        let (items, of) = inner.rsplit_once(" of ").ok_or_else(|| format!("{text:?}"))?;
        let mut any = Vec::new();
        for item in items.replace(" and ", ", ").split(", ") {
            any.push(month_item(item)?);
        }
        let d = if any.len() == 1 {
            any.remove(0)
        } else {
            Days::Any(any)
        };
        return Ok(match of {
            "the month" => d,
            months => Days::InMonths(Box::new(d), names(months, &MONTHS, 1)?),
        });
    }
    Ok(match text {
        "every day" => Days::Every,
        "weekdays" => Days::Weekdays((1..=5).collect()),
        "weekends" => Days::Weekdays([0, 6].into()),
        list => Days::Weekdays(names(list, &DAYS, 0)?),
    })
}

/// `15th`, `last day`, `1st mon`, `last fri`.
fn month_item(item: &str) -> Result<Days, String> {
    match item {
        "last day" => return Ok(Days::LastDay),
        "1st weekday" => return Ok(Days::Workday(true)),
        "last weekday" => return Ok(Days::Workday(false)),
        _ => {}
    }
    let (nth, day) = match item.split_once(' ') {
        Some((nth, day)) => (nth, Some(day)),
        None => (item, None),
    };
    let n = if nth == "last" {
        None
    } else {
        let digits = nth.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        Some(digits.parse::<u32>().map_err(|e| format!("{item:?}: {e}"))?)
    };
    match (n, day) {
        (Some(n), None) => Ok(Days::DatesOf([n].into())),
        (n, Some(day)) => {
            let wd = DAYS
                .iter()
                .position(|d| *d == day)
                .ok_or_else(|| format!("{day:?}"))?;
            Ok(Days::Nth(n, wd as u32))
        }
        (None, None) => Err(format!("{item:?}")),
    }
}

/// `mon-wed,fri` → {1, 2, 3, 5} (`base`: the number of the first name).
fn names(list: &str, table: &[&str], base: u32) -> Result<BTreeSet<u32>, String> {
    let find = |n: &str| {
        table
            .iter()
            .position(|x| *x == n)
            .map(|i| i as u32 + base)
            .ok_or_else(|| format!("{n:?} in {list:?}"))
    };
    let mut out = BTreeSet::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => out.extend(find(a)?..=find(b)?),
            None => {
                out.insert(find(part)?);
            }
        }
    }
    Ok(out)
}
