//! `tabd init`: the stock roles and tabd's folders, and the example vault, embedded in the binary.
//!
//! Two shapes (docs/spec.md §26):
//! - **a new, empty folder** (or `--example`): the example vault — a made-up project, a README,
//!   a memory and a skill — so a person sees tabd work at once;
//! - **a vault a person already lives in** (`.obsidian/`, or notes of theirs): only what tabd
//!   needs, all under one folder of its own (`Layout`'s home, `tabd/`): the stock roles, the
//!   inboxes, the folders tabd writes. No sample note, no invented memory, no README.
//!
//! Either way nothing is ever overwritten, and every file and folder made or kept is reported.
//! Paths in the stock roles and the example (`project/…`, `agent/…`) are written where the
//! layout puts them.

use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

use crate::base::vault::layout::{self, Layout};

static VAULT_TEMPLATE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/vault-template");
static STOCK_ROLES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/roles");

/// The names a home is tried under, in order, in a vault that has notes (the first that is
/// free, or already tabd's).
pub const HOMES: &[&str] = &["tabd", "_tabd", "tabd-agent"];

/// What a folder is, as `init` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Missing or empty: the example vault goes there (tabd's folders at its root).
    Empty,
    /// tabd is there already, its folders where `Layout` says: only what is missing is added.
    Tabds(Layout),
    /// A person's vault (Obsidian's settings, or notes of theirs): tabd goes under a home.
    Persons,
}

/// What `init` does at one folder.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layout: Layout,
    /// The example project, README, memory and skill too.
    pub example: bool,
    /// The run log's folder (the README says where it is).
    pub log: String,
}

/// What `init` did (paths relative to the vault).
#[derive(Debug, Default)]
pub struct InitReport {
    pub created: Vec<PathBuf>,
    pub kept: Vec<PathBuf>,
    pub folders: Vec<PathBuf>,
}

/// What `root` is (`known`: the layout a config gives it, if any).
pub fn find(root: &Path, known: Option<&Layout>) -> Found {
    if let Some(layout) = known {
        return Found::Tabds(layout.clone());
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Found::Empty;
    };
    let names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != layout::TABD)
        .collect();
    if names.is_empty() {
        return Found::Empty;
    }
    for home in HOMES {
        if holds_roles(&root.join(home).join(Layout::default().roles())) {
            return Found::Tabds(Layout::under(home));
        }
    }
    let root_layout = Layout::default();
    if holds_roles(&root.join(root_layout.roles())) && root.join(root_layout.inboxes()).is_dir() {
        return Found::Tabds(root_layout);
    }
    Found::Persons
}

/// The home for tabd in a person's vault `root`: the first of `HOMES` not taken by something
/// else.
pub fn free_home(root: &Path) -> Layout {
    let home = HOMES
        .iter()
        .find(|h| !root.join(h).exists())
        .unwrap_or(&HOMES[HOMES.len() - 1]);
    Layout::under(home)
}

/// Whether `dir` holds at least one file that reads as a role (a `# Title` and a `## Mission`).
fn holds_roles(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name().to_string_lossy().ends_with(".md")
            && crate::base::vault::read_regular_path(&e.path(), 64 * 1024)
                .is_ok_and(|t| looks_like_a_role(&t))
    })
}

/// Whether `text` reads as a role file: a `# Title` and a `## Mission`, at the start of lines.
pub fn looks_like_a_role(text: &str) -> bool {
    let lines = || text.lines().map(str::trim_end);
    lines().any(|l| l.starts_with("# "))
        && lines().any(|l| l.trim_end_matches(':').eq_ignore_ascii_case("## mission"))
}

