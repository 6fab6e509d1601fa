//! `[notify]` (docs/spec.md §22): where tabd says "I need you" — a command, a webhook (ntfy's format as
//! a preset), the desktop — for which events, and when it keeps quiet; and the ntfy topic a tap on
//! an approval's button answers on (`reply_topic`, docs/spec.md §27); and Telegram as a channel both
//! ways (`[notify.telegram]`, docs/spec.md §27).

use chrono::NaiveTime;
use serde::Deserialize;

/// What tabd tells the person about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A call waits for the person's approval.
    Approval,
    /// Model calls paused (provider outage, no key) or a role stopped for the day (budget).
    Paused,
    /// A note was moved to `failed/`.
    FailedNote,
    /// A role's runs failed `after_failures` times in a row.
    Failing,
    /// A role's `expect:` was not met in time.
    Expect,
    /// A role file has errors (said once the person stopped editing it, once per error).
    RoleBroken,
    /// A run finished (only when asked for: it is not an "I need you").
    Done,
    /// `tabd doctor --push`: the person asked to see that a channel reaches them. Never sent
    /// otherwise, so `events` cannot list it.
    #[serde(skip_deserializing)]
    Test,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approval => "approval",
            Self::Paused => "paused",
            Self::FailedNote => "failed_note",
            Self::Failing => "failing",
            Self::Expect => "expect",
            Self::RoleBroken => "role_broken",
            Self::Done => "done",
            Self::Test => "test",
        }
    }

    /// The events sent when `events` is not set: every "I need you", not "done".
    pub const DEFAULT: [EventKind; 6] = [
        Self::Approval,
        Self::Paused,
        Self::FailedNote,
        Self::Failing,
        Self::Expect,
        Self::RoleBroken,
    ];
}

/// How a webhook's body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// The event as JSON (`{"event", "title", "message", "role", "note", "url", "at"}`).
    #[default]
    Json,
    /// ntfy's: the message as the body, `Title`, `Click` (the note's obsidian:// link), `Tags`.
    Ntfy,
}

/// `[notify]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    /// A program (and its arguments) that gets each event as one JSON line on stdin.
    pub command: Vec<String>,
    /// A URL each event is POSTed to; `${VAR}` in it is read from the environment when sending,
    /// so a secret token never sits in the file (nor in a log: it is shown as written).
    pub webhook: Option<String>,
    pub format: WebhookFormat,
    /// A desktop notification over the session D-Bus, where there is one.
    pub desktop: bool,
    /// Which events to send (default: approval, paused, failed_note, failing, expect,
    /// role_broken).
    pub events: Option<Vec<EventKind>>,
    /// `"22:00-07:00"`: events in these hours (the config's time zone) wait until they end.
    pub quiet_hours: Option<String>,
    /// How many failed runs in a row of one role make a `failing` event (default 2).
    pub after_failures: u32,
    /// The vault's name in Obsidian, for `obsidian://` links (default: its folder's name).
    pub obsidian_vault: Option<String>,
    /// An ntfy topic on the webhook's server (`${VAR}`: a topic name is as good as a password)
    /// that a tap on an `approval` push's Approve or Reject button publishes its decision token
    /// to, and that tabd subscribes to (docs/spec.md §27). Needs `format = "ntfy"`.
    pub reply_topic: Option<String>,
    /// An ntfy access token (`${VAR}`), sent as `Authorization: Bearer …` when publishing, when
    /// subscribing to `reply_topic`, and by the push's buttons.
    pub access_token: Option<String>,
    /// `[notify.telegram]`: a bot that sends events to the person's chat and reads their answers.
    pub telegram: Option<TelegramConfig>,
}

/// The Telegram Bot API's address; `api_base` stands in for it (a test's local stand-in).
pub const TELEGRAM_API: &str = "https://api.telegram.org";

