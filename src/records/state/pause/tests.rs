//! The pause book and its marks: what holds, what ends, what a restored or garbled copy does.

use super::*;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn role(r: &str) -> Target {
    Target::Role(r.into())
}

/// A store over a temp vault, with a real key (and so marks) in a folder of its own.
fn store() -> (tempfile::TempDir, PauseStore) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("vault")).unwrap();
    let vault = Arc::new(Vault::open(&dir.path().join("vault")).unwrap());
    let key = Arc::new(Key::load_or_create(&dir.path().join("state")).unwrap());
    (dir, PauseStore::new(vault, Some(key)))
}

#[test]
fn a_pause_holds_until_resumed_or_its_time_is_over() {
    let mut b = Book::default();
    let nine = at("2026-11-25T09:00:00Z");
    b.pause(role("risk"), nine, None, "laptop", false);
    b.pause(
        Target::All,
        nine,
        Some(at("2026-11-25T11:00:00Z")),
        "laptop",
        false,
    );
    assert!(
        b.of(&role("risk"), at("2026-11-30T00:00:00Z")).is_some(),
        "no end of its own"
    );
    assert!(b.of(&Target::All, at("2026-11-25T10:59:59Z")).is_some());
    assert!(
        b.of(&Target::All, at("2026-11-25T11:00:00Z")).is_none(),
        "over at its end"
    );
    let ended = b.expire(at("2026-11-25T11:00:01Z"));
    assert_eq!(ended.len(), 1);
    assert_eq!(
        (ended[0].how, ended[0].ended),
        (How::Expired, at("2026-11-25T11:00:00Z"))
    );
    // Paused again while paused: the start stays, the end is the new one.
    let again = b.pause(
        role("risk"),
        at("2026-11-25T12:00:00Z"),
        Some(at("2026-11-25T13:00:00Z")),
        "desk",
        false,
    );
    assert_eq!(
        (again.since, again.until),
        (nine, Some(at("2026-11-25T13:00:00Z")))
    );
    let gone = b.resume(Some(&role("risk")), at("2026-11-25T12:30:00Z"), "desk");
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].how, How::Resumed);
    assert!(b.pauses.is_empty());
    // Ended pauses are kept a week, then forgotten.
    assert_eq!(b.ended.len(), 2);
    b.expire(at("2026-12-10T00:00:00Z"));
    assert!(b.ended.is_empty());
}

#[test]
fn the_clusters_book_is_mirrored_and_this_devices_own_pauses_stay() {
    let now = at("2026-11-25T09:00:00Z");
    let mut shared = Book::default();
    shared.pause(Target::All, now, None, "desk", true);
    shared.generation = 3;
    let mut mine = Book::default();
    mine.pause(role("risk"), now, None, "laptop", false);
    assert!(mine.mirror(&shared, now));
    assert_eq!(mine.pauses.len(), 2);
    assert_eq!(mine.generation, 3);
    mine.pauses.iter_mut().for_each(|p| p.told = true);
    assert!(!mine.mirror(&shared, now), "the same book again changes nothing");
    assert!(mine.pauses.iter().all(|p| p.told), "what was told stays told");
    // Resumed on another device: it ends here as it ended there.
    let later = at("2026-11-25T10:00:00Z");
    shared.resume(None, later, "desk");
    shared.generation = 4;
    assert!(mine.mirror(&shared, later));
    assert_eq!(mine.pauses.len(), 1, "this device's own pause stays");
    assert_eq!(mine.pauses[0].target, role("risk"));
    let ended = mine.ended.last().unwrap();
    assert_eq!(
        (ended.target.clone(), ended.how, ended.by.as_str()),
        (Target::All, How::Resumed, "desk")
    );
}

#[test]
fn a_pause_is_written_marked_and_read_back() {
    let (_dir, s) = store();
    let now = Utc::now();
    let (_, warnings) = s
        .update(|b| b.pause(role("risk"), now, None, "laptop", false))
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let held = s.paused(now, &["risk", "ops"]);
    assert!(held.of("risk").is_some_and(|h| h.unrecorded.is_none()));
    assert!(held.of("ops").is_none());
    s.update(|b| b.resume(None, now, "laptop")).unwrap();
    assert!(
        s.paused(now, &["risk", "ops"]).is_empty(),
        "resumed: no mark left either"
    );
}

/// A pause whose time is over, ended in the book, takes its mark with it: it never comes
/// back as one held for want of its record.
#[test]
fn a_pause_ended_by_its_time_leaves_no_mark_behind() {
    let (_dir, s) = store();
    let now = Utc::now();
    let end = now + chrono::Duration::seconds(3);
    s.update(|b| b.pause(role("risk"), now, Some(end), "laptop", false))
        .unwrap();
    let later = end + chrono::Duration::seconds(1);
    assert!(s.paused(later, &["risk"]).is_empty(), "over: nothing holds");
    s.update(|b| b.expire(later)).unwrap();
    assert!(s.paused(later, &["risk"]).is_empty(), "and no mark holds it back");
}

/// A restored (older) copy of the book without a pause whose mark is on: the pause still
/// holds, and says why.
#[test]
fn a_restored_copy_never_loses_a_pause_silently() {
    let (dir, s) = store();
    let now = Utc::now();
    let file = dir.path().join("vault/.tabd/pause/pauses.json");
    s.update(|b| b.pause(role("ops"), now, None, "laptop", false))
        .unwrap();
    let old = std::fs::read(&file).unwrap();
    s.update(|b| b.pause(role("risk"), now, None, "laptop", false))
        .unwrap();
    std::fs::write(&file, &old).unwrap();
    let held = s.paused(now, &["risk", "ops"]);
    let risk = held.of("risk").expect("still held");
    assert!(
        risk.unrecorded
            .as_deref()
            .is_some_and(|w| w.contains("tabd resume risk")),
        "{risk:?}"
    );
    assert!(held.of("ops").is_some_and(|h| h.unrecorded.is_none()));
    // Resumed through tabd: the mark goes, and with it the hold.
    s.update(|b| b.resume(Some(&role("risk")), now, "laptop"))
        .unwrap();
    s.unmark_unrecorded(Some(&role("risk")), &[]);
    assert!(s.paused(now, &["risk", "ops"]).of("risk").is_none());
}

/// A book that cannot be read holds every role, says why, and the next change sets it aside.
#[test]
fn a_garbled_book_holds_everything_until_written_anew() {
    let (dir, s) = store();
    let file = dir.path().join("vault/.tabd/pause/pauses.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "{ not json").unwrap();
    let now = Utc::now();
    let held = s.paused(now, &["risk"]);
    let all = held.of("risk").expect("held");
    assert_eq!(all.target, Target::All);
    assert!(all
        .unrecorded
        .as_deref()
        .is_some_and(|w| w.contains("tabd resume --all")));
    let (_, warnings) = s.update(|b| b.resume(None, now, "laptop")).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("pauses.unreadable-")),
        "{warnings:?}"
    );
    assert!(s.paused(now, &["risk"]).is_empty());
}
