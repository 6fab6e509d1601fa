//! Many devices, each on its own copy of the vault (docs/spec.md §23, issue 38): three real
//! `nats-server`s, three `tabd run` daemons, and between the copies a sync tool — a loop of this
//! test that keeps them in step about every second by Syncthing's rules:
//!
//! - every file, `.tabd/` included (Syncthing copies it; Obsidian Sync does not);
//! - a file created or changed on one copy is written to the others (a temporary
//!   `.syncthing.NAME.tmp` renamed into place, its modification time kept); one deleted on one
//!   copy is deleted on the others;
//! - a file changed on several copies since the last look: the newest change wins, and each
//!   older one is kept beside it as `NAME.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext` (which then
//!   spreads like any new file);
//! - a change beats a delete: a file changed on one copy and deleted on another comes back.
//!
//! The devices agree through the servers alone: what each copy shows of the others comes a
//! second or more late, and every file tabd writes on two devices (the daily note,
//! `agent/status.md`) ends in conflict copies. Skipped without a `nats-server` unless
//! `TABD_REQUIRE_NATS=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cluster_daemons::{each_slot_once, note, Devices, DEVICES};
use crate::support::daemon::wait_until;

/// How often the sync tool looks (Syncthing's watcher sends a change after about a second).
const PERIOD: Duration = Duration::from_secs(1);
/// Each device's short ID, as Syncthing names it in a conflict copy.
const SHORT_IDS: [&str; 3] = ["LAPTOP2", "DESKTOP", "SERVER2"];

/// A file as one copy has it.
#[derive(Clone)]
struct Version {
    bytes: Vec<u8>,
    modified: SystemTime,
}

/// Whether two looks at a file saw the same: both absent, or both present with the same bytes.
fn same(a: Option<&Version>, b: Option<&Version>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.bytes == b.bytes,
        _ => false,
    }
}

/// Every regular file under `root` (but the sync tool's own temporaries), by its path inside.
fn scan(root: &Path) -> BTreeMap<PathBuf, Version> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        // A folder or file may go while it is looked at: what is gone is absent.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() && !is_temporary(&e.file_name().to_string_lossy()) {
                if let Some(v) = read(&path) {
                    out.insert(path.strip_prefix(root).expect("inside").to_path_buf(), v);
                }
            }
        }
    }
    out
}

fn is_temporary(name: &str) -> bool {
    name.starts_with(".syncthing.") && name.ends_with(".tmp")
}

fn read(path: &Path) -> Option<Version> {
    let bytes = std::fs::read(path).ok()?;
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(Version { bytes, modified })
}

/// Puts `v` at `root/rel` as Syncthing does: written to a temporary beside it, its modification
/// time set, renamed into place.
fn put(root: &Path, rel: &Path, v: &Version) -> std::io::Result<()> {
    let to = root.join(rel);
    let dir = to.parent().expect("a folder");
    std::fs::create_dir_all(dir)?;
    let name = to.file_name().expect("a name").to_string_lossy();
    let tmp = dir.join(format!(".syncthing.{name}.tmp"));
    let f = std::fs::File::create(&tmp)?;
    std::io::Write::write_all(&mut &f, &v.bytes)?;
    f.set_modified(v.modified)?;
    drop(f);
    std::fs::rename(&tmp, &to)
}

/// `rel`'s conflict copy name: `NAME.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.ext`.
fn conflict_name(rel: &Path, device: &str) -> PathBuf {
    let name = rel.file_name().expect("a name").to_string_lossy();
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let renamed = match name.rfind('.').filter(|i| *i > 0) {
        Some(i) => format!("{}.sync-conflict-{stamp}-{device}{}", &name[..i], &name[i..]),
        None => format!("{name}.sync-conflict-{stamp}-{device}"),
    };
    rel.with_file_name(renamed)
}

