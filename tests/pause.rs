//! The kill switch (docs/spec.md §28, issue 49 item 8): `tabd pause ROLE | --all [--for D]` and `tabd
//! resume`, end to end against the real daemon — nothing of a paused role runs (slots skipped and
//! recorded as `paused`, never caught up; notes wait; `tabd fire` and `tabd mcp serve` refused; a
//! run going on stopped), it survives restarts, it is shown in status and agent/status.md, and it
//! is pushed once when it begins and once when it ends.

use std::time::Duration;

use serde_json::Value;

use crate::support::daemon::{daemon_config, setup, vault_with, wait_idle, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Gate, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(30);

/// A role due every two seconds, that never skips for want of a change.
fn ticker(v: &TestVault, name: &str) {
    v.write(
        &format!("roles/{name}.md"),
        &format!(
            "---\nskip_unchanged: false\n---\n# {name}\n## Mission\nTick.\n## Schedule\n*/2 * * * * *\n"
        ),
    );
}

fn paused_records(v: &TestVault, role: &str) -> Vec<Value> {
    v.records()
        .into_iter()
        .filter(|r| r["role"] == role && r["ended"] == "paused")
        .collect()
}

fn ok_records(v: &TestVault, role: &str) -> Vec<Value> {
    v.records()
        .into_iter()
        .filter(|r| r["role"] == role && r["outcome"] == "ok")
        .collect()
}

/// `tabd ARGS`, which must exit with `code`; its stdout and stderr.
fn tabd_exits(v: &TestVault, args: &[&str], code: i32) -> String {
    let out = v.tabd(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tabd {args:?}:\n{}",
        describe(&out)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The role's entry in `tabd status --json`.
fn role_status(v: &TestVault, role: &str) -> Value {
    let out = v.tabd(&["status", "--json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    s["roles"]
        .as_array()
        .and_then(|roles| roles.iter().find(|r| r["role"] == role).cloned())
        .unwrap_or(Value::Null)
}

/// The daemon's own status (status.json) says `role` is paused.
fn daemon_shows_paused(v: &TestVault, role: &str) -> bool {
    v.status_json().is_some_and(|s| {
        s["roles"]
            .as_array()
            .is_some_and(|roles| roles.iter().any(|r| r["role"] == role && !r["paused"].is_null()))
    })
}

/// A paused role's slots pass with no model request: each is recorded as `paused`, the daily
/// note says so once (not once per slot); status and agent/status.md show the pause; after the
/// resume it runs again, and the slots that passed are not caught up.
#[test]
fn a_paused_roles_slots_pass_without_a_model_call_and_are_not_caught_up() {
    let (v, fake) = setup("");
    ticker(&v, "ticker");
    let _d = Daemon::start(&v);
    wait_until(T, "a scheduled run", || !ok_records(&v, "ticker").is_empty());
    let said = tabd_exits(&v, &["pause", "ticker"], 0);
    assert!(
        said.contains("Paused ticker (ticker) until you resume it (`tabd resume ticker`)"),
        "{said}"
    );
    wait_until(T, "the daemon shows the pause", || {
        daemon_shows_paused(&v, "ticker")
    });
    wait_idle(&v);
    let requests = fake.requests().len();
    wait_until(T, "two slots passed while paused", || {
        paused_records(&v, "ticker").len() >= 2
    });
    assert_eq!(fake.requests().len(), requests, "no model request while paused");
    let rec = &paused_records(&v, "ticker")[0];
    assert_eq!(rec["outcome"], "skipped");
    assert_eq!(rec["trigger"]["kind"], "schedule");
    assert!(rec["trigger"]["scheduled_for"].is_string(), "{rec}");
    let daily = v.daily();
    assert_eq!(
        daily.matches("skipped — paused").count(),
        1,
        "one line per pause:\n{daily}"
    );
    assert!(
        daily.contains(
            "ticker · paused — you paused ticker until you resume it (`tabd resume ticker` ends it)"
        ),
        "{daily}"
    );
    let text = stdout(&v.tabd(&["status"]));
    assert!(
        text.contains("PAUSED BY YOU: ticker until you resume it"),
        "{text}"
    );
    assert!(text.contains("— enabled · PAUSED until you resume it"), "{text}");
    let note = v.read("agent/status.md");
    assert!(
        note.contains("> [!warning] Paused by you (`tabd pause`)"),
        "{note}"
    );
    assert!(
        note.contains("| ticker | enabled · PAUSED until you resume it"),
        "{note}"
    );
    let status = role_status(&v, "ticker");
    assert_eq!(status["paused"]["role"], "ticker", "{status}");
    assert_eq!(status["paused"]["all"], false);
    assert_eq!(
        status["state"], "enabled",
        "the contract's state is kept; `paused` is added"
    );

    let before_resume = chrono::Utc::now();
    let said = tabd_exits(&v, &["resume", "ticker"], 0);
    assert!(said.contains("Resumed ticker (ticker)"), "{said}");
    wait_until(T, "a scheduled run after the resume", || {
        ok_records(&v, "ticker").iter().any(|r| {
            r["trigger"]["scheduled_for"]
                .as_str()
                .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
                .is_some_and(|t| t > before_resume)
        })
    });
    let late: Vec<Value> = ok_records(&v, "ticker")
        .into_iter()
        .filter(|r| {
            r["trigger"]["scheduled_for"]
                .as_str()
                .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
                .is_some_and(|t| {
                    t <= before_resume && r["started_at"].as_str() > Some(&before_resume.to_rfc3339()[..])
                })
        })
        .collect();
    assert!(late.is_empty(), "a paused slot was caught up: {late:?}");
    let daily = v.daily();
    assert!(!daily.contains("ticker · missed"), "{daily}");
    assert!(daily.contains("ticker · runs again — you resumed it"), "{daily}");
    assert!(daily.contains("the slots that passed while paused were skipped, not caught up"));
}

/// A paused role's note waits in its inbox — no run, no attempt counted — and runs after the
/// resume.
#[test]
fn a_paused_roles_note_waits_and_runs_after_the_resume() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    tabd_exits(&v, &["pause", "delivery"], 0);
    wait_until(T, "the daemon shows the pause", || {
        daemon_shows_paused(&v, "delivery")
    });
    v.write("agent/inbox/delivery/n.md", "waits for the resume");
    wait_until(T, "the note seen, complete", || v.live("delivery")["ready"] == 1);
    assert!(fake.requests().is_empty(), "no run while paused");
    assert_eq!(v.files_in("agent/inbox/delivery"), ["n.md"]);
    assert!(
        v.state()["roles"]["delivery"]["attempts"]
            .as_object()
            .is_none_or(|a| a.is_empty()),
        "no attempt counted: {}",
        v.state()
    );
    tabd_exits(&v, &["resume", "delivery"], 0);
    wait_until(T, "the note run after the resume", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
    });
    assert_eq!(fake.requests().len(), 1);
}

/// `--for` ends the pause by itself: a note written meanwhile runs once the time is over, and the
/// daily note says the pause's time is over.
#[test]
fn a_pause_for_a_while_ends_by_itself() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    let said = tabd_exits(&v, &["pause", "delivery", "--for", "3s"], 0);
    assert!(said.contains("`tabd resume delivery` ends it sooner"), "{said}");
    wait_until(T, "the daemon shows the pause", || {
        daemon_shows_paused(&v, "delivery")
    });
    v.write("agent/inbox/delivery/n.md", "runs when the pause is over");
    wait_until(T, "the pause over, the note run", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
    });
    assert!(
        v.daily().contains("runs again — your pause's time is over"),
        "{}",
        v.daily()
    );
    assert_eq!(fake.requests().len(), 1);
    assert!(role_status(&v, "delivery")["paused"].is_null());
}

/// A pause written while no daemon runs holds from its start, and one that held when the daemon
/// stopped holds after it starts again: no slot runs, status shows it; the push that it began
/// went out once, not once per start.
#[test]
fn a_pause_survives_a_restart_and_is_pushed_once() {
    let fake = FakeModel::start();
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            daemon_config(""),
            events.display()
        ),
    );
    ticker(&v, "ticker");
    let said = tabd_exits(&v, &["pause", "--all"], 0);
    assert!(
        said.contains("No daemon runs on this vault now; it holds from when one starts."),
        "{said}"
    );
    let pushes = || -> Vec<Value> {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let mut d = Daemon::start(&v);
    wait_until(T, "the push that the pause began", || !pushes().is_empty());
    wait_until(T, "a slot passed while paused", || {
        !paused_records(&v, "ticker").is_empty()
    });
    d.signal(libc::SIGTERM);
    d.wait_exit(T);
    let after_first = paused_records(&v, "ticker").len();
    let _d = Daemon::start(&v);
    wait_until(T, "another slot passed after the restart", || {
        paused_records(&v, "ticker").len() > after_first
    });
    assert!(fake.requests().is_empty(), "nothing ran across the restart");
    assert_eq!(
        v.daily().matches("tabd · paused — you paused every role").count(),
        1,
        "said once, not once per start:\n{}",
        v.daily()
    );
    let status = stdout(&v.tabd(&["status"]));
    assert!(
        status.contains("PAUSED BY YOU: every role until you resume it"),
        "{status}"
    );
    tabd_exits(&v, &["resume"], 0);
    wait_until(T, "the push that it ended", || pushes().len() >= 2);
    wait_until(T, "a slot run after the resume", || {
        !ok_records(&v, "ticker").is_empty()
    });
    let pushes = pushes();
    assert_eq!(
        pushes.len(),
        2,
        "one push when it began, one when it ended: {pushes:?}"
    );
    assert_eq!(pushes[0]["event"], "paused");
    assert_eq!(pushes[0]["title"], "tabd: paused");
    assert_eq!(pushes[1]["title"], "tabd runs again");
    assert_eq!(pushes[1]["event"], "paused");
}

