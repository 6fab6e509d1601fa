use super::*;
use chrono::TimeZone;
use proptest::prelude::*;

fn sched(lines: &[&str], tz: &str) -> Schedule {
    let lines = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| ScheduleLine::compile(l, i + 1).unwrap())
        .collect();
    Schedule {
        lines,
        tz: parse_tz(tz).unwrap(),
    }
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn local(times: &[DateTime<Utc>], tz: &str) -> Vec<String> {
    let tz = parse_tz(tz).unwrap();
    times
        .iter()
        .map(|t| t.with_timezone(&tz).format("%a %F %H:%M %Z").to_string())
        .collect()
}

#[test]
fn weekday_twice_daily_in_new_york() {
    let s = sched(&["9am and 5pm, weekdays"], "America/New_York");
    let next = s.next_n(utc("2026-03-06T12:00:00-05:00"), 5);
    assert_eq!(
        local(&next, "America/New_York"),
        [
            "Fri 2026-03-06 17:00 EST",
            "Mon 2026-03-09 09:00 EDT",
            "Mon 2026-03-09 17:00 EDT",
            "Tue 2026-03-10 09:00 EDT",
            "Tue 2026-03-10 17:00 EDT"
        ]
    );
    // After the change the UTC offset moves with the wall clock: 09:00 EDT is 13:00 UTC.
    assert_eq!(next[1], utc("2026-03-09T13:00:00Z"));
}

#[test]
fn spring_forward_gap_fires_once_at_first_valid_time() {
    for (tz, day) in [
        ("America/New_York", "2026-03-08"),
        ("Europe/Berlin", "2026-03-29"),
    ] {
        let s = sched(&["daily at 2:30"], tz);
        let start = utc(&format!("{day}T00:00:00Z")) - chrono::Duration::hours(2);
        let next = s.next_n(start, 2);
        let shown = local(&next, tz);
        // docs/schedules.md: "runs once, at 03:00" (issue 37: `|| contains("03:30")` let an
        // hour's shift pass).
        assert!(shown[0].contains("03:00"), "{tz}: {shown:?}");
        assert!(shown[0].contains(day), "{tz}: {shown:?}");
        assert!(shown[1].contains("02:30"), "next day is normal again: {shown:?}");
        assert_ne!(&shown[1][4..14], day, "fires once on the gap day");
    }
}

#[test]
fn fall_back_overlap_fires_once() {
    for (tz, day) in [
        ("America/New_York", "2026-11-01"),
        ("Europe/Lisbon", "2026-10-25"),
    ] {
        let s = sched(&["daily at 1:30"], tz);
        let start = utc(&format!("{day}T00:00:00Z")) - chrono::Duration::hours(6);
        let next = s.next_n(start, 3);
        let shown = local(&next, tz);
        let on_day = shown.iter().filter(|s| s.contains(day)).count();
        assert_eq!(on_day, 1, "{tz}: {shown:?}");
    }
}

#[test]
fn interval_in_overlap_runs_in_both_passes() {
    // `every 30 min` is an interval job: in the repeated hour it fires on both passes, so no
    // half hour of real time goes unattended.
    let s = sched(&["every 30 min"], "America/New_York");
    let fires = s.fires_between(utc("2026-11-01T04:59:00Z"), utc("2026-11-01T07:01:00Z"), 20);
    let gaps: Vec<i64> = fires.windows(2).map(|w| (w[1] - w[0]).num_minutes()).collect();
    assert!(gaps.iter().all(|g| *g == 30), "{gaps:?}");
    assert_eq!(fires.len(), 5);
}

#[test]
fn several_lines_merge_in_order() {
    let s = sched(&["mondays at 10am", "every friday at 4pm"], "UTC");
    let next = s.next_n(utc("2026-01-01T00:00:00Z"), 4);
    assert_eq!(
        local(&next, "UTC"),
        [
            "Fri 2026-01-02 16:00 UTC",
            "Mon 2026-01-05 10:00 UTC",
            "Fri 2026-01-09 16:00 UTC",
            "Mon 2026-01-12 10:00 UTC"
        ]
    );
}

#[test]
fn windowed_interval_stays_in_window() {
    let s = sched(&["every 30 min, 9am-6pm weekdays"], "Europe/Lisbon");
    let tz = parse_tz("Europe/Lisbon").unwrap();
    for t in s.next_n(utc("2026-06-05T16:00:00Z"), 40) {
        let l = t.with_timezone(&tz);
        use chrono::{Datelike, Timelike};
        assert!((9..18).contains(&l.hour()), "{l}");
        assert!(l.weekday().number_from_monday() <= 5, "{l}");
    }
}

#[test]
fn seconds_schedules_for_tests() {
    let s = sched(&["*/2 * * * * *"], "UTC");
    let next = s.next_n(utc("2026-01-01T00:00:01Z"), 3);
    assert_eq!(next[0], utc("2026-01-01T00:00:02Z"));
    assert_eq!(next[2], utc("2026-01-01T00:00:06Z"));
}

#[test]
fn bad_time_zone_names_are_explained() {
    let err = parse_tz("Europe/Lisboa").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"Europe/Lisboa\" is not an IANA time zone name; write one like Europe/Lisbon or America/New_York"
    );
    assert!(parse_tz("Asia/Kolkata").is_ok());
}

