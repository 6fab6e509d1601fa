//! The parts of the Bot API's JSON that tabd reads (core.telegram.org/bots/api): an answer is
//! `{"ok": true, "result": …}` or `{"ok": false, "error_code", "description"}`; `getUpdates`'
//! result is a list of updates, each with its `update_id` and one of `message` or
//! `callback_query`. Everything else a server sends is passed over (serde ignores unknown
//! fields), and every field tabd does not need to act is optional: what comes back is input.

use serde::Deserialize;

/// A Bot API answer's envelope.
#[derive(Debug, Deserialize)]
pub(super) struct Answer {
    pub ok: bool,
    #[serde(default)]
    pub result: serde_json::Value,
    #[serde(default)]
    pub description: Option<String>,
}

/// One update of `getUpdates`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

/// A message in a chat.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    #[serde(default)]
    pub from: Option<User>,
    #[serde(default)]
    pub text: Option<String>,
    /// The message this one answers, when it is a reply.
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Chat {
    pub id: i64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct User {
    pub id: i64,
}

/// A tap on an inline button.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    /// The message whose button was tapped (absent when it is too old for Telegram to say).
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub data: Option<String>,
}

impl Update {
    /// The chat the update came from, and who sent it.
    pub fn origin(&self) -> Option<(i64, i64)> {
        if let Some(m) = &self.message {
            return Some((m.chat.id, m.from.as_ref().map_or(m.chat.id, |u| u.id)));
        }
        let q = self.callback_query.as_ref()?;
        Some((q.message.as_ref()?.chat.id, q.from.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes of the Bot API's documentation read as tabd needs them; a field it does not
    /// know is no error.
    #[test]
    fn updates_read_as_the_bot_api_writes_them() {
        let u: Update = serde_json::from_str(
            r#"{"update_id":10,"message":{"message_id":5,"date":1,"chat":{"id":42,"type":"private"},
                "from":{"id":42,"is_bot":false,"first_name":"A"},"text":"/status","entities":[]}}"#,
        )
        .unwrap();
        assert_eq!(u.origin(), Some((42, 42)));
        assert_eq!(u.message.unwrap().text.as_deref(), Some("/status"));
        let q: Update = serde_json::from_str(
            r#"{"update_id":11,"callback_query":{"id":"77","chat_instance":"x","from":{"id":9,"is_bot":false,"first_name":"B"},
                "message":{"message_id":6,"date":1,"chat":{"id":42,"type":"private"}},"data":"a:x:y"}}"#,
        )
        .unwrap();
        assert_eq!(q.origin(), Some((42, 9)));
    }
}
