//! How a written hour becomes a clock hour, by one rule wherever it stands: after `at` (`at 9`),
//! in a list of times (`at 9 and 5`) and at either end of a window (`between 9 and 5`, `9-5`).
//! A part of the day (`every evening at 7`) says which half of the clock a bare hour is in.
//! docs/schedules.md, "A bare hour", says the same to the person.

use super::Reason;

/// A part of the day named in a phrase: it gives a time when none is written, and says which
/// half of the clock a bare hour is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Morning,
    Afternoon,
    Evening,
    Night,
}

impl Part {
    /// `morning`, `mornings`, `nightly`, …
    pub(super) fn of(word: &str) -> Option<Self> {
        Some(match word.trim_end_matches('s') {
            "morning" => Self::Morning,
            "afternoon" => Self::Afternoon,
            "evening" => Self::Evening,
            "night" | "nightly" => Self::Night,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Morning => "morning",
            Self::Afternoon => "afternoon",
            Self::Evening => "evening",
            Self::Night => "night",
        }
    }

    /// The hour it runs at when the phrase gives no time (`every evening`: 18:00).
    pub(super) fn default_hour(self) -> u32 {
        match self {
            Self::Morning => 9,
            Self::Afternoon => 13,
            Self::Evening => 18,
            Self::Night => 21,
        }
    }

    /// Its hours, first and last. The night stops at 23:59: after midnight is the next day,
    /// which the phrase would have to name (`every sunday night at 1` is Monday's 01:00).
    pub(super) fn hours(self) -> (u32, u32) {
        match self {
            Self::Morning => (5, 11),
            Self::Afternoon => (12, 17),
            Self::Evening => (17, 21),
            Self::Night => (20, 23),
        }
    }

    pub(super) fn holds(self, hour: u32) -> bool {
        let (first, last) = self.hours();
        (first..=last).contains(&hour)
    }
}

/// A bare hour read by the working-day rule: 1 to 6 is the afternoon (people schedule work,
/// not 4 am), 7 to 12 the morning and noon, 0 and 13 to 23 as written.
pub(super) fn working_day(n: u32) -> u32 {
    if (1..=6).contains(&n) {
        n + 12
    } else {
        n
    }
}

/// The clock hour of the bare hour `n` (0–23): in `part` the one of `n` and `n + 12` (12: noon
/// or midnight) that lies in it, else by the working-day rule.
pub(super) fn bare(n: u32, part: Option<Part>) -> Result<u32, Reason> {
    let Some(part) = part else {
        return Ok(working_day(n));
    };
    let readings: &[u32] = match n {
        12 => &[12, 0],
        1..=11 => &[n, n + 12],
        _ => &[n],
    };
    readings
        .iter()
        .copied()
        .find(|h| part.holds(*h))
        .ok_or(Reason::NotInPart {
            part: part.name(),
            hours: part.hours(),
            example: part.default_hour() % 12,
            written: n.to_string(),
        })
}

/// Whether reading `n` needs the rule, so a note says how it was read: 1 to 12 could be
/// either half of the clock.
pub(super) fn is_ambiguous(n: u32) -> bool {
    (1..=12).contains(&n)
}

/// `9am`, `5pm`, `12pm`, `12am` — an hour as the person would write it with am/pm.
pub(super) fn twelve_hour(h: u32) -> String {
    match h {
        0 => "12am".into(),
        12 => "12pm".into(),
        h if h < 12 => format!("{h}am"),
        h => format!("{}pm", h - 12),
    }
}

/// The readings of a bare window end the person may have meant: `n` as am and as pm, or as
/// written when it is a 24-hour hour.
fn either_half(n: u32) -> Vec<u32> {
    match n {
        12 => vec![0, 12],
        1..=11 => vec![n, n + 12],
        _ => vec![n],
    }
}

/// What to write for a window of bare ends that, read by the rule, wraps past midnight
/// (`between 6 and 10`: 18:00 to 10:00): the readings that stay within a day first, as
/// windowed intervals (a window alone is refused), at most two.
pub(super) fn window_choices(from: u32, to: u32) -> Vec<String> {
    let mut readings: Vec<(u32, u32)> = Vec::new();
    for a in either_half(from) {
        for b in either_half(to) {
            if a != b && (a, b) != (working_day(from), working_day(to)) {
                readings.push((a, b));
            }
        }
    }
    // Within a day before past midnight; both ends in one half of the clock (`6am-10am`)
    // before one in each (`6am-10pm`).
    readings.sort_by_key(|(a, b)| (a > b && *b != 0, (*a < 12) != (*b < 12)));
    readings
        .into_iter()
        .take(2)
        .map(|(a, b)| format!("every hour, {}-{}", twelve_hour(a), twelve_hour(b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_of_the_day_picks_the_half_of_the_clock() {
        assert_eq!(bare(8, Some(Part::Morning)), Ok(8));
        assert_eq!(bare(7, Some(Part::Evening)), Ok(19));
        assert_eq!(bare(5, Some(Part::Afternoon)), Ok(17));
        assert_eq!(bare(12, Some(Part::Afternoon)), Ok(12));
        assert_eq!(bare(11, Some(Part::Night)), Ok(23));
        assert_eq!(bare(19, Some(Part::Evening)), Ok(19));
        assert!(bare(12, Some(Part::Night)).is_err());
        assert!(bare(3, Some(Part::Morning)).is_err());
        // Without a part, the working-day rule.
        assert_eq!(bare(5, None), Ok(17));
        assert_eq!(bare(9, None), Ok(9));
        assert_eq!(bare(0, None), Ok(0));
    }

    #[test]
    fn a_wrapping_bare_window_offers_the_readings_within_a_day() {
        assert_eq!(
            window_choices(6, 10),
            ["every hour, 6am-10am", "every hour, 6pm-10pm"]
        );
        assert_eq!(window_choices(22, 2), ["every hour, 10pm-2am"]);
    }
}
