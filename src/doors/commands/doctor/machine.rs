//! This machine: the env file's mode, the systemd unit against this binary and vault, Landlock,
//! the clock, and the disk.

use std::path::{Path, PathBuf};

use super::{Check, Status};
use crate::base::environment;
use crate::doors::commands::service;
use crate::doors::commands::Workspace;

/// The env file (`~/.config/tabd/env`) holds the keys: readable by its owner only, and owned by
/// the person. What else its reader finds (a line it skips) is a warning; values never show.
pub(super) fn env_file(ws: &Workspace) -> Check {
    let name = "env_file";
    let Some(path) = environment::env_file_path(&ws.env) else {
        return Check::new(
            name,
            Status::Skipped,
            "HOME is not set, so there is no ~/.config/tabd/env",
        );
    };
    let Some(seen) = environment::inspect(&path) else {
        return Check::new(
            name,
            Status::Skipped,
            format!(
                "there is no {}: keys come from tabd's environment only (`tabd service install` makes the file, mode 600)",
                path.display()
            ),
        );
    };
    if !seen.exposed.is_empty() {
        let said: Vec<String> = seen.exposed.iter().map(ToString::to_string).collect();
        return Check::new(name, Status::Fix, said.join("; "));
    }
    if !seen.file.warnings.is_empty() {
        return Check::new(name, Status::Warning, seen.file.warnings.join("; "));
    }
    let names: Vec<&str> = seen.file.vars.iter().map(|(k, _)| k.as_str()).collect();
    Check::new(
        name,
        Status::Ok,
        format!(
            "{}: yours, mode 600; sets {}",
            path.display(),
            if names.is_empty() {
                "nothing".to_string()
            } else {
                names.join(", ")
            }
        ),
    )
}

/// What `tabd service install` does again, for a unit that runs the wrong thing.
const AGAIN: &str =
    "`tabd service install` again writes it for this binary and vault, then `systemctl --user restart tabd`";

/// The user unit runs this very binary, `run`, on this vault: after a move or an upgrade to
/// another place it runs the old one (or nothing), and on another vault it runs the wrong roles.
pub(super) fn unit(ws: &Workspace) -> Check {
    let name = "unit";
    let unit = match installed(ws) {
        Ok(u) => u,
        Err(said) => return said,
    };
    if let Some(wrong) = wrong_program(&unit) {
        return wrong;
    }
    let shown = unit.path.display();
    match unit_vault(ws, &unit) {
        UnitVault::This => {}
        UnitVault::Other(other) => {
            return Check::new(
                name,
                Status::Fix,
                format!(
                    "{shown} runs tabd on {other}, not on this vault ({}): {AGAIN}",
                    ws.root.display()
                ),
            )
        }
        UnitVault::ConfigElsewhere(config) => {
            return Check::new(
                name,
                Status::Ok,
                format!("{shown} runs this tabd, with the config {config} (on the vault that config names)"),
            )
        }
    }
    let whose = if unit.ours {
        ""
    } else {
        " (a unit you wrote: `tabd service install` leaves it alone)"
    };
    Check::new(
        name,
        Status::Ok,
        format!("{shown} runs this tabd on this vault{whose}"),
    )
}

/// The unit at its place, or the line that says there is none (or why it cannot be read).
fn installed(ws: &Workspace) -> Result<service::InstalledUnit, Check> {
    let skipped = |why: String| Check::new("unit", Status::Skipped, why);
    match service::installed_unit(&ws.env) {
        Ok(Some(u)) => Ok(u),
        Ok(None) if crate::base::process::find_program("systemctl", &ws.env).is_none() => Err(skipped(
            "no systemctl here, so no systemd unit runs tabd: run `tabd run` yourself (docs/operations.md)"
                .into(),
        )),
        Ok(None) => Err(skipped(format!(
            "no {}: `tabd service install` sets tabd up to run on its own",
            service::unit_path(&ws.env).map_or_else(|_| "tabd unit".into(), |p| p.display().to_string())
        ))),
        Err(e) => Err(skipped(format!("cannot tell: {}", e.message))),
    }
}

/// Why the unit does not run this binary's `tabd run`, if it does not.
fn wrong_program(unit: &service::InstalledUnit) -> Option<Check> {
    let shown = unit.path.display();
    let fix = |said: String| Some(Check::new("unit", Status::Fix, said));
    let Some(program) = unit.exec.first() else {
        return fix(format!("{shown} has no ExecStart= line: {AGAIN}"));
    };
    let this = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(p) => p,
        Err(e) => {
            return Some(Check::new(
                "unit",
                Status::Skipped,
                format!("cannot tell where this tabd binary is ({e})"),
            ))
        }
    };
    match std::fs::canonicalize(program) {
        Err(e) => fix(format!(
            "{shown} runs {program}, which is not there ({e}): {AGAIN}"
        )),
        Ok(runs) if runs != this => fix(format!(
            "{shown} runs {program}, not this tabd ({}): {AGAIN}",
            this.display()
        )),
        Ok(_) if unit.exec.get(1).map(String::as_str) != Some("run") => fix(format!(
            "{shown} runs tabd without `run`, so no daemon starts: {AGAIN}"
        )),
        Ok(_) => None,
    }
}

/// Which vault the unit's `tabd run` opens, as this command would resolve it.
enum UnitVault {
    This,
    /// Another folder (shown), or none at all.
    Other(String),
    /// It reads another config file (shown), which names its vault.
    ConfigElsewhere(String),
}

