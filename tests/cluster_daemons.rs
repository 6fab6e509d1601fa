//! Many devices, one vault (docs/spec.md §23), end to end: three real `nats-server`s in one cluster and
//! three `tabd run` daemons on one vault folder, each its own device. Skipped without a
//! `nats-server` unless `TABD_REQUIRE_NATS=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::nats::Nats;
use crate::support::{wire, TestVault};

pub(crate) const DEVICES: [&str; 3] = ["laptop", "desktop", "server"];

/// Three devices of one vault.
pub(crate) struct Devices {
    pub(crate) v: TestVault,
    pub(crate) fake: FakeModel,
    pub(crate) nats: Nats,
    pub(crate) daemons: BTreeMap<&'static str, Daemon>,
    pub(crate) lease_s: u64,
    /// More of each device's `[cluster]` table (`key = …`).
    pub(crate) extra: String,
    /// The vault folder of each device that has its own copy (kept in step by a sync tool);
    /// the others share `v`'s.
    pub(crate) copies: BTreeMap<&'static str, PathBuf>,
    /// Each device asks the model under a path of its own (`/laptop/v1/messages`), so that a
    /// test can tell, and hold, one device's requests.
    pub(crate) model_by_device: bool,
}

impl Devices {
    /// The risk role asks before `write_file`; the model writes `project/risks/approved.md` ("once")
    /// and, given the call's result, says "done".
    pub(crate) fn risk_asks_to_write_once(&mut self) {
        let d = self;
        d.fake.respond_with(|req, _| {
            if wire::tool_results(&req.body).is_empty() {
                wire::tools(
                    "anthropic",
                    None,
                    &[(
                        "w1",
                        "write_file",
                        json!({"path": "project/risks/approved.md", "content": "once\n"}),
                    )],
                )
            } else {
                wire::text("anthropic", "done")
            }
        });
        let role =
            d.v.read("roles/risk.md")
                .replacen("## Tools\n", "## Tools\n- write_file\n", 1);
        d.v.write(
            "roles/risk.md",
            &role.replacen("---\n", "---\napprove:\n  write_file: ask\n", 1),
        );
    }

    pub(crate) fn new(test: &str, lease_s: u64, limits: &str) -> Option<Devices> {
        let nats = Nats::three(test)?;
        let fake = FakeModel::start();
        let v = vault_with(&fake, &daemon_config(limits));
        fake.respond_with(|_, _| wire::text("anthropic", "ok"));
        Some(Devices {
            v,
            fake,
            nats,
            daemons: BTreeMap::new(),
            lease_s,
            extra: String::new(),
            copies: BTreeMap::new(),
            model_by_device: false,
        })
    }

    pub(crate) fn config_of(&self, device: &str) -> PathBuf {
        self.v.dir.path().join(format!("config-{device}.toml"))
    }

    /// The vault folder `device` runs on.
    pub(crate) fn root_of(&self, device: &str) -> PathBuf {
        self.copies.get(device).cloned().unwrap_or_else(|| self.v.root())
    }

    pub(crate) fn start(&mut self, device: &'static str) {
        let mut base = std::fs::read_to_string(&self.v.config).expect("config");
        if self.model_by_device {
            let url = self.fake.anthropic_url();
            base = base.replace(&format!("\"{url}\""), &format!("\"{url}/{device}\""));
        }
        let path = self.config_of(device);
        std::fs::write(
            &path,
            format!("{base}\n{}", self.nats.config(device, self.lease_s, &self.extra)),
        )
        .expect("config");
        let mut cmd = self.v.command_on(&path, &self.root_of(device), &["run"]);
        cmd.env(
            "TABD_LOG",
            "debug,async_nats=warn,rmcp=warn,hyper=warn,reqwest=warn",
        );
        self.daemons.insert(device, Daemon::start_command(&self.v, cmd));
    }

