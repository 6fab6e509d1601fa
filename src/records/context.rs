//! A role's context (docs/spec.md §7.1): which files its `## Context Files` names, their text, and
//! their content hashes — the one place that resolves, reads and hashes them, for the prompt,
//! for `skip_unchanged` and for watched files.
//!
//! Cost does not grow with the vault's history: wikilinks, globs and folders never look into
//! hidden folders (`.tabd`, `.obsidian`, `.trash`, `.git`) or the inboxes' `processed/`,
//! `failed/` and `archive/`. A folder or glob that names many notes degrades gracefully: the
//! newest are included in full up to the entry's share of `max_context_bytes`, the rest (and
//! every note whose `status` says it is closed) are listed in an index the model can
//! `read_file` from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::base::vault::{Canonicals, Entry, Vault, VaultError, VaultPath};
use crate::formats::frontmatter;
use crate::records::access::AccessPolicy;
use crate::setup::role::ContextEntry;

/// Largest context file read at all (bigger ones are listed as not included).
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Note statuses that send a note to the index instead of the prompt.
const CLOSED: &[&str] = &["closed", "done", "resolved", "archived"];

/// A short content hash (16 hex digits of SHA-256).
pub fn hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// True for folders no context entry looks into: hidden folders and the inboxes' history.
pub fn excluded(path: &VaultPath) -> bool {
    let parts: Vec<&str> = path.components().collect();
    if parts.iter().any(|c| c.starts_with('.')) {
        return true;
    }
    matches!(
        parts.as_slice(),
        ["agent", "inbox", _, "processed" | "failed" | "archive", ..]
    )
}

/// One context entry, resolved.
#[derive(Debug, Clone)]
pub struct Group {
    /// The entry as written (`project/blockers/`, `[[team]]`).
    pub entry: String,
    /// A folder or glob (many files, shared budget) rather than one file.
    pub many: bool,
    pub files: Vec<VaultPath>,
}

/// Every file the role's context names, grouped by entry, and the entries that found nothing.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub groups: Vec<Group>,
    pub missing: Vec<String>,
}

impl Resolved {
    pub fn paths(&self) -> impl Iterator<Item = &VaultPath> {
        self.groups.iter().flat_map(|g| g.files.iter())
    }
}

/// Resolves `entries` to files the role may read, each file once, in order.
pub fn resolve(vault: &Vault, policy: &AccessPolicy, entries: &[ContextEntry]) -> Resolved {
    let mut out = Resolved::default();
    let mut seen: BTreeSet<VaultPath> = BTreeSet::new();
    let canon = vault.canonicals();
    // Globs and wikilinks need a listing of the vault: made once, and only if one is used.
    let needs_listing = entries
        .iter()
        .any(|e| matches!(e, ContextEntry::Glob(_) | ContextEntry::Wikilink(_)));
    let all_files: Vec<Entry> = if needs_listing {
        files_under(vault, &VaultPath::root())
    } else {
        Vec::new()
    };
    for entry in entries {
        let (many, found) = match entry {
            ContextEntry::File(p) => (false, file_entry(&canon, policy, p)),
            ContextEntry::Folder(p) => (true, folder_entry(vault, &canon, policy, p)),
            ContextEntry::Glob(g) => (true, glob_entry(&all_files, g)),
            ContextEntry::Wikilink(name) => (false, resolve_wikilink(&all_files, name).into_iter().collect()),
        };
        if found.is_empty() {
            out.missing.push(entry.to_string());
            continue;
        }
        let files: Vec<VaultPath> = found.into_iter().filter(|p| seen.insert(p.clone())).collect();
        if files.is_empty() {
            continue; // everything it names is already included by an earlier entry
        }
        out.groups.push(Group {
            entry: entry.to_string(),
            many,
            files,
        });
    }
    out
}

/// Every file under `dir`, never entering excluded folders.
fn files_under(vault: &Vault, dir: &VaultPath) -> Vec<Entry> {
    vault
        .walk(dir, true, &excluded)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.is_file)
        .collect()
}

fn file_entry(canon: &Canonicals<'_>, policy: &AccessPolicy, raw: &str) -> Vec<VaultPath> {
    // The access check's lookup already said whether it exists.
    match VaultPath::parse(raw, false).and_then(|p| policy.check_read_with(canon, &p).map(|_| p)) {
        Ok(p) if !canon.found_missing(&p) => vec![p],
        _ => Vec::new(),
    }
}

fn folder_entry(vault: &Vault, canon: &Canonicals<'_>, policy: &AccessPolicy, raw: &str) -> Vec<VaultPath> {
    match VaultPath::parse(raw, false) {
        Ok(dir) if policy.check_read_with(canon, &dir).is_ok() => files_under(vault, &dir)
            .into_iter()
            .map(|e| e.path)
            .filter(|p| p.as_str().to_lowercase().ends_with(".md"))
            .collect(),
        _ => Vec::new(),
    }
}

fn glob_entry(all_files: &[Entry], pattern: &str) -> Vec<VaultPath> {
    match crate::records::access::glob(pattern) {
        Ok(glob) => {
            let m = glob.compile_matcher();
            all_files
                .iter()
                .filter(|e| m.is_match(e.path.as_str()))
                .map(|e| e.path.clone())
                .collect()
        }
        Err(_) => Vec::new(),
    }
}

/// Obsidian's rule: the link names a note by file name (or a path suffix), `.md` implied; when
/// several match, the one with the shortest path wins.
fn resolve_wikilink(files: &[Entry], name: &str) -> Option<VaultPath> {
    let target = name.trim().trim_end_matches(".md").to_lowercase();
    let suffix = format!("/{target}");
    files
        .iter()
        .filter(|e| {
            let p = e.path.as_str().to_lowercase();
            p.strip_suffix(".md")
                .is_some_and(|stem| stem == target || stem.ends_with(&suffix))
        })
        .min_by_key(|e| (e.path.as_str().len(), e.path.clone()))
        .map(|e| e.path.clone())
}

