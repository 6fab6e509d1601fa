//! One way to start a child (issue 37): a `ChildSpec` says what the child is — its program and
//! arguments, what it may have of tabd's environment and what its config sets, its folders, what
//! its config grants — and `Launcher::start` gives it that and nothing more: tabd's environment
//! cleared, a tenant under its keeper, its folders made and checked, its grants worked out,
//! confined, spawned and written down. MCP servers over stdio, agent CLIs and their `--help`
//! probe, and `[notify]` programs all start here, so no step can be left out of one of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Launcher, StartError, Tenant};
use crate::base::sandbox::explain::Applied;
use crate::base::sandbox::folders::{self, ChildDirs};
use crate::base::sandbox::grants::{ChildSandbox, Start, VaultAccess};
use crate::base::sandbox::Grants;
use crate::base::vault::leftovers::Watch;

/// What a child is. Nothing of tabd's own environment, folders or rights reaches it but what is
/// named here.
#[derive(Debug, Clone, Default)]
pub struct ChildSpec {
    /// Its name: in the log, in the groups file, and its folders' name.
    pub name: String,
    pub program: String,
    pub args: Vec<String>,
    /// What it gets of tabd's environment: the basics every program needs, and what its config
    /// passes by name (`pass_env`, a CLI's login variables).
    pub inherited: Vec<(String, String)>,
    /// Its config's own `env` table, expanded: it wins over every other variable (a `HOME` set
    /// there is kept), and the paths named there are granted, as are those in `args`.
    pub env: Vec<(String, String)>,
    /// Where it runs; `None`: its own folder when it is confined (tabd's working folder may be
    /// one it may not read: the vault, when `tabd fire` is typed there), else tabd's.
    pub cwd: Option<PathBuf>,
    pub stdin: Stream,
    pub stdout: Stream,
    pub stderr: Stream,
    /// Its sandbox and folders; `None` for tabd's own executable (`tabd mcp serve` as a server),
    /// whose tools go through the harness under the role's rules and which must reach the vault.
    pub confined: Option<Confinement>,
}

/// One of a child's standard streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stream {
    #[default]
    Null,
    /// A pipe to tabd (`Started::child` holds its end).
    Piped,
}

impl Stream {
    fn stdio(self) -> std::process::Stdio {
        match self {
            Self::Null => std::process::Stdio::null(),
            Self::Piped => std::process::Stdio::piped(),
        }
    }
}

/// A confined child's folders and sandbox.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// What its config grants (`[mcp.NAME]`, `[profiles.NAME]`).
    pub sandbox: ChildSandbox,
    /// The config table a grant is added to, for what a refusal says (`[mcp.memory]`).
    pub table: String,
    /// Who it is in what is said of what it left in the vault (``MCP server `fs` ``).
    pub label: String,
    pub folders: Folders,
    /// Variables that name private folders made in its home for it (`CLAUDE_CONFIG_DIR` →
    /// `.claude`), unless its `env` names them itself.
    pub home_folders: Vec<(String, String)>,
    /// Files put in its home before it starts (an agent CLI's login, copied from the person's).
    pub home_files: Vec<HomeFile>,
    /// Folders of its own besides its home (a CLI's run folder), canonical: writable, opened
    /// without following links.
    pub own: Vec<PathBuf>,
    /// Unix socket files it must reach (a CLI's relay to tabd's tools), canonical.
    pub sockets: Vec<PathBuf>,
}

/// Where a child's home (its `HOME` and `TMPDIR`) is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Folders {
    /// Kept from one start to the next, outside the vault
    /// (`~/.local/state/tabd/children/<vault>/<name>/`): an MCP server's memory.
    #[default]
    Kept,
    /// `home/` inside this folder, made anew at every start — whatever a folder of that name held
    /// is removed first, never followed — so nothing an earlier start left there (settings with
    /// hooks, instructions, a login of another account) is loaded again: an agent CLI's.
    Fresh(PathBuf),
}

