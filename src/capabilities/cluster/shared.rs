//! What devices hand each other through the `tabd_shared` bucket: bytes under a key, read with
//! the revision they were written at, written over only at that revision (compare-and-set), or
//! created only when absent (first write wins). What the bytes mean, and their signature, are the
//! caller's: nothing here trusts them.
//!
//! **Larger than one message.** The servers take at most `max_payload` bytes in one message (1 MB
//! by default), and a waiting run with a big note in its conversation is more. Such a value is
//! kept in the JetStream object store `tabd_shared_large` (in chunks), and the KV entry holds a
//! pointer to it: the object's name, its size and its SHA-256. The object holds the very bytes
//! the caller gave — its signed record — so a pointer someone forged leads only to bytes whose
//! hash does not match, or whose seal fails the caller's check. An object goes when its entry is
//! deleted or written over; otherwise it is kept as long as the entries are (`SHARED_FOR`).

use async_nats::jetstream::{self, kv, object_store::ObjectStore};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{keys, unavailable, ClaimKey, Cluster, ClusterError};

/// The object store of values larger than one message.
pub const LARGE: &str = "tabd_shared_large";
/// Room a value leaves in its message for the subject, headers and JetStream's own.
const HEADROOM: usize = 8 * 1024;
/// What a server takes in one message when it has not said (NATS's default).
const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
/// The largest value read back through a pointer (a suspended run is far smaller).
const LARGEST: u64 = 256 * 1024 * 1024;

/// What a KV entry holds instead of a value too large for one message. A sealed record starts
/// with `{"mac":`, a pointer with `{"object":`: one is never read as the other.
#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    object: String,
    size: u64,
    sha256: String,
}

