//! The folders tabd keeps for a child outside the vault: its state folder (its `HOME`) and the
//! private temp folder inside it. A child can write in them, so it can plant a symbolic link
//! there (`tmp -> ../../..`) hoping that its next start grants whatever the link points to. So
//! every start checks them anew: each level opened without following a link (`openat2` with
//! `RESOLVE_NO_SYMLINKS`, else `O_NOFOLLOW` level by level), a real folder owned by tabd's user,
//! and a link found where `tmp` should be is removed (never followed) and the folder made again.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// A child's folders, checked.
#[derive(Debug, Clone)]
pub struct ChildDirs {
    /// Its state folder (its `HOME` unless its config sets one).
    pub state: PathBuf,
    /// Its temp folder (`TMPDIR`), inside the state folder.
    pub tmp: PathBuf,
    /// What was found wrong and mended (a link planted where a folder was), for the log.
    pub mended: Option<String>,
}

/// Why a child's folders could not be made safe.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a folder tabd made ({why}); remove it and tabd makes it again")]
    NotOurs { path: PathBuf, why: &'static str },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> FolderError + '_ {
    move |source| FolderError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Makes `root` (and its parents) if needed, private to tabd's user, and returns its canonical
/// path: the start of every checked path below. A root another user owns, or one others may
/// write in, is refused (they could swap the folders below it).
pub fn make_root(root: &Path) -> Result<PathBuf, FolderError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(io_at(root))?;
    let real = std::fs::canonicalize(root).map_err(io_at(root))?;
    let meta = std::fs::metadata(&real).map_err(io_at(&real))?;
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(FolderError::NotOurs {
            path: real,
            why: "another user owns it",
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(FolderError::NotOurs {
            path: real,
            why: "others may write in it",
        });
    }
    Ok(real)
}

/// Opens the canonical folder `path` without following a symbolic link at any level.
pub fn open_no_links(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    ) {
        Err(rustix::io::Errno::NOSYS) => open_level_by_level(path, flags),
        other => other.map_err(io::Error::from),
    }
}

/// Before openat2 (Linux 5.6): one component at a time, each with `O_NOFOLLOW`.
fn open_level_by_level(path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    let mut fd = rustix::fs::open("/", flags, Mode::empty())?;
    for part in path.iter().skip(1) {
        fd = rustix::fs::openat(&fd, part, flags | OFlags::NOFOLLOW, Mode::empty())?;
    }
    Ok(fd)
}

/// The checked folders of child `name` under the canonical `root` (from `make_root`).
pub fn child_dirs(root: &Path, name: &str) -> Result<ChildDirs, FolderError> {
    let root_fd = open_no_links(root).map_err(io_at(root))?;
    let state = root.join(name);
    let mut mended = None;
    let state_fd = own_folder(&root_fd, &state, name, &mut mended)?;
    let tmp = state.join("tmp");
    own_folder(&state_fd, &tmp, "tmp", &mut mended)?;
    Ok(ChildDirs { state, tmp, mended })
}

/// Folder `name` inside the checked folder `parent` (a child's state folder), made or mended the
/// same way: for tabd's own writes there (a CLI's config folder, its login files).
pub fn subfolder(parent: &Path, name: &str) -> Result<(PathBuf, OwnedFd), FolderError> {
    let parent_fd = open_no_links(parent).map_err(io_at(parent))?;
    let path = parent.join(name);
    let mut mended = None;
    let fd = own_folder(&parent_fd, &path, name, &mut mended)?;
    if let Some(m) = mended {
        tracing::warn!("{m}");
    }
    Ok((path, fd))
}

/// Writes `bytes` as file `name` of the folder `dir` (0600), replacing what is there — a link
/// included, never followed: written beside it, then renamed over it.
pub fn replace_file(dir: &OwnedFd, name: &str, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let temp = format!(".{name}.tabd-new");
    // A copy an earlier write left; usually there is none. One that cannot be removed makes the
    // exclusive create below fail, and that is reported.
    #[expect(clippy::let_underscore_must_use)]
    let _ = rustix::fs::unlinkat(dir, temp.as_str(), rustix::fs::AtFlags::empty());
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    std::fs::File::from(fd).write_all(bytes)?;
    rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
    Ok(())
}

/// Opens folder `name` in `parent` (making it if missing) without following a link; a link or
/// file found there is removed and the folder made again; a folder of another user is refused.
fn own_folder(
    parent: &OwnedFd,
    path: &Path,
    name: &str,
    mended: &mut Option<String>,
) -> Result<OwnedFd, FolderError> {
    let open = || {
        rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let fd = match open() {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            make(parent, path, name)?;
            open().map_err(|e| io_at(path)(e.into()))?
        }
        // ELOOP: a link (O_NOFOLLOW); ENOTDIR: a file or a link to one.
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            let what = match rustix::fs::readlinkat(parent, name, Vec::new()) {
                Ok(target) => format!("a link to {}", target.to_string_lossy()),
                Err(_) => "a file".to_string(),
            };
            rustix::fs::unlinkat(parent, name, rustix::fs::AtFlags::empty())
                .map_err(|e| io_at(path)(e.into()))?;
            *mended = Some(format!(
                "{} had been replaced by {what}; tabd removed it (never followed it) and made the folder again",
                path.display()
            ));
            make(parent, path, name)?;
            open().map_err(|e| io_at(path)(e.into()))?
        }
        Err(e) => return Err(io_at(path)(e.into())),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| io_at(path)(e.into()))?;
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(FolderError::NotOurs {
            path: path.to_path_buf(),
            why: "another user owns it",
        });
    }
    Ok(fd)
}

fn make(parent: &impl AsFd, path: &Path, name: &str) -> Result<(), FolderError> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(io_at(path)(e.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_removed_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = make_root(&dir.path().join("state/children/v-1")).unwrap();
        let first = child_dirs(&root, "memory").unwrap();
        assert!(first.tmp.is_dir() && first.mended.is_none());
        // The child swaps its tmp folder for a link to somewhere it should never write.
        let target = dir.path().join("vault");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::remove_dir(&first.tmp).unwrap();
        std::os::unix::fs::symlink(&target, &first.tmp).unwrap();
        let again = child_dirs(&root, "memory").unwrap();
        let meta = std::fs::symlink_metadata(&again.tmp).unwrap();
        assert!(meta.is_dir(), "a real folder again, not the link");
        assert!(again.mended.unwrap().contains("a link to"), "said so");
        assert!(target.is_dir(), "the link's target was left alone");
        // A link at the level of the state folder itself is treated the same way.
        std::fs::remove_dir_all(&again.state).unwrap();
        std::os::unix::fs::symlink(&target, &again.state).unwrap();
        let third = child_dirs(&root, "memory").unwrap();
        assert!(std::fs::symlink_metadata(&third.state).unwrap().is_dir());
        assert!(!target.join("tmp").exists(), "nothing was made through the link");
    }

    #[test]
    fn a_root_others_may_write_in_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = make_root(&shared).unwrap_err().to_string();
        assert!(err.contains("others may write in it"), "{err}");
        assert!(make_root(&dir.path().join("own")).is_ok());
    }

    #[test]
    fn a_link_above_the_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = make_root(&dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let err = open_no_links(&dir.path().canonicalize().unwrap().join("link")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        assert!(open_no_links(&real).is_ok());
    }
}
