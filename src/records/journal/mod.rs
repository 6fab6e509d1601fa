//! The change journal (docs/spec.md §19): before a run first changes a vault file, the file's prior
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
//! tabd; a power cut may lose the last run's journal, or leave it looking cut off (see below).
//!
//! Every line is signed with tabd's key, kept outside the vault (`base::signing`), over the run
//! id, the line's number and the line (issue 36): `tabd undo` refuses a journal that was forged
//! or edited, or that lost a line. While a run's journal is open (from its first line to its
//! closing one) it is marked so outside the vault: a journal without its closing line is a run
//! that was cut off only if that mark says so — otherwise its end was removed. After each tool
//! call the run also records what each file it journaled now is (`settle`), so the state a run
//! left is known even when it crashed before its closing line, and undo does exactly what its
//! dry run says.
//!
//! - `read` — reading a journal back, and how far it can be trusted;
//! - `undo` — planning and carrying out an undo, through the same gate as a tool write;
//! - `approved` — which approved calls' journals a run asked for (from the approval ledger).

pub mod approved;
pub mod read;
pub mod undo;

pub use crate::base::signing::Key;
pub use read::{load, RunChanges, Trust};
pub use undo::{apply, changed_by, plan_undo, ChangedBy, Step};

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::run_id::RunId;
use crate::base::vault::{Durability, Vault, VaultError, VaultPath};
use crate::setup::config::JournalConfig;

const ROOT: &str = crate::base::vault::layout::JOURNAL;

/// What a journal line's MAC is for (see `base::signing`).
const LINE: &str = "tabd journal line";

/// The trigger of an undo's own journal (`tabd undo`): it puts back earlier states, so it is
/// never named as the one who changed a file.
pub const UNDO_TRIGGER: &str = "undo";

/// The marks (outside the vault) of journals still open: their run has not closed them.
const OPEN: &str = "open-journals";

/// The full SHA-256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn fixed(path: &str) -> Result<VaultPath, VaultError> {
    VaultPath::parse(path, false)
}

/// A run's journal file: its id is checked (`RunId`), so it names one file in `runs/`.
fn entry_path(run_id: &RunId) -> Result<VaultPath, VaultError> {
    fixed(&format!("{ROOT}/runs/{run_id}.jsonl"))
}

fn blob_path(hash: &str) -> Result<VaultPath, VaultError> {
    fixed(&format!("{ROOT}/blobs/{hash}"))
}