/// What the sync tool knows between two looks.
struct Index {
    roots: Vec<PathBuf>,
    /// The version all copies agree on (absent: deleted, or never seen).
    agreed: BTreeMap<PathBuf, Version>,
    /// What each copy had after the last look (a copy may be behind `agreed` for a look when it
    /// changed while it was being brought up to date).
    at: Vec<BTreeMap<PathBuf, Version>>,
}

impl Index {
    fn new(roots: Vec<PathBuf>) -> Self {
        let at: Vec<_> = roots.iter().map(|r| scan(r)).collect();
        Index {
            agreed: at[0].clone(),
            roots,
            at,
        }
    }

    /// One look at every copy: each file's changes since the last look resolved, and every copy
    /// brought to the result.
    fn round(&mut self) {
        let now: Vec<BTreeMap<PathBuf, Version>> = self.roots.iter().map(|r| scan(r)).collect();
        let paths: BTreeSet<PathBuf> = now
            .iter()
            .flat_map(|m| m.keys().cloned())
            .chain(self.agreed.keys().cloned())
            .collect();
        for rel in paths {
            let current: Vec<Option<Version>> = now.iter().map(|m| m.get(&rel).cloned()).collect();
            self.resolve(&rel, &current);
            self.spread(&rel, &current);
        }
    }

    /// The copies that changed `rel` since the last look decide what it is now: the newest change
    /// wins (a change beats a delete), each older change is kept as a conflict copy.
    fn resolve(&mut self, rel: &Path, current: &[Option<Version>]) {
        let changed: Vec<usize> = (0..current.len())
            .filter(|&c| !same(current[c].as_ref(), self.at[c].get(rel)))
            .collect();
        if changed.is_empty() {
            return;
        }
        let winner = changed
            .iter()
            .copied()
            .filter_map(|c| current[c].as_ref().map(|v| (v.modified, c)))
            .max();
        let Some((_, w)) = winner else {
            self.agreed.remove(rel);
            return;
        };
        let won = current[w].clone().expect("present");
        for &c in &changed {
            if let Some(lost) = current[c].as_ref().filter(|v| c != w && v.bytes != won.bytes) {
                // A sync tool that cannot write now tries again at its next look.
                let _ = put(&self.roots[c], &conflict_name(rel, SHORT_IDS[c]), lost);
            }
        }
        self.agreed.insert(rel.to_path_buf(), won);
    }

    /// Brings every copy's `rel` to the agreed version; a copy that changed it since the look is
    /// left for the next look (Syncthing checks the file again before it replaces it).
    fn spread(&mut self, rel: &Path, current: &[Option<Version>]) {
        let target = self.agreed.get(rel).cloned();
        for (c, now) in current.iter().enumerate() {
            if !same(now.as_ref(), target.as_ref()) {
                let path = self.roots[c].join(rel);
                if !same(read(&path).as_ref(), now.as_ref()) {
                    continue;
                }
                let done = match &target {
                    Some(v) => put(&self.roots[c], rel, v),
                    None => std::fs::remove_file(&path).or_else(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => Ok(()),
                        _ => Err(e),
                    }),
                };
                if done.is_err() {
                    continue;
                }
            }
            match &target {
                Some(v) => self.at[c].insert(rel.to_path_buf(), v.clone()),
                None => self.at[c].remove(rel),
            };
        }
    }
}

/// The sync tool: a thread that looks every `PERIOD` until dropped.
struct SyncTool {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SyncTool {
    fn start(roots: Vec<PathBuf>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let mut index = Index::new(roots);
        let thread = {
            let (stop, rounds) = (stop.clone(), rounds.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    index.round();
                    rounds.fetch_add(1, Ordering::SeqCst);
                    // The tool's own period between looks, not a wait for anything.
                    std::thread::sleep(PERIOD);
                }
            })
        };
        SyncTool {
            stop,
            rounds,
            thread: Some(thread),
        }
    }

    fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::SeqCst)
    }
}

