//! `tabd run` in real time against the fake model server.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{
    daemon_config, setup, vault_with, wait_idle, wait_live, wait_until, Daemon, SETTLE_MS,
};
use crate::support::fake_model::FakeModel;
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(20);

#[test]
fn notes_written_in_place_and_renamed_in_both_fire_and_end_in_processed() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/in-place.md", "written in place");
    v.write("agent/inbox/delivery/.atomic.md.tmp", "saved atomically");
    std::fs::rename(
        v.path("agent/inbox/delivery/.atomic.md.tmp"),
        v.path("agent/inbox/delivery/atomic.md"),
    )
    .unwrap();
    wait_until(T, "both notes processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 2
    });
    assert_eq!(
        v.files_in("agent/inbox/delivery/processed"),
        ["atomic.md", "in-place.md"]
    );
    assert!(v.files_in("agent/inbox/delivery").is_empty());
    let text: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    assert!(text.contains("written in place") && text.contains("saved atomically"));
    wait_until(T, "run logged", || !v.records().is_empty());
    assert!(v.daily().contains("Delivery Manager · inbox"), "{}", v.daily());
}

#[test]
fn an_untitled_note_created_empty_fires_once_with_its_final_text() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    let g = v.generation();
    v.write("agent/inbox/delivery/Untitled.md", "");
    wait_live(&v, "delivery", g, "the empty note seen, not ready", |l| {
        l["notes"] == 1 && l["settling"] == 1
    });
    assert!(fake.requests().is_empty(), "an empty note is not complete");
    v.write("agent/inbox/delivery/Untitled.md", "The final text of the note.");
    wait_until(T, "processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["Untitled.md"]
    });
    wait_idle(&v);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert!(wire::all_text(&reqs[0].body).contains("The final text of the note."));
}

#[test]
fn a_note_renamed_while_being_typed_waits_for_the_person() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/Untitled.md", "Meet");
    std::fs::rename(
        v.path("agent/inbox/delivery/Untitled.md"),
        v.path("agent/inbox/delivery/Meeting.md"),
    )
    .unwrap();
    let mut text = String::from("Meet");
    for word in ["ing", " notes", " with", " Nadia", " done."] {
        // A person typing: a pause shorter than the settle time between keystrokes.
        std::thread::sleep(Duration::from_millis(SETTLE_MS / 3));
        text.push_str(word);
        v.write("agent/inbox/delivery/Meeting.md", &text);
    }
    wait_until(T, "processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["Meeting.md"]
    });
    wait_idle(&v);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "fired once, after the typing stopped");
    assert!(wire::all_text(&reqs[0].body).contains("Meeting notes with Nadia done."));
}

#[test]
fn draft_notes_wait_and_editor_temp_files_never_fire() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    // Temp files first, then the draft: the scan that sees the draft has seen them too.
    for temp in [
        ".plan.md.swp",
        "plan.md~",
        "upload.tmp",
        ".syncthing.plan.md.tmp",
        "~$plan.md",
        "big.part",
        ".#plan.md",
    ] {
        v.write(&format!("agent/inbox/delivery/{temp}"), "junk");
    }
    let g = v.generation();
    v.write(
        "agent/inbox/delivery/plan.md",
        "---\nstatus: draft\n---\nNot ready yet.",
    );
    wait_live(&v, "delivery", g, "the draft seen", |l| {
        l["drafts"] == 1 && l["notes"] == 1 && l["running"] == false
    });
    assert!(
        fake.requests().is_empty(),
        "neither a draft nor temp files fire the role"
    );
    v.write(
        "agent/inbox/delivery/plan.md",
        "---\nstatus: ready\n---\nReady now.",
    );
    wait_until(T, "processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["plan.md"]
    });
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let text = wire::all_text(&reqs[0].body);
    assert!(text.contains("Ready now.") && !text.contains("junk"));
}

