//! The notify watcher: raw events in, `FsEvent`s out on a bounded channel.
//!
//! The callback only converts and `try_send`s; a full channel sets the overflow flag, which the
//! daemon treats like inotify's own overflow: rescan everything.

use std::collections::{HashMap, HashSet};
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
    /// Each watched folder with the identity it had when the watch was set: a folder deleted
    /// and made again (sync tools do this) is a new folder and needs a new watch.
    watched: HashMap<PathBuf, Identity>,
    /// Watched folders seen going away (their watch is dead even if one with the same name is back).
    lost: HashSet<PathBuf>,
    tx: mpsc::Sender<FsEvent>,
    overflow: Arc<AtomicBool>,
}

/// Device, inode and birth time: filesystems reuse a freed inode number at once, so the birth
/// time (where the filesystem records it) is what tells a re-made folder from the old one.
type Identity = (u64, u64, Option<std::time::SystemTime>);

/// A folder's identity, if it exists.
fn identity(dir: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.created().ok()))
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
        Ok(Self {
            watcher: Self::make(tx.clone(), overflow.clone())?,
            watched: HashMap::new(),
            lost: HashSet::new(),
            tx,
            overflow,
        })
    }

    fn make(tx: mpsc::Sender<FsEvent>, overflow: Arc<AtomicBool>) -> notify::Result<RecommendedWatcher> {
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
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
        })
    }

    /// Watches exactly `dirs` (non-recursively), adding and removing watches as needed.
    ///
    /// A folder replaced since its watch was set (deleted and made again: sync tools do this)
    /// needs a new watch, and notify drops a watch *by path* when it sees the old folder go, which
    /// can race with the new watch. So then the watcher is made anew with every folder, and
    /// `Rebuilt` says so (the caller rescans: events may have been missed meanwhile).
    pub fn set(&mut self, dirs: &[PathBuf]) -> (Vec<(PathBuf, notify::Error)>, Rebuilt) {
        let wanted: HashSet<&PathBuf> = dirs.iter().collect();
        let replaced = dirs.iter().any(|d| {
            self.lost.contains(d)
                || self
                    .watched
                    .get(d)
                    .is_some_and(|id| identity(d).as_ref() != Some(id))
        });
        self.lost.clear();
        let rebuilt = if replaced {
            match Self::make(self.tx.clone(), self.overflow.clone()) {
                Ok(w) => {
                    // Dropping the old watcher first would be the same: its events stop here.
                    self.watcher = w;
                    self.watched.clear();
                    Rebuilt(true)
                }
                Err(e) => return (vec![(PathBuf::from("(watcher)"), e)], Rebuilt(false)),
            }
        } else {
            Rebuilt(false)
        };
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|d| !wanted.contains(d))
            .cloned()
            .collect();
        for d in gone {
            self.watched.remove(&d);
            let _ = self.watcher.unwatch(&d);
        }
        let mut errors = Vec::new();
        for d in dirs {
            if self.watched.contains_key(d) {
                continue;
            }
            match (self.watcher.watch(d, RecursiveMode::NonRecursive), identity(d)) {
                (Ok(()), Some(id)) => {
                    self.watched.insert(d.clone(), id);
                }
                (Ok(()), None) => {}
                (Err(e), _) => errors.push((d.clone(), e)),
            }
        }
        (errors, rebuilt)
    }
}

impl FsWatcher {
    /// A watched folder went away (an event said so): its watch is dead.
    pub fn lost(&mut self, dir: &Path) {
        if self.watched.contains_key(dir) {
            self.lost.insert(dir.to_path_buf());
        }
    }
}

/// The watcher was made anew (events may have been missed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt(pub bool);

/// Starts watching, or says why tabd polls instead: `TABD_WATCH=poll` (for vaults on network
/// filesystems, where inotify sees no remote changes) or a watcher that cannot start.
pub fn start(
    env: &crate::environment::Env,
    root: &Path,
    tx: mpsc::Sender<FsEvent>,
    overflow: Arc<AtomicBool>,
    poll: std::time::Duration,
) -> (Option<FsWatcher>, bool) {
    if env
        .get("TABD_WATCH")
        .is_some_and(|v| v.eq_ignore_ascii_case("poll"))
    {
        tracing::info!(
            "TABD_WATCH=poll: scanning inboxes every {}s instead of watching",
            poll.as_secs()
        );
        return (None, true);
    }
    match FsWatcher::start(tx, overflow) {
        Ok(w) => (Some(w), false),
        Err(e) => {
            tracing::warn!("{}", explain(root, &e));
            (None, true)
        }
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

    #[tokio::test]
    async fn a_folder_deleted_and_made_again_is_watched_again() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = dir.path().join("inbox");
        std::fs::create_dir(&inbox).unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        let mut w = FsWatcher::start(tx, Arc::new(AtomicBool::new(false))).unwrap();
        assert!(w.set(std::slice::from_ref(&inbox)).0.is_empty());
        std::fs::remove_dir(&inbox).unwrap();
        std::fs::create_dir(&inbox).unwrap();
        let (errors, rebuilt) = w.set(std::slice::from_ref(&inbox));
        assert!(errors.is_empty() && rebuilt.0, "watched anew: {errors:?}");
        while rx.try_recv().is_ok() {}
        std::fs::write(inbox.join("note.md"), "x").unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                match rx.recv().await {
                    Some(FsEvent::Written(p)) if p.ends_with("note.md") => return true,
                    Some(_) => continue,
                    None => return false,
                }
            }
        })
        .await;
        assert_eq!(got, Ok(true), "an event from the new folder");
    }

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
