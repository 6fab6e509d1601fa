//! The cluster client against real `nats-server` processes (docs/spec.md §23): claims, leases,
//! renewals and heartbeats. Skipped without a `nats-server` unless `TABD_REQUIRE_NATS=1`.

use std::time::{Duration, Instant};

use tabd::capabilities::cluster::catch_up::CatchUpShare;
use tabd::capabilities::cluster::{ClaimKey, Claimed, Cluster, ClusterError};
use tabd::setup::config::cluster::{ClusterConfig, WhenAlone};

use crate::support::nats::Nats;

fn config(nats: &Nats, device: &str, lease_s: u64) -> ClusterConfig {
    ClusterConfig {
        nats: nats.urls(),
        creds: None,
        device: device.into(),
        lease: Duration::from_secs(lease_s),
        when_alone: WhenAlone::Skip,
        key: None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn slot(n: i64) -> ClaimKey {
    ClaimKey::slot(
        "Vault",
        "risk",
        chrono::DateTime::from_timestamp(1_800_000_000 + n, 0).unwrap(),
    )
}

/// Tries `claim` until it wins, for at most `within` (the server lets an unrenewed key go after
/// the lease; how soon after is its expiry timer's business).
async fn claim_when_free(
    c: &Cluster,
    key: &ClaimKey,
    within: Duration,
) -> std::sync::Arc<tabd::capabilities::cluster::Lease> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(l) = c
            .claim(key, "the slot".into())
            .await
            .expect("the cluster answers")
        {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "{key} was never free within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn two_devices_race_for_one_key_and_exactly_one_wins() {
    let Some(nats) = Nats::three("two_devices_race_for_one_key_and_exactly_one_wins") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        let b = Cluster::connect(&config(&nats, "b", 30), "Vault").await.unwrap();
        for n in 0..20 {
            let key = slot(n);
            let (x, y) = tokio::join!(a.claim(&key, "s".into()), b.claim(&key, "s".into()));
            let (x, y) = (
                x.unwrap_or_else(|e| panic!("{e}\n{}", nats.logs())),
                y.unwrap_or_else(|e| panic!("{e}\n{}", nats.logs())),
            );
            assert!(
                x.is_some() != y.is_some(),
                "key {n}: exactly one wins ({x:?}, {y:?})\n{}",
                nats.logs()
            );
            let winner = x.or(y).unwrap();
            assert!(winner.still_mine() && winner.revision() > 0);
            let tabd::capabilities::cluster::Read::Found(holder, _) = a.holder_of(&key).await.unwrap() else {
                panic!("a holder of {key}");
            };
            assert!(["a", "b"].contains(&holder.device.as_str()));
        }
    });
}

#[test]
fn a_lease_not_renewed_is_lost_and_another_device_claims_it_and_a_late_renewal_fails() {
    let Some(nats) = Nats::one("a_lease_not_renewed_is_lost_and_another_device_claims_it") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 2), "Vault").await.unwrap();
        let b = Cluster::connect(&config(&nats, "b", 2), "Vault").await.unwrap();
        let key = slot(100);
        let mine = a
            .claim(&key, "the slot".into())
            .await
            .unwrap()
            .expect("a wins a free key");
        assert!(
            b.claim(&key, "the slot".into()).await.unwrap().is_none(),
            "held by a"
        );
        // a does not renew: b gets it once the servers let it go.
        let theirs = claim_when_free(&b, &key, Duration::from_secs(15)).await;
        assert!(!mine.still_mine(), "a knows without asking: past its lease");
        assert!(theirs.still_mine());
        assert!(theirs.revision() > mine.revision(), "a new fencing token");
        match a.renew(&mine).await {
            Err(ClusterError::Lost { .. }) => {}
            other => panic!("a renewal after another device claimed must fail, got {other:?}"),
        }
        assert!(mine.lost() && !mine.still_mine());
        // b renews at its own revision.
        b.renew(&theirs).await.unwrap();
        assert!(theirs.still_mine());
    });
}

