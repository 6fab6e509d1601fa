//! The corpus: every form in docs/schedules.md's table, and phrases generated from days, dates,
//! times, intervals and windows, each generated one with what it was written to mean (the times
//! of day it fires on a date), computed from the parts it was made of.

use chrono::{Datelike, NaiveDate};

/// What a generated phrase was written to mean: its times of day (seconds) on a date.
pub type Intended = Box<dyn Fn(NaiveDate) -> Vec<u32> + Send + Sync>;

pub struct Case {
    pub phrase: String,
    pub intended: Option<Intended>,
}

const H: u32 = 3600;

fn case(phrase: String, intended: impl Fn(NaiveDate) -> Vec<u32> + Send + Sync + 'static) -> Case {
    Case {
        phrase,
        intended: Some(Box::new(move |d| {
            let mut t = intended(d);
            t.sort_unstable();
            t.dedup();
            t
        })),
    }
}

/// Every form in the "What you can write" table of docs/schedules.md (the backquoted ones).
pub fn documented() -> Vec<Case> {
    let doc = include_str!("../../../../docs/schedules.md");
    let table = doc
        .split("## What you can write")
        .nth(1)
        .and_then(|rest| rest.split("What stays refused").next())
        .unwrap_or_else(|| panic!("docs/schedules.md has no table of forms"));
    table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" | ").next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string))
        .map(|phrase| Case {
            phrase,
            intended: None,
        })
        .collect()
}

fn weekday(d: NaiveDate) -> u32 {
    d.weekday().num_days_from_sunday()
}

/// Days written as people write them, with the weekdays (0 = sunday) they name.
const DAYS: &[(&str, &[u32])] = &[
    ("daily", &[0, 1, 2, 3, 4, 5, 6]),
    ("every day", &[0, 1, 2, 3, 4, 5, 6]),
    ("weekdays", &[1, 2, 3, 4, 5]),
    ("every weekday", &[1, 2, 3, 4, 5]),
    ("weekends", &[0, 6]),
    ("mondays", &[1]),
    ("every friday", &[5]),
    ("tue,thu", &[2, 4]),
    ("mon-fri", &[1, 2, 3, 4, 5]),
    ("fri-mon", &[5, 6, 0, 1]),
    ("sat and sun", &[0, 6]),
    ("mon, wed and fri", &[1, 3, 5]),
];

/// Times written as people write them, with the times of day (seconds) they name.
const TIMES: &[(&str, &[u32])] = &[
    ("at 9am", &[9 * H]),
    ("at 2:30am", &[2 * H + 1800]),
    ("2:30am and 2:30pm", &[2 * H + 1800, 14 * H + 1800]),
    ("at noon", &[12 * H]),
    ("at midnight", &[0]),
    ("9am and 5pm", &[9 * H, 17 * H]),
    ("at 8:15pm", &[20 * H + 900]),
    ("at 9", &[9 * H]),
    ("at 4", &[16 * H]),
    ("at 3am", &[3 * H]),
    ("at 1:30am", &[H + 1800]),
    ("9:30am and 5pm", &[9 * H + 1800, 17 * H]),
    ("twice a day", &[9 * H, 17 * H]),
    ("at 2am, 2:45am and 11pm", &[2 * H, 2 * H + 2700, 23 * H]),
];

/// Days × times in three orders, and times alone (every day).
pub fn days_and_times() -> Vec<Case> {
    let mut out = Vec::new();
    for (times, secs) in TIMES {
        out.push(case(times.to_string(), move |_| secs.to_vec()));
        for (days, named) in DAYS {
            let on = move |d: NaiveDate| {
                if named.contains(&weekday(d)) {
                    secs.to_vec()
                } else {
                    Vec::new()
                }
            };
            out.push(case(format!("{days} {times}"), on));
            out.push(case(format!("{times}, {days}"), on));
            out.push(case(format!("{times} on {days}"), on));
        }
    }
    for (days, named) in DAYS {
        // A day without a time means 09:00.
        out.push(case(days.to_string(), move |d| {
            if named.contains(&weekday(d)) {
                vec![9 * H]
            } else {
                Vec::new()
            }
        }));
    }
    out
}