    pub(crate) fn start_all(&mut self) {
        for d in DEVICES {
            self.start(d);
        }
    }

    /// Every run record of every device (each from its own vault folder), with the device's name.
    pub(crate) fn records(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for d in DEVICES {
            let dir = self.root_of(d).join(format!(".tabd/devices/{d}/runs"));
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|r| r.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                let complete = text.rfind('\n').map_or("", |end| &text[..end]);
                out.extend(
                    complete
                        .lines()
                        .map(|l| (d.to_string(), serde_json::from_str(l).expect("a record"))),
                );
            }
        }
        out
    }

    pub(crate) fn ok_records(&self, role: &str) -> Vec<(String, Value)> {
        self.records()
            .into_iter()
            .filter(|(_, r)| r["role"] == role && r["outcome"] == "ok")
            .collect()
    }

    pub(crate) fn stderr(&self) -> String {
        self.daemons
            .iter()
            .map(|(d, daemon)| {
                // The last lines that say something: a device's debug chatter ("another device
                // runs the … slot", twice a second) would push out what a failure needs.
                let text = daemon.stderr();
                let tail: Vec<&str> = text
                    .lines()
                    .rev()
                    .filter(|l| !l.contains(" DEBUG "))
                    .take(60)
                    .collect();
                format!(
                    "--- {d} ---\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until `cond`, or panics with every daemon's log.
    pub(crate) fn wait(&self, within: Duration, what: &str, cond: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + within;
        while !cond() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until a device runs `role` (its model request arrived, its status says so).
    pub(crate) fn wait_running(&self, role: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.fake.requests().is_empty() || self.running(role).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "no device ran {role}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The device whose daemon shows `role` running.
    pub(crate) fn running(&self, role: &str) -> Option<&'static str> {
        DEVICES.into_iter().find(|d| {
            let text =
                std::fs::read_to_string(self.root_of(d).join(format!(".tabd/devices/{d}/status.json")))
                    .unwrap_or_default();
            let s: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            s["roles"].as_array().is_some_and(|roles| {
                roles
                    .iter()
                    .any(|r| r["role"] == role && r["live"]["running"] == true)
            })
        })
    }
}

pub(crate) fn note(i: usize) -> String {
    format!("---\nfrom: person\n---\nNote number {i}.\n")
}

#[test]
fn three_devices_run_a_hundred_slots_exactly_once() {
    let Some(mut d) = Devices::new(
        "three_devices_run_a_hundred_slots_exactly_once",
        5,
        "max_runs_per_day = 1000",
    ) else {
        return;
    };
    d.v.write(
        "roles/tick.md",
        "---\nskip_unchanged: false\nmax_runs_per_day: 1000\n---\n# Tick\n\n## Mission\nTick.\n\n## Schedule\n* * * * * *\n",
    );
    d.start_all();
    // 100 slots, one a second (the finest a schedule has; the claims are those of any slot).
    wait_until(Duration::from_secs(240), "100 slots run", || {
        d.ok_records("tick").len() >= 100
    });
    for daemon in d.daemons.values() {
        daemon.signal(libc::SIGTERM);
    }
    for daemon in d.daemons.values_mut() {
        assert_eq!(daemon.wait_exit(Duration::from_secs(30)), Some(0));
    }
    let slots = each_slot_once(&d, "tick");
    assert!(slots.len() >= 100);
    assert!(d.fake.violations().is_empty(), "{:?}", d.fake.violations());
}

/// The slots (unix seconds, in order) of `role`'s good runs on every device, asserted each run
/// once — none twice, none missing between the first and the last (a slot each second).
pub(crate) fn each_slot_once(d: &Devices, role: &str) -> Vec<i64> {
    let runs = d.ok_records(role);
    let mut slots: Vec<i64> = runs
        .iter()
        .map(|(_, r)| {
            let at = r["trigger"]["scheduled_for"].as_str().expect("a slot's time");
            chrono::DateTime::parse_from_rfc3339(at)
                .expect("RFC 3339")
                .timestamp()
        })
        .collect();
    slots.sort();
    let unique: BTreeSet<i64> = slots.iter().copied().collect();
    assert_eq!(
        unique.len(),
        slots.len(),
        "no slot ran twice: {slots:?}\n{}",
        d.stderr()
    );
    let (first, last) = (slots[0], slots[slots.len() - 1]);
    let by: BTreeMap<&str, usize> = runs.iter().fold(BTreeMap::new(), |mut by, (dev, _)| {
        *by.entry(dev.as_str()).or_default() += 1;
        by
    });
    assert_eq!(
        slots.len() as i64,
        last - first + 1,
        "none missing: {slots:?} (runs by device: {by:?})\n{}",
        d.stderr()
    );
    slots
}

#[test]
fn fifty_notes_dropped_at_once_run_once_each_and_move_once() {
    let Some(mut d) = Devices::new("fifty_notes_dropped_at_once_run_once_each", 5, "") else {
        return;
    };
    d.start_all();
    for i in 0..50 {
        d.v.write(&format!("agent/inbox/risk/n{i:02}.md"), &note(i));
    }
    wait_until(Duration::from_secs(90), "50 notes in processed/", || {
        d.v.files_in("agent/inbox/risk/processed").len() >= 50 && d.v.files_in("agent/inbox/risk").is_empty()
    });
    let processed = d.v.files_in("agent/inbox/risk/processed");
    let expected: Vec<String> = (0..50).map(|i| format!("n{i:02}.md")).collect();
    assert_eq!(
        processed,
        expected,
        "each moved once (a second move would be n00-2.md)\n{}",
        d.stderr()
    );
    let mut handled: Vec<String> = d
        .ok_records("risk")
        .iter()
        .flat_map(|(_, r)| r["trigger"]["notes"].as_array().cloned().unwrap_or_default())
        .map(|n| n.as_str().unwrap_or_default().to_string())
        .collect();
    handled.sort();
    let unique: BTreeSet<&String> = handled.iter().collect();
    assert_eq!(
        handled.len(),
        50,
        "each note ran once: {handled:?}\n{}",
        d.stderr()
    );
    assert_eq!(unique.len(), 50);
    // `tabd status --json` on a device: the cluster as it sees it, every device by its heartbeat.
    d.wait(
        Duration::from_secs(30),
        "status naming three devices with a quorum",
        || {
            let out =
                d.v.command_with_config(&d.config_of("laptop"), &["status", "--json"])
                    .output()
                    .expect("tabd status");
            let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            let c = &s["cluster"];
            let seen: Vec<&str> = c["devices"].as_array().map_or(Vec::new(), |a| {
                a.iter().filter_map(|x| x["device"].as_str()).collect()
            });
            c["device"] == "laptop" && c["quorum"] == true && seen == ["desktop", "laptop", "server"]
        },
    );
    let text =
        d.v.command_with_config(&d.config_of("laptop"), &["status"])
            .output()
            .expect("tabd status");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("cluster: device laptop · quorum yes"), "{text}");
}

#[test]
fn a_device_killed_mid_run_leaves_its_note_to_another_within_the_lease() {
    let Some(mut d) = Devices::new("a_device_killed_mid_run_leaves_its_note_to_another", 3, "") else {
        return;
    };
    // The first request is never answered in time (its device dies meanwhile); the rest are.
    d.fake.respond_with(|_, i| {
        let reply = wire::text("anthropic", "ok");
        if i == 0 {
            reply.delayed(Duration::from_secs(60))
        } else {
            reply
        }
    });
    d.start_all();
    d.v.write("agent/inbox/risk/slow.md", &note(1));
    d.wait_running("risk");
    let victim = d.running("risk").expect("running");
    d.daemons.get_mut(victim).expect("daemon").signal(libc::SIGKILL);
    // Another device runs it once the lease lapses (3 s), plus a few seconds.
    d.wait(
        Duration::from_secs(20),
        "the note processed by another device",
        || d.v.files_in("agent/inbox/risk/processed") == ["slow.md"],
    );
    let runs = d.ok_records("risk");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_ne!(runs[0].0, victim, "run by a device that was not killed");
    // The run's daily section names the device that ran it.
    assert!(
        d.v.daily().contains(&format!("- **Device:** {}\n", runs[0].0)),
        "{}",
        d.v.daily()
    );
    let state = d.v.path(&format!(".tabd/devices/{}/state.json", runs[0].0));
    let state: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    assert!(
        state["roles"]["risk"]["attempts"]
            .as_object()
            .is_none_or(|a| a.is_empty()),
        "no attempt counted: {state}"
    );
}

#[test]
fn a_device_stopped_past_its_lease_writes_nothing_when_it_goes_on_and_says_so() {
    let Some(mut d) = Devices::new("a_device_stopped_past_its_lease_writes_nothing", 3, "") else {
        return;
    };
    // Every run appends one line to log.md, then ends.
    d.fake.respond_with(|req, i| {
        let reply = if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                None,
                &[(
                    "t1",
                    "append_file",
                    json!({"path": "project/risks/log.md", "content": "a run was here\n"}),
                )],
            )
        } else {
            wire::text("anthropic", "done")
        };
        // The first answer comes after its device is stopped.
        if i == 0 {
            reply.delayed(Duration::from_millis(500))
        } else {
            reply
        }
    });
    d.v.write(
        "roles/risk.md",
        &d.v.read("roles/risk.md")
            .replacen("## Tools\n", "## Tools\n- append_file\n", 1),
    );
    d.start_all();
    d.v.write("agent/inbox/risk/once.md", &note(1));
    d.wait_running("risk");
    let paused = d.running("risk").expect("running");
    d.daemons[paused].signal(libc::SIGSTOP);
    // Another device takes the note after the lease (3 s) and runs it.
    wait_until(
        Duration::from_secs(30),
        "the note processed by another device",
        || d.v.files_in("agent/inbox/risk/processed") == ["once.md"],
    );
    d.daemons[paused].signal(libc::SIGCONT);
    wait_until(
        Duration::from_secs(30),
        "the paused device saying it lost its claim",
        || d.daemons[paused].stderr().contains("no longer holds"),
    );
    wait_until(Duration::from_secs(10), "the daily note saying so", || {
        d.v.daily().contains("no longer holds")
    });
    assert_eq!(
        d.v.read("project/risks/log.md"),
        "a run was here\n",
        "only the device that held the note wrote\n{}",
        d.stderr()
    );
    assert_eq!(d.v.files_in("agent/inbox/risk/processed"), ["once.md"]);
    let ok: Vec<String> = d.ok_records("risk").into_iter().map(|(dev, _)| dev).collect();
    assert_eq!(ok.len(), 1, "one run ok: {ok:?}");
    assert_ne!(ok[0], paused);
}

#[test]
fn sync_conflict_copies_never_run_and_are_named() {
    let Some(mut d) = Devices::new("sync_conflict_copies_never_run_and_are_named", 5, "") else {
        return;
    };
    d.start("laptop");
    d.v.write(
        "agent/inbox/risk/call.sync-conflict-20261122-101500-ABCDEF7.md",
        &note(1),
    );
    d.v.write("agent/inbox/risk/call (conflicted copy).md", &note(2));
    wait_until(
        Duration::from_secs(20),
        "the copies named in the daily note",
        || {
            let daily = d.v.daily();
            daily.contains("call.sync-conflict-20261122-101500-ABCDEF7.md")
                && daily.contains("call (conflicted copy).md")
        },
    );
    d.v.write("agent/inbox/risk/real.md", &note(3));
    wait_until(Duration::from_secs(20), "the real note processed", || {
        d.v.files_in("agent/inbox/risk/processed") == ["real.md"]
    });
    let mut left = d.v.files_in("agent/inbox/risk");
    left.sort();
    assert_eq!(
        left,
        [
            "call (conflicted copy).md",
            "call.sync-conflict-20261122-101500-ABCDEF7.md"
        ]
    );
    let runs = d.ok_records("risk");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].1["trigger"]["notes"], json!(["agent/inbox/risk/real.md"]));
}