/// `[notify.telegram]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The bot's token, as `${VAR}`: it is a password to the bot, and it sits in every request's
    /// URL, so it is never written in the file (nor shown anywhere).
    pub token: toml::Spanned<String>,
    /// The person's chat with the bot (its id: a number; a group's is negative). Only this chat
    /// is obeyed.
    pub chat: i64,
    /// Who in the chat may answer (Telegram user ids). Unset: the chat's own id, which is the
    /// person in a private chat with the bot; a group lists its members who may decide.
    #[serde(default)]
    pub users: Vec<i64>,
    /// The Bot API's address (default `https://api.telegram.org`): a local stand-in for tests.
    #[serde(default)]
    pub api_base: Option<String>,
}

impl TelegramConfig {
    /// The users whose taps and messages are obeyed.
    pub fn obeyed(&self) -> Vec<i64> {
        if self.users.is_empty() {
            vec![self.chat]
        } else {
            self.users.clone()
        }
    }

    /// The Bot API's address, without a trailing slash.
    pub fn api(&self) -> &str {
        self.api_base
            .as_deref()
            .unwrap_or(TELEGRAM_API)
            .trim_end_matches('/')
    }

    /// Whether the token is written as a `${VAR}` (checked when the config is read).
    pub fn check(&self) -> Result<(), BadTelegram> {
        let token = self.token.get_ref().trim();
        if !(token.starts_with("${") && token.ends_with('}')) {
            return Err(BadTelegram::TokenInFile);
        }
        if self.chat == 0 {
            return Err(BadTelegram::NoChat);
        }
        Ok(())
    }
}

/// Why `[notify.telegram]` cannot work as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTelegram {
    #[error(
        "[notify.telegram] token: write the variable that holds it, like \"${{TELEGRAM_BOT_TOKEN}}\" (a bot's token is a password: never in the file)"
    )]
    TokenInFile,
    #[error("[notify.telegram] chat: your chat's id with the bot, a number (see docs/notify.md)")]
    NoChat,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            webhook: None,
            format: WebhookFormat::Json,
            desktop: false,
            events: None,
            quiet_hours: None,
            after_failures: 2,
            obsidian_vault: None,
            reply_topic: None,
            access_token: None,
            telegram: None,
        }
    }
}

impl NotifyConfig {
    /// Whether any channel is set.
    pub fn any(&self) -> bool {
        !self.command.is_empty() || self.webhook.is_some() || self.desktop || self.telegram.is_some()
    }

    pub fn wants(&self, kind: EventKind) -> bool {
        match &self.events {
            Some(list) => list.contains(&kind),
            None => EventKind::DEFAULT.contains(&kind),
        }
    }

    /// Whether `reply_topic` is set where it can work: an ntfy webhook's server (checked when the
    /// config is read).
    pub fn replies(&self) -> Result<bool, BadReplyTopic> {
        let Some(topic) = self.reply_topic.as_deref() else {
            return Ok(false);
        };
        if self.webhook.is_none() || self.format != WebhookFormat::Ntfy {
            return Err(BadReplyTopic::NoNtfy);
        }
        if topic.trim().is_empty() || topic.contains('/') {
            return Err(BadReplyTopic::NotATopic);
        }
        Ok(true)
    }

    /// The quiet hours, checked when the config is read.
    pub fn quiet(&self) -> Result<Option<(NaiveTime, NaiveTime)>, BadQuietHours> {
        let Some(text) = self.quiet_hours.as_deref() else {
            return Ok(None);
        };
        let bad = || BadQuietHours::NotTwoTimes(text.to_string());
        let (from, to) = text.split_once('-').ok_or_else(bad)?;
        let time = |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").map_err(|_| bad());
        let (from, to) = (time(from)?, time(to)?);
        if from == to {
            return Err(BadQuietHours::Empty(text.to_string()));
        }
        Ok(Some((from, to)))
    }
}

/// Why `[notify] quiet_hours` (the text given) is not two times of day.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadQuietHours {
    #[error("[notify] quiet_hours = \"{0}\": write two times like \"22:00-07:00\"")]
    NotTwoTimes(String),
    #[error("[notify] quiet_hours = \"{0}\" starts and ends at the same time")]
    Empty(String),
}