impl Drop for SyncTool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies the folder `from` to `to` (a device's copy of the vault before its tabd starts),
/// modification times kept.
fn copy_tree(from: &Path, to: &Path) {
    for (rel, v) in scan(from) {
        put(to, &rel, &v).expect("copy a file of the vault");
    }
}

/// Three devices, each on its own copy of one vault, and the sync tool between the copies. The
/// tool stops before the devices go (fields drop in order).
struct Synced {
    sync: SyncTool,
    d: Devices,
}

impl Synced {
    /// `prepare` writes into the vault before it is copied to the other devices.
    fn new(test: &str, limits: &str, prepare: impl FnOnce(&Devices)) -> Option<Synced> {
        let mut d = Devices::new(test, 5, limits)?;
        prepare(&d);
        // Each copy's folder has the vault's name: the cluster knows a vault by it.
        for device in &DEVICES[1..] {
            let root = d.v.dir.path().join(device).join("vault");
            copy_tree(&d.v.root(), &root);
            d.copies.insert(device, root);
        }
        let roots = DEVICES.iter().map(|dev| d.root_of(dev)).collect();
        Some(Synced {
            sync: SyncTool::start(roots),
            d,
        })
    }

    /// The file names in `rel` of `device`'s copy.
    fn files_in(&self, device: &str, rel: &str) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.d.root_of(device).join(rel))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// The notes of `role` each device's records say it ran, sorted.
    fn notes_run(&self, role: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .d
            .ok_records(role)
            .iter()
            .flat_map(|(_, r)| r["trigger"]["notes"].as_array().cloned().unwrap_or_default())
            .map(|n| n.as_str().unwrap_or_default().to_string())
            .collect();
        out.sort();
        out
    }
}

