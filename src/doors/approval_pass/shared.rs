//! Approvals and waiting runs across devices (docs/spec.md §23, issue 38 item 4), with `[cluster]` and
//! its `key`. Each device keeps its own ledger and its own suspended runs (per-device `.tabd/`),
//! so what another device must know to run a decided call, or to let a waiting run go on, is
//! handed over through the cluster's `tabd_shared` bucket:
//!
//! - `request.<id>` — the request as the asking device's ledger has it (tool, role, note, run),
//!   written when its run ends; a device that sees the note approved and has no record of it
//!   takes the request from here.
//! - `exec.<id>` — the execution record: `executing` by one device, then its outcome. Created
//!   (first write wins) by the device that holds the approval's claim, before the call is sent,
//!   so the call runs once across devices; the call itself is fenced by that claim's lease.
//! - `run.<run id>` — the suspended run (its conversation, what it spent, the approvals it
//!   waits for), and `resumer.<run id>.<wait>` — the device that lets it go on (first write
//!   wins): the device that runs the call takes the run and resumes it there.
//!
//! **The key story.** Every record is sealed with the cluster's key (`[cluster] key`, the same
//! secret on every device, kept outside the vault like tabd's own key; never sent to the
//! servers) and bound to the name it is kept under. The model has no NATS access, and a role or
//! child cannot read the key; a forger needs the key *and* write access to the servers — the
//! servers' credentials alone (a stolen password, whoever runs the server) let one delete or
//! garble records, which stops work, never make a device run a call tabd did not ask for or go
//! on with a conversation it did not have. A record that fails its check is refused with a
//! sentence (tabd's log and the daily note, once) and nothing of it runs.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::base::clock::Clock;
use crate::base::signing::Key;
use crate::capabilities::cluster::{ClaimKey, Cluster, ClusterError, Lease, Read};
use crate::records::runlog::RunLog;
use crate::records::state::approval_ledger::{Approval, NoteStatus};
use crate::records::state::StateStore;
use crate::running::run::suspend::{self, Suspended};
use crate::running::run::RunEnv;

/// What the cluster's MAC is for (see `base::signing`).
const PURPOSE: &str = "tabd cluster record";
const REQUEST: &str = "request";
const EXEC: &str = "exec";
const RUN: &str = "run";
const RESUMER: &str = "resumer";

/// Why a shared record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The record fails its check (garbled, forged, signed with another key, or naming
    /// something else than its key): never acted on.
    #[error("{0}")]
    Refused(String),
}

/// An approval's execution record, as every device reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Execution {
    pub device: String,
    /// `executing` until the outcome is written.
    pub phase: NoteStatus,
    pub outcome: Option<String>,
    /// Which start of the call (a re-approval after `unknown` is the next).
    pub start: u32,
    pub at: DateTime<Utc>,
}

#[derive(Serialize, Deserialize)]
struct SharedRequest {
    id: String,
    approval: Approval,
}

#[derive(Serialize, Deserialize)]
struct SharedRun {
    suspended: Suspended,
    /// The ids of the approvals it waits for.
    approvals: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Resumer {
    run_id: String,
    device: String,
    at: DateTime<Utc>,
}

/// This device's way to the shared records; cheap to clone.
#[derive(Clone)]
pub struct Shared {
    cluster: Cluster,
    key: Arc<Key>,
    /// What was handed over already (`request.<id>`, `run.<id>.<wait>`), and what was said once.
    seen: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("cluster", &self.cluster).finish()
    }
}

impl Shared {
    /// Over `cluster`, signing with the cluster's key `secret` (`[cluster] key`).
    pub fn new(cluster: Cluster, secret: &str) -> Self {
        Self {
            cluster,
            key: Arc::new(Key::shared(secret.as_bytes())),
            seen: Arc::default(),
        }
    }

    pub fn device(&self) -> &str {
        self.cluster.device()
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Whether `what` was remembered (`first_time`).
    pub fn seen(&self, what: &str) -> bool {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).contains(what)
    }