#[test]
fn a_kept_lease_outlives_its_period_and_a_finished_key_is_never_claimed_again() {
    let Some(nats) = Nats::one("a_kept_lease_outlives_its_period") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 2), "Vault").await.unwrap();
        let b = Cluster::connect(&config(&nats, "b", 2), "Vault").await.unwrap();
        let key = slot(200);
        let mine = a.claim(&key, "the slot".into()).await.unwrap().unwrap();
        a.keep(&mine);
        // For more than two lease periods, b tries and fails; a holds it all along.
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            assert!(
                b.claim(&key, "s".into()).await.unwrap().is_none(),
                "{}",
                nats.logs()
            );
            assert!(mine.still_mine());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        a.finish(&mine).await.unwrap();
        assert!(a.is_done(&key).await.unwrap());
        assert!(
            matches!(
                b.claim_unless_done(&key, "s".into()).await.unwrap(),
                Claimed::Done
            ),
            "done: never again"
        );
        // A fresh key is claimed as before.
        assert!(matches!(
            b.claim_unless_done(&slot(201), "s".into()).await.unwrap(),
            Claimed::Won(_)
        ));
    });
}

#[test]
fn heartbeats_are_the_quorum_check_and_see_a_name_used_twice() {
    let Some(mut nats) = Nats::three("heartbeats_are_the_quorum_check") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "laptop", 30), "Vault")
            .await
            .unwrap();
        let b = Cluster::connect(&config(&nats, "desktop", 30), "Vault")
            .await
            .unwrap();
        assert_eq!(a.heartbeat().await.unwrap(), None);
        assert_eq!(b.heartbeat().await.unwrap(), None);
        let seen: Vec<String> = a.devices().await.unwrap().into_iter().map(|d| d.device).collect();
        assert_eq!(seen, ["desktop", "laptop"]);
        // Another process under the name "laptop": each sees the other.
        let twin = Cluster::connect(&config(&nats, "laptop", 30), "Vault")
            .await
            .unwrap();
        assert_eq!(
            twin.heartbeat().await.unwrap(),
            None,
            "its first heartbeat overwrites"
        );
        let other = a.heartbeat().await.unwrap().expect("a sees the twin's write");
        assert_eq!(other.device, "laptop");
        // Two of three servers down: no write succeeds, so no quorum.
        nats.kill(1);
        nats.kill(2);
        match a.heartbeat().await {
            Err(ClusterError::Unavailable { .. }) => {}
            other => panic!("no quorum with one server of three, got {other:?}"),
        }
        assert!(matches!(
            a.claim(&slot(300), "s".into()).await,
            Err(ClusterError::Unavailable { .. })
        ));
    });
}

/// The bytes the servers keep in the object store of large values (its chunks and their infos).
async fn large_bytes(js: &async_nats::jetstream::Context) -> u64 {
    let mut stream = js
        .get_stream(format!("OBJ_{}", tabd::capabilities::cluster::shared::LARGE))
        .await
        .expect("the object store's stream");
    stream.info().await.expect("its info").state.bytes
}

