//! The sandbox of every child tabd starts (docs/spec.md §20): MCP servers over stdio and agent CLIs,
//! with whatever they start in turn. A child is a tenant: it gets what its config grants and
//! nothing it can arrange for itself.
//!
//! Between fork and exec the tenant restricts itself with Landlock and a seccomp filter; both are
//! inherited by every descendant and cannot be lifted. Landlock: everything readable but what is
//! hidden (secrets, the vault, tabd's places; the kernel's allow-list cannot subtract, so a folder
//! that holds a hidden path is granted entry by entry, see `tree`), writable only where granted,
//! device files without ioctls, no signal to and no abstract socket of a process outside the
//! sandbox (ABI 6), Unix socket files only where granted (ABI 9), no TCP without the network
//! (ABI 4). seccomp: no Unix socket at all unless one is granted (the kernel's path rule for
//! socket files is new), no network socket without the network, no io_uring (it opens sockets
//! without `socket()`), no `TIOCSTI`.
//!
//! The rules are built before the fork (opening every granted path, compiling the filter); the
//! forked child only makes the system calls that apply them (no allocation after fork).
//!
//! - `grants` — what a child's `[mcp.NAME]` / `[profiles.NAME]` sandbox grants at one start;
//! - `places` — what is hidden: secrets, tabd's own places;
//! - `tree` — "everything but": the split of a folder around hidden paths;
//! - `folders` — children's own folders, checked without following links;
//! - `explain` — an EACCES that the sandbox caused, in words, with the grant to add.

pub mod explain;
pub mod folders;
pub mod grants;
pub mod places;
pub mod tree;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// The highest Landlock ABI this crate knows: asked for in full, and each kernel gives what it
/// has (best effort); what it lacks is reported (`Support::gaps`), never silently assumed.
const ABI_WANTED: ABI = ABI::V10;

/// What a child may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    /// Never readable (absolute, canonical): everything else is readable and runnable.
    pub hidden: Vec<PathBuf>,
    /// Readable even where hidden (what the config grants: vault entries, `readable = [...]`).
    pub readable: Vec<PathBuf>,
    /// Folders and files it may also change.
    pub writable: Vec<PathBuf>,
    /// tabd's folders for it (state, temp, a CLI's run folder): writable, opened without
    /// following a link at any level (canonical paths).
    pub private: Vec<PathBuf>,
    /// Device files it may read and write (never with ioctls).
    pub devices: Vec<PathBuf>,
    /// Unix socket files it may connect to. None: it may create no Unix socket (pairs of
    /// connected sockets, `socketpair`, still work).
    pub sockets: Vec<PathBuf>,
    /// May it open network sockets (TCP, UDP)?
    pub network: bool,
}

/// The rules for one start, and what was granted or refused on the way (for `tabd validate` and
/// `tabd mcp list`).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub spec: Spec,
    /// Files named in the child's `env` or `args` that do not exist yet: made empty (0600) at the
    /// start, so that the child can be granted them alone, not their folder.
    pub to_create: Vec<PathBuf>,
    /// Folders for those files that do not exist yet either: made (0700) first.
    pub make_folders: Vec<PathBuf>,
    /// Paths the config named that were granted (`MEMORY_FILE_PATH: /x/y.json writable`).
    pub granted: Vec<String>,
    /// Paths the config named that were not, and why.
    pub refused: Vec<String>,
}

/// Device files every program may use: read and write, no ioctl (so no terminal: no `/dev/tty`).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

impl Spec {
    /// The folders and files granted for reading (the split of `/` around `hidden`), as the
    /// kernel gets them.
    pub fn read_roots(&self) -> Vec<PathBuf> {
        let mut hidden = self.hidden.clone();
        // Devices are granted one by one, never the folder (terminals live there).
        hidden.push(PathBuf::from("/dev"));
        tree::all_but(Path::new("/"), &hidden)
    }

    /// Whether the child may change `path` (canonical or not yet existing).
    pub fn may_write(&self, path: &Path) -> bool {
        self.writable
            .iter()
            .chain(&self.private)
            .chain(&self.devices)
            .any(|g| path.starts_with(g))
    }

