//! Children tabd starts (MCP servers, agent CLIs) are tenants: each runs under a keeper of its
//! own (`keeper`), in a session of its own, and everything it starts — wrappers such as `npx`
//! start the real program as a grandchild, and a grandchild may leave the group with `setsid` —
//! ends with it. One handle, `Tenant`, owns a child for its whole life and kills it when dropped —
//! after a normal stop, a panic or a cancelled run alike.
//!
//! A `kill -9` of tabd drops no handle: the keepers see their parent die and sweep on their own.
//! Every live keeper is also written down in `.tabd/groups/<tabd's pid>.json`, and the next tabd
//! to start stops those a dead tabd left behind (`reap_orphans`), in case one missed it — only
//! a process that is provably such a keeper, never on the file's word.
//!
//! - `launch` — the one way to start a child: what it is (`ChildSpec`), and `Launcher::start`;
//! - `keeper` — the process between tabd and each child: session, subreaper, sweep;
//! - `groups` — the keepers written down (signed), and those a dead tabd left, stopped.

mod groups;
mod keeper;
mod launch;

pub use groups::{descends_from, reap_orphans, Reaped, Registry};
pub use launch::{ChildSpec, Confinement, Folders, Home, HomeFile, Started, Stream};

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use rustix::process::{Pid, Signal};

use crate::base::environment::Env;
use crate::base::sandbox::places::Places;
use crate::base::vault::Vault;

/// How tabd starts children: the environment their settings draw on (`${VAR}`, the variables
/// passed through) and where their groups are written down (`None`: not written down, e.g. for a
/// one-off `tabd mcp list`).
#[derive(Clone, Default)]
pub struct Launcher {
    pub env: Env,
    pub registry: Option<Arc<Registry>>,
    /// The vault (hidden from children unless granted).
    pub vault: Option<Arc<Vault>>,
    /// tabd's config file (hidden from children).
    pub config_file: Option<PathBuf>,
    /// `[sandbox] require`: refuse to start a child the kernel cannot sandbox.
    pub require_sandbox: bool,
    /// Whether the kernel can sandbox, and which children were already reported unsandboxed.
    pub sandbox_probe: Arc<crate::base::sandbox::Probe>,
    /// Every role's inbox, wherever it is (kept from children like `agent/inbox/`); kept current
    /// by whoever loads the roles.
    pub inboxes: crate::base::vault::protected::RoleInboxes,
}

pub use crate::base::sandbox::folders::ChildDirs;

/// Why a child was not started: its folders, its sandbox, or `[sandbox] require` where the
/// kernel cannot sandbox. Each says which, so a refusal reads as the sandbox's, not as a crash.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Folders(#[from] crate::base::sandbox::folders::FolderError),
    #[error("not started: it cannot be sandboxed here ({here}) and [sandbox] require = true")]
    SandboxRequired { here: String },
    #[error("cannot make {}: {source}", path.display())]
    Make { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Sandbox(#[from] crate::base::sandbox::SandboxError),
    /// The system would not run it (not there, not runnable, or refused by the sandbox, which
    /// `applied` can tell).
    #[error("`{program}` could not be started: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
        applied: Option<Arc<crate::base::sandbox::explain::Applied>>,
    },
}

/// Version managers whose shims find their versions through a folder in the home folder: with a
/// child's `HOME` moved to its state folder, each is told where the person's is (tabd's own
/// setting of the variable, else the folder when it exists).
const MANAGER_HOMES: &[(&str, &str)] = &[
    ("PYENV_ROOT", ".pyenv"),
    ("ASDF_DATA_DIR", ".asdf"),
    ("NVM_DIR", ".nvm"),
    ("VOLTA_HOME", ".volta"),
    ("MISE_DATA_DIR", ".local/share/mise"),
    ("MISE_CONFIG_DIR", ".config/mise"),
    ("RUSTUP_HOME", ".rustup"),
];