/// Why `[notify] reply_topic` cannot work as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadReplyTopic {
    #[error(
        "[notify] reply_topic needs an ntfy webhook on the same server: set `webhook` to the push topic's URL \
         and `format = \"ntfy\"`"
    )]
    NoNtfy,
    #[error("[notify] reply_topic is a topic's name on the webhook's server (like \"${{NTFY_REPLY_TOPIC}}\"), not a URL")]
    NotATopic,
}

/// Whether `t` falls in the quiet hours `from`–`to` (which may run past midnight).
pub fn in_quiet(t: NaiveTime, (from, to): (NaiveTime, NaiveTime)) -> bool {
    if from < to {
        t >= from && t < to
    } else {
        t >= from || t < to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hours_run_past_midnight_and_bad_ones_say_what_to_write() {
        let c = NotifyConfig {
            quiet_hours: Some("22:00-07:00".into()),
            ..NotifyConfig::default()
        };
        let q = c.quiet().unwrap().unwrap();
        let at = |s: &str| NaiveTime::parse_from_str(s, "%H:%M").unwrap();
        assert!(in_quiet(at("23:30"), q) && in_quiet(at("06:59"), q));
        assert!(!in_quiet(at("07:00"), q) && !in_quiet(at("12:00"), q));
        let day = (at("12:00"), at("13:00"));
        assert!(in_quiet(at("12:30"), day) && !in_quiet(at("13:00"), day));
        for bad in ["22-07", "late", "10:00-10:00"] {
            let c = NotifyConfig {
                quiet_hours: Some(bad.into()),
                ..NotifyConfig::default()
            };
            assert!(c.quiet().is_err(), "{bad}");
        }
        let said = |text: &str| {
            let c = NotifyConfig {
                quiet_hours: Some(text.into()),
                ..NotifyConfig::default()
            };
            c.quiet().map_or_else(|e| e.to_string(), |_| String::new())
        };
        assert_eq!(
            said("late"),
            "[notify] quiet_hours = \"late\": write two times like \"22:00-07:00\""
        );
        assert_eq!(
            said("10:00-10:00"),
            "[notify] quiet_hours = \"10:00-10:00\" starts and ends at the same time"
        );
        assert!(NotifyConfig::default().wants(EventKind::Approval));
        assert!(!NotifyConfig::default().wants(EventKind::Done));
    }

    #[test]
    fn a_reply_topic_needs_an_ntfy_webhook_and_is_a_name() {
        let c = |text: &str| toml::from_str::<NotifyConfig>(text).unwrap().replies();
        assert_eq!(c(""), Ok(false));
        assert_eq!(
            c("webhook = \"https://ntfy.example/t\"\nformat = \"ntfy\"\nreply_topic = \"${R}\""),
            Ok(true)
        );
        assert_eq!(
            c("webhook = \"https://x.example/\"\nreply_topic = \"r\""),
            Err(BadReplyTopic::NoNtfy)
        );
        assert_eq!(c("reply_topic = \"r\""), Err(BadReplyTopic::NoNtfy));
        assert_eq!(
            c("webhook = \"https://ntfy.example/t\"\nformat = \"ntfy\"\nreply_topic = \"https://ntfy.example/r\""),
            Err(BadReplyTopic::NotATopic)
        );
    }

    /// `role_broken` is an event a config may name, and one sent by default; a misspelt event
    /// is refused with the list of events.
    #[test]
    fn role_broken_is_an_event_of_the_config_and_sent_by_default() {
        let c: NotifyConfig = toml::from_str("events = [\"role_broken\"]").unwrap();
        assert!(c.wants(EventKind::RoleBroken) && !c.wants(EventKind::Approval));
        assert!(NotifyConfig::default().wants(EventKind::RoleBroken));
        let e = toml::from_str::<NotifyConfig>("events = [\"role_brokn\"]").unwrap_err();
        assert!(e.to_string().contains("role_broken"), "{e}");
    }
}