#[test]
fn fires_between_caps_and_orders() {
    let s = sched(&["hourly"], "UTC");
    let fires = s.fires_between(utc("2026-01-01T00:00:00Z"), utc("2026-01-02T00:00:00Z"), 10);
    assert_eq!(fires.len(), 10);
    assert!(fires.windows(2).all(|w| w[0] < w[1]));
}

const PHRASES: &[&str] = &[
    "0 9,17 * * 1-5",
    "9am and 5pm, weekdays",
    "every 30 min",
    "every 2 hours",
    "hourly",
    "every 30 min, 9am-6pm weekdays",
    "daily at 8:30",
    "every day at 20:15",
    "at noon",
    "mondays at 10am",
    "every friday at 4pm",
    "weekly on monday",
    "weekends at 11am",
    "tue,thu at 14:00",
    "2x/day",
    "daily at 2:30",
    "daily at 1:30",
    "at 9 and 5",
    "every 2 hours between 9 and 5",
    "every sunday night",
    "first business day of the month",
    "every day except sunday at 9",
];
const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Lisbon",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Sao_Paulo",
];

proptest! {
    #[test]
    fn next_fires_strictly_increase_and_match_the_cron(
        p in 0..PHRASES.len(),
        z in 0..ZONES.len(),
        start in 1_700_000_000i64..1_900_000_000i64,
    ) {
        let s = sched(&[PHRASES[p]], ZONES[z]);
        let after = Utc.timestamp_opt(start, 0).single().unwrap();
        let fires = s.next_n(after, 6);
        prop_assert_eq!(fires.len(), 6);
        prop_assert!(fires[0] > after);
        for w in fires.windows(2) {
            prop_assert!(w[0] < w[1], "{:?}", fires);
        }
        let tz = s.tz;
        let line = &s.lines[0];
        for f in &fires {
            let local = f.with_timezone(&tz);
            let matches = line.crons.iter().any(|(_, c)| c.is_time_matching(&local).unwrap_or(false));
            // A fire moved out of a spring-forward gap is the one allowed mismatch.
            let in_gap_shift = line.kind == ScheduleKind::ClockTime && !matches;
            if in_gap_shift {
                let an_hour_before = (*f - chrono::Duration::hours(1)).with_timezone(&tz);
                let offset_changed = an_hour_before.format("%z").to_string() != local.format("%z").to_string();
                prop_assert!(offset_changed, "{} does not match {:?} and is not after a DST gap", local, line.source);
            }
        }
    }
}

#[test]
fn shortest_gap_tells_frequent_schedules_from_daily_ones() {
    let t: chrono::DateTime<chrono::Utc> = "2026-11-23T08:00:00Z".parse().unwrap();
    let sched = |s: &str| Schedule {
        lines: vec![ScheduleLine::compile(s, 1).unwrap().unwrap()],
        tz: chrono_tz::UTC,
    };
    assert_eq!(
        sched("every 30 min, 9am-6pm weekdays").shortest_gap(t),
        Some(chrono::Duration::minutes(30))
    );
    assert_eq!(
        sched("9am and 5pm, weekdays").shortest_gap(t),
        Some(chrono::Duration::hours(8))
    );
}

#[test]
fn a_zone_in_the_phrase_wins_over_the_roles() {
    let s = sched(&["every friday at 4pm UTC", "mondays at 9am"], "Europe/Lisbon");
    // Summer: Lisbon is UTC+1, so 16:00 UTC is 17:00 there; Monday stays 09:00 Lisbon time.
    let next = s.next_n(utc("2026-07-01T00:00:00Z"), 2);
    assert_eq!(
        local(&next, "Europe/Lisbon"),
        ["Fri 2026-07-03 17:00 WEST", "Mon 2026-07-06 09:00 WEST"]
    );
}

/// A line of several clock times keeps each time's DST rules (docs/schedules.md: a 02:30 run
/// on the spring-forward night runs once at 03:00, on the fall-back night once). croner treats a
/// cron of one time as fixed and one of several as an interval, so `30 2,14 * * *` skipped the
/// 02:30 on the spring night and ran it twice on the autumn one; each time is its own cron now.
#[test]
fn several_clock_times_in_one_cron_keep_the_dst_rules_of_one() {
    for line in ["2:30am and 2:30pm", "30 2,14 * * *"] {
        let s = sched(&[line], "Europe/Berlin");
        let spring = local(&s.next_n(utc("2026-03-28T12:00:00Z"), 3), "Europe/Berlin");
        assert_eq!(
            spring,
            [
                "Sat 2026-03-28 14:30 CET",
                "Sun 2026-03-29 03:00 CEST",
                "Sun 2026-03-29 14:30 CEST"
            ],
            "{line}"
        );
        let autumn = local(&s.next_n(utc("2026-10-24T12:00:00Z"), 3), "Europe/Berlin");
        assert_eq!(
            autumn,
            [
                "Sat 2026-10-24 14:30 CEST",
                "Sun 2026-10-25 02:30 CEST",
                "Sun 2026-10-25 14:30 CET"
            ],
            "{line}"
        );
        assert_eq!(s.cron_exprs().len(), 1, "the line still shows one cron: {line}");
    }
}
