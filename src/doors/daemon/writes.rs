//! Writes the daemon makes on the side — daily-note lines, state updates, records — that must
//! not stop it when they fail (a full disk), but must not fail silently either (issue 32): each
//! failure is counted, logged, and shown in `tabd status` and `agent/status.md`.

use std::cell::{Cell, RefCell};
use std::fmt::Display;

/// Failed side writes since start-up.
#[derive(Debug, Default)]
pub struct Writes {
    failed: Cell<u64>,
    last: RefCell<Option<String>>,
}

impl Writes {
    /// Counts `r` if it failed: `what` says what was not written.
    pub fn check<T, E: Display>(&self, what: &str, r: Result<T, E>) {
        if let Err(e) = r {
            self.failed.set(self.failed.get() + 1);
            let said = format!("cannot write {what}: {e}");
            tracing::error!("{said}");
            *self.last.borrow_mut() = Some(said);
        }
    }

    /// `Some("3 writes failed since start; the last: cannot write …")`, or `None`.
    pub fn problem(&self) -> Option<String> {
        let n = self.failed.get();
        let last = self.last.borrow().clone()?;
        Some(format!(
            "{n} write{} failed since tabd started (lines of the daily note or its state may be missing); the last: {last}",
            if n == 1 { "" } else { "s" }
        ))
    }

    /// How many failed so far (to notice a change).
    pub fn count(&self) -> u64 {
        self.failed.get()
    }
}
