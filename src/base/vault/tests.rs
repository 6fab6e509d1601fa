use std::time::Duration;

use super::*;

fn vault() -> (tempfile::TempDir, Vault) {
    let dir = tempfile::tempdir().unwrap();
    let v = Vault::open(dir.path()).unwrap();
    (dir, v)
}

fn p(s: &str) -> VaultPath {
    VaultPath::parse(s, false).unwrap()
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

#[test]
fn normalizes() {
    assert_eq!(
        VaultPath::parse("./project//scope.md", false).unwrap().as_str(),
        "project/scope.md"
    );
    assert_eq!(VaultPath::parse("project/", false).unwrap().as_str(), "project");
    assert!(VaultPath::parse("", true).unwrap().is_root());
    assert!(VaultPath::parse("", false).is_err());
    let x = p("a/b/c.md");
    assert_eq!(x.parent().as_str(), "a/b");
    assert_eq!(x.file_name(), "c.md");
    assert!(x.starts_with("a/b"));
    assert!(!x.starts_with("a/bc"));
}

#[test]
fn unique_names_get_a_number_before_the_extension() {
    assert_eq!(numbered_name("x.md", 1), "x.md");
    assert_eq!(numbered_name("x.md", 3), "x-3.md");
    assert_eq!(numbered_name("a.b.md", 2), "a.b-2.md");
    assert_eq!(numbered_name("noext", 2), "noext-2");
    let (dir, v) = vault();
    let inbox = p("in");
    let first = v.create_unique(&inbox, "n.md", b"1").unwrap();
    let second = v.create_unique(&inbox, "n.md", b"2").unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("in/n.md", "in/n-2.md"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("in/n.md")).unwrap(),
        "1",
        "never replaced"
    );
}

#[test]
fn atomic_write_and_create() {
    let (dir, v) = vault();
    let x = p("x/y/z.md");
    v.write_atomic(&x, b"one").unwrap();
    v.write_atomic_with(&x, b"two", Durability::FileAndFolder)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/y/z.md")).unwrap(),
        "two"
    );
    let err = v.create_atomic(&x, b"three").unwrap_err();
    assert!(matches!(err, VaultError::AlreadyExists(_)));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x/y/z.md")).unwrap(),
        "two"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("x/y")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp file left behind");
}

#[test]
fn a_fifo_is_refused_at_once_and_never_blocks() {
    let (dir, v) = vault();
    mkfifo(&dir.path().join("pipe.md"));
    // Before the fix, opening the FIFO blocked this thread until a writer appeared. Run the
    // read on another thread so a regression fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let root = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let v = Vault::open(&root).unwrap();
        #[expect(
            clippy::let_underscore_must_use,
            reason = "the test has given up waiting when the receiver is gone"
        )]
        let _ = tx.send(v.read_text(&p("pipe.md"), 1024));
    });
    let got = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("reading a FIFO must not block");
    assert_eq!(
        got,
        Err(VaultError::NotRegular {
            path: "pipe.md".into(),
            kind: "a named pipe (FIFO)"
        })
    );
    let err = v
        .append(&p("pipe.md"), "x", None, false)
        .expect_err("append to a FIFO");
    assert!(matches!(err, VaultError::NotRegular { .. }), "{err:?}");
}

#[test]
fn size_and_encoding_errors_are_variants() {
    let (dir, v) = vault();
    std::fs::write(dir.path().join("big.md"), vec![b'a'; 100]).unwrap();
    std::fs::write(dir.path().join("bin.md"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::create_dir(dir.path().join("folder.md")).unwrap();
    assert!(matches!(
        v.read_text(&p("big.md"), 10),
        Err(VaultError::TooLarge {
            size: 100,
            cap: 10,
            ..
        })
    ));
    assert!(matches!(
        v.read_text(&p("bin.md"), 10),
        Err(VaultError::NotUtf8(_))
    ));
    assert!(matches!(
        v.read_text(&p("folder.md"), 10),
        Err(VaultError::NotRegular { kind: "a folder", .. })
    ));
    assert!(matches!(
        v.read_text(&p("nope.md"), 10),
        Err(VaultError::NotFound(_))
    ));
}

#[test]
fn an_escaping_symlink_is_refused_and_a_real_permission_error_is_not() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "s").unwrap();
    let (dir, v) = vault();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("daily")).unwrap();
    let err = v.read_text(&p("daily/secret.md"), 10).unwrap_err();
    assert!(matches!(err, VaultError::Refused(_)), "{err:?}");
    let err = v
        .append(&p("daily/2026-01-01.md"), "log", Some("# day\n"), true)
        .unwrap_err();
    assert!(matches!(err, VaultError::Refused(_)), "{err:?}");
    assert!(
        !outside.path().join("2026-01-01.md").exists(),
        "nothing written outside the vault"
    );
}

