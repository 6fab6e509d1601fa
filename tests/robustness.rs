//! The daemon against odd files, panics, crashes and long uptimes (issue 10): each test drives
//! the real binary into the situation and checks it keeps serving and loses nothing.

use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{daemon_config, setup, vault_with, wait_idle, wait_live, wait_until, Daemon};
use crate::support::fake_model::{FakeModel, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const T: Duration = Duration::from_secs(20);

fn mkfifo(path: &std::path::Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

fn role_with_context(name: &str, context: &str) -> String {
    format!("# {name}\n## Mission\nRead.\n## Context Files\n- {context}\n")
}

#[test]
fn a_fifo_as_context_never_blocks_and_every_role_is_still_served() {
    let (v, fake) = setup("max_concurrent_runs = 2");
    mkfifo(&v.path("project/pipe.md"));
    v.write("roles/one.md", &role_with_context("One", "project/pipe.md"));
    v.write("roles/two.md", &role_with_context("Two", "project/pipe.md"));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/one/a.md", "for one");
    v.write("agent/inbox/two/b.md", "for two");
    v.write("agent/inbox/delivery/c.md", "for delivery");
    wait_until(T, "all three served", || {
        v.files_in("agent/inbox/one/processed") == ["a.md"]
            && v.files_in("agent/inbox/two/processed") == ["b.md"]
            && v.files_in("agent/inbox/delivery/processed") == ["c.md"]
    });
    let text: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    assert!(
        text.contains(
            "## project/pipe.md\n[not included: project/pipe.md is a named pipe (FIFO), not a regular file]"
        ),
        "{text}"
    );
}

#[test]
fn a_fifo_named_in_watch_neither_stops_start_up_nor_a_reload() {
    let (v, _fake) = setup("");
    mkfifo(&v.path("project/pipe.md"));
    v.write(
        "roles/watcher.md",
        "---\nwatch: [project/pipe.md]\n---\n# Watcher\n## Mission\nWatch.\n",
    );
    let _d = Daemon::start(&v); // READY=1 within its timeout
    v.write(
        "roles/later.md",
        "---\nwatch: [project/pipe.md]\n---\n# Later\n## Mission\nWatch too.\n",
    );
    v.write("agent/inbox/delivery/after.md", "after the reload");
    wait_until(T, "the daemon still serves after reloading", || {
        v.files_in("agent/inbox/delivery/processed") == ["after.md"]
    });
}

#[test]
fn prompt_and_fire_skip_a_fifo_in_the_inbox_with_one_line() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    mkfifo(&v.path("agent/inbox/delivery/x.md"));
    v.write("agent/inbox/delivery/real.md", "a real note");
    let out = v.tabd_within(&["prompt", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stdout(&out).contains("a real note"));
    fake.script([wire::text("anthropic", "done")]);
    let out = v.tabd_within(&["fire", "delivery"], T);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("skipping x.md: it is not a regular file"),
        "{}",
        describe(&out)
    );
    assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["real.md"]);
}

#[test]
fn an_infinite_retry_after_is_an_outage_not_a_crash() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    for value in ["inf", "1e20", "NaN"] {
        fake.script([
            wire::error("anthropic", 429, "rate_limit_error", "slow down").with_header("retry-after", value)
        ]);
    }
    v.write("agent/inbox/delivery/n.md", "hello");
    for _ in 0..3 {
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "a clean failure, not a panic (101):\n{}",
            describe(&out)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("no attempt counted"));
    }
    assert_eq!(v.files_in("agent/inbox/delivery"), ["n.md"], "the note waits");
}

#[test]
fn a_panic_in_a_run_is_a_failed_run_and_the_role_is_not_wedged() {
    let (v, fake) = setup("");
    let mut d = Daemon::start_with_env(&v, &[("TABD_FAULTS", "panic-in-run")]);
    v.write("agent/inbox/delivery/bad.md", "makes tabd crash");
    wait_until(T, "three failed attempts, then failed/", || {
        v.files_in("agent/inbox/delivery/failed") == ["bad.md"]
    });
    let records = v.records();
    assert_eq!(records.len(), 3, "one failed run per attempt: {records:#?}");
    assert!(records.iter().all(|r| r["outcome"] == "failed"
        && r["error"]
            .as_str()
            .unwrap()
            .contains("tabd failed while running this role")));
    assert!(v
        .daily()
        .contains("**Moved to failed/:** [[agent/inbox/delivery/failed/bad]] after 3 failed runs"));
    wait_idle(&v);
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon is still running"
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn an_inbox_deleted_and_made_again_is_watched_again_at_once() {
    let (v, _fake) = setup("");
    let _d = Daemon::start(&v);
    std::fs::remove_dir_all(v.path("agent/inbox/delivery")).unwrap();
    std::fs::create_dir_all(v.path("agent/inbox/delivery")).unwrap();
    v.write("agent/inbox/delivery/after-sync.md", "made by a sync tool");
    // Well inside the 60 s safety rescan: only a live watch finds it this fast.
    wait_until(T, "the note in the new folder processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["after-sync.md"]
    });
}