    /// Whether the child may read `path`.
    pub fn may_read(&self, path: &Path) -> bool {
        self.may_write(path)
            || self.readable.iter().any(|g| path.starts_with(g))
            || !(self.hidden.iter().any(|h| path.starts_with(h)) || path.starts_with("/dev"))
    }
}

/// Whether this kernel can sandbox children, found out once per tabd process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock enforces the rules, at this ABI; `seccomp`: the filter can be applied too.
    Landlock { abi: u8, seccomp: bool },
    /// It cannot: why (not Linux, kernel without Landlock, Landlock disabled).
    None(String),
}

impl Support {
    pub fn enforced(&self) -> bool {
        matches!(self, Self::Landlock { .. })
    }

    /// In words, for `tabd mcp list` and the log.
    pub fn describe(&self) -> String {
        match self {
            Self::Landlock { abi, .. } if self.gaps().is_empty() => {
                format!("enforced (Landlock ABI {abi}, seccomp)")
            }
            Self::Landlock { abi, .. } => format!(
                "enforced (Landlock ABI {abi}); this kernel cannot enforce: {}",
                self.gaps().join("; ")
            ),
            Self::None(why) => format!("NOT enforced: {why}"),
        }
    }

    /// What this kernel cannot enforce of docs/spec.md §20, each with what would.
    pub fn gaps(&self) -> Vec<String> {
        let Self::Landlock { abi, seccomp } = self else {
            return vec!["anything (no Landlock)".into()];
        };
        let mut out = Vec::new();
        let mut lacks = |since: u8, what: &str, linux: &str| {
            if *abi < since {
                out.push(format!("{what} (Landlock ABI {since}, Linux {linux})"));
            }
        };
        lacks(3, "truncating files it may only read", "6.2");
        lacks(
            4,
            "TCP by Landlock (seccomp still refuses network sockets)",
            "6.7",
        );
        lacks(5, "ioctls on devices", "6.10");
        lacks(6, "signals and abstract Unix sockets outside its sandbox", "6.12");
        lacks(
            9,
            "Unix socket files by path: a child granted one socket file (`unix_sockets`) can reach every socket file",
            "7.1",
        );
        if !seccomp {
            out.push(
                "the seccomp filter (no network and no Unix sockets rest on it): this kernel or architecture has none"
                    .into(),
            );
        }
        out
    }

    /// The Landlock ABI in force (0 without Landlock).
    pub fn abi(&self) -> u8 {
        match self {
            Self::Landlock { abi, .. } => *abi,
            Self::None(_) => 0,
        }
    }
}

/// The kernel probe and the children already warned about, shared by a process's launchers
/// (owned by whoever starts children, not global).
#[derive(Debug, Default)]
pub struct Probe {
    support: OnceLock<Support>,
    warned: Mutex<Vec<String>>,
    /// Compiled seccomp filters, by (network, Unix sockets): four at most, built once.
    filters: Mutex<Vec<((bool, bool), seccompiler::BpfProgram)>>,
}

impl Probe {
    /// A probe whose answer is already known (a kernel without Landlock, in tests).
    pub fn known(support: Support) -> Self {
        let probe = Self::default();
        // A new cell is empty: setting it cannot fail.
        #[expect(clippy::let_underscore_must_use)]
        let _ = probe.support.set(support);
        probe
    }

    /// What the kernel supports: a throwaway thread restricts itself (Landlock restricts only the
    /// calling thread) and reports how far that went.
    pub fn support(&self) -> Support {
        self.support.get_or_init(probe_kernel).clone()
    }

    /// The seccomp filter for `spec`, compiled once per kind.
    fn filter(&self, spec: &Spec) -> Result<seccompiler::BpfProgram, SandboxError> {
        let key = (spec.network, !spec.sockets.is_empty());
        let mut cache = self.filters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, f)) = cache.iter().find(|(k, _)| *k == key) {
            return Ok(f.clone());
        }
        let f = filter(spec)?;
        cache.push((key, f.clone()));
        Ok(f)
    }

    /// True the first time `name` is seen (the "not sandboxed" warning is given once).
    pub fn first_warning(&self, name: &str) -> bool {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.iter().any(|n| n == name) {
            return false;
        }
        warned.push(name.to_string());
        true
    }
}

