//! Children tabd starts (MCP servers, agent CLIs) each run in a process group of their own:
//! wrappers such as `npx` start the real program as a grandchild, and only a signal to the whole
//! group reaches it. One guard type owns a group for its whole life and kills it when dropped —
//! after a normal stop, a panic or a cancelled run alike.
//!
//! A `kill -9` of tabd drops no guard. So every live group is also written down in
//! `.tabd/groups/<tabd's pid>.json`, and the next tabd to start stops the groups a dead tabd left
//! behind (`reap_orphans`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

use crate::environment::Env;
use crate::vault::{Durability, Vault, VaultPath};

/// Where live groups are written down, one file per tabd process.
const GROUPS_DIR: &str = ".tabd/groups";

/// How tabd starts children: the environment their settings draw on (`${VAR}`, the variables
/// passed through) and where their groups are written down (`None`: not written down, e.g. for a
/// one-off `tabd mcp list`).
#[derive(Clone, Default)]
pub struct Launcher {
    pub env: Env,
    pub registry: Option<Arc<Registry>>,
    /// The vault, for children's state folders (`.tabd/children/<name>/`).
    pub vault: Option<Arc<Vault>>,
    /// `[sandbox] require`: refuse to start a child the kernel cannot sandbox.
    pub require_sandbox: bool,
    /// Whether the kernel can sandbox, and which children were already reported unsandboxed.
    pub sandbox_probe: Arc<crate::sandbox::Probe>,
}

/// A child's own folders: its state folder (also its `HOME` unless configured) and a private
/// temporary folder inside it.
pub struct ChildDirs {
    pub state: std::path::PathBuf,
    pub tmp: std::path::PathBuf,
}

impl Launcher {
    pub fn guard(&self, pgid: Option<Pid>, name: &str) -> GroupGuard {
        GroupGuard::new(pgid, self.registry.clone(), name)
    }

    /// Creates (through the vault) and returns child `name`'s folders.
    pub fn child_dirs(&self, name: &str) -> Result<ChildDirs, String> {
        let vault = self.vault.as_ref().ok_or("no vault to keep its state in")?;
        let safe = crate::text::safe_name(name, '_');
        let tmp =
            VaultPath::parse(&format!(".tabd/children/{safe}/tmp"), false).map_err(|e| e.to_string())?;
        vault.create_dir_all(&tmp).map_err(|e| e.to_string())?;
        let tmp = vault.root().join(tmp.as_path());
        let state = tmp
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_else(|| tmp.clone());
        Ok(ChildDirs { state, tmp })
    }

    /// Makes the child `cmd` starts run under `spec` (DESIGN §20). Where the kernel cannot, the
    /// child starts unsandboxed and the log says so once — or, with `[sandbox] require`, it is
    /// refused (`Err`). Returns what the kernel enforces.
    pub fn confine(
        &self,
        cmd: &mut tokio::process::Command,
        name: &str,
        spec: &crate::sandbox::Spec,
    ) -> Result<crate::sandbox::Support, String> {
        let support = self.sandbox_probe.support();
        if !support.enforced() {
            if self.require_sandbox {
                return Err(format!(
                    "not started: it cannot be sandboxed here ({}) and [sandbox] require = true",
                    support.describe()
                ));
            }
            if self.sandbox_probe.first_warning(name) {
                tracing::warn!("{name} runs WITHOUT a sandbox: {}", support.describe());
            }
            return Ok(support);
        }
        let prepared = crate::sandbox::prepare(spec).map_err(|e| e.to_string())?;
        crate::sandbox::install(cmd, prepared);
        Ok(support)
    }
}

/// Where `command` would be found: a path as given, else the first runnable match on `env`'s
/// `PATH`.
pub fn find_program(command: &str, env: &Env) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    let runnable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = PathBuf::from(command);
        return runnable(&p).then_some(p);
    }
    env.get("PATH")?
        .split(':')
        .map(|dir| Path::new(dir).join(command))
        .find(|p| runnable(p))
}

/// Puts the child `cmd` will start into a new process group of its own.
pub fn own_group(cmd: &mut tokio::process::Command) {
    cmd.process_group(0);
}