/// A file put in a child's home before it starts: written anew, never through a link, and never
/// read back into the person's copy.
#[derive(Debug, Clone)]
pub struct HomeFile {
    /// The folder in its home it goes to (`.claude`), made private.
    pub folder: String,
    pub name: String,
    pub bytes: Vec<u8>,
    /// Where it was copied from, and what it is (`the login file`): for what is said when it
    /// cannot be put there.
    pub from: PathBuf,
    pub what: String,
}

/// A child's home as made for one start.
#[derive(Debug)]
pub struct Home {
    pub dirs: ChildDirs,
    /// The variables naming the folders made in it (`home_folders`).
    pub folder_env: Vec<(String, PathBuf)>,
    /// The files put in it: where each is now, and what it is.
    pub placed: Vec<(PathBuf, HomeFile)>,
}

/// A child started.
pub struct Started {
    pub child: tokio::process::Child,
    /// Its handle: it and everything below it end when this is dropped.
    pub tenant: Tenant,
    /// Its home (`None` when not confined).
    pub home: Option<Home>,
    /// The rules it runs under when the kernel enforces them, to explain what it reports.
    pub applied: Option<Arc<Applied>>,
    /// With `vault = "write"`: the vault folders to look through after it (docs/spec.md §24), whether
    /// or not the kernel enforces the sandbox.
    pub watch: Option<Watch>,
}

/// What confining a child set up at its start.
struct Confined {
    home: Home,
    applied: Option<Arc<Applied>>,
    watch: Option<Watch>,
}

/// The name of an agent CLI's home inside its run folder.
const FRESH_HOME: &str = "home";

impl Launcher {
    /// Starts `spec`: nothing of tabd's environment but what it names, a tenant (see `keeper`),
    /// its home made and checked, confined by its grants, spawned and written down.
    pub fn start(&self, spec: &ChildSpec) -> Result<Started, StartError> {
        let mut cmd = tokio::process::Command::new(&spec.program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.inherited.iter().cloned())
            .stdin(spec.stdin.stdio())
            .stdout(spec.stdout.stdio())
            .stderr(spec.stderr.stdio());
        // First: the sandbox's own `pre_exec` step then runs in the tenant only, never in its
        // keeper (which a tenant must not be able to signal).
        self.as_tenant(&mut cmd);
        let confined = match &spec.confined {
            Some(c) => Some(self.confine_spec(&mut cmd, spec, c)?),
            None => {
                if let Some(cwd) = &spec.cwd {
                    cmd.current_dir(cwd);
                }
                None
            }
        };
        cmd.envs(spec.env.iter().cloned());
        let (home, applied, watch) = match confined {
            Some(c) => (Some(c.home), c.applied, c.watch),
            None => (None, None, None),
        };
        let child = cmd.spawn().map_err(|source| StartError::Spawn {
            program: spec.program.clone(),
            source,
            applied: applied.clone(),
        })?;
        let tenant = self.tenant(&child, &spec.name);
        Ok(Started {
            child,
            tenant,
            home,
            applied,
            watch,
        })
    }

    /// `spec`'s home, environment for it, working folder and sandbox, set on `cmd`.
    fn confine_spec(
        &self,
        cmd: &mut tokio::process::Command,
        spec: &ChildSpec,
        c: &Confinement,
    ) -> Result<Confined, StartError> {
        let home = self.make_home(&spec.name, c, &spec.env)?;
        cmd.current_dir(spec.cwd.as_deref().unwrap_or(&home.dirs.state));
        let set = |k: &str| spec.env.iter().any(|(name, _)| name == k);
        for (k, v) in self.home_env(&home.dirs, set("HOME")) {
            if !set(&k) {
                cmd.env(k, v);
            }
        }
        cmd.envs(home.folder_env.iter().cloned());
        let places = self.places();
        let grants = grants_for(&places, spec, c, &home.dirs);
        let support = self.confine(cmd, &spec.name, &grants)?;
        let watch = match (c.sandbox.vault, &self.vault) {
            (VaultAccess::Write, Some(_)) => Watch::new(
                &places.vault,
                &grants.spec.writable,
                &places.inboxes,
                c.label.clone(),
            ),
            _ => None,
        };
        let applied = support.enforced().then(|| {
            Arc::new(Applied {
                spec: grants.spec,
                places,
                table: c.table.clone(),
            })
        });
        Ok(Confined { home, applied, watch })
    }

