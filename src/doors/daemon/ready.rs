//! When is an inbox note complete? (docs/spec.md §5) — a pure state machine over file events.
//!
//! - moved in from outside the inbox folder, or renamed from a temp name (an atomic save):
//!   complete at once;
//! - written in place by a program (its first content arrives at once): complete once unchanged
//!   for `settle` (`[inbox] settle_ms`, 5 s);
//! - typed in the inbox by a person — it began empty (Obsidian's `Untitled.md`) or was renamed
//!   from another visible name in the same folder (Obsidian renaming it to its title while the
//!   person types): complete once non-empty and unchanged for `typing` (`[inbox] typing_settle_s`,
//!   60 s), since a person pauses to think far longer than a program between writes;
//! - `status: draft` is decided later, when the note is read: it holds a note however long.
//!
//! Events are hints: a note with no events (found by a rescan) is judged by its modification
//! time instead, so nothing depends on an event arriving.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::records::inbox::{is_temp_name, is_trigger_name};

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
    /// Complete when unchanged until `since + settle` (or `+ typing`, for a person's note).
    Settling { since: Instant, typing: bool },
}

/// How long a note must stay empty to count as one a person is typing (a program creates and
/// writes within microseconds).
const EMPTY_FOR: Duration = Duration::from_millis(500);

/// Why a note is not complete yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotYet {
    /// When to look again; `None`: it is empty and waits for its first write.
    pub until: Option<Instant>,
    /// A person is typing it in the inbox (the longer wait applies).
    pub typing: bool,
}

#[derive(Debug)]
pub struct Readiness {
    settle: Duration,
    typing: Duration,
    files: HashMap<PathBuf, How>,
}

/// When an empty note found without an event began to be empty, as far as its modification
/// time says (never further back than `EMPTY_FOR`).
fn empty_since(modified: SystemTime, now: Instant, wall_now: SystemTime) -> Instant {
    let age = wall_now.duration_since(modified).unwrap_or(Duration::ZERO);
    now.checked_sub(age.min(EMPTY_FOR)).unwrap_or(now)
}

fn name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

impl Readiness {
    /// `settle`: a program's note; `typing`: a note a person types in the inbox.
    pub fn new((settle, typing): (Duration, Duration)) -> Self {
        Self {
            settle,
            typing,
            files: HashMap::new(),
        }
    }

    /// How long a note a person types must rest.
    pub fn typing(&self) -> Duration {
        self.typing
    }

    pub fn set_settle(&mut self, (settle, typing): (Duration, Duration)) {
        self.settle = settle;
        self.typing = typing;
    }

    fn typing_now(&self, p: &Path) -> bool {
        matches!(self.files.get(p), Some(How::Settling { typing: true, .. }))
    }

