//! `tabd init`: the skeleton vault and the stock roles, embedded in the binary.

use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

use crate::base::vault::layout;

static VAULT_TEMPLATE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/vault-template");
static STOCK_ROLES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/roles");

/// Folders every vault has, created empty when missing.
const FOLDERS: &[&str] = &[
    layout::DAILY,
    layout::ROLE_MEMORIES,
    "agent/drafts",
    layout::TABD,
    layout::RUNS,
];

/// What `init` did.
#[derive(Debug, Default)]
pub struct InitReport {
    pub created: Vec<PathBuf>,
    pub kept: Vec<PathBuf>,
    pub folders: Vec<PathBuf>,
}

/// Creates the vault at `root` from the template. Never overwrites a file.
pub fn init_vault(root: &Path) -> std::io::Result<InitReport> {
    let mut report = InitReport::default();
    std::fs::create_dir_all(root)?;
    let mut files: Vec<(PathBuf, &[u8])> = Vec::new();
    collect(&VAULT_TEMPLATE, Path::new(""), &mut files);
    collect(&STOCK_ROLES, Path::new("roles"), &mut files);
    for (rel, contents) in files {
        let path = root.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // `create_new` so that a file appearing between check and write is never clobbered.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(contents)?;
                f.sync_all()?;
                report.created.push(rel);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => report.kept.push(rel),
            Err(e) => return Err(e),
        }
    }
    let inboxes = stock_role_names()
        .into_iter()
        .map(|r| crate::base::vault::layout::default_inbox(&r));
    for folder in FOLDERS.iter().map(|s| s.to_string()).chain(inboxes) {
        let path = root.join(&folder);
        if !path.exists() {
            std::fs::create_dir_all(&path)?;
            report.folders.push(PathBuf::from(folder));
        }
    }
    report.created.sort();
    report.kept.sort();
    Ok(report)
}

/// The SHA-256 (hex) of the bytes `init` writes at `path` (vault-relative), if it writes that
/// file: a vault file holding exactly these bytes is one tabd made (`records::authorship`).
pub fn digest_of(path: &str) -> Option<String> {
    use sha2::Digest;
    let bytes = file_bytes(path)?;
    Some(
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// The bytes `init` writes at `path` (vault-relative), if it writes that file.
pub fn file_bytes(path: &str) -> Option<&'static [u8]> {
    match path.strip_prefix(&format!("{}/", layout::ROLES)) {
        Some(role) => STOCK_ROLES.get_file(role),
        None => VAULT_TEMPLATE.get_file(path),
    }
    .map(|f| f.contents())
}

/// Names of the runnable stock roles (`delivery`, …), without the abstract ones.
pub fn stock_role_names() -> Vec<String> {
    let mut names: Vec<String> = STOCK_ROLES
        .files()
        .filter_map(|f| f.path().file_stem()?.to_str().map(str::to_string))
        .filter(|n| !n.starts_with('_'))
        .collect();
    names.sort();
    names
}

fn collect<'a>(dir: &'a Dir<'a>, prefix: &Path, out: &mut Vec<(PathBuf, &'a [u8])>) {
    for file in dir.files() {
        out.push((prefix.join(file.path()), file.contents()));
    }
    for sub in dir.dirs() {
        collect(sub, prefix, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_everything_then_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let first = init_vault(dir.path()).unwrap();
        assert!(first.created.contains(&PathBuf::from("roles/delivery.md")));
        assert!(first
            .created
            .contains(&PathBuf::from("project/blockers/auth-delay.md")));
        assert!(dir.path().join("agent/inbox/delivery").is_dir());
        assert!(dir.path().join("agent/inbox/product").is_dir());
        assert!(!dir.path().join("agent/inbox/_base").exists());

        std::fs::write(dir.path().join("memory.md"), "mine").unwrap();
        let second = init_vault(dir.path()).unwrap();
        assert!(second.created.is_empty());
        assert_eq!(second.kept.len(), first.created.len());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("memory.md")).unwrap(),
            "mine"
        );
    }

    /// Issue 39, item 8: every link in a new vault opens a note that is there (Obsidian finds a
    /// wikilink by its name anywhere in the vault), and every note the README names in code
    /// (`memory.md`) is in the vault or one tabd writes — its `docs/getting-started.md` was not.
    #[test]
    fn every_link_and_note_the_template_names_is_in_the_vault() {
        use pulldown_cmark::{Event, Options, Parser, Tag};
        let dir = tempfile::tempdir().unwrap();
        let report = init_vault(dir.path()).unwrap();
        let notes: Vec<String> = report
            .created
            .iter()
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .collect();
        let stems: Vec<&str> = notes
            .iter()
            .filter_map(|n| n.strip_suffix(".md"))
            .flat_map(|n| [n, n.rsplit('/').next().unwrap_or(n)])
            .collect();
        let mut checked = 0;
        for note in notes.iter().filter(|n| n.ends_with(".md")) {
            let text = std::fs::read_to_string(dir.path().join(note)).unwrap();
            for ev in Parser::new_ext(&text, Options::ENABLE_WIKILINKS) {
                match ev {
                    Event::Start(Tag::Link { dest_url, .. }) => {
                        checked += 1;
                        let dest = dest_url.split('#').next().unwrap_or("");
                        let dest = dest.strip_suffix(".md").unwrap_or(dest);
                        // A skill links its own files relative to its folder (the format's rule).
                        let in_skill = note
                            .strip_prefix("skills/")
                            .and_then(|n| n.split_once('/'))
                            .map(|(skill, _)| format!("skills/{skill}/{dest}"));
                        let dest = in_skill.as_deref().unwrap_or(dest);
                        assert!(
                            dest.starts_with("https://") || stems.contains(&dest),
                            "{note} links {dest_url}, which is not in the vault"
                        );
                    }
                    Event::Code(code) if note == "README.md" && code.ends_with(".md") => {
                        checked += 1;
                        assert!(
                            notes.iter().any(|n| **n == *code) || *code == *layout::STATUS_NOTE,
                            "the README names {code}, which is not in the vault"
                        );
                    }
                    _ => {}
                }
            }
        }
        assert!(checked >= 4, "links and names looked at: {checked}");
    }

    #[test]
    fn stock_roles_are_the_four_of_the_seed() {
        assert_eq!(stock_role_names(), ["comms", "delivery", "product", "risk"]);
    }
}
