//! With `[cluster]` (docs/spec.md §23): the daemon asks here "may this device run this slot, this
//! note?" before it queues or starts anything, and nothing else of the daemon knows of NATS.
//!
//! - A due slot is claimed (`<vault>.slot.<role>.<time>`) before it is queued; the device that
//!   won runs it, the others log a debug line and look again now and then until it is done — a
//!   holder that died lets its claim lapse after the lease, and then one of them runs it.
//! - A complete note is claimed by its path and content (`<vault>.note.<role>.<hash>`) when a
//!   run picks it; a note another device holds or finished is not ready here (until its claim
//!   lapses, or its content changes).
//! - The leases a run holds go into its fence (`RunEnv::fence`): its tool calls and its finish
//!   check them, so a device paused past its lease changes nothing. A run that succeeded marks
//!   what it held done; one that failed or stopped lets it lapse, for any device to run again.
//! - Without a quorum (a heartbeat or a claim that is not written) the role's `when_alone`
//!   decides: `skip` (logged once, the slots caught up once a heartbeat is written again) or
//!   `run` (no claim; another device may run it too). Said once per role in the log.
//! - A run that finished while the servers did not answer owes its done mark: the cluster's
//!   heartbeats name what a device holds or owes, and a device that wins a claim another let
//!   lapse runs it only once that device's heartbeat says it let it go, or it has gone silent
//!   (`capabilities::cluster::tenure`). For one lease after the servers return (and answer
//!   claims again), this device catches nothing up, so the slots due since are claimed as plain
//!   slots first; then the slots skipped meanwhile, and any fires this device missed on its own
//!   (asleep, stopped), are caught up once across devices (`capabilities::cluster::catch_up`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Why tabd does not start when its `[cluster]` cannot: it would run every slot and note alone.
pub(super) const WITHOUT_IT: &str =
    "without its cluster this device would run every slot and note, beside the devices that share them";

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::core::{Input, SlotRun};
use super::Daemon;
use crate::base::blocking;
use crate::base::fence::{Fence, Hold};
use crate::capabilities::cluster::catch_up::CatchUpShare;
use crate::capabilities::cluster::{ClaimKey, Claimed, Cluster, ClusterError, Lease, RunSeen};
use crate::records::inbox::Note;
use crate::setup::config::cluster::WhenAlone;
use crate::setup::role::Role;

/// What the heartbeat task last learned.
const UNKNOWN: u8 = 0;
const QUORUM: u8 = 1;
const ALONE: u8 = 2;

/// A note another device holds or finished, as this device last saw it.
struct Elsewhere {
    modified: SystemTime,
    size: u64,
    /// When to try again (`None`: done elsewhere; never again while the note is unchanged).
    again: Option<Instant>,
}

/// A slot another device claimed and has not marked done yet.
struct Watched {
    role: String,
    slot: DateTime<Utc>,
    again: Instant,
    /// The slots its run stands for: 1, or a catch-up's after the servers were out of reach.
    missed: usize,
}

/// The daemon's side of the cluster (see the module's text).
pub(super) struct Coordinator {
    cluster: Cluster,
    handle: tokio::runtime::Handle,
    quorum: Arc<AtomicU8>,
    vault: String,
    when_alone: WhenAlone,
    /// Claimed, queued slots: their leases until their run starts.
    slots: HashMap<(String, DateTime<Utc>), Arc<Lease>>,
    /// Claimed notes by absolute path: their leases until their run ends.
    notes: HashMap<PathBuf, Arc<Lease>>,
    elsewhere: HashMap<PathBuf, Elsewhere>,
    /// The leases of each role's run going on.
    running: HashMap<String, Vec<Arc<Lease>>>,
    watched: Vec<Watched>,
    /// Slots skipped without a quorum (`when_alone = "skip"`), per role, to catch up.
    alone: BTreeMap<String, Vec<DateTime<Utc>>>,
    /// The roles "no quorum" was said for (once each until it returns).
    said_alone: std::collections::BTreeSet<String>,
    /// Whether the tick last saw no quorum, and when it saw the quorum return.
    was_alone: bool,
    back_at: Option<Instant>,
    /// The vault's devices by their last heartbeats, as the heartbeat task last read them.
    seen: Heard,
    /// This device's last run of each role, for its heartbeat.
    ran: Ran,
    /// The view the status last showed (a change writes it again).
    shown: Option<super::status::ClusterView>,
    /// With `[cluster] key`: approvals and waiting runs across devices (`shared_runs`).
    pub(super) shared: Option<crate::doors::approval_pass::shared::Shared>,
}