#[test]
fn a_failed_ledger_write_runs_no_slot_and_says_so_once() {
    let (v, fake) = setup("");
    v.write(
        "roles/ticker.md",
        "---\nskip_unchanged: false\n---\n# Ticker\n## Mission\nTick.\n## Schedule\n*/2 * * * * *\n",
    );
    let _d = Daemon::start_with_env(&v, &[("TABD_FAULTS", "ledger-write")]);
    // The status that shows the failure is written by the tick that hit it, after that tick's
    // dispatch: had the slot been queued anyway, it would show the ticker running or queued.
    wait_until(T, "the failure shown in status", || {
        v.status_json().is_some_and(|s| {
            s["ledger_error"]
                .as_str()
                .is_some_and(|e| e.contains("ledger-write"))
        })
    });
    let live = v.live("ticker");
    assert_eq!(
        (live["running"].clone(), live["queued_slots"].clone()),
        (json!(false), json!(0)),
        "{live}"
    );
    assert!(
        fake.requests().is_empty(),
        "no slot runs before its ledger entry is durable"
    );
    assert_eq!(
        v.daily().matches("cannot record scheduled runs").count(),
        1,
        "{}",
        v.daily()
    );
    assert!(v
        .read("agent/status.md")
        .contains("Scheduled runs cannot be recorded"));
}

#[test]
fn the_daemon_never_runs_a_role_while_tabd_fire_holds_it() {
    let (v, fake) = setup("");
    let _d = Daemon::start(&v);
    // What `tabd fire` holds while it runs the role.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(v.path(".tabd/run-delivery.lock"))
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    v.write("agent/inbox/delivery/n.md", "one process at a time");
    wait_live(&v, "delivery", 0, "the daemon waiting for the lock", |l| {
        l["busy_elsewhere"] == true && l["ready"] == 1
    });
    assert!(fake.requests().is_empty(), "not run while held");
    drop(lock);
    wait_until(T, "run once the lock is free", || {
        v.files_in("agent/inbox/delivery/processed") == ["n.md"]
    });
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn attempts_of_deleted_notes_and_state_of_deleted_roles_are_dropped() {
    let fake = FakeModel::start();
    // One failed attempt each, then a long wait before any retry.
    let v = vault_with(
        &fake,
        "[limits]\nmin_interval = \"1h\"\n[inbox]\nsettle_ms = 300\n",
    );
    v.write("roles/gone.md", "# Gone\n## Mission\nSoon deleted.\n");
    fake.respond_with(|_, _| wire::error("anthropic", 400, "invalid_request_error", "bad request"));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/x.md", "fails once");
    v.write("agent/inbox/gone/y.md", "fails too");
    let attempts = |role: &str| -> usize {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(v.path(".tabd/state.json")).unwrap_or_default())
                .unwrap_or_default();
        s["roles"][role]["attempts"].as_object().map_or(0, |a| a.len())
    };
    wait_until(T, "attempts recorded", || {
        attempts("delivery") == 1 && attempts("gone") == 1
    });
    fake.respond_with(|_, _| wire::text("anthropic", "ok"));
    std::fs::remove_file(v.path("agent/inbox/delivery/x.md")).unwrap();
    std::fs::remove_file(v.path("roles/gone.md")).unwrap();
    wait_until(T, "the deleted note's record dropped", || {
        attempts("delivery") == 0
    });
    wait_until(T, "the deleted role's state dropped", || {
        let s = std::fs::read_to_string(v.path(".tabd/state.json")).unwrap_or_default();
        !s.contains("\"gone\"")
    });
}

