//! How close together a schedule's fires come, against a role's `min_interval` (issue 48,
//! item 5): `every 1 min` under the default 2m runs every other minute at best, and `tabd
//! validate` and `tabd schedule` say so instead of promising every minute.
//!
//! Measured over a fixed week (from the first fire after 2026-01-01, in the role's zone), so
//! the answer does not depend on today and `validate` says the same thing every day.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{Schedule, ScheduleLine};

/// How many fires of one line are looked at: every 10 seconds for a week is 60,480; the first
/// 2,000 show its pace as well.
const FIRES: usize = 2_000;

/// Fires closer together than `min_interval`: one line's own (`first == second`), or one
/// line's fire close after another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crowded {
    /// Index in `Schedule::lines` of the line whose fire comes first.
    pub first: usize,
    /// Index of the line whose fire comes too soon after it.
    pub second: usize,
    /// The shortest gap found between them.
    pub gap: Duration,
}

/// `a minute`, `2 minutes`, `90 seconds`, `an hour`: a gap or a min_interval, in words.
pub fn duration_words(d: Duration) -> String {
    let secs = d.as_secs();
    let (n, unit) = if secs >= 3600 && secs.is_multiple_of(3600) {
        (secs / 3600, "hour")
    } else if secs >= 60 && secs.is_multiple_of(60) {
        (secs / 60, "minute")
    } else {
        (secs, "second")
    };
    match (n, unit) {
        (1, "hour") => "an hour".into(),
        (1, unit) => format!("a {unit}"),
        (n, unit) => format!("{n} {unit}s"),
    }
}

/// The slowest clock-aligned interval (`every 2 min`, `every 5 min`, `every hour`) at least
/// `min` apart, to suggest in place of a faster one; `None` past a day's steps.
pub fn interval_at_least(min: Duration) -> Option<&'static str> {
    const STEPS: &[(u64, &str)] = &[
        (60, "every minute"),
        (120, "every 2 min"),
        (180, "every 3 min"),
        (240, "every 4 min"),
        (300, "every 5 min"),
        (360, "every 6 min"),
        (600, "every 10 min"),
        (720, "every 12 min"),
        (900, "every 15 min"),
        (1200, "every 20 min"),
        (1800, "every 30 min"),
        (3600, "every hour"),
        (7200, "every 2 hours"),
        (10800, "every 3 hours"),
        (14400, "every 4 hours"),
        (21600, "every 6 hours"),
        (28800, "every 8 hours"),
        (43200, "every 12 hours"),
    ];
    STEPS
        .iter()
        .find(|(secs, _)| *secs >= min.as_secs())
        .map(|(_, words)| *words)
}

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|_| Utc::now())
}

impl ScheduleLine {
    /// The shortest gap between two of this line's fires over a week from its first one after
    /// a fixed date (`None`: it fires at most once in that week).
    pub fn shortest_gap(&self, tz: Tz) -> Option<Duration> {
        let first = self.next_after(start(), tz)?;
        let fires = self.fires_in(first - chrono::Duration::seconds(1), tz);
        shortest(&fires)
    }

