//! Inbox notes (docs/spec.md §5): which files are triggers, their frontmatter, their order, and the
//! moves to `processed/` and `failed/`.

use std::time::SystemTime;

use crate::base::vault::{Entry, OddEntry, Vault, VaultError, VaultPath};
use crate::formats::frontmatter::{self, Frontmatter};

/// Largest note tabd hands a run: `read_file` can page through all of it (its own cap is at
/// least this), so the model can read every line of a note larger than one prompt. A bigger
/// note is refused (`Note::unreadable`), like one that is not UTF-8.
pub const MAX_NOTE_BYTES: u64 = 8 * 1024 * 1024;
/// Most of a note's text a `Note` keeps (the prompt shows at most `max_file_bytes` of it; the
/// model reads the rest from the file).
pub const NOTE_TEXT_BYTES: usize = 1024 * 1024;

/// A note's `priority` (also what `trigger_role` writes).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low = 0,
    #[default]
    Normal = 1,
    High = 2,
    Urgent = 3,
}

impl Priority {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_lowercase().as_str() {
            "low" => Some(Self::Low),
            "normal" => Some(Self::Normal),
            "high" => Some(Self::High),
            "urgent" => Some(Self::Urgent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
            Self::Urgent => "urgent",
        }
    }
}

/// A trigger note in a role's inbox.
#[derive(Debug, Clone)]
pub struct Note {
    pub path: VaultPath,
    /// The note's text; only its first `NOTE_TEXT_BYTES` (at a char boundary) when it is longer
    /// (`text.len() < size`).
    pub text: String,
    /// Lines in the whole note, as `read_file` counts them.
    pub lines: usize,
    pub frontmatter: Option<Frontmatter>,
    /// Why the frontmatter could not be read, if it could not: such a note is never run, it
    /// goes to `failed/` with this reason (`run::refuse`).
    pub frontmatter_error: Option<String>,
    /// Why the note's text cannot be read (not UTF-8, larger than `MAX_NOTE_BYTES`): never run
    /// either (`unreadable`).
    pub text_error: Option<String>,
    pub priority: Priority,
    pub hops: u32,
    /// The chain depth could not be read (broken frontmatter, a `hops` that is not a number):
    /// the run treats the note as at the end of a chain, so a broken note can never reset it.
    pub hops_unknown: bool,
    pub from: Option<String>,
    pub draft: bool,
    pub modified: SystemTime,
    /// Bytes of the whole note.
    pub size: u64,
    pub ino: u64,
}

impl Note {
    /// Why the note cannot be read, if it cannot — its text or its frontmatter: such a note is
    /// never run, it goes to `failed/` with this reason (`run::refuse`).
    pub fn unreadable(&self) -> Option<&str> {
        self.text_error.as_deref().or(self.frontmatter_error.as_deref())
    }
}

/// Why a note's text cannot be read, as the person reads it.
fn text_error(e: &VaultError) -> String {
    match e {
        VaultError::TooLarge { size, .. } => format!(
            "it is {} bytes, more than the {} MiB a run can read (read_file's limit); split it into smaller notes",
            crate::base::text::thousands(*size),
            MAX_NOTE_BYTES / (1024 * 1024)
        ),
        _ => "it is not UTF-8 text (a binary file, or text saved in another encoding); \
              tabd and the model read only UTF-8: save it as UTF-8 text"
            .to_string(),
    }
}