/// Days of the month, nth weekdays and the last day, at a few times.
pub fn monthly() -> Vec<Case> {
    let mut out = Vec::new();
    let times: &[(&str, u32)] = &[("", 9 * H), (" at 2:30am", 2 * H + 1800), (" at 6pm", 18 * H)];
    for n in 1..=28u32 {
        let (text, secs) = times[n as usize % times.len()];
        let nth = crate::formats::schedule::words::ordinal_text(n);
        let on = move |d: NaiveDate| if d.day() == n { vec![secs] } else { Vec::new() };
        out.push(case(format!("{nth} of the month{text}"), on));
        out.push(case(format!("on the {nth} of every month{text}"), on));
    }
    let which = ["first", "second", "third", "fourth", "fifth", "last"];
    let names = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    for (i, w) in which.iter().enumerate() {
        for (wd, day) in names.iter().enumerate() {
            let (text, secs) = times[(i + wd) % times.len()];
            let last = *w == "last";
            out.push(case(format!("{w} {day} of the month{text}"), move |d| {
                let nth_ok = if last {
                    d.day() + 7 > days_in_month(d)
                } else {
                    (d.day() - 1) / 7 == i as u32
                };
                if weekday(d) == wd as u32 && nth_ok {
                    vec![secs]
                } else {
                    Vec::new()
                }
            }));
        }
    }
    for (text, secs) in times {
        let secs = *secs;
        out.push(case(format!("last day of the month{text}"), move |d| {
            if d.day() == days_in_month(d) {
                vec![secs]
            } else {
                Vec::new()
            }
        }));
        out.push(case(format!("monthly{text}"), move |d| {
            if d.day() == 1 {
                vec![secs]
            } else {
                Vec::new()
            }
        }));
    }
    out
}

fn days_in_month(d: NaiveDate) -> u32 {
    (28..=31).rev().find(|n| d.with_day(*n).is_some()).unwrap_or(28)
}

/// Minute, hour and second intervals, in windows and on days.
pub fn intervals() -> Vec<Case> {
    let mut out = Vec::new();
    let windows: &[(&str, &[u32])] = &[
        ("", &[]),
        (", 9am-6pm", &[9, 10, 11, 12, 13, 14, 15, 16, 17]),
        (", 10pm-2am", &[22, 23, 0, 1]),
        (" between 1am and 4am", &[1, 2, 3]),
    ];
    let days: &[(&str, &[u32])] = &[
        ("", &[0, 1, 2, 3, 4, 5, 6]),
        (" weekdays", &[1, 2, 3, 4, 5]),
        (" on weekends", &[0, 6]),
    ];
    for n in [1u32, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30] {
        for (wtext, hours) in windows {
            for (dtext, named) in days {
                let phrase = format!("every {n} min{wtext}{dtext}");
                out.push(case(phrase, move |d| {
                    if !named.contains(&weekday(d)) {
                        return Vec::new();
                    }
                    let hours: Vec<u32> = if hours.is_empty() {
                        (0..24).collect()
                    } else {
                        hours.to_vec()
                    };
                    hours
                        .iter()
                        .flat_map(|h| (0..60).step_by(n as usize).map(move |m| h * H + m * 60))
                        .collect()
                }));
            }
        }
    }
    for n in [1u32, 2, 3, 4, 6, 8, 12] {
        for (wtext, hours) in windows {
            out.push(case(format!("every {n} hours{wtext}"), move |_| {
                let hours: Vec<u32> = if hours.is_empty() {
                    (0..24).collect()
                } else {
                    hours.to_vec()
                };
                hours.iter().step_by(n as usize).map(|h| h * H).collect()
            }));
        }
    }
    for n in [10u32, 15, 30] {
        out.push(case(format!("every {n} seconds"), move |_| {
            (0..86_400).step_by(n as usize).collect()
        }));
    }
    out
}