/// Whose the re-run of an interrupted slot is (`Daemon::claim_rerun`).
pub(super) enum RerunClaim {
    /// This device's: queue it.
    Here(SlotRun),
    /// Another holder's claim: watched, and taken over once it lapses.
    Elsewhere,
    /// Another device ran the slot.
    Done,
    /// No quorum and `when_alone = "skip"`: caught up when the servers answer.
    Later,
}

/// What a claim came to, for this device.
enum Verdict {
    Mine(Option<Arc<Lease>>),
    Elsewhere,
    Done,
    /// No quorum and `when_alone = "skip"`.
    Wait,
}

impl Coordinator {
    /// Connects (in the background) and starts the heartbeat: every third of the lease, the
    /// quorum check, and the one place a device name used twice is seen. `Ok(None)` without
    /// `[cluster]`; `Err` when it cannot be set up (a credentials file that cannot be read, a
    /// server address that is not one): tabd does not start then, since a device without its
    /// cluster would run every slot and note, beside the devices that coordinate.
    pub(super) fn start(
        config: &crate::setup::config::Config,
        vault_root: &Path,
        memory: Arc<crate::base::signing::Key>,
    ) -> Result<Option<Coordinator>, ClusterError> {
        let Some(c) = config.cluster.as_ref() else {
            return Ok(None);
        };
        let vault = vault_root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let handle = tokio::runtime::Handle::current();
        let cluster = blocking::run(|| handle.block_on(Cluster::connect(c, &vault)))?;
        cluster.remember_with(memory);
        let quorum = Arc::new(AtomicU8::new(UNKNOWN));
        let seen = Arc::default();
        let ran = Ran::default();
        heartbeat(
            cluster.clone(),
            (quorum.clone(), Arc::clone(&seen), Arc::clone(&ran)),
            c.lease,
        );
        let shared = c
            .key
            .as_deref()
            .map(|k| crate::doors::approval_pass::shared::Shared::new(cluster.clone(), k));
        if shared.is_none() {
            tracing::info!(
                "cluster: no [cluster] key, so an approval runs on the device that asked, and a run waiting for one goes on there"
            );
        }
        Ok(Some(Coordinator {
            cluster,
            handle,
            quorum,
            vault,
            when_alone: c.when_alone,
            slots: HashMap::new(),
            notes: HashMap::new(),
            elsewhere: HashMap::new(),
            running: HashMap::new(),
            watched: Vec::new(),
            alone: BTreeMap::new(),
            said_alone: Default::default(),
            was_alone: false,
            back_at: None,
            seen,
            ran,
            shown: None,
            shared,
        }))
    }

