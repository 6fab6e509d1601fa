//! A lease: what a device won by creating a key, kept while it renews it by revision.
//!
//! Debian's nats-server 2.9 has no per-key TTL (2.11 has): the claims bucket's `max_age` is the
//! lease, and each renewal rewrites the key, which starts its age again. The revision of the
//! last write is the fencing token: a renewal names it, so it fails the moment another device
//! has claimed the key (or the server has let it expire).
//!
//! Whether a lease is still this device's is known locally (`still_mine`): renewed within the
//! lease less a margin by the boot-time clock — which, unlike the monotonic one, goes on while
//! the machine sleeps — and the last renewal succeeded. A device that was stopped or slept
//! past its lease sees it lost the moment it runs again, before it asks the server anything.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::keys::ClaimKey;

/// Time since boot, sleep included (CLOCK_BOOTTIME).
pub fn boot_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// How long before the server would let a lease go this device stops trusting it: a fifth of
/// it (the renewal, every third, has two chances before then).
pub fn margin(period: Duration) -> Duration {
    period / 5
}

/// What this device holds of one key (see the module's text).
pub struct Lease {
    pub(super) key: ClaimKey,
    what: String,
    /// The revision of this device's last write of the key: the fencing token.
    revision: AtomicU64,
    /// Boot time when the last successful write was *sent* (the server counts from later).
    renewed: Mutex<Duration>,
    /// The last renewal failed (for any reason), or the key is another's now.
    failed: AtomicBool,
    /// Another device holds the key, or the server let it go: for good.
    lost: AtomicBool,
    /// The bucket's `max_age`.
    period: Duration,
    /// The revision of the tenure record this device wrote for it (0: none), deleted with it.
    tenure: AtomicU64,
    /// The revision of another device's waiting claim of its key, seen at the last renewal.
    waiting: AtomicU64,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key.as_str())
            .field("revision", &self.revision())
            .field("still_mine", &self.still_mine())
            .finish()
    }
}

impl Lease {
    pub(super) fn new(key: ClaimKey, what: String, revision: u64, sent: Duration, period: Duration) -> Self {
        Self {
            key,
            what,
            revision: AtomicU64::new(revision),
            renewed: Mutex::new(sent),
            failed: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            period,
            tenure: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
        }
    }

    pub fn key(&self) -> &ClaimKey {
        &self.key
    }

    /// The fencing token: the revision of this device's last write of the key.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::SeqCst)
    }

    /// How long the server keeps the key without a renewal.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Whether the key is still this device's (see the module's text).
    pub fn still_mine(&self) -> bool {
        self.still_mine_at(boot_now())
    }

    fn still_mine_at(&self, now: Duration) -> bool {
        if self.lost.load(Ordering::SeqCst) || self.failed.load(Ordering::SeqCst) {
            return false;
        }
        let renewed = *self.renewed.lock().unwrap_or_else(|p| p.into_inner());
        now.saturating_sub(renewed) < self.period - margin(self.period)
    }

    /// Whether another device holds it now, or the server let it go (known after a renewal).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(super) fn renewed(&self, revision: u64, sent: Duration) {
        self.revision.store(revision, Ordering::SeqCst);
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = sent;
        self.failed.store(false, Ordering::SeqCst);
    }

    pub(super) fn set_tenure(&self, revision: u64) {
        self.tenure.store(revision, Ordering::SeqCst);
    }

    /// The revision of its tenure record, if this device wrote one.
    pub(super) fn tenure(&self) -> Option<u64> {
        Some(self.tenure.load(Ordering::SeqCst)).filter(|r| *r > 0)
    }

    /// Whether another device's claim at `revision` was seen at the last renewal too (and
    /// remembers it for the next).
    pub(super) fn seen_waiting(&self, revision: u64) -> bool {
        self.waiting.swap(revision, Ordering::SeqCst) == revision
    }

    pub(super) fn renewal_failed(&self) {
        self.failed.store(true, Ordering::SeqCst);
    }

    pub(super) fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.failed.store(true, Ordering::SeqCst);
    }
}

impl crate::base::fence::Hold for Lease {
    fn still_mine(&self) -> bool {
        Lease::still_mine(self)
    }

    fn what(&self) -> String {
        self.what.clone()
    }
}

/// Renews a lease every third of its period while anyone holds it (the task keeps only a weak
/// reference: the last holder dropping it ends the renewals), and stops once it is lost.
pub(super) fn keep(lease: &Arc<Lease>, cluster: super::Cluster) {
    let weak: Weak<Lease> = Arc::downgrade(lease);
    let every = lease.period / 3;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(lease) = weak.upgrade() else {
                return;
            };
            match cluster.renew(&lease).await {
                Ok(()) => {}
                Err(super::ClusterError::Lost { .. }) => {
                    tracing::warn!("lost {}: another device holds it now", lease.what);
                    return;
                }
                Err(e) => tracing::warn!("cannot renew {}: {e}", lease.what),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_mine_only_within_its_period_less_the_margin_and_after_a_good_renewal() {
        let period = Duration::from_secs(30);
        let start = Duration::from_secs(1000);
        let key = ClaimKey::slot("v", "r", chrono::DateTime::from_timestamp(0, 0).unwrap());
        let lease = Lease::new(key, "the slot".into(), 7, start, period);
        assert!(lease.still_mine_at(start + Duration::from_secs(23)));
        assert!(
            !lease.still_mine_at(start + Duration::from_secs(24)),
            "the margin is a fifth"
        );
        lease.renewed(9, start + Duration::from_secs(20));
        assert_eq!(lease.revision(), 9);
        assert!(lease.still_mine_at(start + Duration::from_secs(40)));
        lease.renewal_failed();
        assert!(
            !lease.still_mine_at(start + Duration::from_secs(21)),
            "a failed renewal"
        );
        lease.renewed(10, start + Duration::from_secs(22));
        assert!(lease.still_mine_at(start + Duration::from_secs(23)));
        lease.mark_lost();
        assert!(!lease.still_mine_at(start + Duration::from_secs(23)) && lease.lost());
        assert!(boot_now() > Duration::ZERO);
    }
}
