//! Approvals across devices (docs/spec.md §23, issue 38 item 4), end to end: real `nats-server`s,
//! real `tabd run` daemons on one vault folder with `[cluster] key`, the fake model. A call the
//! person approved runs once across devices — also when the device that asked is down — and the
//! run waiting for it goes on on the device that ran it; a record in the cluster that fails its
//! check runs nothing. Skipped without a `nats-server` unless `TABD_REQUIRE_NATS=1`.

use std::time::Duration;

use crate::cluster_daemons::{note, Devices, DEVICES};
use crate::support::approvals::{notes, set_status, status_of};

/// The cluster's key of the test devices (the same on every device).
const KEY: &str = "a-cluster-key-of-at-least-32-characters";

/// Devices with the cluster's key whose role `risk` asks before `write_file`, and a model that
/// writes `project/risks/approved.md` (the run then waits for the person), then says it is done.
fn asking(test: &str) -> Option<Devices> {
    let mut d = Devices::new(test, 3, "")?;
    d.extra = format!("key = \"{KEY}\"\n");
    d.risk_asks_to_write_once();
    Some(d)
}

/// Drops a note for `risk`, waits for its approval note and for the asking device to hand its
/// request and its waiting run to the cluster: that device's name, and the note.
fn ask(d: &Devices) -> (&'static str, String) {
    d.v.write("agent/inbox/risk/ask.md", &note(1));
    d.wait(Duration::from_secs(30), "an approval note", || {
        notes(&d.v).len() == 1
    });
    let approval = notes(&d.v).remove(0);
    // Its request first, then its run.
    let handed = |dev: &&str| {
        d.daemons[*dev]
            .stderr()
            .contains("handed to the cluster: it may go on")
    };
    d.wait(
        Duration::from_secs(30),
        "the waiting run handed to the cluster",
        || d.daemons.keys().any(&handed),
    );
    let asker = *d
        .daemons
        .keys()
        .find(|dev| handed(dev))
        .expect("the asking device");
    (asker, approval)
}

/// A value of the cluster's shared bucket, as the test's own client reads and writes it: what
/// is there (waited for) is written over with `change` of it.
fn shared_value(d: &Devices, kind: &str, id: &str, change: impl FnOnce(Vec<u8>) -> Vec<u8>) {
    let key = shared_key(d, kind, id);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_, kv) = shared_bucket(d).await;
        let now = shared_entry(d, &kv, &key).await;
        kv.put(key.as_str(), change(now).into()).await.expect("put");
    });
}

fn shared_key(d: &Devices, kind: &str, id: &str) -> tabd::capabilities::cluster::ClaimKey {
    let vault =
        d.v.root()
            .file_name()
            .expect("a folder")
            .to_string_lossy()
            .into_owned();
    tabd::capabilities::cluster::ClaimKey::shared(&vault, kind, id)
}

/// The servers' JetStream, and the shared bucket in it.
async fn shared_bucket(d: &Devices) -> (async_nats::jetstream::Context, async_nats::jetstream::kv::Store) {
    let client = crate::support::nats::client(&d.nats, 0).await;
    let js = async_nats::jetstream::new(client);
    let kv = js.get_key_value("tabd_shared").await.expect("the shared bucket");
    (js, kv)
}

