//! Part of `TABD_BENCH=sandbox`: what `vault = "write"` adds (DESIGN §24, issue 36): at a child's
//! start, the walk of the whole vault for what stays read-only (tabd's own files, protected
//! folders, files other programs load, under the one name comparison); after each of its calls,
//! the look through the folders it may write for what the call left (`vault::leftovers`).
//! A generated vault of `TABD_BENCH_NOTES` notes (default 5,000) in folders of 50, a few
//! settings files among them; medians of 31.

use std::time::Instant;

use serde_json::{json, Value};

use super::median;

pub fn measure(out: &mut Value) {
    let notes: usize = std::env::var("TABD_BENCH_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let vault = root.join("Vault");
    for d in [
        ".tabd",
        "daily",
        "agent/inbox/delivery",
        "agent/memory",
        "roles",
        ".obsidian",
    ] {
        std::fs::create_dir_all(vault.join(d)).unwrap();
    }
    for i in 0..notes {
        let folder = vault.join(format!("project/area-{}/topic-{}", i / 500, i / 50));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("note-{i}.md")), "# A note\n").unwrap();
    }
    for f in [
        "project/area-0/.git/config",
        "project/area-1/CLAUDE.md",
        "project/.envrc",
    ] {
        let p = vault.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }
    let places = tabd::base::sandbox::places::Places {
        home: Some(root.clone()),
        vault: vault.clone(),
        config: vec![root.join(".config/tabd")],
        state: root.join(".local/state/tabd"),
        inboxes: Vec::new(),
    };
    let child = tabd::setup::config::sandbox::ChildSandbox {
        vault: tabd::setup::config::sandbox::VaultAccess::Write,
        ..Default::default()
    };
    let start = tabd::setup::config::sandbox::Start {
        places: &places,
        own: &[],
        sockets: &[],
        args: &[],
        env: &[],
    };
    let mut writable = Vec::new();
    let mut grants: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            writable = child.grants(&start).spec.writable;
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let handle = tabd::base::vault::Vault::open(&vault).unwrap();
    let watch = tabd::base::vault::leftovers::Watch::new(&vault, &writable, &[], "bench".into()).unwrap();
    let since = tabd::base::vault::leftovers::Stamp::now();
    let mut sweep: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            assert!(watch.sweep(&handle, since).is_empty());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let (grants, sweep) = (median(&mut grants), median(&mut sweep));
    println!(
        "vault = \"write\" on {notes} notes: grants at start {grants:.2} ms ({} writable entries) · look after a call {sweep:.2} ms",
        writable.len()
    );
    out["vault_write"] =
        json!({ "notes": notes, "grants_ms": grants, "sweep_ms": sweep, "writable": writable.len() });
}
