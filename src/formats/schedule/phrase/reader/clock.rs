//! Clock times as the reader meets them: bare hours (by `hours`' one rule, said in a note),
//! windows (`9am-6pm`, `between 9 and 5`) and parts of the day (`every evening at 7`).

use super::Reader;
use crate::formats::schedule::phrase::hours::{self, Part};
use crate::formats::schedule::phrase::tokens::Token;
use crate::formats::schedule::phrase::Reason;

/// One end of a window as written: a time (`9am`, `17:00`) or a bare hour (`9`).
#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    Time(u32, u32),
    Bare(u32),
}

pub(super) fn window_end(token: Option<&Token>) -> Option<End> {
    match token {
        Some(Token::Time(h, m)) => Some(End::Time(*h, *m)),
        Some(Token::Num(n)) if *n <= 23 => Some(End::Bare(*n)),
        _ => None,
    }
}

/// `-`, `to`, `until`, `till`: what joins a window's ends.
pub(super) fn is_to(token: Option<&Token>) -> bool {
    matches!(token, Some(Token::Dash))
        || matches!(token, Some(Token::Word(w)) if w == "to" || w == "until" || w == "till")
}

impl Reader {
    /// The part of the day a bare hour is read in: the one the phrase names, if one.
    pub(super) fn part(&self) -> Option<Part> {
        match self.parts.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// A bare hour (`9`), by the one rule (`hours::bare`); a reading the person may not have
    /// meant gets a note.
    pub(super) fn bare_hour(&mut self, n: u32, written: &str) -> Result<u32, Reason> {
        let hour = hours::bare(n, self.part())?;
        if self.part().is_none() && hours::is_ambiguous(n) {
            self.bare_read.push((written.to_string(), n, hour));
        }
        Ok(hour)
    }

    /// One note for the bare hours of a list (`"at 9" read as 09:00 and "5" as 17:00 …`).
    pub(super) fn bare_note(&self) -> Option<String> {
        let read: Vec<String> = self
            .bare_read
            .iter()
            .enumerate()
            .map(|(i, (written, _, hour))| {
                let verb = if i == 0 { "read " } else { "" };
                format!("\"{written}\" {verb}as {hour:02}:00")
            })
            .collect();
        let others: Vec<String> = self
            .bare_read
            .iter()
            .map(|(_, n, hour)| {
                if hour == n {
                    format!("{n}pm")
                } else {
                    format!("{n}am")
                }
            })
            .collect();
        (!read.is_empty()).then(|| {
            format!(
                "{} (a bare 1 to 6 is the afternoon, 7 to 12 the morning and noon); write {} if you meant that",
                read.join(" and "),
                others.join(" or ")
            )
        })
    }

    /// A window whose ends may be bare hours (`between 9 and 5`, `9-5`, `9am-5`), each read by
    /// the rule of a bare hour. A bare reading that runs past midnight (`between 6 and 10`:
    /// 18:00 to 10:00) is refused with the readings the person more likely meant.
    pub(super) fn set_window_of(&mut self, from: End, to: End) -> Result<(), Reason> {
        let read = |end: End| match end {
            End::Time(h, m) => Ok((h, m)),
            End::Bare(n) => hours::bare(n, self.part()).map(|h| (h, 0)),
        };
        let (start, end) = (read(from)?, read(to)?);
        let bare = |e: End| match e {
            End::Bare(n) => Some(n),
            End::Time(..) => None,
        };
        if bare(from).is_some() || bare(to).is_some() {
            let written = |e: End, read: (u32, u32)| bare(e).unwrap_or(read.0);
            let (a, b) = (written(from, start), written(to, end));
            // `between 0 and 6`: a 24-hour hour at one end says the person counts on a 24-hour
            // clock, where the rule reads the bare 6 at the other as 18:00.
            let twenty_four = |e: End| bare(e).is_some_and(|n| n == 0 || n >= 13);
            let afternoon = |e: End| bare(e).is_some_and(|n| (1..=6).contains(&n));
            let why = if start.0 > end.0 && end.0 != 0 {
                Some("past midnight")
            } else if (twenty_four(from) && afternoon(to)) || (twenty_four(to) && afternoon(from)) {
                Some("though the other end is on a 24-hour clock")
            } else {
                None
            };
            if let (Some(why), None) = (why, self.part()) {
                return Err(Reason::BareWindowUnclear {
                    from: a,
                    to: b,
                    read_from: start.0,
                    read_to: end.0,
                    why,
                    choices: hours::window_choices(a, b),
                });
            }
            if self.part().is_none()
                && [from, to]
                    .iter()
                    .any(|e| bare(*e).is_some_and(hours::is_ambiguous))
            {
                self.notes.push(format!(
                    "\"{a}\" to \"{b}\" read as {:02}:00 to {:02}:00 (a bare 1 to 6 is the afternoon, 7 to 12 the \
                     morning and noon); write the hours with am/pm if you meant others",
                    start.0, end.0
                ));
            }
        }
        self.set_window(start, end)
    }

    pub(super) fn set_window(&mut self, start: (u32, u32), end: (u32, u32)) -> Result<(), Reason> {
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

    pub(super) fn window_hours(&self) -> Option<Vec<u32>> {
        let (start, end) = self.window?;
        Some(if start < end {
            (start..end).collect()
        } else {
            (start..24).chain(0..end).collect()
        })
    }

    /// `every evening`, `sunday night`: its time when the phrase writes none (`Part::
    /// default_hour`); otherwise only the half of the clock its times are in.
    pub(super) fn read_part(&mut self, w: &str) {
        let Some(part) = Part::of(w) else { return };
        if self.has_times {
            self.understood.push(format!("in the {}", part.name()));
            return;
        }
        let hour = part.default_hour();
        self.add_time(hour, 0);
        self.understood.push(format!("{} ({hour:02}:00)", part.name()));
    }

    /// The one cron line of an interval (`every 30 min, 9am-6pm weekdays`).
    /// Every written time lies in the part of the day the phrase names (`every evening at
    /// 9am` is refused; a bare hour was read in the part already).
    pub(super) fn times_in_part(&self) -> Result<(), Reason> {
        let Some(part) = self.part() else {
            return Ok(());
        };
        match self.times.iter().find(|(h, _)| !part.holds(*h)) {
            Some((h, m)) => Err(Reason::NotInPart {
                part: part.name(),
                hours: part.hours(),
                example: part.default_hour() % 12,
                written: format!("{h:02}:{m:02}"),
            }),
            None => Ok(()),
        }
    }
}