/// A context file, read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: VaultPath,
    pub text: String,
    pub hash: String,
    pub modified: Option<SystemTime>,
    pub size: u64,
}

impl Loaded {
    /// The note's title: frontmatter `title`, else its first `# ` heading, else its file name.
    pub fn title(&self) -> String {
        let split = frontmatter::split(&self.text).ok();
        if let Some(t) = split
            .as_ref()
            .and_then(|s| s.frontmatter.as_ref())
            .and_then(|f| f.get_str("title"))
        {
            return t.trim().to_string();
        }
        let body = split.map_or(self.text.as_str(), |s| {
            &self.text[s.body_offset.min(self.text.len())..]
        });
        body.lines()
            .find_map(|l| l.strip_prefix("# "))
            .map(|t| t.trim().to_string())
            .unwrap_or_else(|| self.path.file_name().trim_end_matches(".md").to_string())
    }

    /// The note's `status` is one that means it is finished (closed, done, resolved, archived).
    pub fn closed_status(&self) -> Option<String> {
        let status = frontmatter::split(&self.text)
            .ok()?
            .frontmatter?
            .get_str("status")?
            .trim()
            .to_lowercase();
        CLOSED.contains(&status.as_str()).then_some(status)
    }
}

/// Reads `path` for the context; `Err` says why it is not included.
pub fn load(vault: &Vault, path: &VaultPath) -> Result<Loaded, VaultError> {
    let (text, entry) = vault.read_for_model(path, MAX_READ_BYTES)?;
    Ok(Loaded {
        hash: hash(text.as_bytes()),
        path: path.clone(),
        text,
        modified: entry.modified,
        size: entry.size,
    })
}

/// What changed between two hash sets: (new, changed, gone).
pub fn diff<'a>(
    before: &'a BTreeMap<String, String>,
    now: &'a BTreeMap<String, String>,
) -> (Vec<&'a String>, Vec<&'a String>, Vec<&'a String>) {
    let new = now.keys().filter(|k| !before.contains_key(*k)).collect();
    let changed = now
        .iter()
        .filter(|(k, h)| before.get(*k).is_some_and(|p| p != *h))
        .map(|(k, _)| k)
        .collect();
    let gone = before.keys().filter(|k| !now.contains_key(*k)).collect();
    (new, changed, gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    fn vault_with(files: &[&str]) -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let full = dir.path().join(f);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, format!("# {f}\n")).unwrap();
        }
        let v = Vault::open(dir.path()).unwrap();
        (dir, v)
    }

    #[test]
    fn history_and_hidden_folders_are_never_searched() {
        for path in [
            ".tabd/state.json",
            ".obsidian/app.json",
            ".trash/team.md",
            ".git/x",
            "agent/inbox/comms/processed/team.md",
            "agent/inbox/comms/failed/a.md",
            "agent/inbox/comms/archive/a.md",
        ] {
            assert!(excluded(&p(path)), "{path}");
        }
        for path in [
            "agent/inbox/comms/new.md",
            "project/team.md",
            "agent/memory/comms.md",
        ] {
            assert!(!excluded(&p(path)), "{path}");
        }
    }

    #[test]
    fn wikilinks_and_globs_skip_processed_notes() {
        let (_d, v) = vault_with(&[
            "agent/inbox/comms/processed/team.md",
            "agent/inbox/comms/processed/x/risk-a.md",
            "project/people/team.md",
            "project/risks/risk-b.md",
        ]);
        let entries = [
            ContextEntry::Wikilink("team".into()),
            ContextEntry::Glob("**/risk-*.md".into()),
        ];
        let r = resolve(&v, &AccessPolicy::new(&[]), &entries);
        let all: Vec<&str> = r.paths().map(|p| p.as_str()).collect();
        assert_eq!(all, ["project/people/team.md", "project/risks/risk-b.md"]);
    }

    #[test]
    fn shortest_path_wins_for_a_wikilink_and_duplicates_are_dropped() {
        let (_d, v) = vault_with(&["team.md", "project/team.md", "project/scope.md"]);
        let entries = [
            ContextEntry::Wikilink("Team".into()),
            ContextEntry::File("team.md".into()),
            ContextEntry::File("nope.md".into()),
            ContextEntry::Folder("project/".into()),
        ];
        let r = resolve(&v, &AccessPolicy::new(&[]), &entries);
        let groups: Vec<(String, Vec<&str>)> = r
            .groups
            .iter()
            .map(|g| (g.entry.clone(), g.files.iter().map(|f| f.as_str()).collect()))
            .collect();
        assert_eq!(
            groups,
            [
                ("[[Team]]".to_string(), vec!["team.md"]),
                (
                    "project/".to_string(),
                    vec!["project/scope.md", "project/team.md"]
                ),
            ]
        );
        assert_eq!(r.missing, ["nope.md"]);
    }

    #[test]
    fn titles_and_closed_statuses() {
        let l = |text: &str| Loaded {
            path: p("project/risks/r.md"),
            text: text.into(),
            hash: String::new(),
            modified: None,
            size: 0,
        };
        assert_eq!(l("---\ntitle: From FM\n---\n# H\n").title(), "From FM");
        assert_eq!(l("intro\n# The heading\n").title(), "The heading");
        assert_eq!(l("no heading").title(), "r");
        assert_eq!(
            l("---\nstatus: Resolved\n---\n").closed_status().as_deref(),
            Some("resolved")
        );
        assert_eq!(l("---\nstatus: open\n---\n").closed_status(), None);
    }
}