fn probe_kernel() -> Support {
    if !cfg!(target_os = "linux") {
        return Support::None("Landlock is Linux only".into());
    }
    let probe = std::thread::spawn(|| -> Result<(RestrictionStatus, bool), landlock::RulesetError> {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_WANTED))
            .and_then(|r| r.create())
            .and_then(|r| r.restrict_self())?;
        let seccomp = filter(&Spec::default()).is_ok_and(|f| seccompiler::apply_filter(&f).is_ok());
        Ok((status, seccomp))
    });
    match probe.join() {
        Ok(Ok((status, seccomp))) => match (status.ruleset, status.landlock) {
            (RulesetStatus::NotEnforced, _) => Support::None(
                "this kernel has no Landlock (Linux 5.13 or later, with landlock in the lsm= list)".into(),
            ),
            (_, LandlockStatus::Available { effective_abi, .. }) => Support::Landlock {
                abi: effective_abi as u8,
                seccomp,
            },
            (_, _) => Support::Landlock { abi: 1, seccomp },
        },
        Ok(Err(e)) => Support::None(format!("Landlock failed: {e}")),
        Err(_) => Support::None("the Landlock probe failed".into()),
    }
}

/// Rules ready to apply in a forked child.
pub struct Prepared {
    ruleset: Mutex<Option<RulesetCreated>>,
    filter: Option<seccompiler::BpfProgram>,
}

/// Why rules could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot build the sandbox: {0}")]
    Rules(String),
    #[error("cannot open its own folder {path} without following a link: {source}")]
    Private { path: PathBuf, source: std::io::Error },
}

/// Builds the rules for `spec` (before the fork). A granted path that does not exist is
/// skipped; one of tabd's own folders that cannot be opened safely is an error.
pub fn prepare(spec: &Spec, probe: &Probe) -> Result<Prepared, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Rules(e.to_string());
    let abi = ABI_WANTED;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?;
    if !spec.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(err)?;
    }
    // Writing includes connecting to sockets there (ResolveUnix) but never device ioctls.
    let write = AccessFs::from_all(abi) & !AccessFs::IoctlDev;
    let device: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    let private = spec
        .private
        .iter()
        .map(|p| {
            folders::open_no_links(p)
                .map(|fd| PathBeneath::new(fd, write))
                .map_err(|source| SandboxError::Private {
                    path: p.clone(),
                    source,
                })
        })
        .collect::<Result<Vec<PathBeneath<OwnedFd>>, _>>()?;
    let created = ruleset
        .create()
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(
            spec.read_roots(),
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(
            &spec.readable,
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(&spec.writable, write))
        .map_err(err)?
        .add_rules(private.into_iter().map(Ok::<_, landlock::RulesetError>))
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(&spec.devices, device))
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(&spec.sockets, AccessFs::ResolveUnix))
        .map_err(err)?;
    Ok(Prepared {
        ruleset: Mutex::new(Some(created)),
        filter: Some(probe.filter(spec)?),
    })
}

/// The seccomp filter: `socket()` refused for the families the spec does not allow (EACCES, as
/// a refused file is), io_uring off (it could open sockets without `socket()`), and `TIOCSTI` /
/// `TIOCLINUX` refused (typing into a terminal, even one inherited).
fn filter(spec: &Spec) -> Result<seccompiler::BpfProgram, SandboxError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter,
        SeccompRule,
    };
    let e = |e: seccompiler::BackendError| SandboxError::Rules(e.to_string());
    let unix = libc::AF_UNIX as u64;
    let rule = |arg: u8, op: Op, value: u64| -> Result<SeccompRule, SandboxError> {
        SeccompRule::new(vec![Cond::new(arg, Len::Dword, op, value).map_err(e)?]).map_err(e)
    };
    let mut socket = Vec::new();
    if spec.sockets.is_empty() {
        socket.push(rule(0, Op::Eq, unix)?);
    }
    if !spec.network {
        socket.push(rule(0, Op::Ne, unix)?);
    }
    let mut rules = std::collections::BTreeMap::new();
    if !socket.is_empty() {
        rules.insert(libc::SYS_socket, socket);
    }
    rules.insert(libc::SYS_io_uring_setup, vec![]);
    rules.insert(
        libc::SYS_ioctl,
        vec![rule(1, Op::Eq, libc::TIOCSTI)?, rule(1, Op::Eq, libc::TIOCLINUX)?],
    );
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err: seccompiler::BackendError| SandboxError::Rules(err.to_string()))?;
    let filter = SeccompFilter::new(
        rules.into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(e)?;
    filter.try_into().map_err(e)
}