/// Issue 39, item 8: a draft is pending and held, and `tabd status` and `agent/status.md` say
/// both — with the daemon running (its scan) and without it (`tabd status` reads the note).
#[test]
fn a_draft_note_shows_as_held_not_only_pending() {
    let (v, fake) = setup("");
    v.write(
        "agent/inbox/delivery/plan.md",
        "---\nstatus: draft\n---\nNot ready yet.",
    );
    let held = "pending:   1 note(s) (1 draft — held until you remove its `status: draft`)";
    let out = v.tabd(&["status", "delivery"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(held), "{text}");
    let _d = Daemon::start(&v);
    // The daemon writes agent/status.md, then .tabd/status.json, which `tabd status` reads: once
    // the JSON counts the draft, both say so (the note alone can be a write ahead of the JSON).
    wait_live(&v, "delivery", 0, "the daemon's scan counting the draft", |l| {
        l["drafts"] == 1
    });
    let note = v.read("agent/status.md");
    assert!(
        note.contains("| 1 (1 draft — held until you remove its `status: draft`)"),
        "{note}"
    );
    let out = v.tabd(&["status", "delivery"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(held), "{text}");
    assert!(fake.requests().is_empty(), "a draft never runs");
}

#[test]
fn a_wall_clock_jump_is_noticed_and_the_missed_slots_run_once_and_are_logged() {
    let (v, fake) = setup("");
    v.write(
        "roles/ticker.md",
        "---\nskip_unchanged: false\n---\n# Ticker\n## Mission\nTick.\n## Schedule\n*/2 * * * * *\n",
    );
    // The daemon's wall clock runs ahead by the seconds in this file: a real jump (a suspend
    // or an NTP step), with the monotonic clock running on as it does.
    let offset = v.dir.path().join("clock-offset");
    std::fs::write(&offset, "0").unwrap();
    let d = Daemon::start_with_env(&v, &[("TABD_TEST_CLOCK_OFFSET_FILE", offset.to_str().unwrap())]);
    wait_until(T, "a scheduled run", || {
        v.records().iter().any(|r| r["role"] == "ticker")
    });
    std::fs::write(&offset, "7200").unwrap();
    wait_until(T, "the jump noticed", || {
        d.stderr().contains("the wall clock jumped by 7")
    });
    wait_until(T, "the catch-up logged", || v.daily().contains("Ticker · missed"));
    let before = v.records().iter().filter(|r| r["role"] == "ticker").count();
    wait_until(T, "runs go on after the catch-up", || {
        v.records().iter().filter(|r| r["role"] == "ticker").count() >= before + 2
    });
    let slots: Vec<String> = v
        .records()
        .iter()
        .filter(|r| r["role"] == "ticker")
        .map(|r| {
            r["trigger"]["scheduled_for"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let mut unique = slots.clone();
    unique.dedup();
    assert_eq!(unique, slots, "no slot ran twice");
    let times: Vec<chrono::DateTime<chrono::Utc>> = slots.iter().map(|s| s.parse().unwrap()).collect();
    assert!(
        times.windows(2).any(|w| (w[1] - w[0]).num_seconds() >= 7000),
        "the two hours of missed slots were run once, not each: {slots:?}"
    );
    assert!(
        v.daily()
            .contains("while tabd was not running or the computer slept; running once now (catch_up: once)"),
        "{}",
        v.daily()
    );
    assert!(v.records().iter().all(|r| r["trigger"]["kind"] == "schedule"));
    assert!(!fake.requests().is_empty());
}

/// A run's own side write that fails — the daily-note line of a skipped run, with `daily` a file —
/// reaches the one sink status shows, named by what was not written (issue 37 item 3).
#[test]
fn a_skipped_runs_failed_daily_line_is_named_in_status() {
    let (v, fake) = setup("");
    let _ = std::fs::remove_dir_all(v.path("daily"));
    std::fs::write(v.path("daily"), "not a folder").unwrap();
    v.write("project/watched.md", "v1");
    v.write(
        "roles/idle.md",
        "# Idle\n## Context Files\n- project/watched.md\n## Schedule\n* * * * * *\n",
    );
    let _d = Daemon::start(&v);
    wait_until(T, "the first scheduled run", || fake.requests().len() == 1);
    wait_until(T, "the skip's failed line named in status", || {
        String::from_utf8_lossy(&v.tabd(&["status"]).stdout).contains("the daily note (a skipped run)")
    });
    let status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(status.contains("WRITES FAILING: "), "{status}");
}

/// The daemon writes who holds a role's run lock (for another `tabd fire`'s message); when that
/// write fails the run goes on, and status names the failure (issue 37 item 3: it was dropped).
#[test]
fn a_run_locks_holder_text_that_cannot_be_written_is_named_in_status() {
    let (v, fake) = setup("");
    // A FIFO takes the lock like a file but cannot be truncated: the holder's text fails.
    let lock = v.path(".tabd/run-delivery.lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &lock,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/a.md", "a note");
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["a.md"]
    });
    assert_eq!(fake.requests().len(), 1);
    wait_until(T, "the holder's failed text named in status", || {
        String::from_utf8_lossy(&v.tabd(&["status"]).stdout).contains("the run lock's holder")
    });
    let status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(status.contains("WRITES FAILING: "), "{status}");
}

#[test]
fn skip_unchanged_skips_at_zero_model_calls_and_logs_once() {
    let (v, fake) = setup("");
    v.write("project/watched.md", "v1");
    v.write(
        "roles/idle.md",
        "# Idle\n## Context Files\n- project/watched.md\n## Schedule\n* * * * * *\n",
    );
    let _d = Daemon::start(&v);
    wait_until(T, "the first scheduled run", || fake.requests().len() == 1);
    wait_until(T, "a skip logged", || {
        v.daily()
            .contains("Idle · skipped — nothing changed since the last run")
    });
    // Each skipped slot leaves a `skipped` record: wait for two more slots to pass.
    let skipped = || {
        v.records()
            .iter()
            .filter(|r| r["role"] == "idle" && r["outcome"] == "skipped")
            .count()
    };
    wait_until(T, "two slots skipped", || skipped() >= 2);
    assert_eq!(fake.requests().len(), 1, "no model call while nothing changed");
    assert_eq!(
        v.daily().matches("Idle · skipped — nothing changed").count(),
        1,
        "logged once:\n{}",
        v.daily()
    );
    v.write("project/watched.md", "v2");
    wait_until(T, "a run after the change", || fake.requests().len() == 2);
    assert!(wire::all_text(&fake.requests()[1].body).contains("- Changed: project/watched.md"));
}

#[test]
fn three_hundred_notes_are_each_processed_exactly_once() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    for i in 0..300 {
        v.write(
            &format!("agent/inbox/delivery/.n{i:03}.tmp"),
            &format!("note-marker-{i:03}-end"),
        );
    }
    for i in 0..300 {
        std::fs::rename(
            v.path(&format!("agent/inbox/delivery/.n{i:03}.tmp")),
            v.path(&format!("agent/inbox/delivery/n{i:03}.md")),
        )
        .unwrap();
    }
    wait_until(Duration::from_secs(60), "300 processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 300
    });
    wait_idle(&v);
    let all: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    for i in 0..300 {
        assert_eq!(
            all.matches(&format!("note-marker-{i:03}-end")).count(),
            1,
            "note {i} sent exactly once"
        );
    }
    assert!(v.files_in("agent/inbox/delivery").is_empty());
    let moved: usize = v
        .records()
        .iter()
        .map(|r| r["moved"].as_array().unwrap().len())
        .sum();
    assert_eq!(moved, 300);
    assert!(v.records().len() >= 15, "max_batch 20");
}

#[test]
fn kill_9_mid_run_then_restart_processes_the_note_once_and_loses_nothing() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", &daemon_config(""));
    fake.respond_with(|_, i| {
        if i == 0 {
            wire::text("anthropic", "slow").delayed(Duration::from_secs(30))
        } else {
            wire::text("anthropic", "ok")
        }
    });
    let d = Daemon::start(&v);
    v.write("agent/inbox/delivery/important.md", "Do not lose me.");
    fake.wait_for_requests(1, T);
    d.signal(libc::SIGKILL);
    drop(d);
    assert_eq!(
        v.files_in("agent/inbox/delivery"),
        ["important.md"],
        "still in the inbox after kill -9"
    );
    let _d = Daemon::start(&v);
    wait_until(T, "processed after restart", || {
        v.files_in("agent/inbox/delivery/processed") == ["important.md"]
    });
    wait_idle(&v);
    assert!(v.files_in("agent/inbox/delivery").is_empty());
    assert_eq!(v.records().len(), 1, "one logged run");
    assert_eq!(v.daily().matches("Delivery Manager · inbox").count(), 1);
}

