//! The keepers tabd has running, written down in `.tabd/groups/<tabd's pid>.json`, so that the
//! next tabd can stop those a killed tabd left behind (a keeper that missed its parent's death).
//!
//! The file is only a hint (issue 36, finding 7): a file in the vault can be forged, or come back
//! from a backup naming processes that are someone else's now. So it is signed with tabd's key
//! (`base::signing`, over the owner's pid and the list), and a process it names is signalled only
//! when the world says it is a keeper a dead tabd left: started when the file says, named
//! `tabd-keeper`, running tabd's executable (a keeper never execs), leading a session of its own,
//! and with no live tabd as its parent. The signal goes through a pidfd opened before those
//! checks, so it reaches the process that was checked or none; and it is the keeper's own
//! "stop" (`SIGUSR1`), so the keeper ends its tenant's group and everything below it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

use super::keeper;
use crate::base::signing::Key;
use crate::base::vault::{Durability, Vault, VaultPath};

/// Where live groups are written down, one file per tabd process.
const GROUPS_DIR: &str = crate::base::vault::layout::GROUPS;

/// What a groups file's MAC is for (see `base::signing`).
const PURPOSE: &str = "tabd process groups";

/// One child as the registry file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    /// Its keeper's pid.
    #[serde(alias = "pgid")]
    pid: i32,
    /// The keeper's start time (clock ticks since boot, /proc/PID/stat): tells our keeper from a
    /// later process that was given the same number.
    start: u64,
    name: String,
}

/// The live children of this tabd process, written down so a successor can stop them.
pub struct Registry {
    vault: Arc<Vault>,
    key: Arc<Key>,
    file: VaultPath,
    live: Mutex<BTreeMap<i32, Recorded>>,
}

impl Registry {
    pub fn new(vault: Arc<Vault>, key: Arc<Key>) -> Arc<Self> {
        let file = VaultPath::parse(&format!("{GROUPS_DIR}/{}.json", std::process::id()), false)
            .unwrap_or_else(|_| VaultPath::root());
        Arc::new(Self {
            vault,
            key,
            file,
            live: Mutex::new(BTreeMap::new()),
        })
    }

    pub(super) fn add(&self, pid: Pid, name: &str) {
        let pid = pid.as_raw_nonzero().get();
        let Some(start) = start_ticks(pid) else {
            return;
        };
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.insert(
            pid,
            Recorded {
                pid,
                start,
                name: name.to_string(),
            },
        );
        self.save(&live);
    }

    pub(super) fn remove(&self, pid: Pid) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.remove(&pid.as_raw_nonzero().get()).is_some() {
            self.save(&live);
        }
    }

    fn save(&self, live: &BTreeMap<i32, Recorded>) {
        let written = if live.is_empty() {
            self.vault.remove_file(&self.file).or(Ok(()))
        } else {
            let list: Vec<&Recorded> = live.values().collect();
            let text = serde_json::to_string(&list).unwrap_or_default();
            let owner = std::process::id().to_string();
            let sealed = self.key.seal(PURPOSE, &[owner.as_bytes()], text.as_bytes());
            self.vault
                .write_atomic_with(&self.file, &sealed, Durability::None)
        };
        if let Err(e) = written {
            tracing::debug!("cannot write {}: {e}", self.file);
        }
    }
}

/// What `reap_orphans` did.
#[derive(Debug, Default)]
pub struct Reaped {
    /// The keepers stopped, for the log: "name (process N)".
    pub stopped: Vec<String>,
    /// Groups files not trusted (not signed by this machine's key): why, for the log.
    pub refused: Vec<String>,
}

/// Stops the children that tabd processes which are no longer running left behind (a keeper that
/// missed its parent's death) — only those the world shows to be such keepers (see the module).
pub fn reap_orphans(vault: &Vault, key: &Key) -> Reaped {
    let mut reaped = Reaped::default();
    let Ok(dir) = VaultPath::parse(GROUPS_DIR, false) else {
        return reaped;
    };
    let Ok(listing) = vault.list(&dir) else {
        return reaped;
    };
    for entry in listing.entries.iter().filter(|e| e.is_file) {
        let Some(owner) = entry
            .path
            .file_name()
            .strip_suffix(".json")
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if owner == std::process::id() as i32 || is_tabd(owner) {
            continue; // a live tabd owns these
        }
        match read_groups(vault, key, &entry.path, owner) {
            Ok(groups) => {
                for g in groups {
                    match stop_keeper(&g) {
                        Ok(()) => reaped.stopped.push(format!("{} (process {})", g.name, g.pid)),
                        Err(why) => tracing::debug!("{}: process {} left alone: {why}", entry.path, g.pid),
                    }
                }
            }
            Err(why) => reaped.refused.push(format!("{}: {why}", entry.path)),
        }
        // A file left behind is read again at the next start, where its keepers are gone or
        // are proven not to be keepers: nothing is signalled twice. Said, not dropped.
        if let Err(e) = vault.remove_file(&entry.path) {
            tracing::debug!("cannot remove {}: {e}", entry.path);
        }
    }
    reaped
}

