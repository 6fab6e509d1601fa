use super::*;

fn vault() -> (tempfile::TempDir, Arc<Vault>, Authorship) {
    let dir = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::open(dir.path()).unwrap());
    let key = Arc::new(Key::shared(b"authorship tests"));
    let a = Authorship::new(vault.clone(), key);
    (dir, vault, a)
}

fn p(s: &str) -> VaultPath {
    VaultPath::parse(s, false).unwrap()
}

fn write(dir: &tempfile::TempDir, path: &str, text: &str) {
    let full = dir.path().join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, text).unwrap();
}

#[test]
fn a_file_tabd_made_is_tabds_until_the_person_edits_it() {
    let (dir, _v, a) = vault();
    assert_eq!(a.whose(&p("notes/x.md")).unwrap(), Whose::Absent);
    write(&dir, "notes/x.md", "tabd wrote this\n");
    a.settle(&[(p("notes/x.md"), Whose::Absent)]).unwrap();
    assert_eq!(a.whose(&p("notes/x.md")).unwrap(), Whose::Tabds);
    // tabd changes its own file again: still tabd's.
    write(&dir, "notes/x.md", "tabd wrote this, then more\n");
    a.settle(&[(p("notes/x.md"), Whose::Tabds)]).unwrap();
    assert_eq!(a.whose(&p("notes/x.md")).unwrap(), Whose::Tabds);
    // The person adds a line: their words are in it now.
    write(
        &dir,
        "notes/x.md",
        "tabd wrote this, then more\nand I added this\n",
    );
    assert_eq!(a.whose(&p("notes/x.md")).unwrap(), Whose::Persons);
}

#[test]
fn a_file_tabd_did_not_make_is_the_persons_and_stays_so_after_an_approved_change() {
    let (dir, _v, a) = vault();
    write(&dir, "journal.md", "dear diary\n");
    assert_eq!(a.whose(&p("journal.md")).unwrap(), Whose::Persons);
    write(&dir, "journal.md", "dear diary\napproved line\n");
    a.settle(&[(p("journal.md"), Whose::Persons)]).unwrap();
    assert_eq!(a.whose(&p("journal.md")).unwrap(), Whose::Persons);
}

#[test]
fn a_note_deleted_and_written_again_by_the_person_is_theirs() {
    let (dir, _v, a) = vault();
    write(&dir, "x.md", "tabd\n");
    a.settle(&[(p("x.md"), Whose::Absent)]).unwrap();
    std::fs::remove_file(dir.path().join("x.md")).unwrap();
    write(&dir, "x.md", "mine now\n");
    assert_eq!(a.whose(&p("x.md")).unwrap(), Whose::Persons);
}

#[test]
fn a_move_carries_the_record_and_a_folder_is_theirs_if_any_file_in_it_is() {
    let (dir, _v, a) = vault();
    write(&dir, "a/one.md", "1\n");
    write(&dir, "a/two.md", "2\n");
    a.settle(&[(p("a/one.md"), Whose::Absent), (p("a/two.md"), Whose::Absent)])
        .unwrap();
    assert_eq!(a.whose(&p("a")).unwrap(), Whose::Tabds);
    write(&dir, "a/three.md", "the person's\n");
    assert_eq!(a.whose(&p("a")).unwrap(), Whose::Persons);
    std::fs::rename(dir.path().join("a/one.md"), dir.path().join("b.md")).unwrap();
    a.moved(&p("a/one.md"), &p("b.md"), Whose::Tabds).unwrap();
    assert_eq!(a.whose(&p("b.md")).unwrap(), Whose::Tabds);
    assert_eq!(a.names(&[p("a/one.md")]).unwrap(), vec![false]);
}

/// The record decides an action: one edited, forged or sealed by another key is not trusted,
/// and what it claimed is the person's again (rebuilt from evidence only).
#[test]
fn a_forged_record_grants_nothing() {
    let (dir, v, a) = vault();
    write(&dir, "Personal/ideas.md", "mine\n");
    // A record sealed by another key naming the person's note as tabd's, with its true digest.
    let digest = journal::state_of(&v, &p("Personal/ideas.md")).unwrap().unwrap();
    let body = format!("{{\"files\":{{\"Personal/ideas.md\":\"{digest}\"}}}}");
    let other = Key::shared(b"someone else");
    write(
        &dir,
        layout::AUTHORSHIP,
        &String::from_utf8(other.seal(PURPOSE, &[], body.as_bytes())).unwrap(),
    );
    assert_eq!(a.whose(&p("Personal/ideas.md")).unwrap(), Whose::Persons);
    // Unsealed JSON alone is refused too.
    write(&dir, layout::AUTHORSHIP, &body);
    assert_eq!(a.whose(&p("Personal/ideas.md")).unwrap(), Whose::Persons);
    // Garbage: refused, and nothing panics.
    write(&dir, layout::AUTHORSHIP, "\u{0}\u{1}not json");
    assert_eq!(a.whose(&p("Personal/ideas.md")).unwrap(), Whose::Persons);
}