impl Launcher {
    /// Makes the child `cmd` starts a tenant: under a keeper, in a session of its own, with every
    /// descendant ending with it (see `keeper`). Call it before anything else that adds
    /// `pre_exec` steps (the sandbox): those then run in the tenant only, never in the keeper.
    /// tabd starts every child through `Launcher::start`, which calls it; the benchmark and the
    /// keeper's tests call it alone. `TABD_FAULTS=keeper-misses-parent-death` makes its keeper
    /// miss tabd's death, as one forked by a thread that has since ended would, for the test that
    /// a later tabd stops it.
    pub fn as_tenant(&self, cmd: &mut tokio::process::Command) {
        let faults = crate::base::faults::Faults::from_env(&self.env);
        as_tenant_armed(cmd, !faults.hit("keeper-misses-parent-death"));
    }

    /// The handle of `child`, started as a tenant (`as_tenant`), written down while it lives.
    pub fn tenant(&self, child: &tokio::process::Child, name: &str) -> Tenant {
        Tenant::new(child.id(), self.registry.clone(), name)
    }

    /// The person's home folder, from tabd's environment.
    pub fn home(&self) -> Option<PathBuf> {
        self.env
            .get("HOME")
            .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| PathBuf::from(h)))
    }

    /// Where tabd's own things are (for what children may never reach).
    pub fn places(&self) -> Places {
        let home = self.home();
        let state_home = self
            .env
            .get("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".local/state")))
            .unwrap_or_else(std::env::temp_dir);
        let state = state_home.join("tabd");
        let config_home = self
            .env
            .get("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        let mut config: Vec<PathBuf> = config_home.into_iter().map(|c| c.join("tabd")).collect();
        if let Some(file) = &self.config_file {
            config.push(file.clone());
            config.extend(file.parent().map(|d| d.join("env")));
        }
        let canonical = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
        Places {
            vault: self
                .vault
                .as_ref()
                .map(|v| canonical(v.root().to_path_buf()))
                .unwrap_or_default(),
            state: canonical(state),
            config: config.into_iter().map(canonical).collect(),
            home,
            // The log folder, where `[log] folder` moved it from the layout's (kept from
            // children as `TABD_OWNS` keeps that), is kept the way an inbox is.
            inboxes: self
                .inboxes
                .get()
                .into_iter()
                .chain(
                    self.vault
                        .as_ref()
                        .filter(|v| !v.log_in_place())
                        .map(|v| v.log_folder().into_owned()),
                )
                .collect(),
            layout: self
                .vault
                .as_ref()
                .map(|v| v.layout().clone())
                .unwrap_or_default(),
        }
    }

    /// Child `name`'s folders, outside the vault (`~/.local/state/tabd/children/<vault>/<name>/`),
    /// checked anew at every start (see `sandbox::folders`); what was mended is logged.
    pub fn child_dirs(&self, name: &str) -> Result<ChildDirs, StartError> {
        let root = crate::base::sandbox::folders::make_root(&self.places().children())?;
        let dirs =
            crate::base::sandbox::folders::child_dirs(&root, &crate::base::text::safe_name(name, '_'))?;
        if let Some(m) = &dirs.mended {
            tracing::warn!("{name}: {m}");
        }
        Ok(dirs)
    }

    /// The environment a child gets for its own folders: `HOME` (unless `keep_home`), `TMPDIR`,
    /// and where the person's version managers are. `.tool-versions` (asdf, mise) is linked in.
    pub fn home_env(&self, dirs: &ChildDirs, keep_home: bool) -> Vec<(String, String)> {
        let mut out = vec![("TMPDIR".to_string(), dirs.tmp.display().to_string())];
        if keep_home {
            return out;
        }
        out.push(("HOME".into(), dirs.state.display().to_string()));
        // The person's XDG folders would send its config, cache and data back to the home folder,
        // and the runtime folder holds the session's sockets: all inside its own folder instead.
        for (var, folder) in [
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_STATE_HOME", ".local/state"),
            ("XDG_RUNTIME_DIR", "tmp"),
        ] {
            out.push((var.into(), dirs.state.join(folder).display().to_string()));
        }
        let Some(home) = self.home() else {
            return out;
        };
        for (var, folder) in MANAGER_HOMES {
            let theirs = home.join(folder);
            match self.env.get(var) {
                Some(set) => out.push((var.to_string(), set.to_string())),
                None if theirs.is_dir() => out.push((var.to_string(), theirs.display().to_string())),
                None => {}
            }
        }
        let versions = home.join(".tool-versions");
        let link = dirs.state.join(".tool-versions");
        if versions.is_file() && std::fs::read_link(&link).ok().as_deref() != Some(versions.as_path()) {
            // Usually nothing is there to remove; what cannot be removed fails the link below.
            #[expect(clippy::let_underscore_must_use)]
            let _ = std::fs::remove_file(&link);
            if let Err(e) = std::os::unix::fs::symlink(&versions, &link) {
                // The child still starts; its version manager falls back to its own default.
                tracing::warn!(
                    "cannot link {} into {}: {e}",
                    versions.display(),
                    dirs.state.display()
                );
            }
        }
        out
    }

    /// Makes the child `cmd` starts run under `grants` (docs/spec.md §20): files it was named are made
    /// first. Where the kernel cannot sandbox, the child starts unsandboxed and the log says so
    /// once — or, with `[sandbox] require`, it is refused (`Err`). Returns what the kernel
    /// enforces.
    fn confine(
        &self,
        cmd: &mut tokio::process::Command,
        name: &str,
        grants: &crate::base::sandbox::Grants,
    ) -> Result<crate::base::sandbox::Support, StartError> {
        let support = self.sandbox_probe.support();
        if !support.enforced() {
            if self.require_sandbox {
                return Err(StartError::SandboxRequired {
                    here: support.describe(),
                });
            }
            if self.sandbox_probe.first_warning(name) {
                tracing::warn!("{name} runs WITHOUT a sandbox: {}", support.describe());
            }
            return Ok(support);
        }
        for folder in &grants.make_folders {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(folder) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(StartError::Make {
                        path: folder.clone(),
                        source,
                    })
                }
            }
        }
        for file in &grants.to_create {
            create_private_file(file).map_err(|source| StartError::Make {
                path: file.clone(),
                source,
            })?;
        }
        let prepared = crate::base::sandbox::prepare(&grants.spec, &self.sandbox_probe)?;
        crate::base::sandbox::install(cmd, prepared);
        Ok(support)
    }
}