#[test]
fn a_role_edited_to_a_new_schedule_takes_effect_without_restart() {
    let (v, fake) = setup("");
    v.write(
        "roles/later.md",
        "# Later\n## Mission\nWait.\n## Schedule\non-demand\n",
    );
    let _d = Daemon::start(&v);
    // READY comes after the first tick, whose status is written: nothing started in it.
    assert_eq!(v.live("later")["running"], false);
    assert!(fake.requests().is_empty());
    v.write(
        "roles/later.md",
        "---\nskip_unchanged: false\n---\n# Later\n## Mission\nWait.\n## Schedule\n*/2 * * * * *\n",
    );
    wait_until(T, "a scheduled run of the edited role", || {
        v.records()
            .iter()
            .any(|r| r["role"] == "later" && r["trigger"]["kind"] == "schedule")
    });
}

#[test]
fn a_broken_role_leaves_the_others_running_and_status_shows_it() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    let good = v.read("roles/risk.md");
    v.write(
        "roles/risk.md",
        &good.replace("extends: _base", "extends: _base\nmax_tool_calls: lots"),
    );
    wait_until(T, "the error logged", || {
        v.daily()
            .contains("role file has errors; still running the last good version")
    });
    assert!(
        v.daily().contains("roles/risk.md:3: error: `max_tool_calls`"),
        "{}",
        v.daily()
    );
    // agent/status.md is written just before .tabd/status.json, which `tabd status` reads.
    wait_until(T, "status.json shows it", || {
        v.status_json().is_some_and(|s| {
            s["roles"].as_array().is_some_and(|roles| {
                roles
                    .iter()
                    .any(|r| r["role"] == "risk" && r["state"] == "error (running last good version)")
            })
        })
    });
    let note = v.read("agent/status.md");
    assert!(note.contains("error (running last good version)"), "{note}");
    let out = v.tabd(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("risk (Risk Manager) — error (running last good version)")
            && text.contains("roles/risk.md:3"),
        "{text}"
    );
    v.write("agent/inbox/delivery/q.md", "still working?");
    wait_until(T, "delivery still runs", || {
        v.files_in("agent/inbox/delivery/processed") == ["q.md"]
    });
    // The last good version of risk keeps taking notes too.
    v.write("agent/inbox/risk/r.md", "rate this");
    wait_until(T, "risk (last good) runs", || {
        v.files_in("agent/inbox/risk/processed") == ["r.md"]
    });
    v.write("roles/risk.md", &good);
    wait_until(T, "the fix logged", || v.daily().contains("role file fixed"));
    assert!(fake.requests().len() >= 2);
}

#[test]
fn a_second_daemon_exits_2_naming_the_first() {
    let (v, _fake) = setup("");
    let d = Daemon::start(&v);
    let out = v.tabd(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("another tabd (pid {}) is already running", d.pid())),
        "{err}"
    );
    let status = String::from_utf8_lossy(&v.tabd(&["status", "--json"]).stdout).into_owned();
    let json: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(json["daemon_pid"], d.pid(), "a number");
}

#[test]
fn a_trigger_loop_between_two_roles_stops_at_max_chain_depth() {
    let (v, fake) = setup("");
    for (me, other) in [("ping", "pong"), ("pong", "ping")] {
        v.write(
            &format!("roles/{me}.md"),
            &format!("---\ncan_trigger: [{other}]\n---\n# {me}\n## Tools\n- trigger_role\n"),
        );
    }
    fake.respond_with(|req, i| {
        if !wire::tool_results(&req.body).is_empty() {
            return wire::text("anthropic", "done");
        }
        let me = if wire::all_text(&req.body).contains("You are the ping") {
            "ping"
        } else {
            "pong"
        };
        let other = if me == "ping" { "pong" } else { "ping" };
        wire::tools(
            "anthropic",
            None,
            &[(
                &format!("t{i}"),
                "trigger_role",
                json!({"role": other, "note": "your turn"}),
            )],
        )
    });
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ping/start.md", "start the loop");
    wait_until(T, "the chain refused", || {
        fake.requests().iter().any(|r| {
            wire::tool_results(&r.body)
                .iter()
                .any(|t| t.1.contains("max_chain_depth (3)"))
        })
    });
    // The refusal came in the fourth run (hops 3): its record is written as it ends.
    wait_until(T, "the fourth run's record", || v.records().len() >= 4);
    wait_idle(&v);
    let runs = v.records().len();
    assert_eq!(runs, 4, "hops 0, 1, 2, 3; then the loop stopped");
    assert!(v.files_in("agent/inbox/ping").is_empty() && v.files_in("agent/inbox/pong").is_empty());
}

