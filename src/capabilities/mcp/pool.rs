//! `keep_alive` servers (docs/spec.md §14): started once by the daemon, supervised — restarted with
//! backoff (1 s, doubling, at most 5 minutes) when they exit — and stopped with the daemon.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::client::{Connection, ServerDown};
use crate::base::process::Launcher;
use crate::setup::config::mcp::ServerConfig;

const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The current state of one supervised server.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Connection>>,
    last_error: Option<ServerDown>,
    attempts: u64,
    /// When the supervisor tries again, while the server is down.
    next_try: Option<tokio::time::Instant>,
}

/// A run waits for a restart due within this long rather than going on without the server.
const WAIT_FOR_RESTART: Duration = Duration::from_secs(5);

struct Supervised {
    config: Arc<ServerConfig>,
    slot: Mutex<Slot>,
    /// Grows with every start attempt (`get` waits for the first).
    tried: tokio::sync::watch::Sender<u64>,
}

/// The daemon's keep-alive servers.
pub struct Pool {
    servers: HashMap<String, Arc<Supervised>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Pool {
    /// Starts a supervisor for every `keep_alive` server of `servers`.
    pub fn start(
        servers: &std::collections::BTreeMap<String, ServerConfig>,
        launcher: &Launcher,
    ) -> Arc<Pool> {
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut map = HashMap::new();
        let mut tasks = Vec::new();
        for config in servers.values().filter(|s| s.keep_alive) {
            let (tried, _) = tokio::sync::watch::channel(0);
            let s = Arc::new(Supervised {
                config: Arc::new(config.clone()),
                slot: Mutex::new(Slot::default()),
                tried,
            });
            map.insert(config.name.clone(), s.clone());
            tasks.push(tokio::spawn(supervise(s, launcher.clone(), stop.subscribe())));
        }
        Arc::new(Pool {
            servers: map,
            stop,
            tasks: Mutex::new(tasks),
        })
    }

    /// The server's connection, waiting for its first start if it is still starting.
    pub async fn get(&self, name: &str) -> Result<Arc<Connection>, ServerDown> {
        let Some(s) = self.servers.get(name) else {
            return Err(ServerDown {
                server: name.to_string(),
                why: "is not a keep_alive server".into(),
                stderr: String::new(),
            });
        };
        let mut tried = s.tried.subscribe();
        let limit = s.config.startup_timeout + Duration::from_secs(1);
        // A server not tried in time is taken as it is (down, with its reason, or starting).
        #[expect(clippy::let_underscore_must_use)]
        let _ = tokio::time::timeout(limit, tried.wait_for(|n| *n > 0)).await;
        // A server that just crashed is restarted in a second or two: wait for that attempt
        // rather than run without it (a crash loop backs off past this and is reported).
        let (seen, soon) = {
            let slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
            let down = slot.conn.as_ref().is_none_or(|c| c.is_closed());
            let soon = slot.next_try.filter(|at| {
                down && at.saturating_duration_since(tokio::time::Instant::now()) <= WAIT_FOR_RESTART
            });
            (slot.attempts, soon)
        };
        if let Some(at) = soon {
            // Likewise: the next try not done in time leaves the server as it is.
            #[expect(clippy::let_underscore_must_use)]
            let _ = tokio::time::timeout_at(at + limit, tried.wait_for(|n| *n > seen)).await;
        }
        let slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
        match (&slot.conn, &slot.last_error) {
            (Some(c), _) if !c.is_closed() => Ok(c.clone()),
            (_, Some(e)) => Err(e.clone()),
            _ => Err(ServerDown {
                server: name.to_string(),
                why: "is restarting".into(),
                stderr: String::new(),
            }),
        }
    }

    /// Each server: up or not, and why not.
    pub fn status(&self) -> Vec<(String, bool, Option<String>)> {
        let mut out: Vec<_> = self
            .servers
            .iter()
            .map(|(name, s)| {
                let slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
                let up = slot.conn.as_ref().is_some_and(|c| !c.is_closed());
                (
                    name.clone(),
                    up,
                    slot.last_error.as_ref().map(ToString::to_string),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// Stops every supervisor and its server.
    pub async fn shutdown(&self) {
        // Fails only when no supervisor listens any more: nothing is left to stop.
        #[expect(clippy::let_underscore_must_use)]
        let _ = self.stop.send(true);
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            // A supervisor that does not end in time is dropped; its servers go with their
            // handles (`Tenant`), and one that panicked has nothing left to stop.
            #[expect(clippy::let_underscore_must_use)]
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

async fn supervise(s: Arc<Supervised>, launcher: Launcher, mut stop: tokio::sync::watch::Receiver<bool>) {
    let name = s.config.name.clone();
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = tokio::select! {
            r = Connection::start(s.config.clone(), &launcher) => r,
            _ = stopped(&mut stop) => return,
        };
        match started {
            Ok(conn) => {
                tracing::info!("MCP server {name} is up (keep_alive)");
                backoff = Duration::from_secs(1);
                set(&s, Some(conn.clone()), None, backoff);
                tokio::select! {
                    _ = conn.closed() => {
                        let tail = conn.stderr.text();
                        tracing::warn!("MCP server {name} exited; restarting in {}s{}", backoff.as_secs(),
                            if tail.is_empty() { String::new() } else { format!("; its last output: {}", tail.replace('\n', " | ")) });
                        set(&s, None, Some(ServerDown { server: name.clone(), why: "exited; restarting".into(), stderr: tail }), backoff);
                        conn.stop().await;
                    }
                    _ = stopped(&mut stop) => {
                        conn.stop().await;
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::warn!("{e}; trying again in {}s", backoff.as_secs());
                set(&s, None, Some(e), backoff);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped(&mut stop) => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Resolves once the pool is stopping (the guard `wait_for` returns is not held across awaits).
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    // Fails only when the pool is gone, which is a stop too.
    #[expect(clippy::let_underscore_must_use)]
    let _ = stop.wait_for(|v| *v).await;
}

/// Records a start attempt's outcome; a failed one says when the next attempt comes (set in the
/// same lock, so a run never sees "down" without "restarting soon").
fn set(s: &Supervised, conn: Option<Arc<Connection>>, error: Option<ServerDown>, backoff: Duration) {
    let n = {
        let mut slot = s.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.next_try = conn.is_none().then(|| tokio::time::Instant::now() + backoff);
        slot.conn = conn;
        slot.last_error = error;
        slot.attempts += 1;
        slot.attempts
    };
    s.tried.send_replace(n);
}
