//! `checkpoint_every: N` (docs/spec.md §28, issue 52): every N tool calls a run waits for the person at
//! a checkpoint note — the calls so far, what the model says it does next, the cost — and goes on
//! (with the person's instruction, as their words) or stops, also after `kill -9`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::approvals::{notes, set_status, status_of};
use crate::support::daemon::{daemon_config, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Recorded, Reply};
use crate::support::ntfy::{Message, Ntfy};
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(30);
const KIND: &str = "anthropic";
const INSTRUCTION: &str = "Put the rest under archive, please.";

/// The model's answer after `done` calls: the next of 7 `write_file` calls, one per response,
/// then its final answer.
fn next_call(done: usize) -> Reply {
    if done >= 7 {
        return wire::text(KIND, "Wrote all seven notes.");
    }
    let n = done + 1;
    wire::tools(
        KIND,
        Some(&format!("Next I write n{n}.md.")),
        &[(
            &format!("w{n}"),
            "write_file",
            json!({"path": format!("out/n{n}.md"), "content": format!("note {n}")}),
        )],
    )
}

/// A vault whose role `ops` has `checkpoint_every: 3`, and the scripted model.
fn setup() -> (TestVault, FakeModel) {
    setup_with("")
}

/// Like `setup`, with `more` at the end of the config.
fn setup_with(more: &str) -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &format!("{}{more}", daemon_config("")));
    v.write(
        "roles/ops.md",
        "---\ncheckpoint_every: 3\n---\n# Ops\n## Mission\nWrite notes.\n## Tools\n- write_file\n",
    );
    fake.respond_with(|req, _| next_call(wire::tool_results(&req.body).len()));
    (v, fake)
}

/// The saved records of suspended runs.
fn suspended(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd/suspended")
        .into_iter()
        .filter(|f| f.ends_with(".json") && !f.starts_with('.'))
        .collect()
}

/// The checkpoint notes still pending.
fn pending(v: &TestVault) -> Vec<String> {
    notes(v)
        .into_iter()
        .filter(|n| n.contains("-checkpoint-") && status_of(v, n) == "pending")
        .collect()
}

/// Waits until the run waits at a checkpoint; its note.
fn at_checkpoint(v: &TestVault) -> String {
    wait_until(T, "the run waiting at a checkpoint", || {
        suspended(v).len() == 1 && pending(v).len() == 1
    });
    pending(v).remove(0)
}

/// The note lists the calls so far, one line each, what the model says next and the cost.
fn assert_checkpoint_note(text: &str, calls: usize) {
    for i in 1..=calls {
        assert!(text.contains(&format!("{i}. write\\_file ")), "call {i}: {text}");
    }
    assert!(!text.contains(&format!("{}. write\\_file", calls + 1)), "{text}");
    assert!(text.contains(&format!("Next I write n{calls}.md.")), "{text}");
    assert!(text.contains("**Cost so far:**"), "{text}");
    assert!(text.contains("## Your instruction"), "{text}");
}

/// The person writes an instruction into the note and approves it.
fn go_on_with(v: &TestVault, note: &str, said: &str) {
    let text = v.read(note);
    v.write(note, &format!("{text}{said}\n"));
    set_status(v, note, "approved");
}

/// The request after a checkpoint carries the person's words, as text of theirs, not a result.
fn assert_carries_the_instruction(req: &Recorded) {
    assert!(wire::all_text(&req.body).contains(INSTRUCTION), "{}", req.body);
    assert!(
        wire::tool_results(&req.body)
            .iter()
            .all(|(_, text, _)| !text.contains(INSTRUCTION)),
        "never as a tool result"
    );
}

