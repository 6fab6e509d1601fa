//! No spend is forgotten (issue 49, item 7): state that lost a run — a garbled
//! `.tabd/state.json`, a state write that waited out a held `.tabd/state.lock` — counts it again
//! from the run records, so a daily budget still holds; and a command that only looks (`tabd
//! status`) leaves a garbled state file where it is.

use crate::support::fake_model::FakeModel;
use crate::support::{describe, wire, TestVault};

const KIND: &str = "anthropic";

/// The stock vault, unscheduled; delivery's day is 3,000 tokens (one answer of the fake model
/// costs 2,598: the second run of the day crosses it).
fn vault(fake: &FakeModel) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.use_model(fake, KIND, "[limits]\ndaily_token_budget = 3000\n");
    fake.respond_with(|_, _| wire::text(KIND, "Nothing to change."));
    v
}

fn fire(v: &TestVault) -> std::process::Output {
    v.tabd(&["fire", "delivery"])
}

/// `tabd status` on a garbled state file shows empty state and leaves the file as it is; the
/// next run sets it aside and counts today's spend from the records: the day's budget, crossed
/// by the run before the file was garbled and the one after, stops the third.
#[test]
fn a_garbled_state_keeps_the_days_spend_and_status_leaves_the_file() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    let out = fire(&v);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    v.write(".tabd/state.json", "{\"roles\": {\"delivery\": garbled");
    let out = v.tabd(&["status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        v.read(".tabd/state.json"),
        "{\"roles\": {\"delivery\": garbled",
        "status only looks"
    );
    // 2,598 of 3,000 counted again from the record: it runs, and crosses the budget.
    let out = fire(&v);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        v.files_in(".tabd")
            .iter()
            .any(|f| f.starts_with("state.corrupt-")),
        "set aside, not lost: {:?}",
        v.files_in(".tabd")
    );
    let out = fire(&v);
    let said = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("stopped for today") && said.contains("5,196 of 3,000 tokens"),
        "{said}"
    );
    assert_eq!(fake.requests().len(), 2, "the third run never reached the model");
}

/// A run whose state write waits out a `.tabd/state.lock` another program holds still writes its
/// record; once the lock is free, the next run counts what that run spent.
#[test]
fn a_run_state_could_not_record_is_counted_from_its_record() {
    let fake = FakeModel::start();
    let v = vault(&fake);
    v.write("agent/inbox/delivery/note.md", "Look at this.\n");
    std::fs::create_dir_all(v.path(".tabd")).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(v.path(".tabd/state.lock"))
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let out = fire(&v);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(v.records().len(), 1, "its record is written all the same");
    assert_eq!(
        v.files_in("agent/inbox/delivery"),
        ["note.md"],
        "its note stays, to run again"
    );
    drop(lock);
    // 2,598 counted from the record: this run crosses the budget; the next is stopped.
    let out = fire(&v);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let out = fire(&v);
    let said = describe(&out);
    assert!(said.contains("stopped for today"), "{said}");
}
