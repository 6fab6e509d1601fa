//! `TABD_BENCH=load`: another role's note latency while a role with many expectations is loaded
//! (docs/spec.md §24, issue 36: one role's load never holds another's).
//!
//! A role `heavy` expects `TABD_BENCH_EXPECT` files (default 50, the cap) nobody writes, each by a
//! deadline every minute (the review's role had 15,000). Beside it, notes are renamed into role
//! `bench`'s inbox every `TABD_BENCH_LOAD_EVERY_MS` (default 250) for `TABD_BENCH_LOAD_SECS`
//! (default 150, so two or three minute deadlines pass), each at its time whatever happened to
//! the ones before (open loop: a note dropped while the daemon is held waits as long as it is
//! held). Measured for each note: dropped → moved to `processed/` (seen by inotify). Also: how
//! the daily note grew (and how much of it is the heavy role's lines; the rest is the bench
//! role's runs) and the daemon's CPU over the time.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{cpu_seconds, percentile, Bench, FakeModel, Reply, ROLE};

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Watches `dir` for notes moved in; sends (name, when) for each.
fn watch_processed(dir: &std::path::Path) -> mpsc::Receiver<(String, Instant)> {
    use inotify::{Inotify, WatchMask};
    let mut ino = Inotify::init().expect("inotify");
    ino.watches()
        .add(dir, WatchMask::MOVED_TO | WatchMask::CREATE)
        .expect("watch processed/");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let Ok(events) = ino.read_events_blocking(&mut buf) else {
                return;
            };
            let at = Instant::now();
            for e in events {
                if let Some(name) = e.name {
                    if tx.send((name.to_string_lossy().into_owned(), at)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// SIGTERM, then SIGKILL if it has not ended within `grace` (a daemon whose loop is held does
/// not get to the signal).
fn stop_within(mut child: std::process::Child, grace: Duration) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    // A daemon that already ended is what the caller waits for next.
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).ok();
    let end = Instant::now() + grace;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("load: the daemon did not stop within {grace:?} of SIGTERM; killed");
    let _ = child.kill();
    let _ = child.wait();
}

pub fn load(out: &mut Value) {
    let expect: usize = env_or("TABD_BENCH_EXPECT", 50);
    let secs: u64 = env_or("TABD_BENCH_LOAD_SECS", 150);
    let every = Duration::from_millis(env_or("TABD_BENCH_LOAD_EVERY_MS", 250));
    let b = Bench::new();
    b.bare_vault();
    b.write("roles/bench.md", ROLE);
    let expects: String = (0..expect)
        .map(|i| format!("  - {{path: \"reports/r{i}.md\", by: \"* * * * *\"}}\n"))
        .collect();
    b.write(
        "roles/heavy.md",
        &format!("---\nexpect:\n{expects}---\n# Heavy\n## Mission\nReport.\n## Schedule\non-demand\n"),
    );
    let processed = b.vault().join("agent/inbox/bench/processed");
    std::fs::create_dir_all(&processed).unwrap();
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(super::canned::anthropic_text("ok")));
    b.set_config(
        &fake,
        "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\n[inbox]\nsettle_ms = 0\n",
    );
    let seen = watch_processed(&processed);
    let (child, _) = b.start_daemon();
    let pid = child.id();
    let staging = b.dir.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let daily_bytes = || -> u64 {
        std::fs::read_dir(b.vault().join("daily"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    // What the heavy role's lines take of the daily note (the rest is the bench role's runs).
    let heavy_bytes = || -> u64 {
        std::fs::read_dir(b.vault().join("daily"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                    .flat_map(|t| {
                        t.lines()
                            .filter(|l| l.contains(" · Heavy · "))
                            .map(|l| l.len() as u64 + 1)
                            .collect::<Vec<u64>>()
                    })
                    .sum()
            })
            .unwrap_or(0)
    };
    let (daily0, cpu0, start) = (daily_bytes(), cpu_seconds(pid), Instant::now());
    let mut dropped: HashMap<String, Instant> = HashMap::new();
    let mut done: HashMap<String, Instant> = HashMap::new();
    let mut i = 0usize;
    while start.elapsed() < Duration::from_secs(secs) {
        let name = format!("n{i:05}.md");
        let src = staging.join(&name);
        std::fs::write(&src, format!("note {i}")).unwrap();
        let t0 = Instant::now();
        std::fs::rename(&src, b.vault().join("agent/inbox/bench").join(&name)).unwrap();
        dropped.insert(name, t0);
        i += 1;
        let next = start + every * i as u32;
        while let Ok((name, at)) = seen.recv_timeout(next.saturating_duration_since(Instant::now())) {
            done.entry(name).or_insert(at);
        }
    }
    let end = Instant::now() + Duration::from_secs(120);
    while done.len() < dropped.len() {
        match seen.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok((name, at)) => {
                done.entry(name).or_insert(at);
            }
            Err(_) => break,
        }
    }
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    let (daily1, cpu1) = (daily_bytes(), cpu_seconds(pid));
    stop_within(child, Duration::from_secs(30));
    let heavy = heavy_bytes();
    // A note never handled counts as waiting for ever: the percentiles say so (`inf`).
    let mut ms: Vec<f64> = dropped
        .iter()
        .map(|(name, t0)| {
            done.get(name)
                .map_or(f64::INFINITY, |at| at.duration_since(*t0).as_secs_f64() * 1000.0)
        })
        .collect();
    let handled = ms.iter().filter(|m| m.is_finite()).count();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (p50, p90, p99) = (percentile(&ms, 0.5), percentile(&ms, 0.9), percentile(&ms, 0.99));
    let max = ms.last().copied().unwrap_or(f64::NAN);
    let (daily, heavy) = ((daily1 - daily0) as f64 / minutes, heavy as f64 / minutes);
    let cpu = (cpu1 - cpu0) / minutes;
    // JSON has no infinity: a percentile that fell on a note never handled is `null`.
    let r = json!({
        "expectations": expect, "notes": dropped.len(), "handled": handled,
        "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": max,
        "daily_bytes_per_min": daily, "heavy_bytes_per_min": heavy, "cpu_s_per_min": cpu,
    });
    println!(
        "load: {expect} expectations, {handled} of {} notes handled: p50 {p50:.2} ms  p90 {p90:.2} ms  \
         p99 {p99:.2} ms  max {max:.1} ms; daily note +{daily:.0} bytes/min ({heavy:.0} of them the heavy \
         role's lines); daemon CPU {cpu:.2} s/min",
        dropped.len(),
    );
    out["load"] = r;
}
