//! Whether a claim just won is this device's to run, and whether a claim it holds is still its
//! own when a renewal finds the key changed (docs/spec.md §23): the done marker, the tenure of the
//! last holder and its heartbeat decide (`tenure`), and a record deleted or written by hand is
//! never read as work not done or a claim let go (`trust`, issue 49 item 4).

use std::sync::Arc;

use async_nats::jetstream::kv;
use chrono::Utc;

use super::{
    keys, tenure, unavailable, ClaimKey, Claimed, Cluster, ClusterError, Holder, Lease, Read, CLAIMS,
    DEVICES, DONE,
};

/// What the done marker and the tenure of a claim just won say.
pub(super) enum Take {
    Mine,
    Done,
    /// The previous holder may still report that it ran it: `Held` for now.
    Wait,
}

/// What a renewal that found its key at another revision came to (`Cluster::reclaim`).
pub(super) enum Reclaim {
    /// Written again: still this device's.
    Back,
    /// Another device's claim that may be waiting: looked at again at the next renewal.
    Later,
    /// Another device's now, or let go by the servers.
    Lost,
}

impl Cluster {
    /// A claim just won (or taken back, `catch_up`): this device's, done, or held for now.
    pub(super) async fn judge_won(&self, lease: Arc<Lease>) -> Result<Claimed, ClusterError> {
        let taken = self.take(&lease).await;
        match taken {
            Ok(Take::Mine) => return Ok(Claimed::Won(lease)),
            Ok(Take::Done) | Ok(Take::Wait) | Err(_) => self.let_lapse(&lease).await,
        }
        match taken? {
            Take::Done => Ok(Claimed::Done),
            _ => Ok(Claimed::Held),
        }
    }