#[test]
fn an_approval_decided_in_a_shared_vault_runs_once_on_the_device_that_asked() {
    let Some(mut d) = Devices::new("an_approval_decided_in_a_shared_vault_runs_once", 5, "") else {
        return;
    };
    d.risk_asks_to_write_once();
    d.start_all();
    d.v.write("agent/inbox/risk/ask.md", &note(1));
    d.wait(Duration::from_secs(30), "an approval note", || {
        crate::support::approvals::notes(&d.v).len() == 1
    });
    let approval = crate::support::approvals::notes(&d.v).remove(0);
    d.wait(Duration::from_secs(20), "the note pending", || {
        crate::support::approvals::status_of(&d.v, &approval) == "pending"
    });
    crate::support::approvals::set_status(&d.v, &approval, "approved");
    d.wait(Duration::from_secs(30), "the call done", || {
        crate::support::approvals::status_of(&d.v, &approval) == "done"
    });
    assert_eq!(d.v.read("project/risks/approved.md"), "once\n");
    // No other device called the person's decision invalid, and none ran it again.
    assert!(
        !d.v.read(&approval).contains("no record of asking"),
        "{}",
        d.v.read(&approval)
    );
}

/// The keys of `bucket` that contain `part` (deleted ones left out), as the test's own client
/// lists them.
pub(crate) fn keys_with(d: &Devices, bucket: &str, part: &str) -> Vec<String> {
    on_bucket(d, bucket, |kv| async move {
        use futures::StreamExt;
        let keys: Vec<String> = kv
            .keys()
            .await
            .expect("its keys")
            .map(|k| k.expect("a key"))
            .collect()
            .await;
        keys.into_iter().filter(|k| k.contains(part)).collect()
    })
}

