//! `.tabd/state.json`: last runs, content hashes, attempts, the occurrence ledger and the slots
//! whose run started and has not finished (`started`), budgets, and runs that are logged but not
//! yet finished (their note moves).
//!
//! Every change is a read-modify-write under an exclusive lock on `.tabd/state.lock`, written
//! atomically and durably (temp file, fsync, rename, fsync of the folder) through the vault, so
//! the daemon and a `tabd fire` never lose each other's updates and a crash never leaves half a
//! file. A corrupt file is set aside with a warning and tabd starts from empty state rather than
//! refusing to run; a file that cannot be read at all makes updates fail (nothing is
//! overwritten that could not be read).

pub mod approval_ledger;
pub mod pause;
pub mod started;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::base::cost::Usage;
use crate::base::vault::{Durability, Vault, VaultError, VaultPath};

const VERSION: u32 = 1;
/// Largest state file read (it holds only what still exists, so it stays small).
const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;
const STATE_FILE: &str = crate::base::vault::layout::STATE;
const STATE_LOCK: &str = crate::base::vault::layout::STATE_LOCK;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub version: u32,
    pub roles: BTreeMap<String, RoleState>,
    pub global: GlobalState,
    /// Approval requests by id (docs/spec.md §15): what makes "at most once" hold.
    pub approvals: BTreeMap<String, approval_ledger::Approval>,
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
    #[serde(default)]
    pub cost_usd: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Attempts {
    pub count: u32,
    pub last_error: String,
    /// The note's inode when counted: a new note given the same name starts from zero.
    pub ino: Option<u64>,
}

/// A run that is decided and recorded here before anything else is written: its JSONL record,
/// its daily-log text and its note moves. A crash at any later point is finished from this at
/// the next start, so a record's `moved` list is always true and a logged note never runs again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PendingRun {
    pub run_id: String,
    /// The JSONL record, exactly as it is (or will be) written.
    pub record: serde_json::Value,
    /// `.tabd/runs/….jsonl` the record goes to.
    pub jsonl: String,
    /// `daily/….md` and the text appended to it.
    pub daily: String,
    pub daily_text: String,
    /// (from, to) note moves.
    pub moves: Vec<(String, String)>,
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
    /// Scheduled slots whose run started and has not finished (`started`): what the ledger
    /// alone cannot tell from a slot that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub started_slots: Vec<started::StartedSlot>,
    /// Every `expect:` deadline at or before this instant has been checked (docs/spec.md §22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_checked: Option<DateTime<Utc>>,
    pub day: Option<NaiveDate>,
    pub tokens_today: u64,
    pub cost_today_usd: f64,
    pub runs_today: u32,
    /// Causes already logged today (budget, runs per day, …): each is written once, not per event.
    pub notices_today: Vec<String>,
    /// Runs logged as decided but not yet finished (a crash between); finished at start.
    pub pending: Vec<PendingRun>,
    /// Inbox entries tabd cannot read, already reported once in the daily log.
    pub unreadable_reported: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GlobalState {
    pub day: Option<NaiveDate>,
    pub tokens_today: u64,
    pub cost_today_usd: f64,
    /// Why the daemon paused model calls, while it does (shown by `tabd status`).
    pub paused: Option<String>,
    /// Causes not tied to a role (config errors), logged once a day.
    pub notices_today: Vec<String>,
}

impl RoleState {
    /// Resets the daily counters when `today` is a new local day.
    pub fn roll_day(&mut self, today: NaiveDate) {
        if self.day != Some(today) {
            self.day = Some(today);
            self.tokens_today = 0;
            self.cost_today_usd = 0.0;
            self.runs_today = 0;
            self.notices_today.clear();
        }
    }

    /// True the first time `cause` is noted today.
    pub fn first_notice(&mut self, cause: &str) -> bool {
        first_notice(&mut self.notices_today, cause)
    }

    /// Today's counters, zero when the stored day is another one.
    pub fn today(&self, today: NaiveDate) -> DayUsage {
        if self.day == Some(today) {
            DayUsage {
                tokens: self.tokens_today,
                cost_usd: self.cost_today_usd,
                runs: self.runs_today,
            }
        } else {
            DayUsage::default()
        }
    }
}