/// The group of a child spawned by `own_group` (its own pid); `None` once it is reaped.
pub fn group_of(child: &tokio::process::Child) -> Option<Pid> {
    child.id().and_then(|id| Pid::from_raw(id as i32))
}

/// Sends `sig` to every process in the group; a group that is already gone is not an error.
pub fn signal(group: Option<Pid>, sig: Signal) {
    if let Some(pgid) = group {
        let _ = rustix::process::kill_process_group(pgid, sig);
    }
}

/// One group as the registry file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    pgid: i32,
    /// The leader's start time (clock ticks since boot, /proc/PID/stat): tells our group from a
    /// later one that was given the same number.
    start: u64,
    name: String,
}

/// The live groups of this tabd process, written down so a successor can stop them.
pub struct Registry {
    vault: Arc<Vault>,
    file: VaultPath,
    live: Mutex<BTreeMap<i32, Recorded>>,
}

impl Registry {
    pub fn new(vault: Arc<Vault>) -> Arc<Self> {
        let file = VaultPath::parse(&format!("{GROUPS_DIR}/{}.json", std::process::id()), false)
            .unwrap_or_else(|_| VaultPath::root());
        Arc::new(Self {
            vault,
            file,
            live: Mutex::new(BTreeMap::new()),
        })
    }

    fn add(&self, pgid: Pid, name: &str) {
        let Some(start) = start_ticks(pgid.as_raw_nonzero().get()) else {
            return;
        };
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.insert(
            pgid.as_raw_nonzero().get(),
            Recorded {
                pgid: pgid.as_raw_nonzero().get(),
                start,
                name: name.to_string(),
            },
        );
        self.save(&live);
    }

    fn remove(&self, pgid: Pid) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.remove(&pgid.as_raw_nonzero().get()).is_some() {
            self.save(&live);
        }
    }

    fn save(&self, live: &BTreeMap<i32, Recorded>) {
        let written = if live.is_empty() {
            self.vault.remove_file(&self.file).or(Ok(()))
        } else {
            let list: Vec<&Recorded> = live.values().collect();
            let text = serde_json::to_string(&list).unwrap_or_default();
            self.vault
                .write_atomic_with(&self.file, text.as_bytes(), Durability::None)
        };
        if let Err(e) = written {
            tracing::debug!("cannot write {}: {e}", self.file);
        }
    }
}

/// Stops the groups that tabd processes which are no longer running left behind (a `kill -9`,
/// a power cut while children ran). Returns what was stopped, for the log.
pub fn reap_orphans(vault: &Vault) -> Vec<String> {
    let Ok(dir) = VaultPath::parse(GROUPS_DIR, false) else {
        return Vec::new();
    };
    let Ok(listing) = vault.list(&dir) else {
        return Vec::new();
    };
    let mut stopped = Vec::new();
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
        let groups: Vec<Recorded> = vault
            .read_text(&entry.path, 1024 * 1024)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        for g in groups {
            if ours_still_running(&g) {
                if let Some(pgid) = Pid::from_raw(g.pgid) {
                    let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
                    stopped.push(format!("{} (process group {})", g.name, g.pgid));
                }
            }
        }
        let _ = vault.remove_file(&entry.path);
    }
    stopped
}

/// True when processes of group `g` still run and the number was not given to a new group: the
/// leader is gone (it died with tabd or was killed) or is still the same process.
fn ours_still_running(g: &Recorded) -> bool {
    match start_ticks(g.pgid) {
        Some(start) if start != g.start => return false, // a new process got the number
        _ => {}
    }
    members(g.pgid).into_iter().any(|(_, start)| start >= g.start)
}

/// (pid, start ticks) of every process in group `pgid`.
fn members(pgid: i32) -> Vec<(i32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter_map(|pid| stat(pid).filter(|s| s.pgrp == pgid).map(|s| (pid, s.start)))
        .collect()
}

struct Stat {
    pgrp: i32,
    start: u64,
}

/// Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses).
fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After `)`: state(0) ppid(1) pgrp(2) … starttime is field 22 of the line, 19 here.
    Some(Stat {
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start)
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

/// Owns a child's process group: SIGKILLs the whole group when dropped (or at `kill`), and keeps
/// it written down in the registry while it lives.
pub struct GroupGuard {
    pgid: Option<Pid>,
    registry: Option<Arc<Registry>>,
}

impl GroupGuard {
    pub fn new(pgid: Option<Pid>, registry: Option<Arc<Registry>>, name: &str) -> Self {
        if let (Some(p), Some(r)) = (pgid, &registry) {
            r.add(p, name);
        }
        Self { pgid, registry }
    }

    pub fn signal(&self, sig: Signal) {
        signal(self.pgid, sig);
    }

    pub fn kill(&self) {
        self.signal(Signal::KILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        if let (Some(p), Some(r)) = (self.pgid, &self.registry) {
            r.remove(p);
        }
    }
}

#[cfg(test)]
mod tests {

    /// Where the kernel cannot sandbox: `[sandbox] require` refuses the child; without it the
    /// child starts, and the warning is given once per child.
    #[test]
    fn a_child_that_cannot_be_sandboxed_is_refused_only_when_required() {
        let no = crate::sandbox::Support::None("this kernel has no Landlock".into());
        let spec = crate::sandbox::Spec::default();
        let mut launcher = Launcher {
            sandbox_probe: Arc::new(crate::sandbox::Probe::known(no.clone())),
            require_sandbox: true,
            ..Launcher::default()
        };
        let mut cmd = tokio::process::Command::new("true");
        let err = launcher.confine(&mut cmd, "memory", &spec).unwrap_err();
        assert!(
            err.contains("no Landlock") && err.contains("require = true"),
            "{err}"
        );
        launcher.require_sandbox = false;
        assert_eq!(launcher.confine(&mut cmd, "memory", &spec), Ok(no));
        assert!(
            !launcher.sandbox_probe.first_warning("memory"),
            "warned once already"
        );
        assert!(launcher.sandbox_probe.first_warning("slack"));
    }

    use super::*;

    #[test]
    fn stat_reads_our_own_group_and_start_time() {
        let me = std::process::id() as i32;
        let s = stat(me).expect("our own stat");
        assert_eq!(s.pgrp, rustix::process::getpgrp().as_raw_nonzero().get());
        assert!(s.start > 0);
        assert!(is_tabd(me) || !is_tabd(me)); // readable either way: must not panic
        assert!(members(s.pgrp).iter().any(|(pid, _)| *pid == me));
    }

    #[test]
    fn a_dead_owners_group_is_stopped_and_a_live_owners_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        // A child in its own group, written down by an owner pid that does not exist.
        let mut child = std::process::Command::new("sleep");
        std::os::unix::process::CommandExt::process_group(&mut child, 0);
        let mut child = child.arg("60").spawn().unwrap();
        let pgid = child.id() as i32;
        let rec = Recorded {
            pgid,
            start: start_ticks(pgid).unwrap(),
            name: "test".into(),
        };
        let dead_owner = i32::MAX - 7;
        let file = VaultPath::parse(&format!("{GROUPS_DIR}/{dead_owner}.json"), false).unwrap();
        vault
            .write_atomic(
                &file,
                serde_json::to_string(&vec![rec.clone()]).unwrap().as_bytes(),
            )
            .unwrap();
        let stopped = reap_orphans(&vault);
        assert_eq!(stopped.len(), 1, "{stopped:?}");
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed");
        assert!(!vault.exists(&file), "the record is gone");
        // A recorded start time that does not match: the number was reused, nothing is killed.
        let mut other = std::process::Command::new("sleep");
        std::os::unix::process::CommandExt::process_group(&mut other, 0);
        let mut other = other.arg("60").spawn().unwrap();
        let stale = Recorded {
            pgid: other.id() as i32,
            start: 1,
            name: "stale".into(),
        };
        vault
            .write_atomic(&file, serde_json::to_string(&vec![stale]).unwrap().as_bytes())
            .unwrap();
        assert!(reap_orphans(&vault).is_empty());
        assert!(other.try_wait().unwrap().is_none(), "still running");
        other.kill().unwrap();
        let _ = other.wait();
    }
}
