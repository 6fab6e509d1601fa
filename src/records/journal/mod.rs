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
//!
//! Every line is signed with a key kept outside the vault (`key`): `tabd undo` refuses a journal
//! that was forged or edited. After each tool call the run also records what each file it
//! journaled now is (`settle`), so the state a run left is known even when it crashed before
//! its closing line, and undo does exactly what its dry run says.
//!
//! - `key` — the signing key, outside the vault;
//! - `undo` — planning and carrying out an undo, through the same gate as a tool write.

pub mod key;
pub mod undo;

pub use key::Key;
pub use undo::{apply, later_runs, plan_undo, Step};

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::vault::{Durability, Vault, VaultError, VaultPath};

const ROOT: &str = crate::base::vault::layout::JOURNAL;

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
#[serde(tag = "kind", rename_all = "lowercase")]
enum Line {
    Header {
        run_id: String,
        role: String,
        started_at: DateTime<Utc>,
        trigger: String,
    },
    /// A file's state the moment before the run first changed it. With `prefix`, the run only
    /// appended to it: its prior content is the first `prefix` bytes of what the run left, and
    /// no copy is stored (a note appended on every run costs a line, not the note, each time).
    Before {
        path: String,
        before: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<u64>,
    },
    /// A file's state after a tool call changed it (the last one is what the run left).
    After { path: String, after: Option<String> },
    Sealed {
        sealed_at: DateTime<Utc>,
        left: BTreeMap<String, Option<String>>,
        #[serde(default)]
        moved: Vec<(String, String)>,
    },
}