fn first_notice(notices: &mut Vec<String>, cause: &str) -> bool {
    if notices.iter().any(|c| c == cause) {
        false
    } else {
        notices.push(cause.to_string());
        true
    }
}

/// One day's use by a role or by all roles.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DayUsage {
    pub tokens: u64,
    pub cost_usd: f64,
    pub runs: u32,
}

impl GlobalState {
    pub fn roll_day(&mut self, today: NaiveDate) {
        if self.day != Some(today) {
            self.day = Some(today);
            self.tokens_today = 0;
            self.cost_today_usd = 0.0;
            self.notices_today.clear();
        }
    }

    pub fn first_notice(&mut self, today: NaiveDate, cause: &str) -> bool {
        self.roll_day(today);
        first_notice(&mut self.notices_today, cause)
    }

    pub fn today(&self, today: NaiveDate) -> DayUsage {
        if self.day == Some(today) {
            DayUsage {
                tokens: self.tokens_today,
                cost_usd: self.cost_today_usd,
                runs: 0,
            }
        } else {
            DayUsage::default()
        }
    }
}

impl State {
    pub fn role(&mut self, name: &str) -> &mut RoleState {
        self.roles.entry(name.to_string()).or_default()
    }

    /// Counts a run's tokens and dollars against today's role and global budgets.
    pub fn add_usage(&mut self, role: &str, today: NaiveDate, usage: Usage, cost_usd: f64) {
        self.global.roll_day(today);
        self.global.tokens_today += usage.total();
        self.global.cost_today_usd += cost_usd;
        let r = self.role(role);
        r.roll_day(today);
        r.tokens_today += usage.total();
        r.cost_today_usd += cost_usd;
    }

    /// Drops the state of roles that no longer exist (their file was deleted). Returns how
    /// many were dropped.
    pub fn retain_roles(&mut self, existing: &BTreeSet<String>) -> usize {
        let before = self.roles.len();
        self.roles
            .retain(|name, r| existing.contains(name) || !r.pending.is_empty());
        before - self.roles.len()
    }
}

/// Where state lives and how it is changed.
#[derive(Debug, Clone)]
pub struct StateStore {
    vault: Arc<Vault>,
}

fn fixed(path: &str) -> VaultPath {
    match VaultPath::parse(path, false) {
        Ok(p) => p,
        Err(e) => panic!("invariant: {path} is a valid vault path ({e})"),
    }
}

impl StateStore {
    pub fn new(vault: Arc<Vault>) -> Self {
        Self { vault }
    }

    pub fn vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    /// The current state for a command that only looks (`tabd status`, `tabd runs`): a file that
    /// cannot be read is left where it is — setting it aside is the writers' (the daemon's, a
    /// run's), who rebuild what they can — and said, and the state shown is empty.
    pub fn peek(&self) -> State {
        self.try_peek().unwrap_or_else(|e| {
            tracing::warn!("{e}; showing it as empty");
            Self::empty()
        })
    }

    /// `peek`, or why the file cannot be read (a missing one is empty state).
    pub fn try_peek(&self) -> Result<State, VaultError> {
        let path = fixed(STATE_FILE);
        let bytes = match self.vault.read_bytes(&path, MAX_STATE_BYTES) {
            Ok((bytes, _)) => bytes,
            Err(VaultError::NotFound(_)) => return Ok(Self::empty()),
            Err(e) => return Err(e),
        };
        serde_json::from_slice::<State>(&bytes).map_err(|e| {
            VaultError::Io(format!(
                "{STATE_FILE} cannot be read ({e}); tabd sets it aside and counts today's spend again from \
                 the run records at its next start or run"
            ))
        })
    }

    /// The current state (empty if missing, corrupt or unreadable).
    pub fn load(&self) -> State {
        self.try_load().unwrap_or_else(|e| {
            tracing::warn!("cannot read {STATE_FILE}: {e}; using empty state for now");
            State::default()
        })
    }

