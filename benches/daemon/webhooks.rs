//! `TABD_BENCH=webhooks` (issue 51, item 3): a webhook's latency through a real `tabd run` —
//! a signed `POST /hooks/bench` sent on loopback to the model's request (the note written, seen
//! in the inbox, the run started) — beside a note renamed into the same inbox, alternating on
//! one daemon (`settle_ms = 0`), `TABD_BENCH_DELIVERIES` each (default 200). Also how long the
//! sender waits for its answer (202: the note is in the inbox). Not in the default set.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fake_model::{canned, FakeModel, Reply};
use super::{percentile, stop, wait_for, Bench, ROLE};

const SECRET: &str = "bench-secret-0123456789abcdef";

pub fn webhooks(out: &mut Value) {
    let n: usize = std::env::var("TABD_BENCH_DELIVERIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let b = Bench::new();
    b.bare_vault();
    b.write("roles/bench.md", ROLE);
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    // A free port, said to the daemon: the bench's daemon logs nothing it could read it from.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    b.set_config(
        &fake,
        &format!(
            "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\n[inbox]\nsettle_ms = 0\n\
             [http]\nlisten = \"127.0.0.1:{port}\"\nper_minute = 600\n\
             [http.hooks.bench]\nsecret = \"${{BENCH_HOOK_SECRET}}\"\n"
        ),
    );
    let (child, _) = b.start_daemon_with(&[("BENCH_HOOK_SECRET", SECRET)]);
    let addr = format!("127.0.0.1:{port}");
    let staging = b.dir.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let (mut hook, mut answered, mut renamed) = (Vec::new(), Vec::new(), Vec::new());
    let mut asked = 0;
    for i in 0..n {
        // 200 deliveries take a few seconds: within [http] per_minute = 600.
        let body = json!({"build": i, "status": "failed"}).to_string();
        let t0 = Instant::now();
        let status = post(&addr, &body, &format!("bench-{i}"));
        answered.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(status, 202, "delivery {i}");
        asked += 1;
        let reqs = fake.wait_for_requests(asked, Duration::from_secs(30));
        hook.push(reqs[asked - 1].at.duration_since(t0).as_secs_f64() * 1000.0);
        assert!(wait_for(Duration::from_secs(10), || b
            .count("agent/inbox/bench/processed")
            == asked));

        let name = format!("n{i:04}.md");
        let src = staging.join(&name);
        std::fs::write(&src, format!("note {i}")).unwrap();
        let t0 = Instant::now();
        std::fs::rename(&src, b.vault().join("agent/inbox/bench").join(&name)).unwrap();
        asked += 1;
        let reqs = fake.wait_for_requests(asked, Duration::from_secs(30));
        renamed.push(reqs[asked - 1].at.duration_since(t0).as_secs_f64() * 1000.0);
        assert!(wait_for(Duration::from_secs(10), || b
            .count("agent/inbox/bench/processed")
            == asked));
    }
    stop(child);
    println!(
        "\n== webhooks: {n} signed deliveries and {n} renamed notes, alternating (tabd run, settle_ms 0)"
    );
    let mut rows = json!({"samples": n});
    for (label, key, v) in [
        ("POST → 202 (note written)", "post_to_answer_ms", &mut answered),
        ("POST → request at the model", "post_to_request_ms", &mut hook),
        ("note renamed in → request", "rename_to_request_ms", &mut renamed),
    ] {
        v.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(v, 0.5), percentile(v, 0.99));
        println!("{label:<30} p50 {p50:>7.2} ms   p99 {p99:>7.2} ms");
        rows[key] = json!({"p50": p50, "p99": p99});
    }
    out["webhooks"] = rows;
}

/// Sends one signed delivery and reads the answer's status (the server closes the connection).
fn post(addr: &str, body: &str, id: &str) -> u16 {
    let sig = tabd::capabilities::http::signature::sign(SECRET.as_bytes(), body.as_bytes());
    let raw = format!(
        "POST /hooks/bench HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         X-Delivery-Id: {id}\r\nX-Hub-Signature-256: {sig}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    got.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
