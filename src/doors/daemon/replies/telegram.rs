//! Telegram's side of the daemon (docs/spec.md §27): the updates of `[notify.telegram]`'s bot, read by
//! long polling (`capabilities::notify::telegram::poll`, started with the notifier, ended at
//! shutdown), acted on here, and the update id acted on kept in `.tabd/telegram.json` (`STATE`),
//! so the next start reads on after it: a tap made while tabd was down is applied when it is
//! back, unless the approval expired.
//!
//! Only the configured chat is obeyed, and in it only the configured users (the chat's own id in
//! a private chat): an update from anyone else is ignored — never echoed, never answered — and
//! said once per chat or user in the daily note. From the person:
//!
//! - a tap on Approve or Reject: its callback data checked (`callback`), then decided by the one
//!   decision function (`approval_pass::decide::tap`), and answered (`answerCallbackQuery`):
//!   decided, already decided, or refused and why;
//! - `/ask ROLE text`, or a reply to a message tabd sent about a role: an inbox note of that role
//!   (`from: telegram`, bounded, the text in a fence), written as the webhook server writes one,
//!   answered "queued"; once the note's run ends, its summary comes back as a reply;
//! - `/status`: what `agent/status.md` says.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::super::Daemon;
use super::callback;
use crate::base::blocking;
use crate::base::vault::VaultPath;
use crate::capabilities::http::{deliver::write_note, note::message_note};
use crate::capabilities::notify::telegram::{
    self, Ask, CallbackQuery, Message, Polling, Sent, State, Telegram, Update,
};
use crate::doors::approval_pass::decide::{self, Refused, Tapped};
use crate::gate::approvals::token::{self, Claim};

/// What tabd keeps of the chat.
const STATE: &str = crate::base::vault::layout::TELEGRAM;

/// The most of `.tabd/telegram.json` read back.
const MAX_STATE: u64 = 1024 * 1024;

/// The most of `agent/status.md` read for `/status` (Telegram shows 4096 characters of it).
const MAX_STATUS: u64 = 64 * 1024;

/// How long after a run's record an `/ask` waits for its summary before answering without it.
const SUMMARY_WAIT: chrono::Duration = chrono::Duration::minutes(5);

/// Who the daemon's lines about Telegram are by.
const WHO: &str = "tabd";

/// The bot's updates, while `[notify.telegram]` is set.
pub(in crate::doors::daemon) struct Follow {
    pub polling: Polling,
    pub telegram: Arc<Telegram>,
}

