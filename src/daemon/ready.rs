//! When is an inbox note complete? (DESIGN §5) — a pure state machine over file events.
//!
//! - moved in from outside the inbox folder, or renamed from a temp name (an atomic save):
//!   complete at once;
//! - written in place, or renamed from another visible name in the same folder (a person typing
//!   in Obsidian): complete once non-empty and unchanged for `settle`;
//! - `status: draft` is decided later, when the note is read.
//!
//! Events are hints: a note with no events (found by a rescan) is judged by its modification
//! time instead, so nothing depends on an event arriving.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::inbox::{is_temp_name, is_trigger_name};

/// A file event, reduced to what readiness needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsEvent {
    /// Created or written in place (including close-after-write).
    Written(PathBuf),
    /// Appeared by rename; `from` when the source is known (a rename between watched folders).
    RenamedTo { to: PathBuf, from: Option<PathBuf> },
    /// Left by rename or removal.
    Gone(PathBuf),
    /// Events may have been lost (inotify overflow, watcher error): rescan everything.
    Rescan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Complete now.
    Atomic,
    /// Complete when unchanged until `since + settle`.
    Settling { since: Instant },
}

#[derive(Debug)]
pub struct Readiness {
    settle: Duration,
    files: HashMap<PathBuf, How>,
}

fn name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

impl Readiness {
    pub fn new(settle: Duration) -> Self {
        Self {
            settle,
            files: HashMap::new(),
        }
    }

    pub fn set_settle(&mut self, settle: Duration) {
        self.settle = settle;
    }

    /// Takes one event seen at `now`.
    pub fn on_event(&mut self, ev: &FsEvent, now: Instant) {
        match ev {
            FsEvent::Written(p) => {
                if is_trigger_name(name(p)) {
                    self.files.insert(p.clone(), How::Settling { since: now });
                }
            }
            FsEvent::RenamedTo { to, from } => {
                if !is_trigger_name(name(to)) {
                    return;
                }
                let same_folder = from.as_ref().is_some_and(|f| f.parent() == to.parent());
                let from_visible = from
                    .as_ref()
                    .is_some_and(|f| !is_temp_name(name(f)) && is_trigger_name(name(f)));
                let how = if same_folder && from_visible {
                    // Obsidian renaming `Untitled.md` while the person types: wait for them.
                    How::Settling { since: now }
                } else if let (Some(How::Settling { since }), None) = (self.files.get(to), from) {
                    // A bare `To` for a file we already saw written: keep waiting.
                    How::Settling { since: *since }
                } else {
                    How::Atomic
                };
                if let Some(f) = from {
                    self.files.remove(f);
                }
                self.files.insert(to.clone(), how);
            }
            FsEvent::Gone(p) => {
                self.files.remove(p);
            }
            FsEvent::Rescan => {}
        }
    }

    /// Whether the note at `path` (size, mtime) is complete at `now`. `None` = not yet, with the
    /// instant to look again.
    pub fn check(
        &self,
        path: &Path,
        size: u64,
        modified: SystemTime,
        now: Instant,
        wall_now: SystemTime,
    ) -> Result<(), Option<Instant>> {
        match self.files.get(path) {
            Some(How::Atomic) => Ok(()),
            Some(How::Settling { since }) => {
                let due = *since + self.settle;
                if size == 0 {
                    Err(None) // an empty note waits for its first write
                } else if now >= due {
                    Ok(())
                } else {
                    Err(Some(due))
                }
            }
            None => {
                // No event seen (start-up, rescan): judge by the modification time.
                let age = wall_now.duration_since(modified).unwrap_or(Duration::ZERO);
                if size == 0 {
                    Err(None)
                } else if age >= self.settle {
                    Ok(())
                } else {
                    Err(Some(now + (self.settle - age)))
                }
            }
        }
    }

