//! The grant policy (docs/spec.md §20): what a child's sandbox, as the person writes it in
//! `[mcp.NAME]` or `[profiles.NAME]` (`ChildSandbox`, plain data the config holds), grants at one
//! start — everything readable but what is hidden, its own folders writable, plus the vault,
//! folders, files and sockets the config names. It looks at the filesystem (what a named path is,
//! what the vault holds), so it lives here beside the rules it feeds, not in the config.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::places::{canonical_existing, Places};
use super::{tree, Grants, Spec, DEVICES};
use crate::base::vault::layout::Layout;
use crate::base::vault::protected::{fold_inboxes, kept_from_children_below, own_places, Folded};

/// How much of the vault a child may reach directly (else only through tabd's tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VaultAccess {
    #[default]
    None,
    Read,
    Write,
}

impl VaultAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// One child's grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSandbox {
    pub vault: VaultAccess,
    pub network: bool,
    /// Extra folders or files it may read even where hidden (`~` is the home folder).
    pub readable: Vec<String>,
    /// Extra folders or files it may change.
    pub writable: Vec<String>,
    /// More places it may not read, beside the secrets tabd always hides.
    pub deny_read: Vec<String>,
    /// Unix socket files it may connect to (docker's, say).
    pub unix_sockets: Vec<String>,
}

impl Default for ChildSandbox {
    fn default() -> Self {
        Self {
            vault: VaultAccess::None,
            network: true,
            readable: Vec::new(),
            writable: Vec::new(),
            deny_read: Vec::new(),
            unix_sockets: Vec::new(),
        }
    }
}

/// What tabd knows about the child it is starting.
pub struct Start<'a> {
    /// tabd's places (the vault, the home folder, tabd's state and config).
    pub places: &'a Places,
    /// The child's own folders: its state folder and its temp folder, and another folder it works
    /// in (an agent CLI's run folder). All canonical.
    pub own: &'a [PathBuf],
    /// Sockets it must reach (an agent CLI's relay to tabd's tools).
    pub sockets: &'a [PathBuf],
    /// Its arguments and `env` values, expanded: paths named there are granted.
    pub args: &'a [String],
    pub env: &'a [(String, String)],
}

impl ChildSandbox {
    /// `~/x` → the home folder's `x`.
    pub fn expand(&self, path: &str, home: Option<&Path>) -> PathBuf {
        expand_home(path, home)
    }

    /// The rules for one start.
    pub fn grants(&self, start: &Start<'_>) -> Grants {
        let places = start.places;
        let home = places.home.as_deref();
        let deny: Vec<PathBuf> = self.deny_read.iter().map(|p| expand_home(p, home)).collect();
        let mut g = Grants {
            spec: Spec {
                hidden: places.hidden(&deny),
                private: start.own.to_vec(),
                devices: DEVICES.iter().map(PathBuf::from).collect(),
                sockets: start.sockets.to_vec(),
                network: self.network,
                ..Spec::default()
            },
            ..Grants::default()
        };
        let grant = |key: &str, raw: &str, write: bool, g: &mut Grants| {
            let path = expand_home(raw, home);
            let Ok(real) = std::fs::canonicalize(&path) else {
                g.refused
                    .push(format!("{key}: {raw} does not exist; nothing granted there"));
                return;
            };
            match places.never_granted(&real) {
                Some(why) => g.refused.push(format!("{key}: {raw} is not granted: {why}")),
                None if write => g.spec.writable.push(real),
                None => g.spec.readable.push(real),
            }
        };
        for p in &self.readable {
            grant("readable", p, false, &mut g);
        }
        for p in &self.writable {
            grant("writable", p, true, &mut g);
        }
        for p in &self.unix_sockets {
            let path = expand_home(p, home);
            match std::fs::canonicalize(&path) {
                Ok(real) => g.spec.sockets.push(real),
                Err(_) => g.refused.push(format!("unix_sockets: {p} does not exist")),
            }
        }
        let hidden = g.spec.hidden.clone();
        named_paths(start, &hidden, &mut g);
        vault(self.vault, places, &mut g.spec);
        g
    }
}

/// `~/x` → the home folder's `x`.
pub fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ if path == "~" => home.map_or_else(|| PathBuf::from(path), Path::to_path_buf),
        _ => PathBuf::from(path),
    }
}

