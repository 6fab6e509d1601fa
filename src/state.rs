//! `.tabd/state.json`: last runs, content hashes, attempts, the occurrence ledger, budgets.
//!
//! Every change is a read-modify-write under an exclusive lock on `.tabd/state.lock`, written
//! atomically (temp file + rename), so the daemon and a `tabd fire` never lose each other's
//! updates and a crash never leaves half a file. A corrupt file is set aside with a warning and
//! tabd starts from empty state rather than refusing to run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::provider::Usage;

const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub version: u32,
    pub roles: BTreeMap<String, RoleState>,
    pub global: GlobalState,
}

/// The outcome of the last run of a role, for `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub run_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub outcome: String,
    pub error: Option<String>,
    pub tokens: u64,
    pub trigger: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attempts {
    pub count: u32,
    pub last_error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RoleState {
    pub last_run: Option<LastRun>,
    pub last_success_at: Option<DateTime<Utc>>,
    /// Context file → short content hash, as of the last successful run.
    pub context_hashes: BTreeMap<String, String>,
    /// Inbox note (vault path) → failed attempts so far.
    pub attempts: BTreeMap<String, Attempts>,
    /// The occurrence ledger: every scheduled slot at or before this instant has been handled
    /// (run, or logged as skipped/missed). Recorded before a slot runs.
    pub last_slot: Option<DateTime<Utc>>,
    pub day: Option<NaiveDate>,
    pub tokens_today: u64,
    pub runs_today: u32,
    /// Causes already logged today (budget, runs per day, …): each is written once, not per event.
    pub notices_today: Vec<String>,
    /// Notes logged as handled but not yet moved (a crash between log and move); finished at start.
    pub pending_moves: Vec<(String, String)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GlobalState {
    pub day: Option<NaiveDate>,
    pub tokens_today: u64,
    /// Why the daemon paused model calls, while it does (shown by `tabd status`).
    pub paused: Option<String>,
}

impl RoleState {
    /// Resets the daily counters when `today` is a new local day.
    pub fn roll_day(&mut self, today: NaiveDate) {
        if self.day != Some(today) {
            self.day = Some(today);
            self.tokens_today = 0;
            self.runs_today = 0;
            self.notices_today.clear();
        }
    }

    /// True the first time `cause` is noted today.
    pub fn first_notice(&mut self, cause: &str) -> bool {
        if self.notices_today.iter().any(|c| c == cause) {
            false
        } else {
            self.notices_today.push(cause.to_string());
            true
        }
    }
}

impl GlobalState {
    pub fn roll_day(&mut self, today: NaiveDate) {
        if self.day != Some(today) {
            self.day = Some(today);
            self.tokens_today = 0;
        }
    }
}

impl State {
    pub fn role(&mut self, name: &str) -> &mut RoleState {
        self.roles.entry(name.to_string()).or_default()
    }

    /// Counts a run's tokens against today's role and global budgets.
    pub fn add_usage(&mut self, role: &str, today: NaiveDate, usage: Usage) {
        self.global.roll_day(today);
        self.global.tokens_today += usage.total();
        let r = self.role(role);
        r.roll_day(today);
        r.tokens_today += usage.total();
    }
}

/// Where state lives and how it is changed.
#[derive(Debug, Clone)]
pub struct StateStore {
    path: PathBuf,
    lock_path: PathBuf,
}

impl StateStore {
    pub fn new(vault: &Path) -> Self {
        let dir = vault.join(".tabd");
        Self {
            path: dir.join("state.json"),
            lock_path: dir.join("state.lock"),
        }
    }

    /// The current state (empty if missing or unreadable).
    pub fn load(&self) -> State {
        match std::fs::read(&self.path) {
            Ok(bytes) => match serde_json::from_slice::<State>(&bytes) {
                Ok(s) => s,
                Err(e) => {
                    let aside = self
                        .path
                        .with_extension(format!("corrupt-{}.json", Utc::now().format("%Y%m%d%H%M%S")));
                    let _ = std::fs::rename(&self.path, &aside);
                    tracing::warn!(
                        "{} was unreadable ({e}); moved it to {} and starting from empty state \
                         (run history and attempt counts reset; no note is affected)",
                        self.path.display(),
                        aside.display()
                    );
                    State {
                        version: VERSION,
                        ..State::default()
                    }
                }
            },
            Err(_) => State {
                version: VERSION,
                ..State::default()
            },
        }
    }

    /// Applies `change` to the latest state under the lock and saves it atomically.
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> std::io::Result<T> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)?;
        let mut lock = fd_lock::RwLock::new(lock_file);
        let _guard = lock.write()?;
        let mut state = self.load();
        state.version = VERSION;
        let out = change(&mut state);
        let bytes = serde_json::to_vec_pretty(&state).map_err(std::io::Error::other)?;
        write_atomic(&self.path, &bytes)?;
        Ok(out)
    }
}

/// Writes `bytes` to `path` through a temp file in the same folder, fsync and rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_round_trips_and_survives_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        assert_eq!(store.load().roles.len(), 0, "missing file = empty state");
        store.update(|s| s.role("delivery").runs_today = 3).unwrap();
        assert_eq!(store.load().roles["delivery"].runs_today, 3);
        std::fs::write(dir.path().join(".tabd/state.json"), "{ not json").unwrap();
        let s = store.load();
        assert!(s.roles.is_empty(), "corrupt state recovers as empty");
        let aside = std::fs::read_dir(dir.path().join(".tabd"))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
        assert!(aside, "the corrupt file is kept for inspection");
        store.update(|s| s.role("risk").runs_today = 1).unwrap();
        assert_eq!(store.load().roles["risk"].runs_today, 1);
    }

    #[test]
    fn concurrent_updates_are_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        store.update(|s| s.role("r").runs_today += 1).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(store.load().roles["r"].runs_today, 200);
    }

    #[test]
    fn days_roll_and_notices_are_once_per_day() {
        let mut r = RoleState::default();
        let d1 = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
        r.roll_day(d1);
        r.tokens_today = 50;
        assert!(r.first_notice("budget"));
        assert!(!r.first_notice("budget"));
        r.roll_day(d1.succ_opt().unwrap());
        assert_eq!(r.tokens_today, 0);
        assert!(r.first_notice("budget"));
    }
}
