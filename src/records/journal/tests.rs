use super::*;

fn vault() -> (tempfile::TempDir, Arc<Vault>) {
    let d = tempfile::tempdir().unwrap();
    let v = Arc::new(Vault::open(d.path()).unwrap());
    (d, v)
}

/// What the journal keeps of one file by default (`[journal] max_mib = 200`).
const KEPT: u64 = 200 * 1024 * 1024;

fn p(s: &str) -> VaultPath {
    VaultPath::parse(s, false).unwrap()
}

/// A run id the test names.
fn rid(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}

fn key() -> Arc<Key> {
    Arc::new(Key::from_bytes(b"a key of this machine, 32 bytes!"))
}

/// A run that changed `file` from `old` to `new`, started `days_ago`.
fn journaled(v: &Arc<Vault>, id: &RunId, file: &str, old: &str, new: &str, days_ago: i64) {
    let now = Utc::now();
    v.write_atomic(&p(file), old.as_bytes()).unwrap();
    let j = RunJournal::new(
        v.clone(),
        key(),
        id,
        "r",
        now - chrono::Duration::days(days_ago),
        "manual",
    );
    j.before_change(&p(file)).unwrap();
    j.before_change(&p(file)).unwrap(); // only the first change keeps the prior state
    v.write_atomic(&p(file), new.as_bytes()).unwrap();
    j.seal(&[], now).unwrap();
}

#[test]
fn a_sealed_entry_round_trips_and_only_the_first_prior_state_counts() {
    let (_d, v) = vault();
    journaled(&v, &rid("20261101T000000Z-r-1"), "a.md", "old", "new", 0);
    let k = key();
    let e = load(&v, &rid("20261101T000000Z-r-1"), Some(&k)).unwrap();
    assert_eq!(e.trust, Trust::Whole, "signed by this machine's key");
    assert_eq!(e.before, [("a.md".to_string(), Some(digest(b"old")))]);
    assert_eq!(e.left.clone().unwrap()["a.md"], Some(digest(b"new")));
    assert_eq!(blob(&v, &digest(b"old"), KEPT).unwrap(), b"old");
    let policy = crate::records::access::AccessPolicy::new(&[]);
    let steps = plan_undo(&v, &e, &policy, false, KEPT).unwrap();
    assert_eq!(
        steps,
        [Step::Restore {
            path: "a.md".into(),
            to: Some(digest(b"old")),
            prefix: None,
            loses: None
        }]
    );
    let other = Key::from_bytes(b"another machine's key, 32 bytes.");
    let stranger = load(&v, &rid("20261101T000000Z-r-1"), Some(&other)).unwrap();
    assert!(matches!(stranger.trust, Trust::Refused(_)));
    assert!(
        plan_undo(&v, &stranger, &policy, false, KEPT).is_err(),
        "refused whole"
    );
}