/// Makes `path` an empty file readable by its owner only, unless something is there already
/// (never through a link).
fn create_private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
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

/// `Launcher::as_tenant`; `arm_death`: the keeper learns of tabd's death (always, but in the test of a
/// keeper that missed it).
#[allow(
    unsafe_code,
    reason = "pre_exec with a step that only makes system calls: see SAFETY"
)]
fn as_tenant_armed(cmd: &mut tokio::process::Command, arm_death: bool) {
    // SAFETY: `become_keeper` makes only system calls (no allocation, no lock) and returns only
    // in the tenant, which goes on to exec.
    unsafe {
        cmd.pre_exec(move || keeper::become_keeper(arm_death));
    }
    // Killing the keeper alone would orphan the tenant: the `Tenant` handle stops it instead.
    cmd.kill_on_drop(false);
}

/// A child tabd started, through its keeper: `stop` asks it to end (SIGTERM to its process
/// group), `kill` — or dropping the handle — ends it and everything below it at once. Signals go
/// through a pidfd where the kernel has them, so they can never reach a later process that was
/// given the same number.
pub struct Tenant {
    pid: Option<Pid>,
    pidfd: Option<std::os::fd::OwnedFd>,
    registry: Option<Arc<Registry>>,
}

impl Tenant {
    fn new(pid: Option<u32>, registry: Option<Arc<Registry>>, name: &str) -> Self {
        let pid = pid.and_then(|p| Pid::from_raw(p as i32));
        let pidfd =
            pid.and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
        if let (Some(p), Some(r)) = (pid, &registry) {
            r.add(p, name);
        }
        Self { pid, pidfd, registry }
    }

