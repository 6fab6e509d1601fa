//! The one sink of non-fatal side writes — daily-note lines, state updates, records, ledger
//! phases — that must not stop tabd when they fail (a full disk), but must not fail silently
//! either (issues 32 and 37): each failure is counted, logged once per distinct failure, and
//! shown in `tabd status` and `agent/status.md`. Clones share one sink (the daemon and its runs).

use std::collections::BTreeSet;
use std::fmt::Display;
use std::sync::{Arc, Mutex, PoisonError};

/// Most distinct failures remembered (each is logged once); later ones are counted only.
const MAX_DISTINCT: usize = 64;

/// Failed side writes since start-up.
#[derive(Debug, Default, Clone)]
pub struct SideWrites(Arc<Mutex<Failed>>);

#[derive(Debug, Default)]
struct Failed {
    count: u64,
    last: Option<String>,
    /// What failed, and why: logged the first time only.
    seen: BTreeSet<String>,
    /// What was not written, distinct, in the order first seen.
    what: Vec<String>,
}

impl SideWrites {
    /// Counts `r` if it failed: `what` says what was not written.
    pub fn check<T, E: Display>(&self, what: &str, r: Result<T, E>) {
        if let Err(e) = r {
            self.failed(what, &e);
        }
    }

    /// Counts one failure to write `what`.
    pub fn failed(&self, what: &str, e: &dyn Display) {
        let said = format!("cannot write {what}: {e}");
        let mut f = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.count += 1;
        if f.seen.len() < MAX_DISTINCT && f.seen.insert(said.clone()) {
            tracing::error!("{said}");
        }
        if !f.what.iter().any(|w| w == what) && f.what.len() < MAX_DISTINCT {
            f.what.push(what.to_string());
        }
        f.last = Some(said);
    }

    /// `Some("3 writes failed since start; the last: cannot write …")`, or `None`.
    pub fn problem(&self) -> Option<String> {
        let f = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let last = f.last.clone()?;
        let n = f.count;
        let mut s = format!(
            "{n} write{} failed since tabd started (lines of the daily note or its state may be missing); the last: {last}",
            if n == 1 { "" } else { "s" }
        );
        if f.what.len() > 1 {
            s.push_str(&format!("; failing: {}", f.what.join(", ")));
        }
        Some(s)
    }

    /// The last failure to write `what` (its sentence), if one failed.
    pub fn failure_of(&self, what: &str) -> Option<String> {
        let f = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let prefix = format!("cannot write {what}: ");
        let last = f.last.as_deref().and_then(|s| s.strip_prefix(&prefix));
        last.map(str::to_string).or_else(|| {
            f.seen
                .iter()
                .find_map(|s| s.strip_prefix(&prefix).map(str::to_string))
        })
    }

    /// How many failed so far (to notice a change).
    pub fn count(&self) -> u64 {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_failure_and_names_each_thing_once() {
        let s = SideWrites::default();
        assert_eq!(s.problem(), None);
        s.check::<(), _>("the daily note", Err("disk full"));
        s.check::<(), _>("the daily note", Err("disk full"));
        s.clone().check::<(), _>("the state", Err("read-only"));
        s.check::<(), &str>("the state", Ok(()));
        assert_eq!(s.count(), 3);
        let p = s.problem().unwrap_or_default();
        assert!(p.starts_with("3 writes failed"), "{p}");
        assert!(p.contains("the last: cannot write the state: read-only"), "{p}");
        assert!(p.ends_with("; failing: the daily note, the state"), "{p}");
    }
}
