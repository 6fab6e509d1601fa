//! With `[cluster]`: the pauses every device holds (docs/spec.md §28 "holds on every device", §23).
//! `tabd pause` writes the cluster's pause book (`capabilities::cluster::pause`) and this
//! device's own; each daemon follows the cluster's book — a task reads it every third of the
//! lease, as the heartbeat does — and mirrors it into its own book at the next tick, where the
//! daemon's watch and every door of the device (`tabd fire`, `tabd mcp serve`, `delegate`) find
//! it, and where it holds across a restart with the servers out of reach.
//!
//! Why a read every third of the lease and not a KV watch: the heartbeat already wakes the loop
//! that often, a read is one request, and it needs no consumer that the servers (NATS 2.9 and
//! async-nats 0.51 disagree on some of JetStream's fields) could drop without a word; the device
//! where the person typed the command holds the pause at once through its own book.
//!
//! What the cluster says is input: a book older than one this device mirrored, or missing where
//! it saw one, is refused and said (the device keeps holding what it last held); one that fails
//! its seal is refused by the capability. A push about a pause, and its lines in the daily note
//! (the vault's, which every device writes to), come from one device: the first to create its
//! key in the shared bucket.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::Daemon;
use crate::capabilities::cluster::pause::SharedPauses;
use crate::capabilities::cluster::ClaimKey;
use crate::records::state::pause::{Book, Read};

/// What the follower last read: the cluster's book (`None`: none written yet), or why not.
type Followed = Option<Result<Option<Book>, String>>;

/// The follower's news, and what was said about a refused book (once per generation).
pub(super) struct ClusterPauses {
    news: watch::Receiver<Followed>,
    said: Option<u64>,
}

/// Reads the cluster's pause book every `every`, for as long as the daemon listens.
fn follow(shared: SharedPauses, every: Duration) -> watch::Receiver<Followed> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        loop {
            let read = shared.read().await.map(|b| b.map(|(book, _)| book));
            if tx.send(Some(read.map_err(|e| e.to_string()))).is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    });
    rx
}

impl Daemon {
    /// With `[cluster]`: starts following the cluster's pause book.
    pub(super) fn start_pause_follower(&mut self) {
        let Some(c) = self.coordinator.as_ref() else {
            return;
        };
        let key = self.config().cluster.as_ref().and_then(|c| c.key.clone());
        let every = (c.cluster().lease() / 3).max(Duration::from_secs(1));
        let shared = SharedPauses::new(c.cluster().clone(), key.as_deref());
        self.seen.pauses.cluster = Some(ClusterPauses {
            news: follow(shared, every),
            said: None,
        });
    }

    /// With `[cluster]`: what the follower read since the last tick, mirrored into this device's
    /// book (written only when it changes what the book holds).
    pub(super) fn follow_cluster_pauses(&mut self, wall: DateTime<Utc>) {
        let Some(follower) = self.seen.pauses.cluster.as_mut() else {
            return;
        };
        if !follower.news.has_changed().unwrap_or(false) {
            return;
        }
        let news = follower.news.borrow_and_update().clone();
        let store = self.pause_store();
        let mine = match store.read() {
            Read::Book(b) => b,
            _ => Book::default(),
        };
        let book = match news {
            None => return,
            Some(Err(why)) => {
                tracing::debug!(
                    "cluster: the pause book could not be read ({why}); this device holds what it last held"
                );
                return;
            }
            Some(Ok(None)) if mine.generation == 0 => return,
            Some(Ok(None)) => {
                self.refuse_cluster_book(mine.generation, "it is missing where this device saw one");
                return;
            }
            Some(Ok(Some(book))) if book.generation < mine.generation => {
                let why = format!(
                    "it is older (generation {}) than one this device saw ({})",
                    book.generation, mine.generation
                );
                self.refuse_cluster_book(book.generation, &why);
                return;
            }
            Some(Ok(Some(book))) => book,
        };
        let mut mirrored = mine.clone();
        if !mirrored.mirror(&book, wall) {
            return;
        }
        let r = store.update(|b| b.mirror(&book, wall));
        if let Err(e) = r {
            self.shown
                .writes
                .check("the pause book (the cluster's)", Err::<(), _>(e));
        }
    }

    /// A cluster book that is not taken: said once per generation, in the log and the daily note.
    fn refuse_cluster_book(&mut self, generation: u64, why: &str) {
        let Some(follower) = self.seen.pauses.cluster.as_mut() else {
            return;
        };
        if follower.said == Some(generation) {
            return;
        }
        follower.said = Some(generation);
        let text = format!(
            "the cluster's pause book is refused: {why}; this device holds the pauses it last held (`tabd resume` or `tabd pause` writes the book anew)"
        );
        tracing::warn!("cluster: {text}");
        self.shown.writes.check(
            "the daily note",
            self.run_env
                .log
                .write_line(self.run_env.clock.now(), "tabd", &text),
        );
    }

    /// Whether this device says `key` — a push about a pause, or its line in the (shared) daily
    /// note: without `[cluster]` always; with it, the device that creates the key first in the
    /// shared bucket. Without the servers it is said here (said twice beats not said).
    pub(super) fn first_device(&self, key: &str) -> bool {
        let Some(c) = self.coordinator.as_ref() else {
            return true;
        };
        let cluster = c.cluster().clone();
        let name = ClaimKey::shared(cluster.vault(), "told", key);
        match c.block(cluster.shared_create(&name, b"1".to_vec())) {
            Ok(Some(_)) => true,
            Ok(None) => {
                tracing::debug!("cluster: another device told of {key}");
                false
            }
            Err(e) => {
                tracing::debug!("cluster: {e}; telling of {key} from here");
                true
            }
        }
    }
}
