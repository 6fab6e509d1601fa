//! Running `tabd run` in a test: start, await READY=1 on a real sd-notify socket, signal, stop.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::fake_model::FakeModel;
use super::{wire, TestVault};

/// The settle time the daemon tests configure.
pub const SETTLE_MS: u64 = 300;

/// A config for fast daemon tests; `limits` lines go into the `[limits]` table.
pub fn daemon_config(limits: &str) -> String {
    format!(
        "[limits]\nmin_interval = \"0s\"\n{limits}\n[inbox]\nsettle_ms = {SETTLE_MS}\ntyping_settle_s = 1\n[daemon]\nshutdown_grace_s = 1\n"
    )
}

/// A vault whose stock roles never fire on schedule, using `fake` (Anthropic's wire format),
/// with `config` as the config's tail.
pub fn vault_with(fake: &FakeModel, config: &str) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.use_model(fake, "anthropic", config);
    v
}

/// A vault + fake model answering "ok" to everything, configured for fast tests.
pub fn setup(limits: &str) -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(limits));
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    (v, fake)
}

/// Waits until the daemon's live view of `role` satisfies `cond`, written after generation
/// `after` (so it reflects what happened since).
pub fn wait_live(
    v: &TestVault,
    role: &str,
    after: u64,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) {
    wait_until(Duration::from_secs(20), what, || {
        v.generation() > after && cond(&v.live(role))
    });
}

/// Waits until no role is running and no role has anything ready, settling, queued or pending:
/// from then on nothing more can happen without a new event. (A status written while a run is in
/// flight says `running`; the one written after it ends reflects the scan and dispatch that
/// followed. A note another run just wrote may still be settling then: it runs soon, so it is
/// not idle.)
pub fn wait_idle(v: &TestVault) {
    wait_until(Duration::from_secs(20), "the daemon idle", || {
        let Some(s) = v.status_json() else { return false };
        s["roles"].as_array().is_some_and(|roles| {
            roles.iter().all(|r| {
                let l = &r["live"];
                l.is_null()
                    || (l["running"] == false
                        && l["ready"] == 0
                        && l["settling"] == 0
                        && l["queued_slots"] == 0
                        && l["watch_pending"] == 0)
            })
        })
    });
}

pub struct Daemon {
    pub child: Child,
    pub stderr_path: PathBuf,
    socket: UnixDatagram,
}

impl Daemon {
    /// Starts the daemon and waits for READY=1.
    pub fn start(v: &TestVault) -> Self {
        Self::start_with_env(v, &[])
    }

    /// Like `start`, with extra environment variables.
    pub fn start_with_env(v: &TestVault, env: &[(&str, &str)]) -> Self {
        let mut cmd = v.command(&["run"]);
        cmd.env("TABD_LOG", "info");
        for (k, val) in env {
            cmd.env(k, val);
        }
        Self::start_command(v, cmd)
    }

    /// Starts `cmd` (a `tabd run` of `v`) and waits for READY=1.
    pub fn start_command(v: &TestVault, mut cmd: std::process::Command) -> Self {
        let sock_path = v.dir.path().join(format!("notify-{}.sock", rand_suffix()));
        let socket = UnixDatagram::bind(&sock_path).expect("bind notify socket");
        socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let stderr_path = v.dir.path().join(format!("daemon-{}.log", rand_suffix()));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let child = cmd
            .env("NOTIFY_SOCKET", &sock_path)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn tabd run");
        super::context::daemon_started(&stderr_path);
        let mut d = Self {
            child,
            stderr_path,
            socket,
        };
        d.await_message("READY=1", Duration::from_secs(20));
        d
    }

    /// Waits for an sd-notify message containing `what`.
    pub fn await_message(&mut self, what: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if msg.contains(what) {
                        return msg;
                    }
                }
                Err(_) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        panic!("daemon exited ({status}) before {what}:\n{}", self.stderr());
                    }
                }
            }
        }
        panic!("no {what} from the daemon within {timeout:?}:\n{}", self.stderr());
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        let pid = rustix::process::Pid::from_raw(self.pid()).unwrap();
        let sig = rustix::process::Signal::from_named_raw(sig).unwrap();
        // The daemon may have ended already: that is for the test's own checks to find.
        rustix::process::kill_process(pid, sig).ok();
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Waits for the process to exit; returns its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                panic!("daemon did not exit within {timeout:?}:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` (a tabd command of `v`) with `TABD_FAULTS=point` and waits until it aborts there
/// (SIGABRT, like `kill -9`: no cleanup), as its stderr says. Returns that stderr.
pub fn run_to_abort(v: &TestVault, mut cmd: std::process::Command, point: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let stderr_path = v.dir.path().join(format!("aborted-{}.log", rand_suffix()));
    let stderr = std::fs::File::create(&stderr_path).unwrap();
    let mut child = cmd
        .env("TABD_FAULTS", point)
        .env("TABD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn tabd");
    super::context::daemon_started(&stderr_path);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "tabd did not abort at {point} within 30 s:\n{}",
                super::context::describe()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "tabd should have aborted at {point} ({status}):\n{text}"
    );
    assert!(
        text.contains(&format!("TABD_FAULTS: aborting at {point}")),
        "aborted elsewhere than {point}:\n{text}"
    );
    text
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Polls `cond` until true (an observable state), panicking with `what` after `timeout` — and with
/// what a person needs to see why: the end of the test's daemon's stderr and the vault's files.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            panic!(
                "timed out after {timeout:?} waiting for: {what}\n{}",
                super::context::describe()
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}