    /// Forgets a note once it has been handed to a run.
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }

    /// Forgets everything in `dir` that is no longer there.
    pub fn retain_existing(&mut self, dir: &Path, existing: &std::collections::HashSet<PathBuf>) {
        self.files
            .retain(|p, _| p.parent() != Some(dir) || existing.contains(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTLE: Duration = Duration::from_millis(5000);

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn old() -> SystemTime {
        SystemTime::now() - Duration::from_secs(3600)
    }

    #[test]
    fn moved_in_and_atomic_saves_are_ready_at_once() {
        let mut r = Readiness::new(SETTLE);
        let now = Instant::now();
        r.on_event(
            &FsEvent::RenamedTo {
                to: p("/v/in/a.md"),
                from: None,
            },
            now,
        );
        assert_eq!(
            r.check(&p("/v/in/a.md"), 10, SystemTime::now(), now, SystemTime::now()),
            Ok(())
        );
        r.on_event(
            &FsEvent::RenamedTo {
                to: p("/v/in/b.md"),
                from: Some(p("/v/in/.b.md.tabd-1234.tmp")),
            },
            now,
        );
        assert_eq!(
            r.check(&p("/v/in/b.md"), 10, SystemTime::now(), now, SystemTime::now()),
            Ok(())
        );
        r.on_event(
            &FsEvent::RenamedTo {
                to: p("/v/in/c.md"),
                from: Some(p("/v/other/c.md")),
            },
            now,
        );
        assert_eq!(
            r.check(&p("/v/in/c.md"), 10, SystemTime::now(), now, SystemTime::now()),
            Ok(())
        );
    }

    #[test]
    fn in_place_writes_settle_and_every_write_restarts_the_wait() {
        let mut r = Readiness::new(SETTLE);
        let t0 = Instant::now();
        let f = p("/v/in/Untitled.md");
        r.on_event(&FsEvent::Written(f.clone()), t0);
        assert_eq!(
            r.check(&f, 0, SystemTime::now(), t0 + SETTLE * 2, SystemTime::now()),
            Err(None),
            "empty waits for content"
        );
        let t1 = t0 + Duration::from_secs(3);
        r.on_event(&FsEvent::Written(f.clone()), t1);
        assert_eq!(
            r.check(
                &f,
                50,
                SystemTime::now(),
                t1 + Duration::from_secs(4),
                SystemTime::now()
            ),
            Err(Some(t1 + SETTLE))
        );
        assert_eq!(
            r.check(&f, 50, SystemTime::now(), t1 + SETTLE, SystemTime::now()),
            Ok(())
        );
    }

    #[test]
    fn a_visible_rename_in_the_same_folder_waits_for_settle() {
        let mut r = Readiness::new(SETTLE);
        let t0 = Instant::now();
        r.on_event(&FsEvent::Written(p("/v/in/Untitled.md")), t0);
        r.on_event(
            &FsEvent::RenamedTo {
                to: p("/v/in/Meeting notes.md"),
                from: None,
            },
            t0,
        );
        r.on_event(
            &FsEvent::RenamedTo {
                to: p("/v/in/Meeting notes.md"),
                from: Some(p("/v/in/Untitled.md")),
            },
            t0,
        );
        assert_eq!(
            r.check(
                &p("/v/in/Meeting notes.md"),
                9,
                SystemTime::now(),
                t0,
                SystemTime::now()
            ),
            Err(Some(t0 + SETTLE))
        );
        assert_eq!(
            r.check(&p("/v/in/Untitled.md"), 9, old(), t0, SystemTime::now()),
            Ok(()),
            "the old name is forgotten (judged by mtime)"
        );
    }

    #[test]
    fn temp_names_never_count_and_unknown_files_use_mtime() {
        let mut r = Readiness::new(SETTLE);
        let now = Instant::now();
        for t in [".x.md.swp", "x.md~", "x.tmp", ".syncthing.x.md.tmp", "x.part"] {
            r.on_event(&FsEvent::Written(p(&format!("/v/in/{t}"))), now);
        }
        assert!(r.files.is_empty());
        assert_eq!(
            r.check(&p("/v/in/old.md"), 5, old(), now, SystemTime::now()),
            Ok(())
        );
        let fresh = SystemTime::now();
        assert!(matches!(
            r.check(&p("/v/in/new.md"), 5, fresh, now, SystemTime::now()),
            Err(Some(_))
        ));
    }

    #[test]
    fn zero_settle_is_immediate_for_written_notes() {
        let mut r = Readiness::new(Duration::ZERO);
        let now = Instant::now();
        r.on_event(&FsEvent::Written(p("/v/in/a.md")), now);
        assert_eq!(
            r.check(&p("/v/in/a.md"), 3, SystemTime::now(), now, SystemTime::now()),
            Ok(())
        );
    }
}
