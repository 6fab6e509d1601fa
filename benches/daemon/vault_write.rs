//! Part of `TABD_BENCH=sandbox`: what `vault = "write"` adds (docs/spec.md §24, issue 36): at a child's
//! start, the walk of the whole vault for what stays read-only (tabd's own files, protected
//! folders, files other programs load, under the one name comparison); after each of its calls,
//! the look through the folders it may write for what the call left (`vault::leftovers`).
//! A generated vault of `TABD_BENCH_NOTES` notes (default 5,000) in folders of 50, a few
//! settings files among them, and five role inboxes (one outside `agent/inbox/`); the start's
//! walk is also timed without the inboxes, alternately; medians of 31.

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
        "project/incoming",
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
    // The roles' inboxes a daemon passes: the stock four, and one a role put elsewhere.
    let inboxes: Vec<String> = ["comms", "delivery", "product", "risk"]
        .iter()
        .map(|r| format!("agent/inbox/{r}"))
        .chain(["project/incoming".to_string()])
        .collect();
    let places = tabd::base::sandbox::places::Places {
        home: Some(root.clone()),
        vault: vault.clone(),
        config: vec![root.join(".config/tabd")],
        state: root.join(".local/state/tabd"),
        inboxes: inboxes.clone(),
        layout: Default::default(),
    };
    let without = tabd::base::sandbox::places::Places {
        inboxes: Vec::new(),
        ..places.clone()
    };
    let child = tabd::base::sandbox::grants::ChildSandbox {
        vault: tabd::base::sandbox::grants::VaultAccess::Write,
        ..Default::default()
    };
    let start = |places| tabd::base::sandbox::grants::Start {
        places,
        own: &[],
        sockets: &[],
        args: &[],
        env: &[],
    };
    let mut writable = Vec::new();
    // Alternately with the inboxes and without them (what the roles' inboxes add to the walk).
    let (mut grants, mut bare): (Vec<f64>, Vec<f64>) = (0..31)
        .map(|_| {
            let t = Instant::now();
            child.grants(&start(&without));
            let bare = t.elapsed().as_secs_f64() * 1000.0;
            let t = Instant::now();
            writable = child.grants(&start(&places)).spec.writable;
            (t.elapsed().as_secs_f64() * 1000.0, bare)
        })
        .unzip();
    let handle = tabd::base::vault::Vault::open(&vault).unwrap();
    let watch =
        tabd::base::vault::leftovers::Watch::new(&vault, &writable, &inboxes, "bench".into()).unwrap();
    let since = tabd::base::vault::leftovers::Stamp::now();
    let mut sweep: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            assert!(watch.sweep(&handle, since).is_empty());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let (grants, bare, sweep) = (median(&mut grants), median(&mut bare), median(&mut sweep));
    println!(
        "vault = \"write\" on {notes} notes: grants at start {grants:.2} ms with {} role inboxes ({bare:.2} ms without; {} writable entries) · look after a call {sweep:.2} ms",
        inboxes.len(),
        writable.len()
    );
    out["vault_write"] = json!({ "notes": notes, "grants_ms": grants, "grants_without_inboxes_ms": bare,
                                 "sweep_ms": sweep, "writable": writable.len() });
}