#[test]
fn the_daily_budget_stops_a_role_and_status_says_so() {
    let (v, fake) = setup("daily_token_budget = 1000");
    v.write(
        "roles/_base.md",
        &v.read("roles/_base.md").replace("max_tool_calls: 30\n", ""),
    );
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/one.md", "first");
    wait_until(T, "first processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["one.md"]
    });
    v.write("agent/inbox/delivery/two.md", "second");
    wait_until(T, "skip logged", || {
        v.daily()
            .contains("Delivery Manager · skipped — daily token budget spent")
    });
    // The skip is the dispatch decision for two.md: no run can start for it today.
    assert_eq!(fake.requests().len(), 1, "no model call over budget");
    assert_eq!(
        v.files_in("agent/inbox/delivery"),
        ["two.md"],
        "the note waits for tomorrow"
    );
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).into_owned();
    assert!(
        text.contains("delivery (Delivery Manager) — stopped: daily token budget spent"),
        "{text}"
    );
    assert_eq!(v.daily().matches("skipped — daily token budget spent").count(), 1);
    // Its record says what the limit stopped (the other limits' decisions: daemon::core's tests).
    let skip = v
        .records()
        .into_iter()
        .find(|r| r["outcome"] == "skipped")
        .unwrap();
    assert_eq!(skip["trigger"]["kind"], "inbox");
}

/// A stop during a run costs nothing (issue: three restarts once walked a note into `failed/`):
/// the run is recorded as stopped, counts no attempt, says so in plain words, and the note simply
/// runs again — however many times tabd is restarted.
#[test]
fn a_stop_mid_run_counts_no_attempt_and_the_note_runs_again() {
    let (v, fake) = setup("");
    fake.respond_with(|_, _| wire::text("anthropic", "slow").delayed(Duration::from_secs(60)));
    v.write("agent/inbox/delivery/pending.md", "in flight");
    // More stops than max_attempts (3): a stop is never an attempt.
    for stop in 1..=4 {
        let mut d = Daemon::start(&v);
        fake.wait_for_requests(stop, T);
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
        assert_eq!(v.files_in("agent/inbox/delivery"), ["pending.md"], "stop {stop}");
        assert!(
            v.files_in("agent/inbox/delivery/failed").is_empty(),
            "stop {stop}"
        );
        assert!(!d.stderr().contains("crashed"), "{}", d.stderr());
    }
    let daily = v.daily();
    assert_eq!(
        daily.matches("when tabd stopped; runs again when tabd next starts; its note waits in the inbox, no attempt counted").count(),
        4,
        "{daily}"
    );
    assert!(
        !daily.contains("bug in tabd") && !daily.contains("crashed"),
        "{daily}"
    );
    // Each was a plain stop (SIGTERM), and tabd cannot know whether it will be started again.
    assert!(!daily.contains("restart"), "{daily}");
    let state = v.state();
    let attempts = &state["roles"]["delivery"]["attempts"];
    assert!(
        attempts.as_object().is_none_or(|a| a.is_empty()),
        "no attempt counted: {attempts}"
    );
    assert_eq!(state["roles"]["delivery"]["last_run"]["outcome"], "stopped");
    let records = v.records();
    assert_eq!(records.len(), 4, "{records:?}");
    for r in &records {
        // The contract's four outcomes stay; `ended` says it was nobody's fault.
        assert_eq!(
            (r["outcome"].as_str(), r["ended"].as_str()),
            (Some("failed"), Some("stopped")),
            "{r}"
        );
    }
    // Once the model answers, the note is handled like any other.
    fake.respond_with(|_, _| wire::text("anthropic", "done"));
    let _d = Daemon::start(&v);
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 1
    });
}

/// The stop wait is `[daemon] shutdown_grace_s`; a second SIGINT (Ctrl-C) or SIGTERM ends it.
#[test]
fn a_second_stop_signal_ends_the_wait_at_once() {
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &daemon_config("").replace("shutdown_grace_s = 1", "shutdown_grace_s = 600"),
    );
    fake.respond_with(|_, _| wire::text("anthropic", "slow").delayed(Duration::from_secs(600)));
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/delivery/pending.md", "in flight");
    fake.wait_for_requests(1, T);
    d.signal(libc::SIGINT);
    wait_until(T, "the stop wait announced", || {
        d.stderr().contains("waiting up to 600s")
    });
    assert!(
        d.stderr().contains("stop again, e.g. Ctrl-C, to stop them now"),
        "{}",
        d.stderr()
    );
    d.signal(libc::SIGINT);
    // Far less than the 600 s wait: only the second signal can have ended it.
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    assert_eq!(v.files_in("agent/inbox/delivery"), ["pending.md"]);
    assert!(
        v.daily()
            .contains("when tabd stopped; runs again when tabd next starts"),
        "{}",
        v.daily()
    );
}