/// The text of a message, and its first word without a bot's `@name` (`/ask@tabd_bot`).
fn command_of(text: &str) -> (&str, &str) {
    let text = text.trim();
    let (first, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    (first.split('@').next().unwrap_or(first), rest.trim())
}

impl Daemon {
    /// Starts reading the bot's updates from the last one acted on, and gives the channel the
    /// state kept in `.tabd/` (which message is which event's): when `[notify.telegram]` is set.
    pub(in crate::doors::daemon) fn start_telegram(&mut self) -> Option<Follow> {
        let telegram = self.shown.notifier.as_ref()?.telegram()?;
        let path = VaultPath::parse(STATE, false).ok()?;
        let kept: State = match self.run_env.vault.read_text(&path, MAX_STATE) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!("{STATE} cannot be read ({e}): Telegram's updates are read from all it keeps");
                State::default()
            }),
            Err(_) => State::default(),
        };
        let vault = self.run_env.vault.clone();
        telegram.attach(
            kept,
            Box::new(move |state| {
                let bytes = serde_json::to_vec(state).unwrap_or_default();
                if let Err(e) = vault.write_atomic(&path, &bytes) {
                    tracing::warn!("cannot keep Telegram's place in {STATE}: {e}");
                }
            }),
        );
        let offset = telegram.state().offset;
        let first_wait = self
            .setup
            .env
            .get("TABD_TEST_NOTIFY_RETRY_MS")
            .and_then(|ms| ms.parse().ok())
            .map_or(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_millis,
            );
        tracing::info!(
            "reading Telegram chat {} for taps and messages, {}",
            telegram.config.chat,
            if offset.is_some() {
                "from the last update acted on"
            } else {
                "from all Telegram keeps"
            }
        );
        Some(Follow {
            polling: telegram::poll(telegram.bot.clone(), offset, first_wait, None),
            telegram,
        })
    }

    /// One update: obeyed when it is from the configured chat and user, then its id kept.
    pub(in crate::doors::daemon) fn on_telegram(&mut self, u: Update) {
        let Some(t) = self.shown.answers.telegram.as_ref().map(|f| f.telegram.clone()) else {
            return;
        };
        match u.origin() {
            Some((chat, from)) if chat == t.config.chat && t.config.obeyed().contains(&from) => {
                if let Some(q) = u.callback_query {
                    self.on_tap(&t, q);
                } else if let Some(m) = u.message {
                    self.on_message(&t, &m);
                }
            }
            Some((chat, from)) => self.ignored(&t, if chat == t.config.chat { from } else { chat }),
            None => {}
        }
        t.update(|s| s.offset = Some(u.update_id.saturating_add(1)));
    }

    /// An update from another chat or user: said once each, in the log and the daily note.
    fn ignored(&self, t: &Telegram, who: i64) {
        let first = t.update(|s| {
            let first = !s.ignored.contains(&who);
            if first {
                s.ignored.push(who);
            }
            first
        });
        if first {
            let text = format!(
                "a Telegram update from {who}, not your chat {} (or a user it does not list), was ignored; others from it are ignored without a word",
                t.config.chat
            );
            tracing::warn!("{text}");
            self.telegram_line(&text);
        }
    }

    /// A tap on a button: decided (or refused), and answered.
    fn on_tap(&mut self, t: &Arc<Telegram>, q: CallbackQuery) {
        let said = self.decide_tap(q.data.as_deref().unwrap_or_default());
        let bot = t.bot.clone();
        tokio::spawn(async move {
            if let Err(e) = bot.answer(&q.id, &said).await {
                tracing::warn!("notify: cannot answer a tap on Telegram: {e}");
            }
        });
    }

    /// What a tap's data came to, as its answer says it.
    fn decide_tap(&mut self, data: &str) -> String {
        let refused = |me: &Self, why: &str| {
            me.telegram_line(&format!("a decision from Telegram was refused: {why}"));
            format!("Refused: {why}")
        };
        let (id, d, mac) = match callback::read(data) {
            Ok(parts) => parts,
            Err(e) => return refused(self, &e.to_string()),
        };
        let ledger = self.run_env.store.load().approvals;
        let Some(a) = ledger.get(&id) else {
            return refused(self, &Refused::Unknown(id).to_string());
        };
        let claim = Claim::of(&id, d, &a.args_hash, a.expires);
        if !callback::verifies(&self.run_env.key, &claim, &mac) {
            return refused(
                self,
                "its signature does not match: it was forged or changed, or it is for a request that is not this one any more",
            );
        }
        // The claim checked: the one decision function decides it, as it does an ntfy tap.
        let full = token::make(&self.run_env.key, &claim);
        let env = self.run_env.clone();
        match blocking::run(move || decide::tap(&env, &full)) {
            Tapped::Decided { id, approved, .. } => {
                let what = if approved { "approved" } else { "rejected" };
                tracing::info!("approval {id} {what} from Telegram");
                self.apply(super::super::core::Input::ApprovalsAsked);
                format!("{}{}.", what[..1].to_uppercase(), &what[1..])
            }
            Tapped::Already { id, a, how } => {
                self.telegram_line(&format!(
                    "approval `{id}` ({}): a tap on Telegram came after it was already decided ({how}); nothing changed",
                    a.tool
                ));
                format!("Already decided: {how}.")
            }
            // The same button tapped again: it decided the first time.
            Tapped::Refused(Refused::Replayed) => "Already decided.".into(),
            Tapped::Refused(why) => refused(self, &why.to_string()),
        }
    }

    /// A message from the person: `/status`, `/ask`, a reply about a role, or words on what to
    /// send.
    fn on_message(&mut self, t: &Arc<Telegram>, m: &Message) {
        let text = m.text.as_deref().unwrap_or_default();
        let (command, rest) = command_of(text);
        let answer = match command {
            "/status" => self.status_text(),
            "/ask" => {
                let (role, what) = command_of(rest);
                self.ask(t, role, what, m)
            }
            _ => match m
                .reply_to_message
                .as_ref()
                .and_then(|r| t.state().role_of(r.message_id).map(str::to_string))
            {
                Some(role) => self.ask(t, &role, text.trim(), m),
                None => {
                    "Send /ask ROLE and what to do, /status, or reply to one of my messages about a role."
                        .into()
                }
            },
        };
        send(t, answer, Some(m.message_id));
    }

    /// `agent/status.md`'s text, within a message.
    fn status_text(&self) -> String {
        let note = self.run_env.vault.layout().status_note();
        let path = VaultPath::parse(&note, false);
        match path.and_then(|p| self.run_env.vault.read_text(&p, MAX_STATUS)) {
            Ok(text) if !text.trim().is_empty() => telegram::bounded(text.trim()),
            Ok(_) => format!("{note} is empty."),
            Err(e) => format!("{note} cannot be read: {e}"),
        }
    }

    /// An inbox note of `role` with `what`, from message `m`; the answer to send.
    fn ask(&mut self, t: &Telegram, role: &str, what: &str, m: &Message) -> String {
        let known: Vec<&str> = self.roles().runnable().map(|r| r.name.as_str()).collect();
        if !known.contains(&role) {
            return format!(
                "No role `{}` here. Roles: {}. Send /ask ROLE and what to do.",
                crate::base::text::one_line(role, 40),
                known.join(", ")
            );
        }
        if what.is_empty() {
            return format!("What should {role} do? Send /ask {role} and what to do.");
        }
        let note = message_note(
            "telegram",
            &format!("A message from the person's Telegram chat with tabd, for `{role}`:"),
            what,
            self.run_env.clock.now(),
        );
        match write_note(&self.run_env.vault, self.roles(), role, &note) {
            Ok(path) => {
                t.update(|s| {
                    s.asks.push(Ask {
                        note: path.to_string(),
                        role: role.to_string(),
                        message: m.message_id,
                    })
                });
                format!("Queued for {} ({path}).", self.display_name(role))
            }
            Err(e) => format!("Not queued: {e}."),
        }
    }

    /// The `/ask` notes whose run ended: each run's summary, as a reply to the person's message.
    pub(in crate::doors::daemon) fn answer_asks(&mut self) {
        let Some(t) = self.shown.answers.telegram.as_ref().map(|f| f.telegram.clone()) else {
            return;
        };
        let asks = t.state().asks;
        if asks.is_empty() {
            return;
        }
        let now = self.run_env.clock.now();
        for ask in asks {
            let still_there = VaultPath::parse(&ask.note, false).is_ok_and(|p| self.run_env.vault.exists(&p));
            if still_there {
                continue;
            }
            let Some(run) = self.run_of(&ask.note, now) else {
                continue;
            };
            let who = self.display_name(&ask.role);
            let answer = match (run.outcome.as_str(), t.summary_of(&run.id)) {
                ("ok", Some(summary)) if !summary.trim().is_empty() => format!("{who}: {summary}"),
                ("ok", _) if now < run.ended + SUMMARY_WAIT => continue,
                ("ok", _) => format!("{who} finished; its summary is in the daily note."),
                (outcome, _) => format!(
                    "{who}'s run ended {outcome}{}.",
                    run.error
                        .map(|e| format!(": {}", crate::base::text::one_line(&e, 300)))
                        .unwrap_or_default()
                ),
            };
            send_about(&t, answer, Some(ask.message), Some(ask.role.clone()));
            t.update(|s| s.asks.retain(|a| a.note != ask.note));
        }
    }

    /// The run that handled `note`, from the run records of the last days.
    fn run_of(&self, note: &str, now: DateTime<Utc>) -> Option<RunSeen> {
        let tz = self.config().timezone;
        let mut days = vec![
            now.with_timezone(&tz).date_naive(),
            now.date_naive(),
            (now - chrono::Duration::days(1)).with_timezone(&tz).date_naive(),
        ];
        days.dedup();
        let mut found = None;
        for day in days {
            let Ok(path) = VaultPath::parse(&crate::base::vault::layout::run_records(day), false) else {
                continue;
            };
            let read = crate::records::runlog::read::each_record(
                &self.run_env.vault,
                &path,
                |r| {
                    let handled = r["trigger"]["notes"]
                        .as_array()
                        .is_some_and(|n| n.iter().any(|n| n.as_str() == Some(note)));
                    // A run that waits for an approval keeps its note: it has not answered yet.
                    if handled && r["ended"].as_str() != Some("waiting") {
                        found = RunSeen::of(&r);
                    }
                },
                |_| {},
            );
            if read.is_ok() && found.is_some() {
                break;
            }
        }
        found
    }

    /// A line of the daily log about Telegram, by tabd.
    fn telegram_line(&self, text: &str) {
        let written = self.run_env.log.write_line(self.run_env.clock.now(), WHO, text);
        self.shown.writes.check("the daily note (Telegram)", written);
    }
}