/// Makes what `plan` says at `root`. Never overwrites a file.
pub fn init_vault(root: &Path, plan: &Plan) -> std::io::Result<InitReport> {
    let mut report = InitReport::default();
    std::fs::create_dir_all(root)?;
    for (rel, contents) in files_of(plan) {
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
                f.write_all(&contents)?;
                f.sync_all()?;
                report.created.push(rel);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => report.kept.push(rel),
            Err(e) => return Err(e),
        }
    }
    let l = &plan.layout;
    let inboxes = stock_role_names().into_iter().map(|r| l.default_inbox(&r));
    let folders = [
        plan.log.clone(),
        l.role_memories(),
        l.drafts(),
        layout::TABD.to_string(),
        layout::RUNS.to_string(),
    ];
    for folder in folders.into_iter().chain(inboxes) {
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

/// Every file `plan` writes: (vault path, bytes) — the stock roles, and the example if asked.
fn files_of(plan: &Plan) -> Vec<(PathBuf, Vec<u8>)> {
    let mut raw: Vec<(PathBuf, &[u8])> = Vec::new();
    if plan.example {
        collect(&VAULT_TEMPLATE, Path::new(""), &mut raw);
    }
    collect(&STOCK_ROLES, Path::new(layout::ROLES_NAME), &mut raw);
    raw.into_iter()
        .map(|(rel, bytes)| {
            let template = rel.to_string_lossy().replace('\\', "/");
            let placed = plan.layout.from_template(&template);
            (PathBuf::from(placed), render(bytes, &plan.layout, &plan.log))
        })
        .collect()
}

/// `bytes` (a template file) with the vault paths it names where `layout` puts them and the log
/// in `log`: `project/`, `agent/`, `roles/`, `skills/`, `memory.md`, `daily/`, each where a path
/// starts (not inside a word or another path). A file that is not text is as it is.
pub fn render(bytes: &[u8], layout: &Layout, log: &str) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return bytes.to_vec();
    };
    if layout.home().is_none() && log == Layout::default().daily() {
        return bytes.to_vec();
    }
    let moves = layout.template_moves(log);
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    let mut prev: Option<char> = None;
    'scan: while let Some(c) = rest.chars().next() {
        let starts_path = prev.is_none_or(|p| !(p.is_alphanumeric() || "/._-".contains(p)));
        if starts_path {
            for (from, to) in &moves {
                if let Some(after) = rest.strip_prefix(from) {
                    out.push_str(to);
                    prev = from.chars().last();
                    rest = after;
                    continue 'scan;
                }
            }
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out.into_bytes()
}

