//! Real `nats-server -js` processes for the cluster tests (docs/spec.md §23): one, or three forming a
//! cluster with routes, on free loopback ports, their storage in a temp folder; ready once a
//! client gets JetStream's account info from each (a leader is elected), killed on drop.
//!
//! Without a `nats-server` (Debian's package; `.ci/run` installs it) the tests that need one
//! skip and say so — unless `TABD_REQUIRE_NATS=1`, which `.ci/run` sets when the install
//! worked: then a missing server fails them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long servers get to start and elect a JetStream leader. A restarted server that finds a
/// peer still down waits for a metadata leader; on a machine at load 10 (two cores, five builds)
/// that took over 30 s once while it takes about 1 s on a quiet one: this is a bound for a hung
/// server, not a speed to meet.
const READY_WITHIN: Duration = Duration::from_secs(90);

/// The `nats-server` binary, if this machine has one (`TABD_NATS_SERVER` names another).
pub fn binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TABD_NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// The servers for a test, or `None` (the test returns early) when there is no `nats-server`
/// and it is not required.
fn available(test: &str) -> Option<PathBuf> {
    match binary() {
        Some(b) => Some(b),
        None if std::env::var("TABD_REQUIRE_NATS").is_ok_and(|v| v == "1") => {
            panic!("TABD_REQUIRE_NATS=1, but there is no nats-server (apt-get install nats-server)")
        }
        None => {
            eprintln!("{test}: skipped: no nats-server on this machine (apt-get install nats-server)");
            None
        }
    }
}

/// A free TCP port on the loopback that nobody listens on (the OS picks it), for a URL that
/// must find no server.
pub fn free_port() -> u16 {
    let held = PortHold::new();
    held.port
}

/// A loopback port kept for a set's server for the whole test, even while the server is down: a
/// socket bound to it with `SO_REUSEADDR` that never listens. Linux then hands the port to no
/// other socket (another test's port-0 pick, or an outgoing connection's own end, of which
/// the cluster tests make hundreds from the same range), yet the server, which binds with
/// `SO_REUSEADDR` too, binds and listens on it, and a client connecting while the server is
/// down is refused as before. Without it, a server killed for an outage found its port taken
/// when it started again, and exited (stop 47's CI, `Nats::restart`).
struct PortHold {
    port: u16,
    _socket: tokio::net::TcpSocket,
}

impl PortHold {
    fn new() -> PortHold {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("a free loopback port");
        let port = socket.local_addr().expect("its address").port();
        PortHold {
            port,
            _socket: socket,
        }
    }
}

/// One server of a test's set.
struct Server {
    name: String,
    port: u16,
    config: PathBuf,
    child: Option<Child>,
    log: PathBuf,
}

/// One or three running servers; killed (and their storage removed) on drop.
pub struct Nats {
    servers: Vec<Server>,
    binary: PathBuf,
    pub dir: tempfile::TempDir,
    /// This set's own user and password (`tabd:<secret>`) and cluster name: tests run side by
    /// side, and a port one set let go (a server killed, or one that exited) may be bound by
    /// another's server a moment later. Without them, a device of one test reconnected to the
    /// other test's server, and routes joined the two sets into one cluster; the two tests'
    /// daemons (vault "vault", devices "laptop", "desktop", "server", role "tick") then claimed
    /// each other's slots (`cluster_daemons::three_devices_run_a_hundred_slots_exactly_once` ran
    /// 99 of 100 beside the outage test, "another tabd also calls itself \"server\"").
    secret: String,
    /// The set's client and route ports, kept while the set lives (see `PortHold`).
    _holds: Vec<PortHold>,
}

impl Nats {
    /// One server, or `None` when the test should skip.
    pub fn one(test: &str) -> Option<Nats> {
        Self::start(test, 1)
    }

    /// Three servers in one cluster, or `None` when the test should skip.
    pub fn three(test: &str) -> Option<Nats> {
        Self::start(test, 3)
    }

    fn start(test: &str, n: usize) -> Option<Nats> {
        let binary = available(test)?;
        let all: Vec<usize> = (0..n).collect();
        // The set's ports are held for it (`PortHold`); a server that exits as it starts anyway
        // (a program that binds its port by number) makes the set start again, on other ports.
        let mut attempt = 1;
        loop {
            let mut nats = Self::set(binary.clone(), n);
            match nats.wait_ready(&all) {
                Ok(()) => return Some(nats),
                Err(exited) if attempt < 3 => {
                    eprintln!("{test}: {exited}; the servers start again on other ports");
                    attempt += 1;
                }
                Err(exited) => panic!("{exited}:\n{}", nats.logs()),
            }
        }
    }

    /// `n` servers started on free ports (not ready yet).
    fn set(binary: PathBuf, n: usize) -> Nats {
        let dir = tempfile::tempdir().expect("temp dir");
        let secret = format!("{:016x}", rand::random::<u64>());
        let holds: Vec<PortHold> = (0..2 * n).map(|_| PortHold::new()).collect();
        let ports: Vec<(u16, u16)> = holds.chunks(2).map(|p| (p[0].port, p[1].port)).collect();
        let servers = (0..n)
            .map(|i| {
                let name = format!("n{}", i + 1);
                let config = dir.path().join(format!("{name}.conf"));
                std::fs::write(&config, server_config(&name, dir.path(), &ports, i, &secret))
                    .expect("server config");
                Server {
                    log: dir.path().join(format!("{name}.log")),
                    name,
                    port: ports[i].0,
                    config,
                    child: None,
                }
            })
            .collect();
        let mut nats = Nats {
            servers,
            binary,
            dir,
            secret,
            _holds: holds,
        };
        for i in 0..n {
            nats.spawn(i);
        }
        nats
    }

