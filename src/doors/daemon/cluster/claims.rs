//! Claims off the daemon's loop (issue 38): a round trip to the servers is a task, and its answer
//! comes back to the loop as one more thing that happened (`Daemon::on_cluster_answer`). While
//! the servers stall, a claim waits there (up to the request's timeout) and every other role's
//! runs, scans and timers go on. Without a quorum nothing is asked: the role's `when_alone`
//! decides at once.
//!
//! - A due slot is queued when its claim is won; a slot another device holds is watched.
//! - A note whose claim is asked is no one's yet: not ready here until the answer; the answer
//!   has the role's inbox judged again (`Input::ClaimAnswered`), the note then this device's (its
//!   lease kept until its run ends) or another's.
//! - What a run held is marked done (or let go) off the loop too, and so is what ran during an
//!   outage once the servers answer; what could not be marked is tried again then.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use super::{content_hash, Coordinator, Elsewhere, Verdict, Watched, ALONE};
use crate::capabilities::cluster::{ClaimKey, Claimed, ClusterError, Lease};
use crate::doors::daemon::core::{Input, SlotRun};
use crate::doors::daemon::Daemon;
use crate::records::inbox::Note;
use crate::setup::role::Role;

/// What a claim was asked for, so that its answer is taken as the question meant it.
pub(in crate::doors::daemon) enum Asked {
    /// A slot of `role`, for the reason `why`.
    Slot {
        role: String,
        run: SlotRun,
        why: SlotWhy,
    },
    /// The complete note `path` (in the vault; `abs`: on disk), as it was when asked
    /// (modification time, size).
    Note {
        role: String,
        path: String,
        abs: PathBuf,
        seen: (SystemTime, u64),
    },
}

/// Why a slot is claimed.
pub(in crate::doors::daemon) enum SlotWhy {
    /// It came due here.
    Due,
    /// Another device claimed it and has not marked it done: its claim may have lapsed.
    TakeOver,
    /// The servers answer again: it stands for the slots skipped without a quorum (`skipped`).
    CatchUp { skipped: Vec<DateTime<Utc>> },
}

/// What came back from the servers.
pub(in crate::doors::daemon) enum Answer {
    Claimed {
        asked: Asked,
        claimed: Result<Claimed, ClusterError>,
        /// How long the servers took to answer.
        took: std::time::Duration,
    },
    /// Leases marked done (or let go); `left`: the ones the servers did not take, to mark again
    /// once they answer. `role`: the run that held them (`None`: ones left from an outage).
    Settled {
        role: Option<String>,
        left: Vec<(Arc<Lease>, ClusterError)>,
    },
}

impl Asked {
    fn role(&self) -> &str {
        match self {
            Asked::Slot { role, .. } | Asked::Note { role, .. } => role,
        }
    }
}

impl Coordinator {
    /// Claims `key` for what `asked` stands for: decided at once without a quorum (no round trip;
    /// `when_alone` decides), else asked of the servers off the loop (`None`: the answer comes
    /// back through `asks`).
    pub(super) fn claim(
        &mut self,
        role: &Role,
        key: ClaimKey,
        what: String,
        asked: Asked,
    ) -> Option<(Asked, Verdict)> {
        if self.quorum.load(Ordering::SeqCst) == ALONE {
            let alone = Err(ClusterError::Unavailable {
                why: "the last heartbeat was not written".into(),
            });
            return Some((asked, self.verdict(role, alone)));
        }
        tracing::debug!("cluster: asking the servers for {what}");
        if let Asked::Note { abs, .. } = &asked {
            self.asking.insert(abs.clone());
        }
        let cluster = self.cluster.clone();
        self.asks.spawn_on(
            async move {
                let asked_at = tokio::time::Instant::now();
                let claimed = cluster.claim_unless_done(&key, what).await;
                let took = asked_at.elapsed();
                Answer::Claimed { asked, claimed, took }
            },
            &self.handle,
        );
        None
    }