/// Lines in `text` as `read_file` counts them (a last line without a line break counts).
pub fn line_count(text: &str) -> usize {
    let breaks = text.bytes().filter(|&b| b == b'\n').count();
    breaks + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// The whole note's text, its line count and size, keeping only its first `NOTE_TEXT_BYTES`.
fn read_text(vault: &Vault, path: &VaultPath) -> Result<(String, usize, u64, Entry), VaultError> {
    let (mut text, meta) = vault.read_for_model(path, MAX_NOTE_BYTES)?;
    let lines = line_count(&text);
    let size = text.len() as u64;
    if text.len() > NOTE_TEXT_BYTES {
        text.truncate(crate::base::text::floor_boundary(&text, NOTE_TEXT_BYTES));
        text.shrink_to_fit();
    }
    Ok((text, lines, size, meta))
}

/// True for a file name that may be a trigger: `*.md`, not hidden, not an editor or sync temp.
pub fn is_trigger_name(name: &str) -> bool {
    let lower = name.to_lowercase();
    lower.ends_with(".md")
        && !name.starts_with('.')
        && !name.starts_with("~$")
        && !name.starts_with(".#")
        && !name.contains(".syncthing.")
        && !lower.ends_with("~")
        && !is_sync_artifact(name)
}

/// True for what sync tools leave beside a note (docs/spec.md §23): Syncthing's `*.sync-conflict-*`,
/// iCloud's `.name.icloud` placeholders, Dropbox's and Obsidian's `* (conflicted copy …)*`.
/// Never a trigger, and named in status.
pub fn is_sync_artifact(name: &str) -> bool {
    let lower = name.to_lowercase();
    lower.contains(".sync-conflict-")
        || (name.starts_with('.') && lower.ends_with(".icloud"))
        || lower.contains("(conflicted copy")
        || lower.contains(" conflicted copy")
}

/// True for names that are temp files of editors and sync tools (never triggers).
pub fn is_temp_name(name: &str) -> bool {
    let lower = name.to_lowercase();
    name.starts_with('.')
        || name.starts_with("~$")
        || name.ends_with('~')
        || [".swp", ".swx", ".tmp", ".part", ".crdownload"]
            .iter()
            .any(|s| lower.ends_with(s))
        || name.contains(".syncthing.")
}

/// Reads a note (its text, frontmatter and metadata).
pub fn read_note(vault: &Vault, path: &VaultPath) -> Result<Note, VaultError> {
    let mut unreadable_text = None;
    let (text, lines, size, meta) = match read_text(vault, path) {
        Ok(t) => t,
        Err(e @ (VaultError::TooLarge { .. } | VaultError::NotUtf8(_))) => {
            let meta = vault.metadata(path)?;
            unreadable_text = Some(text_error(&e));
            (String::new(), 0, meta.size, meta)
        }
        Err(e) => return Err(e),
    };
    let (fm, fm_error) = match frontmatter::split(&text) {
        Ok(s) => (s.frontmatter, None),
        Err(e) => (None, Some(format!("line {}: {}", e.line, e.message))),
    };
    let priority = fm
        .as_ref()
        .and_then(|f| f.get_str("priority"))
        .and_then(Priority::parse)
        .unwrap_or(Priority::Normal);
    let hops_value = fm.as_ref().and_then(|f| f.get("hops")).map(|e| {
        e.value
            .as_u64()
            .or_else(|| e.value.as_str().and_then(|s| s.trim().parse().ok()))
    });
    let (hops, hops_unknown) = match (hops_value, &fm_error) {
        (Some(Some(h)), _) => (h.min(u64::from(u32::MAX)) as u32, false),
        (Some(None), _) | (None, Some(_)) => (0, true),
        (None, None) => (0, false),
    };
    let from = fm.as_ref().and_then(|f| f.get_str("from")).map(str::to_string);
    let draft = fm
        .as_ref()
        .and_then(|f| f.get_str("status"))
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("draft"));
    Ok(Note {
        path: path.clone(),
        text,
        frontmatter: fm,
        frontmatter_error: fm_error,
        text_error: unreadable_text,
        priority,
        hops,
        hops_unknown,
        from,
        draft,
        lines,
        modified: meta.modified.unwrap_or(SystemTime::UNIX_EPOCH),
        size,
        ino: meta.ino,
    })
}

/// An inbox folder as tabd sees it: the notes it may handle and the entries it cannot.
#[derive(Debug, Default)]
pub struct InboxListing {
    /// Regular files with a trigger name (drafts and settling notes included).
    pub notes: Vec<Entry>,
    /// Trigger-like entries tabd cannot read: symlinks, named pipes, non-UTF-8 names.
    pub unreadable: Vec<OddEntry>,
    /// The inbox has a `failed/` folder (so counting failed notes needs a look inside).
    pub has_failed: bool,
}

use crate::base::vault::layout::INBOX_FOLDERS;

/// Why an entry a person put in an inbox is not read, when it looks like it was meant to be: a
/// folder of notes (only notes directly in the inbox are read), or a file that is not Markdown
/// (`notes.txt`). Editor and sync temp files and hidden files are left alone.
fn not_read(e: &crate::base::vault::Entry) -> Option<&'static str> {
    let name = e.path.file_name();
    if is_sync_artifact(name) {
        return Some(
            "a sync tool's conflict copy or placeholder: tabd never runs it (the note it copies runs once); merge it into that note by hand, or delete it",
        );
    }
    if is_temp_name(name) || name.starts_with('.') || e.is_symlink {
        return None;
    }
    if e.is_dir {
        return (!INBOX_FOLDERS.contains(&name))
            .then_some("a folder: tabd reads only notes directly in the inbox; move them up into it");
    }
    let markdown = name.to_lowercase().ends_with(".md");
    (e.is_file && !markdown)
        .then_some("not a Markdown note: tabd reads only `*.md` files; rename it to end in `.md` (or link to it from a note)")
}

