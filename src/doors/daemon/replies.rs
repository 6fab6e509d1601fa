//! Answers from the lock screen (docs/spec.md §27): with `[notify] reply_topic`, an `approval` push
//! carries Approve and Reject buttons whose bodies are decision tokens (`buttons`); a tap
//! publishes one to the reply topic, which the daemon follows (`capabilities::notify::replies`,
//! started with the notifier, ended at shutdown). Each message is decided by the one decision
//! function (`approval_pass::decide::tap`) — the ledger takes only the first decision — and then
//! its id is kept in `.tabd/` (`SINCE`), so the next start reads on from it: a tap made while tabd
//! was down is applied when it is back, unless the approval expired.
//!
//! What a tap came to is said: a decision goes through the approval's note and the daily log
//! like any other, and the approvals pass runs it; a refused token gets a daily line with the
//! reason (never the token); a tap on an approval decided already gets a line and a push in the
//! approval's place. And every approval the person was pushed is pushed again once decided,
//! however it was (`tell_decided`), in its push's place: the buttons go.
//!
//! With `[notify.telegram]`, the bot's updates come in through the same `next` (`telegram`:
//! taps, `/ask`, `/status`; `callback`: a Telegram button's short callback data).

mod callback;
mod telegram;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::Daemon;
use crate::base::blocking;
use crate::base::vault::VaultPath;
use crate::capabilities::notify::replies::{self, Reply, Subscription, Topic};
use crate::capabilities::notify::telegram::Update;
use crate::capabilities::notify::Replies;
use crate::doors::approval_pass::decide::{self, Tapped};
use crate::gate::approvals::token::{self, Claim, Decision};
use crate::records::state::approval_ledger::{Approval, NoteStatus};
use crate::setup::config::notify::EventKind;

/// Where the id of the last message of the reply topic acted on is kept.
const SINCE: &str = crate::base::vault::layout::NTFY_REPLIES;

/// Who the daemon's lines about taps are by.
const WHO: &str = "tabd";

/// The reply topic's side of the daemon.
#[derive(Default)]
pub(super) struct Answers {
    /// The subscription, while `[notify] reply_topic` is set.
    sub: Option<Subscription>,
    /// The bot's updates, while `[notify.telegram]` is set.
    telegram: Option<telegram::Follow>,
    /// Approvals whose outcome was pushed, or was decided before this daemon looked.
    told: HashSet<String>,
    /// `told` holds what was decided before the first look.
    looked: bool,
}

impl Answers {
    /// What `next` reads: the reply topic and the bot's updates.
    pub(super) fn sub(&mut self) -> &mut Self {
        self
    }

    /// Ends the subscription and the bot's polling (tabd is stopping).
    pub(super) fn stop(&mut self) {
        self.sub = None;
        self.telegram = None;
    }
}

/// What `SINCE` holds.
#[derive(Serialize, Deserialize)]
struct Since {
    since: String,
}

/// What came back from the person.
pub(super) enum Heard {
    /// A message of the ntfy reply topic.
    Ntfy(Reply),
    /// An update of the Telegram bot.
    Telegram(Box<Update>),
}

/// The next message of the reply topic or update of the bot; never, without either.
pub(super) async fn next(answers: &mut Answers) -> Heard {
    let Answers { sub, telegram, .. } = answers;
    let ntfy = async {
        match sub {
            Some(s) => s.next().await,
            None => std::future::pending().await,
        }
    };
    let bot = async {
        match telegram {
            Some(t) => t.polling.next().await,
            None => std::future::pending().await,
        }
    };
    // Both are channels' receivers: a branch not taken loses nothing.
    tokio::select! {
        reply = ntfy => Heard::Ntfy(reply),
        update = bot => Heard::Telegram(Box::new(update)),
    }
}