/// Why a dead tabd's groups file was not acted on.
#[derive(Debug, thiserror::Error)]
enum Unused {
    #[error(transparent)]
    Unreadable(#[from] crate::base::vault::VaultError),
    #[error("not trusted, nothing it names was signalled: {0}")]
    Untrusted(crate::base::signing::Unsealed),
    #[error("cannot be read: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// The groups a dead tabd's file names, if this machine's key signed it for that tabd.
fn read_groups(vault: &Vault, key: &Key, path: &VaultPath, owner: i32) -> Result<Vec<Recorded>, Unused> {
    let (bytes, _) = vault.read_bytes(path, 1024 * 1024)?;
    let owner = owner.to_string();
    let body = key
        .open(PURPOSE, &[owner.as_bytes()], &bytes)
        .map_err(Unused::Untrusted)?;
    Ok(serde_json::from_slice(body)?)
}

/// Signals `g`'s keeper to stop (it ends its tenant's group and everything below), if the
/// process with that number is provably a keeper a dead tabd left; else why not.
fn stop_keeper(g: &Recorded) -> Result<(), &'static str> {
    let pid = Pid::from_raw(g.pid).ok_or("not a process number")?;
    // Opened first: the signal reaches the process checked below, or none (the number reused
    // in between belongs to a process this handle does not point at).
    let fd =
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).map_err(|_| "not running")?;
    is_orphaned_keeper(g.pid, g.start)?;
    rustix::process::pidfd_send_signal(&fd, Signal::USR1).map_err(|_| "gone before it was signalled")
}

/// Whether `pid` is a keeper whose tabd is gone: started at `start`, named `tabd-keeper`,
/// running tabd's executable, leading a session of its own, no live tabd its parent.
fn is_orphaned_keeper(pid: i32, start: u64) -> Result<(), &'static str> {
    let s = stat(pid).filter(|s| !s.exited).ok_or("not running")?;
    if s.start != start {
        return Err("started at another time than written down (another process has the number)");
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).map_err(|_| "not readable")?;
    if comm.trim_end() != keeper::NAME {
        return Err("not named tabd-keeper");
    }
    if s.session != pid || s.group != pid {
        return Err("not the leader of a session of its own");
    }
    if !runs_tabd(pid) {
        return Err("not running tabd's executable");
    }
    if s.parent == std::process::id() as i32 || is_tabd(s.parent) {
        return Err("a running tabd is its parent");
    }
    Ok(())
}

/// Whether `pid` runs tabd's executable: this one (same file), or one named tabd (an upgrade
/// since the keeper started replaced the file).
fn runs_tabd(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let exe = format!("/proc/{pid}/exe");
    let same = match (std::fs::metadata(&exe), std::fs::metadata("/proc/self/exe")) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    same || std::fs::read_link(&exe).is_ok_and(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("tabd"))
    })
}

struct Stat {
    parent: i32,
    group: i32,
    session: i32,
    start: u64,
    /// Exited, waiting to be reaped (a zombie runs nothing).
    exited: bool,
}

/// Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses).
fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After `)`: state(0) ppid(1) pgrp(2) session(3) … starttime is field 22 of the line, 19 here.
    Some(Stat {
        parent: fields.get(1)?.parse().ok()?,
        group: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
        exited: matches!(fields.first(), Some(&"Z" | &"X")),
    })
}

/// Whether `pid` is `ancestor` or below it. (A keeper is a subreaper: whatever its child starts
/// stays below it, even after its own parent dies.)
pub fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut at = pid;
    for _ in 0..256 {
        if at == ancestor {
            return true;
        }
        match stat(at).map(|s| s.parent) {
            Some(p) if p > 1 && p != at => at = p,
            _ => return false,
        }
    }
    false
}

