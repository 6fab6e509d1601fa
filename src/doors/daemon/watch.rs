//! The inotify watcher: raw events in, `FsEvent`s out on a bounded channel.
//!
//! tabd watches a known list of folders (each inbox, `roles/`, `agent/inbox/`, the config's
//! folder, the folders of `watch` files), never a tree, so it talks to inotify itself: a watch is
//! one system call made here (1,000 inboxes: ~3 ms), where notify sent each to its thread and
//! waited for the answer (~65 µs each, two thirds of start-up with 1,000 roles).
//! A reader thread converts and `try_send`s; a full channel sets the overflow flag, which the
//! daemon treats like inotify's own overflow: rescan everything.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask, Watches};
use tokio::sync::mpsc;

use super::ready::FsEvent;

pub const CHANNEL_CAPACITY: usize = 8192;

/// What a watch asks for: content written, names coming and going, and the folder itself going.
/// (Not opens, reads or attributes: never a change of content.)
const MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF);

/// Which folder each watch is on, shared with the reader thread (it names each event's path).
type Folders = Arc<Mutex<HashMap<WatchDescriptor, PathBuf>>>;

fn lock(folders: &Folders) -> MutexGuard<'_, HashMap<WatchDescriptor, PathBuf>> {
    // The map stays consistent whatever panicked while it was held: each change is one call.
    folders.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub struct FsWatcher {
    watches: Watches,
    folders: Folders,
    /// Each watched folder with its watch and the identity it had when the watch was set: a
    /// folder deleted and made again (sync tools do this) is a new folder and needs a new watch.
    watched: HashMap<PathBuf, (Identity, WatchDescriptor)>,
    /// Watched folders seen going away (their watch is dead even if one with the same name is back).
    lost: HashSet<PathBuf>,
    /// Dropping it stops the reader thread (which closes the inotify descriptor: every watch goes).
    _stop: tokio::sync::oneshot::Sender<()>,
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

/// The source of the last rename out of a watched folder, kept until its other half arrives:
/// inotify reports a rename as `MOVED_FROM` and `MOVED_TO` with one cookie.
#[derive(Debug, Default)]
pub struct Renames {
    from: Option<(u32, PathBuf)>,
}

/// Converts one inotify event on the folder `dir` (`None`: a watch tabd no longer knows).
pub fn convert(
    renames: &mut Renames,
    mask: EventMask,
    cookie: u32,
    dir: Option<&Path>,
    name: Option<&OsStr>,
) -> Vec<FsEvent> {
    if mask.contains(EventMask::Q_OVERFLOW) {
        return vec![FsEvent::Rescan];
    }
    let Some(dir) = dir else {
        return Vec::new();
    };
    let path = match name {
        Some(n) if !n.is_empty() => dir.join(n),
        _ => dir.to_path_buf(),
    };
    if mask.contains(EventMask::MOVED_FROM) {
        renames.from = Some((cookie, path.clone()));
        return vec![FsEvent::Gone(path)];
    }
    if mask.contains(EventMask::MOVED_TO) {
        let from = match renames.from.take() {
            Some((c, from)) if c == cookie => Some(from),
            _ => None,
        };
        return vec![FsEvent::RenamedTo { to: path, from }];
    }
    if mask.intersects(EventMask::CREATE | EventMask::MODIFY | EventMask::CLOSE_WRITE) {
        return vec![FsEvent::Written(path)];
    }
    if mask.intersects(EventMask::DELETE | EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::UNMOUNT)
    {
        return vec![FsEvent::Gone(path)];
    }
    // IGNORED (a watch ended) and anything else: nothing to tell.
    Vec::new()
}

/// Reads events until the watcher is dropped.
async fn read(
    mut stream: EventStream<Vec<u8>>,
    folders: Folders,
    tx: mpsc::Sender<FsEvent>,
    overflow: Arc<AtomicBool>,
) {
    let mut renames = Renames::default();
    while let Some(item) = stream.next().await {
        let events = match item {
            Ok(ev) => {
                let dir = if ev.mask.contains(EventMask::IGNORED) {
                    lock(&folders).remove(&ev.wd)
                } else {
                    lock(&folders).get(&ev.wd).cloned()
                };
                convert(
                    &mut renames,
                    ev.mask,
                    ev.cookie,
                    dir.as_deref(),
                    ev.name.as_deref(),
                )
            }
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
    }
    tracing::warn!("the file watcher stopped; rescanning");
    if tx.try_send(FsEvent::Rescan).is_err() {
        overflow.store(true, Ordering::Relaxed);
    }
}

impl FsWatcher {
    /// Starts a watcher sending to `tx`; a full channel raises `overflow`.
    ///
    /// Events are read on a thread of their own with its own small reactor (as notify did): an
    /// event reaches the daemon's channel at once, never queued behind work on the daemon's runtime.
    pub fn start(tx: mpsc::Sender<FsEvent>, overflow: Arc<AtomicBool>) -> io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        // 16 KiB: a few hundred events per read (each is 16 bytes and the name).
        let stream = {
            let _reactor = rt.enter();
            Inotify::init()?.into_event_stream(vec![0u8; 16 * 1024])?
        };
        let watches = stream.watches();
        let folders = Folders::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let reader_folders = folders.clone();
        std::thread::Builder::new()
            .name("tabd-watch".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = read(stream, reader_folders, tx, overflow) => {}
                        _ = stopped => {}
                    }
                })
            })?;
        Ok(Self {
            watches,
            folders,
            watched: HashMap::new(),
            lost: HashSet::new(),
            _stop: stop,
        })
    }

    /// Watches exactly `dirs` (non-recursively), adding and removing watches as needed.
    ///
    /// A folder replaced since its watch was set (deleted and made again: sync tools do this), or
    /// seen going, is watched anew, and `Rebuilt` says so: the caller rescans, since events may
    /// have been missed meanwhile.
    pub fn set(&mut self, dirs: &[PathBuf]) -> (Vec<(PathBuf, io::Error)>, Rebuilt) {
        let wanted: HashSet<&PathBuf> = dirs.iter().collect();
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|d| !wanted.contains(d))
            .cloned()
            .collect();
        for d in gone {
            if let Some((_, wd)) = self.watched.remove(&d) {
                self.unwatch(wd);
            }
        }
        let mut errors = Vec::new();
        let mut rebuilt = false;
        for d in dirs {
            if let Some((id, _)) = self.watched.get(d) {
                if !self.lost.contains(d) && identity(d).as_ref() == Some(id) {
                    continue;
                }
                rebuilt = true;
            }
            // Held while adding: the reader must know the folder before its first event.
            let mut folders = lock(&self.folders);
            match self.watches.add(d, MASK) {
                Ok(wd) => {
                    folders.insert(wd.clone(), d.clone());
                    drop(folders);
                    if let Some(id) = identity(d) {
                        self.watched.insert(d.clone(), (id, wd));
                    }
                }
                Err(e) => errors.push((d.clone(), e)),
            }
        }
        self.lost.clear();
        (errors, Rebuilt(rebuilt))
    }

    /// Removes a watch no wanted folder shares (one folder can be wanted under two names).
    fn unwatch(&mut self, wd: WatchDescriptor) {
        if self.watched.values().any(|(_, w)| *w == wd) {
            return;
        }
        lock(&self.folders).remove(&wd);
        // Fails when the folder is already gone (inotify ended the watch itself): nothing to do.
        #[allow(
            clippy::let_underscore_must_use,
            reason = "fails only when the folder is gone already (inotify ended the watch itself)"
        )]
        let _ = self.watches.remove(wd);
    }

    /// A watched folder went away (an event said so): its watch is dead.
    pub fn lost(&mut self, dir: &Path) {
        if self.watched.contains_key(dir) {
            self.lost.insert(dir.to_path_buf());
        }
    }
}