/// Pairs of days and times, zones, and cron as people write it.
pub fn others() -> Vec<Case> {
    let mut out: Vec<Case> = [
        "friday at 4pm and monday at 9am",
        "9am weekdays, 11am weekends",
        "weekdays at 9am and saturdays at noon",
        "mon at 9am, tue at 10am and 2pm",
        "every day at 8am and weekends at 11am",
        "weekdays at 2:30am in America/New_York",
        "every friday at 4pm UTC",
        "every 30 min in Asia/Tokyo",
        "at 1:30am in Europe/Lisbon",
        "0 9 1,15 * *",
        "0 9 1 * 1",
        "0 12 * 6-8 1-5",
        "30 2,14 * * *",
        "0-59 0-23 * * *",
        "5 * * * *",
        "0 30 1 * * *",
        "*/20 1,2,5 * * *",
        "0 0 L 2 *",
        "@hourly",
        "@daily",
        "@weekly",
        "@monthly",
        "@yearly",
    ]
    .iter()
    .map(|p| Case {
        phrase: p.to_string(),
        intended: None,
    })
    .collect();
    out.push(case("2x/day".into(), |_| vec![9 * H, 17 * H]));
    out.push(case("three times a day".into(), |_| vec![9 * H, 13 * H, 17 * H]));
    out
}

/// What a phrase of the walk should give: its crons, or a refusal holding these words.
pub enum Expect {
    Crons(&'static [&'static str]),
    Refused(&'static str),
}