    /// The connection (for the pauses every device holds: `cluster_pause`).
    pub(super) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub(super) fn block<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        blocking::run(|| self.handle.block_on(work))
    }

    /// How often a held slot or note is looked at again.
    fn again(&self) -> Duration {
        (self.cluster.lease() / 3).max(Duration::from_secs(1))
    }

    fn when_alone(&self, role: &Role) -> WhenAlone {
        role.settings.when_alone.unwrap_or(self.when_alone)
    }

    /// Claims `key` for `role`: this device's to run, another's, done, or no quorum.
    fn claim(&mut self, role: &Role, key: &ClaimKey, what: String) -> Verdict {
        let claimed = match self.quorum.load(Ordering::SeqCst) {
            ALONE => Err(self.cluster.explained(ClusterError::Unavailable {
                why: "the last heartbeat was not written".into(),
            })),
            _ => self.block(self.cluster.claim_unless_done(key, what)),
        };
        match claimed {
            Ok(Claimed::Won(lease)) => {
                self.cluster.keep(&lease);
                Verdict::Mine(Some(lease))
            }
            Ok(Claimed::Held) => Verdict::Elsewhere,
            Ok(Claimed::Done) => Verdict::Done,
            Err(e) => {
                // The servers answer heartbeats again but not claims yet (they do for a few
                // seconds after a quorum returns): the catch-up waits a lease from now again.
                self.was_alone = true;
                let alone = self.when_alone(role);
                if self.said_alone.insert(role.name.clone()) {
                    tracing::warn!(
                        "cluster: {e}; {}: when_alone = \"{}\": {}",
                        role.name,
                        alone.as_str(),
                        match alone {
                            WhenAlone::Skip => "slots and notes wait until the servers answer again",
                            WhenAlone::Run => "running anyway (another device may run the same)",
                        }
                    );
                }
                match alone {
                    WhenAlone::Run => Verdict::Mine(None),
                    WhenAlone::Skip => Verdict::Wait,
                }
            }
        }
    }
}

/// Writes this device's heartbeat every third of the lease; its success is the quorum.
type Heard = Arc<std::sync::Mutex<Vec<crate::capabilities::cluster::DeviceSeen>>>;
type Ran = Arc<std::sync::Mutex<BTreeMap<String, RunSeen>>>;

fn heartbeat(cluster: Cluster, (quorum, seen, ran): (Arc<AtomicU8>, Heard, Ran), lease: Duration) {
    tokio::spawn(async move {
        loop {
            let runs = ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let state = match cluster.heartbeat_with(runs).await {
                Ok(None) => QUORUM,
                Ok(Some(other)) => {
                    tracing::error!(
                        "cluster: another tabd (started {}) also calls itself \"{}\": give each device its own [cluster] device name",
                        other.at,
                        cluster.device()
                    );
                    QUORUM
                }
                Err(e) => {
                    if quorum.load(Ordering::SeqCst) != ALONE {
                        tracing::warn!("cluster: {e}");
                    }
                    ALONE
                }
            };
            if quorum.swap(state, Ordering::SeqCst) == ALONE && state == QUORUM {
                tracing::info!("cluster: the servers answer again");
            }
            if let (QUORUM, Ok(devices)) = (state, cluster.devices().await) {
                *seen.lock().unwrap_or_else(|p| p.into_inner()) = devices;
            }
            tokio::time::sleep((lease / 3).max(Duration::from_millis(500))).await;
        }
    });
}