/// A missing record is rebuilt from the signed undo journal: a file a run created and that still
/// holds what the last run left is tabd's; one the person changed since, or one a run only edited,
/// is not.
#[test]
fn a_missing_record_is_rebuilt_from_the_journal_and_template() {
    let (dir, v, a) = vault();
    let key = Arc::new(Key::shared(b"authorship tests"));
    write(&dir, "person.md", "the person's\n");
    let started = chrono::Utc::now();
    let run = crate::base::run_id::RunId::parse("20261129T090000Z-ops-1").unwrap();
    let j = journal::RunJournal::new(v.clone(), key.clone(), &run, "ops", started, "schedule");
    j.before_change(&p("made.md")).unwrap();
    write(&dir, "made.md", "tabd made this\n");
    j.before_change(&p("edited-later.md")).unwrap();
    write(&dir, "edited-later.md", "tabd made this too\n");
    j.before_change(&p("person.md")).unwrap();
    write(&dir, "person.md", "the person's, changed by a run\n");
    j.settle().unwrap();
    j.seal(&[], started).unwrap();
    write(
        &dir,
        "edited-later.md",
        "tabd made this too\nthe person added this\n",
    );
    // A template file, still as init wrote it.
    let tpath = "project/scope.md".to_string();
    let bytes = crate::base::template::file_bytes(&tpath).unwrap();
    std::fs::create_dir_all(dir.path().join(&tpath).parent().unwrap()).unwrap();
    std::fs::write(dir.path().join(&tpath), bytes).unwrap();

    assert_eq!(a.whose(&p("made.md")).unwrap(), Whose::Tabds);
    assert_eq!(a.whose(&p("edited-later.md")).unwrap(), Whose::Persons);
    assert_eq!(a.whose(&p("person.md")).unwrap(), Whose::Persons);
    assert_eq!(a.whose(&p(&tpath)).unwrap(), Whose::Tabds, "{tpath}");
    assert!(
        dir.path().join(layout::AUTHORSHIP).exists(),
        "the rebuilt record is kept"
    );
    // The template file edited by the person: theirs.
    std::fs::write(dir.path().join(&tpath), "my own scope\n").unwrap();
    assert_eq!(a.whose(&p(&tpath)).unwrap(), Whose::Persons);
}

#[test]
fn an_undo_follows_only_files_the_record_knew() {
    let (dir, v, a) = vault();
    write(&dir, "x.md", "v1\n");
    a.settle(&[(p("x.md"), Whose::Absent)]).unwrap();
    let v1 = journal::state_of(&v, &p("x.md")).unwrap();
    // The undo removes the file the run made: the record drops it.
    std::fs::remove_file(dir.path().join("x.md")).unwrap();
    a.restored(&p("x.md"), v1.as_deref(), None).unwrap();
    assert_eq!(a.names(&[p("x.md")]).unwrap(), vec![false]);
    // An undo that puts back a person's note does not make it tabd's.
    write(&dir, "y.md", "theirs\n");
    let y = journal::state_of(&v, &p("y.md")).unwrap();
    a.restored(&p("y.md"), None, y.as_deref()).unwrap();
    assert_eq!(a.whose(&p("y.md")).unwrap(), Whose::Persons);
}

/// One sealed journal of run `id` (trigger `trigger`) whose `change` is made between its
/// `before_change` lines (`paths`) and its seal.
fn journaled(v: &Arc<Vault>, id: &str, trigger: &str, paths: &[&str], change: impl FnOnce()) {
    let key = Arc::new(Key::shared(b"authorship tests"));
    let started = chrono::Utc::now();
    let run = crate::base::run_id::RunId::parse(id).unwrap();
    let j = journal::RunJournal::new(v.clone(), key, &run, "ops", started, trigger);
    for path in paths {
        j.before_change(&p(path)).unwrap();
    }
    change();
    j.settle().unwrap();
    j.seal(&[], started).unwrap();
}

/// A run that moved the person's note journals its new place as "absent before" — as if the run
/// had made it. The rebuilt record must not take that for tabd's making: the note is still the
/// person's words (at run time `Authorship::moved` keeps it theirs too).
#[test]
fn a_rebuilt_record_does_not_take_a_moved_persons_note_for_tabds() {
    let (dir, v, a) = vault();
    write(&dir, "Personal/ideas.md", "the person's ideas\n");
    journaled(
        &v,
        "20261129T090000Z-ops-1",
        "schedule",
        &["Personal/ideas.md", "Archive/ideas.md"],
        || {
            std::fs::create_dir_all(dir.path().join("Archive")).unwrap();
            std::fs::rename(
                dir.path().join("Personal/ideas.md"),
                dir.path().join("Archive/ideas.md"),
            )
            .unwrap();
        },
    );
    assert_eq!(a.whose(&p("Archive/ideas.md")).unwrap(), Whose::Persons);
    // A note a run made, moved by a later run that moved nothing of the person's: still tabd's.
    std::fs::remove_file(dir.path().join(layout::AUTHORSHIP)).unwrap();
    journaled(&v, "20261129T100000Z-ops-2", "schedule", &["made.md"], || {
        write(&dir, "made.md", "tabd made this\n")
    });
    journaled(
        &v,
        "20261129T110000Z-ops-3",
        "schedule",
        &["made.md", "Archive/made.md"],
        || std::fs::rename(dir.path().join("made.md"), dir.path().join("Archive/made.md")).unwrap(),
    );
    assert_eq!(a.whose(&p("Archive/made.md")).unwrap(), Whose::Tabds);
    assert_eq!(a.whose(&p("Archive/ideas.md")).unwrap(), Whose::Persons);
}