#[test]
fn a_watched_file_change_fires_the_role_and_its_own_writes_do_not() {
    let (v, fake) = setup("");
    v.write(
        "roles/watcher.md",
        "---\nwatch: [project/timeline.md]\napprove: {person_notes: auto}\n---\n# Watcher\n## Mission\nReact.\n## Tools\n- append_file\n",
    );
    // Its run appends to the very file it watches: that must not fire it again.
    fake.respond_with(|req, i| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                None,
                &[(
                    &format!("a{i}"),
                    "append_file",
                    json!({"path": "project/timeline.md", "content": "- seen by watcher"}),
                )],
            )
        } else {
            wire::text("anthropic", "noted")
        }
    });
    let _d = Daemon::start(&v);
    assert_eq!(
        v.live("watcher")["running"],
        false,
        "the first tick started nothing"
    );
    assert!(fake.requests().is_empty(), "no change, no run");
    v.write("project/timeline.md", "# Timeline\nLaunch moved to 2026-12-08.\n");
    wait_until(T, "a watch run", || {
        v.records().iter().any(|r| r["trigger"]["kind"] == "watch")
    });
    assert!(wire::all_text(&fake.requests()[0].body).contains("a watched file changed: project/timeline.md"));
    wait_idle(&v);
    assert_eq!(v.records().len(), 1, "its own append did not fire it again");
    assert!(v.read("project/timeline.md").contains("- seen by watcher"));
}

#[test]
fn runs_on_pins_a_role_to_its_host() {
    let (v, fake) = setup("");
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&format!("{cfg}host = \"this-laptop\"\n"));
    v.write(
        "roles/elsewhere.md",
        "---\nruns_on: office-desktop\n---\n# Elsewhere\n## Mission\nNot here.\n",
    );
    v.write(
        "roles/here.md",
        "---\nruns_on: this-laptop\n---\n# Here\n## Mission\nHere.\n",
    );
    let _d = Daemon::start(&v);
    v.write("agent/inbox/elsewhere/a.md", "for the office desktop");
    v.write("agent/inbox/here/b.md", "for this laptop");
    wait_until(T, "the local role ran", || {
        v.files_in("agent/inbox/here/processed") == ["b.md"]
    });
    // The pinned role's note was seen ready and dispatch left it alone.
    wait_live(&v, "elsewhere", 0, "the pinned role's note seen", |l| {
        l["ready"] == 1
    });
    wait_live(&v, "here", 0, "the local run over", |l| l["running"] == false);
    assert_eq!(
        v.files_in("agent/inbox/elsewhere"),
        ["a.md"],
        "a role pinned to another host never fires here"
    );
    assert_eq!(fake.requests().len(), 1);
    wait_until(T, "status.md shows the pin", || {
        v.read("agent/status.md").contains("other host (office-desktop)")
    });
}

#[test]
fn sighup_reloads_the_config_and_the_daemon_keeps_going() {
    let (v, fake) = setup("");
    // Polling mode watches no config file: only the signal can bring the change in.
    let d = Daemon::start_with_env(&v, &[("TABD_WATCH", "poll")]);
    // A new model name takes effect on reload without a restart.
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&cfg.replace("model = \"test-model\"", "model = \"reloaded-model\""));
    d.signal(libc::SIGHUP);
    wait_until(T, "the signal's reload", || {
        d.stderr().contains("SIGHUP: reloading") && d.stderr().contains("config changed; reloaded (provider)")
    });
    v.write("agent/inbox/delivery/after.md", "after the reload");
    wait_until(T, "processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["after.md"]
    });
    assert_eq!(fake.requests()[0].body["model"], "reloaded-model");
    let mut d = d;
    assert!(d.child.try_wait().unwrap().is_none(), "still running");
}

#[test]
fn polling_mode_finds_notes_without_file_events() {
    let (v, fake) = setup("");
    let _d = Daemon::start_with_env(&v, &[("TABD_WATCH", "poll")]);
    v.write("agent/inbox/delivery/polled.md", "found by a scan");
    wait_until(T, "processed by polling", || {
        v.files_in("agent/inbox/delivery/processed") == ["polled.md"]
    });
    assert!(v.read("agent/status.md").contains("polling for changes"));
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_watched_file_recreated_by_move_file_in_the_run_does_not_fire_again() {
    let (v, fake) = setup("");
    v.write("project/status.md", "v1");
    v.write("project/draft.md", "the new status");
    v.write("roles/keeper.md", "---\nwatch: [project/status.md]\napprove: {person_notes: auto}\n---\n# Keeper\n## Mission\nKeep the status note.\n## Tools\n- move_file\n");
    fake.respond_with(|req, i| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                None,
                &[(
                    &format!("m{i}"),
                    "move_file",
                    json!({"from": "project/draft.md", "to": "project/status.md"}),
                )],
            )
        } else {
            wire::text("anthropic", "restored")
        }
    });
    let _d = Daemon::start(&v);
    std::fs::remove_file(v.path("project/status.md")).unwrap();
    wait_until(T, "a watch run", || {
        v.records().iter().any(|r| r["trigger"]["kind"] == "watch")
    });
    wait_until(T, "the file restored", || v.path("project/status.md").exists());
    wait_idle(&v);
    assert_eq!(v.records().len(), 1, "the run's own move did not fire it again");
    assert_eq!(v.read("project/status.md"), "the new status");
}

#[test]
fn an_edited_config_file_is_reloaded_without_a_signal() {
    let (v, fake) = setup("");
    let d = Daemon::start(&v);
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&cfg.replace("model = \"test-model\"", "model = \"edited-model\""));
    wait_until(T, "reload logged", || d.stderr().contains("config changed"));
    v.write("agent/inbox/delivery/after.md", "after the edit");
    wait_until(T, "processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["after.md"]
    });
    assert_eq!(fake.requests()[0].body["model"], "edited-model");
}