    /// Child `name`'s home for one start, made and checked (see `sandbox::folders`): the folders
    /// `c` names in it made private, its files put there. `env`: its config's own variables (a
    /// folder variable set there is the person's choice).
    pub fn make_home(
        &self,
        name: &str,
        c: &Confinement,
        env: &[(String, String)],
    ) -> Result<Home, StartError> {
        let dirs = match &c.folders {
            Folders::Kept => self.child_dirs(name)?,
            Folders::Fresh(folder) => fresh_home(folder)?,
        };
        let set = |k: &str| env.iter().any(|(n, _)| n == k);
        let mut folder_env = Vec::new();
        for (var, sub) in c.home_folders.iter().filter(|(v, _)| !set(v)) {
            let (path, _) = folders::subfolder(&dirs.state, sub)?;
            folder_env.push((var.clone(), path));
        }
        let placed = place_files(name, &dirs.state, &c.home_files);
        Ok(Home {
            dirs,
            folder_env,
            placed,
        })
    }

    /// What `spec` would be granted at its next start (`None` when it is not confined), for
    /// `tabd mcp list` and `tabd validate`: nothing is made or started.
    pub fn plan(&self, spec: &ChildSpec) -> Option<Grants> {
        let c = spec.confined.as_ref()?;
        let places = self.places();
        let state = match &c.folders {
            Folders::Kept => places
                .children()
                .join(crate::base::text::safe_name(&spec.name, '_')),
            Folders::Fresh(folder) => folder.join(FRESH_HOME),
        };
        let dirs = ChildDirs {
            tmp: state.join("tmp"),
            state,
            mended: None,
        };
        Some(grants_for(&places, spec, c, &dirs))
    }
}

/// What `spec` is granted with its home `dirs`: the grant policy (`sandbox::grants`).
fn grants_for(
    places: &crate::base::sandbox::places::Places,
    spec: &ChildSpec,
    c: &Confinement,
    dirs: &ChildDirs,
) -> Grants {
    let mut own = vec![dirs.state.clone(), dirs.tmp.clone()];
    own.extend(c.own.iter().cloned());
    c.sandbox.grants(&Start {
        places,
        own: &own,
        sockets: &c.sockets,
        args: &spec.args,
        env: &spec.env,
    })
}

/// `home/` in `folder` (a folder tabd has just made, private to it), made anew: whatever a
/// folder of that name held is removed first, never followed.
fn fresh_home(folder: &Path) -> Result<ChildDirs, StartError> {
    let root = std::fs::canonicalize(folder).map_err(|source| StartError::Make {
        path: folder.to_path_buf(),
        source,
    })?;
    match std::fs::remove_dir_all(root.join(FRESH_HOME)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(StartError::Make {
                path: root.join(FRESH_HOME),
                source: e,
            })
        }
        _ => {}
    }
    Ok(folders::child_dirs(&root, FRESH_HOME)?)
}

/// Puts `files` in the home `state`; one that cannot be put there is said and left out (the
/// child starts without it, as it would for a person not logged in that way).
fn place_files(name: &str, state: &Path, files: &[HomeFile]) -> Vec<(PathBuf, HomeFile)> {
    let mut placed = Vec::new();
    for f in files {
        let copied = folders::subfolder(state, &f.folder)
            .map_err(NotPlaced::Folder)
            .and_then(|(dir, fd)| {
                folders::replace_file(&fd, &f.name, &f.bytes)
                    .map(|()| dir.join(&f.name))
                    .map_err(NotPlaced::Write)
            });
        match copied {
            Ok(copy) => placed.push((copy, f.clone())),
            Err(e) => tracing::warn!("{name}: cannot copy {} {}: {e}", f.what, f.from.display()),
        }
    }
    placed
}

