//! The other devices of a vault (docs/spec.md §23), through NATS JetStream and the official client,
//! `async-nats`. tabd builds no consensus of its own: it creates, renews and reads keys in three
//! KV buckets the servers keep (replicated on three servers when they form a cluster, so a
//! write needs two of them):
//!
//! - `tabd_claims` — who runs what now: a slot, a note, an approval's call. `create` succeeds for
//!   one device only (compare-and-set); the bucket's `max_age` is the lease (`lease`);
//! - `tabd_done` — what was run (a week): a device that comes late, or catches up after a
//!   sleep, finds the slot or note done and leaves it; and each role's catch-up records after
//!   the servers were out of reach (`catch_up`);
//! - `tabd_devices` — each device's last heartbeat; a heartbeat that is written is the quorum
//!   check, and one written by another process under the same name says the name is taken;
//! - `tabd_shared` — what devices hand each other (`shared`): approval requests, their execution
//!   records, waiting runs. The bytes are the caller's (signed with the cluster's key);
//! - `tabd_tenure` — who won each slot's or note's claim last (`tenure`): a device that wins a
//!   claim another let lapse asks that device's heartbeat whether the work may be done already.
//!
//! `keys` names the keys; `lease` is what a device holds, and what the fence asks; `pause` is the
//! pause book every device holds (`tabd pause` with `[cluster]`), in the shared bucket.

pub mod catch_up;
pub mod keys;
pub mod lease;
mod login;
pub mod pause;
pub mod shared;
mod takeover;
pub mod tenure;
pub mod trust;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use keys::ClaimKey;
pub use lease::Lease;
pub use trust::Read;

use takeover::Reclaim;

use crate::setup::config::cluster::ClusterConfig;

/// The claims bucket (its `max_age` is the lease).
pub const CLAIMS: &str = "tabd_claims";
/// What was run, kept a week.
pub const DONE: &str = "tabd_done";
/// Each device's last heartbeat, kept a month.
pub const DEVICES: &str = "tabd_devices";
/// What devices hand each other, kept longer than any suspended run may wait.
pub const SHARED: &str = "tabd_shared";
const SHARED_FOR: Duration = Duration::from_secs(400 * 24 * 3600);
const DONE_FOR: Duration = Duration::from_secs(7 * 24 * 3600);
const DEVICES_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long one request to the servers may take before the cluster counts as out of reach.
const REQUEST: Duration = Duration::from_secs(5);

/// Why the cluster could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// No quorum of the servers answered (down, cut off, too few of three): `when_alone` applies.
    #[error("no quorum of the NATS servers answered: {why}")]
    Unavailable { why: String },
    /// The key is another device's now (renewing a lease).
    #[error("{what} is held by another device now")]
    Lost { what: String },
    /// Something the person must fix (a credentials file that cannot be read, a server URL).
    #[error("{0}")]
    Setup(String),
    /// A large value whose object is not what its pointer says (missing, another size or
    /// hash): never used.
    #[error("{0}")]
    Garbled(String),
}

fn unavailable(e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Unavailable { why: e.to_string() }
}

/// What a claim or heartbeat says about who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub device: String,
    /// This process (a random number at start): two processes under one device name differ.
    pub instance: String,
    pub at: DateTime<Utc>,
    /// In a heartbeat: the last run of each role on this device (`tabd status` shows, per
    /// role, which device ran its last run).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub runs: std::collections::BTreeMap<String, RunSeen>,
    /// In a heartbeat: the claims its process holds or owes (`tenure`).
    #[serde(default, skip_serializing_if = "tenure::Holds::says_nothing")]
    pub holds: tenure::Holds,
}

/// A role's last run on one device, as its heartbeat carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSeen {
    pub at: DateTime<Utc>,
    pub outcome: String,
}

impl Holder {
    /// The part of a heartbeat `tenure` judges by.
    fn beat(self) -> tenure::Beat {
        tenure::Beat {
            instance: self.instance,
            at: self.at,
            holds: self.holds,
        }
    }
}