/// Issue 29, item 4: a journal edited in the vault, a swapped blob, a path a role may not
/// write, a folder replaced by a link — each refused.
#[test]
fn undo_passes_the_gate_of_a_tool_write() {
    let (_d, v) = vault();
    let k = key();
    journaled(&v, &rid("20261101T000000Z-r-2"), "project/a.md", "old", "new", 0);
    // A forged line added to a signed journal: the whole journal is refused.
    let path = entry_path(&rid("20261101T000000Z-r-2")).unwrap();
    let mut text = v.read_text(&path, 1 << 20).unwrap();
    text.push_str("{\"kind\":\"before\",\"path\":\"roles/writer.md\",\"before\":null}\n");
    v.write_atomic(&path, text.as_bytes()).unwrap();
    assert!(matches!(
        load(&v, &rid("20261101T000000Z-r-2"), Some(&k)).unwrap().trust,
        Trust::Refused(_)
    ));
    // A signed journal naming a protected path (the role could never have written it).
    let policy = crate::records::access::AccessPolicy::new(&[]);
    v.write_atomic(&p("roles/writer.md"), b"person's").unwrap();
    journaled(
        &v,
        &rid("20261101T000000Z-r-3"),
        ".claude/settings.json",
        "{}",
        "{\"hooks\":1}",
        0,
    );
    let e = load(&v, &rid("20261101T000000Z-r-3"), Some(&k)).unwrap();
    assert!(matches!(
        &plan_undo(&v, &e, &policy, true, KEPT).unwrap()[0],
        Step::Refused { .. }
    ));
    // The journal's copy swapped for other bytes: refused, not restored.
    journaled(
        &v,
        &rid("20261101T000000Z-r-4"),
        "project/b.md",
        "old b",
        "new b",
        0,
    );
    v.write_atomic(&blob_path(&digest(b"old b")).unwrap(), b"evil")
        .unwrap();
    let e = load(&v, &rid("20261101T000000Z-r-4"), Some(&k)).unwrap();
    let steps = plan_undo(&v, &e, &policy, false, KEPT).unwrap();
    assert!(
        matches!(&steps[0], Step::Refused { why, .. } if why.contains("bytes were changed")),
        "{steps:?}"
    );
    // A folder replaced by a link after the run: nothing is removed through it.
    let (dir, v2) = vault();
    let j = RunJournal::new(
        v2.clone(),
        k.clone(),
        &rid("20261101T000000Z-r-5"),
        "r",
        Utc::now(),
        "manual",
    );
    j.before_change(&p("project/new.md")).unwrap();
    v2.write_atomic(&p("project/new.md"), b"made").unwrap();
    j.seal(&[], Utc::now()).unwrap();
    v2.write_atomic(&p("roles/writer.md"), b"keep me").unwrap();
    std::fs::remove_dir_all(dir.path().join("project")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("roles"), dir.path().join("project")).unwrap();
    std::fs::rename(
        dir.path().join("roles/writer.md"),
        dir.path().join("roles/new.md"),
    )
    .unwrap();
    let e = load(&v2, &rid("20261101T000000Z-r-5"), Some(&k)).unwrap();
    let steps = plan_undo(&v2, &e, &policy, true, KEPT).unwrap();
    assert!(
        matches!(&steps[0], Step::Refused { why, .. } if why.contains("link")),
        "{steps:?}"
    );
    assert!(dir.path().join("roles/new.md").exists());
}

/// A run that crashed before its closing line is undone from its last record after each
/// call: a file the person edited since is skipped, as the dry run says.
#[test]
fn a_crashed_run_is_planned_from_its_records_after_each_call() {
    let (d, v) = vault();
    // A key that keeps marks: the crashed run's journal is known to be open, not cut.
    let k = Arc::new(Key::load_or_create(&d.path().join("state")).unwrap());
    v.write_atomic(&p("a.md"), b"before").unwrap();
    let j = RunJournal::new(
        v.clone(),
        k.clone(),
        &rid("20261101T000000Z-r-6"),
        "r",
        Utc::now(),
        "manual",
    );
    j.before_change(&p("a.md")).unwrap();
    v.write_atomic(&p("a.md"), b"by the run").unwrap();
    j.settle().unwrap();
    drop(j); // the crash: never sealed
    let policy = crate::records::access::AccessPolicy::new(&[]);
    let e = load(&v, &rid("20261101T000000Z-r-6"), Some(&k)).unwrap();
    assert!(e.left.is_none());
    assert_eq!(e.trust, Trust::Whole, "a run known to be cut off");
    assert!(matches!(
        &plan_undo(&v, &e, &policy, false, KEPT).unwrap()[0],
        Step::Restore { .. }
    ));
    v.write_atomic(&p("a.md"), b"the person's edit").unwrap();
    assert!(matches!(
        &plan_undo(&v, &e, &policy, false, KEPT).unwrap()[0],
        Step::Skip { .. }
    ));
}