/// Every door of a paused role is shut: `tabd fire` and `tabd mcp serve --role` are refused with
/// the command that ends the pause; a role that does not exist, or an abstract one, cannot be
/// paused (a usage error naming the roles).
#[test]
fn the_doors_of_a_paused_role_are_shut_and_only_real_roles_pause() {
    let (v, fake) = setup("");
    tabd_exits(&v, &["pause", "delivery"], 0);
    let said = tabd_exits(&v, &["fire", "delivery"], 1);
    assert!(
        said.contains(
            "`tabd fire` refused: `delivery` is paused (`tabd pause delivery`) until you resume it"
        ) && said.contains("`tabd resume delivery` ends the pause"),
        "{said}"
    );
    let said = tabd_exits(&v, &["mcp", "serve", "--role", "delivery"], 1);
    assert!(said.contains("`tabd resume delivery`"), "{said}");
    let said = tabd_exits(&v, &["pause", "deliverry"], 2);
    assert!(
        said.contains("there is no role `deliverry` — did you mean `delivery`?") && said.contains("Roles: "),
        "{said}"
    );
    v.write("roles/_base.md", "# Base\n## Mission\nShared.\n");
    let said = tabd_exits(&v, &["pause", "_base"], 2);
    assert!(said.contains("abstract role"), "{said}");
    tabd_exits(&v, &["pause"], 2);
    let said = tabd_exits(&v, &["pause", "delivery", "--for", "soon"], 2);
    assert!(said.contains("30m, 2h or 1d"), "{said}");
    let said = tabd_exits(&v, &["resume", "risk"], 0);
    assert!(said.contains("was not paused"), "{said}");
    tabd_exits(&v, &["pause", "--all"], 0);
    let said = tabd_exits(&v, &["resume", "delivery"], 1);
    assert!(said.contains("`tabd resume --all` ends that"), "{said}");
    tabd_exits(&v, &["resume", "--all"], 0);
    tabd_exits(&v, &["fire", "delivery"], 0);
    assert_eq!(fake.requests().len(), 1, "only the fire after the resume ran");
}

