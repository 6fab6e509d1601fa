//! Reaching the person (docs/spec.md §22): each event — a call waiting for approval, model calls
//! paused, a note moved to `failed/`, a role failing again and again, an expectation missed —
//! goes once to each channel of `[notify]`: a command (the event as JSON on stdin), a webhook
//! (JSON, or ntfy's format), the desktop (the session D-Bus, through `notify-send`). Sending
//! never blocks a run: each channel has a queue and a task of its own (`queue`), which tries each
//! event in turn and retries with backoff; in quiet hours they wait. A channel that keeps failing
//! shows in `tabd status`.
//!
//! Every event has a stable id (`id`): the same on every try, every channel and after a
//! restart, so a receiver can tell a retry (a webhook that took the event, then timed out) from a
//! new event.
//!
//! - `queue` — one channel's queue: an event holds the next one for one try at most.
//! - `deliver` — one try on one channel; a program that runs out of time is killed with all it
//!   started.
//! - `id` — an event's id, from its key and its vault.
//! - `replies` — the ntfy reply topic a tap on an approval's button publishes to, followed
//!   through ntfy's JSON stream (docs/spec.md §27).
//! - `telegram` — Telegram as a channel both ways: a bot's messages, buttons and edits, and its
//!   updates read by long polling (docs/spec.md §27).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{json, Value};
use tokio::sync::mpsc;

mod deliver;
mod error;
mod id;
mod queue;
pub mod replies;
pub mod telegram;

pub use error::DeliveryError;
pub use id::EventId;

use crate::base::environment::Env;
use crate::setup::config::notify::{in_quiet, EventKind, NotifyConfig};
use deliver::{Deliveries, Kind};

/// One thing to tell the person.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    /// The role it is about (empty: tabd as a whole).
    pub role: String,
    pub title: String,
    pub message: String,
    /// The note to open (a vault path), if there is one.
    pub note: Option<String>,
    pub at: DateTime<Utc>,
    /// Events with the same key are one event: sent once, and always with the same id
    /// (`EventId::of`).
    pub key: String,
    /// An `approval` push's decision tokens: ntfy's channel shows them as Approve and Reject
    /// buttons when `reply_topic` is set (docs/spec.md §27). Never in the event's JSON.
    pub replies: Option<Replies>,
    /// The key of an earlier event this one stands in for (an approval, now decided): ntfy shows
    /// it in that event's place (the same sequence id), its buttons gone.
    pub replaces: Option<String>,
}
/// What a task reading from a server (ntfy's reply topic, Telegram's updates) hands on, in
/// order. Dropped, the task ends.
pub struct Feed<T> {
    rx: tokio::sync::mpsc::Receiver<T>,
    task: tokio::task::JoinHandle<()>,
}

impl<T> Feed<T> {
    pub(crate) fn new(rx: tokio::sync::mpsc::Receiver<T>, task: tokio::task::JoinHandle<()>) -> Self {
        Self { rx, task }
    }

    /// The next item (waits; never resolves once the task is gone).
    pub async fn next(&mut self) -> T {
        match self.rx.recv().await {
            Some(item) => item,
            None => std::future::pending().await,
        }
    }
}

impl<T> Drop for Feed<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The decision tokens of an approval's two buttons (`gate::approvals::token`): credentials,
/// so never logged, never in a status.
#[derive(Clone, PartialEq)]
pub struct Replies {
    pub approve: String,
    pub reject: String,
    /// The two buttons' labels: `Approve` and `Reject`, or a checkpoint's `Continue` and `Stop`.
    pub labels: [&'static str; 2],
    /// The Approve and Reject buttons' callback data on Telegram (a short form: Telegram takes
    /// 64 bytes at most), when `[notify.telegram]` is set.
    pub telegram: Option<[String; 2]>,
}

impl std::fmt::Debug for Replies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Replies(…)")
    }
}

/// Where events go; cheap to clone. `None` from `start` when `[notify]` names no channel.
#[derive(Clone)]
pub struct Notifier(Arc<Inner>);