#[test]
fn crash_leftovers_are_cleaned_at_start() {
    let (v, _fake) = setup("");
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for leftover in [
        ".tabd/.tmpAbC123",
        "agent/.status.md.tabd-0123abcd.tmp",
        "project/.x.md.tabd-deadbeef.tmp",
    ] {
        v.write(leftover, "half");
        std::fs::File::options()
            .write(true)
            .open(v.path(leftover))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let _d = Daemon::start(&v);
    wait_until(T, "leftovers removed", || {
        !v.path(".tabd/.tmpAbC123").exists()
            && !v.path("agent/.status.md.tabd-0123abcd.tmp").exists()
            && !v.path("project/.x.md.tabd-deadbeef.tmp").exists()
    });
}

#[test]
fn a_symlinked_daily_folder_never_leads_a_write_out_of_the_vault() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    let elsewhere = tempfile::tempdir().unwrap();
    let _ = std::fs::remove_dir_all(v.path("daily"));
    std::os::unix::fs::symlink(elsewhere.path(), v.path("daily")).unwrap();
    fake.script([wire::text("anthropic", "done")]);
    v.write("agent/inbox/delivery/n.md", "hello");
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "nothing written outside the vault"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot write the run log") && err.contains("outside the vault"),
        "{}",
        describe(&out)
    );
    assert_eq!(v.records().len(), 1, "the machine log still has the run");
    // Issue 49: `tabd fire` never points at a section that is not there.
    let said = stdout(&out);
    assert!(!said.contains("Log: daily/"), "{said}");
    assert!(
        said.contains("Log: not written (") && said.contains("the run's record is in .tabd/runs/"),
        "{said}"
    );
}