/// Deletes every key of `bucket` that contains `part`, as anyone with the servers' password
/// can (a delete marker is left, as the KV API leaves one); returns the keys.
pub(crate) fn delete_keys(d: &Devices, bucket: &str, part: &str) -> Vec<String> {
    let keys = keys_with(d, bucket, part);
    on_bucket(d, bucket, |kv| async move {
        for key in &keys {
            kv.delete(key).await.expect("a delete");
        }
        keys
    })
}

/// `work` on the bucket `bucket` of the test's servers, through its own client.
fn on_bucket<T, F: std::future::Future<Output = T>>(
    d: &Devices,
    bucket: &str,
    work: impl FnOnce(async_nats::jetstream::kv::Store) -> F,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = crate::support::nats::client(&d.nats, 0).await;
        let js = async_nats::jetstream::new(client);
        work(js.get_key_value(bucket).await.expect("the bucket")).await
    })
}

/// The heartbeat `device` last wrote, as the servers hold it (no `[cluster] key`: plain JSON).
pub(crate) fn heartbeat_of(d: &Devices, device: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let vault =
        d.v.root()
            .file_name()
            .expect("a folder")
            .to_string_lossy()
            .into_owned();
    rt.block_on(async {
        let client = crate::support::nats::client(&d.nats, 0).await;
        let js = async_nats::jetstream::new(client);
        let kv = js.get_key_value("tabd_devices").await.expect("the bucket");
        let key = tabd::capabilities::cluster::keys::device(&vault, device);
        let value = kv.get(key).await.expect("a read").unwrap_or_default();
        String::from_utf8_lossy(&value).into_owned()
    })
}