/// What `claim_unless_done` came to.
#[derive(Debug)]
pub enum Claimed {
    /// This device's now.
    Won(Arc<Lease>),
    /// Another device holds it.
    Held,
    /// It was done (by any device).
    Done,
}

/// A device as its heartbeat shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSeen {
    pub device: String,
    pub last_heartbeat: DateTime<Utc>,
    /// Its last run of each role, by role.
    pub runs: std::collections::BTreeMap<String, RunSeen>,
}

/// The buckets, made (or found) at first use: the servers may be down when tabd starts.
struct Buckets {
    claims: kv::Store,
    done: kv::Store,
    devices: kv::Store,
    shared: kv::Store,
    tenure: kv::Store,
    /// The claims bucket's `max_age`: what another device set when it made it wins.
    lease: Duration,
}

struct Inner {
    js: jetstream::Context,
    client: async_nats::Client,
    buckets: tokio::sync::OnceCell<Buckets>,
    /// The object store of values larger than one message (`shared`), made at first use.
    large: tokio::sync::OnceCell<async_nats::jetstream::object_store::ObjectStore>,
    device: String,
    vault: String,
    lease: Duration,
    instance: String,
    /// The revision of this process's last heartbeat (`None` before the first).
    heartbeat: Mutex<Option<u64>>,
    /// The claims this process holds and owes, and the heartbeats it watched (`tenure`).
    registry: Mutex<tenure::Registry>,
    login: login::Login,
    /// The seal of every record that decides an action, and what this device saw written.
    trust: trust::Trust,
}

/// A connection to the vault's cluster; cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("device", &self.inner.device)
            .field("vault", &self.inner.vault)
            .finish()
    }
}