    /// The done marker, then the tenure of a claim just won (see `claim_unless_done`).
    pub(super) async fn take(&self, lease: &Arc<Lease>) -> Result<Take, ClusterError> {
        let b = self.buckets().await?;
        if self
            .done(&lease.key, &crate::base::fence::Hold::what(lease.as_ref()))
            .await?
        {
            return Ok(Take::Done);
        }
        let key = lease.key.as_str();
        let seq = self.registry().hold(lease);
        let mine = tenure::Tenure {
            device: self.inner.device.clone(),
            instance: self.inner.instance.clone(),
            seq,
            at: Utc::now(),
        };
        let value = self
            .inner
            .trust
            .seal(tenure::TENURE, key, serde_json::to_vec(&mine).unwrap_or_default());
        let before = match b.tenure.create(key, value.clone()).await {
            Ok(revision) => {
                lease.set_tenure(revision);
                // No tenure to judge by (none, or deleted): a claim missing is not proof that
                // nobody holds it — a device whose heartbeat names it, and goes on writing, does.
                return self.unless_held_alive(lease).await;
            }
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                b.tenure.entry(key).await.map_err(unavailable)?
            }
            Err(e) => return Err(unavailable(e)),
        };
        let prior = match self
            .inner
            .trust
            .read::<tenure::Tenure>(tenure::TENURE, key, before, None)
        {
            Read::Found(t, revision) => (self.judge(&t, lease).await?, revision),
            // Deleted between the two calls: its holder just let it go; ask again at the next look.
            Read::Absent | Read::Deleted => return Ok(Take::Wait),
            Read::Refused(why) => {
                self.refuse(
                    &crate::base::fence::Hold::what(lease.as_ref()),
                    &format!("the record of who held it last is refused: {why}"),
                );
                return Ok(Take::Wait);
            }
        };
        match prior.0 {
            tenure::Prior::Holds | tenure::Prior::Unknown => return Ok(Take::Wait),
            tenure::Prior::LetGo
                if self
                    .done(&lease.key, &crate::base::fence::Hold::what(lease.as_ref()))
                    .await? =>
            {
                return Ok(Take::Done)
            }
            tenure::Prior::LetGo => {}
            tenure::Prior::Gone => tracing::info!(
                "cluster: the device that held {} has not answered for {} s; taking it over",
                crate::base::fence::Hold::what(lease.as_ref()),
                tenure::gone_after(self.lease()).as_secs()
            ),
        }
        match b.tenure.update(key, value, prior.1).await {
            Ok(revision) => {
                lease.set_tenure(revision);
                Ok(Take::Mine)
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(Take::Wait),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// `Mine`, unless another device's heartbeat names `lease`'s key as held and that device
    /// still writes heartbeats (or its heartbeat cannot be read: deleted, refused) — then it is
    /// left to that device, which takes its claim back (`renew`).
    async fn unless_held_alive(&self, lease: &Arc<Lease>) -> Result<Take, ClusterError> {
        let Some(device) = self.live_holder(&lease.key).await? else {
            return Ok(Take::Mine);
        };
        self.refuse(
            &crate::base::fence::Hold::what(lease.as_ref()),
            &format!(
                "its claim was free, but device {device} says it holds it and still answers; left to {device}"
            ),
        );
        Ok(Take::Wait)
    }

    /// Another device that holds `key` as its heartbeat says, and has not gone silent.
    async fn live_holder(&self, key: &ClaimKey) -> Result<Option<String>, ClusterError> {
        let b = self.buckets().await?;
        let mut names = self.registry().watched_devices();
        if names.is_empty() {
            self.devices().await?;
            names = self.registry().watched_devices();
        }
        for device in names {
            if device == self.inner.device {
                continue;
            }
            let at = keys::device(&self.inner.vault, &device);
            let entry = b.devices.entry(at.as_str()).await.map_err(unavailable)?;
            let (beat, holds) = match self.inner.trust.read::<Holder>(DEVICES, &at, entry, None) {
                Read::Found(h, _) if h.device == device => {
                    let beat = h.beat();
                    let holds = beat.holds.all || beat.holds.keys.iter().any(|k| k == key.as_str());
                    (Some(beat), holds)
                }
                // A heartbeat this process saw, now gone or not tabd's: what it holds is unknown.
                _ => (None, true),
            };
            let silent = self.registry().watch(&device, beat.as_ref());
            if holds && silent < tenure::gone_after(self.lease()) {
                return Ok(Some(device));
            }
        }
        Ok(None)
    }

    /// Whether `key` was marked done, as far as anything can be acted on: a marker deleted,
    /// purged (where this device saw it written) or refused counts as done — nothing runs on
    /// the strength of its absence — and is said once (`what` names it).
    pub(super) async fn done(&self, key: &ClaimKey, what: &str) -> Result<bool, ClusterError> {
        match self.done_marker(key).await? {
            Read::Absent => Ok(false),
            Read::Found(..) => Ok(true),
            Read::Deleted => {
                self.refuse(
                    what,
                    "its done marker was deleted (a marker is there, or this device saw it written)",
                );
                Ok(true)
            }
            Read::Refused(why) => {
                self.refuse(what, &format!("its done marker is refused: {why}"));
                Ok(true)
            }
        }
    }

    /// The done marker of `key`, as `trust` reads it.
    pub async fn done_marker(&self, key: &ClaimKey) -> Result<Read<Holder>, ClusterError> {
        let b = self.buckets().await?;
        let entry = b.done.entry(key.as_str()).await.map_err(unavailable)?;
        Ok(self
            .inner
            .trust
            .read(DONE, key.as_str(), entry, Some(super::trust::DONE)))
    }

    /// What the previous holder `t` of `lease`'s key says, by its device's heartbeat.
    async fn judge(&self, t: &tenure::Tenure, lease: &Lease) -> Result<tenure::Prior, ClusterError> {
        let key = lease.key.as_str();
        if t.instance == self.inner.instance {
            let holds = self.registry().holds(key, Some(lease));
            return Ok(if holds {
                tenure::Prior::Holds
            } else {
                tenure::Prior::LetGo
            });
        }
        let b = self.buckets().await?;
        let entry = b
            .devices
            .entry(keys::device(&self.inner.vault, &t.device))
            .await
            .map_err(unavailable)?;
        let at = keys::device(&self.inner.vault, &t.device);
        let beat = match self.inner.trust.read::<Holder>(DEVICES, &at, entry, None) {
            Read::Found(h, _) if h.device == t.device => Some(h.beat()),
            _ => None,
        };
        let silent = self.registry().watch(&t.device, beat.as_ref());
        Ok(tenure::judge(t, beat.as_ref(), key, silent, self.lease()))
    }

    /// A renewal found `lease`'s key at another revision. It is another device's when that
    /// device claimed it and wrote its tenure (a takeover), or the servers let it go (absent).
    /// But when someone deleted it (a marker: tabd never deletes a claim it holds), or another
    /// device claimed it and waits (no tenure of its own: this device's heartbeat names it as
    /// held, `unless_held_alive`), it is still this device's: written again at that revision.
    /// A waiting claim is taken back only once seen at two renewals (its maker writes its
    /// tenure a moment after its claim).
    pub(super) async fn reclaim(
        &self,
        lease: &Lease,
        sent: std::time::Duration,
    ) -> Result<Reclaim, ClusterError> {
        // Only a slot's or a note's claim (one with a tenure) is ever taken back: an approval's
        // is released by whichever device ran its call, a delete that is no one's hand.
        if lease.lost() || lease.tenure().is_none() {
            return Ok(Reclaim::Lost);
        }
        let b = self.buckets().await?;
        let key = lease.key.as_str();
        let what = crate::base::fence::Hold::what(lease);
        let Some(entry) = b.claims.entry(key).await.map_err(unavailable)? else {
            return Ok(Reclaim::Lost);
        };
        let at = match self.inner.trust.read::<Holder>(CLAIMS, key, Some(entry), None) {
            // Released by a device that took it over and finished it (its done marker is there,
            // or can no longer be read as absent): lost, as it was.
            Read::Deleted | Read::Refused(_)
                if !matches!(self.done_marker(&lease.key).await?, Read::Absent) =>
            {
                return Ok(Reclaim::Lost)
            }
            Read::Deleted | Read::Refused(_) => {
                self.refuse(
                    &what,
                    "its claim, held here, was deleted or written over by hand; this device holds it still",
                );
                None
            }
            Read::Found(other, revision) if other.instance != self.inner.instance => {
                let tenure = b.tenure.entry(key).await.map_err(unavailable)?;
                let theirs = match self
                    .inner
                    .trust
                    .read::<tenure::Tenure>(tenure::TENURE, key, tenure, None)
                {
                    Read::Found(t, _) => t.instance == other.instance,
                    Read::Refused(_) => true,
                    Read::Absent | Read::Deleted => false,
                };
                if theirs {
                    return Ok(Reclaim::Lost);
                }
                if !lease.seen_waiting(revision) {
                    return Ok(Reclaim::Later);
                }
                tracing::info!(
                    "cluster: device {} claimed {what}, which this device holds, and waits: taken back",
                    other.device
                );
                Some(revision)
            }
            // This device's own write, whose answer was lost.
            Read::Found(other, revision) if other.instance == self.inner.instance => Some(revision),
            Read::Found(..) | Read::Absent => return Ok(Reclaim::Lost),
        };
        let revision = match at {
            Some(r) => r,
            None => match b.claims.entry(key).await.map_err(unavailable)? {
                Some(e) => e.revision,
                None => return Ok(Reclaim::Lost),
            },
        };
        match b
            .claims
            .update(key, self.holder(CLAIMS, &lease.key), revision)
            .await
        {
            Ok(r) => {
                lease.renewed(r, sent);
                Ok(Reclaim::Back)
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(Reclaim::Lost),
            Err(e) => Err(unavailable(e)),
        }
    }
}
