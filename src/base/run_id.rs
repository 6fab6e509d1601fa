//! A run's id (also a session's: every door's run, an approved call, an undo). Made in one place
//! (`RunId::new`), and parsed (`RunId::parse`) wherever one comes from outside — a file name, a
//! record, a command line — before it names a path: `.tabd/suspended/<id>.json`,
//! `.tabd/journal/runs/<id>.jsonl`, `tabd undo ID`. An id that passed is one file name, never a
//! path: letters, digits, `-` and `_`, at most `MAX_LEN` bytes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Longest id taken (tabd's own are at most 90: a time, a role name of up to 64, 8 hex digits).
pub const MAX_LEN: usize = 128;

/// A run's id, checked: it can name a file and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// Why a text is not a run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRunId {
    #[error("a run id cannot be empty")]
    Empty,
    #[error("a run id is at most {MAX_LEN} characters; this one has {0}")]
    TooLong(usize),
    #[error("a run id has only letters, digits, `-` and `_`; this one has {0:?}")]
    Character(char),
}

impl RunId {
    /// A new id for a run of `role` started `at`: `<UTC time>-<role>-<8 hex digits>`, one format
    /// for every door. The random part makes two runs of one role started in the same second
    /// differ (one in four billion). A role's name is checked when its file is read; a character
    /// it may not have is written `_` here all the same, so the id is always one file name.
    pub fn new(role: &str, at: DateTime<Utc>) -> RunId {
        let role: String = role
            .chars()
            .take(MAX_LEN - 26)
            .map(|c| if allowed(c) { c } else { '_' })
            .collect();
        RunId(format!(
            "{}-{role}-{:08x}",
            at.format("%Y%m%dT%H%M%SZ"),
            rand::random::<u32>()
        ))
    }

    /// `text` as a run id, or why it cannot be one.
    pub fn parse(text: &str) -> Result<RunId, BadRunId> {
        if text.is_empty() {
            return Err(BadRunId::Empty);
        }
        if text.len() > MAX_LEN {
            return Err(BadRunId::TooLong(text.len()));
        }
        match text.chars().find(|c| !allowed(*c)) {
            Some(c) => Err(BadRunId::Character(c)),
            None => Ok(RunId(text.to_string())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Letters and digits (ASCII: an id is a file name on every system), `-` and `_`.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for RunId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RunId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RunId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for RunId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<RunId> for String {
    fn eq(&self, other: &RunId) -> bool {
        *self == other.0
    }
}

impl TryFrom<String> for RunId {
    type Error = BadRunId;
    fn try_from(text: String) -> Result<RunId, BadRunId> {
        RunId::parse(&text)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl std::str::FromStr for RunId {
    type Err = BadRunId;
    fn from_str(text: &str) -> Result<RunId, BadRunId> {
        RunId::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_one_format_and_differ_within_a_second() {
        let at: DateTime<Utc> = "2026-11-24T09:00:00Z".parse().unwrap();
        let ids: std::collections::BTreeSet<RunId> = (0..1000).map(|_| RunId::new("comms", at)).collect();
        assert_eq!(ids.len(), 1000);
        let one = ids.iter().next().unwrap();
        let re = regex::Regex::new(r"^20261124T090000Z-comms-[0-9a-f]{8}$").unwrap();
        assert!(re.is_match(one), "{one}");
        assert_eq!(RunId::parse(one).as_ref(), Ok(one), "tabd's ids parse");
    }

    /// An id from outside names one file or is refused: no `..`, no `/`, nothing too long.
    #[test]
    fn a_hostile_id_is_refused() {
        for (given, why) in [
            ("../x", BadRunId::Character('.')),
            ("..", BadRunId::Character('.')),
            ("a/b", BadRunId::Character('/')),
            ("/etc/passwd", BadRunId::Character('/')),
            ("x\0", BadRunId::Character('\0')),
            ("é", BadRunId::Character('é')),
            ("", BadRunId::Empty),
        ] {
            assert_eq!(RunId::parse(given), Err(why), "{given:?}");
        }
        let long = "a".repeat(MAX_LEN + 1);
        assert_eq!(RunId::parse(&long), Err(BadRunId::TooLong(MAX_LEN + 1)));
        assert!(RunId::parse(&long[1..]).is_ok(), "{MAX_LEN} is taken");
        assert!(
            serde_json::from_str::<RunId>("\"../x\"").is_err(),
            "nor read from a record"
        );
        assert_eq!(
            serde_json::to_string(&RunId::parse("r-1_b").unwrap()).unwrap(),
            "\"r-1_b\"",
            "written as the plain text"
        );
    }

    #[test]
    fn a_role_name_never_makes_an_id_that_is_not_one_file_name() {
        let at: DateTime<Utc> = "2026-11-24T09:00:00Z".parse().unwrap();
        for role in ["../../x", &"r".repeat(200), "a b/c"] {
            let id = RunId::new(role, at);
            assert_eq!(RunId::parse(&id).as_ref(), Ok(&id), "{role}");
        }
    }
}