    /// Whether `what` is new (and now remembered).
    pub fn first_time(&self, what: &str) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(what.to_string())
    }

    fn name(&self, kind: &str, id: &str) -> ClaimKey {
        ClaimKey::shared(self.cluster.vault(), kind, id)
    }

    fn seal<T: Serialize>(&self, name: &ClaimKey, value: &T) -> Vec<u8> {
        // Our own types: they always serialize.
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.key.seal(PURPOSE, &[name.as_str().as_bytes()], &body)
    }

    /// The record under `name`, if its seal holds and it reads as a `T`.
    fn open<T: DeserializeOwned>(&self, name: &ClaimKey, bytes: &[u8]) -> Result<T, SharedError> {
        let body = self
            .key
            .open(PURPOSE, &[name.as_str().as_bytes()], bytes)
            .map_err(|e| {
                SharedError::Refused(format!(
                    "the cluster's record {name} is refused: {e} — is `[cluster] key` the same on every device?"
                ))
            })?;
        serde_json::from_slice(body).map_err(|e| {
            SharedError::Refused(format!(
                "the cluster's record {name} is signed but cannot be read ({e})"
            ))
        })
    }

    /// The record `kind`.`id`. An execution or resumer record decides whether a call or a run's
    /// second part goes on, and tabd never deletes one (a call that did not start is marked
    /// so: `unbegin`): one deleted — a marker under its key, or gone where this device saw it —
    /// is refused, never read as "none was written".
    async fn get<T: DeserializeOwned>(&self, kind: &str, id: &str) -> Result<Option<(T, u64)>, SharedError> {
        let name = self.name(kind, id);
        let decides = kind == EXEC || kind == RESUMER;
        match self.cluster.shared_read(&name).await {
            Ok(Read::Absent) => Ok(None),
            Ok(Read::Deleted) if !decides => Ok(None),
            Ok(Read::Deleted) => Err(SharedError::Refused(format!(
                "the cluster's record {name} was deleted (someone with the servers' password removed it)"
            ))),
            Ok(Read::Refused(why)) => Err(SharedError::Refused(format!(
                "the cluster's record {name}: {why}"
            ))),
            Ok(Read::Found(bytes, revision)) => {
                let record = self.open(&name, &bytes)?;
                if decides {
                    self.cluster.remember_shared(&name);
                }
                Ok(Some((record, revision)))
            }
            Err(ClusterError::Garbled(why)) => {
                Err(SharedError::Refused(format!("the cluster's record {why}")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Hands the request `id` to the other devices.
    pub async fn put_request(&self, id: &str, a: &Approval) -> Result<(), SharedError> {
        let name = self.name(REQUEST, id);
        let record = SharedRequest {
            id: id.to_string(),
            approval: a.clone(),
        };
        self.cluster.shared_put(&name, self.seal(&name, &record)).await?;
        Ok(())
    }

    /// The request `id` another device asked for, if it handed it over.
    pub async fn request(&self, id: &str) -> Result<Option<Approval>, SharedError> {
        let Some((r, _)) = self.get::<SharedRequest>(REQUEST, id).await? else {
            return Ok(None);
        };
        if r.id != id {
            return Err(SharedError::Refused(format!(
                "the cluster's request {id} names another request ({})",
                r.id
            )));
        }
        Ok(Some(r.approval))
    }

    /// Hands the suspended run `s` (waiting for `approvals`) to the other devices.
    pub async fn put_run(&self, s: &Suspended, approvals: Vec<String>) -> Result<(), SharedError> {
        let name = self.name(RUN, &s.run_id);
        let record = SharedRun {
            suspended: s.clone(),
            approvals,
        };
        self.cluster.shared_put(&name, self.seal(&name, &record)).await?;
        Ok(())
    }

    /// The suspended run `run_id` and the approvals it waits for, if it was handed over.
    pub async fn run(&self, run_id: &str) -> Result<Option<(Suspended, Vec<String>)>, SharedError> {
        let Some((r, _)) = self.get::<SharedRun>(RUN, run_id).await? else {
            return Ok(None);
        };
        if r.suspended.run_id != run_id {
            return Err(SharedError::Refused(format!(
                "the cluster's waiting run {run_id} names another run ({})",
                r.suspended.run_id
            )));
        }
        Ok(Some((r.suspended, r.approvals)))
    }

    /// The execution record of `id` and its revision.
    pub async fn execution(&self, id: &str) -> Result<Option<(Execution, u64)>, SharedError> {
        self.get(EXEC, id).await
    }

    fn executing(&self, start: u32) -> Execution {
        Execution {
            device: self.device().to_string(),
            phase: NoteStatus::Executing,
            outcome: None,
            start,
            at: Utc::now(),
        }
    }

    /// Records that this device starts `id`'s call, if no device did: the revision, or `None`.
    pub async fn begin(&self, id: &str) -> Result<Option<u64>, SharedError> {
        let name = self.name(EXEC, id);
        let record = self.seal(&name, &self.executing(1));
        let made = self.cluster.shared_create(&name, record).await?;
        if made.is_some() {
            self.cluster.remember_shared(&name);
        }
        Ok(made)
    }

    /// Records a new start of a call this device ran before (re-approved after `unknown`), if
    /// the record is still at `revision`.
    pub async fn begin_again(&self, id: &str, start: u32, revision: u64) -> Result<Option<u64>, SharedError> {
        let name = self.name(EXEC, id);
        let record = self.seal(&name, &self.executing(start));
        Ok(self.cluster.shared_update(&name, record, revision).await?)
    }

    /// Writes the outcome over this device's `executing` record (at `revision`).
    pub async fn end(&self, id: &str, revision: u64, done: Execution) -> Result<(), SharedError> {
        let name = self.name(EXEC, id);
        match self
            .cluster
            .shared_update(&name, self.seal(&name, &done), revision)
            .await?
        {
            Some(_) => Ok(()),
            None => Err(SharedError::Refused(format!(
                "the cluster's record {name} was written by someone else during the call"
            ))),
        }
    }

    /// Takes back this device's `executing` record of `id` (at `revision`, its start `start`):
    /// the call did not start. Written over as `approved` again, never deleted — a deleted
    /// record is refused (`get`) — so any device may start it later (`begin_again`).
    pub async fn unbegin(&self, id: &str, revision: u64, start: u32) -> Result<(), SharedError> {
        let name = self.name(EXEC, id);
        let withdrawn = Execution {
            phase: NoteStatus::Approved,
            ..self.executing(start)
        };
        match self
            .cluster
            .shared_update(&name, self.seal(&name, &withdrawn), revision)
            .await?
        {
            Some(_) => Ok(()),
            None => Err(SharedError::Refused(format!(
                "the cluster's record {name} was written by someone else meanwhile"
            ))),
        }
    }

    /// Which device lets wait `wait` of run `run_id` go on, if one was named.
    pub async fn resumer_of(&self, run_id: &str, wait: u32) -> Result<Option<String>, SharedError> {
        let id = format!("{run_id}.{wait}");
        match self.get::<Resumer>(RESUMER, &id).await? {
            Some((r, _)) if r.run_id == id => Ok(Some(r.device)),
            Some((r, _)) => Err(SharedError::Refused(format!(
                "the cluster's record of who resumes {id} names another run ({})",
                r.run_id
            ))),
            None => Ok(None),
        }
    }

    /// Which device lets wait `wait` of run `run_id` go on: this one if none said so before.
    pub async fn resumer(&self, run_id: &str, wait: u32) -> Result<String, SharedError> {
        let id = format!("{run_id}.{wait}");
        let name = self.name(RESUMER, &id);
        let mine = Resumer {
            run_id: id.clone(),
            device: self.device().to_string(),
            at: Utc::now(),
        };
        if self
            .cluster
            .shared_create(&name, self.seal(&name, &mine))
            .await?
            .is_some()
        {
            self.cluster.remember_shared(&name);
            return Ok(mine.device);
        }
        self.resumer_of(run_id, wait).await?.ok_or_else(|| {
            SharedError::Cluster(ClusterError::Unavailable {
                why: format!("the record of who resumes {id} is not readable yet"),
            })
        })
    }

    /// Claims the approval `id` for as long as its call takes (the fence of the call).
    pub async fn claim(&self, id: &str) -> Result<Option<Arc<Lease>>, ClusterError> {
        let key = ClaimKey::approval(self.cluster.vault(), id);
        let lease = self.cluster.claim(&key, format!("the approval {id}")).await?;
        if let Some(l) = &lease {
            self.cluster.keep(l);
        }
        Ok(lease)
    }

    /// A record that failed its check: said once in tabd's log and the daily note.
    pub fn refuse(&self, log: &RunLog, clock: &dyn Clock, why: &str) {
        if !self.first_time(&format!("refused {why}")) {
            return;
        }
        let line = format!("{why}; nothing of it runs here");
        tracing::warn!("cluster: {line}");
        if let Err(e) = log.write_line(clock.now(), "tabd", &line) {
            tracing::warn!("cannot write the daily note: {e}");
        }
    }

    /// Says what went wrong with a shared record: a refusal once, the cluster out of reach as a
    /// warning.
    pub fn report(&self, log: &RunLog, clock: &dyn Clock, what: &str, e: SharedError) {
        match e {
            SharedError::Refused(why) => self.refuse(log, clock, &why),
            SharedError::Cluster(e) => tracing::warn!("cluster: {what}: {e}"),
        }
    }
}

/// Takes the outcome another device recorded for `id` into this device's ledger (its note and
/// daily line are that device's to write, and it tells the role): nothing runs here.
pub fn take_outcome(store: &StateStore, id: &str, e: &Execution) {
    if !e.phase.is_decided() {
        return;
    }
    let r = super::write::update(store, |s| {
        if let Some(r) = s.approvals.get_mut(id).filter(|r| r.phase.may_run()) {
            r.phase = e.phase;
            r.decided = Some(e.at);
            r.outcome = e.outcome.clone();
            r.reported = true;
            r.followup = None;
        }
    });
    if let Err(e) = r {
        tracing::warn!("approvals: cannot record {id}'s outcome from the cluster: {e}");
    }
}

/// Takes the request `a` (`id`) another device asked for into this device's ledger, as pending:
/// its decision is acted on here like one of this device's own.
pub fn take_request(
    store: &StateStore,
    id: &str,
    a: &Approval,
) -> Result<Approval, crate::base::vault::VaultError> {
    let mut mine = a.clone();
    mine.phase = NoteStatus::Pending;
    mine.decided = None;
    mine.outcome = None;
    mine.reported = false;
    mine.executions = 0;
    mine.notified = true;
    mine.followup = None;
    super::write::update(store, |s| {
        s.approvals.entry(id.to_string()).or_insert(mine).clone()
    })
}

/// Takes over the suspended run `run_id` from the cluster (signed here with this device's key,
/// with the requests it waits for), unless this device has it: `Some(wait)`, the wait it is at.
pub async fn take_run(env: &RunEnv, shared: &Shared, run_id: &str) -> Option<u32> {
    let here = crate::base::run_id::RunId::parse(run_id).map(|id| suspend::load(&env.vault, &env.key, &id));
    if let Ok(Ok(s)) = here {
        return Some(s.wait);
    }
    let (s, ids) = match shared.run(run_id).await {
        Ok(Some(found)) => found,
        Ok(None) => return None,
        Err(e) => {
            shared.report(
                &env.log,
                env.clock.as_ref(),
                &format!("cannot take run {run_id}"),
                e,
            );
            return None;
        }
    };
    for id in ids {
        let known = crate::base::blocking::run(|| env.store.load())
            .approvals
            .contains_key(&id);
        if known {
            continue;
        }
        match shared.request(&id).await {
            Ok(Some(a)) => {
                if let Err(e) = take_request(&env.store, &id, &a) {
                    tracing::warn!("approvals: cannot record {id} from the cluster: {e}");
                    return None;
                }
            }
            Ok(None) => {}
            Err(e) => {
                shared.report(
                    &env.log,
                    env.clock.as_ref(),
                    &format!("cannot take request {id}"),
                    e,
                );
                return None;
            }
        }
    }
    let vault = env.vault.clone();
    let key = env.key.clone();
    let wait = s.wait;
    match crate::base::blocking::run(move || suspend::save(&vault, &key, &s)) {
        Ok(()) => Some(wait),
        Err(e) => {
            tracing::warn!("cannot keep run {run_id} from the cluster here: {e}");
            None
        }
    }
}
