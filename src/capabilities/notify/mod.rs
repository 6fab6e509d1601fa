//! Reaching the person (DESIGN §22): each event — a call waiting for approval, model calls
//! paused, a note moved to `failed/`, a role failing again and again, an expectation missed —
//! goes once to each channel of `[notify]`: a command (the event as JSON on stdin), a webhook
//! (JSON, or ntfy's format), the desktop (the session D-Bus, through `notify-send`). Sending
//! never blocks a run: events go onto a queue that one task works through, retrying each channel
//! with backoff; in quiet hours they wait. A channel that keeps failing shows in `tabd status`.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{json, Value};
use tokio::sync::mpsc;

mod error;

pub use error::DeliveryError;

use crate::base::environment::Env;
use crate::setup::config::notify::{in_quiet, EventKind, NotifyConfig, WebhookFormat};

/// How long one try of one channel may take.
const TRY_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// Events with the same key are one event: sent once.
    pub key: String,
}

/// Where events go; cheap to clone. `None` from `start` when `[notify]` names no channel.
#[derive(Clone)]
pub struct Notifier(Arc<Inner>);

struct Inner {
    config: NotifyConfig,
    tx: mpsc::UnboundedSender<Event>,
    /// Keys sent (or queued) already.
    sent: Mutex<HashSet<String>>,
    /// Per channel, why its last delivery failed (cleared by a success).
    failing: Mutex<BTreeMap<&'static str, String>>,
    /// Woken when `failing` changes, so the status shows it at once.
    changed: tokio::sync::Notify,
}

/// What a delivery needs besides the event.
#[derive(Clone)]
struct Channels {
    config: NotifyConfig,
    env: Env,
    vault_name: String,
    http: Option<reqwest::Client>,
    /// The wait before a channel's first retry.
    first_retry: Duration,
}

impl Notifier {
    /// Starts the queue's task (on the current tokio runtime). `vault_name` names the vault in
    /// `obsidian://` links; `tz` is the time zone of the quiet hours.
    pub fn start(config: &NotifyConfig, env: Env, vault_name: &str, tz: Tz) -> Option<Self> {
        if !config.any() {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let http = config.webhook.as_ref().and_then(|_| {
            crate::capabilities::provider::install_tls();
            reqwest::Client::builder()
                .timeout(TRY_TIMEOUT)
                .user_agent(concat!("tabd/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok()
        });
        let inner = Arc::new(Inner {
            config: config.clone(),
            tx,
            sent: Mutex::default(),
            failing: Mutex::default(),
            changed: tokio::sync::Notify::new(),
        });
        let channels = Channels {
            config: config.clone(),
            vault_name: config
                .obsidian_vault
                .clone()
                .unwrap_or_else(|| vault_name.to_string()),
            http,
            first_retry: first_retry(&env),
            env,
        };
        tokio::spawn(work(rx, channels, Arc::downgrade(&inner), tz));
        Some(Self(inner))
    }

    /// Queues `ev` if `[notify] events` wants its kind and it was not sent before. Never waits.
    pub fn send(&self, ev: Event) -> bool {
        if !self.0.config.wants(ev.kind) {
            return false;
        }
        let fresh = self
            .0
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ev.key.clone());
        fresh && self.0.tx.send(ev).is_ok()
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

    /// `[notify] after_failures`.
    pub fn after_failures(&self) -> u32 {
        self.0.config.after_failures.max(1)
    }
}

/// The queue's task: waits out quiet hours, then delivers each event to each channel (in turn,
/// each with its retries); ends when the notifier is dropped.
async fn work(
    mut rx: mpsc::UnboundedReceiver<Event>,
    channels: Channels,
    inner: std::sync::Weak<Inner>,
    tz: Tz,
) {
    let quiet = channels.config.quiet().ok().flatten();
    while let Some(ev) = rx.recv().await {
        if let Some(hours) = quiet {
            while in_quiet(Utc::now().with_timezone(&tz).time(), hours) {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
        }
        for (channel, result) in channels.deliver(&ev).await {
            let Some(inner) = inner.upgrade() else { return };
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
                        tracing::warn!("notify: {channel} failed: {why}");
                        failing.insert(channel, why.clone()) != Some(why)
                    }
                }
            };
            if changed {
                // One listener (the daemon's loop): a permit is kept if it is busy right now.
                inner.changed.notify_one();
            }
        }
    }
}

impl Channels {
    async fn deliver(&self, ev: &Event) -> Vec<(&'static str, Result<(), DeliveryError>)> {
        let payload = payload(ev, &self.vault_name);
        let mut out = Vec::new();
        if !self.config.command.is_empty() {
            out.push((
                "command",
                retried(self.first_retry, || self.command(&payload)).await,
            ));
        }
        if let Some(url) = &self.config.webhook {
            out.push((
                "webhook",
                retried(self.first_retry, || self.webhook(url, &payload)).await,
            ));
        }
        if self.config.desktop {
            out.push(("desktop", retried(self.first_retry, || self.desktop(ev)).await));
        }
        out
    }

