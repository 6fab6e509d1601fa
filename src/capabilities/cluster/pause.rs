//! The pauses every device holds (docs/spec.md §28 with §23): the pause book (`records::state::pause`)
//! kept in the `tabd_shared` bucket under `<vault>.pause.book`. `tabd pause` and `tabd resume`
//! change it; each daemon reads it now and then and mirrors it into its own book, which is what
//! every door of that device reads.
//!
//! - **Written in turn.** A change reads the book and its revision and writes it back only at
//!   that revision (compare-and-set), tried again when another write came between; two devices
//!   pausing at once both count.
//! - **Never older.** Each write's `generation` is above the last one's (and at least the time
//!   in milliseconds, so a book written anew over a refused one still comes after every one a
//!   device saw); a device refuses a book older than one it mirrored.
//! - **Never deleted.** A resume writes the book without the pause, so a book that is missing
//!   where a device saw one is refused (deleted on the servers, or the servers' storage lost),
//!   not taken as "nothing is paused".
//! - **Sealed** with the cluster's key (`[cluster] key`) when there is one, bound to its key's
//!   name: a book another wrote without the key is refused. Without a key, the NATS password is
//!   the boundary (as for every record; docs/devices.md).

use chrono::Utc;

use super::{ClaimKey, Cluster, ClusterError};
use crate::base::signing::Key;
use crate::records::state::pause::Book;

/// What the cluster key's MAC is for (`base::signing`).
const PURPOSE: &str = "tabd cluster pause book";
/// How many times a change is tried when other writes keep coming between.
const TRIES: usize = 8;

/// Why the cluster's pause book could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum SharedPauseError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The book fails its check: never mirrored.
    #[error("the cluster's pause book is refused: {0}")]
    Refused(String),
    /// Other writes kept coming between the read and the write.
    #[error("the cluster's pause book changed {TRIES} times while this change was made; try again")]
    Busy,
}

/// This device's way to the cluster's pause book.
pub struct SharedPauses {
    cluster: Cluster,
    key: Option<Key>,
}

impl SharedPauses {
    /// Over `cluster`, sealing with the cluster's key `secret` when there is one.
    pub fn new(cluster: Cluster, secret: Option<&str>) -> Self {
        Self {
            cluster,
            key: secret.map(|s| Key::shared(s.as_bytes())),
        }
    }

    fn name(&self) -> ClaimKey {
        ClaimKey::shared(self.cluster.vault(), "pause", "book")
    }

    fn encode(&self, book: &Book) -> Vec<u8> {
        encode(self.key.as_ref(), self.name().as_str(), book)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Book, SharedPauseError> {
        decode(self.key.as_ref(), self.name().as_str(), bytes)
    }

    /// The book and its revision; `None` when none was ever written (or it was deleted).
    pub async fn read(&self) -> Result<Option<(Book, u64)>, SharedPauseError> {
        match self.cluster.shared_get(&self.name()).await? {
            None => Ok(None),
            Some((bytes, revision)) => Ok(Some((self.decode(&bytes)?, revision))),
        }
    }

    /// Applies `change` to the latest book (a new one when there is none, or the one there is
    /// refused: `after` is the generation this device saw last) and writes it at the revision it
    /// read. Returns the book as written and `change`'s answer.
    pub async fn change<T>(
        &self,
        after: u64,
        change: impl Fn(&mut Book) -> T,
    ) -> Result<(Book, T), SharedPauseError> {
        for _ in 0..TRIES {
            let (mut book, revision) = match self.read().await {
                Ok(Some((b, r))) => (b, Some(r)),
                Ok(None) => (Book::default(), None),
                Err(SharedPauseError::Refused(why)) => {
                    tracing::warn!("the cluster's pause book is refused ({why}); writing it anew");
                    let revision = self.cluster.shared_get(&self.name()).await?.map(|(_, r)| r);
                    (Book::default(), revision)
                }
                Err(e) => return Err(e),
            };
            let out = change(&mut book);
            let millis = u64::try_from(Utc::now().timestamp_millis()).unwrap_or_default();
            book.generation = (book.generation.max(after) + 1).max(millis);
            let bytes = self.encode(&book);
            let written = match revision {
                Some(r) => self.cluster.shared_update(&self.name(), bytes, r).await?,
                None => self.cluster.shared_create(&self.name(), bytes).await?,
            };
            if written.is_some() {
                return Ok((book, out));
            }
        }
        Err(SharedPauseError::Busy)
    }
}

/// The book's bytes under `name`: sealed with `key` (bound to the name) when there is one.
fn encode(key: Option<&Key>, name: &str, book: &Book) -> Vec<u8> {
    let body = serde_json::to_vec(book).unwrap_or_default();
    match key {
        Some(k) => k.seal(PURPOSE, &[name.as_bytes()], &body),
        None => body,
    }
}

/// The book `encode` wrote under `name`, when its seal holds (with `key`) and it reads as one.
fn decode(key: Option<&Key>, name: &str, bytes: &[u8]) -> Result<Book, SharedPauseError> {
    let body = match key {
        Some(k) => k
            .open(PURPOSE, &[name.as_bytes()], bytes)
            .map_err(|e| SharedPauseError::Refused(e.to_string()))?,
        None => bytes,
    };
    serde_json::from_slice(body).map_err(|e| {
        SharedPauseError::Refused(format!(
            "it is not a pause book tabd wrote ({e}; sealed with a [cluster] key this device does not have?)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seal binds the book to its key's name: one copied under another name, edited, or
    /// written without the key is refused; without a key, a sealed book is refused too.
    #[test]
    fn a_book_is_sealed_and_anything_else_is_refused() {
        let key = Key::shared(b"0123456789abcdef0123456789abcdef");
        let book = Book {
            generation: 7,
            ..Book::default()
        };
        let sealed = encode(Some(&key), "v.pause.book", &book);
        assert_eq!(decode(Some(&key), "v.pause.book", &sealed).unwrap(), book);
        assert!(
            decode(Some(&key), "w.pause.book", &sealed).is_err(),
            "copied under another name"
        );
        let other = Key::shared(b"fedcba9876543210fedcba9876543210");
        assert!(
            decode(Some(&other), "v.pause.book", &sealed).is_err(),
            "another key"
        );
        let plain = encode(None, "v.pause.book", &book);
        assert!(
            decode(Some(&key), "v.pause.book", &plain).is_err(),
            "written without the key"
        );
        assert_eq!(decode(None, "v.pause.book", &plain).unwrap(), book);
        let refused = decode(None, "v.pause.book", &sealed).unwrap_err().to_string();
        assert!(refused.contains("[cluster] key"), "{refused}");
    }
}
