//! The sandbox of every child tabd starts (DESIGN §20): MCP servers over stdio and agent CLIs,
//! with whatever they start in turn. Between fork and exec the child restricts itself with
//! Landlock (files: what it may read, what it may write) and, with `network = false`, a seccomp
//! filter (no socket but Unix ones). Both are inherited by every descendant and cannot be lifted
//! by the child: they are kernel rules, not settings it could edit.
//!
//! The rules are built before the fork (opening the granted folders, compiling the filter); the
//! forked child only makes the two system calls that apply them (no allocation after fork).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, ABI,
};

/// The Landlock ABI tabd asks for: file rights up to truncate and ioctl on devices (v5); TCP
/// rules (v4) back the seccomp filter. Older kernels get what they support (best effort), and
/// what they lack is reported, never silently assumed.
const ABI_WANTED: ABI = ABI::V5;

/// What a child may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    /// Folders and files it may read (and execute).
    pub readable: Vec<PathBuf>,
    /// Folders and files it may also change.
    pub writable: Vec<PathBuf>,
    /// May it open network sockets (TCP, UDP)? Unix sockets always work.
    pub network: bool,
}

/// Whether this kernel can sandbox children, found out once per tabd process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock enforces the rules (fully, or `partly`: an older ABI without some rights).
    Landlock { partly: bool },
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
            Self::Landlock { partly: false } => "enforced (Landlock)".into(),
            Self::Landlock { partly: true } => {
                "enforced (Landlock, an older ABI: some rights not restricted)".into()
            }
            Self::None(why) => format!("NOT enforced: {why}"),
        }
    }
}

/// The kernel probe and the children already warned about, shared by a process's launchers
/// (owned by whoever starts children, not global).
#[derive(Debug, Default)]
pub struct Probe {
    support: OnceLock<Support>,
    warned: Mutex<Vec<String>>,
}

impl Probe {
    /// A probe whose answer is already known (a kernel without Landlock, in tests).
    pub fn known(support: Support) -> Self {
        let probe = Self::default();
        let _ = probe.support.set(support);
        probe
    }

    /// What the kernel supports: a throwaway thread restricts itself (Landlock restricts only the
    /// calling thread) and reports how far that went.
    pub fn support(&self) -> Support {
        self.support.get_or_init(probe_kernel).clone()
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
    let probe = std::thread::spawn(|| -> Result<RestrictionStatus, String> {
        Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_WANTED))
            .and_then(|r| r.create())
            .and_then(|r| r.restrict_self())
            .map_err(|e| e.to_string())
    });
    match probe.join() {
        Ok(Ok(status)) => match status.ruleset {
            RulesetStatus::FullyEnforced => Support::Landlock { partly: false },
            RulesetStatus::PartiallyEnforced => Support::Landlock { partly: true },
            RulesetStatus::NotEnforced => Support::None(
                "this kernel has no Landlock (Linux 5.13 or later, with landlock in the lsm= list)".into(),
            ),
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

/// Why rules could not be built (a granted path that cannot be opened is skipped, not an error).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the sandbox: {0}")]
pub struct SandboxError(String);

/// Builds the rules for `spec` (before the fork).
pub fn prepare(spec: &Spec) -> Result<Prepared, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError(e.to_string());
    let abi = ABI_WANTED;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if !spec.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let created = ruleset
        .create()
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(
            existing(&spec.readable),
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rules(landlock::path_beneath_rules(
            existing(&spec.writable),
            AccessFs::from_all(abi),
        ))
        .map_err(err)?;
    let filter = if spec.network {
        None
    } else {
        Some(no_network_filter()?)
    };
    Ok(Prepared {
        ruleset: Mutex::new(Some(created)),
        filter,
    })
}

fn existing(paths: &[PathBuf]) -> Vec<&Path> {
    paths
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect()
}

/// seccomp: `socket()` for anything but Unix sockets fails with EACCES, and io_uring (which could
/// open sockets without `socket()`) is off. Landlock's TCP rules alone would leave UDP open.
fn no_network_filter() -> Result<seccompiler::BpfProgram, SandboxError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    let e = |e: seccompiler::BackendError| SandboxError(e.to_string());
    let not_unix = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)
        .map_err(e)?;
    let rules = [
        (
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(e)?],
        ),
        (libc::SYS_io_uring_setup, vec![]),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err: seccompiler::BackendError| SandboxError(err.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(e)?;
    filter.try_into().map_err(e)
}

/// Makes the child `cmd` starts apply `prepared` to itself just before exec.
pub fn install(cmd: &mut tokio::process::Command, prepared: Prepared) {
    let prepared = Arc::new(prepared);
    // SAFETY: the closure runs in the forked child before exec. It takes an already-built
    // ruleset out of a mutex no other thread of the child can hold (the child has one thread),
    // and makes the prctl/landlock/seccomp system calls; it builds nothing new.
    unsafe {
        cmd.pre_exec(move || {
            let ruleset = prepared
                .ruleset
                .lock()
                .map_err(|_| std::io::Error::other("sandbox lock"))?
                .take();
            if let Some(r) = ruleset {
                r.restrict_self()
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            if let Some(f) = &prepared.filter {
                seccompiler::apply_filter(f).map_err(|e| std::io::Error::other(e.to_string()))?;
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

/// Folders every program needs to read: the system, and the runtimes children are written in.
pub fn system_paths() -> Vec<PathBuf> {
    [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/sbin",
        "/etc",
        "/opt",
        "/nix/store",
        "/proc",
        "/sys",
        "/dev",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}

/// Device files every program may write (`/dev/null` and friends).
pub fn device_paths() -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/urandom",
        "/dev/random",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}

/// Where `program` is installed, to be readable: for `/x/node/bin/node` the whole `/x/node`
/// (its libraries and modules), following symlinks (`node_modules/.bin/claude` → the package).
pub fn install_prefix(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in [Some(program.to_path_buf()), std::fs::canonicalize(program).ok()]
        .into_iter()
        .flatten()
    {
        if let Some(dir) = p.parent() {
            let prefix = if dir.file_name().is_some_and(|n| n == "bin" || n == ".bin") {
                dir.parent().unwrap_or(dir)
            } else {
                dir
            };
            out.push(prefix.to_path_buf());
        }
    }
    out
}