impl Daemon {
    /// (Re)starts following the reply topic, from the last message acted on: at start-up and
    /// whenever `[notify]` changed.
    pub(super) fn start_replies(&mut self) {
        self.shown.answers.sub = None;
        self.shown.answers.telegram = None;
        self.shown.answers.telegram = self.start_telegram();
        let topic = match Topic::of(&self.config().notify, &self.setup.env) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("{e}; taps on a push's buttons are not read");
                return;
            }
        };
        let forgotten = decide::forget_old_tokens(&self.run_env);
        if forgotten > 0 {
            tracing::debug!("forgot {forgotten} decision token(s) past any approval's life");
        }
        let since = self.since();
        tracing::info!(
            "following the reply topic {topic:?} for taps on approvals' buttons, {}",
            since
                .as_deref()
                .map_or("from all the server keeps".to_string(), |_| {
                    "from the last one acted on".to_string()
                })
        );
        self.shown.answers.sub = Some(replies::subscribe(topic, since, &self.setup.env));
    }

    /// The id of the last message acted on, as kept (`None`: not kept, or not an ntfy id).
    fn since(&self) -> Option<String> {
        let path = VaultPath::parse(SINCE, false).ok()?;
        let text = self.run_env.vault.read_text(&path, 4096).ok()?;
        let kept: Since = serde_json::from_str(&text).ok()?;
        replies::looks_like_an_id(&kept.since).then_some(kept.since)
    }

    /// The Approve and Reject (a checkpoint's Continue and Stop) buttons' tokens of approval `id`,
    /// when `[notify] reply_topic` is set. With `[notify.telegram]`, also their callback data there
    /// (`callback`).
    pub(super) fn buttons(&self, id: &str, a: &Approval) -> Option<Replies> {
        let notify = &self.config().notify;
        if notify.reply_topic.is_none() && notify.telegram.is_none() {
            return None;
        }
        let claim = |d| Claim::of(id, d, &a.args_hash, a.expires);
        let token = |d| token::make(&self.run_env.key, &claim(d));
        let short = |d| callback::make(&self.run_env.key, &claim(d));
        Some(Replies {
            approve: token(Decision::Approve),
            reject: token(Decision::Reject),
            // A checkpoint runs nothing: its buttons say what they do to the run.
            labels: if a.is_checkpoint() {
                ["Continue", "Stop"]
            } else {
                ["Approve", "Reject"]
            },
            telegram: notify
                .telegram
                .as_ref()
                .and_then(|_| Some([short(Decision::Approve)?, short(Decision::Reject)?])),
        })
    }

    /// What came back: a tap on ntfy, or an update of the Telegram bot.
    pub(super) fn on_reply(&mut self, heard: Heard) {
        match heard {
            Heard::Ntfy(reply) => self.on_ntfy(reply),
            Heard::Telegram(update) => self.on_telegram(*update),
        }
    }

    /// One message of the reply topic: decided, said, and its id kept.
    fn on_ntfy(&mut self, reply: Reply) {
        let env = self.run_env.clone();
        let message = reply.message.clone();
        match blocking::run(move || decide::tap(&env, &message)) {
            Tapped::Decided { id, approved, .. } => {
                tracing::info!(
                    "approval {id} {} from the phone",
                    if approved { "approved" } else { "rejected" }
                );
                // The pass runs an approved call, and the status shows it decided.
                self.apply(super::core::Input::ApprovalsAsked);
            }
            Tapped::Already { id, a, how } => self.already(&id, &a, &how, &reply.id),
            Tapped::Refused(why) => {
                self.line(&format!("a decision from your phone was refused: {why}"));
            }
        }
        self.keep_since(&reply.id);
    }

    /// A tap on an approval decided already: a line, and a push in the approval's place.
    fn already(&mut self, id: &str, a: &Approval, how: &str, message: &str) {
        self.line(&format!(
            "approval `{id}` ({}): a tap from your phone came after it was already decided ({how}); nothing changed",
            a.tool
        ));
        let mut ev = self.event(
            EventKind::Approval,
            &a.role,
            format!("already:{id}:{message}"),
            (
                format!("Already decided: {}", self.approval_title(id, a)),
                format!("Your tap changed nothing: it was already decided ({how})."),
            ),
            Some(a.note.clone()),
        );
        ev.replaces = Some(format!("approval:{id}"));
        self.send(ev);
    }

    /// Every approval the person was pushed, pushed again once it is decided (whichever way):
    /// in the approval push's place, so its buttons go. One decided while tabd was down is told
    /// when it is back: the ledger keeps what is owed (`outcome_told`); one pushed by a tabd that
    /// did not keep it, and decided before this daemon first looked, is not pushed again.
    pub(super) fn tell_decided(&mut self) {
        // Runs that answer an `/ask` on Telegram: their summaries, as replies.
        self.answer_asks();
        let notify = &self.config().notify;
        if self.shown.notifier.is_none() || (notify.reply_topic.is_none() && notify.telegram.is_none()) {
            return;
        }
        let decided: Vec<(String, Approval)> = self
            .seen
            .state
            .approvals
            .iter()
            .filter(|(id, a)| {
                a.notified && a.phase != NoteStatus::Pending && !self.shown.answers.told.contains(*id)
            })
            .map(|(id, a)| (id.clone(), a.clone()))
            .collect();
        let first_look = !self.shown.answers.looked;
        self.shown.answers.looked = true;
        let mut told = Vec::new();
        for (id, a) in decided {
            self.shown.answers.told.insert(id.clone());
            if first_look && a.outcome_told != Some(false) {
                continue;
            }
            if a.outcome_told == Some(false) {
                told.push(id.clone());
            }
            let how = decide::how_decided(&a, self.config().timezone);
            let mut ev = self.event(
                EventKind::Approval,
                &a.role,
                format!("decided:{id}"),
                (
                    format!("Decided: {}", self.approval_title(&id, &a)),
                    format!("{}{}.", how[..1].to_uppercase(), &how[1..]),
                ),
                Some(a.note.clone()),
            );
            ev.replaces = Some(format!("approval:{id}"));
            self.send(ev);
        }
        if told.is_empty() {
            return;
        }
        // The notifier's queue has it now (its retries, quiet hours): not owed again.
        let marked = self.run_env.store.update(|s| {
            for id in &told {
                if let Some(a) = s.approvals.get_mut(id) {
                    a.outcome_told = Some(true);
                }
            }
        });
        self.shown
            .writes
            .check("the state (approval outcomes told)", marked);
    }

    /// The approval push's title.
    fn approval_title(&self, id: &str, a: &Approval) -> String {
        let who = self.display_name(&a.role);
        super::effects::approval_words(&who, id, a, self.config().timezone).0
    }

    /// A line of the daily log, by tabd.
    fn line(&self, text: &str) {
        let written = self.run_env.log.write_line(self.run_env.clock.now(), WHO, text);
        self.shown
            .writes
            .check("the daily note (a tap from a phone)", written);
    }

    /// Keeps `id` as the last message acted on, durably: the next start reads on after it.
    fn keep_since(&self, id: &str) {
        let kept = serde_json::to_vec(&Since {
            since: id.to_string(),
        })
        .unwrap_or_default();
        let written = VaultPath::parse(SINCE, false).and_then(|p| self.run_env.vault.write_atomic(&p, &kept));
        self.shown
            .writes
            .check("the reply topic's place (.tabd/ntfy-replies.json)", written);
    }
}