impl Cluster {
    /// Connects to the servers of `config` for the vault named `vault` (its folder's name: the
    /// same on every device). Returns at once: the connection is made, and made again, in the
    /// background; until it is, every call is `Unavailable`.
    pub async fn connect(config: &ClusterConfig, vault: &str) -> Result<Cluster, ClusterError> {
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("tabd {}", config.device))
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(REQUEST)
            .request_timeout(Some(REQUEST))
            .reconnect_delay_callback(|attempts| Duration::from_millis((250 * attempts as u64).min(2000)));
        let login = login::Login::new();
        let seen = login.clone();
        options = options.event_callback(move |event| {
            seen.saw(&event);
            async {}
        });
        if let Some(creds) = &config.creds {
            options = options.credentials_file(creds).await.map_err(|e| {
                ClusterError::Setup(format!(
                    "[cluster] creds: cannot read {} ({e}); check the path and that it is a NATS credentials file",
                    creds.display()
                ))
            })?;
        }
        let addrs: Vec<async_nats::ServerAddr> = config
            .nats
            .iter()
            .map(|u| {
                u.parse().map_err(|e| {
                    ClusterError::Setup(format!(
                        "[cluster] nats: {} is not a server address ({e})",
                        crate::base::text::display_url(u)
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        // A user and password (or a token) written in a server's URL: async-nats 0.51 reads
        // them only from the options, never from the URL (without this, the servers refused
        // every connection with "authentication error").
        if let Some(a) = addrs.iter().find(|a| a.has_user_pass()) {
            options = match (a.username(), a.password()) {
                (Some(user), Some(pass)) => options.user_and_password(decoded(user), decoded(pass)),
                (Some(token), None) => options.token(decoded(token)),
                _ => options,
            };
        }
        let client = options
            .connect(addrs)
            .await
            .map_err(|e| ClusterError::Setup(format!("[cluster]: {e}")))?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(REQUEST);
        Ok(Cluster {
            inner: Arc::new(Inner {
                js,
                client,
                buckets: tokio::sync::OnceCell::new(),
                large: tokio::sync::OnceCell::new(),
                device: config.device.clone(),
                vault: vault.to_string(),
                lease: config.lease,
                instance: format!("{:016x}", rand::random::<u64>()),
                heartbeat: Mutex::new(None),
                registry: Mutex::default(),
                login,
                trust: trust::Trust::new(config.key.as_deref(), &config.device),
            }),
        })
    }

    pub fn device(&self) -> &str {
        &self.inner.device
    }

    pub fn vault(&self) -> &str {
        &self.inner.vault
    }

    /// The lease as the servers keep it (the claims bucket's `max_age`; the configured one
    /// until the bucket is known).
    pub fn lease(&self) -> Duration {
        self.inner.buckets.get().map_or(self.inner.lease, |b| b.lease)
    }

    /// Remembers, with the marks of this device's own key (outside the vault), every done
    /// marker and shared record it writes or reads (`trust`): one purged later is not taken
    /// for one never written.
    pub fn remember_with(&self, key: Arc<crate::base::signing::Key>) {
        self.inner
            .trust
            .remember_with(key, &[(trust::DONE, DONE_FOR), (trust::SHARED, SHARED_FOR)]);
    }

    /// Remembers the shared record `key` written or seen (`trust`).
    pub fn remember_shared(&self, key: &ClaimKey) {
        self.inner.trust.remember(trust::SHARED, key.as_str());
    }

    /// Whether this device saw the shared record `key` written.
    pub fn remembers_shared(&self, key: &ClaimKey) -> bool {
        self.inner.trust.remembers(trust::SHARED, key.as_str())
    }

    /// Says once in tabd's log that `what` is not acted on, and why (a record deleted or
    /// changed by hand).
    pub fn refuse(&self, what: &str, why: &str) {
        self.inner.trust.refuse(what, why);
    }

    /// This device's claim or done marker for `key` of `bucket`, sealed with the cluster's key.
    fn holder(&self, bucket: &str, key: &ClaimKey) -> bytes::Bytes {
        self.holder_with(bucket, key.as_str(), Default::default(), Default::default())
    }

    fn holder_with(
        &self,
        bucket: &str,
        key: &str,
        runs: std::collections::BTreeMap<String, RunSeen>,
        holds: tenure::Holds,
    ) -> bytes::Bytes {
        let me = Holder {
            device: self.inner.device.clone(),
            instance: self.inner.instance.clone(),
            at: Utc::now(),
            runs,
            holds,
        };
        self.inner
            .trust
            .seal(bucket, key, serde_json::to_vec(&me).unwrap_or_default())
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, tenure::Registry> {
        self.inner.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn buckets(&self) -> Result<&Buckets, ClusterError> {
        self.inner
            .buckets
            .get_or_try_init(|| make_buckets(&self.inner.js, &self.inner.client, self.inner.lease))
            .await
    }

    /// Claims `key` by creating it: `Some` lease when this device won it, `None` when another
    /// device holds it. `what` names it in the log and the daily note.
    pub async fn claim(&self, key: &ClaimKey, what: String) -> Result<Option<Arc<Lease>>, ClusterError> {
        let b = self.buckets().await?;
        let sent = lease::boot_now();
        match b.claims.create(key.as_str(), self.holder(CLAIMS, key)).await {
            Ok(revision) => Ok(Some(Arc::new(Lease::new(
                key.clone(),
                what,
                revision,
                sent,
                b.lease,
            )))),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Claims `key` unless it was done: the claim first, then the done marker, so a device never
    /// runs what another finished (a finisher marks it done before it lets its claim go); then
    /// its tenure: a claim another device let lapse is taken over only once that device's
    /// heartbeat says it let it go, or it has gone silent (`tenure`). Until then it is `Held`.
    /// The whole of it is bounded by one request's time: stalled servers hold up its caller no
    /// longer than they would hold up the claim alone.
    pub async fn claim_unless_done(&self, key: &ClaimKey, what: String) -> Result<Claimed, ClusterError> {
        tokio::time::timeout(REQUEST, self.claim_and_judge(key, what))
            .await
            .unwrap_or_else(|_| {
                Err(unavailable(format!(
                    "the servers did not answer a claim within {} s",
                    REQUEST.as_secs()
                )))
            })
            .map_err(|e| self.explained(e))
    }

    /// `e`, saying why no quorum answers when the servers refuse this device's login (the
    /// request itself only timed out).
    pub fn explained(&self, e: ClusterError) -> ClusterError {
        match (e, self.inner.login.refusal()) {
            (ClusterError::Unavailable { .. }, Some(why)) => ClusterError::Unavailable {
                why: format!("the servers refuse this device's login ({why})"),
            },
            (e, _) => e,
        }
    }

    /// Why the servers refuse this device's login, as it changes (`None` while they let it in).
    pub fn login_refused(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.inner.login.watch()
    }

    async fn claim_and_judge(&self, key: &ClaimKey, what: String) -> Result<Claimed, ClusterError> {
        let Some(lease) = self.claim(key, what).await? else {
            return Ok(Claimed::Held);
        };
        self.judge_won(lease).await
    }

    /// Renews `lease` by writing its key at its revision (fails once another device wrote it).
    pub async fn renew(&self, lease: &Lease) -> Result<(), ClusterError> {
        if lease.lost() {
            return Err(ClusterError::Lost {
                what: crate::base::fence::Hold::what(lease),
            });
        }
        let b = self.buckets().await?;
        let sent = lease::boot_now();
        match b
            .claims
            .update(
                lease.key.as_str(),
                self.holder(CLAIMS, &lease.key),
                lease.revision(),
            )
            .await
        {
            Ok(revision) => {
                lease.renewed(revision, sent);
                Ok(())
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                match self.reclaim(lease, sent).await {
                    Ok(Reclaim::Back) => return Ok(()),
                    // Not renewed this time; the lease stays as it was until the next try.
                    Ok(Reclaim::Later) => {
                        return Err(unavailable(format!(
                            "another device claimed {}, held here; looked at again at the next renewal",
                            crate::base::fence::Hold::what(lease)
                        )))
                    }
                    Ok(Reclaim::Lost) => {}
                    Err(e) => {
                        lease.renewal_failed();
                        return Err(e);
                    }
                }
                lease.mark_lost();
                Err(ClusterError::Lost {
                    what: crate::base::fence::Hold::what(lease),
                })
            }
            Err(e) => {
                lease.renewal_failed();
                Err(unavailable(e))
            }
        }
    }

    /// Renews `lease` every third of its period while anyone holds it.
    pub fn keep(&self, lease: &Arc<Lease>) {
        lease::keep(lease, self.clone());
    }

    /// Marks `key` done (for a week), then lets its claim go. When the servers do not take it,
    /// it is owed: this process's heartbeats name it until it is marked (after one is written).
    pub async fn finish(&self, lease: &Arc<Lease>) -> Result<(), ClusterError> {
        let marked = match self.buckets().await {
            Ok(b) => b
                .done
                .put(lease.key.as_str(), self.holder(DONE, &lease.key))
                .await
                .map(|_| self.inner.trust.remember(trust::DONE, lease.key.as_str()))
                .map_err(unavailable),
            Err(e) => Err(e),
        };
        if let Err(e) = marked {
            self.registry().owe(lease);
            return Err(e);
        }
        self.release(lease).await;
        Ok(())
    }

    /// Marks done what this process owes (after a heartbeat that names it was written); stops at
    /// the first the servers do not take.
    async fn settle_owed(&self) {
        let owed = self.registry().owed.clone();
        for lease in owed {
            match self.finish(&lease).await {
                Ok(()) => tracing::info!(
                    "cluster: {} marked done now that the servers answer",
                    crate::base::fence::Hold::what(lease.as_ref())
                ),
                Err(_) => return,
            }
        }
    }

    /// Lets a slot's or note's claim lapse: no renewal, its tenure deleted, the claim itself left
    /// for the servers to let go after the lease. Never deleted, so that a claim is only ever
    /// created on an empty key: 2.9's servers let two devices both win a create through a delete
    /// marker, or an update at one revision, when they race
    /// (`cluster::of_two_devices_creating_one_empty_key_at_once_exactly_one_wins` says why).
    pub async fn let_lapse(&self, lease: &Lease) {
        self.registry().let_go(lease);
        lease.mark_lost();
        let (Some(revision), Ok(b)) = (lease.tenure(), self.buckets().await) else {
            return;
        };
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a tenure left behind only makes the next claimant ask the heartbeat first"
        )]
        let _ = b
            .tenure
            .delete_expect_revision(lease.key.as_str(), Some(revision))
            .await;
    }

    /// Lets a claim go at once (its revision must still be this device's), with its tenure; a
    /// failure only means it lapses after the lease. For a key no device claims again (done, an
    /// approval's) — see `let_lapse`.
    pub async fn release(&self, lease: &Lease) {
        self.let_lapse(lease).await;
        let Ok(b) = self.buckets().await else {
            return;
        };
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a release that fails only means the claim lapses after its lease"
        )]
        let _ = b
            .claims
            .delete_expect_revision(lease.key.as_str(), Some(lease.revision()))
            .await;
    }

    /// Whether `key` was marked done (a marker deleted or refused counts as done: `done`).
    pub async fn is_done(&self, key: &ClaimKey) -> Result<bool, ClusterError> {
        self.done(key, key.as_str()).await
    }

    /// Who holds `key` now, as `trust` reads its claim.
    pub async fn holder_of(&self, key: &ClaimKey) -> Result<Read<Holder>, ClusterError> {
        let b = self.buckets().await?;
        let entry = b.claims.entry(key.as_str()).await.map_err(unavailable)?;
        Ok(self.inner.trust.read(CLAIMS, key.as_str(), entry, None))
    }

    /// Writes this device's heartbeat: `Ok` is the quorum check (a write succeeded).
    /// `Ok(Some(other))` when another process wrote under this device's name since the last one:
    /// the name is taken twice.
    pub async fn heartbeat(&self) -> Result<Option<Holder>, ClusterError> {
        self.heartbeat_with(Default::default()).await
    }

    /// `heartbeat`, carrying this device's last run of each role and the claims it holds or owes;
    /// once it is written, what is owed is marked done (`tenure`: in that order).
    pub async fn heartbeat_with(
        &self,
        runs: std::collections::BTreeMap<String, RunSeen>,
    ) -> Result<Option<Holder>, ClusterError> {
        let written = self.write_heartbeat(runs).await.map_err(|e| self.explained(e));
        self.registry().beat(written.is_ok(), self.lease());
        if written.is_ok() {
            self.settle_owed().await;
        }
        written
    }

    async fn write_heartbeat(
        &self,
        runs: std::collections::BTreeMap<String, RunSeen>,
    ) -> Result<Option<Holder>, ClusterError> {
        let b = self.buckets().await?;
        let holds = self.registry().look();
        let key = keys::device(&self.inner.vault, &self.inner.device);
        let beat = self.holder_with(DEVICES, &key, runs, holds);
        let last = *self.inner.heartbeat.lock().unwrap_or_else(|p| p.into_inner());
        let written = match last {
            None => b.devices.put(&key, beat.clone()).await.map_err(unavailable),
            Some(rev) => match b.devices.update(&key, beat.clone(), rev).await {
                Ok(r) => Ok(r),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    let other = b.devices.entry(key.as_str()).await.ok().flatten();
                    let other = match self.inner.trust.read::<Holder>(DEVICES, &key, other, None) {
                        Read::Found(h, _) => Some(h),
                        _ => None,
                    };
                    let r = b.devices.put(&key, beat.clone()).await.map_err(unavailable)?;
                    *self.inner.heartbeat.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    return Ok(other.filter(|o| o.instance != self.inner.instance));
                }
                Err(e) => Err(unavailable(e)),
            },
        }?;
        *self.inner.heartbeat.lock().unwrap_or_else(|p| p.into_inner()) = Some(written);
        Ok(None)
    }

    /// Whether a quorum of the servers takes a write now, for `tabd doctor`: a key of its own
    /// (`ClaimKey::probe`) created in the claims bucket, where a write needs a quorum when the
    /// servers keep three replicas, then deleted (else it lapses with the lease). Never this
    /// device's heartbeat: that is the running daemon's, and a second writer under its name
    /// would read as the name taken twice. Then the devices' heartbeats, as `devices` reads them.
    pub async fn quorum_probe(&self) -> Result<Vec<DeviceSeen>, ClusterError> {
        let b = self.buckets().await.map_err(|e| self.explained(e))?;
        let key = ClaimKey::probe(&self.inner.vault, &self.inner.device, rand::random());
        let revision = b
            .claims
            .create(key.as_str(), self.holder(CLAIMS, &key))
            .await
            .map_err(|e| self.explained(unavailable(e)))?;
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a probe key left behind lapses with the lease, and no run ever reads it"
        )]
        let _ = b
            .claims
            .delete_expect_revision(key.as_str(), Some(revision))
            .await;
        self.devices().await
    }

    /// The vault's devices and their last heartbeats, by name.
    pub async fn devices(&self) -> Result<Vec<DeviceSeen>, ClusterError> {
        use futures::StreamExt;
        let b = self.buckets().await?;
        let prefix = keys::devices_of(&self.inner.vault);
        let mut keys = b.devices.keys().await.map_err(unavailable)?;
        let mut out = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(unavailable)?;
            if !key.starts_with(&prefix) {
                continue;
            }
            let entry = b.devices.entry(key.as_str()).await.map_err(unavailable)?;
            let holder = match self.inner.trust.read::<Holder>(DEVICES, &key, entry, None) {
                Read::Found(h, _) => Some(h),
                Read::Refused(why) => {
                    self.refuse(&format!("the heartbeat under {key}"), &why);
                    None
                }
                Read::Absent | Read::Deleted => None,
            };
            if let Some(seen) = holder.and_then(|h| seen_from(&self.inner.vault, &key, h)) {
                let beat = seen.1.clone().beat();
                self.registry().watch(&seen.0.device, Some(&beat));
                out.push(seen.0);
            }
        }
        out.sort_by(|a, b| a.device.cmp(&b.device));
        Ok(out)
    }
}

/// A heartbeat as a device may show it, or `None`: what the servers hand back is untrusted text
/// (anyone with their password may write it). The device's name must be a plain name and the key
/// it sits under must be that device's own; each run must name a plain role name with a one-word
/// outcome. So no forged name can carry terminal escapes, a line break or a `## ` heading into
/// `tabd status` or `agent/status.md`.
fn seen_from(vault: &str, key: &str, h: Holder) -> Option<(DeviceSeen, Holder)> {
    if !crate::setup::config::cluster::plain_name(&h.device) || key != keys::device(vault, &h.device) {
        return None;
    }
    let runs = h
        .runs
        .iter()
        .filter(|(role, run)| {
            crate::setup::config::cluster::plain_name(role)
                && !run.outcome.is_empty()
                && run.outcome.len() <= 16
                && run.outcome.bytes().all(|b| b.is_ascii_lowercase())
        })
        .map(|(r, s)| (r.clone(), s.clone()))
        .collect();
    let seen = DeviceSeen {
        device: h.device.clone(),
        last_heartbeat: h.at,
        runs,
    };
    Some((seen, h))
}

/// A URL's user or password as written before percent-encoding.
fn decoded(part: &str) -> String {
    percent_encoding::percent_decode_str(part)
        .decode_utf8_lossy()
        .into_owned()
}

/// Waits for nothing: asks JetStream for its account info (by hand — async-nats 0.51 reads
/// fields a 2.9 server does not send), which answers once connected and a leader is known.
pub async fn jetstream_ready(client: &async_nats::Client) -> Result<(), ClusterError> {
    let reply = client
        .request("$JS.API.INFO", bytes::Bytes::new())
        .await
        .map_err(unavailable)?;
    let info: serde_json::Value = serde_json::from_slice(&reply.payload).map_err(unavailable)?;
    match info.get("error") {
        None => Ok(()),
        Some(e) => Err(unavailable(
            e.get("description")
                .and_then(|d| d.as_str())
                .unwrap_or("JetStream is not ready"),
        )),
    }
}

/// Finds or makes the three buckets: three replicas when the servers form a cluster, else one.
async fn make_buckets(
    js: &jetstream::Context,
    client: &async_nats::Client,
    lease: Duration,
) -> Result<Buckets, ClusterError> {
    jetstream_ready(client).await?;
    let replicas = replicas(client);
    // A bucket just made on three servers answers once its replicas elect a leader (a second
    // or two): its opening is tried again a few times, backon's waits (0.2, 0.4, 0.8, 1.6 s).
    let open = |name: &'static str, max_age: Duration| {
        let retry = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_times(4);
        backon::Retryable::retry(move || bucket(js, name, max_age, replicas), retry)
    };
    let claims = open(CLAIMS, lease).await?;
    let done = open(DONE, DONE_FOR).await?;
    let devices = open(DEVICES, DEVICES_FOR).await?;
    let shared = open(SHARED, SHARED_FOR).await?;
    let tenure = open(tenure::TENURE, DONE_FOR).await?;
    // A stream just made is known to every server a moment later ("no stream found for given
    // subject" until then): one write to each, tried again like the opening, before any claim.
    for store in [&claims, &done, &devices, &shared, &tenure] {
        let retry = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_times(5);
        backon::Retryable::retry(|| store.put("tabd-ready", bytes::Bytes::from_static(b"1")), retry)
            .await
            .map_err(unavailable)?;
    }
    let mut kept = claims.status().await.map_err(unavailable)?.max_age();
    if kept.is_zero() {
        kept = lease;
    }
    if kept != lease {
        tracing::warn!(
            "[cluster] lease_s is {} here, but the servers' claims bucket keeps claims {} s (another device made it): using {} s",
            lease.as_secs(),
            kept.as_secs(),
            kept.as_secs()
        );
    }
    Ok(Buckets {
        claims,
        done,
        devices,
        shared,
        tenure,
        lease: kept,
    })
}