/// A note's identity for its claim: its path and its settled text.
fn content_hash(note: &Note) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(note.size.to_le_bytes());
    h.update(note.text.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Daemon {
    /// The due slots of `role` this device may run: each claimed first (docs/spec.md §23).
    pub(super) fn claim_slots(&mut self, role: &Role, due: Vec<SlotRun>) -> Vec<SlotRun> {
        let Some(mut c) = self.coordinator.take() else {
            return due;
        };
        let now = self.run_env.clock.instant();
        let mut keep = Vec::new();
        for s in due {
            let quorum = c.quorum.load(Ordering::SeqCst) == QUORUM;
            if s.missed > 1 && (quorum || c.when_alone(role) == WhenAlone::Skip) {
                // Fires this device missed (asleep, stopped, its loop held up by a server that
                // did not answer): other devices may have run them. The cluster's catch-up
                // decides, once across devices, at the next look with a quorum.
                let missed = stood_for(role, &s);
                tracing::debug!(
                    "{}: {} missed slot(s) go to the cluster's catch-up",
                    role.name,
                    missed.len()
                );
                c.alone.entry(role.name.clone()).or_default().extend(missed);
                continue;
            }
            let key = ClaimKey::slot(&c.vault, &role.name, s.slot);
            let what = format!(
                "the {} slot of {}",
                s.slot.format("%Y-%m-%d %H:%M:%S UTC"),
                role.name
            );
            match c.claim(role, &key, what) {
                Verdict::Mine(lease) => {
                    if let Some(l) = lease {
                        c.slots.insert((role.name.clone(), s.slot), l);
                    }
                    keep.push(s);
                }
                Verdict::Elsewhere => {
                    tracing::debug!("{}: another device runs the {} slot", role.name, s.slot);
                    c.watched.push(Watched {
                        role: role.name.clone(),
                        slot: s.slot,
                        again: now + c.again(),
                        missed: 1,
                    });
                }
                Verdict::Done => tracing::debug!("{}: the {} slot was run elsewhere", role.name, s.slot),
                Verdict::Wait => {
                    c.alone.entry(role.name.clone()).or_default().push(s.slot);
                    self.say_alone(role, s.slot);
                }
            }
        }
        self.coordinator = Some(c);
        keep
    }

    /// Whose the re-run of an interrupted slot is (docs/spec.md §22): claimed like any slot, always as
    /// one slot (a catch-up's re-run stands for its slots again, but is claimed by its own).
    /// Without `[cluster]`, this device's.
    pub(super) fn claim_rerun(&mut self, role: &Role, s: SlotRun) -> RerunClaim {
        let Some(mut c) = self.coordinator.take() else {
            return RerunClaim::Here(s);
        };
        let key = ClaimKey::slot(&c.vault, &role.name, s.slot);
        let what = format!(
            "the re-run of the {} slot of {}",
            s.slot.format("%Y-%m-%d %H:%M:%S UTC"),
            role.name
        );
        let claim = match c.claim(role, &key, what) {
            Verdict::Mine(lease) => {
                if let Some(l) = lease {
                    c.slots.insert((role.name.clone(), s.slot), l);
                }
                RerunClaim::Here(s)
            }
            // Held: by another device, or by this one before it was killed, until the lease
            // lapses; then taken over like any slot whose holder died (`take_over`).
            Verdict::Elsewhere => {
                c.watched.push(Watched {
                    role: role.name.clone(),
                    slot: s.slot,
                    again: self.run_env.clock.instant() + c.again(),
                    missed: s.missed,
                });
                RerunClaim::Elsewhere
            }
            Verdict::Done => RerunClaim::Done,
            Verdict::Wait => {
                c.alone.entry(role.name.clone()).or_default().push(s.slot);
                RerunClaim::Later
            }
        };
        self.coordinator = Some(c);
        claim
    }

    /// A slot skipped for want of a quorum: one line in the daily note (once per role a day).
    fn say_alone(&self, role: &Role, slot: DateTime<Utc>) {
        let cause = "no quorum of the cluster's servers (when_alone: skip); caught up when they answer";
        if self.note_once(&role.name, cause) {
            let tz = self.config().timezone;
            let line = format!(
                "skipped — the {} run: {cause}",
                slot.with_timezone(&tz).format("%H:%M")
            );
            self.shown.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(self.run_env.clock.now(), &role.display_name, &line),
            );
        }
    }

    /// Whether the complete note at `abs` is another device's (held or done) as far as this
    /// device knows; `again` learns when to look at it next.
    pub(super) fn held_elsewhere(
        &mut self,
        abs: &Path,
        (modified, size): (SystemTime, u64),
        now: Instant,
        again: &mut Option<Instant>,
    ) -> bool {
        let Some(c) = self.coordinator.as_mut() else {
            return false;
        };
        let Some(e) = c.elsewhere.get(abs) else {
            return false;
        };
        if e.modified != modified || e.size != size {
            c.elsewhere.remove(abs);
            return false;
        }
        match e.again {
            None => true,
            Some(t) if t > now => {
                *again = Some(again.map_or(t, |a| a.min(t)));
                true
            }
            Some(_) => {
                c.elsewhere.remove(abs);
                false
            }
        }
    }

    /// The picked notes this device may run: each claimed by its path and content.
    pub(super) fn claim_notes(&mut self, role: &Role, notes: Vec<Note>) -> Vec<Note> {
        let Some(mut c) = self.coordinator.take() else {
            return notes;
        };
        let root = self.watching.paths.root.clone();
        let now = self.run_env.clock.instant();
        let mut keep = Vec::new();
        let mut look_again: Option<Instant> = None;
        for note in notes {
            let abs = root.join(note.path.as_path());
            if c.notes.contains_key(&abs) {
                keep.push(note);
                continue;
            }
            if note.size == 0 {
                // No text to claim it by yet. A sync tool spreads a note written in place on
                // another copy as it finds it, so it may spread one caught between its creation
                // and its first write, by an atomic rename that makes it complete at once here;
                // claimed and run empty, it would run again under its text, another claim (issue
                // 49, item 6). It waits, like a note done elsewhere, until it changes.
                tracing::debug!("{}: {} is empty; it waits for its text", role.name, note.path);
                c.elsewhere.insert(
                    abs,
                    Elsewhere {
                        modified: note.modified,
                        size: note.size,
                        again: None,
                    },
                );
                continue;
            }
            let key = ClaimKey::note(&c.vault, &role.name, note.path.as_str(), &content_hash(&note));
            let again = match c.claim(role, &key, format!("the note {}", note.path)) {
                Verdict::Mine(lease) => {
                    if let Some(l) = lease {
                        c.notes.insert(abs, l);
                    }
                    keep.push(note);
                    continue;
                }
                Verdict::Elsewhere | Verdict::Wait => Some(now + c.again()),
                Verdict::Done => None,
            };
            tracing::debug!("{}: {} is another device's", role.name, note.path);
            look_again = again.map(|t| look_again.map_or(t, |l: Instant| l.min(t)));
            c.elsewhere.insert(
                abs,
                Elsewhere {
                    modified: note.modified,
                    size: note.size,
                    again,
                },
            );
        }
        self.coordinator = Some(c);
        if keep.is_empty() {
            // Nothing to run here now: the inbox is looked at again when a claim may have lapsed.
            self.apply(Input::Scanned {
                role: role.name.clone(),
                ready: false,
                by_person: false,
                recheck_at: look_again,
            });
        }
        keep
    }

    /// The fence of a run of `role` starting now for `slot` (if a slot) and `notes`: the leases
    /// it holds, kept until it ends.
    pub(super) fn fence_for(&mut self, role: &str, slot: Option<DateTime<Utc>>, notes: &[PathBuf]) -> Fence {
        let Some(c) = self.coordinator.as_mut() else {
            return Fence::open();
        };
        let mut leases: Vec<Arc<Lease>> = Vec::new();
        if let Some(l) = slot.and_then(|s| c.slots.remove(&(role.to_string(), s))) {
            leases.push(l);
        }
        leases.extend(notes.iter().filter_map(|p| c.notes.get(p).cloned()));
        let fence = Fence::of(leases.iter().map(|l| l.clone() as Arc<dyn Hold>).collect());
        c.running.insert(role.to_string(), leases);
        fence
    }

    /// A run ended. One that succeeded passed its fence at its finish, so what it held is done —
    /// marked now, or owed until the servers answer (their heartbeats say so meanwhile: no other
    /// device takes it over) — even when the lease lapsed since. One that did not lets its
    /// claims lapse (any device may run it again after the lease: `Cluster::let_lapse` says why
    /// not at once); one that lost its lease changed nothing after that.
    pub(super) fn settle_claims(&mut self, role: &str, succeeded: bool, notes: &[PathBuf]) {
        let Some(c) = self.coordinator.as_mut() else {
            return;
        };
        for p in notes {
            c.notes.remove(p);
        }
        let Some(leases) = c.running.remove(role) else {
            return;
        };
        if !succeeded && leases.iter().any(|l| !l.still_mine()) {
            tracing::warn!(
                "{role}: this device lost its claim during the run; it changed nothing after that"
            );
        }
        let cluster = c.cluster.clone();
        let unfinished = c.block(async move {
            let mut failed = Vec::new();
            for l in leases {
                if !succeeded {
                    cluster.let_lapse(&l).await;
                } else if let Err(e) = cluster.finish(&l).await {
                    failed.push((l, e));
                }
            }
            failed
        });
        for (l, e) in unfinished {
            tracing::warn!(
                "{role}: cannot mark {} done in the cluster ({e}); it is marked when the servers answer again",
                crate::base::fence::Hold::what(l.as_ref())
            );
        }
    }

    /// Once the servers answer again, says whether this device is still within the lease after
    /// their return: it catches nothing up then, so every device has claimed the slots due since
    /// as plain slots before any looks back (what ran meanwhile is marked done by the heartbeat).
    /// A claim the servers do not answer counts as not back yet (`was_alone`): the lease starts
    /// again from the next tick, so one catch-up stands for the outage and the unsteady seconds
    /// after it, not one for each.
    fn back_from_alone(c: &mut Coordinator, now: Instant) -> bool {
        let alone = c.quorum.load(Ordering::SeqCst) != QUORUM;
        if alone {
            c.was_alone |= c.quorum.load(Ordering::SeqCst) == ALONE;
            return false;
        }
        if std::mem::take(&mut c.was_alone) {
            c.back_at = Some(now);
        }
        c.back_at.is_some_and(|t| now < t + c.cluster.lease())
    }

    /// Slots another device claimed and did not finish (it died: its claim lapsed), and slots
    /// skipped without a quorum once it returns: claimed again here, and run if won.
    pub(super) fn cluster_tick(&mut self, wall: DateTime<Utc>) {
        let view = self.cluster_view();
        let Some(mut c) = self.coordinator.take() else {
            return;
        };
        if c.shown != view {
            c.shown = view;
            self.apply(Input::ShownChanged);
        }
        let now = self.run_env.clock.instant();
        let roles = self.run_env.roles.clone();
        if Self::back_from_alone(&mut c, now) {
            self.coordinator = Some(c);
            return;
        }
        let mut runs = take_over(&mut c, &roles, now);
        if c.quorum.load(Ordering::SeqCst) == QUORUM {
            c.said_alone.clear();
            runs.extend(catch_up_alone(&mut c, &roles, wall, now));
        }
        self.coordinator = Some(c);
        for (role, slot) in runs {
            self.apply(Input::SlotsDue {
                role,
                slots: vec![slot],
            });
        }
    }

    /// A run of `role` ended here: its heartbeats say so from now on.
    pub(super) fn ran_here(&mut self, role: &str, record: &crate::records::runlog::RunRecord) {
        let Some(c) = self.coordinator.as_ref() else {
            return;
        };
        let seen = RunSeen {
            at: record.started_at,
            outcome: record.shown_outcome().to_string(),
        };
        c.ran
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(role.to_string(), seen);
        self.apply(Input::ShownChanged);
    }

    /// The cluster as this device sees it, for `tabd status` and `agent/status.md`.
    pub(super) fn cluster_view(&self) -> Option<super::status::ClusterView> {
        let c = self.coordinator.as_ref()?;
        let devices = c.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mine = c.ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let last_runs = last_runs(c.cluster.device(), mine, &devices);
        Some(super::status::ClusterView {
            device: c.cluster.device().to_string(),
            quorum: match c.quorum.load(Ordering::SeqCst) {
                QUORUM => Some(true),
                ALONE => Some(false),
                _ => None,
            },
            lease_s: c.cluster.lease().as_secs(),
            when_alone: c.when_alone.as_str().to_string(),
            devices: devices
                .into_iter()
                .map(|d| super::status::DeviceView {
                    device: d.device,
                    last_heartbeat: d.last_heartbeat,
                })
                .collect(),
            last_runs,
        })
    }

    /// When the cluster has something to look at again.
    pub(super) fn cluster_wake(&self) -> Option<Instant> {
        let c = self.coordinator.as_ref()?;
        let watched = c.watched.iter().map(|w| w.again).min();
        // Every third of the lease: the heartbeat's news (quorum, devices) reaches the status.
        let heartbeat = self.run_env.clock.instant() + c.again();
        let settled = c
            .back_at
            .map(|t| t + c.cluster.lease())
            .filter(|t| *t > self.run_env.clock.instant());
        watched.into_iter().chain([heartbeat]).chain(settled).min()
    }
}

