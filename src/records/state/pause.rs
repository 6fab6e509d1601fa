//! The person's pauses (docs/spec.md §28: `tabd pause ROLE | --all [--for D]`, `tabd resume`): which
//! roles nothing may run of, since when and until when, as this device keeps them in
//! `.tabd/pause/pauses.json` — a file of its own, in a folder of its own, so the daemon's watch on
//! that folder hears `tabd pause` at once and nothing else (its own state writes land elsewhere),
//! and a state file set aside as garbled never takes a pause with it.
//!
//! **A pause is never lost without a word.** Each pause in force is also *marked* beside tabd's
//! key (`base::signing`: outside the vault, where no sync tool or restore reaches), and the mark
//! is taken off only when the pause ends through tabd (resume, expiry). So:
//!
//! - a file restored from an older copy, or synced back, that no longer holds a pause whose mark
//!   is on: that pause still holds, said as held for want of its record, until `tabd resume`;
//! - a file that cannot be read (garbled, not a file): every role is held, and said so, until
//!   `tabd resume --all` writes it anew — fail closed, since it exists only because someone paused;
//! - a record whose mark is gone (the key's folder wiped, another machine): the record holds.
//!
//! With `[cluster]` the same book is kept in the cluster (`capabilities::cluster::pause`), and
//! each daemon mirrors it here (`shared` entries), so every door of this device — the daemon,
//! `tabd fire`, `tabd mcp serve`, a `delegate` call — reads one file, and a restart with the
//! servers out of reach still holds what the cluster last said.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::signing::Key;
use crate::base::vault::{Durability, Vault, VaultError, VaultPath};

use crate::base::vault::layout::TABD;

/// The folder the pause book lives in, in `.tabd/` (the daemon watches it); this device's
/// `.tabd/` with `[cluster]` (`Vault::for_device`).
pub const FOLDER_NAME: &str = "pause";
const FILE_NAME: &str = "pauses.json";
/// Beside the folder, not in it: taking the lock is no event for the daemon.
const LOCK_NAME: &str = "pause.lock";
/// The kind of the marks beside tabd's key (`base::signing`).
const MARK: &str = "paused";
const VERSION: u32 = 1;
/// The book holds a handful of pauses; anything larger is not one tabd wrote.
const MAX_BYTES: u64 = 4 * 1024 * 1024;
/// How long ended pauses are kept: a daemon that starts after a week away still knows which of
/// the slots it missed fell in a pause (skipped, not caught up).
const ENDED_KEPT_DAYS: i64 = 8;

/// What a pause holds: every role, or one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    All,
    Role(String),
}

impl Target {
    /// Whether it holds `role`.
    pub fn covers(&self, role: &str) -> bool {
        match self {
            Target::All => true,
            Target::Role(r) => r == role,
        }
    }

    /// `every role`, or the role's name.
    pub fn words(&self) -> String {
        match self {
            Target::All => "every role".into(),
            Target::Role(r) => r.clone(),
        }
    }

    /// How `tabd resume` names it: `--all`, or the role.
    pub fn resume_arg(&self) -> String {
        match self {
            Target::All => "--all".into(),
            Target::Role(r) => r.clone(),
        }
    }

    /// The role it names (`None`: every role).
    pub fn role(&self) -> Option<&str> {
        match self {
            Target::All => None,
            Target::Role(r) => Some(r),
        }
    }
}

/// One pause, as it was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    pub target: Target,
    pub since: DateTime<Utc>,
    /// `--for`: it ends by itself then; `None`: until `tabd resume`.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// The device (host) it was asked on.
    #[serde(default)]
    pub by: String,
    /// Held in the cluster as well, so on every device (`false`: this device only).
    #[serde(default)]
    pub shared: bool,
    /// Its push went out (once, across restarts).
    #[serde(default)]
    pub told: bool,
}

impl Pause {
    /// Whether it holds at `now` (its `--for` not over).
    pub fn holds(&self, now: DateTime<Utc>) -> bool {
        self.until.is_none_or(|u| now < u)
    }
}

/// How a pause ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// `tabd resume`.
    Resumed,
    /// Its `--for` was over.
    Expired,
}

