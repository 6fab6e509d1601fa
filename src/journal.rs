//! The change journal (DESIGN §19): before a run first changes a vault file, the file's prior
//! state (its bytes, or "absent") is kept; when the run ends, the state it left. `tabd undo`
//! restores a file only where it is still exactly as the run left it.
//!
//! Layout under `.tabd/journal/` (tabd's own folder: no role can read or write it):
//! - `blobs/<sha256>` — prior contents, content-addressed, each stored once;
//! - `runs/<run id>.jsonl` — one file per run that changed something: a header line, one line per
//!   file the moment before it first changed (so a crash mid-run leaves what it needs), and a
//!   closing line with the state the run left and the notes it moved.
//!
//! Journal files are atomic but not fsynced (as the run records are): they survive a crash of
//! tabd; a power cut may lose the last run's journal.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::vault::{Durability, Vault, VaultError, VaultPath};

const ROOT: &str = ".tabd/journal";

/// The full SHA-256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn fixed(path: &str) -> Result<VaultPath, VaultError> {
    VaultPath::parse(path, false)
}

fn entry_path(run_id: &str) -> Result<VaultPath, VaultError> {
    fixed(&format!("{ROOT}/runs/{run_id}.jsonl"))
}

fn blob_path(hash: &str) -> Result<VaultPath, VaultError> {
    fixed(&format!("{ROOT}/blobs/{hash}"))
}

