//! Advisory file locks (`flock`): one process per role run, one daemon per vault, one writer
//! of state and logs at a time. A lock belongs to an open file and ends when it is closed —
//! including when the process dies, so a crash never leaves a stale lock behind. But not when it
//! is stopped: a `tabd fire` suspended with Ctrl-Z, or a device paused on a folder it shares,
//! holds its lock until it goes on, so a wait for a lock is bounded (`LOCK_WAIT`).

use std::io::{ErrorKind, Read, Seek, Write};
use std::time::Duration;

use backon::{BlockingRetryable, ExponentialBuilder};
use cap_std::fs::File;
use rustix::fs::FlockOperation;

/// The longest a write waits for a lock another process holds. Each holder keeps one for a
/// write or two (milliseconds); one held longer belongs to a stopped process that may never let
/// go, and a daemon that waited with it would hang every run that logs.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Locks `file` exclusively; with `wait` false, fails with `WouldBlock` when held. With `wait`,
/// tries again (backon's waits, growing from 1 ms to 100 ms) for up to `LOCK_WAIT`, then fails
/// with `WouldBlock` too.
pub(super) fn flock(file: &File, wait: bool) -> std::io::Result<()> {
    let once =
        || rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive).map_err(std::io::Error::from);
    if !wait {
        return once();
    }
    let waits = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(1))
        .with_max_delay(Duration::from_millis(100))
        .with_total_delay(Some(LOCK_WAIT))
        .without_max_times();
    once.retry(waits)
        .sleep(std::thread::sleep)
        .when(|e| e.kind() == ErrorKind::WouldBlock)
        .call()
}

/// The error of a lock still held after `LOCK_WAIT`, or of another failure to take it.
pub(super) fn lock_error(path: &super::VaultPath, e: &std::io::Error) -> super::VaultError {
    if e.kind() == ErrorKind::WouldBlock {
        return super::VaultError::Held {
            path: path.to_string(),
            secs: LOCK_WAIT.as_secs(),
        };
    }
    super::io_error(path, e)
}

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Takes the lock on `file`; `None` when `wait` is false and someone else holds it (with
    /// `wait`, a holder that keeps it past `LOCK_WAIT` is an error).
    pub(super) fn take(file: File, wait: bool) -> std::io::Result<Option<Self>> {
        match flock(&file, wait) {
            Ok(()) => Ok(Some(Self { file })),
            Err(e) if e.kind() == ErrorKind::WouldBlock && !wait => Ok(None),
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