#[test]
fn a_value_larger_than_one_message_is_kept_as_an_object_checked_and_goes_with_its_entry() {
    let Some(nats) = Nats::three("a_value_larger_than_one_message") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        let b = Cluster::connect(&config(&nats, "b", 30), "Vault").await.unwrap();
        let key = ClaimKey::shared("Vault", "run", "r1");
        // More than the servers take in one message (1 MB by default).
        let big: Vec<u8> = (0..1_200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        a.shared_put(&key, big.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", nats.logs()));
        let (read, _) = b.shared_get(&key).await.unwrap().expect("the value");
        assert!(read == big[..], "read back whole on another device");

        // In the bucket, a pointer; the bytes in the object store.
        let client = crate::support::nats::client(&nats, 0).await;
        let js = async_nats::jetstream::new(client);
        let kv = js.get_key_value("tabd_shared").await.unwrap();
        let raw = kv.get(key.as_str()).await.unwrap().expect("an entry");
        assert!(
            raw.len() < 1000 && raw.starts_with(b"{\"object\":"),
            "{}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        );
        assert!(large_bytes(&js).await > 1_200_000);

        // A pointer that names the object with another hash is refused, never read as the value.
        let mut forged: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        forged["sha256"] = "00".repeat(32).into();
        kv.put(key.as_str(), serde_json::to_vec(&forged).unwrap().into())
            .await
            .unwrap();
        match b.shared_get(&key).await {
            Err(ClusterError::Garbled(why)) => assert!(why.contains("not the one it names"), "{why}"),
            other => panic!("a forged pointer must be refused, got {other:?}"),
        }

        // Written over with a small value: the object goes.
        a.shared_put(&key, b"small".to_vec()).await.unwrap();
        assert_eq!(
            b.shared_get(&key).await.unwrap().expect("the value").0,
            &b"small"[..]
        );
        assert!(
            large_bytes(&js).await < 10_000,
            "the object written over is deleted"
        );

        // Deleted: the object goes with its entry.
        let revision = a.shared_put(&key, big.clone()).await.unwrap();
        assert!(large_bytes(&js).await > 1_200_000);
        a.shared_delete(&key, revision).await.unwrap();
        assert!(b.shared_get(&key).await.unwrap().is_none());
        assert!(
            large_bytes(&js).await < 10_000,
            "the object deleted with its entry"
        );

        // Two devices create one key: the loser's object is deleted, the winner's kept.
        let key = ClaimKey::shared("Vault", "run", "r2");
        let mut other = big.clone();
        other[0] = b'Z';
        assert!(a.shared_create(&key, big.clone()).await.unwrap().is_some());
        assert!(b.shared_create(&key, other).await.unwrap().is_none());
        let (read, _) = b.shared_get(&key).await.unwrap().expect("the first write");
        assert!(read == big[..]);
        let kept = large_bytes(&js).await;
        assert!(
            (1_200_000..2_400_000).contains(&kept),
            "one object kept, the loser's deleted: {kept} bytes"
        );
    });
}

/// `claim_unless_done` until the servers answer it (after a restart they may not at first).
async fn claim_answered(c: &Cluster, key: &ClaimKey, nats: &Nats) -> Claimed {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match c.claim_unless_done(key, "the slot".into()).await {
            Ok(claimed) => return claimed,
            Err(ClusterError::Unavailable { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{e}\n{}", nats.logs()),
        }
    }
}

#[test]
fn a_run_finished_while_the_servers_were_out_is_never_taken_over_from_the_device_that_ran_it() {
    let Some(mut nats) = Nats::three("a_run_finished_while_the_servers_were_out") else {
        return;
    };
    let rt = runtime();
    let lease_s = 2;
    let key = slot(400);
    let (laptop, desktop, ran) = rt.block_on(async {
        let laptop = Cluster::connect(&config(&nats, "laptop", lease_s), "Vault")
            .await
            .unwrap();
        let desktop = Cluster::connect(&config(&nats, "desktop", lease_s), "Vault")
            .await
            .unwrap();
        laptop.heartbeat().await.unwrap();
        desktop.heartbeat().await.unwrap();
        let Claimed::Won(ran) = laptop.claim_unless_done(&key, "the slot".into()).await.unwrap() else {
            panic!("a free slot is won");
        };
        (laptop, desktop, ran)
    });
    // The laptop's run ends; the servers are out before it can mark the slot done.
    nats.kill(1);
    nats.kill(2);
    assert!(
        rt.block_on(laptop.finish(&ran)).is_err(),
        "no quorum: the done mark is owed"
    );
    // The outage outlasts the lease (the claim lapses: what is tested), then the servers return.
    std::thread::sleep(Duration::from_secs(lease_s + 1));
    nats.restart(1);
    nats.restart(2);
    rt.block_on(async {
        // The desktop has the servers again, and the lapsed claim is free; the laptop has not
        // written a heartbeat since it claimed, so the desktop does not know whether it ran.
        while desktop.heartbeat().await.is_err() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // (Done too is right: the server left may commit the laptop's marker once a second one
        // is back, as Raft commits a leader's entries when its quorum returns.)
        let claimed = claim_answered(&desktop, &key, &nats).await;
        assert!(
            matches!(claimed, Claimed::Held | Claimed::Done),
            "not taken over while the laptop may have run it: {claimed:?}\n{}",
            nats.logs()
        );
        // The laptop's next heartbeat names what it owes, then marks it done. (For a few
        // seconds after their quorum returns the servers may answer a request with "JetStream
        // system temporarily unavailable": the mark stays owed, named by every heartbeat, until
        // one after which it is written.)
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let beat = laptop.heartbeat().await;
            if beat.is_ok() && matches!(laptop.is_done(&key).await, Ok(true)) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "marked done after a heartbeat: {beat:?}\n{}",
                nats.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The desktop's own waiting claim lapses first (never deleted); then the key is done.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match claim_answered(&desktop, &key, &nats).await {
                Claimed::Done => break,
                Claimed::Held if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => panic!("done once, never run again: {other:?}\n{}", nats.logs()),
            }
        }
    });
}

