//! The Bot API's calls tabd makes: `getUpdates` (long polling), `sendMessage`,
//! `editMessageText`, `answerCallbackQuery`. Each is a POST of JSON to
//! `{api}/bot<TOKEN>/<method>`: the token is in the URL's path, so no error of these calls keeps
//! the URL (`reqwest::Error::without_url`), and any text that could still hold it (a server's
//! description) has it written as `<token>` before it leaves here.

use std::time::Duration;

use serde_json::{json, Value};

use super::wire::{Answer, Update};
use crate::base::environment::Env;
use crate::setup::config::notify::TelegramConfig;

/// The most a message's text may hold (Telegram's limit, in characters).
pub const MAX_TEXT: usize = 4096;

/// The longest answer read from the Bot API (a hundred updates of long messages fit).
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Why a call to the Bot API failed. Its words never hold the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BotError {
    /// No answer: the connection failed, was dropped, or timed out.
    #[error("Telegram did not answer: {0}")]
    Transport(String),
    /// An answer with an error status (`description` is the server's, token-free).
    #[error("Telegram answered HTTP {status}{}", if description.is_empty() { String::new() } else { format!(": {description}") })]
    Http { status: u16, description: String },
    /// An answer that is not the Bot API's JSON.
    #[error("Telegram's answer is not the Bot API's: {0}")]
    Garbled(String),
    /// The token's `${VAR}` cannot be read.
    #[error("[notify.telegram] token: {0}")]
    Setup(String),
}

impl BotError {
    /// Whether another try could succeed: a server error, a busy server, no answer.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Transport(_) | Self::Garbled(_) => true,
            Self::Http { status, .. } => *status >= 500 || matches!(status, 408 | 429),
            Self::Setup(_) => false,
        }
    }
}

/// A bot, logged in by its token (in `base`, a secret); cheap to clone.
#[derive(Clone)]
pub struct Bot {
    /// `{api}/bot<TOKEN>`: a secret.
    base: String,
    token: String,
    pub chat: i64,
    client: reqwest::Client,
}

impl std::fmt::Debug for Bot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bot(chat {})", self.chat)
    }
}

