//! The notify watcher: raw events in, `FsEvent`s out on a bounded channel.
//!
//! The callback only converts and `try_send`s; a full channel sets the overflow flag, which the
//! daemon treats like inotify's own overflow: rescan everything.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::ready::FsEvent;

pub const CHANNEL_CAPACITY: usize = 8192;

pub struct FsWatcher {
    watcher: RecommendedWatcher,
    watched: Vec<PathBuf>,
}

/// Converts one notify event.
pub fn convert(event: &notify::Event) -> Vec<FsEvent> {
    if event.need_rescan() {
        return vec![FsEvent::Rescan];
    }
    let paths = &event.paths;
    match &event.kind {
        EventKind::Create(_)
        | EventKind::Modify(ModifyKind::Data(_))
        | EventKind::Modify(ModifyKind::Any) => paths.iter().cloned().map(FsEvent::Written).collect(),
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
            paths.iter().cloned().map(FsEvent::Written).collect()
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) if paths.len() == 2 => {
            vec![FsEvent::RenamedTo {
                to: paths[1].clone(),
                from: Some(paths[0].clone()),
            }]
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => paths
            .iter()
            .cloned()
            .map(|to| FsEvent::RenamedTo { to, from: None })
            .collect(),
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_) => {
            paths.iter().cloned().map(FsEvent::Gone).collect()
        }
        EventKind::Modify(ModifyKind::Name(_)) => paths
            .iter()
            .cloned()
            .map(|to| FsEvent::RenamedTo { to, from: None })
            .collect(),
        // Opens, reads, metadata: never a change of content.
        _ => Vec::new(),
    }
}

impl FsWatcher {
    /// Starts a watcher sending to `tx`; a full channel raises `overflow`.
    pub fn start(tx: mpsc::Sender<FsEvent>, overflow: Arc<AtomicBool>) -> notify::Result<Self> {
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let events = match res {
                Ok(ev) => convert(&ev),
                Err(e) => {
                    tracing::warn!("file watcher error: {e}; rescanning");
                    vec![FsEvent::Rescan]
                }
            };
            for ev in events {
                if tx.try_send(ev).is_err() {
                    overflow.store(true, Ordering::Relaxed);
                }
            }
        })?;
        Ok(Self {
            watcher,
            watched: Vec::new(),
        })
    }

    /// Watches exactly `dirs` (non-recursively), adding and removing watches as needed.
    pub fn set(&mut self, dirs: &[PathBuf]) -> Vec<(PathBuf, notify::Error)> {
        let mut errors = Vec::new();
        let old: HashSet<PathBuf> = self.watched.drain(..).collect();
        let wanted: HashSet<&PathBuf> = dirs.iter().collect();
        for d in &old {
            if !wanted.contains(d) {
                let _ = self.watcher.unwatch(d);
            }
        }
        for d in dirs {
            if old.contains(d) {
                self.watched.push(d.clone());
                continue;
            }
            match self.watcher.watch(d, RecursiveMode::NonRecursive) {
                Ok(()) => self.watched.push(d.clone()),
                Err(e) => errors.push((d.clone(), e)),
            }
        }
        errors
    }
}

/// Explains a watch error, with the fix for the inotify limits.
pub fn explain(dir: &Path, e: &notify::Error) -> String {
    let text = e.to_string();
    if text.contains("No space left") || text.contains("os error 28") || text.contains("MaxFilesWatch") {
        format!(
            "cannot watch {}: the inotify watch limit is reached ({text}); raise it with \
             `sudo sysctl fs.inotify.max_user_watches=524288` (see docs/operations.md); polling meanwhile",
            dir.display()
        )
    } else {
        format!("cannot watch {} ({text}); polling it instead", dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, Flag, RemoveKind};

    fn ev(kind: EventKind, paths: &[&str]) -> notify::Event {
        let mut e = notify::Event::new(kind);
        for p in paths {
            e = e.add_path(PathBuf::from(p));
        }
        e
    }

    #[test]
    fn converts_each_kind() {
        assert_eq!(
            convert(&ev(EventKind::Create(CreateKind::File), &["/a.md"])),
            [FsEvent::Written("/a.md".into())]
        );
        assert_eq!(
            convert(&ev(
                EventKind::Modify(ModifyKind::Data(DataChange::Content)),
                &["/a.md"]
            )),
            [FsEvent::Written("/a.md".into())]
        );
        assert_eq!(
            convert(&ev(
                EventKind::Access(AccessKind::Close(AccessMode::Write)),
                &["/a.md"]
            )),
            [FsEvent::Written("/a.md".into())]
        );
        assert!(
            convert(&ev(
                EventKind::Access(AccessKind::Open(AccessMode::Read)),
                &["/a.md"]
            ))
            .is_empty(),
            "opens are ignored"
        );
        assert!(convert(&ev(
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            &["/a.md"]
        ))
        .is_empty());
        assert_eq!(
            convert(&ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
                &["/.a.tmp", "/a.md"]
            )),
            [FsEvent::RenamedTo {
                to: "/a.md".into(),
                from: Some("/.a.tmp".into())
            }]
        );
        assert_eq!(
            convert(&ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                &["/a.md"]
            )),
            [FsEvent::RenamedTo {
                to: "/a.md".into(),
                from: None
            }]
        );
        assert_eq!(
            convert(&ev(
                EventKind::Modify(ModifyKind::Name(RenameMode::From)),
                &["/a.md"]
            )),
            [FsEvent::Gone("/a.md".into())]
        );
        assert_eq!(
            convert(&ev(EventKind::Remove(RemoveKind::File), &["/a.md"])),
            [FsEvent::Gone("/a.md".into())]
        );
        assert_eq!(
            convert(&ev(EventKind::Other, &[]).set_flag(Flag::Rescan)),
            [FsEvent::Rescan],
            "overflow means rescan"
        );
    }
}