/// The bytes under `key` in the shared bucket, once there.
async fn shared_entry(
    d: &Devices,
    kv: &async_nats::jetstream::kv::Store,
    key: &tabd::capabilities::cluster::ClaimKey,
) -> Vec<u8> {
    // Handed over when the asking run ended, or at the next try if the servers were slow.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = kv.get(key.as_str()).await.expect("get") {
            return v.to_vec();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no record {key} in the cluster:\n{}",
            d.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The approval's id as its note's frontmatter has it. YAML quotes an id that would read as a
/// number (`id: '704939'`); the id is what is inside the quotes.
fn id_of(d: &Devices, approval: &str) -> String {
    let id =
        d.v.read(approval)
            .lines()
            .find_map(|l| l.strip_prefix("id: "))
            .expect("an id")
            .trim()
            .to_string();
    for quote in ['\'', '"'] {
        if let Some(inner) = id.strip_prefix(quote).and_then(|i| i.strip_suffix(quote)) {
            return inner.to_string();
        }
    }
    id
}

/// The records of `risk`'s runs that ended (not waiting), with their devices.
fn ended(d: &Devices) -> Vec<(String, serde_json::Value)> {
    d.ok_records("risk")
        .into_iter()
        .filter(|(_, r)| r["ended"] != "waiting")
        .collect()
}

/// The run ids a device keeps waiting.
fn waiting_runs(d: &Devices, device: &str) -> Vec<String> {
    d.v.files_in(&format!(".tabd/devices/{device}/suspended"))
        .into_iter()
        .filter_map(|f| f.strip_suffix(".json").map(str::to_string))
        .collect()
}

#[test]
fn an_approval_decided_while_its_device_is_down_runs_once_on_another_and_its_run_goes_on_there() {
    let Some(mut d) = asking("an_approval_decided_while_its_device_is_down") else {
        return;
    };
    d.start_all();
    let (asker, approval) = ask(&d);
    let run = waiting_runs(&d, asker)
        .pop()
        .expect("the asking device keeps its run");
    d.daemons.get_mut(asker).expect("daemon").signal(libc::SIGKILL);
    set_status(&d.v, &approval, "approved");
    d.wait(Duration::from_secs(40), "the call done", || {
        status_of(&d.v, &approval) == "done"
    });
    d.wait(Duration::from_secs(40), "the run going on", || {
        ended(&d).len() == 1
    });
    assert_eq!(d.v.read("project/risks/approved.md"), "once\n");
    let ran = ended(&d);
    let on = ran[0].0.clone();
    assert_ne!(on, asker, "went on on a device that was up");
    assert_eq!(ran[0].1["run_id"], run.as_str(), "the same run: {:?}", ran[0].1);
    assert_eq!(
        d.fake.requests().len(),
        2,
        "the first part's request and the second's\n{}",
        d.stderr()
    );
    // The record goes first, the daily section after it: wait for the section.
    let device = format!("- **Device:** {on}\n");
    d.wait(Duration::from_secs(40), "the second part's daily section", || {
        let daily = d.v.daily();
        daily.contains("**Resumed:**") && daily.contains(&device)
    });
    assert_eq!(
        d.v.read(&approval).matches("## Result").count(),
        1,
        "{}",
        d.v.read(&approval)
    );

    // The asking device comes back: it does nothing more for the approval or its run.
    d.start(asker);
    d.wait(
        Duration::from_secs(30),
        "the asking device saying its run went on elsewhere",
        || {
            d.daemons[asker].stderr().contains(&format!(
                "run {run} went on on device {on}; nothing more for it here"
            ))
        },
    );
    assert!(waiting_runs(&d, asker).is_empty(), "its copy of the run dropped");
    assert_eq!(d.fake.requests().len(), 2);
    assert_eq!(ended(&d).len(), 1);
    assert_eq!(d.v.read("project/risks/approved.md"), "once\n");
    assert_eq!(status_of(&d.v, &approval), "done");
    assert!(d.fake.violations().is_empty(), "{:?}", d.fake.violations());
}

#[test]
fn an_approval_seen_by_every_device_at_once_runs_once_and_its_run_goes_on_once() {
    let Some(mut d) = asking("an_approval_seen_by_every_device_at_once") else {
        return;
    };
    d.start_all();
    let (_, approval) = ask(&d);
    set_status(&d.v, &approval, "approved");
    d.wait(Duration::from_secs(40), "the run going on", || {
        ended(&d).len() == 1 && status_of(&d.v, &approval) == "done"
    });
    assert_eq!(d.v.read("project/risks/approved.md"), "once\n");
    assert_eq!(d.fake.requests().len(), 2, "{}", d.stderr());
    let text = d.v.read(&approval);
    assert_eq!(text.matches("## Result").count(), 1, "{text}");
    assert!(!text.contains("Not run"), "{text}");
    // Every device's run records: one second part in all.
    let parts: Vec<_> = d
        .records()
        .into_iter()
        .filter(|(_, r)| r["role"] == "risk")
        .collect();
    assert_eq!(parts.len(), 2, "the first part and one second: {parts:?}");

    // A sync tool brings back the note as it was when approved, and the device that ran the call
    // is down: the others find its execution record and run nothing again.
    let ran_on = ended(&d)[0].0.clone();
    let ran_on = *DEVICES.iter().find(|x| **x == ran_on).expect("a device");
    d.daemons.get_mut(ran_on).expect("daemon").signal(libc::SIGKILL);
    let id = id_of(&d, &approval);
    let before =
        text[..text.find("## Result").expect("a result")].replacen("status: done", "status: approved", 1);
    let found = format!("approval {id}: device {ran_on} ran its call (done)");
    let others: Vec<(&str, usize)> = DEVICES
        .into_iter()
        .filter(|x| *x != ran_on)
        .map(|x| (x, d.daemons[x].stderr().matches(&found).count()))
        .collect();
    d.v.write(&approval, &before);
    for (dev, before) in others {
        d.wait(
            Duration::from_secs(30),
            "each other device finding the call ran",
            || d.daemons[dev].stderr().matches(&found).count() > before,
        );
    }
    assert_eq!(status_of(&d.v, &approval), "approved", "{}", d.stderr());
    assert!(!d.v.read(&approval).contains("## Result"));
    assert_eq!(d.fake.requests().len(), 2);
    assert_eq!(ended(&d).len(), 1);
}

#[test]
fn a_forged_request_in_the_cluster_is_refused_and_runs_nothing() {
    let Some(mut d) = asking("a_forged_request_in_the_cluster_is_refused") else {
        return;
    };
    d.start("laptop");
    d.start("desktop");
    let (asker, approval) = ask(&d);
    let id = id_of(&d, &approval);
    d.daemons.get_mut(asker).expect("daemon").signal(libc::SIGKILL);
    // What someone with the servers' password but not the cluster's key can write: the request
    // as it was, for another tool, signed with another key.
    let vault =
        d.v.root()
            .file_name()
            .expect("a folder")
            .to_string_lossy()
            .into_owned();
    let name = tabd::capabilities::cluster::ClaimKey::shared(&vault, "request", &id);
    shared_value(&d, "request", &id, |real| {
        let body = &real[real.iter().position(|b| *b == b'\n').expect("a seal") + 1..];
        let forged = String::from_utf8_lossy(body).replace("write_file", "move_file");
        tabd::base::signing::Key::shared(b"not-the-cluster-key-but-32-chars-long").seal(
            "tabd cluster record",
            &[name.as_str().as_bytes()],
            forged.as_bytes(),
        )
    });
    set_status(&d.v, &approval, "approved");
    d.wait(
        Duration::from_secs(30),
        "the forged request refused in the daily note",
        || d.v.daily().contains("is refused: its signature does not match"),
    );
    assert_eq!(status_of(&d.v, &approval), "approved", "nothing ran it");
    assert!(!d.v.path("project/risks/approved.md").exists());
    assert_eq!(d.fake.requests().len(), 1);
    assert!(d.fake.violations().is_empty(), "{:?}", d.fake.violations());
}

#[test]
fn a_waiting_run_larger_than_one_message_goes_on_on_another_device() {
    let Some(mut d) = asking("a_waiting_run_larger_than_one_message") else {
        return;
    };
    // The role reads a 1.2 MB note whole (a context file, every byte of it in the prompt), so the
    // waiting run's record is more than the servers take in one message (1 MB by default).
    let config = std::fs::read_to_string(&d.v.config).expect("config");
    d.v.set_config(&format!(
        "{config}\n[context]\nmax_file_bytes = 2000000\nmax_context_bytes = 2100000\n"
    ));
    let line = "A long line of the project's timeline, kept whole in the waiting run.\n";
    let mut timeline = line.repeat(1_200_000 / line.len());
    timeline.push_str("The timeline ends here.\n");
    d.v.write("project/timeline.md", &timeline);
    d.start_all();
    let (asker, approval) = ask(&d);
    let run = waiting_runs(&d, asker)
        .pop()
        .expect("the asking device keeps its run");
    // In the cluster: a pointer to the record, kept in the object store.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (pointer, object_bytes) = rt.block_on(async {
        let (js, kv) = shared_bucket(&d).await;
        let pointer = shared_entry(&d, &kv, &shared_key(&d, "run", &run)).await;
        let mut stream = js
            .get_stream(format!("OBJ_{}", tabd::capabilities::cluster::shared::LARGE))
            .await
            .expect("the object store of large records");
        (pointer, stream.info().await.expect("its info").state.bytes)
    });
    assert!(
        pointer.starts_with(b"{\"object\":") && pointer.len() < 1000,
        "{}",
        String::from_utf8_lossy(&pointer[..pointer.len().min(200)])
    );
    assert!(object_bytes > 1_200_000, "{object_bytes}");

    d.daemons.get_mut(asker).expect("daemon").signal(libc::SIGKILL);
    set_status(&d.v, &approval, "approved");
    d.wait(Duration::from_secs(40), "the call done", || {
        status_of(&d.v, &approval) == "done"
    });
    d.wait(Duration::from_secs(40), "the run going on", || {
        ended(&d).len() == 1
    });
    assert_eq!(
        d.v.read("project/risks/approved.md"),
        "once\n",
        "the call ran once"
    );
    let text = d.v.read(&approval);
    assert_eq!(text.matches("## Result").count(), 1, "{text}");
    let ran = ended(&d);
    assert_ne!(ran[0].0, asker, "went on on a device that was up");
    assert_eq!(ran[0].1["run_id"], run.as_str(), "the same run: {:?}", ran[0].1);
    let requests = d.fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "the first part's request and the second's\n{}",
        d.stderr()
    );
    let second = requests[1].body.to_string();
    assert!(
        second.len() > 1_200_000 && second.contains("The timeline ends here."),
        "the second part goes on with the whole conversation ({} bytes)",
        second.len()
    );
    assert!(d.fake.violations().is_empty(), "{:?}", d.fake.violations());
}