    /// This line's fires after `after`, for a week, at most `FIRES`.
    fn fires_in(&self, after: DateTime<Utc>, tz: Tz) -> Vec<DateTime<Utc>> {
        let until = after + chrono::Duration::days(7);
        let mut out = Vec::new();
        let mut t = after;
        while let Some(next) = self.next_after(t, tz) {
            if next > until || out.len() >= FIRES {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }
}

fn shortest(fires: &[DateTime<Utc>]) -> Option<Duration> {
    fires.windows(2).filter_map(|w| (w[1] - w[0]).to_std().ok()).min()
}

impl Schedule {
    /// Where fires come closer together than `min`: each line that is too fast alone, then
    /// each pair of lines whose fires come too close (`at 9am` and `at 9:01am`), the closest
    /// first. Empty when `min` holds nothing back.
    pub fn crowded(&self, min: Duration) -> Vec<Crowded> {
        let mut out: Vec<Crowded> = self
            .lines
            .iter()
            .enumerate()
            .filter_map(|(i, line)| {
                let gap = line.shortest_gap(self.tz).filter(|g| *g < min)?;
                Some(Crowded {
                    first: i,
                    second: i,
                    gap,
                })
            })
            .collect();
        let Some(from) = self.next_after(start()) else {
            return out;
        };
        let mut tagged: Vec<(DateTime<Utc>, usize)> = self
            .lines
            .iter()
            .enumerate()
            .flat_map(|(i, line)| {
                line.fires_in(from - chrono::Duration::seconds(1), self.tz)
                    .into_iter()
                    .map(move |t| (t, i))
            })
            .collect();
        tagged.sort();
        let alone: Vec<usize> = out.iter().map(|c| c.first).collect();
        for w in tagged.windows(2) {
            let ((t0, a), (t1, b)) = (w[0], w[1]);
            let Ok(gap) = (t1 - t0).to_std() else { continue };
            // Two lines at one instant are one occurrence, one run; a line too fast alone is
            // said already.
            if a == b || gap.is_zero() || gap >= min || alone.contains(&a) || alone.contains(&b) {
                continue;
            }
            match out.iter_mut().find(|c| (c.first, c.second) == (a, b)) {
                Some(c) => c.gap = c.gap.min(gap),
                None => out.push(Crowded {
                    first: a,
                    second: b,
                    gap,
                }),
            }
        }
        out.sort_by_key(|c| c.gap);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(lines: &[&str]) -> Schedule {
        Schedule {
            lines: lines
                .iter()
                .enumerate()
                .filter_map(|(i, l)| ScheduleLine::compile(l, i + 3).ok().flatten())
                .collect(),
            tz: chrono_tz::Europe::Lisbon,
        }
    }

    const TWO_MIN: Duration = Duration::from_secs(120);

    #[test]
    fn a_line_faster_than_min_interval_is_found_with_its_gap() {
        let s = schedule(&["every 1 min", "9am and 5pm, weekdays"]);
        assert_eq!(
            s.crowded(TWO_MIN),
            [Crowded {
                first: 0,
                second: 0,
                gap: Duration::from_secs(60)
            }]
        );
        assert!(schedule(&["every 2 min"]).crowded(TWO_MIN).is_empty());
        assert!(schedule(&["every 1 min"]).crowded(Duration::ZERO).is_empty());
        assert!(schedule(&["every 30 min, 9am-6pm weekdays"])
            .crowded(TWO_MIN)
            .is_empty());
    }

    #[test]
    fn two_lines_whose_fires_come_close_are_found() {
        let s = schedule(&["weekdays at 9am", "weekdays at 9:01am"]);
        assert_eq!(
            s.crowded(TWO_MIN),
            [Crowded {
                first: 0,
                second: 1,
                gap: Duration::from_secs(60)
            }]
        );
    }

    #[test]
    fn words_for_a_pace() {
        assert_eq!(duration_words(Duration::from_secs(60)), "a minute");
        assert_eq!(duration_words(Duration::from_secs(120)), "2 minutes");
        assert_eq!(duration_words(Duration::from_secs(90)), "90 seconds");
        assert_eq!(duration_words(Duration::from_secs(3600)), "an hour");
        assert_eq!(interval_at_least(TWO_MIN), Some("every 2 min"));
        assert_eq!(interval_at_least(Duration::from_secs(90)), Some("every 2 min"));
        assert_eq!(interval_at_least(Duration::from_secs(420)), Some("every 10 min"));
        // Each is a phrase tabd reads.
        for secs in [1, 60, 61, 3600, 43_200] {
            let words = interval_at_least(Duration::from_secs(secs)).unwrap();
            assert!(ScheduleLine::compile(words, 1).is_ok(), "{words}");
        }
    }

    #[test]
    fn a_line_firing_only_in_summer_is_measured_from_its_first_fire() {
        let s = schedule(&["* * * 6-8 *"]);
        assert_eq!(s.crowded(TWO_MIN)[0].gap, Duration::from_secs(60));
    }
}