#[test]
fn three_devices_on_synced_copies_run_a_hundred_slots_exactly_once() {
    let Some(mut s) = Synced::new(
        "three_devices_on_synced_copies_run_a_hundred_slots",
        "max_runs_per_day = 1000",
        |d| {
            d.v.write(
                "roles/tick.md",
                "---\nskip_unchanged: false\nmax_runs_per_day: 1000\n---\n# Tick\n\n## Mission\nTick.\n\n## Schedule\n* * * * * *\n",
            )
        },
    ) else {
        return;
    };
    s.d.start_all();
    // 100 slots, one a second (the claims are those of any slot: docs/performance.md says why
    // not the two seconds).
    wait_until(Duration::from_secs(240), "100 slots run", || {
        s.d.ok_records("tick").len() >= 100
    });
    for daemon in s.d.daemons.values() {
        daemon.signal(libc::SIGTERM);
    }
    for daemon in s.d.daemons.values_mut() {
        assert_eq!(daemon.wait_exit(Duration::from_secs(30)), Some(0));
    }
    let slots = each_slot_once(&s.d, "tick");
    assert!(slots.len() >= 100, "{slots:?}");
    assert!(
        s.sync.rounds() >= 50,
        "the sync tool kept the copies in step all along"
    );
    // The sync tool copies `.tabd/`: each copy holds every device's folder, each device wrote
    // only its own.
    for device in DEVICES {
        let mut seen: Vec<String> = std::fs::read_dir(s.d.root_of(device).join(".tabd/devices"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        seen.sort();
        assert_eq!(seen, ["desktop", "laptop", "server"], "{device}'s copy");
    }
    assert!(s.d.fake.violations().is_empty(), "{:?}", s.d.fake.violations());
}

#[test]
fn fifty_notes_dropped_into_one_synced_copy_run_once_each_and_move_once() {
    let Some(mut s) = Synced::new("fifty_notes_dropped_into_one_synced_copy", "", |_| {}) else {
        return;
    };
    s.d.start_all();
    // Dropped on the laptop; the others see them a second or so later, through the sync tool.
    for i in 0..50 {
        s.d.v.write(&format!("agent/inbox/risk/n{i:02}.md"), &note(i));
    }
    let expected: Vec<String> = (0..50).map(|i| format!("n{i:02}.md")).collect();
    wait_until(
        Duration::from_secs(120),
        "50 notes in processed/ of every copy",
        || {
            DEVICES.iter().all(|dev| {
                s.files_in(dev, "agent/inbox/risk/processed").len() >= 50
                    && s.files_in(dev, "agent/inbox/risk").is_empty()
            })
        },
    );
    for dev in DEVICES {
        assert_eq!(
            s.files_in(dev, "agent/inbox/risk/processed"),
            expected,
            "{dev}: each moved once (a second move would be n00-2.md)\n{}",
            s.d.stderr()
        );
    }
    let ran: Vec<String> = (0..50).map(|i| format!("agent/inbox/risk/n{i:02}.md")).collect();
    assert_eq!(s.notes_run("risk"), ran, "each note ran once\n{}", s.d.stderr());

    // A sync tool writes one back into a copy after it ran on another device (a stale edit
    // there beats the move: a change beats a delete). It spreads to every copy, and every device
    // finds it done: it runs nowhere again, and stays in the inbox for the person.
    let (ran_on, _) =
        s.d.ok_records("risk")
            .into_iter()
            .find(|(_, r)| r["trigger"]["notes"].to_string().contains("n07.md"))
            .expect("n07 ran");
    let back_in = *DEVICES.iter().find(|d| **d != ran_on).expect("another device");
    let found = "risk: agent/inbox/risk/n07.md is another device's";
    let before: BTreeMap<&str, usize> = DEVICES
        .iter()
        .map(|dev| (*dev, s.d.daemons[dev].stderr().matches(found).count()))
        .collect();
    let requests = s.d.fake.requests().len();
    std::fs::write(s.d.root_of(back_in).join("agent/inbox/risk/n07.md"), note(7)).expect("write back");
    for dev in DEVICES {
        s.d.wait(
            Duration::from_secs(30),
            &format!("{dev} finding the note written back done"),
            || s.d.daemons[dev].stderr().matches(found).count() > before[dev],
        );
    }
    for dev in DEVICES {
        assert_eq!(s.files_in(dev, "agent/inbox/risk"), ["n07.md"], "{dev}: it stays");
        assert_eq!(s.files_in(dev, "agent/inbox/risk/processed"), expected, "{dev}");
    }
    assert_eq!(s.notes_run("risk"), ran, "nothing ran again\n{}", s.d.stderr());
    assert_eq!(s.d.fake.requests().len(), requests);
    assert!(s.d.fake.violations().is_empty(), "{:?}", s.d.fake.violations());
}

/// Issue 49, item 6: a note written in place on one copy (created, then written: a plain
/// `fs::write`) that the sync tool caught between the two, empty, and spread before its text.
#[test]
fn a_note_the_sync_tool_spread_before_its_text_runs_once() {
    let Some(mut s) = Synced::new("a_note_spread_before_its_text", "", |_| {}) else {
        return;
    };
    s.d.start_all();
    s.d.v.write("agent/inbox/risk/n00.md", "");
    let from = s.sync.rounds();
    wait_until(Duration::from_secs(30), "two looks of the sync tool", || {
        s.sync.rounds() >= from + 2
    });
    s.d.v.write("agent/inbox/risk/n00.md", &note(0));
    wait_until(
        Duration::from_secs(120),
        "the note in processed/ of every copy",
        || {
            DEVICES.iter().all(|dev| {
                !s.files_in(dev, "agent/inbox/risk/processed").is_empty()
                    && s.files_in(dev, "agent/inbox/risk").is_empty()
            })
        },
    );
    let from = s.sync.rounds();
    wait_until(Duration::from_secs(30), "two looks more", || {
        s.sync.rounds() >= from + 2
    });
    for dev in DEVICES {
        assert_eq!(
            s.files_in(dev, "agent/inbox/risk/processed"),
            ["n00.md"],
            "{dev}: moved once\n{}",
            s.d.stderr()
        );
    }
    assert_eq!(
        s.notes_run("risk"),
        ["agent/inbox/risk/n00.md"],
        "ran once: {:?}\n{}",
        s.d.ok_records("risk"),
        s.d.stderr()
    );
}