#[test]
fn pruning_drops_old_runs_then_the_oldest_over_the_size_limit_then_unnamed_blobs() {
    let (_d, v) = vault();
    journaled(&v, &rid("20261001T000000Z-r-old"), "a.md", "very old", "x", 40);
    journaled(
        &v,
        &rid("20261110T000000Z-r-mid"),
        "b.md",
        &"b".repeat(10_000),
        "y",
        10,
    );
    journaled(&v, &rid("20261120T000000Z-r-new"), "c.md", "c", "z", 1);
    // Blobs are young (written just now): age them past the hour pruning leaves alone.
    let later = Utc::now() + chrono::Duration::hours(2);
    let pruned = prune(&v, 30, 1024 * 1024, later);
    assert_eq!(pruned.runs, 1, "only the 40-day-old run");
    assert_eq!(pruned.blobs, 1, "its prior content goes with it");
    assert_eq!(
        run_ids(&v),
        [rid("20261110T000000Z-r-mid"), rid("20261120T000000Z-r-new")]
    );
    assert!(blob(&v, &digest(b"very old"), KEPT).is_err());

    let pruned = prune(&v, 30, 2_000, later);
    assert_eq!(pruned.runs, 1, "the oldest goes first to fit 2,000 bytes");
    assert_eq!(run_ids(&v), [rid("20261120T000000Z-r-new")]);
    assert!(
        blob(&v, &digest(b"c"), KEPT).is_ok(),
        "a kept run's content stays"
    );

    // A blob written a moment ago may belong to a run still writing its journal line: kept
    // even when nothing names it yet.
    journaled(
        &v,
        &rid("20261001T000000Z-r-young"),
        "d.md",
        "young content",
        "w",
        40,
    );
    let pruned = prune(&v, 30, 1024 * 1024, Utc::now());
    assert_eq!((pruned.runs, pruned.blobs), (1, 0));
    assert!(blob(&v, &digest(b"young content"), KEPT).is_ok());
}

/// Issue 30, item 10: a note appended on every run is journaled as its prior length and
/// digest — no copy — and undo still restores it exactly.
#[test]
fn an_append_is_journaled_in_constant_space_and_undone_exactly() {
    let (_d, v) = vault();
    let policy = crate::records::access::AccessPolicy::new(&[]);
    let big = "- an old line of the timeline\n".repeat(10_000);
    v.write_atomic(&p("project/timeline.md"), big.as_bytes()).unwrap();
    let now = Utc::now();
    let j = RunJournal::new(v.clone(), key(), &rid("20261101T000000Z-r-9"), "r", now, "manual");
    j.before_append(&p("project/timeline.md"), Some(big.as_bytes()))
        .unwrap();
    let grown = format!("{big}- today\n");
    v.write_atomic(&p("project/timeline.md"), grown.as_bytes())
        .unwrap();
    j.before_append(&p("project/timeline.md"), Some(grown.as_bytes()))
        .unwrap();
    v.write_atomic(
        &p("project/timeline.md"),
        format!("{grown}- and more\n").as_bytes(),
    )
    .unwrap();
    j.seal(&[], now).unwrap();
    assert!(
        blob(&v, &digest(big.as_bytes()), KEPT).is_err(),
        "no copy of the note was stored"
    );
    let journal = v
        .read_text(&entry_path(&rid("20261101T000000Z-r-9")).unwrap(), 1 << 20)
        .unwrap();
    assert!(
        journal.len() < 2_000,
        "{} bytes for a {} byte note",
        journal.len(),
        big.len()
    );
    let e = load(&v, &rid("20261101T000000Z-r-9"), Some(&key())).unwrap();
    assert_eq!(e.trust, Trust::Whole);
    assert_eq!(e.prefix["project/timeline.md"], big.len() as u64);
    let steps = plan_undo(&v, &e, &policy, false, KEPT).unwrap();
    let undo = RunJournal::new(
        v.clone(),
        key(),
        &rid("20261101T000001Z-undo-1"),
        "r",
        now,
        "undo",
    );
    assert_eq!(apply(&v, &steps, &undo).unwrap(), 1);
    assert_eq!(v.read_text(&p("project/timeline.md"), 1 << 24).unwrap(), big);
}

/// Issue 30, item 10: a note appended, then rewritten in the same run: its prior content is
/// kept whole after all, and undo restores it.
#[test]
fn an_append_then_a_rewrite_in_one_run_keeps_the_prior_content_whole() {
    let (_d, v) = vault();
    let policy = crate::records::access::AccessPolicy::new(&[]);
    let big = "- an old line of the timeline\n".repeat(10_000);
    v.write_atomic(&p("project/timeline.md"), big.as_bytes()).unwrap();
    let now = Utc::now();
    let j = RunJournal::new(
        v.clone(),
        key(),
        &rid("20261101T000002Z-r-10"),
        "r",
        now,
        "manual",
    );
    j.before_append(&p("project/timeline.md"), Some(big.as_bytes()))
        .unwrap();
    v.write_atomic(&p("project/timeline.md"), format!("{big}- x\n").as_bytes())
        .unwrap();
    j.before_change(&p("project/timeline.md")).unwrap();
    v.write_atomic(&p("project/timeline.md"), b"all replaced")
        .unwrap();
    j.seal(&[], now).unwrap();
    assert_eq!(blob(&v, &digest(big.as_bytes()), KEPT).unwrap(), big.as_bytes());
    let e = load(&v, &rid("20261101T000002Z-r-10"), Some(&key())).unwrap();
    assert!(e.prefix.is_empty() && e.before.len() == 1, "{:?}", e.before);
    let steps = plan_undo(&v, &e, &policy, false, KEPT).unwrap();
    let undo = RunJournal::new(
        v.clone(),
        key(),
        &rid("20261101T000003Z-undo-2"),
        "r",
        now,
        "undo",
    );
    assert_eq!(apply(&v, &steps, &undo).unwrap(), 1);
    assert_eq!(v.read_text(&p("project/timeline.md"), 1 << 24).unwrap(), big);
}

