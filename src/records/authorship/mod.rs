//! Whose a vault file is (docs/spec.md §26, "a person's notes are theirs"): **tabd's** — made by
//! `tabd init` or by a run, and still holding exactly what tabd last left in it — or **the
//! person's**: everything else, including a note tabd made that the person has since edited
//! (their words are in it now). A role may create files and change tabd's; a change to the
//! person's waits for their approval (the harness asks, `access::AccessPolicy::person_note_mode`
//! says whether the role was granted them).
//!
//! The record is `.tabd/authorship.json`: each file tabd made, with the digest of what tabd last
//! left in it. It is sealed with tabd's key (`base::signing`), because it decides an action: a
//! forged entry would be a grant to change a person's note. What the record cannot vouch for is
//! the person's: a missing or refused record makes every existing file the person's until it is
//! rebuilt — never the other way round. It is rebuilt from evidence only: the signed undo journal
//! (a file a run created, still holding what the last run that changed it left) and the files
//! `tabd init` writes (still byte for byte the template's).
//!
//! Content, not inode: a sync tool or editor that replaces a file keeps it tabd's when its bytes
//! are tabd's, and a note the person deleted and wrote again at the same path is theirs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::base::signing::Key;
use crate::base::vault::{layout, Durability, Vault, VaultError, VaultPath};
use crate::records::journal;

/// What the record's seal is for (see `base::signing`).
const PURPOSE: &str = "tabd authorship record";

/// The largest record read (some 10,000 files tabd made take about 1 MiB).
const MAX_RECORD_BYTES: u64 = 64 * 1024 * 1024;

/// Whose a file is, as far as tabd can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// Nothing is there: whoever writes it makes it.
    Absent,
    /// tabd made it and it holds what tabd last left.
    Tabds,
    /// The person's: tabd did not make it, or it changed since tabd last wrote it.
    Persons,
}

/// The record on disk: each file tabd made, with the digest of what tabd last left in it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    files: BTreeMap<String, String>,
}

/// Why the record was not used as it stands.
#[derive(Debug, thiserror::Error)]
enum NotUsed {
    #[error("it is not there")]
    Missing,
    #[error("its seal does not verify (it was edited, or sealed with another key)")]
    Refused,
    #[error("it cannot be read as a record: {0}")]
    Unreadable(serde_json::Error),
}

/// The authorship record of one vault, read and changed under its lock.
#[derive(Debug, Clone)]
pub struct Authorship {
    vault: Arc<Vault>,
    key: Arc<Key>,
}

fn fixed(path: &str) -> Result<VaultPath, VaultError> {
    VaultPath::parse(path, false)
}

impl Authorship {
    pub fn new(vault: Arc<Vault>, key: Arc<Key>) -> Self {
        Self { vault, key }
    }

    /// Whose `path` (a real path: after `AccessPolicy::check_write`) is. A folder is the
    /// person's when any file in it is.
    pub fn whose(&self, path: &VaultPath) -> Result<Whose, VaultError> {
        let record = self.load()?;
        self.whose_in(&record, path)
    }

    /// Whose each of `paths` is, the record read once.
    pub fn whose_each(&self, paths: &[VaultPath]) -> Result<Vec<Whose>, VaultError> {
        let record = self.load()?;
        paths.iter().map(|p| self.whose_in(&record, p)).collect()
    }

    /// Whether the record names `path` at all (cheap: no file is read).
    pub fn names(&self, paths: &[VaultPath]) -> Result<Vec<bool>, VaultError> {
        let record = self.load()?;
        Ok(paths
            .iter()
            .map(|p| record.files.contains_key(p.as_str()))
            .collect())
    }

    fn whose_in(&self, record: &Record, path: &VaultPath) -> Result<Whose, VaultError> {
        let meta = match self.vault.metadata(path) {
            Ok(m) => m,
            Err(VaultError::NotFound(_)) => return Ok(Whose::Absent),
            Err(e) => return Err(e),
        };
        if meta.is_dir {
            return self.folder_in(record, path);
        }
        // A file `tabd init` wrote is tabd's while it holds the template's bytes, whether or not
        // the record has it yet (init runs without tabd's key).
        let template =
            crate::base::template::digest_of(path.as_str(), self.vault.layout(), &self.vault.log_folder());
        let Some(left) = record.files.get(path.as_str()).or(template.as_ref()) else {
            return Ok(Whose::Persons);
        };
        Ok(match journal::state_of(&self.vault, path)? {
            None => Whose::Absent,
            Some(now) if now == *left => Whose::Tabds,
            Some(_) => Whose::Persons,
        })
    }