impl Pointer {
    fn of(bytes: &[u8]) -> Option<Pointer> {
        if !bytes.starts_with(b"{\"object\":") {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    keys::hex(&Sha256::digest(bytes))
}

impl Cluster {
    /// The value under `key` and its revision; `None` when there is none (or it was deleted). A
    /// value kept as an object comes back whole, checked against its pointer.
    pub async fn shared_get(&self, key: &ClaimKey) -> Result<Option<(Bytes, u64)>, ClusterError> {
        let b = self.buckets().await?;
        let entry = b.shared.entry(key.as_str()).await.map_err(unavailable)?;
        let Some(e) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Ok(None);
        };
        match Pointer::of(&e.value) {
            None => Ok(Some((e.value, e.revision))),
            Some(p) => Ok(Some((self.fetch(key, &p).await?, e.revision))),
        }
    }

    /// `shared_get`, telling a record deleted (a marker under `key`, or gone where this device
    /// remembers it: `Cluster::remember_shared`) from one never written.
    pub async fn shared_read(&self, key: &ClaimKey) -> Result<super::Read<Bytes>, ClusterError> {
        let b = self.buckets().await?;
        let entry = b.shared.entry(key.as_str()).await.map_err(unavailable)?;
        let remembered = self.remembers_shared(key);
        Ok(match entry {
            None if remembered => super::Read::Deleted,
            None => super::Read::Absent,
            Some(e) if e.operation != kv::Operation::Put => super::Read::Deleted,
            Some(e) => match Pointer::of(&e.value) {
                None => super::Read::Found(e.value, e.revision),
                Some(p) => super::Read::Found(self.fetch(key, &p).await?, e.revision),
            },
        })
    }

    /// Writes `value` under `key`, whatever was there.
    pub async fn shared_put(&self, key: &ClaimKey, value: Vec<u8>) -> Result<u64, ClusterError> {
        let b = self.buckets().await?;
        let before = self.object_under(key).await;
        let (value, object) = self.stored(key, value).await?;
        let revision = b.shared.put(key.as_str(), value).await.map_err(unavailable)?;
        self.drop_replaced(before, object.as_deref()).await;
        Ok(revision)
    }

    /// Writes `value` under `key` only if nothing is there: `Some(revision)` when this write
    /// was the first, `None` when another was.
    pub async fn shared_create(&self, key: &ClaimKey, value: Vec<u8>) -> Result<Option<u64>, ClusterError> {
        let b = self.buckets().await?;
        let (value, object) = self.stored(key, value).await?;
        match b.shared.create(key.as_str(), value).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                // The first write is another's: the object written for this one is nobody's.
                self.drop_unused(key, object).await;
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Writes `value` under `key` only if it is still at `revision`: `None` when another write
    /// came between.
    pub async fn shared_update(
        &self,
        key: &ClaimKey,
        value: Vec<u8>,
        revision: u64,
    ) -> Result<Option<u64>, ClusterError> {
        let b = self.buckets().await?;
        let before = self.object_under(key).await;
        let (value, object) = self.stored(key, value).await?;
        match b.shared.update(key.as_str(), value, revision).await {
            Ok(revision) => {
                self.drop_replaced(before, object.as_deref()).await;
                Ok(Some(revision))
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                self.drop_unused(key, object).await;
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Deletes `key` if it is still at `revision` (a record written for a call that then did
    /// not start), and the object it points to; a failure leaves it as it is.
    pub async fn shared_delete(&self, key: &ClaimKey, revision: u64) -> Result<(), ClusterError> {
        let b = self.buckets().await?;
        let object = self.object_under(key).await;
        b.shared
            .delete_expect_revision(key.as_str(), Some(revision))
            .await
            .map_err(unavailable)?;
        self.drop_replaced(object, None).await;
        Ok(())
    }

    /// What goes under `key` in the bucket: `value` itself when it fits in one message, else a
    /// pointer to the object it is now kept as (and that object's name).
    async fn stored(&self, key: &ClaimKey, value: Vec<u8>) -> Result<(Bytes, Option<String>), ClusterError> {
        let max = match self.inner.client.server_info().max_payload {
            0 => DEFAULT_MAX_PAYLOAD,
            n => n,
        };
        if value.len() + HEADROOM <= max {
            return Ok((value.into(), None));
        }
        let sha256 = sha256_hex(&value);
        // Named by its content: two writers of one key never write over each other's object.
        let pointer = Pointer {
            object: format!("{key}.{sha256}"),
            size: value.len() as u64,
            sha256,
        };
        self.large()
            .await?
            .put(pointer.object.as_str(), &mut value.as_slice())
            .await
            .map_err(unavailable)?;
        tracing::debug!(
            "cluster: {key} is {} bytes, more than one message: kept as the object {}",
            pointer.size,
            pointer.object
        );
        // Our own type: it always serializes.
        let bytes = serde_json::to_vec(&pointer).unwrap_or_default();
        Ok((bytes.into(), Some(pointer.object)))
    }

    /// The object `p` names, if it is what `p` says (its size and SHA-256).
    async fn fetch(&self, key: &ClaimKey, p: &Pointer) -> Result<Bytes, ClusterError> {
        use tokio::io::AsyncReadExt;
        let garbled = |why: String| ClusterError::Garbled(format!("{key} points to {why}"));
        if p.size > LARGEST {
            return Err(garbled(format!("{} bytes, more than tabd reads", p.size)));
        }
        let object = self
            .large()
            .await?
            .get(p.object.as_str())
            .await
            .map_err(|e| match e.kind() {
                jetstream::object_store::GetErrorKind::NotFound => {
                    garbled(format!("an object the servers do not have ({})", p.object))
                }
                _ => unavailable(e),
            })?;
        let mut bytes = Vec::new();
        object
            .take(p.size + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(unavailable)?;
        if bytes.len() as u64 != p.size || sha256_hex(&bytes) != p.sha256 {
            return Err(garbled(format!(
                "an object that is not the one it names ({} bytes, not {})",
                bytes.len(),
                p.size
            )));
        }
        Ok(bytes.into())
    }

    /// The object the entry under `key` points to now, if it does (and can be read).
    async fn object_under(&self, key: &ClaimKey) -> Option<String> {
        let b = self.buckets().await.ok()?;
        let entry = b.shared.entry(key.as_str()).await.ok()??;
        Pointer::of(&entry.value).map(|p| p.object)
    }

    /// Deletes the object written for a write that lost, unless the entry under `key` points to
    /// it anyway (another wrote the same bytes).
    async fn drop_unused(&self, key: &ClaimKey, object: Option<String>) {
        if object.is_some() {
            let theirs = self.object_under(key).await;
            self.drop_replaced(object, theirs.as_deref()).await;
        }
    }

    /// Deletes the object `gone` unless it is `kept` (the entry points to it still). A failure is
    /// said and left: the object goes with the bucket's age.
    async fn drop_replaced(&self, gone: Option<String>, kept: Option<&str>) {
        let Some(gone) = gone.filter(|g| Some(g.as_str()) != kept) else {
            return;
        };
        let deleted = match self.large().await {
            Ok(store) => store.delete(gone.as_str()).await.map_err(unavailable),
            Err(e) => Err(e),
        };
        if let Err(e) = deleted {
            tracing::warn!("cluster: cannot delete the object {gone}, which nothing points to now: {e}");
        }
    }

    /// The object store of values larger than one message, found or made at first use.
    async fn large(&self) -> Result<&ObjectStore, ClusterError> {
        let (js, replicas) = (&self.inner.js, super::replicas(&self.inner.client));
        // Just made on three servers, it opens once its replicas elect a leader: tried again
        // like the buckets' opening.
        let retry = backon::ExponentialBuilder::default()
            .with_min_delay(std::time::Duration::from_millis(200))
            .with_max_times(4);
        self.inner
            .large
            .get_or_try_init(|| backon::Retryable::retry(move || open_large(js, replicas), retry))
            .await
    }
}

/// Finds the object store of large values, or makes it as `create_object_store` would — but read
/// from the stream's leader like `tabd_shared` (an object written a moment ago is there), and
/// kept as long.
async fn open_large(js: &jetstream::Context, replicas: usize) -> Result<ObjectStore, ClusterError> {
    if let Ok(store) = js.get_object_store(LARGE).await {
        return Ok(store);
    }
    let stream = jetstream::stream::Config {
        name: format!("OBJ_{LARGE}"),
        subjects: vec![format!("$O.{LARGE}.C.>"), format!("$O.{LARGE}.M.>")],
        max_age: super::SHARED_FOR,
        storage: jetstream::stream::StorageType::File,
        num_replicas: replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        allow_rollup: true,
        allow_direct: false,
        ..Default::default()
    };
    let made = js.create_stream(stream).await;
    // Made here or by another device at the same moment: either way, open it.
    js.get_object_store(LARGE).await.map_err(|e| match made {
        Err(made) => unavailable(made),
        Ok(_) => unavailable(e),
    })
}