/// A pause that ended, kept a week: which slots fell in it, and whether its end was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    pub target: Target,
    pub since: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    pub how: How,
    /// Where it was ended (the device of the resume; the pause's own for an expiry).
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub shared: bool,
    #[serde(default)]
    pub told: bool,
}

/// The pauses of a vault: those asked (in force, or over and not yet moved to `ended`) and those
/// that ended. The same shape in the cluster (`generation` counts its writes there; here, the
/// cluster's generation this device mirrored last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Book {
    pub version: u32,
    pub pauses: Vec<Pause>,
    pub ended: Vec<Ended>,
    pub generation: u64,
}

impl Book {
    /// The pause of `target` in force at `now`, if any.
    pub fn of(&self, target: &Target, now: DateTime<Utc>) -> Option<&Pause> {
        self.pauses.iter().find(|p| &p.target == target && p.holds(now))
    }

    /// Pauses `target` from `now` (until `until`; `None`: until resumed). A pause already in
    /// force keeps its start and gets the new end. Returns the pause as it is now.
    pub fn pause(
        &mut self,
        target: Target,
        now: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
        by: &str,
        shared: bool,
    ) -> Pause {
        self.expire(now);
        if let Some(p) = self.pauses.iter_mut().find(|p| p.target == target) {
            p.until = until;
            p.by = by.to_string();
            p.shared = shared;
            return p.clone();
        }
        let p = Pause {
            target,
            since: now,
            until,
            by: by.to_string(),
            shared,
            told: false,
        };
        self.pauses.push(p.clone());
        p
    }

    /// Ends the pauses `which` names (`None`: every one) at `now`; returns those that ended.
    pub fn resume(&mut self, which: Option<&Target>, now: DateTime<Utc>, by: &str) -> Vec<Ended> {
        self.expire(now);
        let (gone, kept): (Vec<Pause>, Vec<Pause>) = std::mem::take(&mut self.pauses)
            .into_iter()
            .partition(|p| which.is_none_or(|t| &p.target == t));
        self.pauses = kept;
        let ended: Vec<Ended> = gone
            .into_iter()
            .map(|p| ended_of(p, now, How::Resumed, by))
            .collect();
        self.ended.extend(ended.iter().cloned());
        ended
    }

    /// Moves the pauses whose `--for` is over by `now` to `ended`, and forgets ended pauses older
    /// than a week; returns those that ended now.
    pub fn expire(&mut self, now: DateTime<Utc>) -> Vec<Ended> {
        let (over, kept): (Vec<Pause>, Vec<Pause>) = std::mem::take(&mut self.pauses)
            .into_iter()
            .partition(|p| !p.holds(now));
        self.pauses = kept;
        let ended: Vec<Ended> = over
            .into_iter()
            .map(|p| {
                let at = p.until.unwrap_or(now);
                let by = p.by.clone();
                ended_of(p, at, How::Expired, &by)
            })
            .collect();
        self.ended.extend(ended.iter().cloned());
        self.ended
            .retain(|e| now - e.ended < chrono::Duration::days(ENDED_KEPT_DAYS));
        ended
    }

    /// Takes the cluster's book `shared` in: this device's copies of shared pauses become the
    /// cluster's (what they were told kept), a shared pause the cluster no longer holds ends here
    /// as it ended there; pauses of this device only stay. Whether anything changed.
    pub fn mirror(&mut self, shared: &Book, now: DateTime<Utc>) -> bool {
        let before = self.clone();
        let theirs: Vec<&Pause> = shared.pauses.iter().filter(|p| p.holds(now)).collect();
        let (mine, only_here): (Vec<Pause>, Vec<Pause>) = std::mem::take(&mut self.pauses)
            .into_iter()
            .partition(|p| p.shared);
        for gone in mine
            .iter()
            .filter(|m| !theirs.iter().any(|t| t.target == m.target && t.since == m.since))
        {
            let there = shared
                .ended
                .iter()
                .find(|e| e.target == gone.target && e.since == gone.since);
            let (at, how, by) = there.map_or((now, How::Resumed, String::new()), |e| {
                (e.ended, e.how, e.by.clone())
            });
            self.ended.push(ended_of(gone.clone(), at, how, &by));
        }
        self.pauses = only_here
            .into_iter()
            .filter(|p| !theirs.iter().any(|t| t.target == p.target))
            .collect();
        for t in theirs {
            let told = mine
                .iter()
                .any(|m| m.target == t.target && m.since == t.since && m.told);
            self.pauses.push(Pause {
                shared: true,
                told,
                ..t.clone()
            });
        }
        self.generation = shared.generation;
        *self != before
    }
}

