//! Who held a claim before this device, and whether it may have done the work (docs/spec.md §23).
//!
//! A claim lapses when its holder stops renewing it, for one of three reasons: the holder died
//! (kill -9, a closed lid), it lost the servers while its run went on, or it lost them *after* its
//! run finished but before it could mark the work done. Only the first two leave work to redo; in
//! the third, a device that took the lapsed claim over would run the slot or note a second time.
//! The lapse alone cannot tell them apart, so a device that wins a claim another device held
//! asks that device first:
//!
//! - every claim won through `claim_unless_done` writes a **tenure** record (`tabd_tenure`, a
//!   week): the holder's device, process and a sequence number of this process's events;
//! - every heartbeat carries the keys its process still **holds** (a run going on, a queued slot,
//!   a note being run) or **owes** (a run finished whose done mark the servers did not take yet),
//!   and the sequence number at which it looked. A heartbeat is written before what is owed is
//!   marked done, so a heartbeat that does not name a key the process claimed earlier means the
//!   process let it go: marked done (visible from then on) or released after a failed run;
//! - the device that won the lapsed claim reads the holder's heartbeat: newer than the tenure and
//!   naming the key — wait; newer and not naming it — the done marker decides; older — wait, unless
//!   the holder has been silent for a lease and a half while this device had the servers all that
//!   time: then it is gone, and its work is taken over.
//!
//! A holder cut off from the servers (a partition) while the others are not is gone after that
//! silence even if its run finished; that run is then done twice — the one case no lease can
//! settle without waiting forever (docs/devices.md says so).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lease::{boot_now, Lease};

/// The tenure bucket: who won each claim last, kept as long as done markers.
pub const TENURE: &str = "tabd_tenure";
/// At most this many keys in one heartbeat; a process holding more says it holds everything.
pub const HOLDS_CAP: usize = 2000;

/// Who won a claim (the tenure record's value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenure {
    pub device: String,
    pub instance: String,
    /// The holder's sequence number when it registered the claim.
    pub seq: u64,
    /// The holder's clock when it did (only compared with the same machine's heartbeats).
    pub at: chrono::DateTime<chrono::Utc>,
}

/// What a heartbeat says of the claims its process holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holds {
    /// The process's sequence number when it looked (0: a heartbeat that says nothing of claims).
    #[serde(default)]
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// More than `HOLDS_CAP` keys: it holds every key, as far as anyone asking knows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

impl Holds {
    /// A heartbeat that says nothing of claims (a claim's own value, an older tabd's heartbeat).
    pub fn says_nothing(&self) -> bool {
        self.seq == 0
    }
}

/// What the previous holder of a lapsed claim tells this device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prior {
    /// It let the claim go since: the done marker says whether the work was done.
    LetGo,
    /// It still holds or owes it: its run goes on, or it finished and will mark it done.
    Holds,
    /// Nothing newer than the claim from it yet: ask again later.
    Unknown,
    /// Silent for a lease and a half while this device had the servers: its work is taken over.
    Gone,
}

/// The heartbeat of the previous holder's device as read now, with its process's `holds`.
#[derive(Debug, Clone)]
pub struct Beat {
    pub instance: String,
    pub at: chrono::DateTime<chrono::Utc>,
    pub holds: Holds,
}

/// How long a holder may be silent before it counts as gone: it writes a heartbeat every third of
/// the lease, so this is four or more heartbeats missed.
pub fn gone_after(lease: Duration) -> Duration {
    lease + lease / 2
}

/// Judges the previous holder of `key` from its device's heartbeat (`beat`) and how long this
/// device has watched that heartbeat not change while it had the servers (`silent`).
pub fn judge(tenure: &Tenure, beat: Option<&Beat>, key: &str, silent: Duration, lease: Duration) -> Prior {
    let newer = beat.filter(|b| {
        if b.instance == tenure.instance {
            b.holds.seq > tenure.seq
        } else {
            // A later process under the device's name holds nothing its predecessor claimed; an
            // earlier one's heartbeat (the holder has not written its first yet) says nothing.
            b.at > tenure.at
        }
    });
    let holds =
        |b: &Beat| b.instance == tenure.instance && (b.holds.all || b.holds.keys.iter().any(|k| k == key));
    let said = match newer {
        Some(b) if holds(b) => Prior::Holds,
        Some(_) => return Prior::LetGo,
        None => Prior::Unknown,
    };
    // Holding it, or saying nothing yet: believed only while it still writes heartbeats.
    if silent >= gone_after(lease) {
        Prior::Gone
    } else {
        said
    }
}