/// Some watches were set anew (events may have been missed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt(pub bool);

/// Starts watching, or says why tabd polls instead: `TABD_WATCH=poll` (for vaults on network
/// filesystems, where inotify sees no remote changes) or a watcher that cannot start.
pub fn start(
    env: &crate::base::environment::Env,
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
pub fn explain(dir: &Path, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => format!(
            "cannot watch {}: the inotify watch limit is reached ({e}); raise it with \
             `sudo sysctl fs.inotify.max_user_watches=524288` (see docs/operations.md); polling meanwhile",
            dir.display()
        ),
        Some(libc::EMFILE) => format!(
            "cannot watch {}: the inotify instance limit is reached ({e}); raise it with \
             `sudo sysctl fs.inotify.max_user_instances=1024` (see docs/operations.md); polling meanwhile",
            dir.display()
        ),
        _ => format!("cannot watch {} ({e}); polling it instead", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next_written(rx: &mut mpsc::Receiver<FsEvent>, name: &str) -> bool {
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                match rx.recv().await {
                    Some(FsEvent::Written(p)) if p.ends_with(name) => return true,
                    Some(_) => continue,
                    None => return false,
                }
            }
        })
        .await;
        got == Ok(true)
    }

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
        assert!(
            next_written(&mut rx, "note.md").await,
            "an event from the new folder"
        );
    }

    #[tokio::test]
    async fn real_events_arrive_converted_and_an_unwatched_folder_goes_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        let mut w = FsWatcher::start(tx, Arc::new(AtomicBool::new(false))).unwrap();
        let (errors, rebuilt) = w.set(&[a.clone(), b.clone()]);
        assert!(errors.is_empty() && !rebuilt.0, "{errors:?}");
        // A rename between two watched folders carries its source.
        std::fs::write(a.join(".n.tmp"), "x").unwrap();
        assert!(next_written(&mut rx, ".n.tmp").await);
        std::fs::rename(a.join(".n.tmp"), b.join("n.md")).unwrap();
        let mut seen = Vec::new();
        while !seen.iter().any(|e| matches!(e, FsEvent::RenamedTo { .. })) {
            match rx.recv().await.unwrap() {
                FsEvent::Written(_) => {} // the write's own create, modify and close
                ev => seen.push(ev),
            }
        }
        assert_eq!(
            seen,
            [
                FsEvent::Gone(a.join(".n.tmp")),
                FsEvent::RenamedTo {
                    to: b.join("n.md"),
                    from: Some(a.join(".n.tmp"))
                }
            ]
        );
        // `a` no longer wanted: its events stop; `b` still speaks.
        assert!(w.set(std::slice::from_ref(&b)).0.is_empty());
        std::fs::write(a.join("quiet.md"), "x").unwrap();
        std::fs::write(b.join("loud.md"), "x").unwrap();
        let mut names = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while let Some(ev) = rx.recv().await {
                if let FsEvent::Written(p) = &ev {
                    names.push(p.clone());
                    if p.ends_with("loud.md") {
                        break;
                    }
                }
            }
        })
        .await
        .unwrap();
        assert!(!names.iter().any(|p| p.ends_with("quiet.md")), "{names:?}");
        // The folder itself going is reported with its own path.
        std::fs::remove_dir_all(&b).unwrap();
        let gone = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                if let Some(FsEvent::Gone(p)) = rx.recv().await {
                    if p == b {
                        return true;
                    }
                }
            }
        })
        .await;
        assert_eq!(gone, Ok(true));
        // Dropping the watcher stops its thread: the sender it held goes with it.
        drop(w);
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while rx.recv().await.is_some() {}
        })
        .await;
        assert!(closed.is_ok(), "the reader thread ended");
    }

    #[test]
    fn converts_each_kind() {
        let mut r = Renames::default();
        let dir = Some(Path::new("/v"));
        let n = |s: &'static str| Some(OsStr::new(s));
        let mut c = |mask, cookie, name| convert(&mut r, mask, cookie, dir, name);
        let w = |s: &str| vec![FsEvent::Written(PathBuf::from(s))];
        assert_eq!(c(EventMask::CREATE, 0, n("a.md")), w("/v/a.md"));
        assert_eq!(c(EventMask::MODIFY, 0, n("a.md")), w("/v/a.md"));
        assert_eq!(c(EventMask::CLOSE_WRITE, 0, n("a.md")), w("/v/a.md"));
        assert_eq!(
            c(EventMask::DELETE, 0, n("a.md")),
            [FsEvent::Gone("/v/a.md".into())]
        );
        assert_eq!(
            c(EventMask::DELETE_SELF, 0, None),
            [FsEvent::Gone("/v".into())],
            "the folder itself"
        );
        assert!(c(EventMask::IGNORED, 0, None).is_empty());
        // A rename: its source goes, then the target comes with the source when the cookies match.
        assert_eq!(
            c(EventMask::MOVED_FROM, 7, n(".a.tmp")),
            [FsEvent::Gone("/v/.a.tmp".into())]
        );
        assert_eq!(
            c(EventMask::MOVED_TO, 7, n("a.md")),
            [FsEvent::RenamedTo {
                to: "/v/a.md".into(),
                from: Some("/v/.a.tmp".into())
            }]
        );
        // A move from an unwatched folder, and a cookie that does not match.
        assert_eq!(
            c(EventMask::MOVED_TO, 8, n("b.md")),
            [FsEvent::RenamedTo {
                to: "/v/b.md".into(),
                from: None
            }]
        );
        c(EventMask::MOVED_FROM, 9, n("x.md"));
        assert_eq!(
            c(EventMask::MOVED_TO, 10, n("y.md")),
            [FsEvent::RenamedTo {
                to: "/v/y.md".into(),
                from: None
            }]
        );
        assert_eq!(
            convert(&mut r, EventMask::Q_OVERFLOW, 0, None, None),
            [FsEvent::Rescan],
            "overflow means rescan"
        );
        assert!(
            convert(&mut r, EventMask::CREATE, 0, None, n("a.md")).is_empty(),
            "a watch tabd no longer knows"
        );
    }

    #[test]
    fn explains_the_limits() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(explain(Path::new("/v/in"), &full).contains("max_user_watches"));
        let many = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(explain(Path::new("/v/in"), &many).contains("max_user_instances"));
        let other = io::Error::from_raw_os_error(libc::EACCES);
        assert!(explain(Path::new("/v/in"), &other).contains("polling it instead"));
    }
}