/// Lists `inbox` (a missing folder is an empty inbox).
pub fn list(vault: &Vault, inbox: &VaultPath) -> Result<InboxListing, VaultError> {
    let listing = match vault.list(inbox) {
        Ok(l) => l,
        Err(VaultError::NotFound(_)) => return Ok(InboxListing::default()),
        Err(e) => return Err(e),
    };
    let mut out = InboxListing::default();
    for e in listing.entries {
        let name = e.path.file_name();
        if e.is_dir && name == crate::base::vault::layout::FAILED {
            out.has_failed = true;
        }
        if let Some(why) = not_read(&e) {
            out.unreadable.push(OddEntry {
                name: if e.is_dir {
                    format!("{name}/")
                } else {
                    name.to_string()
                },
                why,
            });
            continue;
        }
        if e.is_dir || !is_trigger_name(name) {
            continue;
        }
        if e.is_symlink {
            out.unreadable.push(OddEntry {
                name: name.to_string(),
                why: "it is a symlink; tabd handles only regular files (move the real note here)",
            });
        } else if !e.is_file {
            out.unreadable.push(OddEntry {
                name: name.to_string(),
                why: "it is not a regular file (a named pipe, socket or device)",
            });
        } else {
            out.notes.push(e);
        }
    }
    out.unreadable.extend(
        listing
            .odd
            .into_iter()
            .filter(|o| o.name.to_lowercase().ends_with(".md") && !o.name.starts_with('.')),
    );
    Ok(out)
}

/// What choosing among notes needs to know of one.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub path: VaultPath,
    pub priority: Priority,
    pub modified: SystemTime,
}

/// The notes a run takes: highest priority first, then oldest, then by name (stable across
/// runs); at most `max_batch`. The one place that decides this order.
pub fn select(mut candidates: Vec<Candidate>, max_batch: usize) -> Vec<VaultPath> {
    candidates.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.modified.cmp(&b.modified))
            .then(a.path.cmp(&b.path))
    });
    candidates.truncate(max_batch);
    candidates.into_iter().map(|c| c.path).collect()
}

/// What `ready_notes` found.
#[derive(Debug, Default)]
pub struct Ready {
    /// The notes a run takes, in `select` order.
    pub notes: Vec<Note>,
    /// Notes whose frontmatter cannot be read: never run, they go to `failed/` (`run::refuse`).
    pub unreadable: Vec<Note>,
}

/// The notes a run of `inbox` would take now, read in full, and those it must refuse (for
/// `tabd fire` and `tabd prompt`, which have no settle state: every complete note counts).
pub fn ready_notes(vault: &Vault, inbox: &VaultPath, max_batch: usize) -> Result<Ready, VaultError> {
    let listing = list(vault, inbox)?;
    for odd in &listing.unreadable {
        tracing::warn!("{inbox}: skipping {}: {}", odd.name, odd.why);
    }
    let mut read: Vec<Note> = Vec::new();
    let mut unreadable = Vec::new();
    for e in listing.notes {
        match read_note(vault, &e.path) {
            Ok(n) if n.unreadable().is_some() => unreadable.push(n),
            Ok(n) if !n.draft => read.push(n),
            Ok(_) | Err(VaultError::NotFound(_)) => {}
            Err(err) => tracing::warn!("cannot read inbox note {}: {err}", e.path),
        }
    }
    let candidates = read
        .iter()
        .map(|n| Candidate {
            path: n.path.clone(),
            priority: n.priority,
            modified: n.modified,
        })
        .collect();
    let chosen = select(candidates, max_batch);
    let mut by_path: std::collections::HashMap<VaultPath, Note> =
        read.into_iter().map(|n| (n.path.clone(), n)).collect();
    Ok(Ready {
        notes: chosen.into_iter().filter_map(|p| by_path.remove(&p)).collect(),
        unreadable,
    })
}

/// Where `note` goes in `sub` (`processed` or `failed`): the same name, or `-2`, `-3` … before
/// `.md` when taken. The caller moves it with `Vault::rename_noreplace`, retrying on a race.
pub fn destination(
    vault: &Vault,
    note: &VaultPath,
    sub: &str,
    taken: &[VaultPath],
) -> Result<VaultPath, VaultError> {
    let dir = note.parent().join(sub)?;
    for n in 1..10_000 {
        let candidate = dir.join(&crate::base::vault::numbered_name(note.file_name(), n))?;
        if !vault.exists(&candidate) && !taken.contains(&candidate) {
            return Ok(candidate);
        }
    }
    Err(VaultError::Io(format!(
        "no free name for {} in {dir}",
        note.file_name()
    )))
}