/// This process's claims and the heartbeats it has watched (one per `Cluster`).
#[derive(Default)]
pub(super) struct Registry {
    /// Its sequence number: one more at each claim registered and each heartbeat's look.
    seq: u64,
    /// Claims won and not let go (weak: a lease nobody keeps is held by nobody).
    held: Vec<Weak<Lease>>,
    /// Runs finished whose done mark the servers did not take yet: marked after a heartbeat.
    pub(super) owed: Vec<Arc<Lease>>,
    /// Boot time since which this process's heartbeats have been written without a gap.
    connected_since: Option<Duration>,
    last_beat: Option<Duration>,
    /// The lease, as of the last heartbeat.
    lease: Duration,
    /// Each device's heartbeat as last seen (its process and `holds.seq`), and since when.
    watched: HashMap<String, ((String, u64), Duration)>,
}

impl Registry {
    /// Registers a claim won: returns the sequence number its tenure records.
    pub(super) fn hold(&mut self, lease: &Arc<Lease>) -> u64 {
        self.seq += 1;
        self.held.push(Arc::downgrade(lease));
        self.seq
    }

    /// The claim is let go (marked done or released).
    pub(super) fn let_go(&mut self, lease: &Lease) {
        self.held
            .retain(|l| l.strong_count() > 0 && !std::ptr::eq(l.as_ptr(), lease));
        self.owed.retain(|l| !std::ptr::eq(Arc::as_ptr(l), lease));
    }

    /// A finished run's claim the servers did not mark done: owed until they do.
    pub(super) fn owe(&mut self, lease: &Arc<Lease>) {
        if !self.owed.iter().any(|l| Arc::ptr_eq(l, lease)) {
            self.owed.push(Arc::clone(lease));
        }
    }

    /// What a heartbeat written now says this process holds (held and owed).
    pub(super) fn look(&mut self) -> Holds {
        self.seq += 1;
        self.held.retain(|l| l.strong_count() > 0);
        let mut keys: Vec<String> = self
            .held
            .iter()
            .filter_map(Weak::upgrade)
            .map(|l| l.key.as_str().to_string())
            .chain(self.owed.iter().map(|l| l.key.as_str().to_string()))
            .collect();
        keys.sort();
        keys.dedup();
        let all = keys.len() > HOLDS_CAP;
        if all {
            keys.clear();
        }
        Holds {
            seq: self.seq,
            keys,
            all,
        }
    }

    /// Whether this process holds or owes `key` through a lease other than `except` (a tenure
    /// of its own: an earlier claim of the same key whose run may go on), or through any lease.
    pub(super) fn holds(&self, key: &str, except: Option<&Lease>) -> bool {
        let other = |l: &Lease| l.key.as_str() == key && except.is_none_or(|e| !std::ptr::eq(l, e));
        self.held.iter().filter_map(Weak::upgrade).any(|l| other(&l)) || self.owed.iter().any(|l| other(l))
    }

    /// A heartbeat of this process was written (`ok`) or not: the servers were reachable
    /// without a gap since `connected_since`.
    pub(super) fn beat(&mut self, ok: bool, lease: Duration) {
        let now = boot_now();
        self.lease = lease;
        if !ok {
            self.connected_since = None;
            return;
        }
        if self.connected(now).is_none() {
            self.connected_since = Some(now);
        }
        self.last_beat = Some(now);
    }

    /// Since when this process has had the servers without a gap, if it has them now: its last
    /// heartbeat was written within two thirds of a lease (two missed — a sleep, a stall — start
    /// the count anew).
    fn connected(&self, now: Duration) -> Option<Duration> {
        let recent = self
            .last_beat
            .is_some_and(|b| now.saturating_sub(b) <= self.lease * 2 / 3);
        self.connected_since.filter(|_| recent)
    }

    /// The devices whose heartbeats this process has read.
    pub(super) fn watched_devices(&self) -> Vec<String> {
        self.watched.keys().cloned().collect()
    }

