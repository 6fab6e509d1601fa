//! What a compiled schedule line means, in words, read from the fields croner parsed out of its
//! cron expressions — never from the phrase — so `tabd schedule`'s "understood" and the fires
//! cannot disagree (issue 39: `1st and 15th of the month` once fired on the 15th only while the
//! words said the 1st).
//!
//! The words follow one small grammar, which the corpus test reads back (`corpus::meaning`):
//! groups of `DAYS at T, T and T` (clock times) or `DAYS, every D from T to T and …` (a grid of
//! real time) joined by `; `. Clock times keep cron's fixed-time DST rules (a time in a
//! spring-forward gap runs once at the first valid time after it, a repeated one once); a grid
//! runs at every wall time that exists, in both passes of a repeated hour.

use croner::{Cron, CronComponent, CronPattern};

/// croner's bit for `L` (`5#L`, the last friday), a private constant of croner 4.
const LAST_BIT: u8 = 1 << 6;
/// croner's bit for `W` (`15W`, the weekday nearest the 15th).
const CLOSEST_WEEKDAY_BIT: u8 = 1 << 7;
/// croner's bits for `#1` … `#5`, in order.
const NTH_BITS: [u8; 5] = [1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5];

const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MONTH_NAMES: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAY_SECONDS: u32 = 24 * 3600;