impl Bot {
    /// The bot of `config`, its token read from the environment now.
    pub fn of(config: &TelegramConfig, env: &Env) -> Result<Self, BotError> {
        let token = env
            .expand(config.token.get_ref().trim())
            .map_err(|e| BotError::Setup(e.to_string()))?;
        crate::capabilities::provider::install_tls();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("tabd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| BotError::Setup(format!("no HTTP client: {}", e.without_url())))?;
        Ok(Self {
            base: format!("{}/bot{token}", config.api()),
            token,
            chat: config.chat,
            client,
        })
    }

    /// `text` with the token written as `<token>`: what may leave this module.
    fn scrub(&self, text: &str) -> String {
        if self.token.is_empty() {
            return text.to_string();
        }
        text.replace(&self.token, "<token>")
    }

    /// One call: `method` with `body`, answered within `within`; its `result`.
    async fn call(&self, method: &str, body: &Value, within: Duration) -> Result<Value, BotError> {
        let url = format!("{}/{method}", self.base);
        let transport = |e: reqwest::Error| {
            // reqwest names the URL it used, and the URL holds the token: said by its cause.
            let e = e.without_url();
            let mut cause: &dyn std::error::Error = &e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            BotError::Transport(self.scrub(&cause.to_string()))
        };
        let response = self
            .client
            .post(url)
            .timeout(within)
            .json(body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if bytes.len() > MAX_ANSWER {
            return Err(BotError::Garbled(format!("an answer of {} bytes", bytes.len())));
        }
        let answer: Option<Answer> = serde_json::from_slice(&bytes).ok();
        let description = |a: &Option<Answer>| {
            a.as_ref()
                .and_then(|a| a.description.as_deref())
                .map(|d| self.scrub(&crate::base::text::one_line(d, 200)))
                .unwrap_or_default()
        };
        if !status.is_success() {
            return Err(BotError::Http {
                status: status.as_u16(),
                description: description(&answer),
            });
        }
        match answer {
            Some(a) if a.ok => Ok(a.result),
            Some(a) => Err(BotError::Garbled(description(&Some(a)))),
            None => Err(BotError::Garbled("not JSON".into())),
        }
    }

    /// `getUpdates` from `offset`, waiting up to `wait` for one to come (long polling): the
    /// updates tabd can read, and the last update id of all (the next offset is one past it).
    pub async fn updates(
        &self,
        offset: Option<i64>,
        wait: Duration,
    ) -> Result<(Vec<Update>, Option<i64>), BotError> {
        let mut body = json!({
            "timeout": wait.as_secs(),
            "allowed_updates": ["message", "callback_query"],
        });
        if let Some(offset) = offset {
            body["offset"] = json!(offset);
        }
        let result = self
            .call("getUpdates", &body, wait + Duration::from_secs(30))
            .await?;
        let Value::Array(items) = result else {
            return Err(BotError::Garbled("getUpdates' result is not a list".into()));
        };
        // An update tabd cannot read is passed over, never a reason to stop reading the rest;
        // its id still moves the offset on.
        let last = items.iter().filter_map(|u| u["update_id"].as_i64()).max();
        let updates = items
            .into_iter()
            .filter_map(|u| serde_json::from_value(u).ok())
            .collect();
        Ok((updates, last))
    }

    /// Sends `text` (plain: no parse mode, so nothing in it is markup) to the chat, as a reply
    /// to `reply_to` when set, with `buttons` (label, callback data) under it; its message id.
    pub async fn send(
        &self,
        text: &str,
        reply_to: Option<i64>,
        buttons: &[(&str, &str)],
    ) -> Result<i64, BotError> {
        let mut body = json!({ "chat_id": self.chat, "text": bounded(text) });
        if let Some(id) = reply_to {
            body["reply_parameters"] = json!({ "message_id": id, "allow_sending_without_reply": true });
        }
        if !buttons.is_empty() {
            let row: Vec<Value> = buttons
                .iter()
                .map(|(text, data)| json!({ "text": text, "callback_data": data }))
                .collect();
            body["reply_markup"] = json!({ "inline_keyboard": [row] });
        }
        let sent = self.call("sendMessage", &body, Duration::from_secs(30)).await?;
        sent["message_id"]
            .as_i64()
            .ok_or_else(|| BotError::Garbled("sendMessage's result has no message_id".into()))
    }

    /// Replaces message `id`'s text with `text`, its buttons gone.
    pub async fn edit(&self, id: i64, text: &str) -> Result<(), BotError> {
        let body = json!({
            "chat_id": self.chat,
            "message_id": id,
            "text": bounded(text),
            "reply_markup": { "inline_keyboard": [] },
        });
        match self.call("editMessageText", &body, Duration::from_secs(30)).await {
            // The same text again (a retry whose first try was taken): it shows what it should.
            Err(BotError::Http {
                status: 400,
                description,
            }) if description.contains("not modified") => Ok(()),
            done => done.map(|_| ()),
        }
    }

    /// Answers a tap (the phone stops its spinner and shows `text` for a moment).
    pub async fn answer(&self, callback: &str, text: &str) -> Result<(), BotError> {
        let body = json!({ "callback_query_id": callback, "text": crate::base::text::one_line(text, 190) });
        self.call("answerCallbackQuery", &body, Duration::from_secs(30))
            .await
            .map(|_| ())
    }
}

/// `text` within Telegram's limit, cut at a character.
pub fn bounded(text: &str) -> String {
    if text.chars().count() <= MAX_TEXT {
        return text.to_string();
    }
    let mut out: String = text.chars().take(MAX_TEXT - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_to_telegrams_limit() {
        let long = "é".repeat(5000);
        assert_eq!(bounded(&long).chars().count(), MAX_TEXT);
        assert_eq!(bounded("hi"), "hi");
    }

    #[test]
    fn only_what_a_retry_could_fix_is_retried() {
        let http = |status| BotError::Http {
            status,
            description: String::new(),
        };
        assert!(http(502).is_transient() && http(429).is_transient());
        assert!(!http(401).is_transient() && !http(400).is_transient());
    }
}