    /// Asks the child to end (its keeper passes SIGTERM on to its group).
    pub fn stop(&self) {
        self.send(Signal::TERM);
    }

    /// Ends the child and everything below it now.
    pub fn kill(&self) {
        self.send(Signal::USR1);
    }

    fn send(&self, sig: Signal) {
        // The process may be gone already (it exited, or was reaped): nothing is left to signal.
        match (&self.pidfd, self.pid) {
            (Some(fd), _) => {
                #[expect(clippy::let_underscore_must_use)]
                let _ = rustix::process::pidfd_send_signal(fd, sig);
            }
            (None, Some(pid)) => {
                #[expect(clippy::let_underscore_must_use)]
                let _ = rustix::process::kill_process(pid, sig);
            }
            (None, None) => {}
        }
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        self.kill();
        if let (Some(p), Some(r)) = (self.pid, &self.registry) {
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
        let no = crate::base::sandbox::Support::None("this kernel has no Landlock".into());
        let spec = crate::base::sandbox::Grants::default();
        let mut launcher = Launcher {
            sandbox_probe: Arc::new(crate::base::sandbox::Probe::known(no.clone())),
            require_sandbox: true,
            ..Launcher::default()
        };
        let mut cmd = tokio::process::Command::new("true");
        let err = launcher.confine(&mut cmd, "memory", &spec).unwrap_err();
        assert!(matches!(err, StartError::SandboxRequired { .. }), "{err:?}");
        let said = err.to_string();
        assert!(
            said.contains("no Landlock") && said.contains("require = true"),
            "{said}"
        );
        launcher.require_sandbox = false;
        assert_eq!(launcher.confine(&mut cmd, "memory", &spec).ok(), Some(no));
        assert!(
            !launcher.sandbox_probe.first_warning("memory"),
            "warned once already"
        );
        assert!(launcher.sandbox_probe.first_warning("slack"));
    }

    use super::*;

    fn alive(pid: i32) -> bool {
        // A zombie still answers kill(0): count it as gone.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    }

    /// Waits (up to 10 s) for `file` to hold a number.
    async fn pid_in(file: &std::path::Path) -> i32 {
        for _ in 0..1000 {
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{} was never written", file.display());
    }

    /// A shell tenant that starts a grandchild which leaves its group and session (as a daemon
    /// would), writes what the test checks into `dir`, then runs `rest`.
    fn escaping_tenant(dir: &std::path::Path, rest: &str) -> tokio::process::Command {
        let script = format!(
            "cut -d' ' -f5,6 /proc/$$/stat > {d}/ids; setsid sh -c 'echo $$ > {d}/escaped; exec sleep 1000' & \
             while [ ! -s {d}/escaped ]; do sleep 0.01; done; {rest}",
            d = dir.display()
        );
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c").arg(script);
        Launcher::default().as_tenant(&mut cmd);
        cmd
    }

    #[tokio::test]
    #[allow(unsafe_code, reason = "getsid(0) has no preconditions")]
    async fn a_tenant_has_a_session_of_its_own_and_nothing_it_starts_outlives_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_tenant(dir.path(), "exit 3").spawn().unwrap();
        let keeper = child.id().unwrap() as i32;
        let escaped = pid_in(&dir.path().join("escaped")).await;
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(3), "the keeper exits as the tenant did");
        assert!(!alive(escaped), "the grandchild that called setsid was killed");
        let ids = std::fs::read_to_string(dir.path().join("ids")).unwrap();
        let ids: Vec<i32> = ids.split_whitespace().map(|n| n.parse().unwrap()).collect();
        let (group, session) = (ids[0], ids[1]);
        // libc, not rustix: in a container whose session leader lives outside our PID namespace
        // getsid returns 0, which rustix's Pid cannot hold (it asserts; CI hit exactly that).
        let ours = unsafe { libc::getsid(0) };
        assert_eq!(session, keeper, "the keeper leads a new session (no terminal)");
        assert_ne!(session, ours);
        assert_ne!(
            group, keeper,
            "the tenant has a group of its own, apart from its keeper"
        );
    }

    #[tokio::test]
    async fn killing_a_tenant_ends_everything_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = escaping_tenant(dir.path(), "exec sleep 1000").spawn().unwrap();
        let escaped = pid_in(&dir.path().join("escaped")).await;
        let tenant = Launcher::default().tenant(&child, "test");
        assert!(alive(escaped));
        tenant.kill();
        let status = child.wait().await.unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(!alive(escaped), "the escaped grandchild went with it");
        // The handle is dropped after its process was reaped: its pidfd makes that harmless.
        drop(tenant);
    }