/// Issue 49, item 4: a note's done marker deleted by someone with the servers' password while a
/// sync tool brings the note back into the inbox. The marker under its key says it was written:
/// no device runs the note again, and one says why, once.
#[test]
fn a_notes_done_marker_deleted_while_a_sync_tool_restores_it_runs_nothing_again() {
    let Some(mut d) = Devices::new("a_notes_done_marker_deleted", 3, "") else {
        return;
    };
    d.start_all();
    d.v.write("agent/inbox/risk/a.md", &note(1));
    d.wait(Duration::from_secs(30), "the note processed", || {
        d.v.files_in("agent/inbox/risk/processed") == ["a.md"]
    });
    // Marked done a moment after the note is moved.
    d.wait(Duration::from_secs(10), "its done marker", || {
        !keys_with(&d, "tabd_done", ".note.risk.").is_empty()
    });
    let gone = delete_keys(&d, "tabd_done", ".note.risk.");
    assert_eq!(gone.len(), 1, "{gone:?}");
    d.v.write("agent/inbox/risk/a.md", &note(1));
    let said = "its done marker was deleted";
    d.wait(Duration::from_secs(30), "a device refusing the note", || {
        d.daemons.values().any(|x| x.stderr().contains(said))
    });
    // Every device has looked at it (each claims a note it sees within a lease).
    d.wait(Duration::from_secs(30), "the devices' next looks", || {
        d.daemons.values().filter(|x| x.stderr().contains(said)).count() >= 2
    });
    assert_eq!(d.ok_records("risk").len(), 1, "{}", d.stderr());
    assert_eq!(d.fake.requests().len(), 1);
    assert!(
        d.v.path("agent/inbox/risk/a.md").exists(),
        "left where the sync tool put it"
    );
    for x in d.daemons.values() {
        assert!(x.stderr().matches(said).count() <= 1, "said once\n{}", x.stderr());
    }
}