/// When `pid` started, if it is running.
fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).filter(|s| !s.exited).map(|s| s.start)
}

/// Whether `pid` is a running tabd (its executable's name says so).
fn is_tabd(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            c.split(|b| *b == 0)
                .next()
                .map(|argv0| String::from_utf8_lossy(argv0).into_owned())
        })
        .is_some_and(|argv0| {
            std::path::Path::new(&argv0)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tabd"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_reads_our_own_start_time() {
        let me = std::process::id() as i32;
        let s = stat(me).expect("our own stat");
        assert!(s.start > 0);
        let _ = is_tabd(me); // readable either way: must not panic
    }

    fn key() -> Key {
        Key::from_bytes(&[9; 32])
    }

    /// Writes the groups file of the dead tabd `owner`, signed by `key` (or not).
    fn write_groups(vault: &Vault, owner: i32, groups: &[Recorded], key: Option<&Key>) -> VaultPath {
        let file = VaultPath::parse(&format!("{GROUPS_DIR}/{owner}.json"), false).unwrap();
        let text = serde_json::to_string(groups).unwrap();
        let bytes = match key {
            Some(k) => k.seal(PURPOSE, &[owner.to_string().as_bytes()], text.as_bytes()),
            None => text.into_bytes(),
        };
        vault.write_atomic(&file, &bytes).unwrap();
        file
    }

    /// Issue 36, finding 7: a groups file naming one of the person's processes, with its true
    /// start time — unsigned, or even signed — signals nothing: the process is no keeper. A
    /// keeper whose tabd still runs is left alone too.
    #[tokio::test]
    async fn only_a_keeper_whose_tabd_is_gone_is_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        let mut sleep = std::process::Command::new("sleep");
        std::os::unix::process::CommandExt::process_group(&mut sleep, 0);
        let mut sleep = sleep.arg("60").spawn().unwrap();
        let pid = sleep.id() as i32;
        let rec = Recorded {
            pid,
            start: start_ticks(pid).unwrap(),
            name: "test".into(),
        };
        let dead_owner = i32::MAX - 7;
        let file = write_groups(&vault, dead_owner, std::slice::from_ref(&rec), None);
        let reaped = reap_orphans(&vault, &key());
        assert!(reaped.stopped.is_empty(), "{reaped:?}");
        assert_eq!(reaped.refused.len(), 1, "{reaped:?}");
        assert!(!vault.exists(&file), "the file is gone");
        write_groups(&vault, dead_owner, std::slice::from_ref(&rec), Some(&key()));
        let reaped = reap_orphans(&vault, &key());
        assert!(
            reaped.stopped.is_empty() && reaped.refused.is_empty(),
            "{reaped:?}"
        );
        assert_eq!(is_orphaned_keeper(pid, rec.start), Err("not named tabd-keeper"));
        assert!(
            sleep.try_wait().unwrap().is_none(),
            "the person's process runs on"
        );
        sleep.kill().unwrap();
        #[expect(clippy::let_underscore_must_use)]
        let _ = sleep.wait();

        // A real keeper (this test binary's fork, named tabd-keeper) whose parent runs.
        let mut cmd = tokio::process::Command::new("sleep");
        cmd.arg("60");
        super::super::Launcher::default().as_tenant(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let keeper = child.id().unwrap() as i32;
        for _ in 0..500 {
            if std::fs::read_to_string(format!("/proc/{keeper}/comm"))
                .is_ok_and(|c| c.trim_end() == keeper::NAME)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let start = start_ticks(keeper).unwrap();
        assert_eq!(
            is_orphaned_keeper(keeper, start),
            Err("a running tabd is its parent")
        );
        write_groups(
            &vault,
            dead_owner,
            &[Recorded {
                pid: keeper,
                start,
                name: "kept".into(),
            }],
            Some(&key()),
        );
        assert!(reap_orphans(&vault, &key()).stopped.is_empty());
        assert!(child.try_wait().unwrap().is_none(), "still running");
        #[expect(clippy::let_underscore_must_use)]
        let _ = rustix::process::kill_process(Pid::from_raw(keeper).unwrap(), Signal::USR1);
        #[expect(clippy::let_underscore_must_use)]
        let _ = child.wait().await;
    }
}