    /// Marks `leases` done (`finish`) or lets them go, off the loop.
    pub(super) fn settle(&mut self, role: Option<String>, leases: Vec<Arc<Lease>>, finish: bool) {
        let cluster = self.cluster.clone();
        self.asks.spawn_on(
            async move {
                let mut left = Vec::new();
                for l in leases {
                    if !finish {
                        cluster.release(&l).await;
                    } else if let Err(e) = cluster.finish(&l).await {
                        left.push((l, e));
                    }
                }
                Answer::Settled { role, left }
            },
            &self.handle,
        );
    }

    /// The next answer from the servers (`None`: a task that did not end well, already said).
    pub(super) async fn next_answer(&mut self) -> Option<Answer> {
        match self.asks.join_next().await? {
            Ok(answer) => Some(answer),
            Err(e) => {
                tracing::error!("cluster: a claim's task failed: {e}");
                None
            }
        }
    }

    /// Whether an answer is awaited.
    pub(super) fn awaits_answer(&self) -> bool {
        !self.asks.is_empty()
    }
}

/// The next answer of the cluster's servers, for the loop (only polled while one is awaited).
pub(in crate::doors::daemon) async fn next_answer(coordinator: &mut Option<Coordinator>) -> Option<Answer> {
    match coordinator.as_mut() {
        Some(c) => c.next_answer().await,
        None => None,
    }
}

/// Whether the loop awaits an answer of the cluster's servers.
pub(in crate::doors::daemon) fn awaits_answer(coordinator: &Option<Coordinator>) -> bool {
    coordinator.as_ref().is_some_and(Coordinator::awaits_answer)
}

impl Daemon {
    /// Claims the due slots of `role` (DESIGN §23); the ones to queue now are returned (all of
    /// them without `[cluster]`; else none: a won claim queues its slot when it is answered).
    pub(in crate::doors::daemon) fn claim_slots(&mut self, role: &Role, due: Vec<SlotRun>) -> Vec<SlotRun> {
        let Some(c) = self.coordinator.as_mut() else {
            return due;
        };
        let mut decided = Vec::new();
        for run in due {
            let key = ClaimKey::slot(&c.vault, &role.name, run.slot);
            let what = format!(
                "the {} slot of {}",
                run.slot.format("%Y-%m-%d %H:%M:%S UTC"),
                role.name
            );
            let asked = Asked::Slot {
                role: role.name.clone(),
                run,
                why: SlotWhy::Due,
            };
            decided.extend(c.claim(role, key, what, asked));
        }
        for (asked, verdict) in decided {
            self.on_claimed(asked, verdict);
        }
        Vec::new()
    }

    /// The picked notes this device may run now: the ones it holds a claim of. The others are
    /// claimed (by their path and content); a won claim makes them ready at the next scan.
    pub(in crate::doors::daemon) fn claim_notes(&mut self, role: &Role, notes: Vec<Note>) -> Vec<Note> {
        let Some(mut c) = self.coordinator.take() else {
            return notes;
        };
        let root = self.watching.paths.root.clone();
        let now = self.run_env.clock.instant();
        let mut keep = Vec::new();
        let mut look_again: Option<tokio::time::Instant> = None;
        for note in notes {
            let abs = root.join(note.path.as_path());
            if c.notes.contains_key(&abs) {
                keep.push(note);
                continue;
            }
            if c.asking.contains(&abs) {
                continue;
            }
            let key = ClaimKey::note(&c.vault, &role.name, note.path.as_str(), &content_hash(&note));
            let asked = Asked::Note {
                role: role.name.clone(),
                path: note.path.to_string(),
                abs: abs.clone(),
                seen: (note.modified, note.size),
            };
            // Without a quorum it is decided at once: run (`when_alone = "run"`) or wait.
            match c.claim(role, key, format!("the note {}", note.path), asked) {
                None => {}
                Some((_, Verdict::Mine(_))) => keep.push(note),
                Some((_, verdict)) => {
                    tracing::debug!("{}: {} is another device's", role.name, note.path);
                    let again = c.elsewhere_now(abs, (note.modified, note.size), &verdict, now);
                    look_again = again.map(|t| look_again.map_or(t, |l| l.min(t)));
                }
            }
        }
        self.coordinator = Some(c);
        if keep.is_empty() {
            // Nothing to run here now: the inbox is looked at again when a claim is answered or
            // may have lapsed.
            self.apply(Input::Scanned {
                role: role.name.clone(),
                ready: false,
                by_person: false,
                recheck_at: look_again,
            });
        }
        keep
    }