#[test]
fn a_holder_that_goes_silent_is_taken_over_and_one_that_let_go_at_once() {
    let Some(nats) = Nats::one("a_holder_that_goes_silent_is_taken_over") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let lease = Duration::from_secs(2);
        let laptop = Cluster::connect(&config(&nats, "laptop", 2), "Vault")
            .await
            .unwrap();
        let desktop = Cluster::connect(&config(&nats, "desktop", 2), "Vault")
            .await
            .unwrap();
        laptop.heartbeat().await.unwrap();
        desktop.heartbeat().await.unwrap();
        // A run that failed lets its claim go with its tenure: another device runs it at once.
        let failed = slot(500);
        let Claimed::Won(l) = laptop.claim_unless_done(&failed, "s".into()).await.unwrap() else {
            panic!("won");
        };
        laptop.release(&l).await;
        assert!(matches!(
            desktop.claim_unless_done(&failed, "s".into()).await.unwrap(),
            Claimed::Won(_)
        ));
        // A device that dies holding a claim: it is the desktop's only after the laptop's
        // heartbeat has been silent for a lease and a half (the desktop writing its own).
        let died = slot(501);
        let Claimed::Won(held) = laptop.claim_unless_done(&died, "s".into()).await.unwrap() else {
            panic!("won");
        };
        laptop.heartbeat().await.unwrap();
        drop(held);
        drop(laptop);
        let start = Instant::now();
        let mut answers = Vec::new();
        let won = loop {
            desktop.heartbeat().await.unwrap();
            match desktop.claim_unless_done(&died, "s".into()).await.unwrap() {
                Claimed::Won(_) => break start.elapsed(),
                Claimed::Held => answers.push(start.elapsed()),
                Claimed::Done => panic!("never done"),
            }
            assert!(start.elapsed() < Duration::from_secs(30), "never taken over");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            !answers.is_empty(),
            "held while the claim and the laptop's silence last"
        );
        assert!(
            won >= tabd::capabilities::cluster::tenure::gone_after(lease) - Duration::from_millis(500),
            "not before the laptop was silent a lease and a half: {won:?}"
        );
    });
}

/// What every slot's and note's claim relies on: of two devices creating one empty key at the
/// same moment, exactly one wins. (Not so through a delete marker or at a revision on 2.9.10,
/// where both writes of such a race were taken 9–41 times in 60: so tabd never deletes a slot's
/// or note's claim — it is marked done or left to lapse — and only a claim's holder updates it.)
#[test]
fn of_two_devices_creating_one_empty_key_at_once_exactly_one_wins() {
    let Some(nats) = Nats::three("of_two_devices_creating_one_empty_key_at_once") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        // The buckets, made as a device makes them.
        let a = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        a.heartbeat().await.unwrap();
        let mut stores = Vec::new();
        for i in 0..2 {
            let client = crate::support::nats::client(&nats, i).await;
            let js = async_nats::jetstream::new(client);
            stores.push(js.get_key_value("tabd_claims").await.unwrap());
        }
        for n in 0..60 {
            let key = format!("race.{n}");
            let (x, y) = tokio::join!(
                stores[0].create(&key, "a".into()),
                stores[1].create(&key, "b".into())
            );
            assert!(
                x.is_ok() != y.is_ok(),
                "race {n}: exactly one create wins ({x:?}, {y:?})\n{}",
                nats.logs()
            );
        }
    });
}

fn at(n: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(1_800_000_000 + n, 0).unwrap()
}

/// `catch_up: once`: the newest missed slot, standing for all of them.
fn once(missed: Vec<chrono::DateTime<chrono::Utc>>) -> Vec<(chrono::DateTime<chrono::Utc>, usize)> {
    missed.last().map(|s| (*s, missed.len())).into_iter().collect()
}

/// `catch_up: all`: each missed slot, the newest ten.
fn all(missed: Vec<chrono::DateTime<chrono::Utc>>) -> Vec<(chrono::DateTime<chrono::Utc>, usize)> {
    let from = missed.len().saturating_sub(10);
    missed[from..].iter().map(|s| (*s, 1)).collect()
}