/// Moves `note` to `dest`; if `dest` was taken meanwhile, to the next free name. Returns where it went.
pub fn move_note(vault: &Vault, note: &VaultPath, dest: &VaultPath) -> Result<VaultPath, VaultError> {
    let sub = dest.parent().file_name().to_string();
    let mut target = dest.clone();
    for _ in 0..100 {
        match vault.rename_noreplace(note, &target) {
            Ok(()) => return Ok(target),
            Err(VaultError::AlreadyExists(_)) => target = destination(vault, note, &sub, &[])?,
            Err(e) => return Err(e),
        }
    }
    Err(VaultError::Io(format!(
        "could not move {note}: every name was taken"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_conflict_copies_never_trigger_and_are_named() {
        for copy in [
            "call.sync-conflict-20261122-101500-ABCDEF7.md",
            "call (conflicted copy).md",
            "call (Conflicted copy 2026-11-22 101500).md",
            "call (laptop's conflicted copy 2026-11-22).md",
            ".call.md.icloud",
        ] {
            assert!(is_sync_artifact(copy) && !is_trigger_name(copy), "{copy}");
        }
        assert!(!is_sync_artifact("conflict notes.md") && is_trigger_name("conflict notes.md"));
        let dir = tempfile::tempdir().unwrap();
        let inbox = dir.path().join("agent/inbox/risk");
        std::fs::create_dir_all(&inbox).unwrap();
        std::fs::write(inbox.join("call.md"), "a").unwrap();
        std::fs::write(inbox.join("call.sync-conflict-20261122-101500-ABCDEF7.md"), "b").unwrap();
        std::fs::write(inbox.join(".call.md.icloud"), "").unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let listing = list(&v, &VaultPath::parse("agent/inbox/risk", false).unwrap()).unwrap();
        let notes: Vec<&str> = listing.notes.iter().map(|e| e.path.file_name()).collect();
        assert_eq!(notes, ["call.md"]);
        let named: Vec<&str> = listing.unreadable.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(
            named,
            [".call.md.icloud", "call.sync-conflict-20261122-101500-ABCDEF7.md"]
        );
        assert!(listing.unreadable[0].why.contains("conflict copy"));
    }

    #[test]
    fn trigger_and_temp_names() {
        for ok in ["note.md", "Untitled.md", "2026-11-22 call.md", "UPPER.MD"] {
            assert!(is_trigger_name(ok), "{ok}");
        }
        for no in [
            ".hidden.md",
            "note.md~",
            "~$note.md",
            ".#note.md",
            "note.txt",
            "x.syncthing.note.md.tmp",
            ".syncthing.note.md.tmp",
            "note.md.swp",
            "note.md.part",
            "note.md.tmp",
        ] {
            assert!(!is_trigger_name(no), "{no}");
        }
        for t in [
            ".note.md.swp",
            "note.md~",
            "note.tmp",
            "x.part",
            "~$x.md",
            ".syncthing.x.md.tmp",
        ] {
            assert!(is_temp_name(t), "{t}");
        }
        assert!(!is_temp_name("note.md"));
    }

    fn vault_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        for (p, text) in files {
            let full = dir.path().join(p);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        let v = Vault::open(dir.path()).unwrap();
        (dir, v)
    }

    #[test]
    fn ready_notes_read_frontmatter_and_order_by_priority_then_age() {
        let (dir, v) = vault_with(&[
            ("in/a.md", "first, normal"),
            (
                "in/b.md",
                "---\npriority: urgent\nfrom: risk\nhops: 2\n---\nurgent one",
            ),
            ("in/c.md", "---\npriority: low\n---\nlow"),
            ("in/d.md", "---\nstatus: draft\n---\nnot yet"),
            ("in/e.md", "---\nbroken: [\n---\nstill a note"),
            ("in/f.md", "older, normal"),
            ("in/.hidden.md", "x"),
            ("in/sub/deep.md", "x"),
            ("in/processed/old.md", "x"),
        ]);
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        let f = std::fs::File::options()
            .write(true)
            .open(dir.path().join("in/f.md"))
            .unwrap();
        f.set_modified(old).unwrap();
        let ready = ready_notes(&v, &VaultPath::parse("in", false).unwrap(), 20).unwrap();
        let names: Vec<&str> = ready.notes.iter().map(|n| n.path.file_name()).collect();
        assert_eq!(
            names,
            ["b.md", "f.md", "a.md", "c.md"],
            "drafts and unreadable notes left out"
        );
        let b = &ready.notes[0];
        assert_eq!(
            (b.priority, b.hops, b.from.as_deref()),
            (Priority::Urgent, 2, Some("risk"))
        );
        let [e] = &ready.unreadable[..] else {
            panic!("one unreadable note: {:?}", ready.unreadable)
        };
        assert!(e.frontmatter_error.is_some() && e.text.contains("still a note"));
        let two = ready_notes(&v, &VaultPath::parse("in", false).unwrap(), 2).unwrap();
        assert_eq!(two.notes.len(), 2, "max_batch");
    }

    /// Hostile notes — deep, huge and malformed frontmatter, any body, bytes that are not UTF-8 —
    /// are read; one that cannot be read says why (and is refused, never run); never a panic.
    #[test]
    fn any_note_is_read_or_says_why_it_cannot_be() {
        use crate::formats::frontmatter::hostile;
        use proptest::prelude::*;
        let (dir, v) = vault_with(&[]);
        std::fs::create_dir_all(dir.path().join("in")).unwrap();
        let path = VaultPath::parse("in/n.md", false).unwrap();
        let texts = prop_oneof![
            4 => hostile::file_with(hostile::any_yaml()).prop_map(String::into_bytes),
            1 => proptest::collection::vec(any::<u8>(), 0..200),
        ];
        let mut runner = proptest::test_runner::TestRunner::new(hostile::config(64));
        runner
            .run(&texts, |bytes| {
                std::fs::write(dir.path().join("in/n.md"), &bytes).unwrap();
                let note = read_note(&v, &path).unwrap();
                match note.unreadable() {
                    Some(why) => prop_assert!(why.len() > 10, "{why}"),
                    None => prop_assert!(std::str::from_utf8(&bytes).is_ok()),
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn unreadable_frontmatter_never_resets_a_chain() {
        let (_dir, v) = vault_with(&[
            ("in/a.md", "---\nhops: 3\nfrom: [unclosed\n---\nx"),
            ("in/b.md", "---\nfrom: [unclosed\n---\nno hops line"),
            ("in/c.md", "---\nhops: many\n---\nx"),
            ("in/d.md", "plain note"),
        ]);
        let read = |n: &str| read_note(&v, &VaultPath::parse(&format!("in/{n}"), false).unwrap()).unwrap();
        let a = read("a.md");
        assert!(
            a.hops_unknown && a.frontmatter_error.is_some(),
            "refused, never run"
        );
        assert!(read("b.md").hops_unknown);
        assert!(read("c.md").hops_unknown);
        let d = read("d.md");
        assert_eq!(
            (d.hops, d.hops_unknown),
            (0, false),
            "a person's note starts a chain"
        );
    }

    #[test]
    fn symlinks_and_pipes_are_reported_not_handled() {
        let (dir, v) = vault_with(&[("in/ok.md", "x"), ("elsewhere.md", "y")]);
        std::os::unix::fs::symlink("../elsewhere.md", dir.path().join("in/link.md")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("in/pipe.md"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let listing = list(&v, &VaultPath::parse("in", false).unwrap()).unwrap();
        let ok: Vec<&str> = listing.notes.iter().map(|e| e.path.file_name()).collect();
        assert_eq!(ok, ["ok.md"]);
        let mut odd: Vec<&str> = listing.unreadable.iter().map(|o| o.name.as_str()).collect();
        odd.sort();
        assert_eq!(odd, ["link.md", "pipe.md"]);
        let ready = ready_notes(&v, &VaultPath::parse("in", false).unwrap(), 20).unwrap();
        assert_eq!(ready.notes.len(), 1, "only the regular note is handed to a run");
    }

    #[test]
    fn moves_keep_names_and_suffix_on_collision() {
        let (dir, v) = vault_with(&[
            ("in/x.md", "1"),
            ("in/processed/x.md", "old"),
            ("in/processed/x-2.md", "older"),
        ]);
        let note = VaultPath::parse("in/x.md", false).unwrap();
        let dest = destination(&v, &note, "processed", &[]).unwrap();
        assert_eq!(dest.as_str(), "in/processed/x-3.md");
        let went = move_note(&v, &note, &dest).unwrap();
        assert_eq!(went, dest);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("in/processed/x.md")).unwrap(),
            "old",
            "never overwritten"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("in/processed/x-3.md")).unwrap(),
            "1"
        );
        let (_d2, v2) = vault_with(&[("in/y.md", "1")]);
        let y = VaultPath::parse("in/y.md", false).unwrap();
        assert_eq!(
            destination(&v2, &y, "failed", &[]).unwrap().as_str(),
            "in/failed/y.md"
        );
    }
}