/// An appended note whose beginning a person edited after the run cannot be restored from
/// its prefix: `--force` is refused for it rather than writing the wrong bytes.
#[test]
fn an_appended_note_edited_at_its_start_is_refused_not_guessed() {
    let (_d, v) = vault();
    let policy = crate::records::access::AccessPolicy::new(&[]);
    v.write_atomic(&p("log.md"), b"first\n").unwrap();
    let now = Utc::now();
    let j = RunJournal::new(
        v.clone(),
        key(),
        &rid("20261101T000000Z-r-11"),
        "r",
        now,
        "manual",
    );
    j.before_append(&p("log.md"), Some(b"first\n")).unwrap();
    v.write_atomic(&p("log.md"), b"first\nsecond\n").unwrap();
    j.seal(&[], now).unwrap();
    v.write_atomic(&p("log.md"), b"FIRST\nsecond\n").unwrap();
    let e = load(&v, &rid("20261101T000000Z-r-11"), Some(&key())).unwrap();
    let steps = plan_undo(&v, &e, &policy, true, KEPT).unwrap();
    assert!(
        matches!(&steps[..], [Step::Refused { why, .. }] if why.contains("no longer begins with")),
        "{steps:?}"
    );
    assert_eq!(v.read_text(&p("log.md"), 1 << 20).unwrap(), "FIRST\nsecond\n");
}

/// A file in the journal's folder whose name is no run id (`..`, a space, over 128 characters)
/// is none of tabd's journals: it is never listed, so no id read from the folder names a path.
#[test]
fn a_journal_file_whose_name_is_no_run_id_is_passed_over() {
    let (_d, v) = vault();
    journaled(&v, &rid("20261101T000000Z-r-30"), "a.md", "old", "new", 0);
    let text = read::text_of(&v, &rid("20261101T000000Z-r-30")).unwrap();
    let long = "a".repeat(200);
    for name in ["..x", "a b", "r.1", long.as_str()] {
        v.write_atomic(&p(&format!("{ROOT}/runs/{name}.jsonl")), text.as_bytes())
            .unwrap();
    }
    assert_eq!(run_ids(&v), [rid("20261101T000000Z-r-30")]);
}

/// The lines of run `id`'s journal.
fn lines_of(v: &Vault, id: &RunId) -> Vec<String> {
    read::text_of(v, id).unwrap().lines().map(String::from).collect()
}

fn put_lines(v: &Vault, id: &RunId, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    v.write_atomic(&entry_path(id).unwrap(), text.as_bytes()).unwrap();
}

fn trust_of(v: &Vault, id: &RunId, k: &Key) -> Trust {
    load(v, id, Some(k)).unwrap().trust
}