/// `tabd pause --all` holds every role: neither's slot runs, status shows one pause of every
/// role and each role held by it.
#[test]
fn pause_all_holds_every_role() {
    let (v, fake) = setup("");
    ticker(&v, "one");
    ticker(&v, "two");
    tabd_exits(&v, &["pause", "--all"], 0);
    let _d = Daemon::start(&v);
    wait_until(T, "slots of both passed while paused", || {
        !paused_records(&v, "one").is_empty() && !paused_records(&v, "two").is_empty()
    });
    assert!(fake.requests().is_empty());
    let s = v.status_json().unwrap();
    assert_eq!(s["pauses"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(s["pauses"][0]["all"], true);
    assert!(s["pauses"][0]["role"].is_null());
    for r in ["one", "two"] {
        assert_eq!(role_status(&v, r)["paused"]["all"], true);
    }
}

/// A run going on when its pause lands is stopped at its next step (recorded as stopped, its
/// note left in the inbox with no attempt counted), and nothing of the role runs after it.
#[test]
fn a_run_going_on_is_stopped_when_its_pause_lands() {
    let (v, fake) = setup("");
    let gate = Gate::shut();
    let held = gate.clone();
    fake.respond_with(move |_, _| Reply::Held(held.clone(), Box::new(wire::text("anthropic", "ok"))));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/n.md", "a long run");
    fake.wait_for_requests(1, T);
    tabd_exits(&v, &["pause", "delivery"], 0);
    wait_until(T, "the run stopped", || {
        v.records()
            .iter()
            .any(|r| r["role"] == "delivery" && r["ended"] == "stopped")
    });
    gate.open();
    assert_eq!(v.files_in("agent/inbox/delivery"), ["n.md"], "the note waits");
    let stopped = v
        .records()
        .into_iter()
        .find(|r| r["role"] == "delivery" && r["ended"] == "stopped")
        .expect("the stopped run's record");
    assert!(
        stopped["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("stopped because you paused its role")),
        "a pause is not tabd stopping: {stopped:#}"
    );
    // The pause's line first, then the run's end — said as the pause's, never as tabd's stop.
    // The run's record is written before its daily section: wait for the section.
    wait_until(T, "the run's end in the daily note", || {
        v.daily()
            .contains("because you paused it (`tabd pause`); its note waits")
    });
    let daily = v.daily();
    let said = daily
        .find("paused — its run going on stops at its next step")
        .expect("the pause's line");
    let ended = daily
        .find("stopped after 0 s because you paused it (`tabd pause`); its note waits in the inbox")
        .or_else(|| daily.find("because you paused it (`tabd pause`); its note waits"))
        .expect("the run's end, said as the pause's");
    assert!(said < ended, "{daily}");
    assert!(!daily.contains("when tabd stopped"), "{daily}");
    // The stopped run's end is seen (its notes waiting again), and nothing else starts.
    wait_until(T, "the stopped run's end taken in", || {
        let l = v.live("delivery");
        l["running"] == false && l["ready"] == 1
    });
    assert_eq!(fake.requests().len(), 1, "nothing more ran while paused");
}

/// The slots that pass while a paused daemon is away (stopped, the machine asleep) are skipped
/// as paused when it starts, never caught up: no "missed … running once now", no run.
#[test]
fn slots_missed_while_paused_and_away_are_not_caught_up() {
    let (v, fake) = setup("");
    ticker(&v, "ticker");
    let offset = v.dir.path().join("clock-offset");
    std::fs::write(&offset, "0").unwrap();
    let env = [("TABD_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())];
    let mut d = Daemon::start_with_env(&v, &env);
    wait_until(T, "a scheduled run", || !ok_records(&v, "ticker").is_empty());
    tabd_exits(&v, &["pause", "ticker"], 0);
    wait_until(T, "the daemon shows the pause", || {
        daemon_shows_paused(&v, "ticker")
    });
    d.signal(libc::SIGTERM);
    d.wait_exit(T);
    let requests = fake.requests().len();
    // Ten minutes away: the daemon's wall clock starts ten minutes on.
    std::fs::write(&offset, "600").unwrap();
    let _d = Daemon::start_with_env(&v, &env);
    wait_until(T, "the slots missed while away skipped as paused", || {
        paused_records(&v, "ticker").iter().any(|r| {
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("scheduled runs up to"))
        })
    });
    let daily = v.daily();
    assert!(
        !daily.contains("ticker · missed"),
        "no catch-up of paused slots:\n{daily}"
    );
    assert_eq!(fake.requests().len(), requests, "nothing ran");
}

/// A `delegate` call to a paused role is refused with a sentence the parent's model reads (the
/// command that ends the pause); no child runs.
#[test]
fn a_delegate_call_to_a_paused_role_is_refused() {
    let fake = FakeModel::start();
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let d = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &d.replacen("extends: _base\n", "extends: _base\ncan_delegate_to: [risk]\n", 1),
    );
    v.use_model(&fake, "anthropic", "");
    fake.respond_with(|r, _| {
        if wire::tool_results(&r.body).is_empty() {
            return wire::tools(
                "anthropic",
                None,
                &[(
                    "d1",
                    "delegate",
                    serde_json::json!({"role": "risk", "task": "Rate it."}),
                )],
            );
        }
        wire::text("anthropic", "done")
    });
    tabd_exits(&v, &["pause", "risk"], 0);
    tabd_exits(&v, &["fire", "delivery"], 0);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "the parent's two requests, no child's");
    let (_, result, _) = &wire::tool_results(&requests[1].body)[0];
    assert!(
        result.contains("not started") && result.contains("`tabd resume risk` ends the pause"),
        "{result}"
    );
    assert!(v.records().iter().all(|r| r["trigger"]["kind"] != "delegate"));
}

/// A pause that lands while a `tabd mcp serve --role` session is open refuses its calls from
/// then on, with the command that ends the pause; after the resume they run again.
#[test]
fn an_open_mcp_serve_sessions_calls_are_refused_once_its_role_is_paused() {
    let (v, _fake) = setup("");
    v.write("project/brief.md", "Ship on Friday.\n");
    let mut c = crate::support::mcp_client::Client::start(&v, "delivery");
    let read = serde_json::json!({"path": "project/brief.md"});
    let (text, error) = crate::support::mcp_client::Client::text(&c.call(1, "read_file", read.clone()));
    assert!(!error && text.contains("Ship on Friday"), "{text}");
    tabd_exits(&v, &["pause", "delivery"], 0);
    let (text, error) = crate::support::mcp_client::Client::text(&c.call(2, "read_file", read.clone()));
    assert!(error, "refused: {text}");
    assert!(
        text.contains("refused: `delivery` is paused")
            && text.contains("`tabd resume delivery` ends the pause"),
        "{text}"
    );
    tabd_exits(&v, &["resume", "delivery"], 0);
    let (text, error) = crate::support::mcp_client::Client::text(&c.call(3, "read_file", read));
    assert!(!error && text.contains("Ship on Friday"), "{text}");
    c.stop();
}