    /// Whose the folder `dir` is: tabd's when every file in it is. A name tabd cannot read as a
    /// vault path (not UTF-8, `…` in a title, a link that leads nowhere) is in it all the same, and
    /// moves with it: it is the person's (`Vault::walk` leaves such names out).
    fn folder_in(&self, record: &Record, dir: &VaultPath) -> Result<Whose, VaultError> {
        let mut stack = vec![dir.clone()];
        while let Some(current) = stack.pop() {
            let listing = self.vault.list(&current)?;
            if !listing.odd.is_empty() {
                return Ok(Whose::Persons);
            }
            for entry in listing.entries {
                if entry.is_dir && !entry.is_symlink {
                    stack.push(entry.path);
                } else if !entry.is_dir && self.whose_in(record, &entry.path)? != Whose::Tabds {
                    return Ok(Whose::Persons);
                }
            }
        }
        Ok(Whose::Tabds)
    }

    /// After tabd changed `path`, which was `was` just before: a file tabd made (or had made)
    /// is recorded with what it holds now, or dropped when it is gone; the person's stays
    /// theirs (an approved change does not make a note tabd's: an entry from a file tabd once
    /// made at that path is dropped, whatever bytes the change left). A folder's files each follow.
    pub fn settle(&self, changed: &[(VaultPath, Whose)]) -> Result<(), VaultError> {
        let whose = |persons: bool| -> Vec<&VaultPath> {
            changed
                .iter()
                .filter(|(_, was)| (*was == Whose::Persons) == persons)
                .map(|(p, _)| p)
                .collect()
        };
        let (theirs, ours) = (whose(true), whose(false));
        if ours.is_empty() && !self.names_any(&theirs)? {
            return Ok(());
        }
        self.update(|vault, record| {
            for path in theirs {
                forget(record, path);
            }
            for path in ours {
                settle_one(vault, record, path)?;
            }
            Ok(())
        })
    }

    /// tabd moved `from` (which was `was`) to `to`: the record follows the file; the person's
    /// note stays theirs at its new place (an entry there from a file tabd once made is dropped).
    pub fn moved(&self, from: &VaultPath, to: &VaultPath, was: Whose) -> Result<(), VaultError> {
        if was == Whose::Persons {
            if !self.names_any(&[from, to])? {
                return Ok(());
            }
            return self.update(|_, record| {
                forget(record, from);
                forget(record, to);
                Ok(())
            });
        }
        self.update(|vault, record| {
            forget(record, from);
            settle_one(vault, record, to)
        })
    }

    /// Whether the record names any of `paths`, or a file in one (no update is needed otherwise).
    fn names_any(&self, paths: &[&VaultPath]) -> Result<bool, VaultError> {
        if paths.is_empty() {
            return Ok(false);
        }
        let record = self.load()?;
        Ok(paths.iter().any(|p| record.files.keys().any(|k| is_at(k, p))))
    }

    /// Files tabd wrote outside a run (`tabd init`): each recorded with what it holds now.
    pub fn made(&self, paths: &[VaultPath]) -> Result<(), VaultError> {
        self.update(|vault, record| {
            for path in paths {
                settle_one(vault, record, path)?;
            }
            Ok(())
        })
    }

    /// An undo put `path` back from `before` (its digest then; `None`: absent) to `after`: a file
    /// the record knew as tabd's follows; any other is not made tabd's by an undo.
    pub fn restored(
        &self,
        path: &VaultPath,
        before: Option<&str>,
        after: Option<&str>,
    ) -> Result<(), VaultError> {
        self.update(|_, record| {
            let known = record.files.get(path.as_str()).map(String::as_str);
            if known.is_none() || known != before {
                return Ok(());
            }
            match after {
                Some(d) => record.files.insert(path.as_str().to_string(), d.to_string()),
                None => record.files.remove(path.as_str()),
            };
            Ok(())
        })
    }

    /// The record as it stands: rebuilt from evidence when it is missing or cannot be trusted.
    fn load(&self) -> Result<Record, VaultError> {
        match self.read() {
            Ok(r) => Ok(r),
            Err(ReadFailed::Vault(e)) => Err(e),
            Err(ReadFailed::NotUsed(why)) => {
                if !matches!(why, NotUsed::Missing) {
                    tracing::warn!(
                        "{}: {why}; rebuilding it from the undo journal and the template (files tabd made \
                         that neither vouches for count as yours, and changes to them wait for approval)",
                        layout::AUTHORSHIP
                    );
                }
                let _lock = self.lock()?;
                // Another process may have rebuilt it meanwhile.
                match self.read() {
                    Ok(r) => Ok(r),
                    Err(ReadFailed::Vault(e)) => Err(e),
                    Err(ReadFailed::NotUsed(_)) => {
                        let record = rebuild(&self.vault, &self.key);
                        self.save(&record)?;
                        Ok(record)
                    }
                }
            }
        }
    }

