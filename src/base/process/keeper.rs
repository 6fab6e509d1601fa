//! The keeper: a small process between tabd and each child, so that every descendant ends with
//! the child (docs/spec.md §20) and none has a terminal.
//!
//! A process group is not enough: a grandchild that calls `setsid()` leaves the group, and a
//! group kill misses it, so it outlives tabd. So the child tabd forks does not exec at once. It
//! starts a session of its own (no controlling terminal for anyone below: no `/dev/tty`, no
//! `TIOCSTI` into the person's shell), makes itself a *subreaper* (every orphan below it is
//! re-parented to it, whatever session or group it moved to), forks the real child (the tenant,
//! in a process group of its own), and waits. When the tenant exits, when tabd asks, or when tabd
//! itself dies (even by `kill -9`: the parent-death signal), it kills the tenant's group and then
//! every process left below it, round after round until it has no child left, and exits the way
//! the tenant did.
//!
//! The keeper is a fork of a multi-threaded process that never execs: it may only make system
//! calls (no allocation, no locks, no logging), so everything here is raw `libc`.
//!
//! Signals tabd sends the keeper: `SIGTERM` — passed on to the tenant's group (stop gracefully);
//! `SIGUSR1` — kill everything now. Its parent dying reaches it as `SIGHUP`.
//!
//! The keeper names itself `tabd-keeper` (its `comm`, as `ps` and `/proc/PID/comm` show it): with
//! its executable (tabd's, as it never execs) and its session of its own, that is how a later tabd
//! tells a keeper a killed tabd left behind from any other process (`reap_orphans`).

// The one module made of unsafe code: between fork and exec only raw system calls are sound,
// and each function here says under `# Safety` what its caller must hold.
#![allow(
    unsafe_code,
    reason = "raw system calls between fork and exec: each function's # Safety"
)]

use std::io;

/// The keeper's name (`comm`, at most 15 bytes).
pub(super) const NAME: &str = "tabd-keeper";

/// What the keeper waits for.
const KEEPER_SIGNALS: [libc::c_int; 6] = [
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
];

/// Runs in the child tabd forked, before exec (registered with `pre_exec`, first of all). Returns
/// only in the tenant, which goes on to run the program; the keeper never returns.
/// `arm_death`: tabd's death reaches the keeper (false only for the test of a keeper that missed
/// it: `TABD_FAULTS=keeper-misses-parent-death`).
///
/// # Safety
/// Only between fork and exec: it forks, and the keeper side exits without returning.
pub(super) unsafe fn become_keeper(arm_death: bool) -> io::Result<()> {
    let tabd = libc::getppid();
    if libc::setsid() < 0 {
        return Err(io::Error::last_os_error());
    }
    if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 {
        return Err(io::Error::last_os_error());
    }
    // Before the tenant is forked: the tenant is named by its own exec.
    libc::prctl(libc::PR_SET_NAME, c"tabd-keeper".as_ptr(), 0, 0, 0);
    // tabd's death (its thread's, really: checked below against getppid) arrives as SIGHUP.
    if arm_death {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGHUP, 0, 0, 0);
    }
    if libc::getppid() != tabd {
        libc::_exit(1); // tabd died before the signal was armed
    }
    let mut waited: libc::sigset_t = std::mem::zeroed();
    let mut before: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut waited);
    for s in KEEPER_SIGNALS {
        libc::sigaddset(&mut waited, s);
    }
    // Blocked before the fork, so no signal is lost between the fork and the wait.
    libc::pthread_sigmask(libc::SIG_BLOCK, &waited, &mut before);
    let tenant = libc::fork();
    if tenant < 0 {
        return Err(io::Error::last_os_error());
    }
    if tenant == 0 {
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        // A group of its own inside the keeper's session: tabd's "stop" reaches exactly it.
        if libc::setpgid(0, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    keep(tenant, tabd, &waited)
}

/// The keeper's life: hold no file (the tenant's pipes and std's exec-error pipe must close when
/// the tenant's copies do), wait, then sweep and exit as the tenant did.
unsafe fn keep(tenant: libc::pid_t, tabd: libc::pid_t, waited: &libc::sigset_t) -> ! {
    close_every_file();
    let mut status: Option<libc::c_int> = None;
    loop {
        let sig = libc::sigwaitinfo(waited, std::ptr::null_mut());
        match sig {
            libc::SIGCHLD if reap_finished(tenant, &mut status) => break,
            libc::SIGTERM => {
                libc::kill(-tenant, libc::SIGTERM);
            }
            libc::SIGUSR1 => break,
            libc::SIGHUP if libc::getppid() != tabd => break,
            _ => {} // SIGINT, SIGQUIT, a spurious SIGHUP, EINTR: the keeper does not stop for them
        }
    }
    sweep(tenant, &mut status);
    exit_as(status)
}

/// Reaps every child that has exited; true once the tenant is among them.
unsafe fn reap_finished(tenant: libc::pid_t, status: &mut Option<libc::c_int>) -> bool {
    loop {
        let mut st: libc::c_int = 0;
        let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
        if pid <= 0 {
            return status.is_some();
        }
        if pid == tenant {
            *status = Some(st);
        }
    }
}

/// Kills the tenant's group and every process below the keeper, until none is left. Each round
/// kills what is a child now and waits for one to die; the orphans of the dead are re-parented
/// to the keeper (it is their subreaper) and die in the next round.
unsafe fn sweep(tenant: libc::pid_t, status: &mut Option<libc::c_int>) {
    loop {
        libc::kill(-tenant, libc::SIGKILL);
        kill_children();
        let mut st: libc::c_int = 0;
        let pid = libc::waitpid(-1, &mut st, 0);
        if pid == tenant {
            *status = Some(st);
        }
        if pid < 0 && *libc::__errno_location() == libc::ECHILD {
            return;
        }
    }
}

/// SIGKILLs every child of the keeper: listed by the kernel in `/proc/thread-self/children`,
/// else found by reading every `/proc/PID/stat`.
unsafe fn kill_children() {
    if !for_each_listed_child(|pid| {
        libc::kill(pid, libc::SIGKILL);
    }) {
        for_each_child_by_scan(|pid| {
            libc::kill(pid, libc::SIGKILL);
        });
    }
}

/// Calls `f` with each pid in `/proc/thread-self/children`; false when the kernel has no such file
/// (CONFIG_PROC_CHILDREN off).
unsafe fn for_each_listed_child(mut f: impl FnMut(libc::pid_t)) -> bool {
    let fd = libc::open(
        c"/proc/thread-self/children".as_ptr(),
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 4096];
    let mut pid: libc::pid_t = 0;
    let mut in_number = false;
    loop {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add((b - b'0') as libc::pid_t);
                in_number = true;
            } else if in_number {
                f(pid);
                pid = 0;
                in_number = false;
            }
        }
    }
    if in_number {
        f(pid);
    }
    libc::close(fd);
    true
}