/// Issue 49, item 4: the claim and tenure of a note that runs now, deleted by hand. Another
/// device that finds the claim free does not take it over — the holder's heartbeat names it and
/// the holder still writes them — and the holder takes its claim back: the note runs once, its
/// side effects made once.
#[test]
fn a_running_notes_claim_and_tenure_deleted_are_taken_back_and_never_run_twice() {
    let Some(mut d) = Devices::new("a_running_notes_claim_and_tenure_deleted", 3, "") else {
        return;
    };
    // The run's one request is answered late: the claim is deleted meanwhile.
    d.fake.respond_with(|_, i| {
        let reply = wire::text("anthropic", "ok");
        if i == 0 {
            reply.delayed(Duration::from_secs(10))
        } else {
            reply
        }
    });
    d.start_all();
    d.v.write("agent/inbox/risk/slow.md", &note(1));
    d.wait_running("risk");
    let holder = d.running("risk").expect("running");
    d.wait(
        Duration::from_secs(10),
        "the holder's heartbeat naming the note",
        || heartbeat_of(&d, holder).contains(".note.risk."),
    );
    let claims = delete_keys(&d, "tabd_claims", ".note.risk.");
    let tenures = delete_keys(&d, "tabd_tenure", ".note.risk.");
    assert_eq!((claims.len(), tenures.len()), (1, 1));
    d.wait(Duration::from_secs(40), "the note processed", || {
        d.v.files_in("agent/inbox/risk/processed") == ["slow.md"]
    });
    // Deleted under it (seen at its renewal), or claimed by another device that then waited.
    let log = d.daemons[holder].stderr();
    assert!(
        log.contains("this device holds it still") || log.contains("and waits: taken back"),
        "{}",
        d.stderr()
    );
    let runs = d.ok_records("risk");
    assert_eq!(runs.len(), 1, "{runs:?}\n{}", d.stderr());
    assert_eq!(runs[0].0, holder);
    assert_eq!(d.fake.requests().len(), 1, "one run, one request\n{}", d.stderr());
}
