//! Why a schedule phrase cannot be read: one variant per refusal. Its `Display` is the hint a
//! person needs (what to write instead); `PhraseError` puts it after the quoted phrase, with
//! what was understood so far and the accepted forms.

use chrono_tz::Tz;

use crate::formats::schedule::words::ordinal_text;
use crate::formats::schedule::zone::UnknownZone;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    #[error("unexpected character '{0}'")]
    UnexpectedCharacter(char),
    #[error("\"{0}\" is too large")]
    NumberTooLarge(String),
    #[error("\"{0}\" is not a time like 8:30")]
    NotAClockTime(String),
    #[error("\"{hour}{suffix}\" is not a time: use 1–12 with am/pm")]
    NotTwelveHour { hour: u32, suffix: String },
    #[error("\"{hour}:{minute:02}\" is not a time: hours go 0–23")]
    HourPast23 { hour: u32, minute: u32 },
    #[error("\"{hour}:{minute}\" is not a time: minutes go 00–59")]
    MinutePast59 { hour: u32, minute: u32 },
    #[error(transparent)]
    Zone(#[from] UnknownZone),
    #[error(
        "\"{0}\" is an abbreviation, not a time zone: write an IANA name (America/New_York, \
         Europe/Berlin, …), whose clocks change with daylight saving as people's do"
    )]
    ZoneAbbreviation(String),
    #[error("two time zones in one line ({} and {}): put each on its own line", .0.name(), .1.name())]
    TwoZones(Tz, Tz),
    #[error(
        "a run every other day (or every N days) drifts against weeks and months, which a clock schedule \
         cannot follow; write the days, like `mon,wed,fri at 9am`, or `daily at 9am` and set \
         skip_unchanged: true in the role"
    )]
    EveryOtherDay,
    /// `every other week`, `every 2 weeks`, `every other monday` (`day`: the day it names).
    #[error(
        "every other week (or every N weeks) cannot be a clock schedule: cron counts days of the week and of the \
         month, never weeks; write a weekly one (`{}s at 9am`), or two monthly lines, {}",
        .day.as_deref().unwrap_or("monday"),
        match .day {
            Some(day) => format!("`first {day} of the month` and `third {day} of the month`"),
            None => "`1st of the month at 9am` and `15th of the month at 9am`".to_string(),
        }
    )]
    EveryOtherWeek { day: Option<String> },
    #[error(
        "every other month (or every N months) is not a phrase tabd reads: write a cron line naming the months, \
         like `0 9 1 1,3,5,7,9,11 *` (the 1st of every other month from January, at 09:00)"
    )]
    EveryOtherMonth,
    #[error("\"every other {unit}\" is every 2 of them: write `{written}`")]
    EveryOther {
        unit: &'static str,
        written: &'static str,
    },
    /// croner's reason, as it says it (its error type is neither `Clone` nor `Eq`).
    #[error("not a valid cron expression ({0})")]
    Cron(String),
    /// The compiler wrote an expression croner refuses: a bug, reported rather than a panic.
    #[error("internal: compiled to `{expr}`, which croner rejects ({croner})")]
    Internal { expr: String, croner: String },
    #[error("\"{n}{word}\" names no days or times: write them, like `mon,thu at 9am`")]
    NoDaysOrTimes { n: u32, word: String },
    #[error(
        "\"{0}x/day\" is not supported: use `1x/day`, `2x/day` or list the times, like \
         `9am, 1pm and 5pm`"
    )]
    TimesADay(u32),
    #[error("\"{0}\" is not a time: write {hint}", hint = bare_number_hint(*.0))]
    BareNumber(u32),
    #[error(
        "\"{from}-{to}\" is not a time window: hours go 0–23; write one with am/pm (or 24-hour times) and \
         an interval, like `every hour, 9am-5pm`"
    )]
    BareWindow { from: u32, to: u32 },
    /// A window with a bare end that, read by the rule of a bare hour, runs past midnight, or
    /// pairs a 24-hour hour with a bare 1 to 6 read as the afternoon (`between 0 and 6`).
    #[error(
        "\"{from}\" to \"{to}\" reads as {read_from:02}:00 to {read_to:02}:00, {why} (a bare 1 to 6 is the \
         afternoon, 7 to 12 the morning and noon): write the hours with am/pm, like {}",
        choices.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" or ")
    )]
    BareWindowUnclear {
        from: u32,
        to: u32,
        read_from: u32,
        read_to: u32,
        why: &'static str,
        choices: Vec<String>,
    },
    /// A time outside the part of the day the phrase names (`every evening at 9am`).
    #[error(
        "\"{written}\" is not in the {part} ({:02}:00–{:02}:59): write a time in it, like `every {part} at \
         {example}`, or leave out \"{part}\"",
        .hours.0,
        .hours.1
    )]
    NotInPart {
        part: &'static str,
        hours: (u32, u32),
        example: u32,
        written: String,
    },
    #[error(
        "it names several parts of the day and clock times, so tabd cannot tell which time goes with which: \
         write a line for each, like `every morning at 8; every evening at 7`"
    )]
    PartsWithTimes,
    #[error(
        "\"{0}\" with an interval is not a window tabd reads: write the hours, like `every 30 min, 6am-12pm`"
    )]
    PartWithInterval(&'static str),
    #[error(
        "\"except\" takes days, like `every day except sunday at 9am` (tabd knows no holidays: a run on one is \
         the role's to skip)"
    )]
    ExceptTakesDays,
    #[error("\"except\" leaves no day to run on")]
    NoDaysLeft,
    #[error(
        "cron can name the first and the last business day (Monday to Friday) of the month, not the {}: write \
         `first business day of the month`, `last business day of the month`, or a line per weekday of the month \
         (`second monday of the month`)",
        ordinal_text(*.0)
    )]
    NthBusinessDay(u32),
    #[error("\"{0}\" is not a time, day or interval word")]
    UnknownWord(String),
    #[error(
        "\"{word} a {unit}\" does not say which days: write them, like {}",
        which_days_example(unit)
    )]
    WhichDays { word: String, unit: String },
    #[error(
        "it names days and times that do not pair up, so tabd cannot tell which time goes with \
         which days: write one pair per line or join them with `;`, like `fri at 4pm; mon at 9am`"
    )]
    Unpaired,
    #[error(
        "\"during\" takes work hours (9am–5pm, weekdays), like `every 15 min during work hours`; \
         or write a window, like `every 30 min, 9am-6pm`"
    )]
    During,
    #[error("there is no {} {day} in a month", ordinal_text(*.nth))]
    NoNthWeekday { nth: u32, day: String },
    #[error("\"{0}\" is not a day of the month: use 1st to 31st, or `last day of the month`")]
    NotADayOfTheMonth(String),
    #[error(
        "the {} does not come in every month (February has 28 or 29 days): use `last day of the month`, or 28th or earlier",
        ordinal_text(*.0)
    )]
    NotInEveryMonth(u32),
    #[error("\"every {n} {unit}\": the unit must be min, hours or seconds")]
    EveryUnit { n: u32, unit: String },
    #[error("\"every\" must be followed by an interval (`every 30 min`) or a day (`every friday`)")]
    EveryWhat,
    #[error("only one interval per line: put each on its own line")]
    TwoIntervals,
    #[error(
        "\"every {n} {unit}\" does not divide the {} evenly, so it cannot stay aligned to the clock: use one of {}; the nearest is `every {} {unit}`",
        match *unit { "hours" => "day", "seconds" => "minute", _ => "hour" },
        if *unit == "hours" { "1, 2, 3, 4, 6, 8, 12 hours" } else { "1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30" },
        nearest_aligned(*.n, unit)
    )]
    NotAligned { n: u32, unit: &'static str },
    #[error("a time window takes whole hours, like 9am-6pm")]
    WindowNotWholeHours,
    #[error("the time window starts and ends at the same hour")]
    WindowOfNoHours,
    #[error("an interval cannot also be monthly: use one line for each")]
    IntervalMonthly,
    #[error("an interval cannot also have clock times: use a window, like `every 30 min, 9am-6pm`")]
    IntervalAtTimes,
    #[error("a time window needs an interval, like `every 30 min, 9am-6pm`")]
    WindowWithoutInterval,
    #[error("a monthly schedule names its day once: `first monday of the month`, not also a weekday list")]
    MonthlyWithWeekdays,
    #[error(
        "a monthly schedule names one day: write a line for each, like `1st of the month at 9am` and \
         `15th of the month at 9am`"
    )]
    TwoDaysOfTheMonth,
    #[error("no time, day or interval found")]
    Nothing,
}