/// `tabd undo` of a run that moved the person's note puts it back where it was: its journal says
/// that place was absent before, then holds the note. An undo makes nothing, so that is no proof
/// tabd made it.
#[test]
fn a_rebuilt_record_does_not_take_a_note_an_undo_put_back_for_tabds() {
    let (dir, v, a) = vault();
    write(&dir, "Archive/ideas.md", "the person's ideas\n");
    journaled(
        &v,
        "20261129T100000Z-ops-2",
        journal::UNDO_TRIGGER,
        &["Archive/ideas.md", "Personal/ideas.md"],
        || {
            std::fs::create_dir_all(dir.path().join("Personal")).unwrap();
            std::fs::rename(
                dir.path().join("Archive/ideas.md"),
                dir.path().join("Personal/ideas.md"),
            )
            .unwrap();
        },
    );
    assert_eq!(a.whose(&p("Personal/ideas.md")).unwrap(), Whose::Persons);
}

/// A folder is the person's when any file in it is — including files tabd cannot name as vault
/// paths (a title with `…`, a name that is not UTF-8): the walk leaves those out, so a folder
/// holding only such notes of the person's, or those beside tabd's, looked like tabd's.
#[test]
fn a_folder_holding_a_note_tabd_cannot_name_is_the_persons() {
    use std::os::unix::ffi::OsStrExt;
    let (dir, _v, a) = vault();
    write(&dir, "Journal/summary.md", "tabd's summary\n");
    a.settle(&[(p("Journal/summary.md"), Whose::Absent)]).unwrap();
    assert_eq!(a.whose(&p("Journal")).unwrap(), Whose::Tabds);
    write(&dir, "Journal/Thoughts\u{2026}.md", "the person's thoughts\n");
    assert_eq!(a.whose(&p("Journal")).unwrap(), Whose::Persons, "a title with …");
    write(&dir, "Other/deep/x.md", "tabd's\n");
    a.settle(&[(p("Other/deep/x.md"), Whose::Absent)]).unwrap();
    let odd = dir
        .path()
        .join("Other/deep")
        .join(std::ffi::OsStr::from_bytes(b"caf\xe9.md"));
    std::fs::write(odd, "the person's, in Latin-1\n").unwrap();
    assert_eq!(
        a.whose(&p("Other")).unwrap(),
        Whose::Persons,
        "a name that is not UTF-8"
    );
}

/// An approved change never makes a note tabd's, whatever bytes it leaves: a record entry from
/// when tabd once made a file at that path (the person deleted it and wrote their own since) is
/// dropped, so an approved rewrite back to those bytes — or an approved move of their note onto
/// that path — does not turn the note into tabd's, free to change again without asking.
#[test]
fn an_approved_change_drops_an_old_entry_for_the_persons_note() {
    let (dir, _v, a) = vault();
    write(&dir, "Personal/plan.md", "tabd's first draft\n");
    a.settle(&[(p("Personal/plan.md"), Whose::Absent)]).unwrap();
    std::fs::remove_file(dir.path().join("Personal/plan.md")).unwrap();
    write(&dir, "Personal/plan.md", "the person's own plan\n");
    assert_eq!(a.whose(&p("Personal/plan.md")).unwrap(), Whose::Persons);
    // The person approves a rewrite whose text is exactly tabd's old draft.
    write(&dir, "Personal/plan.md", "tabd's first draft\n");
    a.settle(&[(p("Personal/plan.md"), Whose::Persons)]).unwrap();
    assert_eq!(a.whose(&p("Personal/plan.md")).unwrap(), Whose::Persons);
    // The same through a move: an old entry at the place their note moves to.
    write(&dir, "Archive/old.md", "tabd's\n");
    a.settle(&[(p("Archive/old.md"), Whose::Absent)]).unwrap();
    std::fs::remove_file(dir.path().join("Archive/old.md")).unwrap();
    write(&dir, "Personal/old.md", "tabd's\n");
    std::fs::rename(
        dir.path().join("Personal/old.md"),
        dir.path().join("Archive/old.md"),
    )
    .unwrap();
    a.moved(&p("Personal/old.md"), &p("Archive/old.md"), Whose::Persons)
        .unwrap();
    assert_eq!(a.whose(&p("Archive/old.md")).unwrap(), Whose::Persons);
}
