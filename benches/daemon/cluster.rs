//! `TABD_BENCH=cluster` (issue 38): what `[cluster]` costs. Not in the default set: it needs
//! Debian's `nats-server` (skipped, and said, without one).
//!
//! - the claim a fire adds, on loopback, against one server and against three in a cluster:
//!   `claim_unless_done` (create, then read the done marker) and `finish` (done marker, delete),
//!   each p50/p99 over `TABD_BENCH_CLAIMS` keys (default 300);
//! - a note's latency to the model's request through a real `tabd run`, with and without
//!   `[cluster]` (three servers), over 30 notes each.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fake_model::{canned, FakeModel, Reply};
use super::nats::Nats;
use super::{percentile, stop, wait_for, Bench, ROLE};

pub fn cluster(out: &mut Value) {
    let Some(three) = Nats::three("TABD_BENCH=cluster") else {
        return;
    };
    let one = Nats::one("TABD_BENCH=cluster").expect("a nats-server (three started)");
    let claims: usize = std::env::var("TABD_BENCH_CLAIMS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    println!("\n== cluster: the claim a fire adds ({claims} keys; loopback)");
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>9}",
        "", "claim p50", "claim p99", "done p50", "done p99"
    );
    let mut rows = json!({});
    for (label, nats) in [("1 server", &one), ("3 servers (R3)", &three)] {
        let (mut claim, mut done) = claim_cost(nats, claims);
        claim.sort_by(f64::total_cmp);
        done.sort_by(f64::total_cmp);
        let r = |v: &[f64], p| (percentile(v, p) * 1000.0).round() / 1000.0;
        println!(
            "{label:<28} {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms",
            r(&claim, 0.5),
            r(&claim, 0.99),
            r(&done, 0.5),
            r(&done, 0.99)
        );
        rows[label] = json!({"claim_ms": {"p50": r(&claim, 0.5), "p99": r(&claim, 0.99)},
                             "done_ms": {"p50": r(&done, 0.5), "p99": r(&done, 0.99)}});
    }
    println!("\n== cluster: a note to the model's request (30 notes, tabd run, settle_ms 0)");
    let without = note_latency(None);
    let with = note_latency(Some(&three));
    for (label, v) in [
        ("without [cluster]", &without),
        ("with [cluster], 3 servers", &with),
    ] {
        println!(
            "{label:<28} p50 {:>7.2} ms   p99 {:>7.2} ms",
            percentile(v, 0.5),
            percentile(v, 0.99)
        );
    }
    rows["note_to_request_ms"] = json!({
        "without": {"p50": percentile(&without, 0.5), "p99": percentile(&without, 0.99)},
        "with_3_servers": {"p50": percentile(&with, 0.5), "p99": percentile(&with, 0.99)},
    });
    out["cluster"] = rows;
}

/// Milliseconds of each claim (create + done read) and each finish (done marker + delete).
fn claim_cost(nats: &Nats, n: usize) -> (Vec<f64>, Vec<f64>) {
    use tabd::capabilities::cluster::{ClaimKey, Claimed, Cluster};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = tabd::setup::config::cluster::ClusterConfig {
            nats: nats.urls(),
            creds: None,
            device: "bench".into(),
            lease: Duration::from_secs(30),
            when_alone: tabd::setup::config::cluster::WhenAlone::Skip,
            key: None,
        };
        let c = Cluster::connect(&config, "Bench").await.unwrap();
        let base = chrono::Utc::now().timestamp() * 1000;
        // The first claim makes the buckets: not counted.
        let warm = ClaimKey::slot(
            "Bench",
            "warm",
            chrono::DateTime::from_timestamp(base, 0).unwrap(),
        );
        let _ = c.claim_unless_done(&warm, "warm".into()).await.unwrap();
        let (mut claim, mut done) = (Vec::new(), Vec::new());
        for i in 0..n {
            let key = ClaimKey::slot(
                "Bench",
                "bench",
                chrono::DateTime::from_timestamp(base + i as i64, 0).unwrap(),
            );
            let t0 = Instant::now();
            let Claimed::Won(lease) = c.claim_unless_done(&key, "a slot".into()).await.unwrap() else {
                panic!("a fresh key is free");
            };
            claim.push(t0.elapsed().as_secs_f64() * 1000.0);
            let t1 = Instant::now();
            c.finish(&lease).await.unwrap();
            done.push(t1.elapsed().as_secs_f64() * 1000.0);
        }
        (claim, done)
    })
}

/// Milliseconds from a note's rename into the inbox to the model's request, 30 notes in turn.
fn note_latency(nats: Option<&Nats>) -> Vec<f64> {
    let b = Bench::new();
    b.bare_vault();
    b.write("roles/bench.md", ROLE);
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    let cluster = nats.map(|n| n.config("bench", 30, "")).unwrap_or_default();
    b.set_config(
        &fake,
        &format!(
            "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\n[inbox]\nsettle_ms = 0\n{cluster}"
        ),
    );
    let (child, _) = b.start_daemon();
    let staging = b.dir.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let mut ms = Vec::new();
    for n in 0..30 {
        let name = format!("n{n:04}.md");
        let src = staging.join(&name);
        std::fs::write(&src, format!("note {n}")).unwrap();
        let t0 = Instant::now();
        std::fs::rename(&src, b.vault().join("agent/inbox/bench").join(&name)).unwrap();
        let reqs = fake.wait_for_requests(n + 1, Duration::from_secs(30));
        ms.push(reqs[n].at.duration_since(t0).as_secs_f64() * 1000.0);
        assert!(wait_for(Duration::from_secs(10), || b
            .count("agent/inbox/bench/processed")
            == n + 1));
    }
    stop(child);
    ms.sort_by(f64::total_cmp);
    ms
}
