//! Reading a run's journal back, and whether it can be trusted (issue 36, finding 9): every line
//! signed by this machine's key, numbered from 0 without a gap — the MAC covers the run, the
//! line's number and the line — and ending with the run's closing line, unless the run is known
//! to have been cut off (its journal is still marked open, outside the vault). A line removed,
//! repeated or moved, or an end cut off, and the journal is refused whole.
//!
//! Journals tabd wrote before issue 36 have no line numbers (each line signed over the run id and
//! the line). They are still read, as `Trust::Unnumbered`: nothing in them can be forged, but a
//! removed line cannot be seen, so `tabd undo` says so and never reports them as whole.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{entry_path, Key, Line, LINE, OPEN};
use crate::base::run_id::RunId;
use crate::base::vault::{Vault, VaultError};

/// The largest journal read (a run that changed very many files).
pub(super) const MAX_JOURNAL: u64 = 256 * 1024 * 1024;

/// How far a journal read back can be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Every line signed by this machine's key, numbered without a gap, and closed — or the run
    /// was cut off (a crash) and tabd knows it.
    Whole,
    /// Written by tabd before issue 36: every line signed, but not numbered, so a line removed
    /// from it cannot be detected.
    Unnumbered,
    /// Not to be trusted: why.
    Refused(String),
    /// Read without a key (listing runs, pruning): not checked.
    Unchecked,
}

/// What one run's journal says.
#[derive(Debug, Clone)]
pub struct RunChanges {
    pub run_id: RunId,
    pub role: String,
    pub started_at: DateTime<Utc>,
    pub trigger: String,
    /// Each changed file's prior state, in the order the run first changed them.
    pub before: Vec<(String, Option<String>)>,
    /// Files the run only appended to: their prior content is the first this many bytes of
    /// what the run left (no copy kept).
    pub prefix: BTreeMap<String, u64>,
    /// The state the run left (`None` until sealed: the run crashed, or still runs).
    pub left: Option<BTreeMap<String, Option<String>>>,
    /// Each file's state after the last tool call that changed it (what a crashed run left).
    pub after: BTreeMap<String, Option<String>>,
    /// Inbox notes the run moved (to `processed/` or `failed/`).
    pub moved: Vec<(String, String)>,
    /// Whether the journal is whole and this machine's (see `Trust`).
    pub trust: Trust,
}

impl RunChanges {
    pub fn changed(&self) -> Vec<&str> {
        self.before.iter().map(|(p, _)| p.as_str()).collect()
    }

    /// What the run left of `path`: its closing line says, else its last record after a call
    /// (a crashed run); `None` when neither knows.
    pub fn left_of(&self, path: &str) -> Option<&Option<String>> {
        match &self.left {
            Some(left) => left.get(path),
            None => self.after.get(path),
        }
    }
}

/// One line read back.
pub(super) struct ReadLine {
    pub line: Line,
    /// Its number (`None`: a line of the older, unnumbered format).
    pub seq: Option<u64>,
    /// Signed by the key it was checked with.
    pub signed: bool,
}

/// One line read back, checked against `key` if given; `None` when it is not a journal line (a
/// torn last line, a crash while appending).
pub(super) fn read_line(l: &str, run_id: &str, key: Option<&Key>) -> Option<ReadLine> {
    let mut value: serde_json::Value = serde_json::from_str(l).ok()?;
    let fields = value.as_object_mut()?;
    let mac = fields.remove("mac");
    let seq = match fields.remove("seq") {
        Some(n) => Some(n.as_u64()?),
        None => None,
    };
    let line: Line = serde_json::from_value(value).ok()?;
    let signed = match (key, mac.as_ref().and_then(|m| m.as_str())) {
        (Some(k), Some(mac)) => {
            let body = serde_json::to_string(&line).ok()?;
            match seq {
                Some(n) => k.verifies(
                    LINE,
                    &[run_id.as_bytes(), n.to_string().as_bytes(), body.as_bytes()],
                    mac,
                ),
                None => k.verifies_plain(format!("{run_id}\n{body}").as_bytes(), mac),
            }
        }
        _ => false,
    };
    Some(ReadLine { line, seq, signed })
}