/// The slots and counts a catch-up runs on this device (empty when another's or none).
fn runs_of(c: &CatchUpShare) -> Vec<(i64, usize)> {
    match c {
        CatchUpShare::Run(runs) => runs
            .iter()
            .map(|r| (r.slot.timestamp() - 1_800_000_000, r.missed))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn devices_that_skipped_different_slots_in_an_outage_catch_up_once() {
    let Some(nats) = Nats::three("devices_that_skipped_different_slots_catch_up_once") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let (a, b, c) = (
            Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap(),
            Cluster::connect(&config(&nats, "b", 30), "Vault").await.unwrap(),
            Cluster::connect(&config(&nats, "c", 30), "Vault").await.unwrap(),
        );
        for d in [&a, &b, &c] {
            d.heartbeat().await.unwrap();
        }
        let key = |n| ClaimKey::slot("Vault", "risk", at(n));
        // At the outage's end: a ran slot 12 as a plain slot; b's claim of slot 10 timed out but
        // the servers took it (a claim without its tenure: b does not know it holds it).
        let Claimed::Won(ran) = a.claim_unless_done(&key(12), "s".into()).await.unwrap() else {
            panic!("a free slot is won");
        };
        a.finish(&ran).await.unwrap();
        drop(b.claim(&key(10), "s".into()).await.unwrap().expect("won"));
        // Each skipped what it could not claim: a 2..=8, b 2..=10, c 2..=12.
        let skipped = |to: i64| (1..=to / 2).map(|n| at(n * 2)).collect::<Vec<_>>();
        let (x, y, z) = tokio::join!(
            a.catch_up("risk", skipped(8), once),
            b.catch_up("risk", skipped(10), once),
            c.catch_up("risk", skipped(12), once),
        );
        let decided = [x.unwrap(), y.unwrap(), z.unwrap()];
        let runs: Vec<_> = decided.iter().flat_map(runs_of).collect();
        let catch_ups = runs.iter().filter(|(_, n)| *n > 1).count();
        assert_eq!(catch_ups, 1, "one catch-up across the three: {decided:?}");
        // The five missed slots (2..=10) stood for once; 10 (b's forgotten claim) runs, on b.
        assert_eq!(runs.iter().map(|(_, n)| n).sum::<usize>(), 5, "{decided:?}");
        assert!(runs_of(&decided[1]).iter().any(|(s, _)| *s == 10), "{decided:?}");
        let mut slots: Vec<_> = runs.iter().map(|(s, _)| *s).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), runs.len(), "no slot twice: {decided:?}");
        assert!(
            matches!(&decided[2], CatchUpShare::Elsewhere(w) if w.iter().any(|(s, _)| *s == at(10))),
            "c watches the run of 10: {:?}",
            decided[2]
        );
        // A device that looks again with a slot a catch-up stood for (6) and b's claim (10):
        // nothing runs, and slot 6 is marked done.
        let again = c.catch_up("risk", vec![at(6), at(10)], once).await.unwrap();
        assert!(runs_of(&again).is_empty(), "{again:?}");
        assert!(c.is_done(&key(6)).await.unwrap());
        assert!(c.covered_by_catch_up("risk", at(4)).await.unwrap());
        assert!(
            !c.covered_by_catch_up("risk", at(10)).await.unwrap(),
            "a run of a record is not covered"
        );
    });
}

#[test]
fn a_slot_missed_after_what_a_catch_up_stood_for_runs_alone_and_one_it_stood_for_never() {
    let Some(nats) = Nats::one("a_slot_missed_after_what_a_catch_up_stood_for") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        let b = Cluster::connect(&config(&nats, "b", 30), "Vault").await.unwrap();
        let first = a.catch_up("risk", vec![at(2), at(4), at(6)], once).await.unwrap();
        assert_eq!(runs_of(&first), [(6, 3)]);
        // b skipped one slot more, that no device claimed: it runs it, standing for itself.
        let second = b
            .catch_up("risk", vec![at(2), at(4), at(6), at(8)], once)
            .await
            .unwrap();
        assert_eq!(runs_of(&second), [(8, 1)], "not a second catch-up: {second:?}");
        // A device that skipped only older slots: a's catch-up stood for them; it wins slot 4's
        // claim, marks it done and runs nothing.
        let c = Cluster::connect(&config(&nats, "c", 30), "Vault").await.unwrap();
        let third = c.catch_up("risk", vec![at(2), at(4)], once).await.unwrap();
        assert!(runs_of(&third).is_empty(), "{third:?}");
        assert!(c.is_done(&ClaimKey::slot("Vault", "risk", at(4))).await.unwrap());
        // catch_up: all, two devices at once: each missed slot runs once, on one of them.
        let slots: Vec<_> = (20..30).map(at).collect();
        let (x, y) = tokio::join!(
            a.catch_up("tock", slots.clone(), all),
            b.catch_up("tock", slots, all)
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let mut ran: Vec<_> = runs_of(&x)
            .into_iter()
            .chain(runs_of(&y))
            .map(|(s, _)| s)
            .collect();
        ran.sort();
        assert_eq!(ran, (20..30).collect::<Vec<_>>(), "{x:?} {y:?}");
        // catch_up: all caps the outage at ten runs, not each device: a runs the newest ten of
        // 25 and holds them; b, looking later, finds the older fifteen left by a's record.
        let slots: Vec<_> = (101..=125).map(at).collect();
        let by_a = a.catch_up("tack", slots.clone(), all).await.unwrap();
        assert_eq!(runs_of(&by_a).len(), 10, "{by_a:?}");
        let by_b = b.catch_up("tack", slots, all).await.unwrap();
        assert!(runs_of(&by_b).is_empty(), "{by_b:?}");
        assert!(b
            .is_done(&ClaimKey::slot("Vault", "tack", at(115)))
            .await
            .unwrap());
    });
}