#[test]
fn append_adds_a_header_to_a_new_file_and_keeps_one_blank_line_between_entries() {
    let (dir, v) = vault();
    let log = p("daily/d.md");
    v.append(&log, "## one\n", Some("# d\n\n"), true).unwrap();
    std::fs::write(dir.path().join("daily/d.md"), "# d\n\n## one\nperson typed").unwrap();
    v.append(&log, "## two\n", Some("# d\n\n"), true).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("daily/d.md")).unwrap(),
        "# d\n\n## one\nperson typed\n\n## two\n"
    );
}

#[test]
fn a_lock_is_exclusive_until_dropped() {
    let (_dir, v) = vault();
    let l = p(".tabd/run-x.lock");
    let mut held = v.lock(&l, false).unwrap().expect("free lock");
    assert!(v.lock(&l, false).unwrap().is_none(), "second holder refused");
    held.set_content("1234").unwrap();
    assert_eq!(held.content().unwrap(), "1234");
    drop(held);
    assert!(v.lock(&l, false).unwrap().is_some(), "free again after drop");
}

/// A writer waits for a lock another holder lets go within `LOCK_WAIT`, and gives up with an
/// error naming the file (not a hang) when the holder never does: a stopped `tabd fire`.
#[test]
fn a_write_waits_for_a_lock_let_go_and_gives_up_on_one_held_on() {
    let (dir, v) = vault();
    let log = p("daily/d.md");
    v.append(&log, "one\n", None, false).unwrap();
    assert!(!v.held_elsewhere(&log), "nobody holds it");
    let holder = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("daily/d.md"))
        .unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    assert!(v.held_elsewhere(&log), "another holder has it");
    let let_go = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(holder);
    });
    v.append(&log, "two\n", None, false).expect("written once let go");
    let_go.join().unwrap();

    let holder = std::fs::File::open(dir.path().join("daily/d.md")).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let started = std::time::Instant::now();
    let e = v.append(&log, "three\n", None, false).unwrap_err();
    // backon stops before a wait would take the total past LOCK_WAIT; each wait is ≤ 100 ms.
    let waited = started.elapsed();
    assert!(
        waited >= lock::LOCK_WAIT - Duration::from_millis(100),
        "waited {waited:?}"
    );
    assert!(matches!(e, VaultError::Held { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("daily/d.md: another program has held its lock"),
        "{e}"
    );
    let state_lock = v.lock(&log, true).unwrap_err();
    assert!(
        matches!(state_lock, VaultError::Held { .. }),
        "a waiting lock too: {state_lock:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("daily/d.md")).unwrap(),
        "one\ntwo\n"
    );
}

#[test]
fn listing_reports_odd_names_and_dangling_links() {
    use std::os::unix::ffi::OsStrExt;
    let (dir, v) = vault();
    std::fs::create_dir(dir.path().join("in")).unwrap();
    std::fs::write(dir.path().join("in/ok.md"), "x").unwrap();
    std::fs::write(
        dir.path()
            .join("in")
            .join(std::ffi::OsStr::from_bytes(b"bad\xff.md")),
        "x",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("in/out.md")).unwrap();
    let listing = v.list(&p("in")).unwrap();
    let names: Vec<&str> = listing.entries.iter().map(|e| e.path.file_name()).collect();
    assert_eq!(names, ["ok.md"]);
    let odd: Vec<&str> = listing.odd.iter().map(|o| o.name.as_str()).collect();
    assert!(
        odd.contains(&"bad\u{fffd}.md") && odd.contains(&"out.md"),
        "{odd:?}"
    );
}

#[test]
fn stale_temp_files_are_removed_and_fresh_ones_kept() {
    let (dir, v) = vault();
    std::fs::create_dir_all(dir.path().join("agent")).unwrap();
    std::fs::create_dir_all(dir.path().join(".tabd")).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    for name in [
        "agent/.status.md.tabd-0123abcd.tmp",
        ".tabd/.tmpAbC123",
        ".tabd/.state.json.tabd-deadbeef.tmp",
        "agent/keep.md",
    ] {
        let f = std::fs::File::create(dir.path().join(name)).unwrap();
        f.set_modified(old).unwrap();
    }
    std::fs::write(dir.path().join("agent/.fresh.md.tabd-00000000.tmp"), "in flight").unwrap();
    let mut removed: Vec<String> = v
        .remove_stale_temps(Duration::from_secs(60))
        .into_iter()
        .map(|x| x.as_str().to_string())
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        [
            ".tabd/.state.json.tabd-deadbeef.tmp",
            ".tabd/.tmpAbC123",
            "agent/.status.md.tabd-0123abcd.tmp"
        ]
    );
    assert!(dir.path().join("agent/keep.md").exists());
    assert!(dir.path().join("agent/.fresh.md.tabd-00000000.tmp").exists());
}