/// Code a child runs is readable already; writing it would let a child change what runs next.
const CODE: &[&str] = &[
    "js", "mjs", "cjs", "ts", "py", "pyc", "sh", "rb", "pl", "jar", "php", "lua",
];

/// Paths the person names in the child's `env` values and `args` (`MEMORY_FILE_PATH =
/// "/home/me/graphs/work.jsonl"`, a data folder as an argument): the config is the person's, so
/// each is granted as what it is — a folder: that folder; a file: that file, and its folder too
/// when the folder holds nothing else (servers write a temporary file beside theirs and rename it
/// over: they need the folder); a file that does not exist yet: made empty at the start (and its
/// folder, one level, if that is missing too) — never one that is or holds the home folder, the
/// vault or tabd's places, never a secret, never a program or script.
fn named_paths(start: &Start<'_>, hidden: &[PathBuf], g: &mut Grants) {
    let values = start
        .args
        .iter()
        .map(|a| ("args", a.as_str()))
        .chain(start.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for (key, value) in values {
        // `--db=/x/y.db` names a path too.
        let value = value.rsplit_once('=').map_or(value, |(_, v)| v);
        if !value.starts_with('/') || value.contains('\n') {
            continue;
        }
        let Some(named) = Named::resolve(Path::new(value)) else {
            continue;
        };
        let refused = |p: &Path| -> Option<String> {
            if let Some(why) = start.places.never_granted(p) {
                return Some(why.to_string());
            }
            hidden.iter().any(|h| p.starts_with(h)).then(|| {
                "it is among the secrets tabd hides (grant it with `readable` or `writable` if you mean it)".to_string()
            })
        };
        if let Some(why) = refused(&named.path) {
            g.refused.push(format!("{key}: {value} is not granted: {why}"));
            continue;
        }
        grant(g, (key, value), named, &refused);
    }
}

/// Grants the path `named` (`value` of `key`) as what it is: a folder, that folder; a file,
/// that file, or its folder when the folder holds only it (and `refused` does not refuse it); a
/// file not there yet, made empty at the start. A program or script is left read-only.
fn grant(
    g: &mut Grants,
    (key, value): (&str, &str),
    named: Named,
    refused: &dyn Fn(&Path) -> Option<String>,
) {
    let exists = named.exists();
    match named.kind {
        Kind::Folder => {
            g.granted
                .push(format!("{key}: {} writable", named.path.display()));
            g.spec.writable.push(named.path);
        }
        Kind::File { exists: true } if is_code(&named.path) => {} // readable like every program
        Kind::NewFile { .. } | Kind::File { .. } if named.path.extension().is_none() && !exists => {
            g.refused.push(format!(
                "{key}: {value} does not exist; make it to grant it (a file is made only for a name with an extension)"
            ));
        }
        kind => {
            let folder = named.path.parent().map(Path::to_path_buf).unwrap_or_default();
            let new_folder = matches!(kind, Kind::NewFile { new_folder: true });
            let own_folder = (new_folder || holds_only(&folder, &named.path)) && refused(&folder).is_none();
            if new_folder {
                g.make_folders.push(folder.clone());
            }
            if !exists {
                g.to_create.push(named.path.clone());
            }
            g.granted.push(format!(
                "{key}: {} writable{}{}",
                named.path.display(),
                if own_folder {
                    format!(", with its folder {} (it holds only this file)", folder.display())
                } else {
                    String::new()
                },
                if exists {
                    ""
                } else {
                    " — made empty at the first start"
                }
            ));
            if own_folder {
                g.spec.writable.push(folder);
            } else {
                g.spec.writable.push(named.path);
            }
        }
    }
}

/// A path named in a child's config, resolved.
struct Named {
    /// Canonical (its deepest existing folder made canonical).
    path: PathBuf,
    kind: Kind,
}

enum Kind {
    Folder,
    File {
        exists: bool,
    },
    /// Not there yet; `new_folder`: its folder is not either (but the one above is).
    NewFile {
        new_folder: bool,
    },
}

impl Named {
    fn resolve(path: &Path) -> Option<Self> {
        if let Ok(real) = std::fs::canonicalize(path) {
            let kind = if real.is_dir() {
                Kind::Folder
            } else {
                Kind::File { exists: true }
            };
            return Some(Self { path: real, kind });
        }
        let name = path.file_name()?;
        let parent = path.parent()?;
        if let Ok(folder) = std::fs::canonicalize(parent) {
            return folder.is_dir().then(|| Self {
                path: folder.join(name),
                kind: Kind::NewFile { new_folder: false },
            });
        }
        let above = std::fs::canonicalize(parent.parent()?)
            .ok()
            .filter(|a| a.is_dir())?;
        Some(Self {
            path: above.join(parent.file_name()?).join(name),
            kind: Kind::NewFile { new_folder: true },
        })
    }

    fn exists(&self) -> bool {
        matches!(self.kind, Kind::Folder | Kind::File { exists: true })
    }
}

/// Whether `folder` holds nothing but `file` and files named after it (its temporary copies,
/// its backups).
fn holds_only(folder: &Path, file: &Path) -> bool {
    let Some(name) = file.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    std::fs::read_dir(folder).is_ok_and(|entries| {
        entries
            .flatten()
            .all(|e| e.file_name().to_string_lossy().starts_with(&name))
    })
}

fn is_code(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    CODE.contains(&ext)
        || path
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `vault = "read"`: every entry of the vault but `.tabd/`, readable (links never followed: a
/// link in the vault cannot carry the grant elsewhere). `"write"`: the same writable, except
/// what no role may write either (docs/spec.md §24) — tabd's own files, the person's roles and
/// decisions, every role's inbox wherever its `## Inbox` puts it, Obsidian's settings, and files
/// other programs load at any depth, found under the one name comparison roles use
/// (`protected::fold`) — which stay read-only. The folders that hold one are granted entry by
/// entry, so none of those names can be made there either; in a folder granted whole a new one
/// can (Landlock grants folders, not names): what a call leaves there is moved aside after it
/// (`vault::leftovers`).
fn vault(access: VaultAccess, places: &Places, spec: &mut Spec) {
    let root = &places.vault;
    let tabd = root.join(crate::base::vault::layout::TABD);
    match access {
        VaultAccess::None => {}
        VaultAccess::Read => spec.readable.extend(tree::all_but(root, &[tabd])),
        VaultAccess::Write => {
            let inboxes = fold_inboxes(&places.inboxes);
            let mut found = Vec::new();
            find_kept(
                root,
                &Folded::default(),
                (&inboxes, &places.layout),
                0,
                &mut found,
            );
            let own = own_places(&places.layout);
            let listed: Vec<PathBuf> = own
                .tabd_owns
                .iter()
                .chain(&own.protected)
                .map(|p| root.join(&p.path))
                .chain(
                    places
                        .inboxes
                        .iter()
                        .filter(|i| in_vault(i))
                        .map(|i| root.join(i)),
                )
                .collect();
            // Those not there yet: the folders above them are split, so they cannot be made.
            let missing = listed.iter().filter(|p| p.symlink_metadata().is_err()).cloned();
            let kept = canonical_existing(found.into_iter().chain(listed.iter().cloned()).collect());
            let mut hidden: Vec<PathBuf> = kept.iter().cloned().chain(missing).collect();
            hidden.push(tabd.clone());
            spec.writable.extend(tree::all_but(root, &hidden));
            let readable: Vec<PathBuf> = kept.into_iter().filter(|k| !k.starts_with(&tabd)).collect();
            spec.readable.extend(
                readable
                    .iter()
                    .flat_map(|k| tree::all_but(k, std::slice::from_ref(&tabd))),
            );
        }
    }
}

/// Whether `rel` names a place inside the vault, not its root (only plain parts: a role's inbox
/// is a vault path already; this keeps a join from leaving the vault whatever the list holds).
fn in_vault(rel: &str) -> bool {
    let parts = Path::new(rel).components();
    !rel.is_empty()
        && parts
            .into_iter()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// How deep `vault = "write"` looks for what it keeps read-only (far deeper than a vault's
/// notes go; links are never followed, so there are no loops).
const KEPT_DEPTH: usize = 64;

/// Every entry under `dir` (at `at`, folded) that a child may not write, at any depth
/// (`inboxes`: the roles', folded).
fn find_kept(
    dir: &Path,
    at: &Folded,
    (inboxes, layout): (&[Folded], &Layout),
    depth: usize,
    out: &mut Vec<PathBuf>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = at.join(&e.file_name().to_string_lossy());
        if kept_from_children_below(&name, inboxes, layout).is_some() {
            out.push(e.path());
        } else if depth < KEPT_DEPTH && e.file_type().is_ok_and(|t| t.is_dir()) {
            find_kept(&e.path(), &name, (inboxes, layout), depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(root: &Path) -> Places {
        Places {
            home: Some(root.to_path_buf()),
            vault: root.join("Vault"),
            config: vec![root.join(".config/tabd")],
            state: root.join(".local/state/tabd"),
            inboxes: Vec::new(),
            layout: Default::default(),
        }
    }

    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "one scene read top to bottom; length is a production rule"
    )]
    fn paths_named_in_env_and_args_are_granted_as_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            "Vault/project",
            "graphs",
            "code",
            "docs",
            ".local/state/tabd",
            ".ssh",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("code/server.js"), "x").unwrap();
        std::fs::write(root.join("docs/other.txt"), "x").unwrap();
        let p = places(&root);
        let named = |rel: &str| root.join(rel).display().to_string();
        let env = vec![
            ("MEMORY_FILE_PATH".to_string(), named("graphs/work.jsonl")),
            ("IN_HOME".to_string(), named("new.json")),
            ("SHARED".to_string(), named("docs/x.json")),
            ("NEW_FOLDER".to_string(), named("tabd-memory/memory.jsonl")),
            ("KEYS".to_string(), named(".ssh")),
        ];
        let args = vec![
            named("code/server.js"),
            named("Vault/project"),
            root.display().to_string(),
            format!("--data={}", named("code")),
            "-y".into(),
        ];
        let g = ChildSandbox::default().grants(&Start {
            places: &p,
            own: &[],
            sockets: &[],
            args: &args,
            env: &env,
        });
        let w = &g.spec.writable;
        assert!(
            w.contains(&root.join("graphs")),
            "a folder that holds only the file: {g:#?}"
        );
        assert!(
            w.contains(&root.join("new.json")),
            "in the home folder: that file only"
        );
        assert!(
            w.contains(&root.join("docs/x.json")) && !w.contains(&root.join("docs")),
            "a shared folder: the file only"
        );
        assert!(w.contains(&root.join("tabd-memory")), "a new folder made for it");
        assert!(w.contains(&root.join("code")), "a folder named in the arguments");
        assert_eq!(g.make_folders, [root.join("tabd-memory")]);
        assert_eq!(
            g.to_create,
            [
                root.join("graphs/work.jsonl"),
                root.join("new.json"),
                root.join("docs/x.json"),
                root.join("tabd-memory/memory.jsonl")
            ]
        );
        assert!(
            !w.iter().any(|x| x == &root || x.starts_with(root.join("Vault"))),
            "{w:?}"
        );
        assert!(
            !w.contains(&root.join("code/server.js")),
            "a script stays read-only"
        );
        assert!(
            !w.contains(&root.join(".ssh")),
            "secrets are not granted by naming them"
        );
        let notes = g.refused.join("\n");
        assert!(
            notes.contains("home folder as a whole") && notes.contains("vault"),
            "{notes}"
        );
    }

    /// Issue 36, items 5, 6 and 10: what a child granted `vault = "write"` may not write is what
    /// no role may: tabd's own files, in every spelling, files other programs load at any depth
    /// — and tabd's files not made yet cannot be made.
    #[test]
    fn vault_write_keeps_tabds_own_files_and_every_spelling_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            "Vault/.tabd/groups",
            "Vault/daily",
            "Vault/agent/memory",
            "Vault/notes/a/b/c/d/e/f/.git/hooks",
            "Vault/Project",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "daily/2026-11-25.md",
            "agent/status.md",
            "memory.md",
            "agent/memory/risk.md",
            "Project/CLAUDE.MD",
            "Project/Mise.toml",
            "Project/plan.md",
            "notes/a/b/c/d/e/f/.git/config",
            "notes/a/x.md",
        ] {
            std::fs::write(root.join("Vault").join(f), "x").unwrap();
        }
        let p = places(&root);
        let spec = ChildSandbox {
            vault: VaultAccess::Write,
            ..ChildSandbox::default()
        }
        .grants(&Start {
            places: &p,
            own: &[],
            sockets: &[],
            args: &[],
            env: &[],
        })
        .spec;
        let v = |s: &str| root.join("Vault").join(s);
        for ro in [
            "daily/2026-11-25.md",
            "daily/2026-11-26.md",
            "agent/status.md",
            "memory.md",
            "agent/memory/risk.md",
            "agent/memory/delivery.md",
            "agent/approvals/x.md",
            "Project/CLAUDE.MD",
            "Project/Mise.toml",
            "notes/a/b/c/d/e/f/.git/config",
            "notes/a/b/c/d/e/f/.git/hooks/pre-commit",
        ] {
            assert!(!spec.may_write(&v(ro)), "{ro} writable");
        }
        assert!(!spec.may_read(&v(".tabd/groups/1.json")));
        assert!(spec.may_write(&v("Project/plan.md")) && spec.may_write(&v("notes/a/x.md")));
    }

    /// Issue 36: every role's inbox is kept from a `vault = "write"` child wherever its `## Inbox`
    /// puts it (a note there starts a run as if the person had dropped it), in every spelling,
    /// and one not made yet cannot be made; the folders beside stay writable.
    #[test]
    fn vault_write_keeps_every_roles_inbox_read_only_wherever_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["Vault/project/Incoming/processed", "Vault/project/notes"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("Vault/project/plan.md"), "x").unwrap();
        let mut p = places(&root);
        p.inboxes = vec!["project/incoming".into(), "project/later/".into()];
        let start = Start {
            places: &p,
            own: &[],
            sockets: &[],
            args: &[],
            env: &[],
        };
        let sb = ChildSandbox {
            vault: VaultAccess::Write,
            ..ChildSandbox::default()
        };
        let spec = sb.grants(&start).spec;
        let v = |s: &str| root.join("Vault").join(s);
        for ro in [
            "project/Incoming/ping.md",
            "project/Incoming/processed/old.md",
            "project/later/ping.md",
            "project/later",
            "project/new.md",
        ] {
            assert!(!spec.may_write(&v(ro)), "{ro} writable");
        }
        assert!(spec.may_read(&v("project/Incoming/ping.md")));
        assert!(spec.may_write(&v("project/notes/a.md")) && spec.may_write(&v("project/plan.md")));
    }

    #[test]
    fn vault_write_keeps_settings_and_decisions_read_only_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            "Vault/.tabd",
            "Vault/roles",
            "Vault/agent/approvals",
            "Vault/agent/notes",
            "Vault/project/.git",
            "Vault/.obsidian",
            ".ssh",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("Vault/Claude.md"), "x").unwrap();
        std::fs::write(root.join("Vault/project/a.md"), "x").unwrap();
        std::os::unix::fs::symlink(root.join(".ssh"), root.join("Vault/keys")).unwrap();
        let p = places(&root);
        let start = Start {
            places: &p,
            own: &[],
            sockets: &[],
            args: &[],
            env: &[],
        };
        let sb = ChildSandbox {
            vault: VaultAccess::Write,
            ..ChildSandbox::default()
        };
        let spec = sb.grants(&start).spec;
        let v = |s: &str| root.join("Vault").join(s);
        assert!(spec.may_write(&v("agent/notes/a.md")));
        assert!(spec.may_write(&v("project/a.md")));
        // A folder that holds a protected entry is granted entry by entry: its existing files.
        assert!(!spec.may_write(&v("project/new.md")));
        for ro in [
            "roles/x.md",
            "agent/approvals/x.md",
            "project/.git/config",
            ".obsidian/app.json",
            "Claude.md",
        ] {
            assert!(!spec.may_write(&v(ro)), "{ro} writable");
            assert!(spec.may_read(&v(ro)), "{ro} unreadable");
        }
        assert!(!spec.may_read(&v(".tabd/state.json")));
        assert!(
            !spec.may_write(&v("keys/id_rsa")) && !spec.readable.contains(&v("keys")),
            "the link is not granted"
        );
        let read = ChildSandbox {
            vault: VaultAccess::Read,
            ..ChildSandbox::default()
        }
        .grants(&start)
        .spec;
        assert!(read.may_read(&v("project/a.md")) && !read.may_write(&v("project/a.md")));
        assert!(!read.readable.contains(&v("keys")));
        assert!(!read.may_read(&v(".tabd/x")));
    }
}