    #[tokio::test]
    async fn stop_asks_the_tenant_and_it_may_finish_gracefully() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let script = format!(
            "trap 'echo bye > {}; exit 0' TERM; echo $$ > {}/ready; while true; do sleep 0.05; done",
            done.display(),
            dir.path().display()
        );
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c").arg(script);
        Launcher::default().as_tenant(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        pid_in(&dir.path().join("ready")).await;
        let tenant = Launcher::default().tenant(&child, "test");
        tenant.stop();
        let status = child.wait().await.unwrap();
        assert_eq!(status.code(), Some(0), "it handled SIGTERM itself");
        assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "bye");
    }

    /// A child's `HOME` is its own folder; the person's version managers are still found there.
    #[test]
    fn a_childs_home_is_its_own_and_version_managers_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        for d in [".pyenv", ".volta", ".local/share/mise"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".tool-versions"), "nodejs 20.0.0\n").unwrap();
        let vault_dir = home.join("Vault");
        std::fs::create_dir_all(&vault_dir).unwrap();
        let launcher = Launcher {
            env: Env::from_pairs([
                ("HOME", home.display().to_string()),
                ("VOLTA_HOME", "/opt/volta".into()),
            ]),
            vault: Some(Arc::new(Vault::open(&vault_dir).unwrap())),
            ..Launcher::default()
        };
        let dirs = launcher.child_dirs("memory").unwrap();
        assert!(
            dirs.state.starts_with(home.join(".local/state/tabd/children")),
            "{:?}",
            dirs.state
        );
        assert!(!dirs.state.starts_with(&vault_dir));
        let env: std::collections::HashMap<String, String> =
            launcher.home_env(&dirs, false).into_iter().collect();
        assert_eq!(env["HOME"], dirs.state.display().to_string());
        assert_eq!(env["TMPDIR"], dirs.tmp.display().to_string());
        assert_eq!(env["PYENV_ROOT"], home.join(".pyenv").display().to_string());
        assert_eq!(
            env["MISE_DATA_DIR"],
            home.join(".local/share/mise").display().to_string()
        );
        assert_eq!(
            env["VOLTA_HOME"], "/opt/volta",
            "tabd's own setting passes through"
        );
        assert!(!env.contains_key("ASDF_DATA_DIR"), "only managers that are there");
        assert!(env["XDG_CACHE_HOME"].starts_with(&env["HOME"]));
        let link = dirs.state.join(".tool-versions");
        assert_eq!(std::fs::read_link(&link).unwrap(), home.join(".tool-versions"));
        let kept: std::collections::HashMap<String, String> =
            launcher.home_env(&dirs, true).into_iter().collect();
        assert!(!kept.contains_key("HOME"), "a configured HOME is kept");
    }
}