#[test]
fn many_lookups_answer_as_one_lookup_does() {
    let (dir, v) = vault();
    let root = dir.path();
    std::fs::create_dir_all(root.join("project/real")).unwrap();
    std::fs::create_dir_all(root.join(".tabd")).unwrap();
    std::fs::write(root.join("project/a.md"), "a").unwrap();
    std::fs::write(root.join("project/real/b.md"), "b").unwrap();
    std::fs::write(root.join(".tabd/state.json"), "{}").unwrap();
    std::fs::write(root.join("top.md"), "t").unwrap();
    let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
    link("real", "project/alias");
    link("../.tabd/state.json", "project/state.md");
    link("nowhere.md", "project/dangling.md");
    let canon = v.canonicals();
    for path in [
        "project/a.md",
        "project/missing.md",
        "project/alias/b.md",
        "project/state.md",
        "project/real/b.md",
        "nofolder/x.md",
        "top.md",
    ] {
        let one = v.canonical(&p(path)).map(|x| x.to_string());
        let many = canon.canonical(&p(path)).map(|x| x.to_string());
        assert_eq!(many.as_ref().ok(), one.as_ref().ok(), "{path}");
        assert_eq!(many.is_err(), one.is_err(), "{path}");
    }
    assert_eq!(
        canon.canonical(&p("project/state.md")).unwrap().as_str(),
        ".tabd/state.json"
    );
    assert!(canon.canonical(&p("project/dangling.md")).is_err());
    assert!(canon.found_missing(&p("project/missing.md")));
    assert!(!canon.found_missing(&p("project/a.md")));
}

#[test]
fn a_device_of_a_cluster_keeps_its_own_tabd_folder() {
    let dir = tempfile::tempdir().unwrap();
    let a = Vault::open(dir.path()).unwrap().for_device("laptop");
    let b = Vault::open(dir.path()).unwrap().for_device("desktop");
    let state = VaultPath::parse(".tabd/state.json", false).unwrap();
    a.write_atomic(&state, b"a").unwrap();
    b.write_atomic(&state, b"b").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".tabd/devices/laptop/state.json")).unwrap(),
        "a"
    );
    assert_eq!(a.read_text(&state, 10).unwrap(), "a");
    assert_eq!(b.read_text(&state, 10).unwrap(), "b");
    assert!(!dir.path().join(".tabd/state.json").exists());
    // Locks are per device too: both daemons hold theirs.
    let lock = VaultPath::parse(".tabd/lock", false).unwrap();
    let held = a.lock(&lock, false).unwrap();
    assert!(held.is_some() && b.lock(&lock, false).unwrap().is_some());
    // What a walk returns (a real path) means the same file again; the rest of the vault is shared.
    let real = VaultPath::parse(".tabd/devices/desktop/state.json", false).unwrap();
    assert_eq!(a.read_text(&real, 10).unwrap(), "b");
    let note = VaultPath::parse("agent/inbox/risk/x.md", false).unwrap();
    a.write_atomic(&note, b"n").unwrap();
    assert_eq!(b.read_text(&note, 10).unwrap(), "n");
    // Without a device, .tabd/ is .tabd/.
    let plain = Vault::open(dir.path()).unwrap();
    assert!(plain.read_text(&state, 10).is_err());
}