fn unit_vault(ws: &Workspace, unit: &service::InstalledUnit) -> UnitVault {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    if let Some(v) = unit.arg("--vault") {
        return match canonical(Path::new(v)) {
            Some(p) if p == ws.root => UnitVault::This,
            _ => UnitVault::Other(v.to_string()),
        };
    }
    // Without --vault the unit runs on the vault its config names (its --config, else the
    // default place: the config this command read, unless --config named another).
    if let Some(c) = unit.arg("--config") {
        if ws.config.path.as_deref().and_then(canonical) != canonical(Path::new(c)) {
            return UnitVault::ConfigElsewhere(c.to_string());
        }
    }
    match ws.config.vault.as_deref() {
        Some(v) if canonical(v).as_deref() == Some(ws.root.as_path()) => UnitVault::This,
        Some(v) => UnitVault::Other(v.display().to_string()),
        None => UnitVault::Other("no vault (its ExecStart has no --vault and the config names none)".into()),
    }
}

/// Landlock confines MCP servers and agent CLIs (docs/spec.md §20): without it they run unconfined,
/// and with `[sandbox] require = true` they do not start at all.
pub(super) fn landlock(ws: &Workspace) -> Check {
    let support = crate::base::sandbox::Probe::default().support();
    let said = support.describe();
    if support.enforced() {
        return Check::new("landlock", Status::Ok, said);
    }
    if ws.config.sandbox.require {
        return Check::new(
            "landlock",
            Status::Fix,
            format!(
                "{said}; [sandbox] require = true, so no MCP server or agent CLI starts here: a kernel with \
                 Landlock (Linux 5.13 or later, landlock in lsm=) runs them"
            ),
        );
    }
    Check::new(
        "landlock",
        Status::Warning,
        format!(
            "{said}; MCP servers and agent CLIs run unconfined: a kernel with Landlock (Linux 5.13 or later, \
             landlock in lsm=) confines them"
        ),
    )
}

/// Schedules fire by the system clock (and devices compare leases by it): is anything keeping it
/// right? What the kernel cannot say is said as unknown, not guessed.
pub(super) fn clock() -> Check {
    use crate::base::clock::TimeSync;
    match crate::base::clock::kernel_time_sync() {
        TimeSync::Synced => Check::new(
            "clock",
            Status::Ok,
            "synchronised (the kernel's error estimate is under 16 s, as `timedatectl` shows NTPSynchronized)",
        ),
        TimeSync::Unsynced => Check::new(
            "clock",
            Status::Warning,
            "the kernel says nothing keeps the clock in step, so schedules fire by a clock that may drift: turn \
             on time sync (`timedatectl set-ntp true`, or install chrony)",
        ),
        TimeSync::Unknown(why) => Check::new("clock", Status::Skipped, format!("cannot tell ({why})")),
    }
}

/// Below this much free space tabd's writes (logs, records, state) start to fail.
const FIX_BELOW: u64 = 100 * 1024 * 1024;
/// Below this much, or `WARN_BELOW_PERCENT`, a warning.
const WARN_BELOW: u64 = 1024 * 1024 * 1024;
const WARN_BELOW_PERCENT: u64 = 5;

/// Free space where tabd writes: the vault (notes, logs, records, state) and its own folder
/// outside it (`~/.local/state/tabd`: children's folders, the key), each file system once.
pub(super) fn disk(ws: &Workspace) -> Check {
    let state = ws.launcher(None).places().state;
    let places = [
        ("the vault".to_string(), ws.root.clone()),
        (state.display().to_string(), existing(&state)),
    ];
    let mut seen: Vec<(u64, String)> = Vec::new();
    let mut worst = Status::Ok;
    let mut said = Vec::new();
    for (what, path) in places {
        let fs = match rustix::fs::statvfs(&path) {
            Ok(fs) => fs,
            Err(e) => {
                said.push(format!("cannot tell for {what} ({e})"));
                worst = worst.max_with(Status::Warning);
                continue;
            }
        };
        if let Some((_, first)) = seen.iter().find(|(id, _)| *id == fs.f_fsid) {
            said.push(format!("{what}: the same file system as {first}"));
            continue;
        }
        seen.push((fs.f_fsid, what.clone()));
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        let total = fs.f_blocks.saturating_mul(fs.f_frsize);
        let percent = free.saturating_mul(100).checked_div(total).unwrap_or(100);
        let status = if free < FIX_BELOW {
            Status::Fix
        } else if free < WARN_BELOW || percent < WARN_BELOW_PERCENT {
            Status::Warning
        } else {
            Status::Ok
        };
        worst = worst.max_with(status);
        said.push(format!("{what}: {} free ({percent}%)", gib(free)));
    }
    let todo = match worst {
        Status::Fix => ": free some space, or tabd's logs, records and state cannot be written",
        Status::Warning => ": free some space before tabd's writes start to fail",
        Status::Ok | Status::Skipped => "",
    };
    Check::new("disk", worst, format!("{}{todo}", said.join("; ")))
}

impl Status {
    /// The graver of two.
    fn max_with(self, other: Status) -> Status {
        let rank = |s: Status| match s {
            Status::Skipped => 0,
            Status::Ok => 1,
            Status::Warning => 2,
            Status::Fix => 3,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// `path`, or the nearest folder above it that exists (tabd makes its folder when it needs it).
fn existing(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| p.exists())
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

fn gib(bytes: u64) -> String {
    let gib = bytes as f64 / (1024.0 * 1024.0 * 1024.0);
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}