#[test]
fn a_user_and_password_in_a_server_url_log_in_and_a_wrong_one_does_not() {
    let Some(nats) = Nats::one("a_user_and_password_in_a_server_url_log_in") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        // The test's servers take only their own user and password, written in the URLs.
        let good = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        good.heartbeat()
            .await
            .unwrap_or_else(|e| panic!("logged in with the URL's user and password: {e}\n{}", nats.logs()));
        let mut wrong = config(&nats, "b", 30);
        wrong.nats = wrong.nats.iter().map(|u| u.replace("tabd:", "tabd:x")).collect();
        let refused = Cluster::connect(&wrong, "Vault").await.unwrap();
        assert!(
            matches!(refused.heartbeat().await, Err(ClusterError::Unavailable { .. })),
            "a wrong password is not a quorum"
        );
        let mut login = refused.login_refused();
        tokio::time::timeout(Duration::from_secs(20), login.wait_for(|r| r.is_some()))
            .await
            .expect("the refusal seen")
            .expect("the cluster is alive");
        match refused.heartbeat().await {
            Err(ClusterError::Unavailable { why }) => assert_eq!(
                why, "the servers refuse this device's login (authorization violation)",
                "why no quorum answers"
            ),
            other => panic!("a wrong password is not a quorum: {other:?}"),
        }
        assert!(good.login_refused().borrow().is_none(), "a good login is let in");
    });
}

/// Issue 49, item 4: a done marker purged through the stream API leaves no marker. The device
/// that wrote it remembers it (its key's marks) and refuses to run the key again; a device that
/// never saw it has nothing to go by (docs/devices.md says so) — unless a delete left a marker,
/// which every device reads as "deleted", never as "never written".
#[test]
fn a_done_marker_purged_is_still_done_where_it_was_seen_and_a_deleted_one_everywhere() {
    let Some(nats) = Nats::one("a_done_marker_purged_is_still_done") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let memory = std::sync::Arc::new(tabd::base::signing::Key::load_or_create(home.path()).unwrap());
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 2), "Vault").await.unwrap();
        a.remember_with(memory.clone());
        let b = Cluster::connect(&config(&nats, "b", 2), "Vault").await.unwrap();
        b.remember_with(memory);
        let (purged, deleted) = (slot(300), slot(301));
        for key in [&purged, &deleted] {
            let Claimed::Won(lease) = a.claim_unless_done(key, "s".into()).await.unwrap() else {
                panic!("{key} won");
            };
            a.finish(&lease).await.unwrap();
        }
        let js = async_nats::jetstream::new(crate::support::nats::client(&nats, 0).await);
        js.get_stream("KV_tabd_done")
            .await
            .unwrap()
            .purge()
            .filter(format!("$KV.tabd_done.{purged}"))
            .await
            .unwrap();
        let kv = js.get_key_value("tabd_done").await.unwrap();
        kv.delete(deleted.as_str()).await.unwrap();
        assert!(
            kv.entry(purged.as_str()).await.unwrap().is_none(),
            "no marker left"
        );
        assert!(
            a.is_done(&purged).await.unwrap(),
            "remembered where it was written"
        );
        assert!(!b.is_done(&purged).await.unwrap(), "another device saw nothing");
        for c in [&a, &b] {
            assert!(
                c.is_done(&deleted).await.unwrap(),
                "a marker: deleted, not absent"
            );
            // Done, or held by the other's claim that found it done: never won.
            assert!(!matches!(
                c.claim_unless_done(&deleted, "s".into()).await.unwrap(),
                Claimed::Won(_)
            ));
        }
    });
}