/// A file's state: its content's digest, or `None` when it does not exist. The file is hashed as
/// it is read (any size, in constant memory: a file a run touched may have grown since by any
/// other hand).
pub fn state_of(vault: &Vault, path: &VaultPath) -> Result<Option<String>, VaultError> {
    let mut file = match vault.open_regular(path) {
        Ok((file, _)) => file,
        Err(VaultError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match std::io::Read::read(&mut file, &mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(crate::base::vault::io_error(path, &e)),
        }
    }
    Ok(Some(
        hasher.finalize().iter().map(|b| format!("{b:02x}")).collect(),
    ))
}

/// The most of one file's prior content a journal keeps for undo: the journal's own size limit
/// (`[journal] max_mib`). A larger file could not be kept through the next prune anyway; tabd
/// never writes such a copy (the change is refused), so it never reads one back either — a
/// larger "copy" in `.tabd/journal/blobs/` was put there by someone else.
pub fn max_kept(config: &JournalConfig) -> u64 {
    config.max_mib.saturating_mul(1024 * 1024)
}

/// `cap` (`max_kept`) as a person reads it: `209,715,200 bytes ([journal] max_mib = 200)`.
fn kept_text(cap: u64) -> String {
    format!(
        "{} bytes ([journal] max_mib = {})",
        crate::base::text::thousands(cap),
        cap / (1024 * 1024)
    )
}

/// Why a change of `path` (`size` bytes, over `cap`: `max_kept`) is refused: it could not be
/// undone.
pub fn too_large_to_keep(path: &VaultPath, size: u64, cap: u64) -> String {
    format!(
        "{path} is {} bytes, more than the {} the undo journal keeps of one file: it is not changed, \
         since the change could not be undone",
        crate::base::text::thousands(size),
        kept_text(cap)
    )
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

/// The journal of one run: written as the run changes files.
#[derive(Debug)]
pub struct RunJournal {
    vault: Arc<Vault>,
    key: Arc<Key>,
    run_id: RunId,
    header: Line,
    files: Mutex<Files>,
    /// `journal-first-change`: abort once the run's first change is journaled, before it is made.
    faults: crate::base::faults::Faults,
    /// The most of one file it keeps (`max_kept`): a larger file is not changed.
    max_kept: u64,
}

/// The files a run journaled, and those changed since its last `settle`.
#[derive(Debug, Default)]
struct Files {
    seen: Vec<String>,
    unsettled: Vec<String>,
    /// Journaled as appended to (no copy kept): the prior length and digest.
    appended: HashMap<String, (u64, String)>,
    /// The number of the next line (`None`: not known yet — counted from the file at the first
    /// write, as a resumed run's second part goes on with its first part's journal).
    next: Option<u64>,
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
        run_id: &RunId,
        role: &str,
        started_at: DateTime<Utc>,
        trigger: &str,
    ) -> Self {
        Self {
            vault,
            key,
            run_id: run_id.clone(),
            header: Line::Header {
                run_id: run_id.to_string(),
                role: role.to_string(),
                started_at,
                trigger: trigger.to_string(),
            },
            files: Mutex::new(Files::default()),
            faults: Default::default(),
            max_kept: max_kept(&JournalConfig::default()),
        }
    }

    /// Keeping at most `bytes` of one file (`max_kept` of the config in use).
    pub fn with_max_kept(mut self, bytes: u64) -> Self {
        self.max_kept = bytes;
        self
    }

    /// The most of one file it keeps.
    pub fn max_kept(&self) -> u64 {
        self.max_kept
    }

    /// With the crash-test points of `TABD_FAULTS` (see `base::faults`).
    pub fn with_faults(mut self, faults: crate::base::faults::Faults) -> Self {
        self.faults = faults;
        self
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Keeps `path`'s state before this run first changes it. An `Err` means the change must
    /// not happen (it could not be undone).
    pub fn before_change(&self, path: &VaultPath) -> Result<(), VaultError> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.touch(path) {
            return match files.appended.remove(path.as_str()) {
                Some(kept) => self.keep_prefix(&mut files, path, kept),
                None => Ok(()),
            };
        }
        // Over `max_kept` it is `TooLarge`, unread: the change is refused (`too_large_to_keep`).
        let before = match self.vault.read_bytes(path, self.max_kept) {
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
    fn keep_prefix(
        &self,
        files: &mut Files,
        path: &VaultPath,
        (len, hash): (u64, String),
    ) -> Result<(), VaultError> {
        let bytes = read_head(&self.vault, path, len)?;
        let prior = bytes.get(..len as usize).filter(|b| digest(b) == hash).ok_or_else(|| {
            VaultError::Refused(format!(
                "{path} changed under this run after it appended to it; its earlier content cannot be kept for undo"
            ))
        })?;
        let blob = blob_path(&hash)?;
        if !self.vault.exists(&blob) {
            self.vault.write_atomic_with(&blob, prior, Durability::None)?;
        }
        let line = Line::Before {
            path: path.as_str().to_string(),
            before: Some(hash),
            prefix: None,
        };
        self.write(files, &[&line])
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
        let line = Line::Before {
            path: path.as_str().to_string(),
            before,
            prefix,
        };
        if files.seen.is_empty() {
            // Open until the closing line: a journal cut off without this mark had its end removed.
            // Not synced, as the journal is not: a power cut may lose both (the last run's undo).
            if let Err(e) = self.key.mark(OPEN, &self.run_id, false) {
                tracing::debug!("journal {}: cannot mark it open: {e}", self.run_id);
            }
            self.write(files, &[&self.header, &line])?;
            self.faults.abort_at("journal-first-change");
        } else {
            self.write(files, &[&line])?;
        }
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
        let mut lines = Vec::new();
        for p in std::mem::take(&mut files.unsettled) {
            let after = state_of(&self.vault, &fixed(&p)?)?;
            lines.push(Line::After { path: p, after });
        }
        self.write(&mut files, &lines.iter().collect::<Vec<_>>())
    }

    /// Appends `lines`, each numbered and signed.
    fn write(&self, files: &mut Files, lines: &[&Line]) -> Result<(), VaultError> {
        let (mut seq, mut text) = match files.next.take() {
            Some(n) => (n, String::new()),
            None => self.go_on()?,
        };
        for l in lines {
            text.push_str(&self.signed(l, seq));
            seq += 1;
        }
        // On an error the count is read from the file again (part of the text may be there).
        append_entry(&self.vault, &self.run_id, &text)?;
        files.next = Some(seq);
        Ok(())
    }

    /// Where this run's journal goes on: the number of lines it has (none, but for a resumed
    /// run's second part), and a line break first if its last line was torn by a crash.
    fn go_on(&self) -> Result<(u64, String), VaultError> {
        let text = match read::text_of(&self.vault, &self.run_id) {
            Ok(text) => text,
            Err(VaultError::NotFound(_)) => return Ok((0, String::new())),
            Err(e) => return Err(e),
        };
        let lines = text
            .lines()
            .filter(|l| read::read_line(l, &self.run_id, None).is_some())
            .count() as u64;
        let torn = !text.is_empty() && !text.ends_with('\n');
        Ok((lines, if torn { "\n".into() } else { String::new() }))
    }

    /// A line with its number and MAC: the MAC covers the run, the number and the line.
    fn signed(&self, l: &Line, seq: u64) -> String {
        let body = serde_json::to_string(l).unwrap_or_default();
        let mac = self.key.mac(
            LINE,
            &[
                self.run_id.as_bytes(),
                seq.to_string().as_bytes(),
                body.as_bytes(),
            ],
        );
        // The object with two more fields: `{…,"seq":N,"mac":"…"}`.
        format!(
            "{},\"seq\":{seq},\"mac\":\"{mac}\"}}\n",
            &body[..body.len().saturating_sub(1)]
        )
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
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if files.seen.is_empty() && moved.is_empty() {
            return Ok(());
        }
        let mut left = BTreeMap::new();
        for p in &files.seen {
            left.insert(p.clone(), state_of(&self.vault, &fixed(p)?)?);
        }
        let sealed = Line::Sealed {
            sealed_at: now,
            left,
            moved: moved.to_vec(),
        };
        if files.seen.is_empty() {
            self.write(&mut files, &[&self.header, &sealed])?;
        } else {
            self.write(&mut files, &[&sealed])?;
        }
        // Neither is synced (a sync per run cost ~10 ms on a busy disk): after a power cut the
        // last run's journal may be lost, or read as cut off and refused — its undo, either way.
        self.key.unmark(OPEN, &self.run_id);
        Ok(())
    }
}

/// Forgets the open-journal marks older than `keep_days` (runs cut off that long ago: their
/// journals are pruned by then).
pub fn forget_open_marks(key: &Key, keep_days: u32) -> usize {
    key.forget_marks_older_than(
        OPEN,
        std::time::Duration::from_secs(u64::from(keep_days) * 24 * 3600),
    )
}

/// Appends to a run's journal file, its folder made on first use.
fn append_entry(vault: &Vault, run_id: &RunId, text: &str) -> Result<(), VaultError> {
    let path = entry_path(run_id)?;
    vault.create_dir_all(&path.parent())?;
    vault.append(&path, text, None, false)
}

/// Every journaled run id, oldest first (ids start with their UTC start time). A file whose name
/// is no run id is none of tabd's journals: it is passed over.
pub fn run_ids(vault: &Vault) -> Vec<RunId> {
    let Ok(dir) = fixed(&format!("{ROOT}/runs")) else {
        return Vec::new();
    };
    let mut ids: Vec<RunId> = vault
        .list(&dir)
        .map(|l| {
            l.entries
                .into_iter()
                .filter_map(|e| e.path.file_name().strip_suffix(".jsonl").map(RunId::parse)?.ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// A run's prior content of a file, at most `cap` bytes (`max_kept`: more than tabd keeps is
/// `TooLarge`, never read).
pub fn blob(vault: &Vault, hash: &str, cap: u64) -> Result<Vec<u8>, VaultError> {
    vault.read_bytes(&blob_path(hash)?, cap).map(|(b, _)| b)
}

/// The first `len` bytes of `path` (fewer if it is shorter), the rest never read.
fn read_head(vault: &Vault, path: &VaultPath, len: u64) -> Result<Vec<u8>, VaultError> {
    use std::io::Read;
    let (file, entry) = vault.open_regular(path)?;
    let mut bytes = Vec::with_capacity(len.min(entry.size) as usize);
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::base::vault::io_error(path, &e))?;
    Ok(bytes)
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
    let mut kept: VecDeque<(RunId, u64, Vec<String>)> = Default::default();
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
mod tests;
