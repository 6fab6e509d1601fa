//! What devices hand each other through the `tabd_shared` bucket: bytes under a key, read with
//! the revision they were written at, written over only at that revision (compare-and-set), or
//! created only when absent (first write wins). What the bytes mean, and their signature, are the
//! caller's: nothing here trusts them.

use async_nats::jetstream::kv;
use bytes::Bytes;

use super::{unavailable, ClaimKey, Cluster, ClusterError};

impl Cluster {
    /// The value under `key` and its revision; `None` when there is none (or it was deleted).
    pub async fn shared_get(&self, key: &ClaimKey) -> Result<Option<(Bytes, u64)>, ClusterError> {
        let b = self.buckets().await?;
        let entry = b.shared.entry(key.as_str()).await.map_err(unavailable)?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .map(|e| (e.value, e.revision)))
    }

    /// Writes `value` under `key`, whatever was there.
    pub async fn shared_put(&self, key: &ClaimKey, value: Vec<u8>) -> Result<u64, ClusterError> {
        let b = self.buckets().await?;
        b.shared
            .put(key.as_str(), value.into())
            .await
            .map_err(unavailable)
    }

    /// Writes `value` under `key` only if nothing is there: `Some(revision)` when this write
    /// was the first, `None` when another was.
    pub async fn shared_create(&self, key: &ClaimKey, value: Vec<u8>) -> Result<Option<u64>, ClusterError> {
        let b = self.buckets().await?;
        match b.shared.create(key.as_str(), value.into()).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
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
        match b.shared.update(key.as_str(), value.into(), revision).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }
}

impl Cluster {
    /// Deletes `key` if it is still at `revision` (a record written for a call that then did
    /// not start); a failure leaves it as it is.
    pub async fn shared_delete(&self, key: &ClaimKey, revision: u64) -> Result<(), ClusterError> {
        let b = self.buckets().await?;
        b.shared
            .delete_expect_revision(key.as_str(), Some(revision))
            .await
            .map_err(unavailable)
    }
}