/// Issue 49, item 7: `tabd approve ID` typed on a device that did not ask (its ledger has no such
/// request) decides the approval in its note, which the vault shares, and the call runs once —
/// it said "no approval" although docs/devices.md says approvals may be decided on any device.
#[test]
fn tabd_approve_on_a_device_that_did_not_ask_decides_the_approval() {
    let Some(mut d) = asking("tabd_approve_on_a_device_that_did_not_ask") else {
        return;
    };
    d.start("laptop");
    let (asker, approval) = ask(&d);
    assert_eq!(asker, "laptop");
    // The desktop's config, as its daemon would have it (its daemon is not running).
    let base = std::fs::read_to_string(&d.v.config).expect("config");
    let desktop = d.config_of("desktop");
    std::fs::write(
        &desktop,
        format!("{base}\n{}", d.nats.config("desktop", d.lease_s, &d.extra)),
    )
    .unwrap();
    let id = id_of(&d, &approval);
    let out =
        d.v.command_on(&desktop, &d.v.root(), &["approve", &id])
            .output()
            .unwrap();
    let said = crate::support::describe(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("in its note") && !said.contains("no approval"),
        "{said}"
    );
    d.wait(Duration::from_secs(30), "the call done", || {
        crate::support::approvals::status_of(&d.v, &approval) == "done"
    });
    assert_eq!(d.v.read("project/risks/approved.md"), "once\n");
    // Typed again: only the first decision counts.
    let again =
        d.v.command_on(&desktop, &d.v.root(), &["approve", &id])
            .output()
            .unwrap();
    let said = crate::support::describe(&again);
    assert_ne!(again.status.code(), Some(0), "{said}");
    assert!(said.contains("not pending"), "{said}");
}

