//! Resume (docs/spec.md §22) end to end: a run whose call waits for approval is suspended, and when the
//! person decides, the call runs once and the same run goes on with its result — also after a
//! restart and after `kill -9`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::approvals::{notes, set_status};
use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Recorded, Reply};
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(30);
const KIND: &str = "anthropic";

/// The model's first answer: write the plan (a call `ops` must ask the person about).
fn write_the_plan() -> Reply {
    wire::tools(
        KIND,
        Some("Record the plan."),
        &[(
            "w1",
            "write_file",
            json!({"path": "project/plan.md", "content": "ship on Friday"}),
        )],
    )
}

/// A vault whose role `ops` asks before `write_file`, and a model that writes the plan, then
/// (given the call's result) says it recorded it.
fn setup() -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write(
        "roles/ops.md",
        "---\napprove:\n  write_file: ask\n  person_notes: auto\n---\n# Ops\n## Mission\nKeep the plan.\n## Tools\n- read_file\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            write_the_plan()
        } else {
            wire::text(KIND, "Recorded the plan; the link is in the project note.")
        }
    });
    (v, fake)
}

fn approval_note(v: &TestVault) -> String {
    let all = notes(v);
    assert_eq!(all.len(), 1, "{all:?}");
    all[0].clone()
}

fn approve(v: &TestVault, note: &str) {
    set_status(v, note, "approved");
}

/// The saved records (not a temp file a write in progress has made: it is not one yet).
fn suspended(v: &TestVault) -> Vec<String> {
    v.files_in(".tabd/suspended")
        .into_iter()
        .filter(|f| f.ends_with(".json") && !f.starts_with('.'))
        .collect()
}

/// The second request carries the first turn and the call's real result, not "queued".
fn assert_resumed_with_the_result(second: &Recorded) {
    let results = wire::tool_results(&second.body);
    assert_eq!(results.len(), 1, "{results:?}");
    let (id, text, is_error) = &results[0];
    assert_eq!(id, "w1");
    assert!(!is_error, "{text}");
    assert!(
        text.contains("approved this call and it ran") && text.contains("wrote"),
        "{text}"
    );
    let messages = second.body["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"].to_string().contains("\"w1\"")),
        "the earlier turn is in the conversation: {messages:?}"
    );
}

#[test]
fn an_approved_call_runs_once_and_the_run_goes_on_with_its_result() {
    let (v, fake) = setup();
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    fake.wait_for_requests(1, T);
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    assert_eq!(fake.requests().len(), 1, "suspended, not told 'queued'");
    assert_eq!(
        v.files_in("agent/inbox/ops/processed"),
        ["plan.md"],
        "the first part handled the note"
    );
    assert!(
        v.daily().contains("**Waiting for your approval:**"),
        "{}",
        v.daily()
    );
    assert!(!v.path("project/plan.md").exists());
    wait_until(T, "the status showing the waiting run", || {
        String::from_utf8_lossy(&v.tabd(&["status", "ops"]).stdout).contains("waits for your decision since")
    });
    // The daemon writes agent/status.md on its own turn; `tabd status` reads the state itself, so
    // seeing one is no sign the other is written yet.
    wait_until(T, "agent/status.md showing the waiting run", || {
        v.read("agent/status.md")
            .contains("1 run waiting for your decision")
    });

    let note = approval_note(&v);
    approve(&v, &note);
    let reqs = fake.wait_for_requests(2, T);
    assert_resumed_with_the_result(&reqs[1]);
    wait_until(T, "the second part logged", || {
        v.daily().contains("Recorded the plan;")
    });
    wait_until(T, "the record gone", || suspended(&v).is_empty());
    assert_eq!(v.read("project/plan.md"), "ship on Friday", "the call ran once");
    let daily = v.daily();
    assert!(
        daily.contains("· Ops · resume") && daily.contains("**Resumed:** run `"),
        "{daily}"
    );
    assert!(
        daily.contains("for your decision on [[agent/approvals/"),
        "{daily}"
    );
    // One run in two parts: one id, two records; `tabd undo` of it covers both.
    let records: Vec<Value> = v.records().into_iter().filter(|r| r["role"] == "ops").collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["run_id"], records[1]["run_id"]);
    assert_eq!(
        (records[0]["ended"].as_str(), records[1]["ended"].as_str()),
        (Some("waiting"), None)
    );
    assert_eq!(fake.requests().len(), 2, "the conversation went on once");
}

