//! One catch-up per role after the servers were out of reach (`when_alone = "skip"`, docs/spec.md §4
//! and §23), across devices that each saw the outage a little differently.
//!
//! Each device skipped the slots that came due while its claims were not written, and they
//! differ at the edges: a claim whose reply timed out may still have been written (the servers
//! commit a leader's pending writes once their quorum returns), so a device holds a claim it
//! does not know of, and another ran a slot the first skipped. Claiming "the newest skipped
//! slot" then let two devices pick two slots and run two catch-ups, or none. So a catch-up is
//! decided in three steps:
//!
//! 1. **What was missed**: the skipped slots not marked done and not taken. A slot is taken when
//!    its claim's maker also wrote its tenure (it heard back, and runs or ran it); a claim without
//!    one is a forgotten claim, still missed — and the process that made it takes it back here.
//! 2. The role's catch-up rule picks the slots to run; each is **claimed as any slot**, so a slot
//!    runs once whoever else looks at it.
//! 3. A **catch-up record**: the `n`th of the role (`ClaimKey::catch_up`, in the done bucket,
//!    kept a week), saying which missed slots it saw (oldest to newest), which it runs and for how
//!    many each stands, and which it found held. Records are only created, never updated or
//!    deleted — the one write 2.9's clustered servers decide for exactly one device
//!    (`cluster::of_two_devices_creating_one_empty_key_at_once_exactly_one_wins`). A device that
//!    finds the `n`th taken lets it decide the slots in its range: one it runs stays its own; one
//!    it found held by this device is this device's to run; any other is marked done unrun. What
//!    is left goes into the record `n+1`.
//!
//! A device whose slots another's record runs watches them: if that device goes silent before
//! running them, the claim lapses and one of the watchers runs it. A watched slot taken over
//! later asks the records first (`covered_by_catch_up`): one a catch-up stood for is marked done.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::{lease, tenure, unavailable, ClaimKey, Claimed, Cluster, ClusterError, Holder, Lease, Read};

/// Records a role may have in the week the done bucket keeps them (one per outage it caught up).
const MAX_RECORDS: u32 = 1000;
/// Skipped slots looked up, newest first; older ones count as missed unlooked.
const LOOKED_UP: usize = 100;
/// Lookups in flight at once.
const AT_ONCE: usize = 16;
/// The whole decision takes at most this long (a few requests on loopback take milliseconds).
const DECIDED_WITHIN: Duration = Duration::from_secs(10);

/// Slots and the number of missed slots each stands for.
type Runs = Vec<(DateTime<Utc>, usize)>;

/// A slot this device runs as (part of) a catch-up; its lease is kept (renewed) already.
#[derive(Debug)]
pub struct CatchUpRun {
    pub slot: DateTime<Utc>,
    /// How many missed slots this run stands for.
    pub missed: usize,
    pub lease: Arc<Lease>,
}

/// What a role's catch-up came to on this device: its share of the missed slots.
#[derive(Debug)]
pub enum CatchUpShare {
    /// This device runs these.
    Run(Vec<CatchUpRun>),
    /// Another device's catch-up runs these slots (each with the count it stands for): watched,
    /// in case that device goes silent before it runs them.
    Elsewhere(Runs),
    /// Nothing is missed, or the role's rule runs none of it.
    Nothing,
}

/// A catch-up record's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    device: String,
    instance: String,
    at: DateTime<Utc>,
    /// The oldest and newest missed slot it saw: it decided every slot between, but those it
    /// found `held`.
    from: DateTime<Utc>,
    through: DateTime<Utc>,
    /// The slots it runs, each with how many missed slots it stands for.
    runs: Runs,
    /// The slots its rule picked that another device held when it claimed them.
    held: Vec<DateTime<Utc>>,
    /// The slots it skipped that another device had taken (its claim, its tenure).
    #[serde(default)]
    taken: Vec<DateTime<Utc>>,
}

impl Record {
    /// Whether this record decided `slot`, for a device that won its claim: a slot it runs, or
    /// found held or taken, is that device's to run (the record's maker does not hold it); any
    /// other in its range it stood for, or its rule left (`all`'s cap).
    fn decided(&self, slot: DateTime<Utc>) -> bool {
        let theirs = self.runs.iter().any(|(s, _)| *s == slot)
            || self.held.contains(&slot)
            || self.taken.contains(&slot);
        !theirs && self.from <= slot && slot <= self.through
    }

