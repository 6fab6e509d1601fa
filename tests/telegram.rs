//! Telegram as a two-way channel (docs/spec.md §27, issue 51 items 2 and 4), end to end: the real
//! daemon talks to a local stand-in of the Bot API (`support::telegram`, its wire format):
//! approvals come with Approve and Reject buttons whose taps decide — once, through the ledger —
//! and the message is edited once decided anywhere; `/ask` writes an inbox note whose run's
//! summary comes back as a reply; `/status` answers; other chats are ignored and said once; the
//! bot's token is shown nowhere, even when the API fails.

use std::time::Duration;

use serde_json::Value;

use crate::support::approvals::{notes, ops_asks_to_write_the_plan, set_status, status_of, wait_status};
use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::telegram::{Bot, CHAT};
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(30);
const TOKEN: &str = "7351924:AAF-s3cretT0ken_of_the_bot";
const ENV: [(&str, &str); 2] = [("TG_TOKEN", TOKEN), ("TABD_TEST_NOTIFY_RETRY_MS", "50")];

fn telegram_config(api: &str) -> String {
    format!("\n[notify.telegram]\ntoken = \"${{TG_TOKEN}}\"\nchat = {CHAT}\napi_base = \"{api}\"\n")
}

/// `ops` asks to write the plan; `[notify.telegram]` talks to the stand-in.
fn vault(bot: &Bot) -> TestVault {
    let (v, fake) = ops_asks_to_write_the_plan();
    // The model stays up for the test's life (the second part of the run asks it again).
    std::mem::forget(fake);
    let config = std::fs::read_to_string(&v.config).unwrap();
    std::fs::write(&v.config, format!("{config}{}", telegram_config(&bot.url()))).unwrap();
    v
}

fn start(v: &TestVault) -> Daemon {
    Daemon::start_with_env(v, &ENV)
}

/// The approval's message, once it came, and the approval note.
fn the_message(v: &TestVault, bot: &Bot) -> (Value, String) {
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the approval's message", || {
        bot.calls("sendMessage")
            .iter()
            .any(|m| !m["reply_markup"].is_null())
    });
    let message = bot
        .calls("sendMessage")
        .into_iter()
        .find(|m| !m["reply_markup"].is_null())
        .unwrap();
    (message, notes(v).remove(0))
}

fn approval(v: &TestVault) -> Value {
    v.state()["approvals"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone()
}

/// The answers given to taps, in order.
fn answers(bot: &Bot) -> Vec<String> {
    bot.calls("answerCallbackQuery")
        .iter()
        .map(|a| a["text"].as_str().unwrap().to_string())
        .collect()
}

/// The edit of `message`, once it came.
fn edit_of(bot: &Bot, message: &Value) -> Value {
    wait_until(T, "the message edited", || {
        bot.calls("editMessageText")
            .iter()
            .any(|e| e["message_id"] == message["message_id"])
    });
    bot.calls("editMessageText")
        .into_iter()
        .find(|e| e["message_id"] == message["message_id"])
        .unwrap()
}

/// The approval goes to the configured chat with two buttons whose data fits Telegram's 64
/// bytes; Approve runs the call once, the run goes on, the tap is answered, and the message is
/// edited to the outcome with its buttons gone.
#[test]
fn approve_on_telegram_runs_the_call_once_and_the_message_shows_the_outcome() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let _d = start(&v);
    let (message, note) = the_message(&v, &bot);
    assert_eq!(message["chat_id"], CHAT);
    assert!(message["parse_mode"].is_null(), "plain text: {message}");
    let buttons = message["reply_markup"]["inline_keyboard"][0].as_array().unwrap();
    assert_eq!(buttons.len(), 2, "{message}");
    for (b, label) in buttons.iter().zip(["Approve", "Reject"]) {
        assert_eq!(b["text"], label);
        assert!(b["callback_data"].as_str().unwrap().len() <= 64, "{b}");
    }
    bot.tap(&message, "Approve");
    wait_status(&v, &note, "done");
    wait_until(T, "the second part", || {
        v.records().iter().any(|r| r["trigger"]["kind"] == "resume")
    });
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    wait_until(T, "the tap answered", || answers(&bot) == ["Approved."]);
    let edit = edit_of(&bot, &message);
    assert!(edit["text"].as_str().unwrap().starts_with("Decided: "), "{edit}");
    assert!(
        edit["text"]
            .as_str()
            .unwrap()
            .contains("Approved from your phone"),
        "{edit}"
    );
    assert_eq!(
        edit["reply_markup"]["inline_keyboard"],
        serde_json::json!([]),
        "buttons gone"
    );
    assert_eq!(approval(&v)["executions"], 1, "run once");
}

