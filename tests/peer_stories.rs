//! Failures users of other agent daemons reported in 2026 (issue 49: each test names its story
//! and the peer's issue), replayed against tabd through the real binary, where no other test of this suite
//! already replays them. Each test names its story.

use std::time::Duration;

use crate::support::daemon::{daemon_config, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Gate, Reply};
use crate::support::wire;

const KIND: &str = "anthropic";
const T: Duration = Duration::from_secs(30);

fn role(name: &str) -> String {
    format!("---\n---\n# {name}\n## Mission\nAnswer.\n## Tools\n- read_file\n")
}

/// Story 9 (claude-code#82731: ten one-shot tasks at one instant, three dispatched, the rest left
/// "enabled, past due" for ever): eight roles whose work arrives at one instant, two run slots —
/// every one of them runs, and none is left waiting once the queue drains.
#[test]
fn many_roles_due_at_one_instant_with_two_slots_all_run() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config("max_concurrent_runs = 2"));
    let names: Vec<String> = (1..=8).map(|i| format!("r{i}")).collect();
    for n in &names {
        v.write(&format!("roles/{n}.md"), &role(n));
    }
    fake.respond_with(|_, _| wire::text(KIND, "done").delayed(Duration::from_millis(150)));
    let _d = Daemon::start(&v);
    for n in &names {
        v.write(&format!("agent/inbox/{n}/go.md"), "Go.\n");
    }
    wait_until(T, "every role's note handled", || {
        names
            .iter()
            .all(|n| v.files_in(&format!("agent/inbox/{n}/processed")) == ["go.md"])
    });
    wait_idle(&v);
    let ran: Vec<String> = v
        .records()
        .iter()
        .filter_map(|r| r["role"].as_str().map(str::to_string))
        .collect();
    for n in &names {
        assert_eq!(ran.iter().filter(|r| *r == n).count(), 1, "{n} ran once: {ran:?}");
    }
}

/// Story 22 (openclaw#116351, #123458: a message that arrived during a heartbeat turn got no
/// reply, or the two turns ran at once): a note that arrives while the same role runs waits for
/// that run, then runs in a run of its own — never at the same time, never dropped, never mixed
/// into the first run's section.
#[test]
fn a_note_arriving_during_the_same_roles_run_runs_after_it() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write("roles/ops.md", &role("Ops"));
    let gate = Gate::shut();
    let held = gate.clone();
    fake.respond_with(move |req, i| {
        if i == 0 {
            Reply::Held(held.clone(), Box::new(wire::text(KIND, "first done")))
        } else {
            let body = req.body.to_string();
            let which = if body.contains("second note") {
                "second done"
            } else {
                "?"
            };
            wire::text(KIND, which)
        }
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/one.md", "first note\n");
    fake.wait_for_requests(1, T);
    let seen = v.generation();
    v.write("agent/inbox/ops/two.md", "second note\n");
    // Seen, ready, and not sent while the first run is going on.
    crate::support::daemon::wait_live(&v, "ops", seen, "the second note seen, ready", |l| {
        l["ready"] == 1
    });
    assert_eq!(
        fake.requests().len(),
        1,
        "no second request while the first run is held"
    );
    gate.open();
    wait_until(T, "both notes handled", || {
        let mut done = v.files_in("agent/inbox/ops/processed");
        done.sort();
        done == ["one.md", "two.md"]
    });
    wait_idle(&v);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "one run each");
    assert!(
        !reqs[0].body.to_string().contains("second note"),
        "the first run never saw it"
    );
    assert!(reqs[1].body.to_string().contains("second note"));
    let daily = v.daily();
    assert!(daily.find("first done") < daily.find("second done"), "{daily}");
}

/// Story 20 (hermes-agent#71959: a still-running session brought a deleted job back): a role
/// file deleted while its run is held ends with that run — its section is written, and nothing
/// of the role comes back: no new run, no inbox made again, no role file made again.
#[test]
fn a_role_deleted_mid_run_does_not_come_back() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write("roles/ops.md", &role("Ops"));
    let gate = Gate::shut();
    let held = gate.clone();
    fake.respond_with(move |_, _| Reply::Held(held.clone(), Box::new(wire::text(KIND, "finished"))));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/one.md", "Go.\n");
    fake.wait_for_requests(1, T);
    std::fs::remove_file(v.path("roles/ops.md")).unwrap();
    v.write("agent/inbox/ops/late.md", "After the delete.\n");
    gate.open();
    wait_until(T, "the held run's record", || {
        v.records().iter().any(|r| r["role"] == "ops")
    });
    wait_idle(&v);
    assert!(
        !v.path("roles/ops.md").exists(),
        "the role file is not made again"
    );
    assert_eq!(fake.requests().len(), 1, "no run after the delete");
    assert_eq!(
        v.files_in("agent/inbox/ops/processed"),
        ["one.md"],
        "the held run's note"
    );
    assert_eq!(
        v.files_in("agent/inbox/ops"),
        ["late.md"],
        "the late note waits for a role that is gone; it is not run"
    );
}