/// How many servers keep each bucket: three when they form a cluster (known once connected),
/// else one.
fn replicas(client: &async_nats::Client) -> usize {
    if client.server_info().cluster.is_some() {
        3
    } else {
        1
    }
}

/// Finds the bucket `name`, or makes it as `create_key_value` would (that call first asks for
/// the account's info, which async-nats 0.51 cannot read from a 2.9 server; the stream is the
/// same).
async fn bucket(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    if let Ok(store) = js.get_key_value(name).await {
        return Ok(store);
    }
    let stream = jetstream::stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        storage: jetstream::stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        // What decides who runs what is read from the stream's leader, never a replica that may
        // lag behind a write a moment ago (a claim just won, a record just handed over, an
        // outcome or a done mark just written, a heartbeat naming what its device holds).
        allow_direct: false,
        num_replicas: replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        ..Default::default()
    };
    let made = js.create_stream(stream).await;
    // Made here or by another device at the same moment: either way, open it.
    js.get_key_value(name).await.map_err(|e| match made {
        Err(made) => unavailable(made),
        Ok(_) => unavailable(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(device: &str, runs: &[(&str, &str)]) -> Holder {
        Holder {
            device: device.to_string(),
            instance: "1".into(),
            at: Utc::now(),
            runs: runs
                .iter()
                .map(|(r, o)| {
                    (
                        r.to_string(),
                        RunSeen {
                            at: Utc::now(),
                            outcome: o.to_string(),
                        },
                    )
                })
                .collect(),
            holds: Default::default(),
        }
    }

    /// Issue 49, item 4: a heartbeat is untrusted text. One whose device name carries escapes, a
    /// line break or a heading, or that sits under another device's key, is not shown; a run with
    /// an odd role name or outcome is left out of it.
    #[test]
    fn a_forged_heartbeat_shows_nothing_it_made_up() {
        let key = keys::device("v", "laptop");
        assert!(seen_from("v", &key, holder("laptop", &[("risk", "ok")])).is_some());
        for forged in ["evil\n## Forged", "evil\u{1b}[2J", "", "ev il"] {
            assert!(
                seen_from("v", &keys::device("v", forged), holder(forged, &[])).is_none(),
                "{forged:?}"
            );
        }
        assert!(
            seen_from("v", &key, holder("desktop", &[])).is_none(),
            "another device's key"
        );
        let (seen, _) = seen_from(
            "v",
            &key,
            holder(
                "laptop",
                &[("risk", "ok"), ("x\n## y", "ok"), ("comms", "ok\u{1b}]0;t\u{7}")],
            ),
        )
        .unwrap();
        assert_eq!(seen.runs.keys().collect::<Vec<_>>(), ["risk"]);
    }
}