#[test]
fn reject_on_telegram_runs_nothing_and_the_message_shows_it() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let _d = start(&v);
    let (message, note) = the_message(&v, &bot);
    bot.tap(&message, "Reject");
    wait_status(&v, &note, "rejected");
    wait_until(T, "the tap answered", || answers(&bot) == ["Rejected."]);
    let edit = edit_of(&bot, &message);
    assert!(edit["text"].as_str().unwrap().contains("Rejected"), "{edit}");
    assert!(!v.path("project/plan.md").exists());
    assert_eq!(approval(&v)["executions"], 0);
}

/// Decided in the note first: the message is edited to say so; a later tap is answered
/// "already decided" and changes nothing.
#[test]
fn decided_in_the_note_the_message_is_edited_and_a_later_tap_is_already_decided() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let _d = start(&v);
    let (message, note) = the_message(&v, &bot);
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "done");
    let edit = edit_of(&bot, &message);
    assert!(edit["text"].as_str().unwrap().contains("in its note"), "{edit}");
    bot.tap(&message, "Reject");
    wait_until(T, "the tap answered", || answers(&bot).len() == 1);
    assert!(
        answers(&bot)[0].starts_with("Already decided"),
        "{:?}",
        answers(&bot)
    );
    assert_eq!(status_of(&v, &note), "done");
    assert_eq!(approval(&v)["executions"], 1);
}