/// What to write instead of "twice a week" or "twice a month".
fn which_days_example(unit: &str) -> &'static str {
    if unit == "week" {
        "`mon,thu at 9am`"
    } else {
        "two lines, `1st of the month at 9am` and `15th of the month at 9am`"
    }
}

/// The steps that divide the day (hours) or the hour and minute.
pub(super) fn aligned(unit: &str) -> &'static [u32] {
    if unit == "hours" {
        &[1, 2, 3, 4, 6, 8, 12]
    } else {
        &[1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30]
    }
}

/// The aligned step nearest `n` (the smaller of two as near).
fn nearest_aligned(n: u32, unit: &str) -> u32 {
    aligned(unit)
        .iter()
        .copied()
        .min_by_key(|k| k.abs_diff(n))
        .unwrap_or(1)
}

/// What a bare number could have meant, as forms tabd accepts: `at 9`, `9am`, `9pm`,
/// `every 10 min` (only a step that divides the hour).
fn bare_number_hint(n: u32) -> String {
    let mut forms = Vec::new();
    if n <= 23 {
        forms.push(format!("`at {n}`"));
    }
    if (1..=12).contains(&n) {
        forms.push(format!("`{n}am`"));
        forms.push(format!("`{n}pm`"));
    }
    if aligned("min").contains(&n) {
        forms.push(format!("`every {n} min`"));
    }
    match forms.split_last() {
        None => "a time like `9am` or `17:00`".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}