/// A new user's walk (issue 48, items 5 and 6): phrases that were refused or misread, with
/// the crons they mean now or the advice their refusal gives.
pub const WALK: &[(&str, Expect)] = &[
    // A bare hour reads the same in a list and in a window as after `at`.
    ("at 9 and 5", Expect::Crons(&["0 9,17 * * *"])),
    ("at 9 and at 5", Expect::Crons(&["0 9,17 * * *"])),
    ("weekdays at 9 and 5", Expect::Crons(&["0 9,17 * * 1-5"])),
    ("at 9, 1 and 5", Expect::Crons(&["0 9,13,17 * * *"])),
    ("at 9:30 and 5", Expect::Crons(&["0 17 * * *", "30 9 * * *"])),
    (
        "every 2 hours between 9 and 5",
        Expect::Crons(&["0 9,11,13,15 * * *"]),
    ),
    ("every hour, 9-5", Expect::Crons(&["0 9-16 * * *"])),
    ("weekdays 9-5 every hour", Expect::Crons(&["0 9-16 * * 1-5"])),
    (
        "every 30 min from 9 to 5 on weekdays",
        Expect::Crons(&["*/30 9-16 * * 1-5"]),
    ),
    (
        "every 30 min between 8am and 6",
        Expect::Crons(&["*/30 8-17 * * *"]),
    ),
    (
        "every hour between 6 and 10",
        Expect::Refused("`every hour, 6am-10am`"),
    ),
    (
        "every hour between 22 and 2",
        Expect::Refused("`every hour, 10pm-2am`"),
    ),
    (
        "between 9 and 5",
        Expect::Refused("a time window needs an interval"),
    ),
    (
        "every hour between 0 and 6",
        Expect::Refused("`every hour, 12am-6am`"),
    ),
    ("every hour between 13 and 17", Expect::Crons(&["0 13-16 * * *"])),
    // Parts of the day, noon and midnight.
    ("every morning at 8", Expect::Crons(&["0 8 * * *"])),
    ("every morning", Expect::Crons(&["0 9 * * *"])),
    ("every afternoon", Expect::Crons(&["0 13 * * *"])),
    ("every evening", Expect::Crons(&["0 18 * * *"])),
    ("every evening at 7", Expect::Crons(&["0 19 * * *"])),
    (
        "every evening at 7:30",
        Expect::Refused("\"07:30\" is not in the evening"),
    ),
    ("every sunday night", Expect::Crons(&["0 21 * * 0"])),
    ("sunday night at 11", Expect::Crons(&["0 23 * * 0"])),
    ("nightly", Expect::Crons(&["0 21 * * *"])),
    ("weekday mornings at 7:30", Expect::Crons(&["30 7 * * 1-5"])),
    ("every morning and evening", Expect::Crons(&["0 9,18 * * *"])),
    (
        "weekday mornings and weekend evenings",
        Expect::Crons(&["0 9 * * 1-5", "0 18 * * 0,6"]),
    ),
    ("at 8 in the morning", Expect::Crons(&["0 8 * * *"])),
    ("at 6 in the evening", Expect::Crons(&["0 18 * * *"])),
    ("at noon", Expect::Crons(&["0 12 * * *"])),
    ("noon on weekdays", Expect::Crons(&["0 12 * * 1-5"])),
    ("at midnight", Expect::Crons(&["0 0 * * *"])),
    ("midnight", Expect::Crons(&["0 0 * * *"])),
    ("every night at 12", Expect::Refused("\"12\" is not in the night")),
    (
        "every sunday night at midnight",
        Expect::Refused("\"00:00\" is not in the night"),
    ),
    (
        "every morning at 3pm",
        Expect::Refused("\"15:00\" is not in the morning"),
    ),
    (
        "every morning at 8 and evening at 6",
        Expect::Refused("write a line for each"),
    ),
    (
        "every 30 min in the morning",
        Expect::Refused("`every 30 min, 6am-12pm`"),
    ),
    // Business days and `except`.
    ("first business day of the month", Expect::Crons(&["0 9 1W * *"])),
    (
        "first weekday of the month at 8am",
        Expect::Crons(&["0 8 1W * *"]),
    ),
    (
        "last business day of the month at 5pm",
        Expect::Crons(&["0 17 LW * *"]),
    ),
    ("every business day at 9", Expect::Crons(&["0 9 * * 1-5"])),
    ("working days at 10am", Expect::Crons(&["0 10 * * 1-5"])),
    ("second business day of the month", Expect::Refused("not the 2nd")),
    ("every day except sunday at 9", Expect::Crons(&["0 9 * * 1-6"])),
    (
        "every day except saturday and sunday at 9am",
        Expect::Crons(&["0 9 * * 1-5"]),
    ),
    ("weekdays except friday at 10am", Expect::Crons(&["0 10 * * 1-4"])),
    ("except weekends", Expect::Crons(&["0 9 * * 1-5"])),
    ("every day at 9 except sundays", Expect::Crons(&["0 9 * * 1-6"])),
    ("except sunday, daily at 9", Expect::Crons(&["0 9 * * 1-6"])),
    (
        "sunday at 9 and every day at 5 except sunday",
        Expect::Refused("leaves no day"),
    ),
    (
        "every day except holidays",
        Expect::Refused("\"except\" takes days"),
    ),
    (
        "weekends except saturday and sunday",
        Expect::Refused("leaves no day"),
    ),
    // Every other week, every N weeks: the fortnight advice.
    (
        "every other Monday",
        Expect::Refused("`first monday of the month` and `third monday of the month`"),
    ),
    ("every other monday at 9am", Expect::Refused("`mondays at 9am`")),
    (
        "every second friday",
        Expect::Refused("`first friday of the month` and `third friday of the month`"),
    ),
    ("every 2 weeks", Expect::Refused("`mondays at 9am`")),
    ("every 2 weeks on friday", Expect::Refused("`fridays at 9am`")),
    (
        "every 3 weeks",
        Expect::Refused("every other week (or every N weeks)"),
    ),
    (
        "every other week",
        Expect::Refused("`1st of the month at 9am` and `15th of the month at 9am`"),
    ),
    (
        "biweekly on thursday",
        Expect::Refused("`first thursday of the month`"),
    ),
    ("every other month", Expect::Refused("`0 9 1 1,3,5,7,9,11 *`")),
    ("every 2 months", Expect::Refused("`0 9 1 1,3,5,7,9,11 *`")),
    ("every other hour", Expect::Refused("`every 2 hours`")),
    ("every 1 week", Expect::Crons(&["0 9 * * 1"])),
    ("every 1 month", Expect::Crons(&["0 9 1 * *"])),
    (
        "every second tuesday of the month",
        Expect::Crons(&["0 9 * * 2#2"]),
    ),
    // Item 5: the schedule says every minute; min_interval is the role's, said by validate.
    ("every 1 min", Expect::Crons(&["* * * * *"])),
    ("every minute", Expect::Crons(&["* * * * *"])),
];

/// The walk's accepted phrases, for the words-read-back check.
pub fn walk() -> Vec<Case> {
    WALK.iter()
        .filter(|(_, e)| matches!(e, Expect::Crons(_)))
        .map(|(p, _)| Case {
            phrase: p.to_string(),
            intended: None,
        })
        .collect()
}