/// The journal's text (a torn multi-byte character at a crash is read as a replacement).
pub(super) fn text_of(vault: &Vault, run_id: &RunId) -> Result<String, VaultError> {
    let (bytes, _) = vault.read_bytes(&entry_path(run_id)?, MAX_JOURNAL)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads a run's journal; with `key`, checks each line's signature and number and the journal's
/// end (see `Trust`).
pub fn load(vault: &Vault, run_id: &RunId, key: Option<&Key>) -> Result<RunChanges, VaultError> {
    let text = text_of(vault, run_id)?;
    let mut entry = RunChanges {
        run_id: run_id.clone(),
        role: String::new(),
        started_at: DateTime::<Utc>::MIN_UTC,
        trigger: String::new(),
        before: Vec::new(),
        prefix: BTreeMap::new(),
        left: None,
        after: BTreeMap::new(),
        moved: Vec::new(),
        trust: Trust::Unchecked,
    };
    let mut check = Check::default();
    for (at, l) in text.lines().enumerate() {
        // A torn line (a crash while appending) carries nothing signed: skipped. A line that
        // did carry something and is gone shows as a gap in the numbers.
        let Some(read) = read_line(l, run_id, key) else {
            continue;
        };
        check.line(at + 1, &read, run_id);
        apply(&mut entry, read.line);
    }
    if let Some(key) = key {
        entry.trust = check.verdict(key, run_id);
    }
    Ok(entry)
}

/// What the lines of a journal said about it, as they were read.
#[derive(Default)]
struct Check {
    /// Lines read so far (the number the next one must carry).
    count: u64,
    numbered: bool,
    unnumbered: bool,
    header: bool,
    sealed_last: bool,
    problem: Option<String>,
}

impl Check {
    fn line(&mut self, at: usize, read: &ReadLine, run_id: &str) {
        let problem = match (read.signed, read.seq) {
            (false, _) => Some(format!("its line {at} is not signed by this machine's key")),
            (true, Some(n)) if n != self.count => Some(if n > self.count {
                format!(
                    "{} of its lines {} missing before line {at} (it is numbered {n}, {} came before it)",
                    n - self.count,
                    if n - self.count == 1 { "is" } else { "are" },
                    self.count
                )
            } else {
                format!(
                    "its line {at} is numbered {n}, but {} came before it: lines were repeated or moved",
                    self.count
                )
            }),
            (true, None) if self.numbered => {
                Some(format!("its line {at} has no number, after numbered lines"))
            }
            (true, Some(_)) => {
                self.numbered = true;
                None
            }
            (true, None) => {
                self.unnumbered = true;
                None
            }
        };
        if let Line::Header { run_id: id, .. } = &read.line {
            self.header = true;
            if id != run_id && self.problem.is_none() {
                self.problem = Some(format!("its header names another run ({id})"));
            }
        }
        if self.problem.is_none() {
            self.problem = problem;
        }
        self.sealed_last = matches!(read.line, Line::Sealed { .. });
        self.count += 1;
    }

    fn verdict(self, key: &Key, run_id: &str) -> Trust {
        if let Some(why) = self.problem {
            return Trust::Refused(why);
        }
        if !self.header {
            return Trust::Refused("it has no header line".into());
        }
        if !self.numbered {
            return Trust::Unnumbered;
        }
        if !self.sealed_last && !key.is_marked(OPEN, run_id) {
            return Trust::Refused(format!(
                "its end is missing: its last line ({} lines in) is not the run's closing line, and no crash of \
                 the run is known",
                self.count
            ));
        }
        Trust::Whole
    }
}

/// What one line adds to the run's changes.
fn apply(entry: &mut RunChanges, line: Line) {
    match line {
        Line::Header {
            role,
            started_at,
            trigger,
            ..
        } => {
            entry.role = role;
            entry.started_at = started_at;
            entry.trigger = trigger;
        }
        Line::Before { path, before, prefix } => {
            // A second line for a file: it was appended to, then changed some other way (the
            // same prior state, now kept whole), or a resumed run's second part changed it
            // again. The first prior state is the one undo goes back to.
            match entry.before.iter().find(|(p, _)| *p == path) {
                Some((_, first)) => {
                    if prefix.is_none() && *first == before {
                        entry.prefix.remove(&path);
                    }
                }
                None => {
                    if let Some(len) = prefix {
                        entry.prefix.insert(path.clone(), len);
                    }
                    entry.before.push((path, before));
                }
            }
        }
        Line::After { path, after } => {
            entry.after.insert(path, after);
        }
        Line::Sealed { left, moved, .. } => {
            // A run in two parts (suspended for an approval, then resumed) seals twice: what
            // the second part left wins for the files it changed.
            entry.left.get_or_insert_with(BTreeMap::new).extend(left);
            entry.moved.extend(moved);
        }
    }
}