/// What an `/ask` needs of the run that handled its note.
struct RunSeen {
    id: String,
    outcome: String,
    error: Option<String>,
    ended: DateTime<Utc>,
}

impl RunSeen {
    fn of(r: &serde_json::Value) -> Option<Self> {
        Some(Self {
            id: r["run_id"].as_str()?.to_string(),
            outcome: r["outcome"].as_str()?.to_string(),
            error: r["error"].as_str().map(str::to_string),
            ended: r["ended_at"].as_str()?.parse().ok()?,
        })
    }
}

/// Sends `text` to the chat, as a reply to `reply_to`, off the daemon's loop (one try: a reply
/// that fails is said in the log).
fn send(t: &Arc<Telegram>, text: String, reply_to: Option<i64>) {
    send_about(t, text, reply_to, None);
}

/// Like `send`, for an answer about `role`: a reply to it asks that role again.
fn send_about(t: &Arc<Telegram>, text: String, reply_to: Option<i64>, role: Option<String>) {
    let t = t.clone();
    tokio::spawn(async move {
        match t.bot.send(&text, reply_to, &[]).await {
            Ok(id) => {
                if let Some(role) = role {
                    t.update(|s| {
                        s.sent.push(Sent {
                            key: format!("answer:{id}"),
                            message: id,
                            role,
                        })
                    });
                }
            }
            Err(e) => tracing::warn!("notify: cannot answer on Telegram: {e}"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_read_without_the_bots_name() {
        assert_eq!(
            command_of("/ask@tabd_bot delivery do X"),
            ("/ask", "delivery do X")
        );
        assert_eq!(command_of("  /status "), ("/status", ""));
        assert_eq!(command_of("delivery  do X"), ("delivery", "do X"));
    }
}