#[test]
fn role_names_are_checked_and_a_broken_note_never_resets_a_chain() {
    let v = TestVault::new();
    v.write("roles/a: b.md", "# Bad name\n## Mission\nx\n");
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("roles/a: b.md: error: the role name `a: b` (the file name) may use only letters, digits, `-` and `_`")
            && text.contains("e.g. to roles/a-b.md"),
        "{text}"
    );
    std::fs::remove_file(v.path("roles/a: b.md")).unwrap();
    // A note whose chain depth cannot be read: the chain ends here. (One whose frontmatter
    // cannot be read at all never runs: `hostile_input`.)
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.write(
        "agent/inbox/delivery/deep.md",
        "---\nhops: many\nfrom: risk\n---\nkeep going",
    );
    fake.script([
        wire::tools(
            "anthropic",
            None,
            &[("t1", "trigger_role", json!({"role": "risk", "note": "again"}))],
        ),
        wire::text("anthropic", "stopped"),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    assert!(results[0].1.contains("max_chain_depth (3)"), "{results:?}");
    assert!(v.files_in("agent/inbox/risk").is_empty());
}

#[test]
fn unreadable_inbox_entries_are_reported_once_and_counted_in_status() {
    let (v, _fake) = setup("");
    let bad = v
        .path("agent/inbox/delivery")
        .join(std::ffi::OsStr::from_bytes(b"caf\xe9.md"));
    std::fs::write(bad, "latin-1 name").unwrap();
    v.write("elsewhere.md", "x");
    std::os::unix::fs::symlink("../../../elsewhere.md", v.path("agent/inbox/delivery/link.md")).unwrap();
    let _d = Daemon::start(&v);
    wait_until(T, "both reported", || {
        v.daily()
            .matches("tabd does not read agent/inbox/delivery/")
            .count()
            == 2
    });
    v.write("agent/inbox/delivery/ok.md", "a fine note"); // another scan of the same inbox
    wait_until(T, "the fine note processed", || {
        v.files_in("agent/inbox/delivery/processed") == ["ok.md"]
    });
    wait_idle(&v);
    assert_eq!(
        v.daily()
            .matches("tabd does not read agent/inbox/delivery/")
            .count(),
        2,
        "once each:\n{}",
        v.daily()
    );
    let text = stdout(&v.tabd(&["status"]));
    assert!(text.contains("not read:  2 entries tabd does not read"), "{text}");
    assert!(text.contains("link.md (it is a symlink"), "{text}");
}

#[test]
fn a_crash_after_logging_finishes_at_restart_and_the_note_never_runs_twice() {
    for point in ["abort-after-commit", "abort-after-log"] {
        let (v, fake) = setup("");
        let mut d = Daemon::start_with_env(&v, &[("TABD_FAULTS", point)]);
        v.write("agent/inbox/delivery/n.md", "exactly once");
        d.wait_exit(T); // aborted at the fault point
        assert_eq!(
            v.files_in("agent/inbox/delivery"),
            ["n.md"],
            "{point}: not moved yet"
        );
        drop(d);
        let _d = Daemon::start(&v);
        wait_until(T, "moved at restart", || {
            v.files_in("agent/inbox/delivery/processed") == ["n.md"]
        });
        wait_idle(&v);
        let records = v.records();
        assert_eq!(records.len(), 1, "{point}: one record");
        assert_eq!(
            records[0]["moved"],
            json!([{"from": "agent/inbox/delivery/n.md", "to": "agent/inbox/delivery/processed/n.md"}]),
            "{point}: the record's moved list is true"
        );
        assert_eq!(fake.requests().len(), 1, "{point}: the note ran once");
        assert_eq!(
            v.daily().matches("Delivery Manager · inbox").count(),
            1,
            "{point}"
        );
    }
}

#[test]
fn an_inbox_written_with_backslashes_is_a_validate_error() {
    let v = TestVault::new();
    v.write(
        "roles/bad.md",
        "# Bad\n## Mission\nx\n## Inbox\nagent\\inbox\\x\n",
    );
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains(
            "roles/bad.md:5: error: inbox: \"agent\\\\inbox\\\\x\" uses `\\`; separate folders with `/`"
        ),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_config_edit_to_host_and_timezone_applies_on_reload() {
    let (v, fake) = setup("");
    v.write(
        "roles/pinned.md",
        "---\nruns_on: new-host\n---\n# Pinned\n## Mission\nHere now.\n",
    );
    let cfg = std::fs::read_to_string(&v.config).unwrap();
    v.set_config(&format!("{cfg}host = \"old-host\"\n"));
    let d = Daemon::start(&v);
    v.write("agent/inbox/pinned/a.md", "waits for its host");
    wait_live(&v, "pinned", 0, "the note seen", |l| l["ready"] == 1);
    assert!(fake.requests().is_empty());
    // UTC+14: the date there is never behind UTC's, and the log file is named by it.
    let edited = cfg.replace("timezone = \"UTC\"", "timezone = \"Pacific/Kiritimati\"");
    v.set_config(&format!("{edited}host = \"new-host\"\n"));
    wait_until(T, "reloaded", || {
        d.stderr().contains("config changed; reloaded (timezone, daemon")
    });
    wait_until(T, "the pinned role runs here now", || {
        v.files_in("agent/inbox/pinned/processed") == ["a.md"]
    });
    let kiritimati = chrono::Utc::now()
        .with_timezone(&chrono_tz::Pacific::Kiritimati)
        .format("%Y-%m-%d")
        .to_string();
    wait_until(T, "logged in the new time zone's day", || {
        std::fs::read_to_string(v.path(&format!("daily/{kiritimati}.md")))
            .is_ok_and(|t| t.contains("Pinned · inbox"))
    });
}

#[test]
fn a_scheduled_run_with_nothing_changed_costs_nothing_for_stock_roles() {
    // Issue 12: every stock role extends _base, which lists memory.md; the gate must still close.
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", &daemon_config(""));
    fake.respond_with(|_, _| Reply::ok(crate::support::fake_model::canned::anthropic_text("ok")));
    let comms = v.read("roles/comms.md");
    let start = comms.find("## Schedule\n").unwrap() + "## Schedule\n".len();
    let end = comms[start..]
        .find("\n## ")
        .map_or(comms.len(), |i| start + i + 1);
    v.write(
        "roles/comms.md",
        &format!("{}* * * * * *\n{}", &comms[..start], &comms[end..]),
    );
    // Other stock roles stay quiet.
    for role in ["delivery", "product", "risk"] {
        let text = v.read(&format!("roles/{role}.md"));
        let s = text.find("## Schedule\n").unwrap() + "## Schedule\n".len();
        let e = text[s..].find("\n## ").map_or(text.len(), |i| s + i + 1);
        v.write(
            &format!("roles/{role}.md"),
            &format!("{}on-demand\n{}", &text[..s], &text[e..]),
        );
    }
    let _d = Daemon::start(&v);
    wait_until(T, "the first run", || fake.requests().len() == 1);
    let skipped = || {
        v.records()
            .iter()
            .filter(|r| r["role"] == "comms" && r["outcome"] == "skipped")
            .count()
    };
    wait_until(T, "two slots skipped", || skipped() >= 2);
    assert_eq!(fake.requests().len(), 1, "zero model calls while nothing changed");
    assert_eq!(
        v.daily()
            .matches("Communication Manager · skipped — nothing changed")
            .count(),
        1,
        "one line per cause, not per slot:\n{}",
        v.daily()
    );
    // A change to memory.md (from _base) is a change.
    v.write(
        "memory.md",
        &format!("{}\n- new preference\n", v.read("memory.md")),
    );
    wait_until(T, "a run after the memory change", || fake.requests().len() == 2);
    assert!(wire::all_text(&fake.requests()[1].body).contains("- Changed: memory.md"));
}
