//! `TABD_BENCH=telemetry`: what `[telemetry]` costs a run (issue 40, item 3). One role with 20
//! context files, one request with five tool calls and a closing one, against the fake model;
//! runs alternate between an environment without `[telemetry]` and one sending to a local OTLP
//! receiver (in this process: it decodes what arrives), so drift hits both alike. Measured: the
//! CPU time of the thread the run executes on (where spans are made) per run, medians of
//! `TABD_BENCH_TELEMETRY_RUNS` (default 100) each after 10 warm-up runs; and the CPU the
//! exporter's own thread (the SDK's batch processor: encoding and sending) spent over all runs.

use std::time::Instant;

use serde_json::{json, Value};

use super::fake_model::{canned, FakeModel, Reply};
use super::otlp::Receiver;
use super::{median, thread_cpu_ms, Bench};

pub fn telemetry(out: &mut Value) {
    use tabd::base::environment::Env;
    use tabd::setup::role::{LoadContext, RoleSet};
    let runs: usize = std::env::var("TABD_BENCH_TELEMETRY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let b = Bench::new();
    b.bare_vault();
    let mut ctx = String::new();
    for i in 0..20 {
        b.write(
            &format!("project/f{i:02}.md"),
            &format!("# File {i}\n{}", "Some text.\n".repeat(200)),
        );
        ctx.push_str(&format!("- project/f{i:02}.md\n"));
    }
    b.write(
        "roles/bench.md",
        &format!("# Bench\n## Mission\nRead.\n## Context Files\n{ctx}## Tools\n- read_file\n- append_file\n"),
    );
    let fake = FakeModel::start();
    fake.respond_with(|req, _| {
        if req.body["messages"].as_array().is_some_and(|m| m.len() > 1) {
            return Reply::ok(canned::anthropic_text("done"));
        }
        let mut calls: Vec<(String, &str, Value)> = (0..4)
            .map(|i| {
                (
                    format!("t{i}"),
                    "read_file",
                    json!({"path": format!("project/f{i:02}.md")}),
                )
            })
            .collect();
        calls.push((
            "t4".into(),
            "append_file",
            json!({"path": "project/log.md", "content": "ran"}),
        ));
        let refs: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(a, b, c)| (a.as_str(), *b, c.clone()))
            .collect();
        Reply::ok(canned::anthropic_tool_use(None, &refs))
    });
    let receiver = Receiver::start();
    b.set_config(&fake, "");
    let text = std::fs::read_to_string(b.config()).unwrap();
    let off_config =
        tabd::setup::config::parse(&text, std::path::Path::new("c"), &Env::default(), None).unwrap();
    let on_text = format!("{text}\n[telemetry]\notlp = \"{}\"\n", receiver.url());
    let on_config =
        tabd::setup::config::parse(&on_text, std::path::Path::new("c"), &Env::default(), None).unwrap();
    let vault = std::sync::Arc::new(tabd::base::vault::Vault::open(&b.vault()).unwrap());
    let roles = RoleSet::load(&vault, &LoadContext::new(chrono_tz::UTC, Env::default()));
    let role = roles.roles["bench"].clone();
    let key =
        std::sync::Arc::new(tabd::base::signing::Key::load_or_create(&b.dir.path().join("state")).unwrap());
    let env_for = |config: &tabd::setup::config::Config| tabd::running::run::RunEnv {
        key: key.clone(),
        vault: vault.clone(),
        config: std::sync::Arc::new(config.clone()),
        roles: std::sync::Arc::new(roles.clone()),
        provider: tabd::capabilities::provider::build(
            &config.provider,
            &Env::from_pairs([("ANTHROPIC_API_KEY", "bench")]),
        )
        .unwrap(),
        store: tabd::records::state::StateStore::new(vault.clone()),
        log: std::sync::Arc::new(tabd::records::runlog::RunLog::new(vault.clone(), chrono_tz::UTC)),
        clock: std::sync::Arc::new(tabd::base::clock::SystemClock),
        faults: Default::default(),
        launcher: Default::default(),
        mcp_pool: None,
        fence: Default::default(),
        side: Default::default(),
        telemetry: tabd::capabilities::telemetry::Telemetry::start(
            config.telemetry.as_ref(),
            &Env::default(),
        ),
        probes: Default::default(),
        progress: Default::default(),
        stop: Default::default(),
    };
    let envs = [env_for(&off_config), env_for(&on_config)];
    assert!(!envs[0].telemetry.is_on() && envs[1].telemetry.is_on());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut cpu = [Vec::new(), Vec::new()];
    let exporter_before = exporter_cpu_ms();
    let t0 = Instant::now();
    for i in 0..2 * (runs + 10) {
        let which = i % 2;
        let c0 = thread_cpu_ms();
        let r = rt.block_on(tabd::running::run::run_role(
            &envs[which],
            &role,
            tabd::base::trigger::Trigger::manual(),
            vec![],
        ));
        let c1 = thread_cpu_ms();
        assert!(r.succeeded());
        if i >= 20 {
            cpu[which].push(c1 - c0);
        }
    }
    let wall = t0.elapsed();
    // The exporter's thread ends at shutdown: its CPU is read first, with the spans sent so far.
    let exporter_ms = exporter_cpu_ms() - exporter_before;
    let sent_before = receiver.spans().len();
    envs[1].telemetry.shutdown();
    let spans = receiver.spans().len();
    assert_eq!(
        spans,
        (runs + 10) * 8,
        "every span arrived (a run, 2 requests, 5 calls)"
    );
    let (off, on) = (median(&mut cpu[0]), median(&mut cpu[1]));
    let per_run_exporter = exporter_ms / sent_before.max(1) as f64 * 8.0;
    println!(
        "telemetry: run-thread CPU per run median {off:.3} ms without [telemetry], {on:.3} ms with (+{:.3} ms, {:+.1}%); \
         the exporter's thread {per_run_exporter:.3} ms per run ({spans} spans sent; {runs} runs each, alternating, {:.1} s)",
        on - off,
        (on - off) / off * 100.0,
        wall.as_secs_f64()
    );
    out["telemetry"] = json!({
        "runs_each": runs, "cpu_ms_off": off, "cpu_ms_on": on,
        "exporter_thread_ms_per_run": per_run_exporter, "spans": spans,
    });
}

/// CPU time the SDK's batch span processor thread has used, in milliseconds (from /proc; 0 when
/// it is not running). Clock ticks: 10 ms each, so only totals over many runs mean anything.
fn exporter_cpu_ms() -> f64 {
    let tick = 1000.0 / rustix::param::clock_ticks_per_second() as f64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut ms = 0.0;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("OpenTelemetry") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: utime is the 14th field, stime the 15th.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        ms += ticks * tick;
    }
    ms
}