/// Once quiet, the daemon gives back the program pages start-up and runs touched; it must go on
/// working exactly as before (the pages come back from the page cache when needed).
#[test]
fn a_quiet_daemon_gives_back_its_program_pages_and_still_runs_notes() {
    let (v, fake) = setup("");
    let d = Daemon::start_with_env(
        &v,
        &[
            ("TABD_TEST_QUIET_MS", "200"),
            ("TABD_LOG", "info,tabd::doors::daemon=debug"),
        ],
    );
    let given_back = |d: &Daemon| {
        d.stderr()
            .lines()
            .filter_map(|l| l.split_once("quiet: gave back ").map(|(_, r)| r.to_string()))
            .collect::<Vec<_>>()
    };
    wait_until(T, "pages given back after start-up", || {
        !given_back(&d).is_empty()
    });
    let first = given_back(&d)[0].clone();
    let kib: u64 = first.split_whitespace().next().unwrap().parse().unwrap();
    assert!(kib > 1024, "at least a MiB of program pages: {first}");
    v.write(
        "agent/inbox/delivery/after-quiet.md",
        "a note after the pages went",
    );
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["after-quiet.md"]
    });
    assert!(wire::all_text(&fake.requests()[0].body).contains("a note after the pages went"));
    wait_until(T, "pages given back again after the run", || {
        given_back(&d).len() >= 2
    });
    v.write("agent/inbox/delivery/second.md", "and another");
    wait_until(T, "the second note processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 2
    });
    assert!(!d.stderr().contains("panicked"), "{}", d.stderr());
}

/// A person who starts tabd before writing a config (the quick start's order, reversed) gets it
/// read the moment it appears — its folder did not exist either — and `tabd run` says at start
/// that no key is set, as `validate` does.
#[test]
fn a_config_made_after_start_is_read_and_a_missing_key_is_said_at_start() {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    v.with_key.set(false);
    let fake = FakeModel::start();
    // The new config names an OpenAI-compatible server, which needs no key.
    fake.respond_with(|_, _| wire::text("openai", "ok"));
    v.use_model(&fake, "openai", &daemon_config(""));
    let config = std::fs::read_to_string(&v.config).unwrap();
    std::fs::remove_file(&v.config).unwrap();
    std::fs::create_dir_all(v.xdg_config().parent().unwrap().parent().unwrap()).unwrap();
    let mut d = Daemon::start_command(&v, {
        let mut cmd = v.command_with_default_config(&["run"]);
        cmd.env("TABD_LOG", "info");
        cmd
    });
    assert!(
        d.stderr()
            .contains("ANTHROPIC_API_KEY is not set, neither in tabd's environment nor in"),
        "{}",
        d.stderr()
    );
    // `xdg/tabd/` and its config.toml are both new.
    std::fs::create_dir_all(v.xdg_config().parent().unwrap()).unwrap();
    std::fs::write(v.xdg_config(), config).unwrap();
    wait_until(T, "the new config read", || {
        d.stderr().contains("config changed; reloaded")
    });
    v.write("agent/inbox/delivery/hello.md", "hi");
    // The run reaches the fake model that only the new config names.
    fake.wait_for_requests(1, T);
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 1
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
}

/// While a run goes on, `tabd status` and `agent/status.md` say so — since when and what
/// started it — not only `--json`.
#[test]
fn status_shows_a_run_going_on() {
    let (v, fake) = setup("");
    fake.respond_with(|_, _| wire::text("anthropic", "slow").delayed(Duration::from_secs(60)));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/now.md", "please");
    fake.wait_for_requests(1, T);
    // agent/status.md is written just before .tabd/status.json, which `tabd status` reads.
    wait_live(&v, "delivery", 0, "the status saying it runs", |l| {
        l["running"] == true && l["running_since"].is_string()
    });
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("delivery ("))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains("— enabled · running since ") && line.ends_with("(inbox)"),
        "{text}"
    );
    assert!(
        v.read("agent/status.md").contains("enabled · running since "),
        "{}",
        v.read("agent/status.md")
    );
}

/// A note typed in the inbox (Obsidian's empty `Untitled.md`, then its first words) waits for
/// the person — `[inbox] typing_settle_s` — and `tabd status` shows how long it still waits.
#[test]
fn a_note_typed_in_the_inbox_waits_for_the_person_and_status_says_how_long() {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let fake = FakeModel::start();
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    let config = daemon_config("").replace("typing_settle_s = 1", "typing_settle_s = 3");
    assert!(config.contains("typing_settle_s = 3"), "{config}");
    v.use_model(&fake, "anthropic", &config);
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/Untitled.md", "");
    wait_until(T, "the empty note seen as being typed", || {
        let l = v.live("delivery");
        l["settling"] == 1 && l["typing"] == true
    });
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(
        text.contains("1 note settling — empty, waits for its first words"),
        "{text}"
    );
    v.write("agent/inbox/delivery/Untitled.md", "First words");
    wait_until(T, "the typed note's wait in the status", || {
        let l = v.live("delivery");
        l["typing"] == true && l["settle_until"].is_string()
    });
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(
        text.contains("for you to finish typing; `status: draft` holds it longer"),
        "{text}"
    );
    // Its wait is the typing one: the run comes only after it (3 s here, 60 s by default).
    wait_until(T, "the typed note processed", || {
        v.files_in("agent/inbox/delivery/processed").len() == 1
    });
    assert_eq!(fake.requests().len(), 1);
}

