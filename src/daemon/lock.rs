//! The single-instance lock `.tabd/lock`: an exclusive `flock` held for the daemon's life,
//! with the holder's pid written inside so others can name it.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub struct InstanceLock {
    // Leaked on purpose: the lock lives exactly as long as the process.
    _guard: fd_lock::RwLockWriteGuard<'static, std::fs::File>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another tabd (pid {0}) is already running on this vault; stop it first (`systemctl --user stop tabd`)")]
    Held(String),
    #[error("cannot create the lock file {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

pub fn lock_path(vault: &Path) -> PathBuf {
    vault.join(".tabd").join("lock")
}

/// Takes the lock or says who holds it.
pub fn acquire(vault: &Path) -> Result<InstanceLock, LockError> {
    let path = lock_path(vault);
    let io = |e| LockError::Io(path.clone(), e);
    std::fs::create_dir_all(path.parent().unwrap_or(vault)).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    let lock: &'static mut fd_lock::RwLock<std::fs::File> = Box::leak(Box::new(fd_lock::RwLock::new(file)));
    match lock.try_write() {
        Ok(mut guard) => {
            guard.set_len(0).map_err(io)?;
            guard.rewind().map_err(io)?;
            write!(guard, "{}", std::process::id()).map_err(io)?;
            guard.flush().map_err(io)?;
            Ok(InstanceLock { _guard: guard })
        }
        Err(_) => Err(LockError::Held(holder(vault).unwrap_or_else(|| "unknown".into()))),
    }
}

/// The pid of the running daemon, if one holds the lock.
pub fn holder(vault: &Path) -> Option<String> {
    let path = lock_path(vault);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .ok()?;
    let mut lock = fd_lock::RwLock::new(file.try_clone().ok()?);
    if lock.try_write().is_ok() {
        return None; // nobody holds it
    }
    let mut pid = String::new();
    file.read_to_string(&mut pid).ok()?;
    Some(pid.trim().to_string()).filter(|p| !p.is_empty())
}