/// The SHA-256 (hex) of the bytes `init` writes at `path` (a vault path, where `layout` puts tabd's
/// folders, the log in `log`), if it writes that file: a vault file holding exactly these bytes is
/// one tabd made (`records::authorship`).
pub fn digest_of(path: &str, layout: &Layout, log: &str) -> Option<String> {
    use sha2::Digest;
    let template = layout.to_template(path)?;
    let bytes = render(file_bytes(template)?, layout, log);
    Some(
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// The bytes of the template file `path` (as the template spells it: `roles/x.md`,
/// `project/scope.md`), if there is one.
pub fn file_bytes(path: &str) -> Option<&'static [u8]> {
    match path.strip_prefix(&format!("{}/", layout::ROLES_NAME)) {
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

    fn example() -> Plan {
        Plan {
            layout: Layout::default(),
            example: true,
            log: "daily".into(),
        }
    }

    #[test]
    fn creates_everything_then_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let first = init_vault(dir.path(), &example()).unwrap();
        assert!(first.created.contains(&PathBuf::from("roles/delivery.md")));
        assert!(first
            .created
            .contains(&PathBuf::from("project/blockers/auth-delay.md")));
        assert!(dir.path().join("agent/inbox/delivery").is_dir());
        assert!(dir.path().join("agent/inbox/product").is_dir());
        assert!(!dir.path().join("agent/inbox/_base").exists());

        std::fs::write(dir.path().join("memory.md"), "mine").unwrap();
        let second = init_vault(dir.path(), &example()).unwrap();
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
        let report = init_vault(dir.path(), &example()).unwrap();
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
                            notes.iter().any(|n| **n == *code) || *code == *Layout::default().status_note(),
                            "the README names {code}, which is not in the vault"
                        );
                    }
                    _ => {}
                }
            }
        }
        assert!(checked >= 4, "links and names looked at: {checked}");
    }

    /// Issue 48, item 2: in a vault with notes only tabd's own things are made, all under one
    /// folder, its roles pointing at its folders there; the example comes only when asked, under
    /// the same folder.
    #[test]
    fn a_vault_with_notes_gets_tabds_folders_under_one_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".obsidian")).unwrap();
        std::fs::write(dir.path().join("Journal.md"), "mine\n").unwrap();
        std::fs::create_dir_all(dir.path().join("roles")).unwrap();
        std::fs::write(dir.path().join("roles/frodo.md"), "Frodo: hobbit\n").unwrap();
        assert_eq!(find(dir.path(), None), Found::Persons);
        let layout = free_home(dir.path());
        assert_eq!(layout.home(), Some("tabd"));
        let plan = Plan {
            log: layout.daily(),
            layout,
            example: false,
        };
        let report = init_vault(dir.path(), &plan).unwrap();
        let mut top: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(
            top,
            [".obsidian", ".tabd", "Journal.md", "roles", "tabd"],
            "one new name, and .tabd"
        );
        assert!(
            report.created.iter().all(|p| p.starts_with("tabd/roles")),
            "{:?}",
            report.created
        );
        let delivery = std::fs::read_to_string(dir.path().join("tabd/roles/delivery.md")).unwrap();
        assert!(delivery.contains("write_paths: [tabd/project/]"), "{delivery}");
        assert!(delivery.contains("tabd/agent/inbox/delivery/"), "{delivery}");
        assert!(delivery.contains("- tabd/project/scope.md"), "{delivery}");
        let base = std::fs::read_to_string(dir.path().join("tabd/roles/_base.md")).unwrap();
        assert!(base.contains("- tabd/memory.md"), "{base}");
        assert!(dir.path().join("tabd/agent/inbox/risk").is_dir());
        assert!(dir.path().join("tabd/log").is_dir());
        assert!(!dir.path().join("tabd/project").exists(), "no sample project");
        assert!(!dir.path().join("tabd/memory.md").exists(), "no invented memory");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("roles/frodo.md")).unwrap(),
            "Frodo: hobbit\n"
        );
        // Found again: tabd's, under its home; the example comes when asked, under the home too.
        assert_eq!(find(dir.path(), None), Found::Tabds(Layout::under("tabd")));
        let again = init_vault(
            dir.path(),
            &Plan {
                example: true,
                ..plan
            },
        )
        .unwrap();
        assert!(
            again.created.contains(&PathBuf::from("tabd/project/scope.md")),
            "{:?}",
            again.created
        );
        let readme = std::fs::read_to_string(dir.path().join("tabd/README.md")).unwrap();
        assert!(
            readme.contains("`tabd/roles/`") && readme.contains("`tabd/log/`"),
            "{readme}"
        );
        assert!(!readme.contains("`daily/`"), "{readme}");
    }

    #[test]
    fn render_moves_paths_only_where_a_path_starts() {
        let l = Layout::under("tabd");
        let out = render(
            b"see project/x.md, myproject/y and `memory.md`; daily/ and agent/inbox/",
            &l,
            "tabd/log",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "see tabd/project/x.md, myproject/y and `tabd/memory.md`; tabd/log/ and tabd/agent/inbox/"
        );
        assert_eq!(render(b"project/", &Layout::default(), "daily"), b"project/");
        assert_eq!(
            render(b"in daily/", &Layout::default(), "tabd-log"),
            b"in tabd-log/"
        );
    }

    #[test]
    fn stock_roles_are_the_four_of_the_seed() {
        assert_eq!(stock_role_names(), ["comms", "delivery", "product", "risk"]);
    }
}