/// Decided while tabd was stopped: at the next start the call runs once and the run goes on.
#[test]
fn a_run_goes_on_after_a_restart() {
    let (v, fake) = setup();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    approve(&v, &approval_note(&v));
    let _d = Daemon::start(&v);
    let reqs = fake.wait_for_requests(2, T);
    assert_resumed_with_the_result(&reqs[1]);
    wait_until(T, "the record gone", || suspended(&v).is_empty());
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
}

/// `kill -9` while suspended loses nothing: the record is on disk, and the run goes on once.
#[test]
fn a_run_goes_on_once_after_kill_9() {
    let (v, fake) = setup();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    d.signal(libc::SIGKILL);
    assert!(d.wait_exit(T).is_none());
    approve(&v, &approval_note(&v));
    let _d = Daemon::start(&v);
    wait_until(T, "the second part's request", || fake.requests().len() >= 2);
    wait_until(T, "the record gone", || suspended(&v).is_empty());
    crate::support::daemon::wait_idle(&v);
    assert_eq!(fake.requests().len(), 2, "the conversation went on once");
    assert_eq!(v.read("project/plan.md"), "ship on Friday");
}

/// Rejected: the run goes on, told the call did not run.
#[test]
fn a_rejected_call_is_said_to_the_run_that_asked() {
    let (v, fake) = setup();
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    set_status(&v, &approval_note(&v), "rejected");
    let reqs = fake.wait_for_requests(2, T);
    let results = wire::tool_results(&reqs[1].body);
    assert!(
        results[0].2 && results[0].1.contains("rejected this call"),
        "{results:?}"
    );
    assert!(!v.path("project/plan.md").exists());
}

/// `kill -9` during the second part: it is never started again (its calls may have run); the
/// daily note says so and points to undo.
#[test]
fn a_second_part_cut_off_by_kill_9_does_not_start_twice() {
    let (v, fake) = setup();
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::text(KIND, "unexpected")
        } else {
            wire::text(KIND, "slow").delayed(Duration::from_secs(600))
        }
    });
    approve(&v, &approval_note(&v));
    fake.wait_for_requests(2, T);
    d.signal(libc::SIGKILL);
    assert!(d.wait_exit(T).is_none());
    let _d = Daemon::start(&v);
    wait_until(T, "the cut-off part named", || {
        v.daily()
            .contains("was cut off when tabd stopped; it does not start twice")
    });
    crate::support::daemon::wait_idle(&v);
    assert!(suspended(&v).is_empty());
    assert_eq!(fake.requests().len(), 2, "no third request");
}

