//! The single-instance lock `.tabd/lock`: an exclusive `flock` held for the daemon's life,
//! with the holder's pid written inside so others can name it.

use crate::base::vault::{FileLock, Vault, VaultError, VaultPath};

pub struct InstanceLock {
    _lock: FileLock,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another tabd (pid {0}) is already running on this vault; stop it first (`systemctl --user stop tabd`)")]
    Held(String),
    #[error("cannot create the lock file .tabd/lock: {0}")]
    Io(VaultError),
}

fn lock_path() -> VaultPath {
    VaultPath::parse(crate::base::vault::layout::DAEMON_LOCK, false).unwrap_or_else(|_| VaultPath::root())
}

/// Takes the lock or says who holds it.
pub fn acquire(vault: &Vault) -> Result<InstanceLock, LockError> {
    match vault.lock(&lock_path(), false).map_err(LockError::Io)? {
        Some(mut lock) => {
            lock.set_content(&std::process::id().to_string())
                .map_err(|e| LockError::Io(VaultError::Io(e.to_string())))?;
            Ok(InstanceLock { _lock: lock })
        }
        None => Err(LockError::Held(holder(vault).unwrap_or_else(|| "unknown".into()))),
    }
}

/// The pid of the running daemon, if one holds the lock.
pub fn holder(vault: &Vault) -> Option<String> {
    if !vault.exists(&lock_path()) {
        return None;
    }
    if let Ok(Some(_free)) = vault.lock(&lock_path(), false) {
        return None; // nobody holds it (and our probe lock ends here)
    }
    let pid = vault.read_text(&lock_path(), 64).ok()?;
    Some(pid.trim().to_string()).filter(|p| !p.is_empty())
}