/// The slots skipped without a quorum that run once it returns, by the role's `catch_up`: the
/// newest (`once`, within `stale_after`), none (`skip`), or each (`all`, at most ten).
fn catch_up(role: &Role, mut slots: Vec<DateTime<Utc>>, now: DateTime<Utc>) -> Vec<SlotRun> {
    slots.sort();
    slots.dedup();
    let stale = role.settings.stale_after.unwrap_or(Duration::from_secs(7200));
    match role.catch_up() {
        crate::setup::role::CatchUp::Skip => Vec::new(),
        crate::setup::role::CatchUp::Once => slots
            .last()
            .filter(|s| (now - **s).to_std().unwrap_or_default() <= stale)
            .map(|s| SlotRun {
                slot: *s,
                missed: slots.len(),
            })
            .into_iter()
            .collect(),
        crate::setup::role::CatchUp::All => {
            let from = slots.len().saturating_sub(super::slots::CATCH_UP_ALL_CAP);
            slots[from..]
                .iter()
                .map(|s| SlotRun { slot: *s, missed: 1 })
                .collect()
        }
    }
}

/// Most missed slots of one run handed to the cluster's catch-up by name (the count of any
/// older ones is not kept: a catch-up of a long sleep says it stands for this many).
const STOOD_FOR_CAP: usize = 1000;