/// Makes the child `cmd` starts apply `prepared` to itself just before exec (after the keeper's
/// fork: the keeper itself stays outside, so a tenant cannot signal it).
#[allow(
    unsafe_code,
    reason = "pre_exec with a step that allocates nothing and makes only system calls: see SAFETY"
)]
pub fn install(cmd: &mut tokio::process::Command, prepared: Prepared) {
    let prepared = Arc::new(prepared);
    // SAFETY: the closure runs in the forked child before exec. It takes an already-built
    // ruleset out of a mutex no other thread of the child can hold (the child has one thread),
    // and makes the prctl/landlock/seccomp system calls; on failure it returns a raw OS error
    // (no allocation after fork).
    unsafe {
        cmd.pre_exec(move || {
            let ruleset = match prepared.ruleset.lock() {
                Ok(mut r) => r.take(),
                Err(_) => return Err(std::io::Error::from_raw_os_error(libc::EPERM)),
            };
            if let Some(r) = ruleset {
                if r.restrict_self().is_err() {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
            }
            if let Some(f) = &prepared.filter {
                if seccompiler::apply_filter(f).is_err() {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
            }
            Ok(())
        });
    }
}

/// Whether `program` is tabd's own executable (`tabd mcp serve` as a server: not sandboxed).
pub fn is_tabd(program: &Path) -> bool {
    let me = std::env::current_exe().and_then(std::fs::canonicalize);
    match (me, std::fs::canonicalize(program)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_spec_lets_read_and_write() {
        let spec = Spec {
            hidden: vec!["/home/me/.ssh".into(), "/home/me/Vault".into()],
            readable: vec!["/home/me/Vault/project".into()],
            writable: vec!["/srv/out".into()],
            private: vec!["/home/me/.local/state/tabd/children/v/memory".into()],
            devices: vec!["/dev/null".into()],
            ..Spec::default()
        };
        assert!(spec.may_read(Path::new("/usr/lib/node")));
        assert!(spec.may_read(Path::new("/home/me/Vault/project/a.md")));
        assert!(!spec.may_read(Path::new("/home/me/Vault/secret.md")));
        assert!(!spec.may_read(Path::new("/home/me/.ssh/id_rsa")));
        assert!(!spec.may_read(Path::new("/dev/tty")));
        assert!(spec.may_read(Path::new("/dev/null")));
        assert!(spec.may_write(Path::new("/srv/out/x")));
        assert!(spec.may_write(Path::new("/home/me/.local/state/tabd/children/v/memory/tmp/x")));
        assert!(!spec.may_write(Path::new("/home/me/notes.txt")));
    }

    #[test]
    fn the_filter_builds_for_every_combination() {
        for network in [false, true] {
            for sockets in [vec![], vec![PathBuf::from("/run/docker.sock")]] {
                let spec = Spec {
                    network,
                    sockets,
                    ..Spec::default()
                };
                assert!(filter(&spec).is_ok());
            }
        }
    }

    #[test]
    fn gaps_name_what_an_older_kernel_lacks() {
        let old = Support::Landlock {
            abi: 5,
            seccomp: true,
        };
        let gaps = old.gaps().join("\n");
        assert!(
            gaps.contains("signals") && gaps.contains("Unix socket files"),
            "{gaps}"
        );
        assert!(!gaps.contains("ioctls"), "{gaps}");
        assert!(old.describe().contains("cannot enforce"));
        assert!(Support::None("x".into()).describe().starts_with("NOT enforced"));
    }
}
