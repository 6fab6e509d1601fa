//! With `[cluster]`: the pauses every device holds (DESIGN §28 "holds on every device").

use chrono::{DateTime, Utc};

use super::Daemon;

impl Daemon {
    /// With `[cluster]`: the cluster's pause book, as the follower last read it, mirrored into
    /// this device's book.
    pub(super) fn follow_cluster_pauses(&mut self, _wall: DateTime<Utc>) {}

    /// With `[cluster]`, a push about a pause goes out from one device: the first to claim it.
    pub(super) fn claim_push(&mut self, _key: &str) -> bool {
        true
    }
}