/// An approval decided while tabd is down (`tabd reject` in a terminal) is shown decided on
/// Telegram when tabd is back: the ledger keeps the outcome owed, so the first look tells it.
#[test]
fn decided_while_tabd_was_down_the_message_shows_it_once_tabd_is_back() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let mut d = start(&v);
    let (message, note) = the_message(&v, &bot);
    wait_until(T, "the outcome owed in the ledger", || {
        approval(&v)["outcome_told"] == false
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let id = v.state()["approvals"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let out = v.command(&["reject", &id]).envs(ENV).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _d = start(&v);
    let edit = edit_of(&bot, &message);
    assert!(edit["text"].as_str().unwrap().contains("ejected"), "{edit}");
    assert!(
        edit["reply_markup"].is_null() || edit["reply_markup"]["inline_keyboard"] == serde_json::json!([]),
        "{edit}"
    );
    wait_until(T, "told, and kept so", || approval(&v)["outcome_told"] == true);
    assert_eq!(status_of(&v, &note), "rejected");
}

/// A tap made while tabd is down is applied at its next start, which reads on from the update
/// after the last one acted on (one read before is not read again).
#[test]
fn a_tap_made_while_tabd_was_down_is_applied_after_the_restart() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let mut d = start(&v);
    let (message, note) = the_message(&v, &bot);
    bot.say("hello");
    let help = |bot: &Bot| {
        bot.calls("sendMessage")
            .iter()
            .filter(|m| m["text"].as_str().unwrap().starts_with("Send /ask"))
            .count()
    };
    wait_until(T, "the hello answered", || help(&bot) == 1);
    wait_until(T, "the place kept", || {
        v.path(".tabd/telegram.json").exists() && v.read(".tabd/telegram.json").contains("\"offset\":2")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let polls = bot.calls("getUpdates").len();
    bot.tap(&message, "Approve");
    let _d = start(&v);
    wait_status(&v, &note, "done");
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    let after = &bot.calls("getUpdates")[polls];
    assert_eq!(after["offset"], 2, "resumed after the hello: {after}");
    assert_eq!(help(&bot), 1, "the hello is not read again");
}

/// A tap or a message from another chat, or from another user in the chat, decides nothing, is
/// never answered, and is said once per chat or user; a garbled or forged button is refused and
/// said; nothing is decided by any of them.
#[test]
fn other_chats_are_ignored_and_said_once_and_forged_buttons_are_refused() {
    let bot = Bot::start(TOKEN);
    let v = vault(&bot);
    let d = start(&v);
    let (message, note) = the_message(&v, &bot);
    let id = v.state()["approvals"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    bot.tap_as(&message, "Approve", 999, 999);
    bot.tap_as(&message, "Approve", 999, 999);
    bot.say_as("/ask ops words-from-a-stranger", 999, 999, None);
    bot.tap_as(&message, "Approve", CHAT, 777);
    // Updates are read in order: once this one is answered, those before it were read.
    bot.tap_data(&message, &Value::from("a:zz:123"), CHAT, CHAT);
    wait_until(T, "the garbled tap answered", || answers(&bot).len() == 1);
    assert!(
        answers(&bot)[0].starts_with("Refused: it is not a button tabd made"),
        "{:?}",
        answers(&bot)
    );
    let forged = format!("a:{id}:{}", "0".repeat(32));
    bot.tap_data(&message, &Value::from(forged.as_str()), CHAT, CHAT);
    wait_until(T, "the forged tap answered", || answers(&bot).len() == 2);
    assert!(
        answers(&bot)[1].contains("signature does not match"),
        "{:?}",
        answers(&bot)
    );
    let day = v.daily();
    assert_eq!(day.matches("a Telegram update from 999").count(), 1, "{day}");
    assert_eq!(day.matches("a Telegram update from 777").count(), 1, "{day}");
    assert_eq!(
        day.matches("a decision from Telegram was refused").count(),
        2,
        "{day}"
    );
    assert!(!day.contains(&forged));
    assert_eq!(status_of(&v, &note), "pending");
    assert_eq!(approval(&v)["executions"], 0);
    assert!(
        bot.calls("sendMessage").iter().all(|m| m["chat_id"] == CHAT),
        "nothing goes to another chat"
    );
    assert!(!d.stderr().contains("words-from-a-stranger"), "never echoed");
    assert!(!day.contains("words-from-a-stranger"), "never echoed");
    assert!(
        v.files_in("agent/inbox/ops")
            .iter()
            .all(|f| !f.contains("telegram")),
        "no note from a stranger: {}",
        v.listing()
    );
}

/// A vault with a role `delivery` whose model answers "Delivered: X is done."
fn delivery_vault(bot: &Bot) -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!("{}{}", daemon_config(""), telegram_config(&bot.url())),
    );
    v.write(
        "roles/delivery.md",
        "---\n---\n# Delivery\n## Mission\nDo what the person asks.\n## Tools\n- read_file\n",
    );
    fake.respond_with(|_, _| wire::text("anthropic", "Delivered: X is done."));
    (v, fake)
}

/// `/ask delivery do X` writes an inbox note (`from: telegram`, the text in a fence), answers
/// "queued", and the run's summary comes back as a reply to the person's message; `/status`
/// answers with `agent/status.md`; an unknown role is answered with the roles there are. A reply
/// to the summary is a note for the same role.
#[test]
fn ask_makes_a_note_whose_summary_comes_back_and_status_answers() {
    let bot = Bot::start(TOKEN);
    let (v, _fake) = delivery_vault(&bot);
    let _d = start(&v);
    let replies_to = |bot: &Bot, id: i64| -> Vec<String> {
        bot.calls("sendMessage")
            .iter()
            .filter(|m| m["reply_parameters"]["message_id"] == id)
            .map(|m| m["text"].as_str().unwrap().to_string())
            .collect()
    };
    let ask = bot.say("/ask delivery do X");
    wait_until(T, "the summary back", || {
        replies_to(&bot, ask)
            .iter()
            .any(|t| t.contains("Delivered: X is done."))
    });
    let said = replies_to(&bot, ask);
    assert!(said[0].starts_with("Queued for "), "{said:?}");
    let handled = v.files_in("agent/inbox/delivery/processed");
    assert_eq!(handled.len(), 1, "{}", v.listing());
    let note = v.read(&format!("agent/inbox/delivery/processed/{}", handled[0]));
    assert!(note.contains("from: telegram"), "{note}");
    assert!(note.contains("```text\ndo X\n```"), "{note}");
    // A reply to the summary asks the same role again.
    let summary = bot
        .calls("sendMessage")
        .into_iter()
        .find(|m| m["text"].as_str().unwrap().contains("Delivered: X is done."))
        .unwrap();
    // Once tabd took the summary's message id (its answer from sendMessage) as about the role.
    wait_until(T, "the summary's message kept", || {
        v.read(".tabd/telegram.json")
            .contains(&format!("\"answer:{}\"", summary["message_id"]))
    });
    let follow_up = bot.say_as("and Y too", CHAT, CHAT, summary["message_id"].as_i64());
    wait_until(T, "the follow-up's summary", || {
        replies_to(&bot, follow_up)
            .iter()
            .any(|t| t.contains("Delivered: X is done."))
    });
    assert_eq!(
        v.files_in("agent/inbox/delivery/processed").len(),
        2,
        "{}",
        v.listing()
    );
    let status = bot.say("/status");
    wait_until(T, "the status", || !replies_to(&bot, status).is_empty());
    let text = replies_to(&bot, status).remove(0);
    assert!(text.contains("delivery"), "{text}");
    assert!(
        v.read("agent/status.md")
            .starts_with(text.lines().next().unwrap()),
        "{text}"
    );
    let unknown = bot.say("/ask nosuch do Y");
    wait_until(T, "the unknown role answered", || {
        !replies_to(&bot, unknown).is_empty()
    });
    let text = replies_to(&bot, unknown).remove(0);
    assert!(
        text.starts_with("No role `nosuch` here. Roles: ") && text.contains("delivery"),
        "{text}"
    );
}

/// Every file under `root`, with the token in it if one has it.
fn files_with(root: &std::path::Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// The API answering 500 (its description quoting the request's path, the token in it), then
/// not there at all: the failure shows in the status and the log, and the token in no output,
/// log line, daily note, status or file.
#[test]
fn the_bots_token_appears_nowhere_when_the_api_fails() {
    let bot = Bot::start(TOKEN);
    bot.fail_with_500();
    let v = vault(&bot);
    let mut d = start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the failure in the status", || {
        v.path("agent/status.md").exists() && v.read("agent/status.md").contains("telegram: Telegram")
    });
    wait_until(T, "the polling's failure in the log", || {
        d.stderr()
            .contains("cannot read Telegram's updates: Telegram answered HTTP 500")
    });
    assert!(
        d.stderr().contains("<token>"),
        "the description, scrubbed: {}",
        d.stderr()
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let first = d.stderr();
    // Nobody there: the connection is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = std::fs::read_to_string(&v.config).unwrap();
    std::fs::write(&v.config, config.replace(&bot.url(), &format!("http://{dead}"))).unwrap();
    let d = start(&v);
    wait_until(T, "the refused connection in the log", || {
        d.stderr()
            .contains("cannot read Telegram's updates: Telegram did not answer")
    });
    // Not even with the token hidden: the URL is never said.
    assert!(!d.stderr().contains(&format!("{dead}/")), "{}", d.stderr());
    for text in [first, d.stderr(), v.daily(), v.read("agent/status.md")] {
        assert!(!text.contains(TOKEN) && !text.contains("s3cretT0ken"), "{text}");
    }
    assert_eq!(files_with(v.dir.path(), "s3cretT0ken"), Vec::<String>::new());
}