    /// The command, with the event as one JSON line on stdin: it must exit 0.
    async fn command(&self, payload: &Value) -> Result<(), DeliveryError> {
        let argv = &self.config.command;
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        self.run_once(cmd, &argv[0], Some(format!("{payload}\n"))).await
    }

    /// Runs a channel's program once as a tenant, with tabd's environment and `input` on its
    /// stdin, for at most `TRY_TIMEOUT`: it must exit 0, and its stderr says why it did not.
    async fn run_once(
        &self,
        mut cmd: tokio::process::Command,
        program: &str,
        input: Option<String>,
    ) -> Result<(), DeliveryError> {
        use std::process::Stdio;
        use tokio::io::AsyncWriteExt;
        cmd.env_clear()
            .envs(self.env.vars())
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        crate::base::process::as_tenant(&mut cmd);
        let program = program.to_string();
        let mut child = cmd.spawn().map_err(|source| DeliveryError::Start {
            program: program.clone(),
            source,
        })?;
        let io = |source| DeliveryError::Io {
            program: program.clone(),
            source,
        };
        if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
            stdin.write_all(input.as_bytes()).await.map_err(io)?;
        }
        let out = tokio::time::timeout(TRY_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| DeliveryError::Timeout {
                program: program.clone(),
                secs: TRY_TIMEOUT.as_secs(),
            })?
            .map_err(io)?;
        if out.status.success() {
            return Ok(());
        }
        Err(DeliveryError::Exited {
            said: crate::base::text::one_line(&String::from_utf8_lossy(&out.stderr), 200),
            program,
            status: out.status,
        })
    }

    /// The webhook: the event as JSON, or ntfy's JSON publishing (topic from the URL's path).
    async fn webhook(&self, url: &str, payload: &Value) -> Result<(), DeliveryError> {
        let Some(http) = &self.http else {
            return Err(DeliveryError::Setup(
                "no HTTP client (TLS could not start)".into(),
            ));
        };
        // Shown as written (`${TOKEN}`, not its value): a topic or token may sit in the path.
        let shown = crate::base::text::display_url(url)
            .replace("%7B", "{")
            .replace("%7D", "}");
        let url = self
            .env
            .expand(url)
            .map_err(|e| DeliveryError::Setup(format!("[notify] webhook: {e}")))?;
        let request = match self.config.format {
            WebhookFormat::Json => http.post(&url).json(payload),
            WebhookFormat::Ntfy => {
                let (root, topic) = url
                    .trim_end_matches('/')
                    .rsplit_once('/')
                    .filter(|(root, _)| root.contains("://"))
                    .ok_or_else(|| {
                        DeliveryError::Setup(format!(
                            "{shown}: an ntfy webhook is the topic's URL, like https://ntfy.sh/my-topic"
                        ))
                    })?;
                http.post(format!("{root}/")).json(&json!({
                    "topic": topic,
                    "title": payload["title"],
                    "message": payload["message"],
                    "click": payload["url"],
                    "tags": [payload["event"]],
                }))
            }
        };
        let resp = request.send().await.map_err(|e| {
            // reqwest names the URL it used: never with the secret's value in it.
            let said = e.to_string().replace(&url, &shown);
            DeliveryError::Transport(crate::base::text::scrub_url(&format!("{shown}: {said}"), &url))
        })?;
        match resp.status() {
            s if s.is_success() => Ok(()),
            s => Err(DeliveryError::Http {
                shown,
                status: s.as_u16(),
            }),
        }
    }

    /// A desktop notification over the session D-Bus (`notify-send`, where it and a session
    /// bus are there).
    async fn desktop(&self, ev: &Event) -> Result<(), DeliveryError> {
        if self.env.get("DBUS_SESSION_BUS_ADDRESS").is_none() {
            return Err(DeliveryError::Setup(
                "no session D-Bus here (DBUS_SESSION_BUS_ADDRESS is not set)".into(),
            ));
        }
        let mut cmd = tokio::process::Command::new("notify-send");
        cmd.args(["--app-name=tabd", &ev.title, &ev.message]);
        match self.run_once(cmd, "notify-send", None).await {
            Err(DeliveryError::Start { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Err(
                DeliveryError::Setup("notify-send is not installed (install libnotify-bin)".into()),
            ),
            done => done,
        }
    }
}

/// The wait before the first retry: 1 s (`TABD_TEST_NOTIFY_RETRY_MS` shortens it for tests).
fn first_retry(env: &Env) -> Duration {
    env.get("TABD_TEST_NOTIFY_RETRY_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

/// Tries `f` up to four times, waiting `first` (1 s), then twice and four times that between;
/// a failure no retry could fix ends it at once.
async fn retried<F, Fut>(first: Duration, f: F) -> Result<(), DeliveryError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), DeliveryError>>,
{
    f.retry(
        ExponentialBuilder::default()
            .with_min_delay(first)
            .with_max_delay(Duration::from_secs(30))
            .with_max_times(3),
    )
    .when(DeliveryError::is_transient)
    .await
}

/// The event as every channel sends it.
pub fn payload(ev: &Event, vault_name: &str) -> Value {
    json!({
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