    /// A device's heartbeat read now (each change is noted): how long it has stayed the same while this process had the
    /// servers (zero when it just changed, or this process is not connected).
    pub(super) fn watch(&mut self, device: &str, beat: Option<&Beat>) -> Duration {
        let now = boot_now();
        let seen = beat
            .map(|b| (b.instance.clone(), b.holds.seq))
            .unwrap_or_default();
        let since = match self.watched.get(device) {
            Some((last, since)) if *last == seen => *since,
            _ => {
                self.watched.insert(device.to_string(), (seen, now));
                now
            }
        };
        // The first lease after this process (re)gains the servers counts for nobody's silence:
        // a device that ran on through an outage writes its first heartbeat and then its owed
        // done marks a moment after the servers return (its reconnection waits up to 2 s between
        // tries, and the servers refuse writes for a few seconds once their quorum is back).
        match self.connected(now) {
            Some(c) => now.saturating_sub(since.max(c + self.lease)),
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenure(seq: u64) -> Tenure {
        Tenure {
            device: "laptop".into(),
            instance: "a".into(),
            seq,
            at: chrono::DateTime::from_timestamp(1_000, 0).unwrap(),
        }
    }

    fn beat(instance: &str, seq: u64, keys: &[&str], at: i64) -> Beat {
        Beat {
            instance: instance.into(),
            at: chrono::DateTime::from_timestamp(at, 0).unwrap(),
            holds: Holds {
                seq,
                keys: keys.iter().map(|k| k.to_string()).collect(),
                all: false,
            },
        }
    }

    const LEASE: Duration = Duration::from_secs(30);

    #[test]
    fn a_holder_that_wrote_since_its_claim_is_believed_and_one_that_did_not_is_waited_for() {
        let t = tenure(7);
        let quiet = Duration::ZERO;
        assert_eq!(
            judge(&t, Some(&beat("a", 8, &["k"], 0)), "k", quiet, LEASE),
            Prior::Holds
        );
        assert_eq!(
            judge(&t, Some(&beat("a", 8, &["k"], 0)), "k", gone_after(LEASE), LEASE),
            Prior::Gone,
            "it said it holds it, then died"
        );
        assert_eq!(
            judge(&t, Some(&beat("a", 8, &["other"], 0)), "k", quiet, LEASE),
            Prior::LetGo
        );
        let mut all = beat("a", 8, &[], 0);
        all.holds.all = true;
        assert_eq!(
            judge(&t, Some(&all), "k", quiet, LEASE),
            Prior::Holds,
            "more than the cap"
        );
        // A heartbeat from before the claim (or the same look) says nothing of it.
        assert_eq!(
            judge(&t, Some(&beat("a", 7, &[], 0)), "k", quiet, LEASE),
            Prior::Unknown
        );
        assert_eq!(judge(&t, None, "k", quiet, LEASE), Prior::Unknown);
    }

    #[test]
    fn a_holder_silent_a_lease_and_a_half_is_gone_and_a_later_process_holds_nothing_of_its_predecessor() {
        let t = tenure(7);
        let old = beat("a", 3, &["k"], 0);
        assert_eq!(judge(&t, Some(&old), "k", LEASE, LEASE), Prior::Unknown);
        assert_eq!(judge(&t, Some(&old), "k", gone_after(LEASE), LEASE), Prior::Gone);
        assert_eq!(judge(&t, None, "k", gone_after(LEASE), LEASE), Prior::Gone);
        // A restarted tabd under the same name: later than the claim — its predecessor is gone.
        assert_eq!(
            judge(&t, Some(&beat("b", 1, &["k"], 2_000)), "k", Duration::ZERO, LEASE),
            Prior::LetGo
        );
        // The predecessor's heartbeat while the claimant has not written one: nothing yet.
        assert_eq!(
            judge(&t, Some(&beat("b", 99, &[], 500)), "k", Duration::ZERO, LEASE),
            Prior::Unknown
        );
    }

    #[test]
    fn the_registry_says_what_is_held_and_owed_and_forgets_what_was_let_go_or_dropped() {
        let key =
            |s: &str| super::super::ClaimKey::slot("v", s, chrono::DateTime::from_timestamp(0, 0).unwrap());
        let lease = |s: &str| Arc::new(Lease::new(key(s), s.into(), 1, boot_now(), LEASE));
        let mut r = Registry::default();
        let (a, b, c) = (lease("a"), lease("b"), lease("c"));
        let seq_a = r.hold(&a);
        r.hold(&b);
        r.hold(&c);
        let look = r.look();
        assert!(look.seq > seq_a);
        assert_eq!(look.keys.len(), 3);
        r.owe(&a);
        r.let_go(&b);
        drop(c);
        let look = r.look();
        assert_eq!(
            look.keys,
            vec![key("a").as_str().to_string()],
            "owed a, let go of b, dropped c"
        );
        let other = lease("a");
        assert!(r.holds(key("a").as_str(), Some(&other)) && !r.holds(key("b").as_str(), Some(&other)));
        assert!(
            !r.holds(key("a").as_str(), Some(&a)),
            "not through the lease asking"
        );
        assert!(r.holds(key("a").as_str(), None), "through any lease");
        r.let_go(&a);
        assert!(r.look().keys.is_empty() && r.owed.is_empty());
    }

    #[test]
    fn silence_counts_only_while_this_process_has_the_servers() {
        let mut r = Registry::default();
        let b = beat("a", 1, &[], 0);
        assert_eq!(r.watch("laptop", Some(&b)), Duration::ZERO, "not connected");
        r.beat(true, LEASE);
        let silent = r.watch("laptop", Some(&b));
        assert_eq!(
            silent,
            Duration::ZERO,
            "the first lease after connecting counts for nobody's silence"
        );
        r.beat(false, LEASE);
        assert_eq!(
            r.watch("laptop", Some(&b)),
            Duration::ZERO,
            "cut off: nothing counts"
        );
    }
}