/// The daemon keeps the config it had when an edit breaks the file, and says so where the person
/// looks: `agent/status.md` and `tabd status`. Fixed, the warning goes.
#[test]
fn status_shows_the_config_error_the_daemon_lives_with() {
    let (v, _fake) = setup("");
    let good = std::fs::read_to_string(&v.config).unwrap();
    let _d = Daemon::start(&v);
    let generation = v.generation();
    v.set_config(&format!("{good}\n[limits]\nmax_runs_per_day = -1\n"));
    // agent/status.md is written just before .tabd/status.json, which `tabd status` reads.
    wait_until(T, "the status showing the config error", || {
        v.generation() > generation && v.status_json().is_some_and(|s| s["config_error"].is_string())
    });
    let note = v.read("agent/status.md");
    assert!(note.contains("The config file has an error"), "{note}");
    assert!(
        note.contains("keeps running with the config it had before"),
        "{note}"
    );
    let text = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(text.contains("CONFIG ERROR: "), "{text}");
    v.set_config(&good);
    wait_until(T, "the warning gone once the file is fixed", || {
        !v.read("agent/status.md").contains("The config file has an error")
    });
}

/// Editing a role in Obsidian saves it every few seconds, broken in a new way each time: the
/// daily note gets one short line for the state the file is left in, not one (900 characters
/// long) per save — and one line when it is fixed.
#[test]
fn a_role_edited_in_obsidian_gets_one_error_line_per_broken_state() {
    let (v, _fake) = setup("");
    let _d = Daemon::start(&v);
    let good = v.read("roles/risk.md");
    // Autosaves while the person types a schedule (faster than typing_settle_s = 1 s apart).
    for typed in ["9", "9am and", "9am and 5", "9am and 5p"] {
        v.write("roles/risk.md", &format!("{good}\n## Schedule\n{typed}\n"));
        std::thread::sleep(Duration::from_millis(150));
    }
    wait_until(T, "the error logged once the edits stopped", || {
        v.daily().contains("role file has errors")
    });
    let daily = v.daily();
    assert_eq!(daily.matches("role file has errors").count(), 1, "{daily}");
    let line = daily
        .lines()
        .find(|l| l.contains("role file has errors"))
        .unwrap();
    assert!(
        line.contains("9am and 5p"),
        "the state the file was left in: {line}"
    );
    assert!(
        line.chars().count() < 500,
        "{} characters: {line}",
        line.chars().count()
    );
    v.write("roles/risk.md", &good);
    wait_until(T, "the fix logged", || v.daily().contains("role file fixed"));
    assert_eq!(v.daily().matches("role file has errors").count(), 1);
}

/// A write the daemon makes on the side (a daily-note line) that fails — here `daily` is a file,
/// as a full disk would fail it — is counted and shown, never silent (issue 32).
#[test]
fn failed_writes_are_counted_and_shown_in_status() {
    let (v, _fake) = setup("");
    let _ = std::fs::remove_dir_all(v.path("daily"));
    std::fs::write(v.path("daily"), "not a folder").unwrap();
    let _d = Daemon::start(&v);
    // A note no role reads makes the daemon write a line into the daily note: it cannot.
    v.write("agent/inbox/nobody/x.md", "who reads me?");
    wait_until(T, "the failed write in the status note", || {
        v.read("agent/status.md").contains("tabd cannot write everything")
    });
    // `tabd status` reads .tabd/status.json, written just after the note.
    wait_until(T, "the failed write in status.json", || {
        std::fs::read_to_string(v.path(".tabd/status.json"))
            .is_ok_and(|j| j.contains("\"write_problem\": \""))
    });
    let status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(
        status.contains("WRITES FAILING: ")
            && status.contains("failed since tabd started")
            && status.contains("the daily note"),
        "{status}"
    );
}

/// Issue 39, item 8: a run tabd's stop cut short after it did something writes its section, and
/// its note is still in the inbox then; the next run moves it to `processed/`. The section links
/// the note by its name, which Obsidian finds wherever it is now — not the inbox path it left.
#[test]
fn a_stopped_runs_section_links_its_note_where_it_is_now() {
    let (v, fake) = setup("");
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                None,
                &[("r1", "read_file", json!({"path": "project/scope.md"}))],
            )
        } else {
            wire::text("anthropic", "slow").delayed(Duration::from_secs(60))
        }
    });
    v.write("agent/inbox/delivery/pending.md", "in flight");
    let mut d = Daemon::start(&v);
    fake.wait_for_requests(2, T);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0), "{}", d.stderr());
    fake.respond_with(|_, _| wire::text("anthropic", "done"));
    let _d = Daemon::start(&v);
    wait_until(T, "the note processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["pending.md"]
    });
    wait_until(T, "both sections", || {
        v.daily().matches("**Trigger:** inbox ").count() == 2
    });
    let daily = v.daily();
    assert!(!daily.contains("[[agent/inbox/delivery/pending]]"), "{daily}");
    assert!(daily.contains("- **Trigger:** inbox [[pending]]\n"), "{daily}");
    assert!(
        daily.contains("- **Trigger:** inbox [[agent/inbox/delivery/processed/pending]]\n"),
        "{daily}"
    );
}

