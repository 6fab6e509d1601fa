//! The reply topic (docs/spec.md §27): what a tap on an approval push's button published, read back
//! through ntfy's JSON stream (`GET <server>/<topic>/json?since=<id>`: one JSON object a line —
//! `open`, `keepalive`, `message` with its `id`, `time` and `message`). No port is opened: tabd
//! is the one that connects.
//!
//! One task owns the connection: it hands each message on, in order, and remembers the last id
//! it handed on, so a dropped connection resumes where it was (`since=<id>`); the caller keeps the
//! id it has acted on durably and starts the next subscription from it, so a tap made while tabd
//! was down is read at its next start. A connection that fails or goes quiet past ntfy's
//! keep-alives is made again after backon's waits (1 s, doubling, at most a minute); a
//! connection that worked starts the waits over. Dropping the `Subscription` ends the task.
//!
//! What comes back is untrusted text: a line longer than a token could be is passed over, a
//! `since` kept on disk is used only if it looks like an ntfy id, and the messages themselves are
//! checked by the decider (`approval_pass::decide`).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::base::environment::Env;
use crate::setup::config::notify::NotifyConfig;

/// ntfy sends a keep-alive every 45 s by default: a connection silent for longer than this is
/// taken for dropped and made again.
const QUIET_FOR: Duration = Duration::from_secs(120);

/// The longest line kept: an ntfy message object with a token is well under 2 KiB.
const MAX_LINE: usize = 16 * 1024;

/// Messages handed on and not yet taken (the daemon takes them at once; a flood waits).
const QUEUE: usize = 64;

/// One message published to the reply topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// ntfy's id of the message (the `since` to resume after it).
    pub id: String,
    /// When ntfy took it (Unix seconds).
    pub time: i64,
    /// What was published: a decision token, or anything anyone who may publish there sent.
    pub message: String,
}

/// One line of ntfy's JSON stream.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    id: String,
    #[serde(default)]
    time: i64,
    #[serde(default)]
    event: String,
    #[serde(default)]
    message: String,
}

/// Where the reply topic is and how to reach it, made from `[notify]` with `${VAR}`s expanded.
#[derive(Clone)]
pub struct Topic {
    /// `https://ntfy.example/<topic>/json`: a secret (the topic is as good as a password).
    stream: String,
    /// The URL as the person wrote it, its topic hidden: for the log.
    shown: String,
    access_token: Option<String>,
}

impl std::fmt::Debug for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Why the reply topic cannot be subscribed to (said once at start, as the person set it).
#[derive(Debug, thiserror::Error)]
pub enum NoTopic {
    #[error("[notify] reply_topic: {0}")]
    Unset(String),
}

impl Topic {
    /// The reply topic of `config`, `None` when it is not set (or not on an ntfy webhook).
    pub fn of(config: &NotifyConfig, env: &Env) -> Result<Option<Self>, NoTopic> {
        if !config.replies().unwrap_or(false) {
            return Ok(None);
        }
        let (Some(webhook), Some(topic)) = (config.webhook.as_deref(), config.reply_topic.as_deref()) else {
            return Ok(None);
        };
        let expand = |text: &str| env.expand(text).map_err(|e| NoTopic::Unset(e.to_string()));
        let webhook = expand(webhook)?;
        let Some((root, _)) = super::deliver::ntfy_parts(&webhook) else {
            return Err(NoTopic::Unset(
                "the webhook is not an ntfy topic's URL (like https://ntfy.sh/my-topic)".into(),
            ));
        };
        let topic = expand(topic)?;
        let access_token = config.access_token.as_deref().map(expand).transpose()?;
        Ok(Some(Self {
            stream: format!("{root}/{}/json", topic.trim()),
            shown: format!("{}/…/json", crate::base::text::display_url(root)),
            access_token,
        }))
    }
}

/// A running subscription: its messages, in order. Dropped, its task ends.
pub type Subscription = super::Feed<Reply>;