/// Two calls wait in one turn: the run goes on only when both are decided, with both results;
/// what its two parts changed is undone by one `tabd undo` of the run.
#[test]
fn several_waiting_calls_resume_together_and_undo_covers_both_parts() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write("project/a.md", "a before\n");
    // `a.md` is the person's; `ops` may change their notes: this test is about resume.
    v.write(
        "roles/ops.md",
        "---\napprove:\n  write_file: ask\n  person_notes: auto\n---\n# Ops\n## Mission\nKeep notes.\n## Tools\n- write_file\n- append_file\n",
    );
    fake.respond_with(|req, _| {
        let results = wire::tool_results(&req.body);
        if results.is_empty() {
            wire::tools(
                KIND,
                Some("Note it, and ask for two plans."),
                &[
                    (
                        "a1",
                        "append_file",
                        json!({"path": "project/a.md", "content": "part one"}),
                    ),
                    (
                        "w1",
                        "write_file",
                        json!({"path": "project/one.md", "content": "1"}),
                    ),
                    (
                        "w2",
                        "write_file",
                        json!({"path": "project/two.md", "content": "2"}),
                    ),
                ],
            )
        } else if !results.iter().any(|r| r.0 == "a2") {
            wire::tools(
                KIND,
                Some("And note the outcome."),
                &[(
                    "a2",
                    "append_file",
                    json!({"path": "project/a.md", "content": "part two"}),
                )],
            )
        } else {
            wire::text(KIND, "Done.")
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/go.md", "Go.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    let waiting = notes(&v);
    assert_eq!(waiting.len(), 2, "{waiting:?}");
    approve(&v, &waiting[0]);
    wait_until(T, "the first call ran", || {
        v.path("project/one.md").exists() || v.path("project/two.md").exists()
    });
    crate::support::daemon::wait_idle(&v);
    assert_eq!(
        fake.requests().len(),
        1,
        "one call still waits: no second part yet"
    );
    approve(&v, &waiting[1]);
    let reqs = fake.wait_for_requests(2, T);
    let results = wire::tool_results(&reqs[1].body);
    let ran = |id: &str| {
        results
            .iter()
            .any(|r| r.0 == id && r.1.contains("approved this call and it ran"))
    };
    assert!(ran("w1") && ran("w2"), "{results:?}");
    assert!(
        results.iter().any(|r| r.0 == "a1" && !r.2),
        "the first part's own call keeps its result: {results:?}"
    );
    wait_until(T, "the run done", || {
        suspended(&v).is_empty() && v.daily().contains("Done.")
    });
    assert_eq!(v.read("project/a.md"), "a before\npart one\npart two");
    // `tabd undo` refuses while the role's run lock is held ("running right now"), and the second
    // part holds it until its task ends, after its section is written and its record removed.
    wait_until(T, "the second part ended", || second_part_ended(&v, "ops"));
    let run = v.records()[0]["run_id"].as_str().unwrap().to_string();
    let out = v.tabd(&["undo", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::support::describe(&out));
    assert_eq!(v.read("project/a.md"), "a before\n", "both parts undone");
}

/// Whether the daemon's status says `role`'s second part has ended and let go of its run lock:
/// a status that no longer lists the run as waiting was written after the second part started
/// (it marks its record `resuming` first); if it also says the role is not running, it was
/// written after the run's task ended. (`wait_idle` alone can read a status written before the
/// second part started, when the role was not running either.)
fn second_part_ended(v: &TestVault, role: &str) -> bool {
    v.status_json().is_some_and(|s| {
        s["roles"].as_array().is_some_and(|roles| {
            roles.iter().any(|r| {
                r["role"] == role
                    && r.get("waiting_runs")
                        .is_none_or(|w| w.as_array().is_some_and(Vec::is_empty))
                    && r["live"]["running"] == false
            })
        })
    })
}

/// Tokens a record says its part spent.
fn spent(rec: &Value) -> u64 {
    [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ]
    .iter()
    .map(|k| rec["usage"][k].as_u64().unwrap_or(0))
    .sum()
}

/// A stop while the second part runs records what that part spent — not nothing (the day's
/// budget would miss it), and not the first part's spending again (its own record has it).
#[test]
fn a_stop_during_the_second_part_records_what_that_part_spent() {
    let (v, fake) = setup();
    // The first part asks to write; the second reads once (one answered request), then its next
    // request hangs until tabd is stopped.
    fake.respond_with(|req, i| {
        if wire::tool_results(&req.body).is_empty() {
            write_the_plan()
        } else if i == 1 {
            wire::tools(
                KIND,
                Some("Check it."),
                &[("r1", "read_file", json!({"path": "project/plan.md"}))],
            )
        } else {
            wire::text(KIND, "never seen").delayed(Duration::from_secs(60))
        }
    });
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(T, "the run suspended", || suspended(&v).len() == 1);
    approve(&v, &approval_note(&v));
    fake.wait_for_requests(3, T);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    let records = v.records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["run_id"], records[1]["run_id"], "one run in two parts");
    assert_eq!(records[1]["ended"], "stopped", "{}", records[1]);
    let (first, second) = (spent(&records[0]), spent(&records[1]));
    assert!(first > 0, "{}", records[0]);
    assert_eq!(
        second, first,
        "the second part answered one request, as the first did: {}",
        records[1]
    );
}