struct Inner {
    config: NotifyConfig,
    /// Each channel's queue.
    queues: Vec<mpsc::UnboundedSender<Arc<Event>>>,
    /// Keys sent (or queued) already.
    sent: Mutex<HashSet<String>>,
    /// Per channel, why its last delivery failed (cleared by a success).
    failing: Mutex<BTreeMap<&'static str, String>>,
    /// Woken when `failing` changes, so the status shows it at once.
    changed: tokio::sync::Notify,
    /// `[notify.telegram]`'s bot and what tabd keeps of its chat.
    telegram: Option<Arc<telegram::Telegram>>,
}

impl Notifier {
    /// Starts a task per channel (on the current tokio runtime). `vault_name` names the vault in
    /// `obsidian://` links; `tz` is the time zone of the quiet hours.
    pub fn start(config: &NotifyConfig, env: Env, vault_name: &str, tz: Tz) -> Option<Self> {
        let kinds = Kind::set_in(config);
        if kinds.is_empty() {
            return None;
        }
        let policy = queue::Policy {
            first_retry: first_retry(&env),
            retries: 3,
        };
        let deliveries = Arc::new(Deliveries::new(config, env, vault_name));
        let telegram = deliveries.telegram.clone();
        let quiet = config.quiet().ok().flatten();
        let mut receivers = Vec::new();
        let queues = kinds
            .iter()
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                receivers.push(rx);
                tx
            })
            .collect();
        let inner = Arc::new(Inner {
            config: config.clone(),
            queues,
            sent: Mutex::default(),
            failing: Mutex::default(),
            changed: tokio::sync::Notify::new(),
            telegram,
        });
        for (kind, rx) in kinds.into_iter().zip(receivers) {
            let worker = Worker {
                kind,
                deliveries: deliveries.clone(),
                inner: Arc::downgrade(&inner),
                quiet,
                tz,
            };
            tokio::spawn(queue::serve(rx, policy, worker));
        }
        Some(Self(inner))
    }

    /// Queues `ev` on every channel if `[notify] events` wants its kind and it was not sent
    /// before. Never waits.
    pub fn send(&self, ev: Event) -> bool {
        if let (Some(t), EventKind::Done) = (&self.0.telegram, ev.kind) {
            // Held whether or not `done` events are sent: an `/ask`'s run answers with it.
            t.remember_done(&ev);
        }
        if !self.0.config.wants(ev.kind) {
            return false;
        }
        let fresh = self
            .0
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ev.key.clone());
        if !fresh {
            return false;
        }
        let ev = Arc::new(ev);
        let mut queued = false;
        for q in &self.0.queues {
            queued |= q.send(ev.clone()).is_ok();
        }
        queued
    }

    /// Channels whose last delivery failed, each with why: `webhook: HTTP 500 …`.
    pub fn problems(&self) -> Vec<String> {
        self.0
            .failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(channel, why)| format!("{channel}: {why}"))
            .collect()
    }

    /// Resolves when a channel starts or stops failing.
    pub async fn problems_changed(&self) {
        self.0.changed.notified().await;
    }

    /// `[notify.telegram]`'s bot and state, when it is set and its token could be read.
    pub fn telegram(&self) -> Option<Arc<telegram::Telegram>> {
        self.0.telegram.clone()
    }

    /// `[notify] after_failures`.
    pub fn after_failures(&self) -> u32 {
        self.0.config.after_failures.max(1)
    }
}