/// Issue 52: 7 scripted calls with `checkpoint_every: 3` pause twice; continued once with an
/// instruction (the next request carries it), stopped the second time with `tabd reject`.
#[test]
fn a_run_pauses_every_three_calls_goes_on_with_the_persons_words_and_stops() {
    let (v, fake) = setup();
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/job.md", "Write seven notes.");
    let first = at_checkpoint(&v);
    assert_eq!(fake.requests().len(), 3, "no request past the checkpoint");
    assert_checkpoint_note(&v.read(&first), 3);
    assert!(
        v.daily().contains("**Waiting at a checkpoint:**"),
        "{}",
        v.daily()
    );
    assert!(!v.path("out/n4.md").exists());

    go_on_with(&v, &first, INSTRUCTION);
    let reqs = fake.wait_for_requests(4, T);
    assert_carries_the_instruction(&reqs[3]);
    wait_until(T, "the first checkpoint closed", || {
        status_of(&v, &first) != "pending"
    });
    let second = at_checkpoint(&v);
    assert_ne!(second, first);
    assert_eq!(fake.requests().len(), 6);
    assert_checkpoint_note(&v.read(&second), 6);

    let out = v.tabd(&["reject", &second]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_until(T, "the run stopped", || suspended(&v).is_empty());
    wait_until(T, "its line", || v.daily().contains("stopped by you"));
    wait_idle(&v);
    assert_eq!(fake.requests().len(), 6, "call 7 never asked for");
    assert!(!v.path("out/n7.md").exists());
    assert_eq!(v.read("out/n6.md"), "note 6");
    let last = v
        .records()
        .into_iter()
        .rfind(|r| r["role"] == "ops")
        .unwrap_or_default();
    assert_eq!(last["ended"], "stopped by you", "{last}");
}

/// `kill -9` while the run waits at its first checkpoint: started again, it still waits (no
/// request more); let go on, it goes on from there and repeats no call.
#[test]
fn a_checkpoint_survives_kill_9_and_no_call_repeats() {
    let (v, fake) = setup();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/job.md", "Write seven notes.");
    let first = at_checkpoint(&v);
    d.signal(libc::SIGKILL);
    assert!(d.wait_exit(T).is_none());
    let _d = Daemon::start(&v);
    wait_idle(&v);
    assert_eq!(fake.requests().len(), 3, "still waiting after the restart");
    assert_eq!(pending(&v), std::slice::from_ref(&first));

    go_on_with(&v, &first, INSTRUCTION);
    let reqs = fake.wait_for_requests(4, T);
    assert_carries_the_instruction(&reqs[3]);
    let ids: Vec<String> = wire::tool_results(&reqs[3].body)
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(ids, ["w1", "w2", "w3"], "each call once");
    let second = at_checkpoint(&v);
    assert_ne!(second, first);
    assert_eq!(fake.requests().len(), 6);
}

/// The ledger's record of the checkpoint whose note is `note`.
fn ledger_entry(v: &TestVault, note: &str) -> Value {
    v.state()["approvals"]
        .as_object()
        .and_then(|all| all.values().find(|a| a["note"] == note).cloned())
        .unwrap_or_else(|| panic!("no record of {note}"))
}

/// How the run ended: its last record says `stopped by you`, call 7 was never asked for.
fn assert_stopped_after_six(v: &TestVault, fake: &FakeModel) {
    wait_until(T, "the run stopped", || suspended(v).is_empty());
    wait_until(T, "its line", || v.daily().contains("stopped by you"));
    wait_idle(v);
    assert_eq!(fake.requests().len(), 6, "call 7 never asked for");
    assert!(!v.path("out/n7.md").exists());
    let last = v
        .records()
        .into_iter()
        .rfind(|r| r["role"] == "ops")
        .unwrap_or_default();
    assert_eq!(last["ended"], "stopped by you", "{last}");
}

/// From the terminal: `tabd approvals` lists the checkpoint as one, `tabd approve` lets the run
/// go on with the instruction written in the note, `tabd reject` stops it. The ledger records
/// each as a checkpoint, what happened in its outcome and the person's words apart from it.
#[test]
fn tabd_approve_goes_on_with_the_notes_instruction_and_tabd_reject_stops() {
    let (v, fake) = setup();
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/job.md", "Write seven notes.");
    let first = at_checkpoint(&v);
    let listed = String::from_utf8_lossy(&v.tabd(&["approvals"]).stdout).into_owned();
    let row = listed
        .lines()
        .find(|l| l.contains(first.as_str()))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains(" checkpoint "), "{row}");
    assert!(!row.contains(" read "), "not a read call: {row}");

    let text = v.read(&first);
    v.write(&first, &format!("{text}{INSTRUCTION}\n"));
    let out = v.tabd(&["approve", &first]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reqs = fake.wait_for_requests(4, T);
    assert_carries_the_instruction(&reqs[3]);
    let second = at_checkpoint(&v);
    let a = ledger_entry(&v, &first);
    assert_eq!(a["kind"], json!({"checkpoint": {"calls": 3, "every": 3}}), "{a}");
    assert_eq!(a["outcome"], "continued with your instruction", "{a}");
    assert_eq!(a["instruction"], INSTRUCTION, "{a}");

    let out = v.tabd(&["reject", &second]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_stopped_after_six(&v, &fake);
    let b = ledger_entry(&v, &second);
    assert_eq!(b["kind"], json!({"checkpoint": {"calls": 6, "every": 3}}), "{b}");
    assert_eq!(b["outcome"], "stopped by you", "{b}");
    assert!(b["instruction"].is_null(), "{b}");
}

const PUSH: &str = "push-c8e1d2";
const REPLY: &str = "reply-5a0f77";

/// The pushes that ask (with buttons; a decided one has none).
fn asking(ntfy: &Ntfy) -> Vec<Message> {
    ntfy.messages(PUSH)
        .into_iter()
        .filter(|m| m.published["tags"][0] == "approval" && m.published["actions"].is_array())
        .collect()
}

/// The `n`th checkpoint push that asks, once it came.
fn nth_push(ntfy: &Ntfy, n: usize) -> Message {
    wait_until(T, "the checkpoint's push", || asking(ntfy).len() >= n);
    asking(ntfy).remove(n - 1)
}

/// From the phone: a checkpoint's push names the role and N and has Continue and Stop buttons
/// (it runs nothing, so not Approve and Reject); a tap on Continue lets the run go on, a tap on
/// Stop ends it `stopped by you`.
#[test]
fn a_checkpoint_push_has_continue_and_stop_and_each_tap_decides() {
    let ntfy = Ntfy::start();
    let (v, fake) = setup_with(&format!(
        "\n[notify]\nwebhook = \"{}/{PUSH}\"\nformat = \"ntfy\"\nreply_topic = \"{REPLY}\"\n",
        ntfy.url()
    ));
    let _d = Daemon::start_with_env(&v, &[("TABD_TEST_NOTIFY_RETRY_MS", "50")]);
    v.write("agent/inbox/ops/job.md", "Write seven notes.");
    let first = at_checkpoint(&v);
    let push = nth_push(&ntfy, 1);
    let title = push.published["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("Ops "), "the role: {title}");
    assert!(title.contains("checkpoint_every: 3"), "N: {title}");
    assert!(push.message.contains("checkpoint_every: 3"), "{}", push.message);
    assert!(!push.message.contains("read call"), "{}", push.message);
    let labels: Vec<&str> = push.published["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["label"].as_str())
        .collect();
    assert_eq!(labels, ["Continue", "Stop"], "{}", push.published);

    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    ntfy.tap(&push, "Continue");
    fake.wait_for_requests(4, T);
    wait_until(T, "the first checkpoint closed", || {
        status_of(&v, &first) == "done"
    });
    let second = at_checkpoint(&v);
    assert_eq!(fake.requests().len(), 6);
    assert_eq!(ledger_entry(&v, &first)["outcome"], "continued");
    // The push in its place says what the tap did to the run (it ran no call).
    wait_until(T, "the decided push", || {
        ntfy.messages(PUSH)
            .iter()
            .any(|m| m.message.starts_with("Continued from your phone at "))
    });

    let push = nth_push(&ntfy, 2);
    assert!(
        push.published["title"]
            .as_str()
            .is_some_and(|t| t.contains("after 6 tool calls")),
        "{}",
        push.published
    );
    ntfy.tap(&push, "Stop");
    assert_stopped_after_six(&v, &fake);
    assert_eq!(ledger_entry(&v, &second)["outcome"], "stopped by you");
}

/// On Telegram a checkpoint's buttons say what they do to the run, **Continue** and **Stop**, and
/// Continue goes on from the checkpoint.
#[test]
fn a_checkpoint_on_telegram_has_continue_and_stop_and_continue_goes_on() {
    use crate::support::telegram::{Bot, CHAT};
    const TOKEN: &str = "7351924:AAF-checkpoint_bot_token";
    let bot = Bot::start(TOKEN);
    let (v, fake) = setup_with(&format!(
        "\n[notify.telegram]\ntoken = \"${{TG_TOKEN}}\"\nchat = {CHAT}\napi_base = \"{}\"\n",
        bot.url()
    ));
    let _d = Daemon::start_with_env(&v, &[("TG_TOKEN", TOKEN), ("TABD_TEST_NOTIFY_RETRY_MS", "50")]);
    v.write("agent/inbox/ops/job.md", "Write seven notes.");
    let first = at_checkpoint(&v);
    wait_until(T, "the checkpoint's message", || {
        bot.calls("sendMessage")
            .iter()
            .any(|m| !m["reply_markup"].is_null())
    });
    let message = bot
        .calls("sendMessage")
        .into_iter()
        .find(|m| !m["reply_markup"].is_null())
        .unwrap();
    let labels: Vec<&str> = message["reply_markup"]["inline_keyboard"][0]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(labels, ["Continue", "Stop"], "{message}");
    bot.tap(&message, "Continue");
    fake.wait_for_requests(4, T);
    wait_until(T, "the first checkpoint closed", || {
        status_of(&v, &first) == "done"
    });
    assert_eq!(ledger_entry(&v, &first)["outcome"], "continued");
}