    /// What a run of `slot` stands for, when this record named it.
    fn stands_for(&self, slot: DateTime<Utc>) -> Option<usize> {
        self.runs.iter().find(|(s, _)| *s == slot).map(|(_, n)| *n)
    }
}

/// The runs of a catch-up, for the log: "the 09:00:00 UTC slot (for 3)".
fn said(runs: &Runs) -> String {
    runs.iter()
        .map(|(slot, n)| format!("the {} slot (for {n})", slot.format("%H:%M:%S UTC")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What creating a catch-up record came to.
enum Made {
    Mine,
    /// Another device's (`None`: a value tabd did not write).
    Other(Option<Record>),
    /// Another device's, gone before it could be read.
    Gone,
    /// Deleted by hand, or not tabd's: this catch-up is not decided (nothing of it runs).
    Deleted,
}

/// What this device found, won and could not win, for its record.
struct Found {
    missed: Vec<DateTime<Utc>>,
    won: Vec<CatchUpRun>,
    held: Runs,
    taken: Vec<DateTime<Utc>>,
}

/// What the cluster says of a skipped slot.
enum Looked {
    Done,
    /// Its claim's maker heard back (wrote its tenure): it runs or ran it.
    Taken,
    Missed,
}

impl Cluster {
    /// Catches `role` up for the slots it `skipped` without a quorum, once across devices (see
    /// the module's text). `rule` is the role's catch-up rule: given the missed slots, oldest
    /// first, the slots to run and how many each stands for.
    pub async fn catch_up(
        &self,
        role: &str,
        skipped: Vec<DateTime<Utc>>,
        rule: impl Fn(Vec<DateTime<Utc>>) -> Runs,
    ) -> Result<CatchUpShare, ClusterError> {
        tokio::time::timeout(DECIDED_WITHIN, self.decide_catch_up(role, skipped, rule))
            .await
            .unwrap_or_else(|_| {
                Err(unavailable(format!(
                    "the servers did not decide a catch-up within {} s",
                    DECIDED_WITHIN.as_secs()
                )))
            })
    }

    async fn decide_catch_up(
        &self,
        role: &str,
        skipped: Vec<DateTime<Utc>>,
        rule: impl Fn(Vec<DateTime<Utc>>) -> Runs,
    ) -> Result<CatchUpShare, ClusterError> {
        let (missed, taken) = self.missed(role, skipped.clone()).await?;
        tracing::debug!("{role}: catch-up: skipped {skipped:?}, missed {missed:?}, taken {taken:?}");
        if missed.is_empty() {
            return Ok(CatchUpShare::Nothing);
        }
        let (won, held) = self.claim_runs(role, rule(missed.clone())).await?;
        if won.is_empty() {
            return Ok(if held.is_empty() {
                CatchUpShare::Nothing
            } else {
                CatchUpShare::Elsewhere(held)
            });
        }
        let found = Found {
            missed,
            won,
            held,
            taken,
        };
        self.record(role, found, rule).await
    }

    /// The skipped slots of `role` not done and not taken (see `Looked`), oldest first; and those
    /// taken.
    async fn missed(
        &self,
        role: &str,
        mut skipped: Vec<DateTime<Utc>>,
    ) -> Result<(Vec<DateTime<Utc>>, Vec<DateTime<Utc>>), ClusterError> {
        skipped.sort();
        skipped.dedup();
        let split = skipped.len().saturating_sub(LOOKED_UP);
        let looked: Vec<(DateTime<Utc>, Looked)> = futures::stream::iter(skipped[split..].iter().copied())
            .map(|slot| async move {
                let key = ClaimKey::slot(&self.inner.vault, role, slot);
                self.look(&key).await.map(|looked| (slot, looked))
            })
            .buffered(AT_ONCE)
            .try_collect()
            .await?;
        let mut missed = skipped[..split].to_vec();
        let mut taken = Vec::new();
        for (slot, looked) in looked {
            match looked {
                Looked::Missed => missed.push(slot),
                Looked::Taken => taken.push(slot),
                Looked::Done => {}
            }
        }
        Ok((missed, taken))
    }

    /// Done, taken, or missed: a claim counts as taken only when its maker wrote its tenure (so
    /// heard back), and is this process's only while it holds its lease.
    async fn look(&self, key: &ClaimKey) -> Result<Looked, ClusterError> {
        if self.is_done(key).await? {
            return Ok(Looked::Done);
        }
        let holder = match self.holder_of(key).await? {
            Read::Found(h, _) => h,
            Read::Absent | Read::Deleted => return Ok(Looked::Missed),
            // A claim tabd did not write: nothing is caught up on the strength of it.
            Read::Refused(why) => {
                self.refuse(&format!("the claim {key}"), &why);
                return Ok(Looked::Taken);
            }
        };
        if holder.instance == self.inner.instance {
            let held = self.registry().holds(key.as_str(), None);
            return Ok(if held { Looked::Taken } else { Looked::Missed });
        }
        let b = self.buckets().await?;
        let tenure = b.tenure.entry(key.as_str()).await.map_err(unavailable)?;
        let heard_back =
            match self
                .inner
                .trust
                .read::<tenure::Tenure>(tenure::TENURE, key.as_str(), tenure, None)
            {
                Read::Found(t, _) => t.instance == holder.instance,
                _ => false,
            };
        Ok(if heard_back { Looked::Taken } else { Looked::Missed })
    }

    /// Claims each slot the rule runs (this process's own forgotten claim of one taken back):
    /// those won, kept from now on, and those another device holds.
    async fn claim_runs(&self, role: &str, runs: Runs) -> Result<(Vec<CatchUpRun>, Runs), ClusterError> {
        let mut held = Vec::new();
        let mut won = Vec::new();
        for (slot, stands_for) in runs {
            let what = format!("the {} slot of {role}", slot.format("%Y-%m-%d %H:%M:%S UTC"));
            let key = ClaimKey::slot(&self.inner.vault, role, slot);
            let claimed = match self.claim_unless_done(&key, what.clone()).await {
                Ok(Claimed::Held) => self.take_back(&key, what).await,
                other => other,
            };
            match claimed {
                Ok(Claimed::Won(lease)) => {
                    self.keep(&lease);
                    won.push(CatchUpRun {
                        slot,
                        missed: stands_for,
                        lease,
                    });
                }
                Ok(Claimed::Held) => held.push((slot, stands_for)),
                Ok(Claimed::Done) => {}
                Err(e) => return Err(self.give_up(won, e).await),
            }
        }
        Ok((won, held))
    }

    /// A claim of `key` this process made and never heard back about, or let lapse (a catch-up
    /// given up), and holds no lease of: its own again, with the revision the servers kept.
    async fn take_back(&self, key: &ClaimKey, what: String) -> Result<Claimed, ClusterError> {
        let b = self.buckets().await?;
        let Some(entry) = b.claims.entry(key.as_str()).await.map_err(unavailable)? else {
            return Ok(Claimed::Held);
        };
        let revision = entry.revision;
        let Read::Found(holder, _) =
            self.inner
                .trust
                .read::<Holder>(super::CLAIMS, key.as_str(), Some(entry), None)
        else {
            return Ok(Claimed::Held);
        };
        let ours = holder.instance == self.inner.instance && !self.registry().holds(key.as_str(), None);
        // Its age counts from when this process wrote it (the servers' clock starts later).
        let age = (Utc::now() - holder.at).to_std().unwrap_or_default();
        let sent = lease::boot_now().saturating_sub(age);
        let lease = Arc::new(Lease::new(key.clone(), what, revision, sent, b.lease));
        if !ours || !lease.still_mine() {
            return Ok(Claimed::Held);
        }
        self.judge_won(lease).await
    }

    /// Creates the role's next catch-up record for the slots `won`, after the records other
    /// devices made first (each decides the slots in its range: see `Record::decided`).
    async fn record(
        &self,
        role: &str,
        found: Found,
        rule: impl Fn(Vec<DateTime<Utc>>) -> Runs,
    ) -> Result<CatchUpShare, ClusterError> {
        let Found {
            mut missed,
            mut won,
            held,
            taken,
        } = found;
        let b = match self.buckets().await {
            Ok(b) => b,
            Err(e) => return Err(self.give_up(won, e).await),
        };
        let mut n = 1;
        while n <= MAX_RECORDS {
            let key = ClaimKey::catch_up(&self.inner.vault, role, n);
            let slots = missed.iter().copied().chain(won.iter().map(|r| r.slot));
            let (Some(from), Some(through)) = (slots.clone().min(), slots.max()) else {
                break;
            };
            let mine = Record {
                device: self.inner.device.clone(),
                instance: self.inner.instance.clone(),
                at: Utc::now(),
                from,
                through,
                runs: won.iter().map(|r| (r.slot, r.missed)).collect(),
                held: held.iter().map(|(s, _)| *s).collect(),
                taken: taken.clone(),
            };
            let other = match self.make_record(&b.done, &key, &mine).await {
                Ok(Made::Mine) => {
                    tracing::info!(
                        "{role}: {} scheduled run(s) missed while the servers were out of reach ({} to {}); caught up here: {}",
                        missed.len(),
                        from.format("%Y-%m-%d %H:%M:%S UTC"),
                        through.format("%H:%M:%S UTC"),
                        said(&mine.runs)
                    );
                    return Ok(CatchUpShare::Run(won));
                }
                Ok(Made::Other(other)) => other,
                // Gone between the two calls (a week old): this number again.
                Ok(Made::Gone) => continue,
                Ok(Made::Deleted) => return Ok(self.refused_record(role, &key, won).await),
                Err(e) => return Err(self.give_up(won, e).await),
            };
            n += 1;
            // A record that is not tabd's decides nothing.
            let Some(other) = other else { continue };
            tracing::debug!(
                "{role}: catch-up record {} is {}'s (from {} through {}, runs {:?}); won here {:?}, missed {:?}",
                n - 1,
                other.device,
                other.from,
                other.through,
                other.runs,
                won.iter().map(|r| r.slot).collect::<Vec<_>>(),
                missed
            );
            // This process's own write, taken by the servers after its request timed out.
            if other.instance == self.inner.instance && other.runs == mine.runs {
                return Ok(CatchUpShare::Run(won));
            }
            missed.retain(|s| !other.decided(*s) && !other.runs.iter().any(|(r, _)| r == s));
            won = self.left_by(&other, won, &rule, &missed).await;
            if won.is_empty() {
                let mut watch = other.runs;
                watch.extend(held);
                return Ok(CatchUpShare::Elsewhere(watch));
            }
        }
        let full = unavailable(format!("{role} has {MAX_RECORDS} catch-up records this week"));
        Err(self.give_up(won, full).await)
    }

    /// A catch-up record deleted or written by hand: this catch-up runs nothing (said once),
    /// since the record it would be decided by is not known.
    async fn refused_record(&self, role: &str, key: &ClaimKey, won: Vec<CatchUpRun>) -> CatchUpShare {
        self.refuse(
            &format!("the catch-up of {role}"),
            &format!("its record {key} was deleted or written over by hand"),
        );
        // The claims are let lapse; the error it gives back is this function's own.
        let _ = self
            .give_up(won, unavailable("a catch-up record was deleted"))
            .await;
        CatchUpShare::Nothing
    }

    /// Creates the record `key` as `mine`, or reads the one another device made first.
    async fn make_record(
        &self,
        done: &kv::Store,
        key: &ClaimKey,
        mine: &Record,
    ) -> Result<Made, ClusterError> {
        let value = self.inner.trust.seal(
            super::DONE,
            key.as_str(),
            serde_json::to_vec(mine).unwrap_or_default(),
        );
        // Never deleted by tabd: a marker under the key means someone removed a record, and
        // creating it again (through the marker) would decide its slots twice.
        match done.entry(key.as_str()).await.map_err(unavailable)? {
            Some(e) if e.operation != kv::Operation::Put => return Ok(Made::Deleted),
            _ => {}
        }
        match done.create(key.as_str(), value).await {
            Ok(_) => Ok(Made::Mine),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                let entry = done.entry(key.as_str()).await.map_err(unavailable)?;
                match self
                    .inner
                    .trust
                    .read::<Record>(super::DONE, key.as_str(), entry, None)
                {
                    Read::Found(r, _) => Ok(Made::Other(Some(r))),
                    Read::Refused(why) => {
                        self.refuse(&format!("the catch-up record {key}"), &why);
                        Ok(Made::Deleted)
                    }
                    Read::Absent => Ok(Made::Gone),
                    Read::Deleted => Ok(Made::Deleted),
                }
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The runs `other`'s record did not decide, with what each stands for now (`other`'s count
    /// for a run it named, else the rule's over what is left missed); those it decided are
    /// marked done, never run.
    async fn left_by(
        &self,
        other: &Record,
        won: Vec<CatchUpRun>,
        rule: impl Fn(Vec<DateTime<Utc>>) -> Runs,
        missed: &[DateTime<Utc>],
    ) -> Vec<CatchUpRun> {
        let (decided, mut left): (Vec<_>, Vec<_>) = won.into_iter().partition(|r| other.decided(r.slot));
        for r in decided {
            if let Err(e) = self.finish(&r.lease).await {
                tracing::debug!("cluster: a slot a catch-up stood for is marked done later ({e})");
            }
        }
        let counts = rule(missed.to_vec());
        for r in &mut left {
            r.missed = other
                .stands_for(r.slot)
                .or_else(|| counts.iter().find(|(s, _)| *s == r.slot).map(|(_, n)| *n))
                .unwrap_or(1);
        }
        left
    }

    /// Whether a catch-up of `role` stood for `slot` without running it: a device that takes a
    /// watched slot over marks it done instead of running it.
    pub async fn covered_by_catch_up(&self, role: &str, slot: DateTime<Utc>) -> Result<bool, ClusterError> {
        let b = self.buckets().await?;
        for n in 1..=MAX_RECORDS {
            let key = ClaimKey::catch_up(&self.inner.vault, role, n);
            let entry = b.done.entry(key.as_str()).await.map_err(unavailable)?;
            let record = match self
                .inner
                .trust
                .read::<Record>(super::DONE, key.as_str(), entry, None)
            {
                Read::Absent => return Ok(false),
                Read::Found(r, _) => r,
                // Not readable as tabd's: it decides nothing; the next may.
                Read::Refused(_) | Read::Deleted => continue,
            };
            if record.decided(slot) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Lets the slots won so far lapse (a claim is never deleted: `let_lapse`; this process takes
    /// them back at its next try, `take_back`) and passes `e` on.
    async fn give_up(&self, won: Vec<CatchUpRun>, e: ClusterError) -> ClusterError {
        for r in won {
            self.let_lapse(&r.lease).await;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(n: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + n, 0).expect("a time")
    }

    fn record(from: i64, through: i64, runs: &[(i64, usize)], held: &[i64]) -> Record {
        Record {
            device: "laptop".into(),
            instance: "1".into(),
            at: at(99),
            from: at(from),
            through: at(through),
            runs: runs.iter().map(|(s, n)| (at(*s), *n)).collect(),
            held: held.iter().copied().map(at).collect(),
            taken: Vec::new(),
        }
    }

    #[test]
    fn a_record_decides_the_slots_in_its_range_but_those_it_runs_or_found_held() {
        // catch_up: once, missed 2..=8: the run of 8 stands for four.
        let once = record(2, 8, &[(8, 4)], &[]);
        assert!(once.decided(at(2)) && once.decided(at(6)), "stood for");
        assert!(
            !once.decided(at(8)),
            "its own run: whoever wins its claim runs it"
        );
        assert_eq!(once.stands_for(at(8)), Some(4));
        assert!(
            !once.decided(at(1)) && !once.decided(at(10)),
            "outside what it saw"
        );
        // catch_up: all, missed 2..=30: ten runs (the cap), 24 found held by another device.
        let runs: Vec<(i64, usize)> = (12..=30)
            .step_by(2)
            .filter(|s| *s != 24)
            .map(|s| (s, 1))
            .collect();
        let all = record(2, 30, &runs, &[24]);
        assert!(!all.decided(at(24)), "held elsewhere: that device runs it");
        assert!(
            all.decided(at(4)),
            "older than the cap: left, not run again elsewhere"
        );
        assert!(!all.decided(at(12)));
        assert_eq!(all.stands_for(at(4)), None);
        // A slot it skipped but found taken by a third device: that device's.
        let mut taken = record(2, 8, &[(8, 3)], &[]);
        taken.taken = vec![at(4)];
        assert!(!taken.decided(at(4)) && taken.decided(at(6)));
    }
}