    /// Takes one event seen at `now`.
    pub fn on_event(&mut self, ev: &FsEvent, now: Instant) {
        match ev {
            FsEvent::Written(p) => {
                if is_trigger_name(name(p)) {
                    let typing = self.typing_now(p);
                    self.files.insert(p.clone(), How::Settling { since: now, typing });
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
                    How::Settling {
                        since: now,
                        typing: true,
                    }
                } else if let (Some(How::Settling { since, typing }), None) = (self.files.get(to), from) {
                    // A bare `To` for a file we already saw written: keep waiting.
                    How::Settling {
                        since: *since,
                        typing: *typing,
                    }
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

    /// Whether the note at `path` (size, mtime) is complete at `now`; if not, until when it
    /// waits. An empty note is being typed: from then on it waits as a person's note. (The
    /// daemon's core does the two halves at two moments: `observe` a listing, `judge` a note.)
    #[cfg(test)]
    pub fn check(
        &mut self,
        path: &Path,
        size: u64,
        modified: SystemTime,
        now: Instant,
        wall_now: SystemTime,
    ) -> Result<(), NotYet> {
        self.observe(path, size, modified, now, wall_now);
        self.judge(path, size, modified, now, wall_now)
    }

    /// Takes in what a listing shows of the note at `path`: an empty note found without an
    /// event starts waiting for its first write, and one empty for long is a person's.
    pub fn observe(
        &mut self,
        path: &Path,
        size: u64,
        modified: SystemTime,
        now: Instant,
        wall_now: SystemTime,
    ) {
        if size != 0 {
            return;
        }
        match self.files.get_mut(path) {
            Some(How::Settling { since, typing }) => {
                // Empty for a moment is a program between creating and writing; empty for
                // longer is a person about to type.
                if now >= *since + EMPTY_FOR {
                    *typing = true;
                }
            }
            Some(How::Atomic) => {}
            None => {
                let since = empty_since(modified, now, wall_now);
                let typing = now >= since + EMPTY_FOR;
                self.files
                    .insert(path.to_path_buf(), How::Settling { since, typing });
            }
        }
    }

    /// Whether the note at `path` is complete at `now`, as far as the events and listings
    /// taken in say (`observe`); if not, until when it waits.
    pub fn judge(
        &self,
        path: &Path,
        size: u64,
        modified: SystemTime,
        now: Instant,
        wall_now: SystemTime,
    ) -> Result<(), NotYet> {
        let how = match self.files.get(path) {
            Some(how) => *how,
            None if size == 0 => How::Settling {
                since: empty_since(modified, now, wall_now),
                typing: false,
            },
            None => {
                // No event seen (start-up, rescan): judge by the modification time.
                let age = wall_now.duration_since(modified).unwrap_or(Duration::ZERO);
                if age >= self.settle {
                    return Ok(());
                }
                return Err(NotYet {
                    until: Some(now + (self.settle - age)),
                    typing: false,
                });
            }
        };
        match how {
            How::Atomic => Ok(()),
            // An empty note waits for its first write.
            How::Settling { since, typing } if size == 0 => {
                if now >= since + EMPTY_FOR {
                    return Err(NotYet {
                        until: None,
                        typing: true,
                    });
                }
                Err(NotYet {
                    until: Some(since + EMPTY_FOR),
                    typing,
                })
            }
            How::Settling { since, typing } => {
                let due = since + if typing { self.typing } else { self.settle };
                if now >= due {
                    Ok(())
                } else {
                    Err(NotYet {
                        until: Some(due),
                        typing,
                    })
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
    const TYPING: Duration = Duration::from_secs(60);
    const BOTH: (Duration, Duration) = (SETTLE, TYPING);

    fn waits(until: Instant, typing: bool) -> Result<(), NotYet> {
        Err(NotYet {
            until: Some(until),
            typing,
        })
    }

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn old() -> SystemTime {
        SystemTime::now() - Duration::from_secs(3600)
    }

    #[test]
    fn moved_in_and_atomic_saves_are_ready_at_once() {
        let mut r = Readiness::new(BOTH);
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
    fn a_programs_in_place_write_settles_and_every_write_restarts_the_wait() {
        let mut r = Readiness::new(BOTH);
        let t0 = Instant::now();
        let f = p("/v/in/report.md");
        r.on_event(&FsEvent::Written(f.clone()), t0);
        // Empty for a moment (between create and write): not yet a person typing.
        assert_eq!(
            r.check(&f, 0, SystemTime::now(), t0, SystemTime::now()),
            waits(t0 + EMPTY_FOR, false)
        );
        let t1 = t0 + Duration::from_millis(1);
        r.on_event(&FsEvent::Written(f.clone()), t1);
        assert_eq!(
            r.check(
                &f,
                50,
                SystemTime::now(),
                t1 + Duration::from_secs(4),
                SystemTime::now()
            ),
            waits(t1 + SETTLE, false)
        );
        assert_eq!(
            r.check(&f, 50, SystemTime::now(), t1 + SETTLE, SystemTime::now()),
            Ok(())
        );
    }

    /// Obsidian makes `Untitled.md` empty, then the person types its first words and pauses:
    /// those words must not go out five seconds later. A note that was empty waits `TYPING`.
    #[test]
    fn a_note_typed_in_the_inbox_waits_for_the_person() {
        let mut r = Readiness::new(BOTH);
        let t0 = Instant::now();
        let f = p("/v/in/Untitled.md");
        r.on_event(&FsEvent::Written(f.clone()), t0);
        assert_eq!(
            r.check(&f, 0, SystemTime::now(), t0 + SETTLE * 2, SystemTime::now()),
            Err(NotYet {
                until: None,
                typing: true
            }),
            "empty for long: a person is about to type"
        );
        let t1 = t0 + Duration::from_secs(12);
        r.on_event(&FsEvent::Written(f.clone()), t1);
        assert_eq!(
            r.check(&f, 5, SystemTime::now(), t1 + SETTLE, SystemTime::now()),
            waits(t1 + TYPING, true),
            "the first words wait for the person, not for a program's settle"
        );
        let t2 = t1 + Duration::from_secs(30);
        r.on_event(&FsEvent::Written(f.clone()), t2);
        assert_eq!(
            r.check(&f, 80, SystemTime::now(), t2 + SETTLE, SystemTime::now()),
            waits(t2 + TYPING, true)
        );
        assert_eq!(
            r.check(&f, 80, SystemTime::now(), t2 + TYPING, SystemTime::now()),
            Ok(())
        );
        // Found empty by a rescan (no events): the same, judged by its modification time.
        let mut fresh = Readiness::new(BOTH);
        let g = p("/v/in/Untitled 1.md");
        assert_eq!(
            fresh.check(&g, 0, old(), t0, SystemTime::now()),
            Err(NotYet {
                until: None,
                typing: true
            })
        );
        fresh.on_event(&FsEvent::Written(g.clone()), t1);
        assert_eq!(
            fresh.check(&g, 3, SystemTime::now(), t1, SystemTime::now()),
            waits(t1 + TYPING, true)
        );
    }

    #[test]
    fn a_visible_rename_in_the_same_folder_waits_for_the_person() {
        let mut r = Readiness::new(BOTH);
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
            waits(t0 + TYPING, true),
            "renamed in the inbox while being typed: a person's note"
        );
        assert_eq!(
            r.check(&p("/v/in/Untitled.md"), 9, old(), t0, SystemTime::now()),
            Ok(()),
            "the old name is forgotten (judged by mtime)"
        );
    }

    #[test]
    fn temp_names_never_count_and_unknown_files_use_mtime() {
        let mut r = Readiness::new(BOTH);
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
            Err(NotYet {
                until: Some(_),
                typing: false
            })
        ));
    }

    #[test]
    fn zero_settle_is_immediate_for_written_notes() {
        let mut r = Readiness::new((Duration::ZERO, Duration::ZERO));
        let now = Instant::now();
        r.on_event(&FsEvent::Written(p("/v/in/a.md")), now);
        assert_eq!(
            r.check(&p("/v/in/a.md"), 3, SystemTime::now(), now, SystemTime::now()),
            Ok(())
        );
    }
}
