//! Triggers from the world (`[http]`, docs/spec.md §27): `POST /hooks/<role>`, signed with the hook's
//! secret (`X-Hub-Signature-256`), becomes an inbox note of that role, written the way a
//! person's note is; the role runs as for any note.
//!
//! - `serve` — the listener: hyper's HTTP/1 server, its timeouts, how many connections;
//! - `answer` — one request: the hook, the body within its cap and time, the signature, a
//!   delivery seen before, the role's rate, in that order; empty answers;
//! - `signature` — the HMAC-SHA256 check; `rate` — deliveries a role takes a minute;
//! - `deliver` — the role's inbox as its file says now, the note created there, the id kept;
//!   `seen` — the delivery ids written (`.tabd/webhooks.seen`, signed lines, the last 10,000);
//! - `note` — the note's text (`github`: a GitHub event's readable parts).
//!
//! The server is a task of its own: the daemon starts it with `[http]` and stops it before its
//! runs. A delivery never waits for a run, and a run never waits for a delivery.

pub mod answer;
pub mod deliver;
pub mod github;
pub mod note;
pub mod rate;
pub mod seen;
pub mod serve;
pub mod signature;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::base::clock::Clock;
use crate::base::signing::Key;
use crate::base::vault::Vault;
use crate::setup::config::http::HttpConfig;
use crate::setup::role::LoadContext;

/// The webhook server, running.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}{}", listen_advice(source))]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}; which deliveries were written is unknown, so none is taken until it can be read")]
    Seen(#[from] seen::Unreadable),
}

/// What to do about a listener that cannot be made.
fn listen_advice(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            " (another program, or another tabd, listens there: choose another port in [http] listen)"
        }
        std::io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges: choose one above)",
        std::io::ErrorKind::AddrNotAvailable => " (this machine has no such address)",
        _ => "",
    }
}

/// What the server writes with: the vault and tabd's key, how role files are read, the clock.
pub struct Writes {
    pub vault: Arc<Vault>,
    pub key: Arc<Key>,
    pub roles: LoadContext,
    pub clock: Arc<dyn Clock>,
}

impl Server {
    /// Listens where `config` says and serves on a task of its own (call it inside the runtime).
    pub fn start(config: &HttpConfig, writes: Writes) -> Result<Self, StartError> {
        let listen = |source| StartError::Listen {
            addr: config.listen,
            source,
        };
        let (seen, forged) = seen::DeliveryIds::load(&writes.vault, &writes.key, seen::KEEP)?;
        if forged > 0 {
            tracing::warn!(
                "webhooks: {forged} line(s) of {} are not tabd's (edited, forged, or cut off by a crash); ignored",
                seen::file()
            );
        }
        let std_listener = std::net::TcpListener::bind(config.listen).map_err(listen)?;
        std_listener.set_nonblocking(true).map_err(listen)?;
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(listen)?;
        let addr = listener.local_addr().map_err(listen)?;
        let answerer = answer::Answerer {
            hooks: config
                .hooks
                .iter()
                .map(|(name, hook)| (name.clone(), hook.secret.as_bytes().to_vec()))
                .collect(),
            max_body: config.max_body,
            timeout: config.timeout,
            rate: Mutex::new(rate::Rate::new(config.per_minute)),
            desk: Arc::new(deliver::Desk::new(writes.vault, writes.key, writes.roles, seen)),
            clock: writes.clock,
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve::serve(listener, Arc::new(answerer), stopped));
        Ok(Self {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Where it listens (with the port the system chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes no more connections and waits for answers under way (a few seconds at most).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            // The task may have ended already: then there is nothing to stop.
            stop.send(()).ok();
        }
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                tracing::warn!("webhooks: the server's task ended badly: {e}");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Not stopped (the daemon left early): the listener goes with the task.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
