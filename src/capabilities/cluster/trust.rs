//! What the servers hand back that decides an action, checked (docs/spec.md §23, issue 49 item 4).
//!
//! Anyone with the servers' password can write, delete or purge any key. Three defences, each
//! for what the one before cannot see:
//!
//! - **Signed and bound** (with `[cluster] key`): every record that decides an action — a claim,
//!   a done marker, a tenure, a heartbeat, a catch-up record — is sealed with the cluster's key
//!   and bound to its bucket and key, so a record written by hand, or moved from another key,
//!   is refused (`Read::Refused`), never read as what it says.
//! - **A delete is not an absence**: the buckets keep one message per key, and a delete or a
//!   purge through the KV API leaves a marker there. A done marker, an execution record or a
//!   resumer record is never deleted by tabd, so a marker under one says someone with the
//!   password removed it: `Read::Deleted`, and nothing is run on the strength of its absence.
//! - **What this device saw, it remembers**: a done marker it wrote or read is marked in its own
//!   state folder (tabd's key's marks, outside the vault, a week), so a record purged without a
//!   marker (the stream API) is still known here to have been written. A device added later has
//!   no such memory: docs/devices.md says what remains possible then.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_nats::jetstream::kv;
use serde::de::DeserializeOwned;

use crate::base::signing::Key;

/// What the cluster's MAC of a coordination record is for (see `base::signing`).
const PURPOSE: &str = "tabd cluster coordination record";

/// What one read of a key came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read<T> {
    /// Never written, or expired.
    Absent,
    /// Written, then deleted or purged (a marker is there), or gone where this device saw it.
    Deleted,
    /// There, but not what tabd wrote under this key (its signature, or its form): the reason.
    Refused(String),
    /// What tabd wrote, and its revision.
    Found(T, u64),
}

/// Decides a read from what the key holds (its operation and its value opened) and whether this
/// device remembers the key written (`Read`'s cases).
pub fn judge<T>(held: Option<(kv::Operation, Result<T, String>, u64)>, remembered: bool) -> Read<T> {
    match held {
        None if remembered => Read::Deleted,
        None => Read::Absent,
        Some((kv::Operation::Delete | kv::Operation::Purge, _, _)) => Read::Deleted,
        Some((kv::Operation::Put, Err(why), _)) => Read::Refused(why),
        Some((kv::Operation::Put, Ok(v), revision)) => Read::Found(v, revision),
    }
}

/// Kinds of what a device remembers.
pub const DONE: &str = "done";
pub const SHARED: &str = "shared";

/// The seal, the memory and the sentences said once (one per `Cluster`).
pub(super) struct Trust {
    /// `[cluster] key`.
    seal: Option<Key>,
    /// This device's own key, whose marks are its memory (set by the daemon; none in a command
    /// that only looks).
    memory: OnceLock<Arc<Key>>,
    device: String,
    said: Mutex<HashSet<String>>,
}

impl Trust {
    pub(super) fn new(secret: Option<&str>, device: &str) -> Self {
        Self {
            seal: secret.map(|s| Key::shared(s.as_bytes())),
            memory: OnceLock::new(),
            device: device.to_string(),
            said: Mutex::default(),
        }
    }

