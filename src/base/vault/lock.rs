//! Advisory file locks (`flock`): one process per role run, one daemon per vault, one writer
//! of state and logs at a time. A lock belongs to an open file and ends when it is closed —
//! including when the process dies, so a crash never leaves a stale lock behind.

use std::io::{Read, Seek, Write};

use cap_std::fs::File;
use rustix::fs::FlockOperation;

/// Locks `file` exclusively; with `wait` false, fails with `WouldBlock` when held.
pub(super) fn flock(file: &File, wait: bool) -> std::io::Result<()> {
    let op = if wait {
        FlockOperation::LockExclusive
    } else {
        FlockOperation::NonBlockingLockExclusive
    };
    rustix::fs::flock(file, op).map_err(std::io::Error::from)
}

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Takes the lock on `file`; `None` when `wait` is false and someone else holds it.
    pub(super) fn take(file: File, wait: bool) -> std::io::Result<Option<Self>> {
        match flock(&file, wait) {
            Ok(()) => Ok(Some(Self { file })),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces the lock file's content (e.g. the holder's pid).
    pub fn set_content(&mut self, text: &str) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }

    /// The lock file's content.
    pub fn content(&mut self) -> std::io::Result<String> {
        let mut s = String::new();
        self.file.rewind()?;
        self.file.read_to_string(&mut s)?;
        Ok(s)
    }
}