    /// A run ended: what it held is marked done when it succeeded, let go when it did not (any
    /// device may run it again), and left alone when it was lost (another device's now).
    pub(in crate::doors::daemon) fn settle_claims(&mut self, role: &str, succeeded: bool, notes: &[PathBuf]) {
        let Some(c) = self.coordinator.as_mut() else {
            return;
        };
        for p in notes {
            c.notes.remove(p);
        }
        let Some(leases) = c.running.remove(role) else {
            return;
        };
        if leases.iter().any(|l| !l.still_mine()) {
            tracing::warn!(
                "{role}: this device lost its claim during the run; it changed nothing after that"
            );
            return;
        }
        if !leases.is_empty() {
            c.settle(Some(role.to_string()), leases, succeeded);
        }
    }

    /// At the stop, once the runs ended: the answers still awaited are taken in (what a run held
    /// marked done, else another device would run it again), for at most `within`.
    pub(in crate::doors::daemon) async fn take_in_cluster_answers(&mut self, within: std::time::Duration) {
        let until = tokio::time::Instant::now() + within;
        while awaits_answer(&self.coordinator) {
            match tokio::time::timeout_at(until, next_answer(&mut self.coordinator)).await {
                Ok(Some(answer)) => self.on_cluster_answer(answer),
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }

    /// An answer of the cluster's servers came back to the loop.
    pub(in crate::doors::daemon) fn on_cluster_answer(&mut self, answer: Answer) {
        let Some(mut c) = self.coordinator.take() else {
            return;
        };
        let mut decided = None;
        match answer {
            Answer::Claimed { asked, claimed, took } => {
                let claimed = c.in_time(asked.role(), claimed, took);
                if let Asked::Note { abs, .. } = &asked {
                    c.asking.remove(abs);
                }
                match self.run_env.roles.roles.get(asked.role()) {
                    Some(role) => decided = Some((asked, c.verdict(role, claimed))),
                    // The role went away meanwhile (a reload): what it won is let go.
                    None => {
                        if let Ok(Claimed::Won(lease)) = claimed {
                            c.settle(Some(asked.role().to_string()), vec![lease], false);
                        }
                    }
                }
            }
            Answer::Settled { role, left } => {
                if role.is_none() {
                    c.finishing = false;
                }
                for (l, e) in left {
                    if let Some(role) = &role {
                        tracing::warn!(
                            "{role}: cannot mark {} done in the cluster ({e}); it is marked when the servers answer again",
                            crate::base::fence::Hold::what(l.as_ref())
                        );
                    }
                    c.unfinished.push(l);
                }
            }
        }
        self.coordinator = Some(c);
        if let Some((asked, verdict)) = decided {
            self.on_claimed(asked, verdict);
        }
    }

    /// A claim came to `verdict` (at once or from the servers).
    pub(super) fn on_claimed(&mut self, asked: Asked, verdict: Verdict) {
        match asked {
            Asked::Slot { role, run, why } => self.on_slot_claimed(role, run, why, verdict),
            Asked::Note {
                role,
                path,
                abs,
                seen,
            } => {
                let now = self.run_env.clock.instant();
                let Some(c) = self.coordinator.as_mut() else {
                    return;
                };
                match verdict {
                    Verdict::Mine(lease) => {
                        c.notes.insert(abs, lease);
                    }
                    other => {
                        tracing::debug!("{role}: {path} is another device's");
                        c.elsewhere_now(abs, seen, &other, now);
                    }
                }
                self.apply(Input::ClaimAnswered { role });
            }
        }
    }

    fn on_slot_claimed(&mut self, role: String, run: SlotRun, why: SlotWhy, verdict: Verdict) {
        let now = self.run_env.clock.instant();
        let Some(c) = self.coordinator.as_mut() else {
            return;
        };
        let again = now + c.again();
        match (verdict, why) {
            (Verdict::Mine(lease), why) => {
                if matches!(why, SlotWhy::TakeOver) {
                    tracing::info!(
                        "{role}: the {} slot another device claimed was not done; running it here",
                        run.slot
                    );
                }
                if let Some(l) = lease {
                    c.slots.insert((role.clone(), run.slot), l);
                }
                self.apply(Input::SlotsDue {
                    role,
                    slots: vec![run],
                });
            }
            (Verdict::Done, SlotWhy::Due) => {
                tracing::debug!("{role}: the {} slot was run elsewhere", run.slot);
            }
            (Verdict::Done, _) => {}
            (Verdict::Wait, SlotWhy::Due) => {
                c.alone.entry(role.clone()).or_default().push(run.slot);
                if let Some(r) = self.run_env.roles.roles.get(&role).cloned() {
                    self.say_alone(&r, run.slot);
                }
            }
            // The servers answer heartbeats but not yet claims: all of it again next time.
            (Verdict::Wait, SlotWhy::CatchUp { skipped }) => {
                c.alone.entry(role).or_default().extend(skipped);
            }
            (Verdict::Elsewhere | Verdict::Wait, why) => {
                let missed = match why {
                    SlotWhy::Due => {
                        tracing::debug!("{role}: another device runs the {} slot", run.slot);
                        1
                    }
                    _ => run.missed,
                };
                c.watched.push(Watched {
                    role,
                    slot: run.slot,
                    again,
                    missed,
                });
            }
        }
    }
}

impl Coordinator {
    /// A claim won only after a third of the lease (the servers came back while it waited), or
    /// once the heartbeat found no quorum, may lapse before its first renewal: while it waited,
    /// this device may have skipped or run the same work alone. It is let go and taken as no
    /// answer (`when_alone` decides, a skipped slot is caught up).
    fn in_time(
        &mut self,
        role: &str,
        claimed: Result<Claimed, ClusterError>,
        took: std::time::Duration,
    ) -> Result<Claimed, ClusterError> {
        let late = took > self.again() || self.quorum.load(Ordering::SeqCst) == ALONE;
        match claimed {
            Ok(Claimed::Won(lease)) if late => {
                self.settle(Some(role.to_string()), vec![lease], false);
                Err(ClusterError::Unavailable {
                    why: format!("the servers answered a claim after {} ms", took.as_millis()),
                })
            }
            other => other,
        }
    }

    /// The note at `abs` is another device's (held, done, or no quorum to ask): remembered with
    /// when to look at it again (`None`: done elsewhere, never while it is unchanged).
    fn elsewhere_now(
        &mut self,
        abs: PathBuf,
        (modified, size): (SystemTime, u64),
        verdict: &Verdict,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let again = match verdict {
            Verdict::Done => None,
            _ => Some(now + self.again()),
        };
        self.elsewhere.insert(
            abs,
            Elsewhere {
                modified,
                size,
                again,
            },
        );
        again
    }

    /// Once the servers answer again: what ran meanwhile is marked done (off the loop, one
    /// batch at a time).
    pub(super) fn finish_unfinished(&mut self) {
        if self.unfinished.is_empty() || self.finishing {
            return;
        }
        self.finishing = true;
        let leases = std::mem::take(&mut self.unfinished);
        self.settle(None, leases, true);
    }
}