/// Issue 36, finding 9: a line removed, repeated or moved, or the closing line cut off — each
/// refused whole, and the reason names it; a journal whole again is trusted again.
#[test]
fn a_journal_missing_repeating_or_reordering_a_line_is_refused() {
    let (d, v) = vault();
    let k = Arc::new(Key::load_or_create(&d.path().join("state")).unwrap());
    let id = &rid("20261101T000000Z-r-20");
    let j = RunJournal::new(v.clone(), k.clone(), id, "r", Utc::now(), "manual");
    for f in ["a.md", "b.md", "c.md"] {
        v.write_atomic(&p(f), b"before").unwrap();
        j.before_change(&p(f)).unwrap();
        v.write_atomic(&p(f), b"after").unwrap();
    }
    j.seal(&[], Utc::now()).unwrap();
    assert!(!k.is_marked(OPEN, id), "closed: no longer marked open");
    let whole = lines_of(&v, id);
    assert_eq!(whole.len(), 5, "{whole:?}");
    assert_eq!(trust_of(&v, id, &k), Trust::Whole);

    let mut gap = whole.clone();
    gap.remove(2);
    put_lines(&v, id, &gap);
    let Trust::Refused(why) = trust_of(&v, id, &k) else {
        panic!("a missing line passed")
    };
    assert!(why.contains("1 of its lines is missing"), "{why}");

    let mut twice = whole.clone();
    twice.insert(2, whole[1].clone());
    put_lines(&v, id, &twice);
    assert!(matches!(trust_of(&v, id, &k), Trust::Refused(_)));

    let mut moved = whole.clone();
    moved.swap(1, 2);
    put_lines(&v, id, &moved);
    assert!(matches!(trust_of(&v, id, &k), Trust::Refused(_)));

    put_lines(&v, id, &whole[..4]);
    let Trust::Refused(why) = trust_of(&v, id, &k) else {
        panic!("a cut end passed")
    };
    assert!(why.contains("end is missing"), "{why}");

    // A torn last line (a crash while appending) costs nothing signed: the rest is whole.
    let mut torn = whole.clone();
    torn.push("{\"kind\":\"aft".into());
    put_lines(&v, id, &torn);
    assert_eq!(trust_of(&v, id, &k), Trust::Whole);
}

/// A run in two parts (suspended, then resumed): the second part's journal goes on numbering
/// where the first stopped, after a torn line too.
#[test]
fn a_second_part_numbers_its_lines_after_the_first() {
    let (d, v) = vault();
    let k = Arc::new(Key::load_or_create(&d.path().join("state")).unwrap());
    let id = &rid("20261101T000000Z-r-21");
    for (f, last) in [("a.md", false), ("b.md", true)] {
        let j = RunJournal::new(v.clone(), k.clone(), id, "r", Utc::now(), "manual");
        v.write_atomic(&p(f), b"before").unwrap();
        j.before_change(&p(f)).unwrap();
        v.write_atomic(&p(f), b"after").unwrap();
        j.seal(&[], Utc::now()).unwrap();
        if last {
            continue;
        }
        // The first part's process was killed while it appended one more line.
        let path = entry_path(id).unwrap();
        let text = v.read_text(&path, 1 << 20).unwrap() + "{\"kind\":\"be";
        v.write_atomic(&path, text.as_bytes()).unwrap();
    }
    let e = load(&v, id, Some(&k)).unwrap();
    assert_eq!(e.trust, Trust::Whole, "{:?}", lines_of(&v, id));
    assert_eq!(e.changed(), ["a.md", "b.md"]);
}

/// A journal an older tabd wrote (lines signed over the run id and the line, no numbers) is
/// read as unnumbered: undone, but never as whole; an older line after numbered ones, or one
/// signed by another key, is refused.
#[test]
fn an_older_unnumbered_journal_is_read_as_such() {
    let (_d, v) = vault();
    let k = key();
    let id = &rid("20261101T000000Z-r-22");
    // Bodies as the older writer serialized them (the fields in their declared order).
    let old = |body: &str, key: &[u8]| {
        use hmac::{KeyInit, Mac};
        let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
        m.update(format!("{id}\n{body}").as_bytes());
        let mac: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{},\"mac\":\"{mac}\"}}", &body[..body.len() - 1])
    };
    let ours = b"a key of this machine, 32 bytes!";
    let header = format!(
        r#"{{"kind":"header","run_id":"{id}","role":"r","started_at":"2026-11-01T00:00:00Z","trigger":"manual"}}"#
    );
    let before = r#"{"kind":"before","path":"a.md","before":null}"#;
    put_lines(&v, id, &[old(&header, ours), old(before, ours)]);
    let e = load(&v, id, Some(&k)).unwrap();
    assert_eq!(e.trust, Trust::Unnumbered);
    assert_eq!(e.changed(), ["a.md"]);
    let policy = crate::records::access::AccessPolicy::new(&[]);
    assert!(plan_undo(&v, &e, &policy, false, KEPT).is_ok());

    put_lines(&v, id, &[old(&header, b""), old(before, b"")]);
    assert!(
        matches!(trust_of(&v, id, &k), Trust::Refused(why) if why.contains("not signed")),
        "signed with an empty key"
    );
}