/// What one run's journal says.
#[derive(Debug, Clone)]
pub struct RunChanges {
    pub run_id: String,
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
    /// Every line is signed by this machine's key: nothing in it was forged or edited.
    pub verified: bool,
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

/// The journal of one run: written as the run changes files.
#[derive(Debug)]
pub struct RunJournal {
    vault: Arc<Vault>,
    key: Arc<Key>,
    run_id: String,
    header: Line,
    files: Mutex<Files>,
}

/// The files a run journaled, and those changed since its last `settle`.
#[derive(Debug, Default)]
struct Files {
    seen: Vec<String>,
    unsettled: Vec<String>,
    /// Journaled as appended to (no copy kept): the prior length and digest.
    appended: HashMap<String, (u64, String)>,
}

impl Files {
    /// Notes that `path` is about to change (to be settled after the call); true when its prior
    /// state is journaled already.
    fn touch(&mut self, path: &VaultPath) -> bool {
        if !self.unsettled.iter().any(|p| p == path.as_str()) {
            self.unsettled.push(path.as_str().to_string());
        }
        self.seen.iter().any(|p| p == path.as_str())
    }
}

impl RunJournal {
    pub fn new(
        vault: Arc<Vault>,
        key: Arc<Key>,
        run_id: &str,
        role: &str,
        started_at: DateTime<Utc>,
        trigger: &str,
    ) -> Self {
        Self {
            vault,
            key,
            run_id: run_id.to_string(),
            header: Line::Header {
                run_id: run_id.to_string(),
                role: role.to_string(),
                started_at,
                trigger: trigger.to_string(),
            },
            files: Mutex::new(Files::default()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Keeps `path`'s state before this run first changes it. An `Err` means the change must
    /// not happen (it could not be undone).
    pub fn before_change(&self, path: &VaultPath) -> Result<(), VaultError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.touch(path) {
            return match files.appended.remove(path.as_str()) {
                Some(kept) => self.keep_prefix(path, kept),
                None => Ok(()),
            };
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
            Ok(_) => {
                files.unsettled.retain(|p| p != path.as_str());
                return Ok(()); // a folder: its files are journaled one by one
            }
            Err(VaultError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        self.write_before(&mut files, path, before, None)
    }

    /// Keeps `path`'s state before this run appends to it, from `prior` (its bytes as read for
    /// the append; `None`: it does not exist). Only the length and digest are stored: appending
    /// keeps them as the file's first bytes. O(1) in the journal however long the note grows.
    pub fn before_append(&self, path: &VaultPath, prior: Option<&[u8]>) -> Result<(), VaultError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.touch(path) {
            return Ok(()); // journaled already, whole or as a prefix: an append keeps both true
        }
        let Some(prior) = prior.filter(|b| !b.is_empty()) else {
            let before = prior.map(digest);
            return self.write_before(&mut files, path, before, None);
        };
        let (len, hash) = (prior.len() as u64, digest(prior));
        files
            .appended
            .insert(path.as_str().to_string(), (len, hash.clone()));
        self.write_before(&mut files, path, Some(hash), Some(len))
    }

    /// A file journaled as appended to is about to change some other way: its prior content,
    /// still the file's first bytes now, is stored whole after all.
    fn keep_prefix(&self, path: &VaultPath, (len, hash): (u64, String)) -> Result<(), VaultError> {
        let (bytes, _) = self.vault.read_bytes(path, u64::MAX)?;
        let prior = bytes.get(..len as usize).filter(|b| digest(b) == hash).ok_or_else(|| {
            VaultError::Refused(format!(
                "{path} changed under this run after it appended to it; its earlier content cannot be kept for undo"
            ))
        })?;
        let blob = blob_path(&hash)?;
        if !self.vault.exists(&blob) {
            self.vault.write_atomic_with(&blob, prior, Durability::None)?;
        }
        let line = self.signed(&Line::Before {
            path: path.as_str().to_string(),
            before: Some(hash),
            prefix: None,
        });
        append_entry(&self.vault, &self.run_id, &line)
    }

    /// Journals a file the run just created (it did not exist before: creation never replaces).
    pub fn created(&self, path: &VaultPath) -> Result<(), VaultError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.touch(path) {
            return Ok(());
        }
        self.write_before(&mut files, path, None, None)
    }

    /// Appends a file's prior state (the header first, for the run's first change).
    fn write_before(
        &self,
        files: &mut Files,
        path: &VaultPath,
        before: Option<String>,
        prefix: Option<u64>,
    ) -> Result<(), VaultError> {
        let mut text = String::new();
        if files.seen.is_empty() {
            text.push_str(&self.signed(&self.header));
        }
        text.push_str(&self.signed(&Line::Before {
            path: path.as_str().to_string(),
            before,
            prefix,
        }));
        append_entry(&self.vault, &self.run_id, &text)?;
        files.seen.push(path.as_str().to_string());
        Ok(())
    }

    /// Whether a file changed since the last `settle` (cheap: no file is read).
    pub fn unsettled(&self) -> bool {
        !self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unsettled
            .is_empty()
    }

    /// Records what each file changed since the last settle is now (called after every tool
    /// call, by the harness): what a run left is known even if it never closes its journal.
    pub fn settle(&self) -> Result<(), VaultError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.unsettled.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for p in std::mem::take(&mut files.unsettled) {
            let after = state_of(&self.vault, &fixed(&p)?)?;
            text.push_str(&self.signed(&Line::After { path: p, after }));
        }
        append_entry(&self.vault, &self.run_id, &text)
    }

    /// A line with its MAC (see `key`).
    fn signed(&self, l: &Line) -> String {
        let body = serde_json::to_string(l).unwrap_or_default();
        let mac = self.key.mac(&self.run_id, &body);
        // The object with one more field: `{…,"mac":"…"}`.
        format!("{},\"mac\":\"{mac}\"}}\n", &body[..body.len().saturating_sub(1)])
    }

    /// Whether the run changed anything.
    pub fn is_empty(&self) -> bool {
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .seen
            .is_empty()
    }

    /// The run is over: the state it left, and the notes it moved.
    pub fn seal(&self, moved: &[(String, String)], now: DateTime<Utc>) -> Result<(), VaultError> {
        let seen = self.files.lock().unwrap_or_else(|p| p.into_inner()).seen.clone();
        if seen.is_empty() && moved.is_empty() {
            return Ok(());
        }
        let mut left = BTreeMap::new();
        for p in &seen {
            left.insert(p.clone(), state_of(&self.vault, &fixed(p)?)?);
        }
        let mut text = String::new();
        if seen.is_empty() {
            text.push_str(&self.signed(&self.header));
        }
        text.push_str(&self.signed(&Line::Sealed {
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

/// One line read back: the line, and whether `key` signed it (`None`: not checked).
fn read_line(l: &str, run_id: &str, key: Option<&Key>) -> Option<(Line, bool)> {
    let mut value: serde_json::Value = serde_json::from_str(l).ok()?;
    let mac = value.as_object_mut()?.remove("mac");
    let line: Line = serde_json::from_value(value).ok()?;
    let signed = match (key, mac.as_ref().and_then(|m| m.as_str())) {
        (Some(k), Some(mac)) => {
            let body = serde_json::to_string(&line).ok()?;
            k.verifies(run_id, &body, mac)
        }
        _ => false,
    };
    Some((line, signed))
}

/// Reads a run's journal; with `key`, checks that every line is signed by it.
pub fn load(vault: &Vault, run_id: &str, key: Option<&Key>) -> Result<RunChanges, VaultError> {
    let text = vault.read_text(&entry_path(run_id)?, 256 * 1024 * 1024)?;
    let mut entry = RunChanges {
        run_id: run_id.to_string(),
        role: String::new(),
        started_at: DateTime::<Utc>::MIN_UTC,
        trigger: String::new(),
        before: Vec::new(),
        prefix: BTreeMap::new(),
        left: None,
        after: BTreeMap::new(),
        moved: Vec::new(),
        verified: key.is_some(),
    };
    let mut header = false;
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        // A torn last line (a crash while appending) is skipped, never fatal.
        let Some((parsed, signed)) = read_line(l, run_id, key) else {
            continue;
        };
        entry.verified &= signed;
        match parsed {
            Line::Header {
                run_id: id,
                role,
                started_at,
                trigger,
            } => {
                // A header naming another run: this journal was copied or forged.
                entry.verified &= id == run_id;
                header = true;
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
    entry.verified &= header;
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
        match load(vault, &id, None) {
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

    fn key() -> Arc<Key> {
        Arc::new(Key::from_bytes(b"a key of this machine, 32 bytes!"))
    }

    /// A run that changed `file` from `old` to `new`, started `days_ago`.
    fn journaled(v: &Arc<Vault>, id: &str, file: &str, old: &str, new: &str, days_ago: i64) {
        let now = Utc::now();
        v.write_atomic(&p(file), old.as_bytes()).unwrap();
        let j = RunJournal::new(
            v.clone(),
            key(),
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
        let k = key();
        let e = load(&v, "20261101T000000Z-r-1", Some(&k)).unwrap();
        assert!(e.verified, "signed by this machine's key");
        assert_eq!(e.before, [("a.md".to_string(), Some(digest(b"old")))]);
        assert_eq!(e.left.clone().unwrap()["a.md"], Some(digest(b"new")));
        assert_eq!(blob(&v, &digest(b"old")).unwrap(), b"old");
        let policy = crate::records::access::AccessPolicy::new(&[]);
        let steps = plan_undo(&v, &e, &policy, false).unwrap();
        assert_eq!(
            steps,
            [Step::Restore {
                path: "a.md".into(),
                to: Some(digest(b"old")),
                prefix: None,
                loses: None
            }]
        );
        let other = Key::from_bytes(b"another machine's key, 32 bytes.");
        let stranger = load(&v, "20261101T000000Z-r-1", Some(&other)).unwrap();
        assert!(!stranger.verified);
        assert!(plan_undo(&v, &stranger, &policy, false).is_err(), "refused whole");
    }

    /// Issue 29, item 4: a journal edited in the vault, a swapped blob, a path a role may not
    /// write, a folder replaced by a link — each refused.
    #[test]
    fn undo_passes_the_gate_of_a_tool_write() {
        let (_d, v) = vault();
        let k = key();
        journaled(&v, "20261101T000000Z-r-2", "project/a.md", "old", "new", 0);
        // A forged line added to a signed journal: the whole journal is refused.
        let path = entry_path("20261101T000000Z-r-2").unwrap();
        let mut text = v.read_text(&path, 1 << 20).unwrap();
        text.push_str("{\"kind\":\"before\",\"path\":\"roles/writer.md\",\"before\":null}\n");
        v.write_atomic(&path, text.as_bytes()).unwrap();
        assert!(!load(&v, "20261101T000000Z-r-2", Some(&k)).unwrap().verified);
        // A signed journal naming a protected path (the role could never have written it).
        let policy = crate::records::access::AccessPolicy::new(&[]);
        v.write_atomic(&p("roles/writer.md"), b"person's").unwrap();
        journaled(
            &v,
            "20261101T000000Z-r-3",
            ".claude/settings.json",
            "{}",
            "{\"hooks\":1}",
            0,
        );
        let e = load(&v, "20261101T000000Z-r-3", Some(&k)).unwrap();
        assert!(matches!(
            &plan_undo(&v, &e, &policy, true).unwrap()[0],
            Step::Refused { .. }
        ));
        // The journal's copy swapped for other bytes: refused, not restored.
        journaled(&v, "20261101T000000Z-r-4", "project/b.md", "old b", "new b", 0);
        v.write_atomic(&blob_path(&digest(b"old b")).unwrap(), b"evil")
            .unwrap();
        let e = load(&v, "20261101T000000Z-r-4", Some(&k)).unwrap();
        let steps = plan_undo(&v, &e, &policy, false).unwrap();
        assert!(
            matches!(&steps[0], Step::Refused { why, .. } if why.contains("bytes were changed")),
            "{steps:?}"
        );
        // A folder replaced by a link after the run: nothing is removed through it.
        let (dir, v2) = vault();
        let j = RunJournal::new(
            v2.clone(),
            k.clone(),
            "20261101T000000Z-r-5",
            "r",
            Utc::now(),
            "manual",
        );
        j.before_change(&p("project/new.md")).unwrap();
        v2.write_atomic(&p("project/new.md"), b"made").unwrap();
        j.seal(&[], Utc::now()).unwrap();
        v2.write_atomic(&p("roles/writer.md"), b"keep me").unwrap();
        std::fs::remove_dir_all(dir.path().join("project")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("roles"), dir.path().join("project")).unwrap();
        std::fs::rename(
            dir.path().join("roles/writer.md"),
            dir.path().join("roles/new.md"),
        )
        .unwrap();
        let e = load(&v2, "20261101T000000Z-r-5", Some(&k)).unwrap();
        let steps = plan_undo(&v2, &e, &policy, true).unwrap();
        assert!(
            matches!(&steps[0], Step::Refused { why, .. } if why.contains("link")),
            "{steps:?}"
        );
        assert!(dir.path().join("roles/new.md").exists());
    }

    /// A run that crashed before its closing line is undone from its last record after each
    /// call: a file the person edited since is skipped, as the dry run says.
    #[test]
    fn a_crashed_run_is_planned_from_its_records_after_each_call() {
        let (_d, v) = vault();
        let k = key();
        v.write_atomic(&p("a.md"), b"before").unwrap();
        let j = RunJournal::new(
            v.clone(),
            k.clone(),
            "20261101T000000Z-r-6",
            "r",
            Utc::now(),
            "manual",
        );
        j.before_change(&p("a.md")).unwrap();
        v.write_atomic(&p("a.md"), b"by the run").unwrap();
        j.settle().unwrap();
        drop(j); // the crash: never sealed
        let policy = crate::records::access::AccessPolicy::new(&[]);
        let e = load(&v, "20261101T000000Z-r-6", Some(&k)).unwrap();
        assert!(e.left.is_none());
        assert!(matches!(
            &plan_undo(&v, &e, &policy, false).unwrap()[0],
            Step::Restore { .. }
        ));
        v.write_atomic(&p("a.md"), b"the person's edit").unwrap();
        assert!(matches!(
            &plan_undo(&v, &e, &policy, false).unwrap()[0],
            Step::Skip { .. }
        ));
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

    /// Issue 30, item 10: a note appended on every run is journaled as its prior length and
    /// digest — no copy — and undo still restores it exactly; once the run also rewrites it, the
    /// prior content is kept whole after all.
    #[test]
    fn an_append_is_journaled_in_constant_space_and_undone_exactly() {
        let (_d, v) = vault();
        let policy = crate::records::access::AccessPolicy::new(&[]);
        let big = "- an old line of the timeline\n".repeat(10_000);
        v.write_atomic(&p("project/timeline.md"), big.as_bytes()).unwrap();
        let now = Utc::now();
        let j = RunJournal::new(v.clone(), key(), "20261101T000000Z-r-9", "r", now, "manual");
        j.before_append(&p("project/timeline.md"), Some(big.as_bytes()))
            .unwrap();
        let grown = format!("{big}- today\n");
        v.write_atomic(&p("project/timeline.md"), grown.as_bytes())
            .unwrap();
        j.before_append(&p("project/timeline.md"), Some(grown.as_bytes()))
            .unwrap();
        v.write_atomic(
            &p("project/timeline.md"),
            format!("{grown}- and more\n").as_bytes(),
        )
        .unwrap();
        j.seal(&[], now).unwrap();
        assert!(
            blob(&v, &digest(big.as_bytes())).is_err(),
            "no copy of the note was stored"
        );
        let journal = v
            .read_text(&entry_path("20261101T000000Z-r-9").unwrap(), 1 << 20)
            .unwrap();
        assert!(
            journal.len() < 2_000,
            "{} bytes for a {} byte note",
            journal.len(),
            big.len()
        );
        let e = load(&v, "20261101T000000Z-r-9", Some(&key())).unwrap();
        assert!(e.verified);
        assert_eq!(e.prefix["project/timeline.md"], big.len() as u64);
        let steps = plan_undo(&v, &e, &policy, false).unwrap();
        let undo = RunJournal::new(v.clone(), key(), "20261101T000001Z-undo-1", "r", now, "undo");
        assert_eq!(apply(&v, &steps, &undo).unwrap(), 1);
        assert_eq!(v.read_text(&p("project/timeline.md"), 1 << 24).unwrap(), big);

        // Appended, then rewritten in the same run: the prior content is kept whole then.
        let j = RunJournal::new(v.clone(), key(), "20261101T000002Z-r-10", "r", now, "manual");
        j.before_append(&p("project/timeline.md"), Some(big.as_bytes()))
            .unwrap();
        v.write_atomic(&p("project/timeline.md"), format!("{big}- x\n").as_bytes())
            .unwrap();
        j.before_change(&p("project/timeline.md")).unwrap();
        v.write_atomic(&p("project/timeline.md"), b"all replaced")
            .unwrap();
        j.seal(&[], now).unwrap();
        assert_eq!(blob(&v, &digest(big.as_bytes())).unwrap(), big.as_bytes());
        let e = load(&v, "20261101T000002Z-r-10", Some(&key())).unwrap();
        assert!(e.prefix.is_empty() && e.before.len() == 1, "{:?}", e.before);
        let steps = plan_undo(&v, &e, &policy, false).unwrap();
        let undo = RunJournal::new(v.clone(), key(), "20261101T000003Z-undo-2", "r", now, "undo");
        assert_eq!(apply(&v, &steps, &undo).unwrap(), 1);
        assert_eq!(v.read_text(&p("project/timeline.md"), 1 << 24).unwrap(), big);
    }

    /// An appended note whose beginning a person edited after the run cannot be restored from
    /// its prefix: `--force` is refused for it rather than writing the wrong bytes.
    #[test]
    fn an_appended_note_edited_at_its_start_is_refused_not_guessed() {
        let (_d, v) = vault();
        let policy = crate::records::access::AccessPolicy::new(&[]);
        v.write_atomic(&p("log.md"), b"first\n").unwrap();
        let now = Utc::now();
        let j = RunJournal::new(v.clone(), key(), "20261101T000000Z-r-11", "r", now, "manual");
        j.before_append(&p("log.md"), Some(b"first\n")).unwrap();
        v.write_atomic(&p("log.md"), b"first\nsecond\n").unwrap();
        j.seal(&[], now).unwrap();
        v.write_atomic(&p("log.md"), b"FIRST\nsecond\n").unwrap();
        let e = load(&v, "20261101T000000Z-r-11", Some(&key())).unwrap();
        let steps = plan_undo(&v, &e, &policy, true).unwrap();
        assert!(
            matches!(&steps[..], [Step::Refused { why, .. }] if why.contains("no longer begins with")),
            "{steps:?}"
        );
        assert_eq!(v.read_text(&p("log.md"), 1 << 20).unwrap(), "FIRST\nsecond\n");
    }
}