/// The line's crons in words: one group per distinct set of days, in the order first met, the
/// times of crons on the same days merged (`30 9 * * *` and `0 17 * * *`: every day at 09:30
/// and 17:00). `clock`: the line fires at clock times (`ScheduleKind::ClockTime`).
pub(super) fn describe<'a>(crons: impl IntoIterator<Item = &'a Cron>, clock: bool) -> String {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for cron in crons {
        let days = day_words(&cron.pattern);
        let times = times_of_day(&cron.pattern);
        match groups.iter_mut().find(|(d, _)| *d == days) {
            Some((_, all)) => all.extend(times),
            None => groups.push((days, times)),
        }
    }
    groups
        .into_iter()
        .map(|(days, mut times)| {
            times.sort_unstable();
            times.dedup();
            format!("{days}{}", time_words(&times, clock))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every second of the day the pattern fires at, ascending.
pub(super) fn times_of_day(p: &CronPattern) -> Vec<u32> {
    let (hours, minutes, seconds) = (p.hours.values(), p.minutes.values(), p.seconds.values());
    let mut out = Vec::with_capacity(hours.len() * minutes.len() * seconds.len());
    for h in &hours {
        for m in &minutes {
            for s in &seconds {
                out.push(u32::from(*h) * 3600 + u32::from(*m) * 60 + u32::from(*s));
            }
        }
    }
    out
}

/// ` at 09:00 and 17:00` for clock times, or for a grid `, every 30 min from 09:00 to 17:30`
/// (`, every 30 min` when it covers the whole day), runs joined by ` and `.
fn time_words(times: &[u32], clock: bool) -> String {
    let with_seconds = times.iter().any(|t| t % 60 != 0);
    let clock_time = |t: u32| clock_text(t, with_seconds);
    // One time is a clock time whatever the kind: croner keeps the fixed-time DST rules for it.
    if clock || times.len() == 1 {
        let each: Vec<String> = times.iter().map(|t| clock_time(*t)).collect();
        return format!(" at {}", and_list(&each));
    }
    let parts: Vec<String> = runs(times)
        .iter()
        .map(|run| match run {
            [one] => format!("at {}", clock_time(*one)),
            [first, second, ..] => {
                let last = run[run.len() - 1];
                let step = second - first;
                let every = every_text(step);
                if *first == 0 && last + step == DAY_SECONDS {
                    every
                } else {
                    format!("{every} from {} to {}", clock_time(*first), clock_time(last))
                }
            }
            [] => String::new(),
        })
        .collect();
    format!(", {}", parts.join(" and "))
}

/// The times split into runs of one step each, greedily from the first, three or more long (or
/// two when they are all the times: `every 12 hours`): `[0, 30, 60, 200]` → `[0, 30, 60]`,
/// `[200]`.
fn runs(times: &[u32]) -> Vec<&[u32]> {
    if times.len() == 2 {
        return vec![times];
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < times.len() {
        let mut j = i + 1;
        if j + 1 < times.len() && times[j + 1] - times[j] == times[j] - times[i] {
            let step = times[j] - times[i];
            while j + 1 < times.len() && times[j + 1] - times[j] == step {
                j += 1;
            }
            out.push(&times[i..=j]);
            i = j + 1;
        } else {
            out.push(&times[i..=i]);
            i += 1;
        }
    }
    out
}

fn every_text(step: u32) -> String {
    let (n, one, many) = if step.is_multiple_of(3600) {
        (step / 3600, "hour", "hours")
    } else if step.is_multiple_of(60) {
        (step / 60, "minute", "min")
    } else {
        (step, "second", "seconds")
    };
    if n == 1 {
        format!("every {one}")
    } else {
        format!("every {n} {many}")
    }
}

fn clock_text(t: u32, with_seconds: bool) -> String {
    let (h, m, s) = (t / 3600, t / 60 % 60, t % 60);
    if with_seconds {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}")
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// The days the pattern fires on. Cron fires when the day of the month *or* the weekday
/// matches (a `*` field aside), so both named read `… or …`.
fn day_words(p: &CronPattern) -> String {
    let months = p.months.values();
    let in_months = (months.len() < 12).then(|| ranges(&months, |m| MONTH_NAMES[m as usize - 1]));
    let dom = (!p.is_dom_wildcard()).then(|| month_days(&p.days));
    let dow = (!p.is_dow_wildcard()).then(|| weekdays(&p.days_of_week));
    match (dom, dow, in_months) {
        (None, None, None) => "every day".to_string(),
        (None, None, Some(months)) => format!("every day in {months}"),
        (Some(dom), None, Some(months)) if !dom.contains(" or ") => {
            dom.replace("of the month", &format!("of {months}"))
        }
        (dom, dow, months) => {
            let words = [dom, dow].into_iter().flatten().collect::<Vec<_>>().join(" or ");
            match months {
                Some(months) => format!("{words} in {months}"),
                None => words,
            }
        }
    }
}

/// `the 15th of the month`, `the 1st and 15th of the month`, `the last day of the month`.
fn month_days(days: &CronComponent) -> String {
    let mut named: Vec<String> = days
        .values()
        .iter()
        .map(|d| ordinal_text(u32::from(*d)))
        .collect();
    if days.is_feature_enabled(LAST_BIT) && !days.is_feature_enabled(CLOSEST_WEEKDAY_BIT) {
        named.push("last day".into());
    }
    let mut words = vec![format!("the {} of the month", and_list(&named))];
    if named.is_empty() {
        words.clear();
    }
    // `15W`: the weekday nearest a day, only ever written as cron. `1W` never leaves the month,
    // so it is the 1st weekday (`first business day of the month`).
    for d in days.get_set_values(CLOSEST_WEEKDAY_BIT) {
        words.push(if d == 1 {
            "the 1st weekday of the month".to_string()
        } else {
            let day = ordinal_text(u32::from(d));
            format!("the weekday nearest the {day} of the month")
        });
    }
    if days.is_feature_enabled(LAST_BIT) && days.is_feature_enabled(CLOSEST_WEEKDAY_BIT) {
        words.push("the last weekday of the month".into());
    }
    words.join(" or ")
}

/// `weekdays`, `weekends`, `tue,thu`, `mon-wed,fri`, `the 1st mon of the month`, `the last fri
/// of the month`; plain weekdays and nth ones together read `… or …`.
fn weekdays(dow: &CronComponent) -> String {
    let plain = dow.values();
    let mut parts = Vec::new();
    if !plain.is_empty() {
        parts.push(match plain.as_slice() {
            [0, 1, 2, 3, 4, 5, 6] => "every day".to_string(),
            [1, 2, 3, 4, 5] => "weekdays".to_string(),
            [0, 6] => "weekends".to_string(),
            _ => ranges(&plain, |d| DAY_NAMES[d as usize]),
        });
    }
    let mut nth = Vec::new();
    for (i, bit) in NTH_BITS.iter().enumerate() {
        for d in dow.get_set_values(*bit) {
            let which = ordinal_text(i as u32 + 1);
            nth.push(format!("{which} {}", DAY_NAMES[usize::from(d % 7)]));
        }
    }
    for d in dow.get_set_values(LAST_BIT) {
        nth.push(format!("last {}", DAY_NAMES[usize::from(d % 7)]));
    }
    if !nth.is_empty() {
        parts.push(format!("the {} of the month", and_list(&nth)));
    }
    parts.join(" or ")
}

/// `1st`, `2nd`, `3rd`, `11th`, `22nd`.
pub(super) fn ordinal_text(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Values as names, runs of three or more as a range: `[1, 2, 3, 5]` → `mon-wed,fri`.
fn ranges(values: &[u16], name: impl Fn(u16) -> &'static str) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", name(values[i]), name(values[j])));
        } else {
            parts.extend(values[i..=j].iter().map(|v| name(*v).to_string()));
        }
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests;