/// Calls `f` with each process whose parent is the keeper, read from `/proc/PID/stat`.
unsafe fn for_each_child_by_scan(mut f: impl FnMut(libc::pid_t)) {
    let me = libc::getpid();
    let dir = libc::open(
        c"/proc".as_ptr(),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
    );
    if dir < 0 {
        return;
    }
    let mut buf = [0u8; 8192];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) as isize;
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name[].
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &buf[at + 19..(at + reclen).min(n as usize)];
            if let Some(pid) = decimal(name) {
                if parent_of(pid) == Some(me) {
                    f(pid);
                }
            }
            at += reclen;
        }
    }
    libc::close(dir);
}

/// The number a NUL-terminated name spells, if it is all digits.
fn decimal(name: &[u8]) -> Option<libc::pid_t> {
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    let digits = &name[..end];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0 as libc::pid_t, |n, d| {
        n.checked_mul(10)?.checked_add((d - b'0') as libc::pid_t)
    })
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the state, after the last `)`).
unsafe fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let at = prefix.len() + write_decimal(&mut path[prefix.len()..], pid);
    path.get_mut(at..at + 6)?.copy_from_slice(b"/stat\0");
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 512];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    if n <= 0 {
        return None;
    }
    let text = &buf[..n as usize];
    let close = text.iter().rposition(|b| *b == b')')?;
    // ") S 1234 …": skip ") ", the state and a space.
    let rest = text.get(close + 4..)?;
    let end = rest.iter().position(|b| *b == b' ')?;
    decimal(&rest[..end])
}

/// Writes `n` in decimal at the start of `out`; returns how many bytes.
fn write_decimal(out: &mut [u8], n: libc::pid_t) -> usize {
    let mut digits = [0u8; 12];
    let mut len = 0;
    let mut v = n.unsigned_abs();
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 || len == digits.len() {
            break;
        }
    }
    for i in 0..len.min(out.len()) {
        out[i] = digits[len - 1 - i];
    }
    len.min(out.len())
}

/// Closes every file the keeper inherited.
unsafe fn close_every_file() {
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) == 0 {
        return;
    }
    // Before Linux 5.9: one by one, up to the limit of open files.
    let mut limit: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        4096
    };
    for fd in 0..max {
        libc::close(fd);
    }
}

/// Exits with the tenant's exit code, or dies by its signal.
unsafe fn exit_as(status: Option<libc::c_int>) -> ! {
    match status {
        Some(st) if libc::WIFEXITED(st) => libc::_exit(libc::WEXITSTATUS(st)),
        Some(st) if libc::WIFSIGNALED(st) => {
            let sig = libc::WTERMSIG(st);
            libc::signal(sig, libc::SIG_DFL);
            let mut only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut only);
            libc::sigaddset(&mut only, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        }
        _ => libc::_exit(128 + libc::SIGKILL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_names_and_numbers() {
        assert_eq!(decimal(b"1234\0junk"), Some(1234));
        assert_eq!(decimal(b"self\0"), None);
        assert_eq!(decimal(b"\0"), None);
        let mut out = [0u8; 12];
        let n = write_decimal(&mut out, 40_961);
        assert_eq!(&out[..n], b"40961");
        let n = write_decimal(&mut out, 7);
        assert_eq!(&out[..n], b"7");
    }

    #[test]
    fn the_parent_of_a_process_is_read_from_proc() {
        let me = std::process::id() as libc::pid_t;
        let parent = unsafe { libc::getppid() };
        assert_eq!(unsafe { parent_of(me) }, Some(parent));
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        assert_eq!(unsafe { parent_of(pid) }, Some(me));
        let mut seen = Vec::new();
        unsafe { for_each_child_by_scan(|p| seen.push(p)) };
        assert!(seen.contains(&pid), "{seen:?} lacks {pid}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