    /// The current state; a missing file is empty state, a corrupt one is set aside, and any
    /// other read failure is an error.
    pub fn try_load(&self) -> Result<State, VaultError> {
        let path = fixed(STATE_FILE);
        let bytes = match self.vault.read_bytes(&path, MAX_STATE_BYTES) {
            Ok((bytes, _)) => bytes,
            Err(VaultError::NotFound(_)) => return Ok(Self::empty()),
            Err(e) => return Err(e),
        };
        match serde_json::from_slice::<State>(&bytes) {
            Ok(s) => Ok(s),
            Err(e) => {
                let aside = fixed(&format!(
                    "{}/state.corrupt-{}.json",
                    crate::base::vault::layout::TABD,
                    Utc::now().format("%Y%m%d%H%M%S")
                ));
                let kept = match self.vault.rename_replace(&path, &aside) {
                    Ok(()) => format!("moved it to {aside} and starting"),
                    // Said, not dropped: the next save writes over it, so the person knows it is gone.
                    Err(why) => format!(
                        "it could not be moved to {aside} ({why}), so the next save replaces it; starting"
                    ),
                };
                tracing::warn!(
                    "{STATE_FILE} was unreadable ({e}); {kept} from empty state \
                     (run history and attempt counts reset; no note is affected)"
                );
                Ok(Self::empty())
            }
        }
    }

    fn empty() -> State {
        State {
            version: VERSION,
            ..State::default()
        }
    }

    /// Applies `change` to the latest state under the lock and saves it atomically and durably
    /// (the rename itself survives a power cut).
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> Result<T, VaultError> {
        self.update_with(Durability::FileAndFolder, change)
    }

    /// `update` with a choice of durability, for changes whose loss only repeats harmless work.
    pub fn update_with<T>(
        &self,
        durability: Durability,
        change: impl FnOnce(&mut State) -> T,
    ) -> Result<T, VaultError> {
        let _lock = self.vault.lock(&fixed(STATE_LOCK), true)?;
        let mut state = self.try_load()?;
        state.version = VERSION;
        let out = change(&mut state);
        let bytes = serde_json::to_vec_pretty(&state).map_err(|e| VaultError::Io(e.to_string()))?;
        self.vault
            .write_atomic_with(&fixed(STATE_FILE), &bytes, durability)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().unwrap();
        let v = Arc::new(Vault::open(dir.path()).unwrap());
        (dir, StateStore::new(v))
    }

    /// Whatever `.tabd/state.json` holds — deep, malformed, a record with junk spliced in — it is
    /// read or set aside for an empty state, and the next update writes a state that reads back.
    #[test]
    fn any_state_file_is_read_or_set_aside_never_a_panic() {
        use crate::formats::frontmatter::hostile;
        let (dir, store) = store();
        let path = dir.path().join(".tabd/state.json");
        std::fs::create_dir_all(dir.path().join(".tabd")).unwrap();
        let mut runner = proptest::test_runner::TestRunner::new(hostile::config(64));
        runner
            .run(&hostile::any_json(), |text| {
                std::fs::write(&path, &text).unwrap();
                proptest::prop_assert!(store.try_load().is_ok());
                store.update(|s| s.role("delivery").runs_today += 1).unwrap();
                proptest::prop_assert!(store.load().roles.contains_key("delivery"));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn update_round_trips_and_survives_corruption() {
        let (dir, store) = store();
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
    fn an_unreadable_state_file_fails_updates_instead_of_overwriting() {
        let (dir, store) = store();
        std::fs::create_dir_all(dir.path().join(".tabd/state.json")).unwrap();
        assert!(store.update(|s| s.role("r").runs_today = 1).is_err());
        assert!(dir.path().join(".tabd/state.json").is_dir(), "left as it was");
    }

    #[test]
    fn concurrent_updates_are_not_lost() {
        let (_dir, store) = store();
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
        assert_eq!(r.today(d1).tokens, 50);
        let d2 = d1.succ_opt().unwrap();
        assert_eq!(r.today(d2).tokens, 0, "yesterday's use is not today's");
        r.roll_day(d2);
        assert_eq!(r.tokens_today, 0);
        assert!(r.first_notice("budget"));
    }

    #[test]
    fn deleted_roles_are_dropped_unless_a_run_is_unfinished() {
        let mut s = State::default();
        s.role("kept").runs_today = 1;
        s.role("gone").runs_today = 1;
        s.role("gone-but-pending").pending.push(PendingRun::default());
        let existing: BTreeSet<String> = ["kept".to_string()].into();
        assert_eq!(s.retain_roles(&existing), 1);
        assert!(s.roles.contains_key("kept") && s.roles.contains_key("gone-but-pending"));
    }
}
