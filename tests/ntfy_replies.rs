//! Approve or reject from the lock screen (docs/spec.md §27, issue 51 items 1 and 4), end to end: the
//! real daemon pushes an approval to a local ntfy stand-in with Approve and Reject buttons; a tap
//! (the button's token POSTed to the reply topic, as the ntfy app does) comes back through ntfy's
//! JSON stream and decides — once, through the ledger — or is refused with a daily line.

use std::time::Duration;

use serde_json::Value;

use crate::support::approvals::{notes, ops_asks_to_write_the_plan, set_status, status_of, wait_status};
use crate::support::daemon::{wait_until, Daemon};
use crate::support::ntfy::{Message, Ntfy};
use crate::support::TestVault;

const T: Duration = Duration::from_secs(30);
const PUSH: &str = "push-7f3a9c";
const REPLY: &str = "reply-41bd07";
const ENV: [(&str, &str); 3] = [
    ("PUSH_TOPIC", PUSH),
    ("REPLY_TOPIC", REPLY),
    ("TABD_TEST_NOTIFY_RETRY_MS", "50"),
];

/// `ops` asks to write the plan; `[notify]` pushes to the stand-in with a reply topic.
fn vault(ntfy: &Ntfy) -> TestVault {
    vault_with(ntfy, "")
}

/// Like `vault`, with `more` in `[notify]`.
fn vault_with(ntfy: &Ntfy, more: &str) -> TestVault {
    let (v, fake) = ops_asks_to_write_the_plan();
    // The model stays up for the test's life (the second part of the run asks it again).
    std::mem::forget(fake);
    let config = std::fs::read_to_string(&v.config).unwrap();
    std::fs::write(
        &v.config,
        format!(
            "{config}\n[notify]\nwebhook = \"{}/${{PUSH_TOPIC}}\"\nformat = \"ntfy\"\nreply_topic = \"${{REPLY_TOPIC}}\"\n{more}",
            ntfy.url()
        ),
    )
    .unwrap();
    v
}

fn start(v: &TestVault) -> Daemon {
    Daemon::start_with_env(v, &ENV)
}

/// The approval's push, once it came, and the approval note.
fn the_push(v: &TestVault, ntfy: &Ntfy) -> (Message, String) {
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the approval push", || {
        ntfy.messages(PUSH)
            .iter()
            .any(|m| m.published["tags"][0] == "approval")
    });
    let push = ntfy.messages(PUSH).remove(0);
    let note = notes(v).remove(0);
    (push, note)
}

fn daily_has(v: &TestVault, text: &str) {
    wait_until(T, text, || v.daily().contains(text));
}

/// tabd's key, as a test holds it to make tokens of its own.
fn key(v: &TestVault) -> tabd::base::signing::Key {
    tabd::base::signing::Key::load_or_create(&v.dir.path().join(".local/state/tabd")).unwrap()
}

fn approval(v: &TestVault) -> (String, Value) {
    let state = v.state();
    let (id, a) = state["approvals"].as_object().unwrap().iter().next().unwrap();
    (id.clone(), a.clone())
}

