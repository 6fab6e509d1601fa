//! `cargo bench --bench daemon`: the real `tabd` binary (release) against the fake model
//! server answering instantly. Prints a table and one JSON object.
//!
//! Pick parts with `TABD_BENCH=latency,burst,idle,startup,run,prompt,rss,history,delegation,sandbox,quiet,resume,cli_home` (default: all), and
//! `journal10k` (10,000 runs, ~2 minutes; not in the default set), `load` (another role's notes
//! beside a role at the expectation cap, ~2.5 minutes; not in the default set: benches/daemon/load.rs),
//! `cluster` (what `[cluster]` costs: a claim on loopback, a note's latency with and without it;
//! needs a `nats-server`, not in the default set: benches/daemon/cluster.rs), `telemetry` (a run's
//! CPU with and without `[telemetry]`, not in the default set: benches/daemon/telemetry.rs),
//! `webhooks` (a signed `POST /hooks/<role>` to the model's request, beside a note renamed in;
//! not in the default set: benches/daemon/webhooks.rs).
//! Timings are medians over repeated runs; nothing here is asserted.

// A benchmark is a test harness: it may unwrap, and its scenarios read top to bottom.
// `let _ =` guards tabd's own side writes (a dropped daily line, a dropped state write);
// a test harness drops what it does not assert (a kill of a child that may have exited).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::let_underscore_must_use
)]

#[path = "../tests/support/fake_model.rs"]
#[allow(dead_code)]
mod fake_model;

#[path = "daemon/cli_home.rs"]
mod cli_home;
#[path = "daemon/cluster.rs"]
mod cluster;
#[path = "daemon/load.rs"]
mod load;
#[path = "../tests/support/nats.rs"]
#[allow(dead_code)]
mod nats;

#[path = "../tests/support/otlp.rs"]
#[allow(dead_code)]
mod otlp;
#[path = "daemon/telemetry.rs"]
mod telemetry;
#[path = "daemon/vault_write.rs"]
mod vault_write;
#[path = "daemon/webhooks.rs"]
mod webhooks;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_model::{canned, FakeModel, Reply};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_tabd");

/// The binary measured: this build, or `TABD_BENCH_BIN=path` to measure another build of tabd
/// (an older commit, other profile settings) the same way.
fn bin() -> String {
    std::env::var("TABD_BENCH_BIN").unwrap_or_else(|_| BIN.to_string())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    percentile(v, 0.5)
}

struct Bench {
    dir: tempfile::TempDir,
}

impl Bench {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn vault(&self) -> PathBuf {
        self.dir.path().join("vault")
    }
    fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.vault().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    fn set_config(&self, fake: &FakeModel, extra: &str) {
        std::fs::write(
            self.config(),
            format!(
                "timezone = \"UTC\"\n[provider]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"bench\"\nmax_retries = 0\n{extra}",
                fake.anthropic_url()
            ),
        )
        .unwrap();
    }
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("ANTHROPIC_API_KEY", "bench")
            .env("TABD_LOG", "warn")
            .arg("--config")
            .arg(self.config())
            .arg("--vault")
            .arg(self.vault())
            .args(args);
        c
    }
    /// A bare vault: roles/ and the folders, no template content.
    fn bare_vault(&self) {
        for d in ["roles", "agent/inbox", "daily", ".tabd/runs"] {
            std::fs::create_dir_all(self.vault().join(d)).unwrap();
        }
    }
    /// Starts `tabd run`; returns the child and how long until READY=1.
    fn start_daemon(&self) -> (Child, Duration) {
        self.start_daemon_with(&[])
    }
    /// `start_daemon` with these variables set as well (a hook's secret).
    fn start_daemon_with(&self, env: &[(&str, &str)]) -> (Child, Duration) {
        let sock = self.dir.path().join(format!("n{}.sock", rand_id()));
        let socket = UnixDatagram::bind(&sock).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let t0 = Instant::now();
        let child = self
            .command(&["run"])
            .envs(env.iter().copied())
            .env("NOTIFY_SOCKET", &sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = child;
        let mut buf = [0u8; 1024];
        loop {
            match socket.recv(&mut buf) {
                Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => {
                    return (child, t0.elapsed())
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("no READY=1 from tabd run within 60 s: {e}");
                }
            }
        }
    }
    fn count(&self, rel: &str) -> usize {
        std::fs::read_dir(self.vault().join(rel))
            .map(|d| d.flatten().filter(|e| e.path().is_file()).count())
            .unwrap_or(0)
    }
}

/// Bytes of every file under `dir`.
fn walkdir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walkdir_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// CPU time of the calling thread (where the run executes), in milliseconds.
fn thread_cpu_ms() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn stop(mut child: Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    // A daemon that already ended is what the caller waits for next.
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).ok();
    let _ = child.wait();
}

fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    false
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of a process, from /proc/<pid>/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// Context switches of every thread (each one a wake-up).
fn wakeups(pid: u32) -> u64 {
    let mut total = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let s = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            for l in s.lines() {
                if l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches") {
                    total += l
                        .split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    total
}

const ROLE: &str = "---\nmin_interval: 0s\n---\n# Bench\n## Mission\nAnswer.\n## Schedule\non-demand\n";

/// CPU nanoseconds of every live thread, from /proc/<pid>/task/*/schedstat.
fn cpu_ns(pid: u32) -> u64 {
    let mut total = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            total += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// Minor page faults of a process, from /proc/<pid>/stat.
fn minor_faults(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    after
        .split_whitespace()
        .nth(7)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What giving back program pages when quiet costs the next run: a note after 12 s of quiet
/// (the daemon gave its pages back at 10 s) against a note right after the last run.
fn quiet(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    b.write("roles/bench.md", ROLE);
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    b.set_config(
        &fake,
        "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\n[inbox]\nsettle_ms = 0\n",
    );
    let (child, _) = b.start_daemon();
    let pid = child.id();
    let staging = b.dir.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let mut n = 0;
    let mut one = || {
        let name = format!("n{n:04}.md");
        let src = staging.join(&name);
        std::fs::write(&src, "note").unwrap();
        let (cpu0, flt0, rss0) = (cpu_ns(pid), minor_faults(pid), proc_status(pid, "VmRSS:"));
        let t0 = Instant::now();
        std::fs::rename(&src, b.vault().join("agent/inbox/bench").join(&name)).unwrap();
        let reqs = fake.wait_for_requests(n + 1, Duration::from_secs(30));
        let ms = reqs[n].at.duration_since(t0).as_secs_f64() * 1000.0;
        n += 1;
        assert!(wait_for(Duration::from_secs(10), || b
            .count("agent/inbox/bench/processed")
            == n));
        let cpu = (cpu_ns(pid) - cpu0) as f64 / 1e6;
        (ms, cpu, (minor_faults(pid) - flt0) as f64, rss0 as f64 / 1024.0)
    };
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(12));
        cold.push(one());
        warm.push(one());
    }
    stop(child);
    let mut row = |label: &str, v: &[(f64, f64, f64, f64)]| {
        let (mut ms, mut cpu, mut flt, mut rss): (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) = (
            v.iter().map(|x| x.0).collect(),
            v.iter().map(|x| x.1).collect(),
            v.iter().map(|x| x.2).collect(),
            v.iter().map(|x| x.3).collect(),
        );
        let r = json!({ "latency_ms": median(&mut ms), "cpu_ms": median(&mut cpu), "minor_faults": median(&mut flt), "rss_before_mib": median(&mut rss) });
        println!(
            "quiet   {label:<28} latency {:>6.2} ms · CPU {:>5.2} ms · {:>5.0} minor faults · RSS before {:.1} MiB (medians of 5)",
            r["latency_ms"].as_f64().unwrap(),
            r["cpu_ms"].as_f64().unwrap(),
            r["minor_faults"].as_f64().unwrap(),
            r["rss_before_mib"].as_f64().unwrap()
        );
        out["quiet"][label] = r;
    };
    row("run after 12 s quiet", &cold);
    row("run right after a run", &warm);
}

/// 1. Note renamed into an inbox → request at the fake server.
fn latency(out: &mut Value) {
    for (label, settle, samples, in_place) in [
        ("settle_0", 0u64, 200usize, false),
        ("default_settle_atomic", 5000, 20, false),
        ("default_settle_in_place", 5000, 3, true),
    ] {
        let b = Bench::new();
        b.bare_vault();
        b.write("roles/bench.md", ROLE);
        let fake = FakeModel::start();
        fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
        b.set_config(
            &fake,
            &format!(
                "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\n[inbox]\nsettle_ms = {settle}\n"
            ),
        );
        let (child, _) = b.start_daemon();
        let staging = b.dir.path().join("staging");
        std::fs::create_dir_all(&staging).unwrap();
        let mut ms = Vec::new();
        for i in 0..samples {
            let name = format!("n{i:04}.md");
            let dest = b.vault().join("agent/inbox/bench").join(&name);
            let t0;
            if in_place {
                t0 = Instant::now();
                std::fs::write(&dest, format!("note {i}")).unwrap();
            } else {
                let src = staging.join(&name);
                std::fs::write(&src, format!("note {i}")).unwrap();
                t0 = Instant::now();
                std::fs::rename(&src, &dest).unwrap();
            }
            let reqs = fake.wait_for_requests(i + 1, Duration::from_secs(30));
            ms.push(reqs[i].at.duration_since(t0).as_secs_f64() * 1000.0);
            wait_for(Duration::from_secs(10), || {
                b.count("agent/inbox/bench/processed") == i + 1
            });
        }
        stop(child);
        ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let r = json!({ "samples": ms.len(), "p50_ms": percentile(&ms, 0.5), "p90_ms": percentile(&ms, 0.9),
                        "p99_ms": percentile(&ms, 0.99), "max_ms": ms.last().copied().unwrap_or(f64::NAN) });
        println!(
            "latency {label:<26} n={:<4} p50 {:>8.2} ms  p90 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            ms.len(),
            r["p50_ms"].as_f64().unwrap(),
            r["p90_ms"].as_f64().unwrap(),
            r["p99_ms"].as_f64().unwrap(),
            r["max_ms"].as_f64().unwrap()
        );
        out["latency"][label] = r;
    }
}

/// 2. 10,000 notes over 10 roles at once.
fn burst(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    for r in 0..10 {
        b.write(
            &format!("roles/r{r}.md"),
            &ROLE.replace("# Bench", &format!("# Role {r}")),
        );
    }
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    b.set_config(&fake, "[limits]\nmin_interval = \"0s\"\nmax_concurrent_runs = 4\nmax_runs_per_day = 100000\ndaily_token_budget = 100000000000\nglobal_daily_token_budget = 100000000000\n[inbox]\nsettle_ms = 0\nmax_batch = 20\n");
    let (child, _) = b.start_daemon();
    let staging = b.dir.path().join("staging");
    for r in 0..10 {
        std::fs::create_dir_all(staging.join(format!("r{r}"))).unwrap();
        for i in 0..1000 {
            std::fs::write(
                staging.join(format!("r{r}/n{i:04}.md")),
                format!("marker-r{r}-n{i:04}-end"),
            )
            .unwrap();
        }
    }
    let t0 = Instant::now();
    for r in 0..10 {
        for i in 0..1000 {
            std::fs::rename(
                staging.join(format!("r{r}/n{i:04}.md")),
                b.vault().join(format!("agent/inbox/r{r}/n{i:04}.md")),
            )
            .unwrap();
        }
    }
    let mut peak_rss = 0;
    let done = wait_for(Duration::from_secs(600), || {
        peak_rss = peak_rss.max(proc_status(child.id(), "VmHWM:"));
        (0..10)
            .map(|r| b.count(&format!("agent/inbox/r{r}/processed")))
            .sum::<usize>()
            == 10_000
    });
    let secs = t0.elapsed().as_secs_f64();
    peak_rss = peak_rss.max(proc_status(child.id(), "VmHWM:"));
    stop(child);
    // Exactly once: every marker in exactly one request.
    let mut counts = std::collections::HashMap::new();
    for req in fake.requests() {
        let text = req.body["messages"][0]["content"][1]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        for part in text.split("marker-").skip(1) {
            let id = part.split("-end").next().unwrap_or("").to_string();
            *counts.entry(id).or_insert(0u32) += 1;
        }
    }
    let exactly_once = counts.len() == 10_000 && counts.values().all(|c| *c == 1);
    let runs = fake.requests().len();
    println!("burst   10,000 notes / 10 roles: all processed {done} in {secs:.2} s · {runs} runs · exactly once: {exactly_once} · peak RSS {:.1} MiB", peak_rss as f64 / 1024.0);
    out["burst"] = json!({ "notes": 10_000, "all_processed": done, "seconds": secs, "runs": runs, "exactly_once": exactly_once, "peak_rss_mib": peak_rss as f64 / 1024.0 });
}

/// 2b. RSS over 2,000 runs: one note a run (max_batch 1), RSS read after 10, 500, 1,000 and
/// 2,000 runs. Flat means finished runs leave nothing behind (tasks, state, caches).
fn rss(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    b.write("roles/r.md", ROLE);
    let fake = FakeModel::start();
    fake.respond_with(|_, _| Reply::ok(canned::anthropic_text("ok")));
    b.set_config(&fake, "[limits]\nmin_interval = \"0s\"\nmax_runs_per_day = 100000\ndaily_token_budget = 100000000000\nglobal_daily_token_budget = 100000000000\n[inbox]\nsettle_ms = 0\nmax_batch = 1\n");
    let (child, _) = b.start_daemon();
    let staging = b.dir.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let mut samples = Vec::new();
    let runs = |b: &Bench| b.count("agent/inbox/r/processed");
    for (target, label) in [(10usize, 10), (500, 500), (1000, 1000), (2000, 2000)] {
        // Feed notes in chunks so the inbox stays small and each run takes one.
        while runs(&b) < target {
            let have = runs(&b);
            for i in have..target.min(have + 50) {
                let name = format!("n{i:05}.md");
                std::fs::write(staging.join(&name), "x").unwrap();
                std::fs::rename(
                    staging.join(&name),
                    b.vault().join(format!("agent/inbox/r/{name}")),
                )
                .unwrap();
            }
            wait_for(Duration::from_secs(120), || runs(&b) >= target.min(have + 50));
        }
        samples.push((label, proc_status(child.id(), "VmRSS:")));
    }
    let state_kib = std::fs::metadata(b.vault().join(".tabd/state.json")).map_or(0, |m| m.len() / 1024);
    stop(child);
    let line: Vec<String> = samples
        .iter()
        .map(|(n, kib)| format!("{n} runs {:.1} MiB", *kib as f64 / 1024.0))
        .collect();
    println!(
        "rss     one role, 2,000 runs: {} · state.json {state_kib} KiB",
        line.join(" · ")
    );
    out["rss"] = json!({
        "runs_rss_kib": samples.iter().map(|(n, k)| json!([n, k])).collect::<Vec<_>>(),
        "state_json_kib": state_kib,
    });
}

/// Benchmark 7, context cost against history: `tabd prompt delivery` on the stock vault with 0,
/// 20,000 and 50,000 notes in the inboxes' processed/ folders (median of 7 each).
fn history(out: &mut Value) {
    let bin = bin();
    let b = Bench::new();
    let fake = FakeModel::start();
    b.set_config(&fake, "");
    let init = Command::new(&bin)
        .args(["init", b.vault().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(init.status.success());
    // [[team]] and the folders make the delivery role look through the vault.
    let time_prompt = || {
        let mut times = Vec::new();
        for _ in 0..7 {
            let t0 = Instant::now();
            let o = Command::new(&bin)
                .env_clear()
                .env("HOME", b.dir.path())
                .env("ANTHROPIC_API_KEY", "bench")
                .args([
                    "--config",
                    b.config().to_str().unwrap(),
                    "--vault",
                    b.vault().to_str().unwrap(),
                    "prompt",
                    "delivery",
                ])
                .output()
                .unwrap();
            assert!(o.status.success());
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        median(&mut times)
    };
    let mut rows = Vec::new();
    let mut made = 0usize;
    for target in [0usize, 20_000, 50_000] {
        while made < target {
            let role = ["delivery", "risk", "comms", "product"][made % 4];
            b.write(
                &format!(
                    "agent/inbox/{role}/processed/{:02}/note-{made:06}.md",
                    made / 1000
                ),
                &format!("---\nfrom: someone\n---\nAn old note {made} about the team and the timeline.\n"),
            );
            made += 1;
        }
        let ms = time_prompt();
        println!("history tabd prompt delivery with {target:>6} processed notes: median {ms:.1} ms");
        rows.push(json!([target, ms]));
    }
    out["history"] = json!({ "binary": bin, "processed_notes_ms": rows });
}

/// 3. 50 scheduled roles, idle for 60 s.
fn idle(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    // Schedules that never fire during the minute measured.
    let hour = (chrono::Utc::now() + chrono::Duration::hours(3))
        .format("%H")
        .to_string();
    for r in 0..50 {
        b.write(
            &format!("roles/r{r:02}.md"),
            &format!(
                "# Role {r}\n## Mission\nIdle.\n## Schedule\ndaily at {hour}:{:02}\n",
                r
            ),
        );
    }
    let fake = FakeModel::start();
    b.set_config(&fake, "");
    let (child, _) = b.start_daemon();
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(2));
    let (cpu0, wake0) = (cpu_seconds(pid), wakeups(pid));
    let secs = std::env::var("TABD_BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60u64);
    std::thread::sleep(Duration::from_secs(secs));
    let (cpu1, wake1) = (cpu_seconds(pid), wakeups(pid));
    let rss = proc_status(pid, "VmRSS:");
    // RSS = the daemon's own memory (anonymous) + pages of the binary it touched (file-backed,
    // shared with the page cache and dropped first under pressure).
    let (anon, file) = (proc_status(pid, "RssAnon:"), proc_status(pid, "RssFile:"));
    stop(child);
    let cpu_per_min = (cpu1 - cpu0) * 60.0 / secs as f64;
    let wakes = wake1.saturating_sub(wake0) as f64 / secs as f64;
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "idle    50 roles, {secs} s: RSS {:.1} MiB ({:.1} own + {:.1} binary pages) · CPU {:.4} s per minute · {:.2} wake-ups/s",
        mib(rss),
        mib(anon),
        mib(file),
        cpu_per_min,
        wakes
    );
    out["idle"] = json!({ "roles": 50, "seconds": secs, "rss_mib": mib(rss), "rss_anon_mib": mib(anon), "rss_file_mib": mib(file), "cpu_s_per_min": cpu_per_min, "wakeups_per_s": wakes });
}

/// 4. Start-up with 1,000 role files: exec → READY=1, and `tabd validate`.
fn startup(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    b.write(
        "roles/_base.md",
        "# Base\n## Rules\n- Be brief.\n## Tools\n- read_file\n",
    );
    for r in 0..1000 {
        b.write(
            &format!("roles/r{r:04}.md"),
            &format!("---\nextends: _base\nmax_tool_calls: 10\n---\n# Role {r}\n## Mission\nKeep things moving.\n## Goals\n- One\n- Two\n## Context Files\n- project/scope.md\n## Schedule\n9am and 5pm, weekdays\n"),
        );
    }
    let fake = FakeModel::start();
    b.set_config(&fake, "");
    let mut ready = Vec::new();
    for _ in 0..5 {
        let (child, t) = b.start_daemon();
        ready.push(t.as_secs_f64() * 1000.0);
        stop(child);
    }
    let mut validate = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let s = b.command(&["validate"]).stdout(Stdio::null()).status().unwrap();
        validate.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert!(s.success());
    }
    let (r, v) = (median(&mut ready), median(&mut validate));
    println!("startup 1,000 roles: exec → READY median {r:.1} ms · validate median {v:.1} ms (5 runs each)");
    out["startup"] = json!({ "roles": 1000, "ready_ms_median": r, "validate_ms_median": v, "ready_ms": ready, "validate_ms": validate });
}

/// 5. Per-run overhead: 100 context files (400 KiB), 5 tool calls, instant model.
fn per_run(out: &mut Value) {
    use tabd::base::environment::Env;
    use tabd::setup::role::{LoadContext, RoleSet};
    let b = Bench::new();
    b.bare_vault();
    let mut ctx_list = String::new();
    for i in 0..100 {
        b.write(
            &format!("project/f{i:03}.md"),
            &format!("# File {i}\n{}", "Some project text, a line of it.\n".repeat(124)),
        );
        ctx_list.push_str(&format!("- project/f{i:03}.md\n"));
    }
    b.write(
        "roles/bench.md",
        &format!(
            "# Bench\n## Mission\nRead.\n## Context Files\n{ctx_list}## Tools\n- read_file\n- append_file\n"
        ),
    );
    let fake = FakeModel::start();
    fake.respond_with(|req, _| {
        let has_results = req.body["messages"].as_array().is_some_and(|m| m.len() > 1);
        if has_results {
            Reply::ok(canned::anthropic_text("done"))
        } else {
            let calls: Vec<(String, String, Value)> = (0..4)
                .map(|i| {
                    (
                        format!("t{i}"),
                        "read_file".to_string(),
                        json!({"path": format!("project/f{i:03}.md")}),
                    )
                })
                .chain([(
                    "t4".to_string(),
                    "append_file".to_string(),
                    json!({"path": "project/log.md", "content": "ran"}),
                )])
                .collect();
            let refs: Vec<(&str, &str, Value)> = calls
                .iter()
                .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
                .collect();
            Reply::ok(canned::anthropic_tool_use(None, &refs))
        }
    });
    b.set_config(&fake, "");
    let config = tabd::setup::config::parse(
        &std::fs::read_to_string(b.config()).unwrap(),
        Path::new("c"),
        &Env::default(),
        None,
    )
    .unwrap();
    let vault = std::sync::Arc::new(tabd::base::vault::Vault::open(&b.vault()).unwrap());
    let roles = RoleSet::load(&vault, &LoadContext::new(chrono_tz::UTC, Env::default()));
    let role = roles.roles["bench"].clone();
    let provider = tabd::capabilities::provider::build(
        &config.provider,
        &Env::from_pairs([("ANTHROPIC_API_KEY", "bench")]),
    )
    .unwrap();
    let env = tabd::running::run::RunEnv {
        // tabd's key with its marks (an open journal is marked, as in tabd).
        key: std::sync::Arc::new(
            tabd::base::signing::Key::load_or_create(&b.dir.path().join("state")).unwrap(),
        ),
        vault: vault.clone(),
        config: std::sync::Arc::new(config.clone()),
        roles: std::sync::Arc::new(roles.clone()),
        provider,
        store: tabd::records::state::StateStore::new(vault.clone()),
        log: std::sync::Arc::new(tabd::records::runlog::RunLog::new(vault.clone(), chrono_tz::UTC)),
        clock: std::sync::Arc::new(tabd::base::clock::SystemClock),
        faults: Default::default(),
        launcher: Default::default(),
        mcp_pool: None,
        fence: Default::default(),
        telemetry: Default::default(),
        side: Default::default(),
        probes: Default::default(),
        progress: Default::default(),
        stop: Default::default(),
    };
    // Prompt assembly alone (100 files read, hashed, capped, formatted).
    let mut build = Vec::new();
    let state = env.store.load();
    for _ in 0..30 {
        let t0 = Instant::now();
        let src = tabd::running::run::PromptSources {
            vault: &vault,
            config: &config,
            state: &state,
        };
        let p = tabd::running::run::build_prompt(
            &src,
            &role,
            &tabd::base::trigger::Trigger::manual(),
            &[],
            chrono::Utc::now(),
        );
        build.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(p.hashes.len(), 100);
    }
    let build_ms = median(&mut build);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut total = Vec::new();
    let mut model = Vec::new();
    let mut cpu = Vec::new();
    for i in 0..60 {
        let before = fake.arrival_times().len();
        let t0 = Instant::now();
        let c0 = thread_cpu_ms();
        let r = rt.block_on(tabd::running::run::run_role(
            &env,
            &role,
            tabd::base::trigger::Trigger::manual(),
            vec![],
        ));
        let c1 = thread_cpu_ms();
        let elapsed = t0.elapsed();
        if i >= 10 {
            cpu.push(c1 - c0);
        }
        assert!(r.succeeded());
        let times = fake.arrival_times();
        // From the first request's arrival to the second's: the tool round (tools run, results sent).
        let model_gap = times[before + 1].duration_since(times[before]);
        if i >= 10 {
            total.push(elapsed.as_secs_f64() * 1000.0);
            model.push(model_gap.as_secs_f64() * 1000.0);
        }
    }
    let prompt_bytes = fake.requests().last().map_or(0, |r| r.body.to_string().len());
    // The undo journal (docs/spec.md §19): what it stored for these runs, and what its part of a run
    // costs — the run's one change (the append) journaled and sealed, as the run does it.
    let journal_dir = b.vault().join(".tabd/journal");
    let journal_bytes: u64 = walkdir_size(&journal_dir);
    let log = tabd::base::vault::VaultPath::parse("project/log.md", false).unwrap();
    let mut journal_ms = Vec::new();
    let key = std::sync::Arc::new(tabd::records::journal::Key::from_bytes(&[7u8; 32]));
    for i in 0..50 {
        let t0 = Instant::now();
        let j = tabd::records::journal::RunJournal::new(
            vault.clone(),
            key.clone(),
            &tabd::base::run_id::RunId::parse(&format!("bench-journal-{i}")).unwrap(),
            "bench",
            chrono::Utc::now(),
            "manual",
        );
        j.before_change(&log).unwrap();
        j.settle().unwrap();
        j.seal(&[], chrono::Utc::now()).unwrap();
        journal_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let journal_ms = median(&mut journal_ms);
    println!(
        "journal 60 runs stored {} KiB ({:.1} KiB per run; log.md is {} KiB and grows each run) · journaling one change and sealing: {journal_ms:.3} ms",
        journal_bytes / 1024,
        journal_bytes as f64 / 1024.0 / 60.0,
        std::fs::metadata(b.vault().join("project/log.md")).map_or(0, |m| m.len()) / 1024
    );
    out["journal"] = json!({ "runs": 60, "bytes": journal_bytes, "per_change_ms": journal_ms });
    let t = median(&mut total);
    let gap = median(&mut model);
    let own_cpu = median(&mut cpu);
    println!("run     100 context files (400 KiB), 5 tool calls: median {t:.2} ms per run (50 runs; includes 2 local HTTP round trips) · request {} KiB · tool round {gap:.2} ms · prompt assembly {build_ms:.2} ms · tabd CPU {own_cpu:.2} ms per run", prompt_bytes / 1024);
    out["per_run"] = json!({ "context_files": 100, "tool_calls": 5, "runs": total.len(), "median_ms": t, "request_kib": prompt_bytes / 1024, "tool_round_ms_median": gap, "prompt_build_ms_median": build_ms, "tabd_cpu_ms_median": own_cpu });
}

/// 6. The stock roles' prompt sizes and the cacheable share.
fn prompt_size(out: &mut Value) {
    let b = Bench::new();
    let fake = FakeModel::start();
    b.set_config(&fake, "");
    let s = Command::new(bin())
        .arg("init")
        .arg(b.vault())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(s.success());
    let mut rows = Vec::new();
    for role in ["delivery", "risk", "comms", "product"] {
        let o = b.command(&["prompt", role]).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let size = |name: &str| -> usize {
            let start = text.find(&format!("===== {name}")).unwrap();
            let after = &text[start..];
            let body = &after[after.find("=====\n").unwrap() + 6..];
            body[..body.find("\n\n===== ").unwrap_or(body.len())].len()
        };
        let (sys, ctx, run) = (size("SYSTEM"), size("CONTEXT"), size("THIS RUN"));
        let total = sys + ctx + run;
        let share = 100.0 * (sys + ctx) as f64 / total as f64;
        println!("prompt  {role:<9} {total:>6} bytes · ~{:>5} tokens · cacheable prefix {share:.0}% (system {sys} + context {ctx})", total.div_ceil(4));
        rows.push(json!({ "role": role, "bytes": total, "est_tokens": total.div_ceil(4), "system_bytes": sys, "context_bytes": ctx, "run_bytes": run, "cacheable_pct": share }));
    }
    out["prompt"] = Value::Array(rows);
}

/// Benchmark 8, delegation (docs/spec.md §18): what a child run costs beyond its model calls, and a
/// batch of three in parallel against the same batch one at a time. `tabd fire` each time
/// (process start included on both sides of the difference).
fn delegation(out: &mut Value) {
    let b = Bench::new();
    b.bare_vault();
    let role = |name: &str, extra: &str| {
        format!("---\n{extra}\n---\n# {name}\n## Mission\nAnswer as MARK-{name}.\n## Tools\n- read_file\n")
    };
    b.write("roles/solo.md", &role("Solo", ""));
    b.write("roles/boss.md", &role("Boss", "can_delegate_to: [helper]"));
    b.write(
        "roles/batch3.md",
        &role("Batch", "can_delegate_to: [helper]\nmax_parallel_delegates: 3"),
    );
    b.write(
        "roles/batch1.md",
        &role("Batch", "can_delegate_to: [helper]\nmax_parallel_delegates: 1"),
    );
    b.write("roles/helper.md", &role("Helper", ""));
    b.write("notes.md", "x");
    let child_delay = Duration::from_millis(200);
    let fake = FakeModel::start();
    fake.respond_with(move |req, _| {
        let text = req.body.to_string();
        if text.contains("## Your task (from") {
            let answer = Reply::ok(canned::anthropic_text("child answer"));
            return if text.contains("SLOWTASK") {
                answer.delayed(child_delay)
            } else {
                answer
            };
        }
        let has_results = req.body["messages"].as_array().is_some_and(|m| m.len() > 1);
        if has_results {
            return Reply::ok(canned::anthropic_text("done"));
        }
        let call = if text.contains("MARK-Solo") {
            ("t1", "read_file", json!({"path": "notes.md"}))
        } else if text.contains("MARK-Boss") {
            ("t1", "delegate", json!({"role": "helper", "task": "answer fast"}))
        } else {
            let tasks: Vec<Value> = (0..3)
                .map(|i| json!({"role": "helper", "task": format!("SLOWTASK {i}")}))
                .collect();
            ("t1", "delegate", json!({ "tasks": tasks }))
        };
        Reply::ok(canned::anthropic_tool_use(None, &[call]))
    });
    b.set_config(
        &fake,
        "[limits]\nmax_runs_per_day = 100000\nmin_interval = \"0s\"\n",
    );
    let fire = |role: &str, n: usize| {
        let mut times: Vec<f64> = (0..n)
            .map(|_| {
                let t0 = Instant::now();
                let s = b.command(&["fire", role]).output().unwrap();
                assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
                t0.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        median(&mut times)
    };
    let solo = fire("solo", 15);
    let boss = fire("boss", 15);
    let parallel = fire("batch3", 5);
    let sequential = fire("batch1", 5);
    println!(
        "delegate one child: {:.1} ms per fire vs {:.1} ms without (overhead {:.1} ms, one instant model call included) · batch of 3 (model {} ms each): parallel {:.0} ms, sequential {:.0} ms",
        boss,
        solo,
        boss - solo,
        child_delay.as_millis(),
        parallel,
        sequential
    );
    out["delegation"] = json!({ "fire_ms_with_child": boss, "fire_ms_without": solo, "child_overhead_ms": boss - solo,
        "batch3_parallel_ms": parallel, "batch3_sequential_ms": sequential, "child_model_delay_ms": child_delay.as_millis() as u64 });
}

/// Benchmark 9, the children's sandbox (docs/spec.md §20): what it adds to starting a child — the
/// keeper (own session, subreaper), the child's folders checked, the rules worked out for this
/// machine's real home folder (the hidden set, the split around it), built (paths opened,
/// seccomp compiled) and applied — against the same child started plain (`/bin/true`, spawn to
/// exit, median of 31 each), and a whole `tabd mcp list` of the in-repo test server (start,
/// initialize, list tools, stop). `TABD_BENCH_STEPS=both|nokeeper|nosandbox|fork` first prints
/// the mean of each step over 200 starts (with the keeper and the sandbox, without one of them,
/// or an empty `pre_exec` alone: what forking instead of `posix_spawn` costs).
fn sandbox(out: &mut Value) {
    let vault = tempfile::tempdir().unwrap();
    let launcher = tabd::base::process::Launcher {
        env: tabd::base::environment::Env::from_process(),
        vault: Some(std::sync::Arc::new(
            tabd::base::vault::Vault::open(vault.path()).unwrap(),
        )),
        ..Default::default()
    };
    let server = tabd::base::sandbox::grants::ChildSandbox {
        network: false,
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The rules for one start, as tabd works them out (this machine's real home folder).
    let grants_for = |dirs: &tabd::base::process::ChildDirs| {
        let places = launcher.places();
        server.grants(&tabd::base::sandbox::grants::Start {
            places: &places,
            own: &[dirs.state.clone(), dirs.tmp.clone()],
            sockets: &[],
            args: &[],
            env: &[],
        })
    };
    // The child as tabd starts one: through the launcher (`process::launch`), confined.
    let spec = tabd::base::process::ChildSpec {
        name: "bench".into(),
        program: "/bin/true".into(),
        confined: Some(tabd::base::process::Confinement {
            sandbox: server.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Counted once, outside the timed starts (each start splits `/` once, in building its rules).
    let rules = launcher.plan(&spec).unwrap().spec.read_roots().len();
    let start = |sandboxed: bool| -> f64 {
        let t0 = Instant::now();
        let status = if sandboxed {
            // The launcher spawns on the runtime it is called in.
            let _in_runtime = rt.enter();
            let started = launcher.start(&spec).unwrap();
            rt.block_on(async { started.child.wait_with_output().await.unwrap().status })
        } else {
            let mut cmd = tokio::process::Command::new("/bin/true");
            rt.block_on(async { cmd.status().await.unwrap() })
        };
        assert!(status.success());
        t0.elapsed().as_secs_f64() * 1000.0
    };
    if std::env::var("TABD_BENCH_STEPS").is_ok() {
        let mut steps = [0f64; 5];
        for _ in 0..200 {
            let t = Instant::now();
            let dirs = launcher.child_dirs("bench").unwrap();
            let mut cmd = tokio::process::Command::new("/bin/true");
            let mode = std::env::var("TABD_BENCH_STEPS").unwrap();
            if mode == "fork" {
                // An empty pre_exec step only makes std fork instead of posix_spawn (what the
                // step costs is what is measured): it touches nothing.
                #[allow(unsafe_code, reason = "an empty pre_exec step touches nothing")]
                unsafe {
                    cmd.pre_exec(|| Ok(()))
                };
            } else if mode != "nokeeper" {
                launcher.as_tenant(&mut cmd);
            }
            cmd.envs(launcher.home_env(&dirs, false));
            steps[0] += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let grants = grants_for(&dirs);
            steps[1] += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let roots = grants.spec.read_roots();
            steps[2] += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let prepared = tabd::base::sandbox::prepare(&grants.spec, &launcher.sandbox_probe).unwrap();
            if mode != "nosandbox" && mode != "fork" {
                tabd::base::sandbox::install(&mut cmd, prepared);
            }
            steps[3] += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let status = rt.block_on(async { cmd.status().await.unwrap() });
            assert!(status.success());
            steps[4] += t.elapsed().as_secs_f64();
            let _ = roots;
        }
        println!("steps (ms, mean of 200): dirs+env {:.3}, places+grants {:.3}, read roots {:.3}, prepare {:.3}, spawn+exit {:.3}",
            steps[0] * 5.0, steps[1] * 5.0, steps[2] * 5.0, steps[3] * 5.0, steps[4] * 5.0);
    }
    let mut plain: Vec<f64> = (0..31).map(|_| start(false)).collect();
    let mut boxed: Vec<f64> = (0..31).map(|_| start(true)).collect();
    let (plain, boxed) = (median(&mut plain), median(&mut boxed));
    vault_write::measure(out);
    let b = Bench::new();
    b.bare_vault();
    let fake = FakeModel::start();
    // The test server is an example: built by `cargo test` (debug) or `cargo build --examples`.
    let target = std::path::Path::new(BIN)
        .parent()
        .and_then(|p| p.parent())
        .unwrap();
    let Some(server) = ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("examples/mcp_test_server"))
        .find(|p| p.exists())
    else {
        println!("sandbox child start: +{:.2} ms ({plain:.2} → {boxed:.2}); run `cargo test` once for the mcp list part", boxed - plain);
        out["sandbox"] = json!({ "plain_ms": plain, "sandboxed_ms": boxed, "added_ms": boxed - plain });
        return;
    };
    b.set_config(
        &fake,
        &format!(
            "[mcp.test]\ncommand = \"{}\"\nnetwork = false\n",
            server.display()
        ),
    );
    let mut list: Vec<f64> = (0..10)
        .map(|_| {
            let t0 = Instant::now();
            let o = b.command(&["mcp", "list"]).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            t0.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let list = median(&mut list);
    println!(
        "sandbox child start (/bin/true): {plain:.2} ms plain, {boxed:.2} ms as a sandboxed tenant (+{:.2} ms; {rules} read rules for this home) · tabd mcp list of the test server, sandboxed: {list:.1} ms",
        boxed - plain
    );
    out["sandbox"] = json!({ "plain_ms": plain, "sandboxed_ms": boxed, "added_ms": boxed - plain,
        "read_rules": rules, "mcp_list_ms": list });
}

/// Benchmark 10, the undo journal over a long life (docs/spec.md §19): the stock Delivery Manager run
/// `TABD_BENCH_JOURNAL_RUNS` times (default 10,000) on the template vault against the fake
/// model, each run appending a line to the project's status note and writing a blocker note (the
/// stock role's usual changes); then the journal's size on disk and one prune's time.
fn journal_long(out: &mut Value) {
    use tabd::base::environment::Env;
    use tabd::setup::role::{LoadContext, RoleSet};
    let runs: usize = std::env::var("TABD_BENCH_JOURNAL_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let b = Bench::new();
    let init = Command::new(bin())
        .args(["init", b.vault().to_str().unwrap()])
        .env("HOME", b.dir.path())
        .output()
        .unwrap();
    assert!(init.status.success());
    let fake = FakeModel::start();
    let counter = std::sync::atomic::AtomicUsize::new(0);
    fake.respond_with(move |req, _| {
        let has_results = req.body["messages"].as_array().is_some_and(|m| m.len() > 1);
        if has_results {
            return Reply::ok(canned::anthropic_text("done"));
        }
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Reply::ok(canned::anthropic_tool_use(
            None,
            &[
                ("t1", "append_file", json!({"path": "project/status.md", "content": format!("- run {n}: on track")})),
                ("t2", "write_file", json!({"path": format!("project/blockers/b{}.md", n % 20), "content": format!("Blocker seen in run {n}.")})),
            ],
        ))
    });
    b.set_config(
        &fake,
        "[limits]\nmax_runs_per_day = 1000000\nmin_interval = \"0s\"\n",
    );
    let config = tabd::setup::config::parse(
        &std::fs::read_to_string(b.config()).unwrap(),
        Path::new("c"),
        &Env::default(),
        None,
    )
    .unwrap();
    let vault = std::sync::Arc::new(tabd::base::vault::Vault::open(&b.vault()).unwrap());
    let roles = RoleSet::load(&vault, &LoadContext::new(chrono_tz::UTC, Env::default()));
    let role = roles.roles["delivery"].clone();
    let provider = tabd::capabilities::provider::build(
        &config.provider,
        &Env::from_pairs([("ANTHROPIC_API_KEY", "bench")]),
    )
    .unwrap();
    let env = tabd::running::run::RunEnv {
        // tabd's key with its marks (an open journal is marked, as in tabd).
        key: std::sync::Arc::new(
            tabd::base::signing::Key::load_or_create(&b.dir.path().join("state")).unwrap(),
        ),
        vault: vault.clone(),
        config: std::sync::Arc::new(config),
        roles: std::sync::Arc::new(roles),
        provider,
        store: tabd::records::state::StateStore::new(vault.clone()),
        log: std::sync::Arc::new(tabd::records::runlog::RunLog::new(vault.clone(), chrono_tz::UTC)),
        clock: std::sync::Arc::new(tabd::base::clock::SystemClock),
        faults: Default::default(),
        launcher: Default::default(),
        mcp_pool: None,
        fence: Default::default(),
        telemetry: Default::default(),
        side: Default::default(),
        probes: Default::default(),
        progress: Default::default(),
        stop: Default::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t0 = Instant::now();
    for _ in 0..runs {
        let r = rt.block_on(tabd::running::run::run_role(
            &env,
            &role,
            tabd::base::trigger::Trigger::manual(),
            vec![],
        ));
        assert!(r.succeeded());
    }
    let took = t0.elapsed().as_secs_f64();
    let journal = b.vault().join(".tabd/journal");
    let bytes = walkdir_size(&journal);
    let status = std::fs::metadata(b.vault().join("project/status.md")).map_or(0, |m| m.len());
    let t1 = Instant::now();
    // As the daemon's next pass would, a few minutes later (blobs younger than a minute are kept:
    // they may belong to a run still writing its journal line).
    let later = chrono::Utc::now() + chrono::Duration::minutes(5);
    let pruned = tabd::records::journal::prune(&vault, 30, 200 * 1024 * 1024, later);
    let prune_ms = t1.elapsed().as_secs_f64() * 1000.0;
    let after = walkdir_size(&journal);
    println!(
        "journal {runs} stock runs ({took:.0} s): {:.1} MiB on disk (status note now {} KiB) · prune to 200 MiB: {prune_ms:.0} ms, dropped {} run(s), {:.1} MiB left",
        bytes as f64 / 1048576.0,
        status / 1024,
        pruned.runs,
        after as f64 / 1048576.0
    );
    out["journal_long"] =
        json!({ "runs": runs, "bytes": bytes, "prune_ms": prune_ms, "after_prune_bytes": after });
}

/// What suspending a run and going on costs tabd (docs/spec.md §22): saving the record, the daemon's
/// look at the suspended runs after an approvals pass, the decisions, the continued conversation,
/// marking it resuming and removing it — for a run with a 24 KB conversation. Medians of 200.
fn resume_cost(out: &mut Value) {
    use tabd::capabilities::provider::{Block, Message, Request};
    use tabd::running::run::suspend::{self, Suspended};
    let dir = tempfile::tempdir().unwrap();
    let vault = tabd::base::vault::Vault::open(dir.path()).unwrap();
    let text = "The delivery plan, with its milestones and risks. ".repeat(160);
    let request = Request {
        model: "claude-sonnet-4-5".into(),
        system: text.clone(),
        messages: vec![
            Message::user(vec![Block::Text {
                text: text.clone(),
                cache: true,
            }]),
            Message {
                speaker: tabd::capabilities::provider::Speaker::Assistant,
                content: vec![Block::ToolUse {
                    id: "w1".into(),
                    name: "write_file".into(),
                    input: json!({"path": "p.md", "content": text}),
                }],
                raw: None,
            },
        ],
        tools: Vec::new(),
        max_tokens: 4096,
        temperature: None,
        thinking_budget: 0,
        tool_choice_none: false,
        cache_ttl: None,
    };
    let note = "agent/approvals/2026-11-25-ops-write_file-abc123.md".to_string();
    let record = Suspended {
        run_id: tabd::base::run_id::RunId::parse("20261125T090000Z-ops-0000abcd").unwrap(),
        role: "ops".into(),
        started_at: chrono::Utc::now(),
        suspended_at: chrono::Utc::now(),
        turn: serde_json::from_value(json!({
            "request": serde_json::to_value(&request).unwrap(),
            "results": [{"type": "tool_result", "tool_use_id": "w1", "content": "queued", "is_error": false}],
            "waiting": [["w1", note]],
        }))
        .unwrap(),
        spent_tokens: 12_000,
        spent_usd: 0.04,
        tool_calls: 1,
        deadline_left_ms: 500_000,
        hops: 0,
        role_hash: String::new(),
        resuming: false,
        wait: 1,
    };
    // A key that keeps marks (in a folder of this bench's), as tabd's does.
    let key = tabd::base::signing::Key::load_or_create(&dir.path().join("state")).unwrap();
    let mut state = tabd::records::state::State::default();
    state.approvals.insert(
        "abc123".into(),
        serde_json::from_value(json!({
            "role": "ops", "tool": "write_file", "exposed": "write_file", "risk": "write", "note": note,
            "args_hash": "", "run_id": record.run_id, "created": chrono::Utc::now(), "expires": chrono::Utc::now(),
            "phase": "done", "outcome": "done: wrote 8,000 bytes to p.md"
        }))
        .unwrap(),
    );
    let mut ms = Vec::new();
    for i in 0..200 {
        let t0 = Instant::now();
        // Each round a new wait of the run: its second part's mark is new.
        let record = Suspended {
            wait: i + 1,
            ..record.clone()
        };
        suspend::save(&vault, &key, &record).unwrap();
        let Some(suspend::Found::Signed(mut found)) = suspend::all(&vault, &key).pop() else {
            panic!("the record saved just now is signed");
        };
        assert!(suspend::refusal(&state, &found, chrono::Utc::now()).is_none());
        assert!(!suspend::second_part_started(&key, &found));
        let decided = suspend::decisions(&state, &found).unwrap();
        let req = suspend::continued(&found, &decided);
        found.resuming = true;
        suspend::save(&vault, &key, &found).unwrap();
        suspend::claim_second_part(&key, &found).unwrap();
        suspend::remove(&vault, &found.run_id);
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(req.messages.len(), 3);
    }
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = percentile(&ms, 0.5);
    println!(
        "suspend + resume of a run with a 24 KB conversation: median {median:.3} ms (p90 {:.3} ms) over 200",
        percentile(&ms, 0.9)
    );
    out["resume"] = json!({ "median_ms": median, "p90_ms": percentile(&ms, 0.9) });
}

fn main() {
    let wanted = std::env::var("TABD_BENCH").unwrap_or_else(|_| {
        "latency,burst,idle,startup,run,prompt,rss,history,delegation,sandbox,quiet,resume,cli_home".into()
    });
    let on = |n: &str| wanted.split(',').any(|w| w.trim() == n);
    let mut out = json!({ "machine": machine() });
    println!("tabd daemon benchmark — {}", out["machine"]);
    if on("prompt") {
        prompt_size(&mut out);
    }
    if on("run") {
        per_run(&mut out);
    }
    if on("latency") {
        latency(&mut out);
    }
    if on("startup") {
        startup(&mut out);
    }
    if on("burst") {
        burst(&mut out);
    }
    if on("idle") {
        idle(&mut out);
    }
    if on("rss") {
        rss(&mut out);
    }
    if on("history") {
        history(&mut out);
    }
    if on("delegation") {
        delegation(&mut out);
    }
    if on("sandbox") {
        sandbox(&mut out);
    }
    if on("quiet") {
        quiet(&mut out);
    }
    if on("journal10k") {
        journal_long(&mut out);
    }
    if on("resume") {
        resume_cost(&mut out);
    }
    if on("load") {
        load::load(&mut out);
    }
    if on("cli_home") {
        cli_home::cli_home(&mut out);
    }
    if on("cluster") {
        cluster::cluster(&mut out);
    }
    if on("telemetry") {
        telemetry::telemetry(&mut out);
    }
    if on("webhooks") {
        webhooks::webhooks(&mut out);
    }
    println!("{}", serde_json::to_string(&out).unwrap());
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse::<u64>().ok())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores, {} GiB", mem / 1024 / 1024)
}