/// The slots the local catch-up run `s` stands for: the `s.missed` fires of the role's schedule
/// up to and including `s.slot`, oldest first (at most `STOOD_FOR_CAP`). Found going forward
/// over a window that doubles until it holds them, not with croner's backward search: a slot is
/// a claim's key, so it must be the very instant the scheduler computes going forward (the two
/// directions may differ around a DST change).
fn stood_for(role: &Role, s: &SlotRun) -> Vec<DateTime<Utc>> {
    let want = s.missed.min(STOOD_FOR_CAP);
    let mut window = chrono::Duration::minutes(1);
    loop {
        let fires = role.schedule.fires_between(s.slot - window, s.slot, usize::MAX);
        if fires.len() >= want || window > chrono::Duration::days(8) {
            let from = fires.len().saturating_sub(want);
            let mut slots = fires[from..].to_vec();
            if slots.last() != Some(&s.slot) {
                slots.push(s.slot);
            }
            return slots;
        }
        window = window * 2;
    }
}

/// The watched slots due for a look: a claim that lapsed (its holder died) is this device's now.
fn take_over(
    c: &mut Coordinator,
    roles: &crate::setup::role::RoleSet,
    now: Instant,
) -> Vec<(String, SlotRun)> {
    let due: Vec<Watched> = {
        let (due, later) = std::mem::take(&mut c.watched)
            .into_iter()
            .partition(|w| w.again <= now);
        c.watched = later;
        due
    };
    let mut runs = Vec::new();
    for w in due {
        let Some(role) = roles.roles.get(&w.role) else {
            continue;
        };
        let key = ClaimKey::slot(&c.vault, &w.role, w.slot);
        match c.claim(role, &key, format!("the {} slot of {}", w.slot, w.role)) {
            Verdict::Mine(Some(lease)) if covered(c, &w) => {
                tracing::info!(
                    "{}: the {} slot another device claimed was not done, but a catch-up stood for it",
                    w.role,
                    w.slot
                );
                let cluster = c.cluster.clone();
                if let Err(e) = c.block(async move { cluster.finish(&lease).await }) {
                    tracing::debug!("{}: the {} slot is marked done later ({e})", w.role, w.slot);
                }
            }
            Verdict::Mine(lease) => {
                tracing::info!(
                    "{}: the {} slot another device claimed was not done; running it here",
                    w.role,
                    w.slot
                );
                if let Some(l) = lease {
                    c.slots.insert((w.role.clone(), w.slot), l);
                }
                runs.push((
                    w.role,
                    SlotRun {
                        slot: w.slot,
                        missed: w.missed,
                    },
                ));
            }
            Verdict::Elsewhere | Verdict::Wait => c.watched.push(Watched {
                again: now + c.again(),
                ..w
            }),
            Verdict::Done => {}
        }
    }
    runs
}