/// The push is ntfy's JSON publishing with two `http` buttons that POST a token to the reply
/// topic on the same server; no topic or token is shown in the log or the status.
#[test]
fn an_approval_push_has_approve_and_reject_buttons_that_answer_on_the_reply_topic() {
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let d = start(&v);
    let (push, _) = the_push(&v, &ntfy);
    let actions = push.published["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 2, "{}", push.published);
    for (action, label) in actions.iter().zip(["Approve", "Reject"]) {
        assert_eq!(action["action"], "http");
        assert_eq!(action["label"], label);
        assert_eq!(action["method"], "POST");
        assert_eq!(action["url"], format!("{}/{REPLY}", ntfy.url()));
        assert_eq!(action["clear"], true);
        let token = action["body"].as_str().unwrap();
        assert!(token.len() > 60 && token.contains('.'), "{token}");
    }
    assert_ne!(actions[0]["body"], actions[1]["body"]);
    // tabd follows the reply topic through ntfy's JSON stream.
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    let sub = ntfy.requests().into_iter().find(|r| r.method == "GET").unwrap();
    assert_eq!(sub.path, format!("/{REPLY}/json?since=all"));
    for text in [d.stderr(), v.daily(), v.read("agent/status.md")] {
        assert!(!text.contains(REPLY) && !text.contains(PUSH), "{text}");
    }
}

/// Approve on the phone: the call runs once, the run goes on, the note and the day say where
/// the decision came from, the status no longer shows it waiting, and a push in the approval's
/// place says it is decided.
#[test]
fn a_tap_on_approve_runs_the_call_once_and_the_run_goes_on() {
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let _d = start(&v);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    ntfy.tap(&push, "Approve");
    wait_status(&v, &note, "done");
    wait_until(T, "the second part", || {
        v.records().iter().any(|r| r["trigger"]["kind"] == "resume")
    });
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    assert!(v.read(&note).contains("from your phone"), "{}", v.read(&note));
    daily_has(&v, "approved from your phone");
    wait_until(T, "the outcome's push", || ntfy.messages(PUSH).len() >= 2);
    let decided = ntfy.messages(PUSH).remove(1);
    assert_eq!(
        decided.published["sequence_id"], push.published["sequence_id"],
        "in the approval push's place"
    );
    assert!(
        decided.published["actions"].is_null(),
        "no buttons: {}",
        decided.published
    );
    assert!(
        decided.message.starts_with("Approved from your phone at "),
        "{}",
        decided.message
    );
    wait_until(T, "the status without it", || {
        !v.read("agent/status.md").contains("awaiting approval")
    });
    assert_eq!(approval(&v).1["executions"], 1, "run once");
}

#[test]
fn a_tap_on_reject_runs_nothing() {
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let _d = start(&v);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    ntfy.tap(&push, "Reject");
    wait_status(&v, &note, "rejected");
    daily_has(&v, "rejected from your phone — nothing ran");
    assert!(!v.path("project/plan.md").exists());
    assert_eq!(approval(&v).1["executions"], 0);
}

/// A tap while tabd is down is read at its next start, from the last message it acted on (a
/// message it had read before is not read again).
#[test]
fn a_tap_made_while_tabd_was_down_is_applied_after_the_restart() {
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let mut d = start(&v);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    ntfy.publish(REPLY, "hello", &[]);
    daily_has(
        &v,
        "a decision from your phone was refused: it is not a decision token",
    );
    wait_until(T, "the place kept", || v.path(".tabd/ntfy-replies.json").exists());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    ntfy.tap(&push, "Approve");
    let _d = start(&v);
    wait_status(&v, &note, "done");
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
    let hello = ntfy.messages(REPLY).remove(0);
    let gets: Vec<String> = ntfy
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        gets.last().unwrap(),
        &format!("/{REPLY}/json?since={}", hello.id),
        "{gets:?}"
    );
    assert_eq!(
        v.daily().matches("it is not a decision token").count(),
        1,
        "read once: {}",
        v.daily()
    );
}