fn ended_of(p: Pause, at: DateTime<Utc>, how: How, by: &str) -> Ended {
    Ended {
        target: p.target,
        since: p.since,
        ended: at,
        how,
        by: by.to_string(),
        shared: p.shared,
        told: false,
    }
}

/// A pause that holds on this device now.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub target: Target,
    /// `None`: not known (its record is gone).
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub by: String,
    pub shared: bool,
    /// Why it holds without a record of it (a restored copy, a file that cannot be read): said
    /// wherever it is shown.
    pub unrecorded: Option<String>,
}

impl Held {
    /// Why nothing of `role` may run, for a door that refuses it (`tabd fire`, `tabd mcp serve`,
    /// a `delegate` call): what holds it, until when, and the command that ends it.
    pub fn refusal(&self, role: &str, tz: chrono_tz::Tz) -> String {
        if let Some(why) = &self.unrecorded {
            return format!("`{role}` is paused: {why}");
        }
        let until = self.until.map_or_else(
            || "until you resume it".to_string(),
            |u| format!("until {}", crate::base::text::shown(u, tz)),
        );
        match &self.target {
            Target::All => format!(
                "every role is paused (`tabd pause --all`) {until}, `{role}` with them: nothing of it runs; `tabd resume --all` ends the pause"
            ),
            Target::Role(_) => format!(
                "`{role}` is paused (`tabd pause {role}`) {until}: nothing of it runs; `tabd resume {role}` ends the pause"
            ),
        }
    }
}

/// Every pause that holds on this device now, by what it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paused(pub BTreeMap<Target, Held>);

impl Paused {
    /// The pause that holds `role`: `--all` first (it says more), else the role's own.
    pub fn of(&self, role: &str) -> Option<&Held> {
        self.0
            .get(&Target::All)
            .or_else(|| self.0.get(&Target::Role(role.to_string())))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Held> {
        self.0.values()
    }

    /// The soonest end of a pause that ends by itself.
    pub fn next_end(&self) -> Option<DateTime<Utc>> {
        self.0.values().filter_map(|h| h.until).min()
    }
}

/// What reading the book found.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// No pause was ever asked on this device (or the file was removed).
    Missing,
    Book(Book),
    /// It is there and cannot be read as a book: why.
    Unreadable(String),
}

impl Read {
    /// From the file's bytes (`None`: no file).
    pub fn parse(bytes: Option<&[u8]>) -> Read {
        match bytes {
            None => Read::Missing,
            Some(b) => match serde_json::from_slice::<Book>(b) {
                Ok(book) => Read::Book(book),
                Err(e) => Read::Unreadable(format!("it is not a pause book tabd wrote ({e})")),
            },
        }
    }
}

/// Why the book could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    #[error("cannot write the pauses (.tabd/{FOLDER_NAME}/{FILE_NAME}): {0}")]
    Vault(#[from] VaultError),
    #[error("cannot write the pauses (.tabd/{FOLDER_NAME}/{FILE_NAME}): {0}")]
    Encode(String),
}

/// Where this device's pauses are kept, and the marks that keep them from being lost.
#[derive(Clone)]
pub struct PauseStore {
    vault: Arc<Vault>,
    /// tabd's key: its marks (`None`: no marks, e.g. a test's key).
    key: Option<Arc<Key>>,
}

impl std::fmt::Debug for PauseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PauseStore").finish_non_exhaustive()
    }
}

fn fixed(path: &str) -> VaultPath {
    match VaultPath::parse(path, false) {
        Ok(p) => p,
        Err(e) => panic!("invariant: {path} is a valid vault path ({e})"),
    }
}