/// Issue 36: the journal keeps at most `max_kept` bytes of one file — a larger one is not kept
/// (the change is refused), never read whole — and reads no larger copy back; a file's state is
/// hashed as it is read.
#[test]
fn a_file_over_what_the_journal_keeps_is_neither_kept_nor_read_back() {
    let (_d, v) = vault();
    v.write_atomic(&p("big.md"), &[b'x'; 100]).unwrap();
    let j = RunJournal::new(
        v.clone(),
        key(),
        &rid("20261101T000000Z-r-20"),
        "r",
        Utc::now(),
        "manual",
    )
    .with_max_kept(64);
    assert!(
        matches!(
            j.before_change(&p("big.md")),
            Err(VaultError::TooLarge {
                size: 100,
                cap: 64,
                ..
            })
        ),
        "refused"
    );
    assert!(j.is_empty(), "nothing journaled");
    v.write_atomic(&blob_path(&digest(b"small")).unwrap(), &[b'y'; 100])
        .unwrap();
    assert!(matches!(
        blob(&v, &digest(b"small"), 64),
        Err(VaultError::TooLarge { size: 100, .. })
    ));
    assert_eq!(state_of(&v, &p("big.md")).unwrap(), Some(digest(&[b'x'; 100])));
    assert_eq!(state_of(&v, &p("none.md")).unwrap(), None);
    let said = too_large_to_keep(&p("big.md"), 100, 64 * 1024 * 1024);
    assert!(
        said.starts_with("big.md is 100 bytes, more than the 67,108,864 bytes ([journal] max_mib = 64)"),
        "{said}"
    );
}

/// A run that changed `file` from what it holds to `new`, started `hours_ago`, by `trigger`.
fn changes(v: &Arc<Vault>, id: &RunId, file: &str, new: &str, hours_ago: i64, trigger: &str) {
    let now = Utc::now();
    let j = RunJournal::new(
        v.clone(),
        key(),
        id,
        "r",
        now - chrono::Duration::hours(hours_ago),
        trigger,
    );
    j.before_change(&p(file)).unwrap();
    v.write_atomic(&p(file), new.as_bytes()).unwrap();
    j.seal(&[], now).unwrap();
}

/// Who changed a file since a run (issue 39, item 5): the newest later run that left it so, but
/// never an undo — the state an undo put back is whoever's left it before, a person's if no run's.
#[test]
fn an_undo_is_never_who_changed_a_file_the_state_it_put_back_is() {
    let (_d, v) = vault();
    let policy = crate::records::access::AccessPolicy::new(&[]);
    v.write_atomic(&p("a.md"), b"v0").unwrap();
    changes(&v, &rid("20261101T000000Z-r-a"), "a.md", "v1", 9, "manual");
    changes(&v, &rid("20261101T000001Z-r-x"), "a.md", "x", 8, "manual");
    changes(&v, &rid("20261101T000002Z-r-b"), "a.md", "b", 7, "manual");
    changes(&v, &rid("20261101T000003Z-r-u"), "a.md", "x", 6, UNDO_TRIGGER); // B undone
    let a = load(&v, &rid("20261101T000000Z-r-a"), Some(&key())).unwrap();
    let by = |v: &Arc<Vault>| match &plan_undo(v, &a, &policy, false, KEPT).unwrap()[..] {
        [Step::Skip { by, .. }] => by.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        by(&v),
        ChangedBy::Run(rid("20261101T000001Z-r-x")),
        "x is X's, not B's or the undo's"
    );

    // The person edits; a run changes it; that run is undone: the person's edit is back, and
    // tabd wrote the file last, so no time is claimed for the edit.
    v.write_atomic(&p("a.md"), b"the person's").unwrap();
    assert!(
        matches!(by(&v), ChangedBy::Other { at: Some(_) }),
        "their edit, when the file says"
    );
    changes(&v, &rid("20261101T000004Z-r-c"), "a.md", "c", 5, "manual");
    changes(
        &v,
        &rid("20261101T000005Z-r-v"),
        "a.md",
        "the person's",
        4,
        UNDO_TRIGGER,
    );
    assert_eq!(by(&v), ChangedBy::Other { at: None });
}