/// Holds the lock on today's and tomorrow's daily note, as another program writing them would
/// (tomorrow's too, so a test that crosses midnight still finds its note held). Tomorrow's is
/// begun with today's header, as tabd begins one: an empty note there would be a person's, which
/// tabd never writes (it would log the day in `agent/log/`, unheld).
fn hold_daily_notes(v: &TestVault) -> Vec<std::fs::File> {
    let names = v.files_in("daily");
    let today = names.first().expect("a daily note").trim_end_matches(".md");
    let day = chrono::NaiveDate::parse_from_str(today, "%Y-%m-%d").expect("a dated daily note");
    let next = day.succ_opt().expect("a next day").format("%Y-%m-%d").to_string();
    let text = std::fs::read_to_string(v.path(&format!("daily/{today}.md"))).expect("today's note");
    let header = &text[..text.find("\n## ").map_or(text.len(), |at| at + 1)];
    let tomorrow = v.path(&format!("daily/{next}.md"));
    if !tomorrow.exists() {
        std::fs::write(&tomorrow, header.replace(today, &next)).expect("tomorrow's note");
    }
    hold_days(v, "daily", ".md")
}

/// Holds the lock on today's and tomorrow's file of `folder` (named by the day, then `ext`).
fn hold_days(v: &TestVault, folder: &str, ext: &str) -> Vec<std::fs::File> {
    let today = v.files_in(folder);
    let today = today
        .first()
        .expect("a file of the day")
        .trim_end_matches(ext)
        .to_string();
    let day = chrono::NaiveDate::parse_from_str(&today, "%Y-%m-%d").expect("a dated file");
    [day, day.succ_opt().expect("a next day")]
        .iter()
        .map(|d| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(v.path(&format!("{folder}/{}{ext}", d.format("%Y-%m-%d"))))
                .expect("the file of the day");
            rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .expect("the file's lock");
            file
        })
        .collect()
}

/// Another program that holds the daily note's lock and never lets go (a `tabd fire` stopped
/// with Ctrl-Z, a device paused on a shared folder) does not hang the daemon: the run ends, its
/// note is processed and its record written, status names the held note, and the run's section
/// is written, once, at the role's next run after the lock is free.
#[test]
fn a_daily_note_another_program_holds_does_not_hang_runs_and_their_sections_come_later() {
    let (v, _fake) = setup("");
    let d = Daemon::start(&v);
    let inbox = |n: &str| {
        let link = format!("{n}]]");
        let daily = v.daily();
        daily
            .lines()
            .filter(|l| l.contains("**Trigger:** inbox [[") && l.contains(&link))
            .count()
    };
    v.write("agent/inbox/delivery/first.md", "first note");
    wait_until(T, "the first section", || inbox("first") == 1);
    let held = hold_daily_notes(&v);
    v.write(
        "agent/inbox/delivery/held.md",
        "a note while the daily note is held",
    );
    wait_until(
        Duration::from_secs(60),
        "the note processed, the daily note still held",
        || v.files_in("agent/inbox/delivery/processed") == ["first.md", "held.md"],
    );
    wait_until(T, "its record", || v.records().len() == 2);
    wait_until(T, "the held daily note named in status", || {
        let status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
        status.contains("WRITES FAILING: ") && status.contains("held its lock")
    });
    // Said once: by the one sink of failed writes, not again by the run that met it.
    assert_eq!(d.stderr().matches("held its lock").count(), 1, "{}", d.stderr());
    assert_eq!(inbox("held"), 0, "{}", v.daily());
    drop(held);
    v.write(
        "agent/inbox/delivery/after.md",
        "a note once the daily note is free",
    );
    wait_until(T, "the held run's section and the next one's", || {
        inbox("held") == 1 && inbox("after") == 1
    });
    assert_eq!(inbox("first"), 1, "{}", v.daily());
    assert_eq!(v.records().len(), 3, "no record twice");
    wait_until(T, "nothing of the held run left in state", || {
        nothing_pending(&v, "delivery")
    });
}

/// Whether state keeps no run of `role` with something left to write or move.
fn nothing_pending(v: &TestVault, role: &str) -> bool {
    v.state()["roles"][role]["pending"]
        .as_array()
        .is_none_or(|p| p.is_empty())
}

/// The same for the JSONL log: a run whose record file another program holds keeps its record,
/// and the role's next run writes it once, before its own.
#[test]
fn a_run_record_file_another_program_holds_is_written_at_the_next_run() {
    let (v, _fake) = setup("");
    let d = Daemon::start(&v);
    v.write("agent/inbox/delivery/first.md", "first note");
    wait_until(T, "the first record", || v.records().len() == 1);
    let held = hold_days(&v, ".tabd/runs", ".jsonl");
    v.write("agent/inbox/delivery/held.md", "a note while the run log is held");
    wait_until(
        Duration::from_secs(60),
        "the note processed, the run log still held",
        || v.files_in("agent/inbox/delivery/processed") == ["first.md", "held.md"],
    );
    wait_until(T, "the held run log named in the log", || {
        d.stderr().contains("cannot write the run record") && d.stderr().contains("held its lock")
    });
    assert_eq!(v.records().len(), 1, "not written while held");
    drop(held);
    v.write("agent/inbox/delivery/after.md", "a note once the run log is free");
    wait_until(T, "the held run's record and the next one's", || {
        v.records().len() == 3
    });
    let ids: std::collections::BTreeSet<String> =
        v.records().iter().map(|r| r["run_id"].to_string()).collect();
    assert_eq!(ids.len(), 3, "each record once");
    let order: Vec<String> = v
        .records()
        .iter()
        .map(|r| r["trigger"]["notes"].to_string())
        .collect();
    let at = |note: &str| order.iter().position(|n| n.contains(note));
    assert!(
        at("held.md") < at("after.md") && at("held.md").is_some(),
        "the held run's record before the next run's own: {order:?}"
    );
    wait_until(T, "nothing of the held run left in state", || {
        nothing_pending(&v, "delivery")
    });
}