/// The book's folder in the vault (`.tabd/pause`).
pub fn folder() -> VaultPath {
    fixed(&format!("{TABD}/{FOLDER_NAME}"))
}

/// The book (`.tabd/pause/pauses.json`), as the person reads it in a message.
pub fn file() -> String {
    format!("{TABD}/{FOLDER_NAME}/{FILE_NAME}")
}

fn lock() -> VaultPath {
    fixed(&format!("{TABD}/{LOCK_NAME}"))
}

impl PauseStore {
    pub fn new(vault: Arc<Vault>, key: Option<Arc<Key>>) -> Self {
        Self { vault, key }
    }

    /// The book's folder as it really is on disk, for the daemon to watch: with `[cluster]`,
    /// this device's `.tabd/devices/<name>/` (as `Vault::for_device` places every `.tabd/` path).
    pub fn folder(&self) -> std::path::PathBuf {
        let tabd = self.vault.root().join(TABD);
        match self.vault.device() {
            Some(d) => tabd.join("devices").join(d).join(FOLDER_NAME),
            None => tabd.join(FOLDER_NAME),
        }
    }

    /// The file's bytes (`None`: there is none).
    pub fn bytes(&self) -> Result<Option<Vec<u8>>, VaultError> {
        match self.vault.read_bytes(&fixed(&file()), MAX_BYTES) {
            Ok((b, _)) => Ok(Some(b)),
            Err(VaultError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn read(&self) -> Read {
        match self.bytes() {
            Ok(b) => Read::parse(b.as_deref()),
            Err(e) => Read::Unreadable(e.to_string()),
        }
    }

    /// What holds on this device at `now`, for roles named `roles` (their marks are looked at).
    pub fn paused(&self, now: DateTime<Utc>, roles: &[&str]) -> Paused {
        self.paused_from(&self.read(), now, roles)
    }

    /// Why nothing of `role` may run now, if a pause holds it (its sentence: `Held::refusal`).
    pub fn refusal(&self, role: &str, now: DateTime<Utc>, tz: chrono_tz::Tz) -> Option<String> {
        self.paused(now, &[role]).of(role).map(|h| h.refusal(role, tz))
    }

    /// What holds at `now` by `read`: its pauses in force; for a book that cannot be read, every
    /// role; and each pause whose mark is on while the book has no record of it.
    pub fn paused_from(&self, read: &Read, now: DateTime<Utc>, roles: &[&str]) -> Paused {
        let mut out = BTreeMap::new();
        let empty = Book::default();
        let book = match read {
            Read::Book(b) => b,
            Read::Missing => &empty,
            Read::Unreadable(why) => {
                let held = Held {
                    target: Target::All,
                    since: None,
                    until: None,
                    by: String::new(),
                    shared: false,
                    unrecorded: Some(format!(
                        "{} cannot be read ({why}): every role is held until `tabd resume --all` writes it anew",
                        file()
                    )),
                };
                out.insert(Target::All, held);
                return Paused(out);
            }
        };
        for p in book.pauses.iter().filter(|p| p.holds(now)) {
            out.insert(
                p.target.clone(),
                Held {
                    target: p.target.clone(),
                    since: Some(p.since),
                    until: p.until,
                    by: p.by.clone(),
                    shared: p.shared,
                    unrecorded: None,
                },
            );
        }
        let targets =
            std::iter::once(Target::All).chain(roles.iter().map(|r| Target::Role((*r).to_string())));
        for t in targets {
            let recorded = book.pauses.iter().any(|p| p.target == t);
            if recorded || !self.is_marked(&t) {
                continue;
            }
            let held = Held {
                target: t.clone(),
                since: None,
                until: None,
                by: String::new(),
                shared: false,
                unrecorded: Some(format!(
                    "its record in {} is gone (a restored or synced-back copy?): held until `tabd resume {}`",
                    file(),
                    t.resume_arg()
                )),
            };
            out.entry(t).or_insert(held);
        }
        Paused(out)
    }

    /// Applies `change` to the latest book under the lock and saves it durably; what began
    /// holding is marked before the write, what stopped is unmarked before it (so a crash
    /// between leaves a pause held, never one lost). A book that cannot be read is set aside
    /// and started anew (said in the warnings, with the marks still holding what it held).
    /// Returns `change`'s answer and what to say.
    pub fn update<T>(&self, change: impl FnOnce(&mut Book) -> T) -> Result<(T, Vec<String>), PauseError> {
        let _lock = self.vault.lock(&lock(), true)?;
        let mut warnings = Vec::new();
        let mut book = match self.read() {
            Read::Book(b) => b,
            Read::Missing => Book::default(),
            Read::Unreadable(why) => {
                warnings.push(self.set_aside(&why));
                Book::default()
            }
        };
        // What the book records (a pause whose time is over included, until it is moved to
        // `ended`): the marks follow the records, not the clock.
        let recorded = |b: &Book| -> Vec<Target> { b.pauses.iter().map(|p| p.target.clone()).collect() };
        let before = recorded(&book);
        let out = change(&mut book);
        book.version = VERSION;
        let after = recorded(&book);
        for t in after.iter().filter(|t| !before.contains(t)) {
            if let Some(w) = self.mark(t) {
                warnings.push(w);
            }
        }
        for t in before.iter().filter(|t| !after.contains(t)) {
            self.unmark(t);
        }
        let bytes = serde_json::to_vec_pretty(&book).map_err(|e| PauseError::Encode(e.to_string()))?;
        self.vault
            .write_atomic_with(&fixed(&file()), &bytes, Durability::FileAndFolder)?;
        Ok((out, warnings))
    }

    /// Takes off the marks of the pauses `which` names (`None`: every one, of `roles` and
    /// `--all`) that hold for want of their record: `tabd resume` ends those too.
    pub fn unmark_unrecorded(&self, which: Option<&Target>, roles: &[&str]) {
        match which {
            Some(t) => self.unmark(t),
            None => {
                self.unmark(&Target::All);
                for r in roles {
                    self.unmark(&Target::Role((*r).to_string()));
                }
            }
        }
    }

    fn set_aside(&self, why: &str) -> String {
        let aside = fixed(&format!(
            "{TABD}/{FOLDER_NAME}/pauses.unreadable-{}.json",
            Utc::now().format("%Y%m%d%H%M%S")
        ));
        let file = file();
        match self.vault.rename_replace(&fixed(&file), &aside) {
            Ok(()) => format!(
                "{file} could not be read ({why}); it is kept as {aside} and a new one is written (what it held stays held where its marks say so)"
            ),
            Err(e) => format!("{file} could not be read ({why}) nor set aside ({e}); a new one is written"),
        }
    }

    /// The mark's name: this vault (and device) and the target, hashed to a plain file name.
    fn mark_name(&self, t: &Target) -> String {
        let mut vault = Sha256::new();
        vault.update(self.vault.root().as_os_str().as_encoded_bytes());
        vault.update([0]);
        vault.update(self.vault.device().unwrap_or_default().as_bytes());
        let vault = hex(&vault.finalize());
        match t {
            Target::All => format!("{}-all", &vault[..24]),
            Target::Role(r) => format!("{}-r{}", &vault[..24], &hex(&Sha256::digest(r.as_bytes()))[..24]),
        }
    }

    fn is_marked(&self, t: &Target) -> bool {
        self.key
            .as_ref()
            .is_some_and(|k| k.is_marked(MARK, &self.mark_name(t)))
    }

    /// Marks `t` as paused; what to say when it cannot be (the pause holds by its record alone).
    fn mark(&self, t: &Target) -> Option<String> {
        let key = self.key.as_ref()?;
        match key.mark(MARK, &self.mark_name(t), true) {
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => None,
            Err(e) => Some(format!(
                "the pause of {} is recorded, but its mark beside tabd's key could not be made ({e}): a restored copy of {} could undo it",
                t.words(),
                file()
            )),
        }
    }

    fn unmark(&self, t: &Target) {
        if let Some(key) = &self.key {
            key.unmark(MARK, &self.mark_name(t));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
