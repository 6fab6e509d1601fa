//! The fence (docs/spec.md §23): what a run checks before it changes anything — a vault write, a note
//! moved, an MCP call, its finish. With `[cluster]` a run holds leases (a slot, its notes) that a
//! device keeps only while it renews them; a device paused past its lease (SIGSTOP, a closed
//! lid) has lost them, and another device may be doing the same work. The lease itself lives in
//! the cluster capability (floor 5); what the harness and the run's finish need to ask — "is this
//! still mine?" — is this small trait, so the floors below never import upward.
//!
//! Without `[cluster]` a run holds nothing and the fence is open: every check passes.

use std::fmt;
use std::sync::Arc;

/// Something this device holds only while it keeps renewing it (a cluster lease).
pub trait Hold: Send + Sync {
    /// Whether it is still this device's — known locally, without asking the server: a device
    /// that was paused finds out the moment it runs again.
    fn still_mine(&self) -> bool;
    /// What it is, in a few words, for the log and the daily note (`the 09:00 slot of risk`).
    fn what(&self) -> String;
}

/// What a run holds. Cheap to clone; every clone sees the same holds.
#[derive(Clone, Default)]
pub struct Fence {
    holds: Vec<Arc<dyn Hold>>,
}

impl fmt::Debug for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.holds.iter().map(|h| h.what()))
            .finish()
    }
}

/// The fence said no: the device lost what it held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this device no longer holds {what} (it did not renew its lease in time — paused or cut off); \
     another device may be doing this work, so this one changes nothing"
)]
pub struct Lost {
    pub what: String,
}

impl Fence {
    /// The fence of a run that holds nothing (no `[cluster]`): always open.
    pub fn open() -> Self {
        Self::default()
    }

    /// A fence over `holds`.
    pub fn of(holds: Vec<Arc<dyn Hold>>) -> Self {
        Self { holds }
    }

    /// Whether it guards anything (a run under `[cluster]`).
    pub fn guards(&self) -> bool {
        !self.holds.is_empty()
    }

    /// `Ok` while every hold is still this device's; else the first one lost.
    pub fn check(&self) -> Result<(), Lost> {
        match self.holds.iter().find(|h| !h.still_mine()) {
            None => Ok(()),
            Some(h) => Err(Lost { what: h.what() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(AtomicBool, &'static str);

    impl Hold for Flag {
        fn still_mine(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
        fn what(&self) -> String {
            self.1.to_string()
        }
    }

    #[test]
    fn an_open_fence_passes_and_a_lost_hold_is_named() {
        assert!(Fence::open().check().is_ok());
        assert!(!Fence::open().guards());
        let slot = Arc::new(Flag(AtomicBool::new(true), "the 09:00 slot of risk"));
        let note = Arc::new(Flag(AtomicBool::new(true), "the note a.md"));
        let fence = Fence::of(vec![slot.clone(), note.clone()]);
        assert!(fence.guards() && fence.check().is_ok());
        note.0.store(false, Ordering::SeqCst);
        let lost = fence.clone().check().unwrap_err();
        assert_eq!(lost.what, "the note a.md");
        assert!(lost.to_string().contains("changes nothing"), "{lost}");
    }
}