/// Why a file could not be put in a child's home: its folder there, or the file itself.
#[derive(Debug, thiserror::Error)]
enum NotPlaced {
    #[error(transparent)]
    Folder(folders::FolderError),
    #[error(transparent)]
    Write(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::environment::Env;
    use crate::base::vault::Vault;
    use std::collections::BTreeSet;

    /// The variables a confined child gets for its own folders (`Launcher::home_env`), with no
    /// version manager in the home folder.
    const HOME_VARS: &[&str] = &[
        "HOME",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
    ];

    /// Whether this kernel sandboxes; where it cannot, the sandbox half of a test says so and
    /// skips — or, with `TABD_REQUIRE_SANDBOX=1` (as tests/sandbox.rs), fails.
    fn sandboxes(launcher: &Launcher) -> bool {
        let support = launcher.sandbox_probe.support();
        if support.enforced() {
            return true;
        }
        assert!(
            std::env::var("TABD_REQUIRE_SANDBOX").map_or(true, |r| r != "1"),
            "TABD_REQUIRE_SANDBOX=1, but this machine cannot sandbox: {}",
            support.describe()
        );
        eprintln!(
            "skipped the sandbox half: this kernel cannot sandbox ({})",
            support.describe()
        );
        false
    }

    /// Issue 37, item 5: a real `/bin/sh` started from a spec gets only the variables the spec
    /// names (and its own folders'), never one of tabd's own; under the real sandbox it can
    /// write its own folder but not a folder nobody granted.
    #[tokio::test]
    async fn only_what_the_spec_names_reaches_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["home", "Vault", "outside"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let launcher = Launcher {
            env: Env::from_pairs([
                ("HOME", root.join("home").display().to_string()),
                ("XDG_STATE_HOME", root.join("state").display().to_string()),
            ]),
            vault: Some(Arc::new(Vault::open(&root.join("Vault")).unwrap())),
            ..Launcher::default()
        };
        let theirs = root.join("outside/theirs");
        // The script does not start with `/`, so no path in it is granted as a named path.
        let script = format!(
            "env; echo mine > \"$HOME/mine\"; echo theirs > '{}'; exit 0",
            theirs.display()
        );
        let spec = ChildSpec {
            name: "probe".into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script],
            inherited: vec![("LANG".into(), "C".into())],
            env: vec![("FROM_ITS_CONFIG".into(), "yes".into())],
            stdout: Stream::Piped,
            confined: Some(Confinement {
                sandbox: ChildSandbox {
                    network: false,
                    ..ChildSandbox::default()
                },
                ..Confinement::default()
            }),
            ..ChildSpec::default()
        };
        let enforced = sandboxes(&launcher);
        let started = launcher.start(&spec).unwrap();
        let state = started.home.as_ref().unwrap().dirs.state.clone();
        let out = started.child.wait_with_output().await.unwrap();
        assert!(out.status.success(), "{out:?}");
        let env = String::from_utf8_lossy(&out.stdout).into_owned();
        let names: BTreeSet<&str> = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        // `PWD` is the shell's own (dash exports it).
        let named: BTreeSet<&str> = ["LANG", "FROM_ITS_CONFIG", "PWD"]
            .iter()
            .chain(HOME_VARS)
            .copied()
            .collect();
        assert_eq!(names, named, "what reached the child:\n{env}");
        assert!(
            env.lines().any(|l| l == format!("HOME={}", state.display())),
            "{env}"
        );
        assert_eq!(std::fs::read_to_string(state.join("mine")).unwrap(), "mine\n");
        if enforced {
            assert!(
                !theirs.exists(),
                "the child wrote {}, which nothing granted",
                theirs.display()
            );
        }
    }
}