/// Subscribes to `topic` from after message `since` (all that the server keeps when `None`).
pub fn subscribe(topic: Topic, since: Option<String>, env: &Env) -> Subscription {
    crate::capabilities::provider::install_tls();
    let first_wait = env
        .get("TABD_TEST_NOTIFY_RETRY_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis);
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(follow(
        topic,
        since.filter(|s| looks_like_an_id(s)),
        tx,
        first_wait,
    ));
    super::Feed::new(rx, task)
}

/// An ntfy message id: letters and digits (ntfy makes 12), nothing a query could be bent with.
pub fn looks_like_an_id(text: &str) -> bool {
    !text.is_empty() && text.len() <= 64 && text.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Connects, hands each message on, and connects again after a wait when the stream ends, until
/// the receiver is gone.
async fn follow(topic: Topic, mut since: Option<String>, tx: mpsc::Sender<Reply>, first_wait: Duration) {
    let client = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .user_agent(concat!("tabd/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("notify: cannot make the client for the reply topic: {e}");
            return;
        }
    };
    let policy = ExponentialBuilder::default()
        .with_min_delay(first_wait)
        .with_max_delay(Duration::from_secs(60))
        .without_max_times();
    let mut waits = policy.build();
    loop {
        match stream(&client, &topic, &mut since, &tx).await {
            Ended::Gone => return,
            Ended::Worked(why) => {
                tracing::debug!("notify: the reply topic's stream ended ({why}); connecting again");
                waits = policy.build();
            }
            Ended::Failed(why) => {
                tracing::warn!("notify: cannot read the reply topic {}: {why}", topic.shown)
            }
        }
        let wait = waits.next().unwrap_or(Duration::from_secs(60));
        tokio::time::sleep(wait).await;
    }
}

/// How one connection ended.
enum Ended {
    /// The receiver is gone: tabd is stopping.
    Gone,
    /// It was open (the server answered 200) and then ended.
    Worked(String),
    /// It did not open.
    Failed(String),
}

/// One connection: reads lines until it ends, keeping `since` at the last message handed on.
async fn stream(
    client: &reqwest::Client,
    topic: &Topic,
    since: &mut Option<String>,
    tx: &mpsc::Sender<Reply>,
) -> Ended {
    let from = since.clone().unwrap_or_else(|| "all".to_string());
    // `from` is `all` or an id of letters and digits (`looks_like_an_id`): nothing to escape.
    let mut request = client.get(format!("{}?since={from}", topic.stream));
    if let Some(token) = &topic.access_token {
        request = request.bearer_auth(token);
    }
    let mut response = match request.send().await {
        // reqwest names the URL it used (the topic): said without it.
        Err(e) => return Ended::Failed(e.without_url().to_string()),
        Ok(r) if !r.status().is_success() => return Ended::Failed(format!("HTTP {}", r.status().as_u16())),
        Ok(r) => r,
    };
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(QUIET_FOR, response.chunk()).await {
            Err(_) => return Ended::Worked(format!("nothing for {}s", QUIET_FOR.as_secs())),
            Ok(Err(e)) => return Ended::Worked(e.without_url().to_string()),
            Ok(Ok(None)) => return Ended::Worked("closed by the server".into()),
            Ok(Ok(Some(chunk))) => chunk,
        };
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            if let Some(reply) = reply_of(&line) {
                let id = reply.id.clone();
                if tx.send(reply).await.is_err() {
                    return Ended::Gone;
                }
                *since = Some(id);
            }
        }
        if pending.len() > MAX_LINE {
            // A line longer than any message tabd reads: passed over to its end.
            tracing::warn!("notify: a line of the reply topic longer than {MAX_LINE} bytes was passed over");
            pending.clear();
        }
    }
}

/// The message a line carries, if it is one (not `open` or `keepalive`, and well formed).
fn reply_of(line: &[u8]) -> Option<Reply> {
    let value = crate::formats::json::parse_slice(line).ok()?;
    let line: Line = serde_json::from_value(value).ok()?;
    (line.event == "message" && looks_like_an_id(&line.id)).then_some(Reply {
        id: line.id,
        time: line.time,
        message: line.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of ntfy's documentation: only `message` events are replies.
    #[test]
    fn only_message_events_are_replies() {
        assert_eq!(
            reply_of(br#"{"id":"SLiKI64DOt","time":1635528757,"event":"open","topic":"mytopic"}"#),
            None
        );
        assert_eq!(
            reply_of(br#"{"id":"hwQ2YpKdmg","time":1635528741,"event":"message","topic":"mytopic","message":"Disk full"}"#),
            Some(Reply {
                id: "hwQ2YpKdmg".into(),
                time: 1635528741,
                message: "Disk full".into()
            })
        );
        assert_eq!(
            reply_of(br#"{"id":"DGUDShMCsc","time":1635528787,"event":"keepalive","topic":"mytopic"}"#),
            None
        );
        assert_eq!(reply_of(b"not json"), None);
        assert_eq!(
            reply_of(br#"{"id":"a&since=all","time":1,"event":"message","message":"x"}"#),
            None,
            "an id that is no id"
        );
    }
}