    fn read(&self) -> Result<Record, ReadFailed> {
        let bytes = match fixed(layout::AUTHORSHIP).and_then(|p| self.vault.read_bytes(&p, MAX_RECORD_BYTES))
        {
            Ok((b, _)) => b,
            Err(VaultError::NotFound(_)) => return Err(ReadFailed::NotUsed(NotUsed::Missing)),
            Err(e) => return Err(ReadFailed::Vault(e)),
        };
        let body = self
            .key
            .open(PURPOSE, &[], &bytes)
            .map_err(|_| ReadFailed::NotUsed(NotUsed::Refused))?;
        // Sealed by tabd's key before it is parsed: tabd's own bytes, not text from outside.
        serde_json::from_slice::<Record>(body).map_err(|e| ReadFailed::NotUsed(NotUsed::Unreadable(e)))
    }

    fn save(&self, record: &Record) -> Result<(), VaultError> {
        let body = serde_json::to_vec(record).map_err(|e| VaultError::Io(e.to_string()))?;
        let sealed = self.key.seal(PURPOSE, &[], &body);
        self.vault
            .write_atomic_with(&fixed(layout::AUTHORSHIP)?, &sealed, Durability::File)
    }

    fn lock(&self) -> Result<Option<crate::base::vault::FileLock>, VaultError> {
        self.vault.lock(&fixed(layout::AUTHORSHIP_LOCK)?, true)
    }

    fn update(
        &self,
        change: impl FnOnce(&Vault, &mut Record) -> Result<(), VaultError>,
    ) -> Result<(), VaultError> {
        let mut record = self.load()?;
        let _lock = self.lock()?;
        // Read again under the lock: another run may have recorded meanwhile.
        if let Ok(fresh) = self.read() {
            record = fresh;
        }
        change(&self.vault, &mut record)?;
        self.save(&record)
    }
}

enum ReadFailed {
    Vault(VaultError),
    NotUsed(NotUsed),
}

/// Whether the record's key `key` is `path` or a file in it.
fn is_at(key: &str, path: &VaultPath) -> bool {
    key == path.as_str()
        || key
            .strip_prefix(path.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Drops what the record says of `path` (and, for a folder, of each file in it).
fn forget(record: &mut Record, path: &VaultPath) {
    record.files.retain(|k, _| !is_at(k, path));
}

/// Records what `path` holds now (each file, for a folder), or drops it when it is gone.
fn settle_one(vault: &Vault, record: &mut Record, path: &VaultPath) -> Result<(), VaultError> {
    match vault.metadata(path) {
        Ok(m) if m.is_dir => {
            for entry in vault.walk(path, true, &|_| false)?.iter().filter(|e| !e.is_dir) {
                settle_one(vault, record, &entry.path)?;
            }
            Ok(())
        }
        Ok(_) | Err(VaultError::NotFound(_)) => {
            match journal::state_of(vault, path)? {
                Some(d) => record.files.insert(path.as_str().to_string(), d),
                None => record.files.remove(path.as_str()),
            };
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The record as the evidence tabd has makes it: files the signed undo journal says a run
/// created, holding what the last run that changed them left. (Files `tabd init` wrote need no
/// record: their bytes are the template's, `whose_in` checks them.)
///
/// "Absent before" is not always "made": the journal keeps a move as its two ends, the new place
/// absent before, and an undo puts a moved note back at a place absent before. So an undo's
/// journal makes nothing tabd's (as `restored` at run time), and a run that moved away a file
/// that was not tabd's proves none of the files it "created" — one of them is that file, whose
/// words are still the person's (`moved` at run time keeps it theirs). Such files ask once more.
fn rebuild(vault: &Vault, key: &Key) -> Record {
    let mut runs: Vec<journal::RunChanges> = journal::run_ids(vault)
        .iter()
        .filter_map(|id| journal::load(vault, id, Some(key)).ok())
        .filter(|r| matches!(r.trust, journal::Trust::Whole | journal::Trust::Unnumbered))
        .collect();
    runs.sort_by_key(|r| r.started_at);
    // What tabd last left in each file it made, run after run.
    let mut left: BTreeMap<String, String> = BTreeMap::new();
    for run in &runs {
        let was_ours =
            |path: &String, prior: &String, left: &BTreeMap<String, String>| left.get(path) == Some(prior);
        let moved_theirs = run.before.iter().any(|(path, before)| {
            before
                .as_ref()
                .is_some_and(|prior| !was_ours(path, prior, &left) && run.left_of(path) == Some(&None))
        });
        let makes = run.trigger != journal::UNDO_TRIGGER && !moved_theirs;
        for (path, before) in &run.before {
            let ours = match before {
                None => makes,
                Some(prior) => was_ours(path, prior, &left),
            };
            match (ours, run.left_of(path)) {
                (true, Some(Some(now))) => left.insert(path.clone(), now.clone()),
                _ => left.remove(path),
            };
        }
    }
    let mut record = Record::default();
    for (path, digest) in left {
        let Ok(p) = VaultPath::parse(&path, false) else {
            continue;
        };
        if journal::state_of(vault, &p).ok().flatten().as_deref() == Some(digest.as_str()) {
            record.files.insert(path, digest);
        }
    }
    record
}

#[cfg(test)]
mod tests;