    fn spawn(&mut self, i: usize) {
        let s = &mut self.servers[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&s.log)
            .expect("server log");
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(&s.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        s.child = Some(child);
    }

    /// Every server's client URL, with this set's user and password.
    pub fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("nats://tabd:{}@127.0.0.1:{}", self.secret, s.port))
            .collect()
    }

    /// The `[cluster]` table of a device's config.
    pub fn config(&self, device: &str, lease_s: u64, extra: &str) -> String {
        let urls: Vec<String> = self.urls().iter().map(|u| format!("\"{u}\"")).collect();
        format!(
            "[cluster]\nnats = [{}]\ndevice = \"{device}\"\nlease_s = {lease_s}\n{extra}",
            urls.join(", ")
        )
    }

    /// Kills server `i` (SIGKILL) and waits for it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts server `i` again (with its storage) and waits until the set answers.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        if let Err(exited) = self.wait_ready(&[i]) {
            panic!("{exited}:\n{}", self.logs());
        }
    }

    /// Everything the servers wrote so far.
    pub fn whole_logs(&self) -> String {
        self.servers
            .iter()
            .map(|s| std::fs::read_to_string(&s.log).unwrap_or_default())
            .collect()
    }

    /// What the servers wrote, for a failing test's message.
    pub fn logs(&self) -> String {
        self.servers
            .iter()
            .map(|s| {
                let text = std::fs::read_to_string(&s.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "--- {} ---\n{}",
                    s.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until each of `which` answers JetStream's account info (its cluster has a leader);
    /// `Err` when one exited instead (its port was taken).
    fn wait_ready(&mut self, which: &[usize]) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let deadline = Instant::now() + READY_WITHIN;
        for &i in which {
            let url = self.urls()[i].clone();
            loop {
                if rt.block_on(answers(&url)) {
                    break;
                }
                let s = &mut self.servers[i];
                if let Some(Ok(Some(status))) = s.child.as_mut().map(|c| c.try_wait()) {
                    return Err(format!("nats-server {} exited as it started ({status})", s.name));
                }
                assert!(
                    Instant::now() < deadline,
                    "nats-server {} did not become ready within {READY_WITHIN:?}:\n{}",
                    self.servers[i].name,
                    self.logs()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

/// Options that log in to a set's servers as `url` says (its user and password).
pub fn login(url: &str) -> async_nats::ConnectOptions {
    let parsed = reqwest::Url::parse(url).expect("a server URL");
    let pass = parsed.password().unwrap_or_default().to_string();
    async_nats::ConnectOptions::with_user_and_password(parsed.username().to_string(), pass)
}

/// A client of server `i` of `nats`, logged in.
pub async fn client(nats: &Nats, i: usize) -> async_nats::Client {
    let url = nats.urls()[i].clone();
    login(&url)
        .connect(url.as_str())
        .await
        .expect("a client of the test's server")
}

/// Whether the server at `url` takes a connection and answers JetStream's account info.
async fn answers(url: &str) -> bool {
    let connect = login(url)
        .connection_timeout(Duration::from_millis(500))
        .connect(url);
    let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(1), connect).await else {
        return false;
    };
    matches!(
        tokio::time::timeout(
            Duration::from_secs(2),
            tabd::capabilities::cluster::jetstream_ready(&client)
        )
        .await,
        Ok(Ok(()))
    )
}

impl Drop for Nats {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
    }
}

/// One server's config: JetStream with its storage under `dir`, routes to the others, the set's
/// own user and password for clients, and its own cluster name (a route to another set's server
/// is refused: the names differ; see `Nats::secret`).
fn server_config(name: &str, dir: &Path, ports: &[(u16, u16)], i: usize, secret: &str) -> String {
    let store = dir.join(format!("{name}-js"));
    let mut text = format!(
        "server_name: {name}\nlisten: \"127.0.0.1:{}\"\nauthorization {{\n  user: tabd\n  password: \"{secret}\"\n}}\njetstream {{\n  store_dir: \"{}\"\n  max_memory_store: 64MB\n  max_file_store: 256MB\n}}\n",
        ports[i].0,
        store.display()
    );
    if ports.len() > 1 {
        let routes: Vec<String> = ports
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, (_, route))| format!("\"nats-route://127.0.0.1:{route}\""))
            .collect();
        text.push_str(&format!(
            "cluster {{\n  name: tabdtest{secret}\n  listen: \"127.0.0.1:{}\"\n  routes: [{}]\n}}\n",
            ports[i].1,
            routes.join(", ")
        ));
    }
    text
}

/// While a server is down its port stays the set's: a socket that does not share it (an
/// outgoing connection's own end, another test's pick) cannot bind it, so the server starts on
/// it again. Without the hold, the bind below succeeds and, had it been a connection, the
/// restart would fail with "exited as it started".
#[test]
fn a_killed_servers_port_is_kept_for_it_and_it_starts_there_again() {
    let Some(mut nats) = Nats::one("a_killed_servers_port_is_kept_for_it") else {
        return;
    };
    let port = nats.servers[0].port;
    nats.kill(0);
    let stranger = tokio::net::TcpSocket::new_v4().expect("a socket");
    let taken = stranger.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(
        taken.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::AddrInUse),
        "a stranger bound port {port} of a server that is down"
    );
    drop(stranger);
    nats.restart(0);
    let url = nats.urls()[0].clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    assert!(rt.block_on(answers(&url)), "the server answers again");
}