    /// Remembers with `key`'s marks from now on; forgets what is older than each kind is kept.
    pub(super) fn remember_with(&self, key: Arc<Key>, kept: &[(&str, Duration)]) {
        for (kind, age) in kept {
            key.forget_marks_older_than(&self.kind(kind), *age);
        }
        #[expect(
            clippy::let_underscore_must_use,
            reason = "set once at start: a second call keeps the first memory"
        )]
        let _ = self.memory.set(key);
    }

    /// The marks' kind: per device, so two devices sharing one home keep apart.
    fn kind(&self, kind: &str) -> String {
        format!("cluster-{}-{kind}", self.device)
    }

    pub(super) fn remember(&self, kind: &str, key: &str) {
        let Some(memory) = self.memory.get() else {
            return;
        };
        if let Err(e) = memory.mark(&self.kind(kind), key, false) {
            tracing::warn!("cluster: cannot remember {key} ({e}); a purge of it would go unseen here");
        }
    }

    pub(super) fn remembers(&self, kind: &str, key: &str) -> bool {
        self.memory
            .get()
            .is_some_and(|m| m.is_marked(&self.kind(kind), key))
    }

    /// `body` as it goes under `key` of `bucket`: sealed and bound to both with the cluster's key.
    pub(super) fn seal(&self, bucket: &str, key: &str, body: Vec<u8>) -> bytes::Bytes {
        match &self.seal {
            Some(k) => k
                .seal(PURPOSE, &[bucket.as_bytes(), key.as_bytes()], &body)
                .into(),
            None => body.into(),
        }
    }

    /// The record under `key` of `bucket`, if its seal holds (with the key) and it reads as a `T`.
    pub(super) fn open<T: DeserializeOwned>(
        &self,
        bucket: &str,
        key: &str,
        bytes: &[u8],
    ) -> Result<T, String> {
        let body = match &self.seal {
            Some(k) => k
                .open(PURPOSE, &[bucket.as_bytes(), key.as_bytes()], bytes)
                .map_err(|e| format!("{e} — is `[cluster] key` the same on every device?"))?,
            None => bytes,
        };
        serde_json::from_slice(body).map_err(|e| format!("it is not a record tabd wrote ({e})"))
    }

    /// `entry` (of `key` in `bucket`) judged, remembering `kind` (when given) both ways.
    pub(super) fn read<T: DeserializeOwned>(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<kv::Entry>,
        kind: Option<&str>,
    ) -> Read<T> {
        let parts = entry.map(|e| (e.operation, e.value, e.revision));
        self.read_parts(bucket, key, parts, kind)
    }

    /// `read`, of an entry's operation, value and revision.
    fn read_parts<T: DeserializeOwned>(
        &self,
        bucket: &str,
        key: &str,
        parts: Option<(kv::Operation, bytes::Bytes, u64)>,
        kind: Option<&str>,
    ) -> Read<T> {
        let remembered = kind.is_some_and(|k| self.remembers(k, key));
        let held = parts.map(|(operation, value, revision)| {
            let opened = match operation {
                kv::Operation::Put => self.open(bucket, key, &value),
                _ => Err(String::new()),
            };
            (operation, opened, revision)
        });
        let read = judge(held, remembered);
        if let (Some(k), Read::Found(..)) = (kind, &read) {
            if !remembered {
                self.remember(k, key);
            }
        }
        read
    }

    /// Whether `what` is said for the first time (and now remembered as said).
    pub(super) fn first_time(&self, what: &str) -> bool {
        self.said
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(what.to_string())
    }

    /// Says once, in tabd's log, that `what` is not acted on because of `why`.
    pub(super) fn refuse(&self, what: &str, why: &str) {
        if self.first_time(&format!("{what}: {why}")) {
            tracing::warn!(
                "cluster: {what} is not acted on: {why}; someone with the servers' password may have changed the cluster's records"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_marker_or_a_record_remembered_and_gone_is_never_read_as_absent() {
        let ok = |v: u8| Some((kv::Operation::Put, Ok(v), 7));
        assert_eq!(judge::<u8>(None, false), Read::Absent);
        assert_eq!(judge::<u8>(None, true), Read::Deleted, "purged: remembered");
        assert_eq!(
            judge::<u8>(Some((kv::Operation::Delete, Err(String::new()), 8)), false),
            Read::Deleted
        );
        assert_eq!(
            judge::<u8>(Some((kv::Operation::Purge, Err(String::new()), 8)), false),
            Read::Deleted
        );
        assert_eq!(judge(ok(1), true), Read::Found(1, 7));
        assert_eq!(
            judge::<u8>(Some((kv::Operation::Put, Err("forged".into()), 9)), false),
            Read::Refused("forged".into())
        );
    }

    #[test]
    fn a_record_is_bound_to_its_bucket_and_key_and_refused_unsigned_or_moved() {
        let t = Trust::new(Some("a-cluster-key-of-at-least-32-characters"), "laptop");
        let sealed = t.seal("tabd_done", "v.slot.r.1", br#"{"a":1}"#.to_vec());
        let opened: Result<serde_json::Value, String> = t.open("tabd_done", "v.slot.r.1", &sealed);
        assert_eq!(opened.unwrap()["a"], 1);
        assert!(t
            .open::<serde_json::Value>("tabd_done", "v.slot.r.2", &sealed)
            .is_err());
        assert!(t
            .open::<serde_json::Value>("tabd_claims", "v.slot.r.1", &sealed)
            .is_err());
        assert!(t
            .open::<serde_json::Value>("tabd_done", "v.slot.r.1", br#"{"a":1}"#)
            .is_err());
        let plain = Trust::new(None, "laptop");
        assert!(plain
            .open::<serde_json::Value>("tabd_done", "v.slot.r.1", br#"{"a":1}"#)
            .is_ok());
    }

    #[test]
    fn a_device_remembers_what_it_saw_done_apart_from_another_device_in_the_same_home() {
        let home = tempfile::tempdir().unwrap();
        let key = Arc::new(Key::load_or_create(home.path()).unwrap());
        let laptop = Trust::new(None, "laptop");
        let desktop = Trust::new(None, "desktop");
        laptop.remember_with(key.clone(), &[(DONE, Duration::from_secs(60))]);
        desktop.remember_with(key, &[(DONE, Duration::from_secs(60))]);
        let put = Some((kv::Operation::Put, bytes::Bytes::from_static(b"{}"), 3));
        let seen: Read<serde_json::Value> = laptop.read_parts("tabd_done", "v.slot.r.1", put, Some(DONE));
        assert!(matches!(seen, Read::Found(..)));
        assert_eq!(
            laptop.read_parts::<serde_json::Value>("tabd_done", "v.slot.r.1", None, Some(DONE)),
            Read::Deleted
        );
        assert_eq!(
            desktop.read_parts::<serde_json::Value>("tabd_done", "v.slot.r.1", None, Some(DONE)),
            Read::Absent,
            "another device saw nothing"
        );
    }
}