/// Every token that is not the push's own, as it stands, is refused with a daily line naming
/// why (never the token): garbage, forged, for an approval this vault has no record of, run out,
/// for arguments edited since the push, used before; and nothing is decided by any of them.
#[test]
fn forged_replayed_expired_foreign_and_out_of_date_tokens_are_refused_and_said() {
    use tabd::gate::approvals::token::{make, Claim, Decision};
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let d = start(&v);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    let (id, a) = approval(&v);
    let hash = a["args_hash"].as_str().unwrap();
    let expires: chrono::DateTime<chrono::Utc> = a["expires"].as_str().unwrap().parse().unwrap();
    let key = key(&v);
    let mut said = 0;
    let mut refused = |token: &str, why: &str| {
        ntfy.publish(REPLY, token, &[]);
        said += 1;
        wait_until(T, why, || {
            v.daily()
                .matches("a decision from your phone was refused")
                .count()
                == said
        });
        assert!(v.daily().contains(why), "{why}: {}", v.daily());
        assert!(!v.daily().contains(token), "the token is never shown");
        assert_eq!(status_of(&v, &note), "pending");
    };
    refused(
        &make(
            &tabd::base::signing::Key::from_bytes(&[9; 32]),
            &Claim::of(&id, Decision::Approve, hash, expires),
        ),
        "its signature does not match",
    );
    refused(
        &make(&key, &Claim::of("ffffff", Decision::Approve, hash, expires)),
        "it is for approval ffffff, of which tabd has no record here",
    );
    refused(
        &make(
            &key,
            &Claim::of(&id, Decision::Approve, hash, expires + chrono::Duration::days(1)),
        ),
        "it is for another request that had the id",
    );
    refused(
        &make(
            &key,
            &Claim::of(
                &id,
                Decision::Approve,
                hash,
                chrono::Utc::now() - chrono::Duration::minutes(1),
            ),
        ),
        "it ran out at",
    );
    // Edited after the push: the push's own button no longer decides it.
    let original = v.read(&note);
    v.write(&note, &original.replace("ship on Friday", "ship on Monday"));
    let approve = push.published["actions"][0]["body"].as_str().unwrap().to_string();
    refused(&approve, "arguments were edited after the push showed them");
    // As it was again, the push's Reject decides it; the same token again is a replay.
    v.write(&note, &original);
    let reject = push.published["actions"][1]["body"].as_str().unwrap().to_string();
    ntfy.publish(REPLY, &reject, &[]);
    wait_status(&v, &note, "rejected");
    ntfy.publish(REPLY, &reject, &[]);
    said += 1;
    wait_until(T, "the replay refused", || {
        v.daily()
            .matches("a decision from your phone was refused")
            .count()
            == said
    });
    assert!(
        v.daily().contains("used before (a replayed token)"),
        "{}",
        v.daily()
    );
    assert!(!v.path("project/plan.md").exists());
    assert!(!d.stderr().contains(&approve) && !d.stderr().contains(&reject));
}

/// Decided in the note first, a later tap changes nothing and says so — in the day and in a
/// push in the approval's place.
#[test]
fn a_tap_after_the_note_decided_it_says_already_decided() {
    let ntfy = Ntfy::start();
    let v = vault(&ntfy);
    let _d = start(&v);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    set_status(&v, &note, "approved");
    wait_status(&v, &note, "done");
    ntfy.tap(&push, "Reject");
    daily_has(&v, "came after it was already decided (approved in its note at ");
    wait_until(T, "the push back", || {
        ntfy.messages(PUSH).iter().any(|m| {
            m.published["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Already decided"))
        })
    });
    assert_eq!(status_of(&v, &note), "done");
    assert_eq!(approval(&v).1["executions"], 1);
}

/// With `access_token`, the publish, the subscription and each button carry it (a server with
/// access control lets them in); it is shown nowhere.
#[test]
fn an_access_token_goes_with_the_push_the_subscription_and_the_buttons() {
    let ntfy = Ntfy::start();
    let v = vault_with(&ntfy, "access_token = \"${NTFY_TOKEN}\"\n");
    let d = Daemon::start_with_env(&v, &[ENV[0], ENV[1], ENV[2], ("NTFY_TOKEN", "tk_s3cr3t")]);
    let (push, note) = the_push(&v, &ntfy);
    wait_until(T, "the subscription", || ntfy.streams(REPLY) == 1);
    let bearer = Some("Bearer tk_s3cr3t");
    let requests = ntfy.requests();
    let publish = requests
        .iter()
        .find(|r| r.method == "POST" && r.path == "/")
        .unwrap();
    assert_eq!(publish.header("authorization"), bearer);
    let sub = requests.iter().find(|r| r.method == "GET").unwrap();
    assert_eq!(sub.header("authorization"), bearer);
    for action in push.published["actions"].as_array().unwrap() {
        assert_eq!(action["headers"]["Authorization"], "Bearer tk_s3cr3t", "{action}");
    }
    ntfy.tap(&push, "Reject");
    wait_status(&v, &note, "rejected");
    let tap = ntfy
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == format!("/{REPLY}"))
        .unwrap();
    assert_eq!(tap.header("authorization"), bearer);
    for text in [d.stderr(), v.daily(), v.read("agent/status.md")] {
        assert!(!text.contains("tk_s3cr3t"), "{text}");
    }
}