/// A file's state: its content's digest, or `None` when it does not exist.
pub fn state_of(vault: &Vault, path: &VaultPath) -> Result<Option<String>, VaultError> {
    match vault.read_bytes(path, u64::MAX) {
        Ok((bytes, _)) => Ok(Some(digest(&bytes))),
        Err(VaultError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One line of a run's journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Header {
        run_id: String,
        role: String,
        started_at: DateTime<Utc>,
        trigger: String,
    },
    Before {
        path: String,
        before: Option<String>,
    },
    Sealed {
        sealed_at: DateTime<Utc>,
        left: BTreeMap<String, Option<String>>,
        #[serde(default)]
        moved: Vec<(String, String)>,
    },
}

/// What one run's journal says.
#[derive(Debug, Clone)]
pub struct Entry {
    pub run_id: String,
    pub role: String,
    pub started_at: DateTime<Utc>,
    pub trigger: String,
    /// Each changed file's prior state, in the order the run first changed them.
    pub before: Vec<(String, Option<String>)>,
    /// The state the run left (`None` until sealed: the run crashed, or still runs).
    pub left: Option<BTreeMap<String, Option<String>>>,
    /// Inbox notes the run moved (to `processed/` or `failed/`).
    pub moved: Vec<(String, String)>,
}

impl Entry {
    pub fn changed(&self) -> Vec<&str> {
        self.before.iter().map(|(p, _)| p.as_str()).collect()
    }
}

/// The journal of one run: written as the run changes files.
#[derive(Debug)]
pub struct RunJournal {
    vault: Arc<Vault>,
    run_id: String,
    header: Line,
    /// Files already journaled in this run (only the first change keeps the prior state).
    seen: Mutex<Vec<String>>,
}

impl RunJournal {
    pub fn new(
        vault: Arc<Vault>,
        run_id: &str,
        role: &str,
        started_at: DateTime<Utc>,
        trigger: &str,
    ) -> Self {
        Self {
            vault,
            run_id: run_id.to_string(),
            header: Line::Header {
                run_id: run_id.to_string(),
                role: role.to_string(),
                started_at,
                trigger: trigger.to_string(),
            },
            seen: Mutex::new(Vec::new()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Keeps `path`'s state before this run first changes it. An `Err` means the change must
    /// not happen (it could not be undone).
    pub fn before_change(&self, path: &VaultPath) -> Result<(), VaultError> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.iter().any(|p| p == path.as_str()) {
            return Ok(());
        }
        let before = match self.vault.read_bytes(path, u64::MAX) {
            Ok((bytes, entry)) if !entry.is_dir => {
                let hash = digest(&bytes);
                let blob = blob_path(&hash)?;
                if !self.vault.exists(&blob) {
                    self.vault.write_atomic_with(&blob, &bytes, Durability::None)?;
                }
                Some(hash)
            }
            Ok(_) => return Ok(()), // a folder: its files are journaled one by one
            Err(VaultError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        self.write_before(&mut seen, path, before)
    }

    /// Journals a file the run just created (it did not exist before: creation never replaces).
    pub fn created(&self, path: &VaultPath) -> Result<(), VaultError> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.iter().any(|p| p == path.as_str()) {
            return Ok(());
        }
        self.write_before(&mut seen, path, None)
    }

    /// Appends a file's prior state (the header first, for the run's first change).
    fn write_before(
        &self,
        seen: &mut Vec<String>,
        path: &VaultPath,
        before: Option<String>,
    ) -> Result<(), VaultError> {
        let mut text = String::new();
        if seen.is_empty() {
            text.push_str(&line(&self.header));
        }
        text.push_str(&line(&Line::Before {
            path: path.as_str().to_string(),
            before,
        }));
        append_entry(&self.vault, &self.run_id, &text)?;
        seen.push(path.as_str().to_string());
        Ok(())
    }

    /// Whether the run changed anything.
    pub fn is_empty(&self) -> bool {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// The run is over: the state it left, and the notes it moved.
    pub fn seal(&self, moved: &[(String, String)], now: DateTime<Utc>) -> Result<(), VaultError> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if seen.is_empty() && moved.is_empty() {
            return Ok(());
        }
        let mut left = BTreeMap::new();
        for p in &seen {
            left.insert(p.clone(), state_of(&self.vault, &fixed(p)?)?);
        }
        let mut text = String::new();
        if seen.is_empty() {
            text.push_str(&line(&self.header));
        }
        text.push_str(&line(&Line::Sealed {
            sealed_at: now,
            left,
            moved: moved.to_vec(),
        }));
        append_entry(&self.vault, &self.run_id, &text)
    }
}

/// Appends to a run's journal file, its folder made on first use.
fn append_entry(vault: &Vault, run_id: &str, text: &str) -> Result<(), VaultError> {
    let path = entry_path(run_id)?;
    vault.create_dir_all(&path.parent())?;
    vault.append(&path, text, None, false)
}

fn line(l: &Line) -> String {
    let mut s = serde_json::to_string(l).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads a run's journal.
pub fn load(vault: &Vault, run_id: &str) -> Result<Entry, VaultError> {
    let text = vault.read_text(&entry_path(run_id)?, 256 * 1024 * 1024)?;
    let mut entry = Entry {
        run_id: run_id.to_string(),
        role: String::new(),
        started_at: DateTime::<Utc>::MIN_UTC,
        trigger: String::new(),
        before: Vec::new(),
        left: None,
        moved: Vec::new(),
    };
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        // A torn last line (a crash while appending) is skipped, never fatal.
        let Ok(parsed) = serde_json::from_str::<Line>(l) else {
            continue;
        };
        match parsed {
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
            Line::Before { path, before } => entry.before.push((path, before)),
            Line::Sealed { left, moved, .. } => {
                entry.left = Some(left);
                entry.moved = moved;
            }
        }
    }
    Ok(entry)
}

/// Every journaled run id, oldest first (ids start with their UTC start time).
pub fn run_ids(vault: &Vault) -> Vec<String> {
    let Ok(dir) = fixed(&format!("{ROOT}/runs")) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = vault
        .list(&dir)
        .map(|l| {
            l.entries
                .into_iter()
                .filter_map(|e| e.path.file_name().strip_suffix(".jsonl").map(String::from))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// A run's prior content of a file.
pub fn blob(vault: &Vault, hash: &str) -> Result<Vec<u8>, VaultError> {
    vault.read_bytes(&blob_path(hash)?, u64::MAX).map(|(b, _)| b)
}

/// Writes the journal's closing line for a run that never wrote one (it crashed): the state it
/// left is taken as the files are now.
pub fn seal_now(vault: &Arc<Vault>, entry: &Entry, now: DateTime<Utc>) -> Result<Entry, VaultError> {
    let j = RunJournal::new(
        vault.clone(),
        &entry.run_id,
        &entry.role,
        entry.started_at,
        &entry.trigger,
    );
    *j.seen.lock().unwrap_or_else(|p| p.into_inner()) = entry.before.iter().map(|(p, _)| p.clone()).collect();
    j.seal(&[], now)?;
    load(vault, &entry.run_id)
}

/// What pruning removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub runs: usize,
    pub blobs: usize,
    pub bytes: u64,
}

/// Drops journals older than `keep_days`, then the oldest until the journal fits in
/// `max_bytes`, then blobs no journal names.
pub fn prune(vault: &Vault, keep_days: u32, max_bytes: u64, now: DateTime<Utc>) -> Pruned {
    // Blobs are listed before journals are read: a blob written after this listing is not
    // considered at all, and one written just before it whose journal line is not appended yet
    // is protected by the grace period.
    let blobs = list_blobs(vault, now);
    let mut pruned = Pruned::default();
    let cutoff = now - chrono::Duration::days(i64::from(keep_days));
    let mut kept: VecDeque<(String, u64, Vec<String>)> = Default::default();
    for id in run_ids(vault) {
        let Ok(path) = entry_path(&id) else { continue };
        let size = vault.metadata(&path).map(|m| m.size).unwrap_or(0);
        match load(vault, &id) {
            Ok(e) if e.started_at >= cutoff => {
                let named = e.before.into_iter().filter_map(|(_, b)| b).collect();
                kept.push_back((id, size, named));
            }
            _ => {
                if vault.remove_file(&path).is_ok() {
                    pruned.runs += 1;
                    pruned.bytes += size;
                }
            }
        }
    }
    // Oldest first out while over the size limit: each run counts with the blobs only it names
    // (reference counts, so the total is kept as runs go, not recomputed).
    let size_of: HashMap<&str, u64> = blobs.iter().map(|(h, s, _)| (h.as_str(), *s)).collect();
    let mut refs: HashMap<String, usize> = Default::default();
    let mut total: u64 = kept.iter().map(|k| k.1).sum();
    for hash in kept.iter().flat_map(|k| k.2.iter()) {
        let n = refs.entry(hash.clone()).or_default();
        if *n == 0 {
            total += size_of.get(hash.as_str()).copied().unwrap_or(0);
        }
        *n += 1;
    }
    while total > max_bytes {
        let Some((id, size, named)) = kept.pop_front() else {
            break;
        };
        if entry_path(&id).is_ok_and(|p| vault.remove_file(&p).is_ok()) {
            pruned.runs += 1;
            pruned.bytes += size;
        }
        total = total.saturating_sub(size);
        for hash in named {
            if let Some(n) = refs.get_mut(&hash) {
                *n -= 1;
                if *n == 0 {
                    total = total.saturating_sub(size_of.get(hash.as_str()).copied().unwrap_or(0));
                }
            }
        }
    }
    for (hash, size, young) in &blobs {
        let named = refs.get(hash).is_some_and(|n| *n > 0);
        if !named && !young && blob_path(hash).is_ok_and(|p| vault.remove_file(&p).is_ok()) {
            pruned.blobs += 1;
            pruned.bytes += size;
        }
    }
    pruned
}

/// Each stored blob: its hash, size, and whether it is too young to drop (it may belong to a run
/// that has not written its journal line yet).
fn list_blobs(vault: &Vault, now: DateTime<Utc>) -> Vec<(String, u64, bool)> {
    const GRACE: std::time::Duration = std::time::Duration::from_secs(60);
    let fresh = std::time::SystemTime::from(now) - GRACE;
    fixed(&format!("{ROOT}/blobs"))
        .ok()
        .and_then(|d| vault.list(&d).ok())
        .map(|l| {
            l.entries
                .into_iter()
                .map(|e| {
                    let young = e.modified.is_none_or(|m| m > fresh);
                    (e.path.file_name().to_string(), e.size, young)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What undo does with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Still as the run left it: back to its prior content (`Some(hash)`) or removed (`None`).
    Restore { path: String, to: Option<String> },
    /// Changed since the run (by the person, a sync tool or a later run, named when known).
    Skip { path: String, later_run: Option<String> },
    /// Already as it was before the run: nothing to do.
    AlreadyBefore { path: String },
}

/// The runs that changed `path` after `entry` started, oldest first (by start time: two runs
/// in one second have ids that do not sort by time).
pub fn later_runs(vault: &Vault, entry: &Entry, path: &str) -> Vec<String> {
    let mut later: Vec<(DateTime<Utc>, String)> = run_ids(vault)
        .into_iter()
        .filter(|id| *id != entry.run_id)
        .filter_map(|id| load(vault, &id).ok())
        .filter(|e| e.started_at > entry.started_at && e.before.iter().any(|(p, _)| p == path))
        .map(|e| (e.started_at, e.run_id))
        .collect();
    later.sort();
    later.into_iter().map(|(_, id)| id).collect()
}

/// What undoing `entry` would do, file by file (`force`: restore changed files too).
pub fn plan_undo(vault: &Vault, entry: &Entry, force: bool) -> Result<Vec<Step>, VaultError> {
    let left = entry.left.clone().unwrap_or_default();
    let mut steps = Vec::new();
    for (path, before) in &entry.before {
        let now = state_of(vault, &fixed(path)?)?;
        let step = if now == *before {
            Step::AlreadyBefore { path: path.clone() }
        } else if force || left.get(path) == Some(&now) {
            Step::Restore {
                path: path.clone(),
                to: before.clone(),
            }
        } else {
            Step::Skip {
                path: path.clone(),
                later_run: later_runs(vault, entry, path).into_iter().next(),
            }
        };
        steps.push(step);
    }
    Ok(steps)
}

/// Carries out the `Restore` steps, each journaled in `undo` (so the undo can be undone).
pub fn apply(vault: &Vault, steps: &[Step], undo: &RunJournal) -> Result<usize, VaultError> {
    let mut done = 0;
    for step in steps {
        let Step::Restore { path, to } = step else {
            continue;
        };
        let p = fixed(path)?;
        undo.before_change(&p)?;
        match to {
            Some(hash) => vault.write_atomic(&p, &blob(vault, hash)?)?,
            None => match vault.remove_file(&p) {
                Ok(()) | Err(VaultError::NotFound(_)) => {}
                Err(e) => return Err(e),
            },
        }
        done += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> (tempfile::TempDir, Arc<Vault>) {
        let d = tempfile::tempdir().unwrap();
        let v = Arc::new(Vault::open(d.path()).unwrap());
        (d, v)
    }

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    /// A run that changed `file` from `old` to `new`, started `days_ago`.
    fn journaled(v: &Arc<Vault>, id: &str, file: &str, old: &str, new: &str, days_ago: i64) {
        let now = Utc::now();
        v.write_atomic(&p(file), old.as_bytes()).unwrap();
        let j = RunJournal::new(
            v.clone(),
            id,
            "r",
            now - chrono::Duration::days(days_ago),
            "manual",
        );
        j.before_change(&p(file)).unwrap();
        j.before_change(&p(file)).unwrap(); // only the first change keeps the prior state
        v.write_atomic(&p(file), new.as_bytes()).unwrap();
        j.seal(&[], now).unwrap();
    }

    #[test]
    fn a_sealed_entry_round_trips_and_only_the_first_prior_state_counts() {
        let (_d, v) = vault();
        journaled(&v, "20261101T000000Z-r-1", "a.md", "old", "new", 0);
        let e = load(&v, "20261101T000000Z-r-1").unwrap();
        assert_eq!(e.before, [("a.md".to_string(), Some(digest(b"old")))]);
        assert_eq!(e.left.unwrap()["a.md"], Some(digest(b"new")));
        assert_eq!(blob(&v, &digest(b"old")).unwrap(), b"old");
        let steps = plan_undo(&v, &load(&v, "20261101T000000Z-r-1").unwrap(), false).unwrap();
        assert_eq!(
            steps,
            [Step::Restore {
                path: "a.md".into(),
                to: Some(digest(b"old"))
            }]
        );
    }

    #[test]
    fn pruning_drops_old_runs_then_the_oldest_over_the_size_limit_then_unnamed_blobs() {
        let (_d, v) = vault();
        journaled(&v, "20261001T000000Z-r-old", "a.md", "very old", "x", 40);
        journaled(&v, "20261110T000000Z-r-mid", "b.md", &"b".repeat(10_000), "y", 10);
        journaled(&v, "20261120T000000Z-r-new", "c.md", "c", "z", 1);
        // Blobs are young (written just now): age them past the hour pruning leaves alone.
        let later = Utc::now() + chrono::Duration::hours(2);
        let pruned = prune(&v, 30, 1024 * 1024, later);
        assert_eq!(pruned.runs, 1, "only the 40-day-old run");
        assert_eq!(pruned.blobs, 1, "its prior content goes with it");
        assert_eq!(run_ids(&v), ["20261110T000000Z-r-mid", "20261120T000000Z-r-new"]);
        assert!(blob(&v, &digest(b"very old")).is_err());

        let pruned = prune(&v, 30, 2_000, later);
        assert_eq!(pruned.runs, 1, "the oldest goes first to fit 2,000 bytes");
        assert_eq!(run_ids(&v), ["20261120T000000Z-r-new"]);
        assert!(blob(&v, &digest(b"c")).is_ok(), "a kept run's content stays");

        // A blob written a moment ago may belong to a run still writing its journal line: kept
        // even when nothing names it yet.
        journaled(&v, "20261001T000000Z-r-young", "d.md", "young content", "w", 40);
        let pruned = prune(&v, 30, 1024 * 1024, Utc::now());
        assert_eq!((pruned.runs, pruned.blobs), (1, 0));
        assert!(blob(&v, &digest(b"young content")).is_ok());
    }
}
