//! Inbox notes (DESIGN §5): which files are triggers, their frontmatter, their order, and the
//! moves to `processed/` and `failed/`.

use std::time::SystemTime;

use crate::frontmatter::{self, Frontmatter};
use crate::vault::{Vault, VaultError, VaultPath};

/// Largest note tabd reads as a trigger; bigger ones are still handled, their text cut.
pub const MAX_NOTE_BYTES: u64 = 1024 * 1024;

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
    pub text: String,
    pub frontmatter: Option<Frontmatter>,
    /// Why the frontmatter could not be read, if it could not (the note is still handled).
    pub frontmatter_error: Option<String>,
    pub priority: Priority,
    pub hops: u32,
    pub from: Option<String>,
    pub draft: bool,
    pub modified: SystemTime,
    pub size: u64,
}

impl Note {
    pub fn name(&self) -> &str {
        self.path.file_name()
    }
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
    let meta = vault.metadata(path)?;
    let text = match vault.read_text(path, MAX_NOTE_BYTES) {
        Ok(t) => t,
        Err(VaultError::Io(msg)) if msg.contains("limit") || msg.contains("UTF-8") => {
            format!("[tabd could not include this note's text: {msg}]")
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
    let hops = fm
        .as_ref()
        .and_then(|f| f.get("hops"))
        .and_then(|e| {
            e.value
                .as_u64()
                .or_else(|| e.value.as_str().and_then(|s| s.trim().parse().ok()))
        })
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32;
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
        priority,
        hops,
        from,
        draft,
        modified: meta.modified.unwrap_or(SystemTime::UNIX_EPOCH),
        size: meta.size,
    })
}

/// Every trigger note directly in `inbox` (drafts included, flagged), unordered.
pub fn scan(vault: &Vault, inbox: &VaultPath) -> Result<Vec<Note>, VaultError> {
    let entries = match vault.walk(inbox, false, &|_| false) {
        Ok(e) => e,
        Err(VaultError::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut notes = Vec::new();
    for e in entries {
        if e.is_dir || !is_trigger_name(e.path.file_name()) {
            continue;
        }
        match read_note(vault, &e.path) {
            Ok(n) => notes.push(n),
            // Gone between listing and reading (moved by someone): not ours to handle now.
            Err(VaultError::NotFound(_)) => {}
            Err(err) => tracing::warn!("cannot read inbox note {}: {err}", e.path),
        }
    }
    Ok(notes)
}

/// Highest priority first, then oldest first, then by name (stable across runs).
pub fn order(notes: &mut [Note]) {
    notes.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.modified.cmp(&b.modified))
            .then(a.path.cmp(&b.path))
    });
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
        let candidate = dir.join(&crate::vault::numbered_name(note.file_name(), n))?;
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
    fn scan_reads_frontmatter_and_orders_by_priority_then_age() {
        let (dir, v) = vault_with(&[
            ("in/a.md", "first, normal"),
            (
                "in/b.md",
                "---\npriority: urgent\nfrom: risk\nhops: 2\n---\nurgent one",
            ),
            ("in/c.md", "---\npriority: low\n---\nlow"),
            ("in/d.md", "---\nstatus: draft\n---\nnot yet"),
            ("in/e.md", "---\nbroken: [\n---\nstill a note"),
            ("in/.hidden.md", "x"),
            ("in/sub/deep.md", "x"),
            ("in/processed/old.md", "x"),
        ]);
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        let f = std::fs::File::options()
            .write(true)
            .open(dir.path().join("in/e.md"))
            .unwrap();
        f.set_modified(old).unwrap();
        let mut notes = scan(&v, &VaultPath::parse("in", false).unwrap()).unwrap();
        order(&mut notes);
        let names: Vec<&str> = notes.iter().map(|n| n.name()).collect();
        assert_eq!(names[0], "b.md");
        assert_eq!(names[1], "e.md", "oldest normal-priority note next");
        assert_eq!(*names.last().unwrap(), "c.md");
        assert_eq!(notes.len(), 5);
        let b = &notes[0];
        assert_eq!(
            (b.priority, b.hops, b.from.as_deref()),
            (Priority::Urgent, 2, Some("risk"))
        );
        assert!(notes.iter().find(|n| n.name() == "d.md").unwrap().draft);
        let e = notes.iter().find(|n| n.name() == "e.md").unwrap();
        assert!(e.frontmatter_error.is_some() && e.text.contains("still a note"));
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
