//! Long polling (`getUpdates`): one task asks the Bot API for what came after the offset,
//! waiting on its side up to `WAIT` for something to come, and hands each update on, in order.
//! No port is opened: tabd is the one that connects, so only its own authenticated requests
//! bring updates in.
//!
//! The task keeps the offset of what it handed on, so the next request does not bring it again
//! (Telegram forgets an update once a request's offset is past it); the caller keeps the update
//! id it acted on durably and starts the next subscription one past it, so a tap made while tabd
//! was down is read at its next start. A request that fails is made again after backon's waits
//! (1 s, doubling, at most a minute); one that worked starts the waits over. Dropping the
//! `Polling` ends the task, in the middle of a request too.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::sync::mpsc;

use super::bot::Bot;
use super::wire::Update;

/// How long Telegram holds a `getUpdates` open waiting for an update.
const WAIT: Duration = Duration::from_secs(50);

/// Updates handed on and not yet taken.
const QUEUE: usize = 64;

/// The task reading updates; dropping it ends it.
pub type Polling = crate::capabilities::notify::Feed<Update>;

/// Starts reading updates from `offset` (`None`: all Telegram keeps). `first_wait` is the first
/// wait after a failed request; `wait` how long each request may be held open.
pub fn poll(bot: Bot, offset: Option<i64>, first_wait: Duration, wait: Option<Duration>) -> Polling {
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(follow(bot, offset, tx, first_wait, wait.unwrap_or(WAIT)));
    crate::capabilities::notify::Feed::new(rx, task)
}

async fn follow(
    bot: Bot,
    mut offset: Option<i64>,
    tx: mpsc::Sender<Update>,
    first_wait: Duration,
    wait: Duration,
) {
    let policy = ExponentialBuilder::default()
        .with_min_delay(first_wait)
        .with_max_delay(Duration::from_secs(60))
        .without_max_times();
    let mut waits = policy.build();
    loop {
        match bot.updates(offset, wait).await {
            Ok((updates, last)) => {
                waits = policy.build();
                for u in updates {
                    if tx.send(u).await.is_err() {
                        return;
                    }
                }
                if let Some(last) = last {
                    offset = Some(last.saturating_add(1));
                }
                continue;
            }
            // The words hold no token (`Bot::call`).
            Err(e) => tracing::warn!("notify: cannot read Telegram's updates: {e}"),
        }
        if tx.is_closed() {
            return;
        }
        let pause = waits.next().unwrap_or(Duration::from_secs(60));
        tokio::time::sleep(pause).await;
    }
}