/// Whether a catch-up record stood for the watched slot `w` without running it (a slot no
/// catch-up stood for, or one the servers cannot tell of now, runs).
fn covered(c: &Coordinator, w: &Watched) -> bool {
    c.block(c.cluster.covered_by_catch_up(&w.role, w.slot))
        .unwrap_or(false)
}

/// The slots skipped without a quorum, once it returns, caught up by the role's `catch_up` once
/// across devices (`capabilities::cluster::catch_up`: what no device ran or holds, claimed slot
/// by slot, then one catch-up record decides whose run stands for them). A catch-up the servers
/// do not decide yet (they answer heartbeats before the rest) keeps the slots for the next look.
fn catch_up_alone(
    c: &mut Coordinator,
    roles: &crate::setup::role::RoleSet,
    wall: DateTime<Utc>,
    now: Instant,
) -> Vec<(String, SlotRun)> {
    let mut runs = Vec::new();
    for (name, skipped) in std::mem::take(&mut c.alone) {
        let Some(role) = roles.roles.get(&name) else {
            continue;
        };
        let rule = |missed: Vec<DateTime<Utc>>| {
            catch_up(role, missed, wall)
                .into_iter()
                .map(|s| (s.slot, s.missed))
                .collect()
        };
        let decided = c.block(c.cluster.catch_up(&name, skipped.clone(), rule));
        if decided.is_ok() {
            // A catch-up stands for every earlier one still watched for this role.
            c.watched.retain(|w| w.role != name || w.missed == 1);
        }
        match decided {
            Ok(CatchUpShare::Run(list)) => {
                for r in list {
                    c.slots.insert((name.clone(), r.slot), r.lease);
                    c.watched.retain(|w| w.role != name || w.slot != r.slot);
                    runs.push((
                        name.clone(),
                        SlotRun {
                            slot: r.slot,
                            missed: r.missed,
                        },
                    ));
                }
            }
            Ok(CatchUpShare::Elsewhere(list)) => {
                for (slot, missed) in list {
                    tracing::debug!("{name}: another device catches up the {slot} slot");
                    c.watched.retain(|w| w.role != name || w.slot != slot);
                    c.watched.push(Watched {
                        role: name.clone(),
                        slot,
                        again: now + c.again(),
                        missed,
                    });
                }
            }
            Ok(CatchUpShare::Nothing) => {}
            Err(e) => {
                tracing::debug!("{name}: the catch-up waits for the servers ({e})");
                c.was_alone = true;
                c.alone.entry(name).or_default().extend(skipped);
            }
        }
    }
    runs
}

/// Each role's newest run across the devices (this device's own runs as it knows them now, the
/// others' as their last heartbeats said), by role.
fn last_runs(
    me: &str,
    mine: BTreeMap<String, RunSeen>,
    devices: &[crate::capabilities::cluster::DeviceSeen],
) -> Vec<super::status::RoleRunView> {
    let mut newest: BTreeMap<String, (String, RunSeen)> = BTreeMap::new();
    let others = devices.iter().filter(|d| d.device != me).flat_map(|d| {
        d.runs
            .iter()
            .map(|(r, s)| (r.clone(), (d.device.clone(), s.clone())))
    });
    let own = mine.into_iter().map(|(r, s)| (r, (me.to_string(), s)));
    for (role, (device, run)) in others.chain(own) {
        match newest.get(&role) {
            Some((_, known)) if known.at >= run.at => {}
            _ => {
                newest.insert(role, (device, run));
            }
        }
    }
    newest
        .into_iter()
        .map(|(role, (device, run))| super::status::RoleRunView {
            role,
            device,
            at: run.at,
            outcome: run.outcome,
        })
        .collect()
}
