//! Telegram as a channel both ways (docs/spec.md §27): events go to the person's chat with the bot as
//! messages; an approval's message has Approve and Reject buttons; once an approval is decided
//! (anywhere) its message is edited to say how, its buttons gone. What the person sends back —
//! taps, `/ask`, `/status`, a reply — is read by long polling (`poll`) and acted on by the daemon
//! (`doors::daemon::replies`).
//!
//! - `bot` — the Bot API's calls; no error of them holds the token.
//! - `poll` — the long-polling task.
//! - `wire` — the Bot API's JSON as tabd reads it.
//!
//! `Telegram` is what the notifier's channel and the daemon share: the bot, and what tabd keeps
//! of the chat (`State`: the update offset, which message is which event's, the notes `/ask`
//! wrote and the message each answers) — kept in `.tabd/` through the saver the daemon attaches,
//! so a restart edits the right message and resumes the updates where they were.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{DeliveryError, Event};
use crate::base::environment::Env;
use crate::setup::config::notify::TelegramConfig;

mod bot;
mod poll;
mod wire;

pub use bot::{bounded, Bot, BotError, MAX_TEXT};
pub use poll::{poll, Polling};
pub use wire::{CallbackQuery, Message, Update};

/// The most messages remembered (an approval's is edited once decided; a reply to a run's
/// message asks its role).
const MAX_SENT: usize = 500;
/// The most `/ask` notes waiting for their run's answer.
const MAX_ASKS: usize = 100;
/// The most other chats remembered as said.
const MAX_IGNORED: usize = 100;
/// The most run summaries held for an `/ask` whose run ended.
const MAX_DONE: usize = 64;

/// One message tabd sent: the event it told (its key) and the role it was about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    pub key: String,
    pub message: i64,
    #[serde(default)]
    pub role: String,
}

/// A note `/ask` (or a reply) wrote, and the person's message its run's summary answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ask {
    /// The note, vault-relative.
    pub note: String,
    pub role: String,
    pub message: i64,
}

/// What tabd keeps of the chat (`.tabd/telegram.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The next update to read (one past the last acted on).
    #[serde(default)]
    pub offset: Option<i64>,
    #[serde(default)]
    pub sent: Vec<Sent>,
    #[serde(default)]
    pub asks: Vec<Ask>,
    /// Other chats that wrote, said once each.
    #[serde(default)]
    pub ignored: Vec<i64>,
}

impl State {
    /// The message of event `key`, if one was sent.
    pub fn message_of(&self, key: &str) -> Option<i64> {
        self.sent.iter().rev().find(|s| s.key == key).map(|s| s.message)
    }

    /// The role message `id` was about.
    pub fn role_of(&self, id: i64) -> Option<&str> {
        self.sent
            .iter()
            .rev()
            .find(|s| s.message == id && !s.role.is_empty())
            .map(|s| s.role.as_str())
    }

    /// Keeps the lists within their bounds, dropping the oldest.
    fn bound(&mut self) {
        let cut = |n: usize, max: usize| n.saturating_sub(max);
        self.sent.drain(..cut(self.sent.len(), MAX_SENT));
        self.asks.drain(..cut(self.asks.len(), MAX_ASKS));
        self.ignored.drain(..cut(self.ignored.len(), MAX_IGNORED));
    }
}

/// Writes the state where it is kept (the daemon's; nothing until it attaches one).
pub type Saver = Box<dyn Fn(&State) + Send + Sync>;

/// The bot and what tabd keeps of the chat; shared by the channel and the daemon.
pub struct Telegram {
    pub bot: Bot,
    pub config: TelegramConfig,
    state: Mutex<State>,
    saver: Mutex<Option<Saver>>,
    /// Summaries of the runs that ended, by their `done:<run id>` event key, newest last.
    done: Mutex<VecDeque<(String, String)>>,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Telegram({:?})", self.bot)
    }
}

impl Telegram {
    pub fn of(config: &TelegramConfig, env: &Env) -> Result<Self, BotError> {
        Ok(Self {
            bot: Bot::of(config, env)?,
            config: config.clone(),
            state: Mutex::default(),
            saver: Mutex::default(),
            done: Mutex::default(),
        })
    }

    /// Takes `kept` (read back from disk) as the state, and `saver` to keep each change.
    pub fn attach(&self, mut kept: State, saver: Saver) {
        kept.bound();
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = kept;
        *self.saver.lock().unwrap_or_else(|p| p.into_inner()) = Some(saver);
    }

    /// A copy of the state.
    pub fn state(&self) -> State {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes the state and keeps it.
    pub fn update<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let out = change(&mut state);
        state.bound();
        if let Some(save) = self.saver.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            save(&state);
        }
        out
    }

    /// Holds a finished run's summary (from its `done` event) for an `/ask` it answers.
    pub fn remember_done(&self, ev: &Event) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        done.push_back((ev.key.clone(), ev.message.clone()));
        while done.len() > MAX_DONE {
            done.pop_front();
        }
    }

    /// The summary of run `run_id`, if it ended while this tabd ran.
    pub fn summary_of(&self, run_id: &str) -> Option<String> {
        let key = format!("done:{run_id}");
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        done.iter().rev().find(|(k, _)| *k == key).map(|(_, s)| s.clone())
    }

    /// One try of `ev`: a message (with the approval's buttons), or, for an event in an earlier
    /// one's place, that message edited.
    pub async fn deliver(&self, ev: &Event) -> Result<(), DeliveryError> {
        // A tap on a decided approval is answered where it was tapped (on Telegram, by the tap's
        // answer); its message already says the outcome.
        if ev.key.starts_with("already:") {
            return Ok(());
        }
        let mut text = format!("{}\n\n{}", ev.title, ev.message);
        if let Some(note) = &ev.note {
            text.push_str(&format!("\n\n{note}"));
        }
        let earlier = ev
            .replaces
            .as_deref()
            .and_then(|key| self.state().message_of(key));
        if let Some(id) = earlier {
            return self.bot.edit(id, &text).await.map_err(delivery_error);
        }
        // A checkpoint's buttons say what they do to the run: Continue and Stop.
        let buttons: Vec<(&str, &str)> = match ev
            .replies
            .as_ref()
            .and_then(|r| Some((r.labels, r.telegram.as_ref()?)))
        {
            Some(([yes, no], [approve, reject])) => vec![(yes, approve.as_str()), (no, reject.as_str())],
            None => Vec::new(),
        };
        let id = self
            .bot
            .send(&text, None, &buttons)
            .await
            .map_err(delivery_error)?;
        self.update(|s| {
            s.sent.push(Sent {
                key: ev.key.clone(),
                message: id,
                role: ev.role.clone(),
            })
        });
        Ok(())
    }
}

/// A failed call as the channel's status says it.
fn delivery_error(e: BotError) -> DeliveryError {
    match e {
        BotError::Http { status, description } => DeliveryError::Http {
            shown: if description.is_empty() {
                "Telegram".into()
            } else {
                format!("Telegram ({description})")
            },
            status,
        },
        BotError::Setup(why) => DeliveryError::Setup(why),
        other => DeliveryError::Transport(other.to_string()),
    }
}