/// Issue 49, item 4: with `[cluster] key`, every record that decides an action is sealed and
/// bound to its key. A done marker, a claim or a heartbeat written by hand (plain JSON, or one
/// moved from another key) is refused: the marker never counts as a run not done, a forged
/// heartbeat is not a device.
#[test]
fn with_the_key_records_written_by_hand_are_refused() {
    let Some(nats) = Nats::one("with_the_key_records_written_by_hand_are_refused") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let keyed = |device: &str| ClusterConfig {
            key: Some("a-cluster-key-of-at-least-32-characters".into()),
            ..config(&nats, device, 2)
        };
        let a = Cluster::connect(&keyed("a"), "Vault").await.unwrap();
        a.heartbeat().await.unwrap();
        let js = async_nats::jetstream::new(crate::support::nats::client(&nats, 0).await);
        let done = js.get_key_value("tabd_done").await.unwrap();
        // A done marker copied from another key, and one in plain JSON.
        let Claimed::Won(lease) = a.claim_unless_done(&slot(400), "s".into()).await.unwrap() else {
            panic!("won");
        };
        a.finish(&lease).await.unwrap();
        let real = done.get(slot(400).as_str()).await.unwrap().unwrap();
        done.put(slot(401).as_str(), real).await.unwrap();
        let plain = r#"{"device":"a","instance":"1","at":"2026-01-01T00:00:00Z"}"#;
        done.put(slot(402).as_str(), plain.into()).await.unwrap();
        for key in [slot(401), slot(402)] {
            assert!(
                matches!(
                    a.done_marker(&key).await.unwrap(),
                    tabd::capabilities::cluster::Read::Refused(_)
                ),
                "{key}"
            );
        }
        // A heartbeat in plain JSON under a device's own key: not a device.
        let devices = js.get_key_value("tabd_devices").await.unwrap();
        let forged = r#"{"device":"evil","instance":"2","at":"2026-01-01T00:00:00Z"}"#;
        devices
            .put(
                tabd::capabilities::cluster::keys::device("Vault", "evil"),
                forged.into(),
            )
            .await
            .unwrap();
        let seen: Vec<String> = a.devices().await.unwrap().into_iter().map(|d| d.device).collect();
        assert_eq!(seen, ["a"]);
    });
}

/// Issue 49, item 4: a claim deleted under its holder is taken back at the holder's next
/// renewal — unless its done marker is there: then another device took it over and finished it
/// (a release deletes the claim), and the holder, back from a pause, has lost it.
#[test]
fn a_claim_deleted_by_hand_is_taken_back_but_one_released_after_its_work_was_done_is_lost() {
    let Some(nats) = Nats::one("a_claim_deleted_by_hand_is_taken_back") else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let a = Cluster::connect(&config(&nats, "a", 30), "Vault").await.unwrap();
        let js = async_nats::jetstream::new(crate::support::nats::client(&nats, 0).await);
        let (by_hand, finished) = (slot(500), slot(501));
        let mut leases = Vec::new();
        for key in [&by_hand, &finished] {
            let Claimed::Won(lease) = a.claim_unless_done(key, "s".into()).await.unwrap() else {
                panic!("{key} won");
            };
            leases.push(lease);
        }
        let claims = js.get_key_value("tabd_claims").await.unwrap();
        let done = js.get_key_value("tabd_done").await.unwrap();
        for key in [&by_hand, &finished] {
            claims.delete(key.as_str()).await.unwrap();
        }
        let marker = r#"{"device":"b","instance":"2","at":"2026-01-01T00:00:00Z"}"#;
        done.put(finished.as_str(), marker.into()).await.unwrap();
        a.renew(&leases[0]).await.expect("taken back");
        assert!(leases[0].still_mine());
        let holder = claims
            .get(by_hand.as_str())
            .await
            .unwrap()
            .expect("claimed again");
        assert!(String::from_utf8_lossy(&holder).contains("\"device\":\"a\""));
        assert!(matches!(
            a.renew(&leases[1]).await,
            Err(ClusterError::Lost { .. })
        ));
        assert!(leases[1].lost());
    });
}
