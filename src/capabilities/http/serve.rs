//! The listener: connections accepted and served by hyper's HTTP/1 server, one request each.
//!
//! What a slow or greedy client can hold is bounded: the request's head must arrive within the
//! timeout (hyper's `header_read_timeout`, from the first byte the connection waits for — so a
//! client sending a byte a second is dropped), the body within the timeout again (`answer`), at
//! most `MAX_CONNECTIONS` connections are served at once (one more is closed as it is
//! accepted), heads are capped at `MAX_HEAD` bytes, and no connection is kept alive after its
//! answer.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};

use super::answer::{answer_request, Answerer};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;

/// The most bytes a request's head may take (hyper's buffer; its least is 8 KiB).
const MAX_HEAD: usize = 64 * 1024;

/// How long answers under way may take to finish when the server stops.
const GRACE: Duration = Duration::from_secs(5);

/// After `accept` fails (out of file descriptors), how long before the next try: the failure
/// says the process is short of something, and trying again at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `listener` until `stop` fires (or its sender is dropped), then lets answers under way
/// finish for up to `GRACE`.
pub async fn serve(listener: TcpListener, answerer: Arc<Answerer>, mut stop: oneshot::Receiver<()>) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let timeout = answerer.timeout;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stop => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("webhooks: cannot accept a connection ({e}); trying again");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Full: the connection is closed unanswered (dropped), and the sender retries later.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let this = answerer.clone();
        let service = service_fn(move |req| answer_request(this.clone(), req));
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeout)
            .keep_alive(false)
            .max_buf_size(MAX_HEAD)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client that went away or sent no HTTP ends its connection here: nothing to say.
            if let Err(e) = conn.await {
                tracing::debug!("webhooks: a connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(GRACE, graceful.shutdown()).await.is_err() {
        tracing::info!("webhooks: answers still under way after {GRACE:?} were cut off");
    }
}