/// `tabd doctor --push`: one try of a test event on each channel `[notify]` sets, now — quiet
/// hours do not hold it and `events` does not filter it (the person asked for it), and a
/// failure is not retried (the answer is for the person, at once). Each channel's name and how
/// its try ended. Every push is its own event (its own id), so a receiver that drops repeats
/// shows each.
pub async fn test_push(
    config: &NotifyConfig,
    env: Env,
    vault_name: &str,
    now: DateTime<Utc>,
) -> Vec<(&'static str, Result<(), DeliveryError>)> {
    let deliveries = Deliveries::new(config, env, vault_name);
    let ev = Event {
        kind: EventKind::Test,
        role: String::new(),
        title: "tabd: a test push".into(),
        message: "`tabd doctor --push` sent this to see that this channel reaches you. Nothing needs you."
            .into(),
        note: None,
        at: now,
        key: format!("doctor-test-{}", now.timestamp_nanos_opt().unwrap_or_default()),
        replies: None,
        replaces: None,
    };
    let mut out = Vec::new();
    for kind in Kind::set_in(config) {
        out.push((kind.name(), deliveries.try_once(kind, &ev).await));
    }
    out
}

/// One channel's side of its queue: tries through `deliveries`, waits out quiet hours, and
/// writes how each event ended into the notifier's problems.
struct Worker {
    kind: Kind,
    deliveries: Arc<Deliveries>,
    inner: Weak<Inner>,
    quiet: Option<(chrono::NaiveTime, chrono::NaiveTime)>,
    tz: Tz,
}

impl queue::Channel for Worker {
    fn try_once(
        &mut self,
        ev: Arc<Event>,
    ) -> impl std::future::Future<Output = Result<(), DeliveryError>> + Send {
        let (deliveries, kind) = (self.deliveries.clone(), self.kind);
        async move { deliveries.try_once(kind, &ev).await }
    }

    async fn quiet(&mut self) {
        if let Some(hours) = self.quiet {
            while in_quiet(Utc::now().with_timezone(&self.tz).time(), hours) {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
        }
    }

    fn done(&mut self, result: Result<(), DeliveryError>) -> bool {
        let Some(inner) = self.inner.upgrade() else {
            return false;
        };
        let channel = self.kind.name();
        let changed = {
            let mut failing = inner.failing.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(()) => failing.remove(channel).is_some(),
                Err(e) => {
                    let why = if e.is_transient() {
                        e.to_string()
                    } else {
                        format!("{e} (not retried: a retry would not fix it)")
                    };
                    // A program's stderr, a server's error may quote a secret (docs/spec.md §24).
                    let why = self.deliveries.env.redactor().apply(&why);
                    tracing::warn!("notify: {channel} failed: {why}");
                    failing.insert(channel, why.clone()) != Some(why)
                }
            }
        };
        if changed {
            // One listener (the daemon's loop): a permit is kept if it is busy right now.
            inner.changed.notify_one();
        }
        true
    }
}

/// The wait before the first retry: 1 s (`TABD_TEST_NOTIFY_RETRY_MS` shortens it for tests).
fn first_retry(env: &Env) -> Duration {
    env.get("TABD_TEST_NOTIFY_RETRY_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

/// The event as every channel sends it. `id` is the event's (`EventId`); the other fields are
/// what outside scripts have parsed since before it, unchanged.
pub fn payload(ev: &Event, id: &EventId, vault_name: &str) -> Value {
    json!({
        "id": id.as_str(),
        "event": ev.kind.as_str(),
        "role": ev.role,
        "title": ev.title,
        "message": ev.message,
        "note": ev.note,
        "url": ev.note.as_deref().map(|n| obsidian_link(vault_name, n)),
        "at": ev.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

/// `obsidian://open?vault=Work&file=agent%2Fapprovals%2Fx`: opens the note in Obsidian.
pub fn obsidian_link(vault: &str, note: &str) -> String {
    let enc = |s: &str| {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    let file = note.strip_suffix(".md").unwrap_or(note);
    format!("obsidian://open?vault={}&file={}", enc(vault), enc(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_open_the_note_in_obsidian() {
        assert_eq!(
            obsidian_link("My Work", "agent/approvals/2026-11-25-comms-x 1.md"),
            "obsidian://open?vault=My%20Work&file=agent%2Fapprovals%2F2026-11-25-comms-x%201"
        );
    }
}