/// Issue 49, item 4: after an approved call ran and its run went on, someone with the servers'
/// password (not the cluster's key) deletes its execution record and the record of who let its
/// run go on, while a sync tool brings back the note as it was when approved. A device added
/// later (the others asleep, so it is the one to look) runs neither the call nor the run's
/// second part again: the deleted record is refused, said in the daily note.
#[test]
fn an_execution_and_resumer_record_deleted_while_the_note_comes_back_approved_run_nothing_again() {
    let Some(mut d) = asking("an_execution_and_resumer_record_deleted") else {
        return;
    };
    d.start("laptop");
    d.start("desktop");
    let (_, approval) = ask(&d);
    set_status(&d.v, &approval, "approved");
    d.wait(Duration::from_secs(40), "the run going on", || {
        ended(&d).len() == 1 && status_of(&d.v, &approval) == "done"
    });
    d.wait(Duration::from_secs(40), "the second part's daily section", || {
        d.v.daily().contains("**Resumed:**")
    });
    let id = id_of(&d, &approval);
    let text = d.v.read(&approval);
    let exec = crate::cluster_daemons::delete_keys(&d, "tabd_shared", &format!(".exec.{id}"));
    let resumer = crate::cluster_daemons::delete_keys(&d, "tabd_shared", ".resumer.");
    assert_eq!((exec.len(), resumer.len()), (1, 1), "{exec:?} {resumer:?}");
    let before =
        text[..text.find("## Result").expect("a result")].replacen("status: done", "status: approved", 1);
    // The devices that asked and ran it sleep: their ledgers know better, and would set the
    // note right before the new device looked.
    for x in ["laptop", "desktop"] {
        d.daemons[x].signal(libc::SIGSTOP);
    }
    d.v.write(&approval, &before);
    d.start("server");
    d.wait(
        Duration::from_secs(40),
        "the device added later refusing the deleted record",
        || {
            d.daemons["server"]
                .stderr()
                .contains("was deleted (someone with the servers' password removed it)")
        },
    );
    assert_eq!(status_of(&d.v, &approval), "approved", "{}", d.stderr());
    assert!(!d.v.read(&approval).contains("## Result"));
    assert_eq!(d.v.daily().matches(&format!("approval `{id}`")).count(), 1);
    assert_eq!(d.fake.requests().len(), 2, "{}", d.stderr());
    assert_eq!(ended(&d).len(), 1);
    assert_eq!(d.v.daily().matches("**Resumed:**").count(), 1);
    // Said in tabd's log, then in the daily note.
    d.wait(Duration::from_secs(10), "the refusal in the daily note", || {
        d.v.daily()
            .contains("was deleted (someone with the servers' password removed it)")
    });
}
