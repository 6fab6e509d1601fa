//! What a role may read and write in the vault (docs/spec.md §8, §24): tabd's own files (never),
//! protected folders and files other programs load (only where `write_paths` name them),
//! `write_paths`, refused reads. Every name is compared through `protected::fold`, the one
//! comparison the child sandbox uses too.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::base::calls::{Mode, PERSON_NOTES};

use crate::base::vault::protected::{self, fold, normal, Folded};
use crate::base::vault::{Canonicals, Vault, VaultError, VaultPath};
use crate::setup::role::Role;

/// Why the log folder is tabd's, when `[log] folder` moved it from `daily/`.
const LOG_WHY: &str = "the daily run log: tabd writes each run's section and its Undo line";

/// Refuses `path` (folded: `norm`) in or above the log folder `log`, where `[log] folder` put it.
fn log_folder(path: &VaultPath, norm: &Folded, log: &str) -> Result<(), VaultError> {
    let folder = fold(log);
    if norm.within(&folder) {
        return Err(VaultError::Refused(format!(
            "{path} is tabd's own ({log}, the [log] folder: {LOG_WHY}); no role writes it, whatever its \
             write_paths say"
        )));
    }
    if norm.holds(&folder) {
        return Err(VaultError::Refused(format!(
            "{path} holds {log} (the [log] folder: {LOG_WHY}); it can be neither replaced nor moved"
        )));
    }
    Ok(())
}

/// A role's access rules, built once per run.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// `write_paths` as written and compiled; `None` = anywhere not protected.
    write_paths: Option<(Vec<String>, GlobSet)>,
    /// `move_folders: true`: `move_file` may move whole folders (never one that holds a
    /// protected path).
    move_folders: bool,
    /// Every role's inbox, as written and folded: `## Inbox` may name any folder, and each is
    /// protected like `agent/inbox/` (a note there starts a run; only `trigger_role` writes one,
    /// counting the chain's hops).
    inboxes: Vec<(String, Folded)>,
    /// `approve: {person_notes: …}` where the role (or a role it extends) says it: what a change
    /// to the person's own note does (docs/spec.md §26).
    person_notes: Option<Mode>,
}

impl AccessPolicy {
    pub fn for_role(role: &Role) -> Self {
        Self {
            move_folders: role.settings.move_folders(),
            person_notes: role.settings.approve.get(PERSON_NOTES).copied(),
            ..Self::new(&role.settings.write_paths)
        }
    }

    /// What changing `path`, a note of the person's, does for this role: `approve:
    /// {person_notes: …}` where the role says it (the stock roles say `ask`); otherwise `auto`
    /// where a `write_paths` entry names the note's folder — or the note — by name (`Personal/`,
    /// `Work/*.md`): the person wrote that grant; otherwise `ask`. An entry that starts with a
    /// wildcard (`**/*.md`) names no folder and grants nothing.
    pub fn person_note_mode(&self, path: &VaultPath) -> Mode {
        if let Some(mode) = self.person_notes {
            return mode;
        }
        let granted = self.write_paths.as_ref().is_some_and(|(patterns, _)| {
            patterns.iter().any(|p| {
                names_a_place(p) && glob(p).is_ok_and(|g| g.compile_matcher().is_match(path.as_str()))
            })
        });
        if granted {
            Mode::Auto
        } else {
            Mode::Ask
        }
    }

    /// The same policy, with every role's inbox protected wherever `## Inbox` puts it: a role
    /// that wrote a note straight into another's inbox (`write_file`, `hops: 0`) started a run
    /// no chain counted, and two roles doing so kept triggering each other.
    pub fn with_inboxes<'a>(mut self, inboxes: impl IntoIterator<Item = &'a VaultPath>) -> Self {
        self.inboxes = inboxes
            .into_iter()
            .map(|inbox| {
                (
                    inbox.as_str().trim_end_matches('/').to_string(),
                    fold(inbox.as_str()),
                )
            })
            .filter(|(_, folded)| !folded.cased.is_empty())
            .collect();
        self
    }

    pub fn new(write_paths: &[String]) -> Self {
        if write_paths.is_empty() {
            return Self {
                write_paths: None,
                move_folders: false,
                inboxes: Vec::new(),
                person_notes: None,
            };
        }
        let mut builder = GlobSetBuilder::new();
        let mut kept = Vec::new();
        for pattern in write_paths {
            let pattern = pattern.trim().trim_start_matches("./");
            // A folder written as `project/` means everything under it.
            let expanded = if pattern.ends_with('/') {
                format!("{pattern}**")
            } else {
                pattern.to_string()
            };
            if let Ok(glob) = glob(&expanded) {
                builder.add(glob);
                kept.push(expanded);
            }
        }
        let set = builder.build().unwrap_or_else(|_| GlobSet::empty());
        Self {
            write_paths: Some((kept, set)),
            move_folders: false,
            inboxes: Vec::new(),
            person_notes: None,
        }
    }

    /// Whether `path` — or, for a folder, something in it — is where this role's `write_paths`
    /// say it may write (false with no `write_paths`: that is anywhere, not a place).
    pub fn names_in_write_paths(&self, path: &VaultPath) -> bool {
        self.write_paths.as_ref().is_some_and(|(_, set)| {
            set.is_match(path.as_str()) || set.is_match(format!("{}/x.md", path.as_str()))
        })
    }

    /// Checks a read; returns the canonical path to use.
    pub fn check_read(&self, vault: &Vault, path: &VaultPath) -> Result<VaultPath, VaultError> {
        self.check_read_with(&vault.canonicals(), path)
    }

    /// `check_read` for many paths, each folder resolved once.
    pub fn check_read_with(&self, canon: &Canonicals<'_>, path: &VaultPath) -> Result<VaultPath, VaultError> {
        refuse_unreadable(path)?;
        let real = canon.canonical(path)?;
        if real != *path {
            refuse_unreadable(&real)?;
        }
        Ok(real)
    }

    /// Checks a write (or the removal side of a move); returns the canonical path.
    pub fn check_write(&self, vault: &Vault, path: &VaultPath) -> Result<VaultPath, VaultError> {
        if path.is_root() {
            return Err(VaultError::Refused("the vault root is not a file".into()));
        }
        self.check_write_lexical(path, vault)?;
        let real = vault.canonical(path)?;
        if real != *path {
            self.check_write_lexical(&real, vault).map_err(|e| match e {
                VaultError::Refused(why) => VaultError::Refused(format!("{path} is a link to {real}: {why}")),
                other => other,
            })?;
        }
        Ok(real)
    }

    /// Checks what `tabd undo` puts back: as a write, except memory files, which a run changes
    /// only through `remember` (tabd's own append on its behalf): undoing the run takes its
    /// lines out again. Never through a link.
    pub fn check_restore(&self, vault: &Vault, path: &VaultPath) -> Result<VaultPath, VaultError> {
        let layout = vault.layout();
        let memory = [layout.memory(), layout.role_memories()];
        match protected::owned_by_tabd(&fold(path.as_str()), layout) {
            Some((owned, _)) if memory.contains(&owned) => {
                let real = vault.canonical(path)?;
                if real != *path {
                    return Err(VaultError::Refused(format!(
                        "{path} is a link; memory files must be plain files"
                    )));
                }
                Ok(real)
            }
            _ => self.check_write(vault, path),
        }
    }

    /// Checks a move: both ends as writes, and the thing moved a file — or, for a role with
    /// `move_folders`, a folder that holds no protected path. Returns both canonical paths.
    pub fn check_move(
        &self,
        vault: &Vault,
        from: &VaultPath,
        to: &VaultPath,
    ) -> Result<(VaultPath, VaultPath), VaultError> {
        let real_from = self.check_write(vault, from)?;
        let real_to = self.check_write(vault, to)?;
        let meta = vault.metadata(&real_from)?;
        if meta.is_dir {
            if !self.move_folders {
                return Err(VaultError::Refused(format!(
                    "{from} is a folder; move_file moves files only (a person can allow folder moves with \
                     `move_folders: true` in the role's settings)"
                )));
            }
            // Whatever a folder holds moves with it: a protected path inside would move too.
            let inside = vault.walk(&real_from, true, &|_| false)?;
            for e in inside {
                self.check_write_lexical(&e.path, vault)
                    .map_err(|err| match err {
                        VaultError::Refused(why) => VaultError::Refused(format!(
                            "{from} holds {}, so it cannot be moved: {why}",
                            e.path
                        )),
                        other => other,
                    })?;
            }
        } else if !meta.is_file {
            return Err(VaultError::Refused(format!("{from} is not a file")));
        }
        if real_to.starts_with(real_from.as_str()) {
            return Err(VaultError::Refused(format!("cannot move {from} into itself")));
        }
        Ok((real_from, real_to))
    }

    /// The rules that look at the path itself (applied to the path as given and to where it
    /// leads after symlinks), with the vault's layout and log folder.
    fn check_write_lexical(&self, path: &VaultPath, vault: &Vault) -> Result<(), VaultError> {
        let norm = fold(path.as_str());
        refuse_tabds_own(path, &norm, vault)?;
        for p in &protected::own_places(vault.layout()).protected {
            if norm.holds(&p.folded) {
                return Err(VaultError::Refused(format!(
                    "{path} holds {}/ ({}); it can be neither replaced nor moved",
                    p.path, p.why
                )));
            }
            if norm.within(&p.folded) && !self.names(path, &p.folded) {
                return Err(VaultError::Refused(format!(
                    "{path} is in {}/ ({}); a role may write there only if its write_paths names it",
                    p.path, p.why
                )));
            }
        }
        for (name, dir) in &self.inboxes {
            if norm.holds(dir) {
                return Err(VaultError::Refused(format!(
                    "{path} holds the inbox {name}/ (inboxes take notes through trigger_role only); it can be \
                     neither replaced nor moved"
                )));
            }
            if norm.within(dir) && !self.names(path, dir) {
                return Err(VaultError::Refused(format!(
                    "{path} is in the inbox {name}/ (inboxes take notes through trigger_role only, which counts \
                     how long a chain of roles has become); a role may write there only if its write_paths names it"
                )));
            }
        }
        // Files other programs load, at any depth: hidden names, and the visible ones.
        if let Some((i, why)) = norm.loaded_at() {
            let at = Folded {
                cased: norm.cased[..=i].to_vec(),
                shaped: norm.shaped[..=i].to_vec(),
            };
            if !self.names(path, &at) {
                let part = path.as_str().split('/').nth(i).unwrap_or(path.as_str());
                return Err(VaultError::Refused(format!(
                    "{path}: `{part}` is {why}; a role may write it only if its write_paths names it"
                )));
            }
        }
        if let Some((patterns, set)) = &self.write_paths {
            if !set.is_match(path.as_str()) {
                return Err(VaultError::Refused(format!(
                    "{path} is outside this role's write_paths ({})",
                    patterns.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// True when a `write_paths` pattern naming `dir` (folded) itself, not through `**`,
    /// matches `path`.
    fn names(&self, path: &VaultPath, dir: &Folded) -> bool {
        let Some((patterns, _)) = &self.write_paths else {
            return false;
        };
        patterns.iter().any(|p| {
            fold(p).within(dir) && glob(p).is_ok_and(|g| g.compile_matcher().is_match(path.as_str()))
        })
    }
}

/// Refuses `path` (folded: `norm`) in tabd's own files, whatever write_paths say, and every folder
/// above one: moving or replacing it would move tabd's files too. The layout's log folder is
/// tabd's while the log is there; `[log] folder`'s is, wherever it is.
fn refuse_tabds_own(path: &VaultPath, norm: &Folded, vault: &Vault) -> Result<(), VaultError> {
    let places = protected::own_places(vault.layout());
    let moved = !vault.log_in_place();
    let owned = || places.tabd_owns.iter().filter(|p| !(moved && p.is_log()));
    if let Some(p) = owned().find(|p| norm.within(&p.folded)) {
        return Err(VaultError::Refused(format!(
            "{path} is tabd's own ({}: {}); no role writes it, whatever its write_paths say",
            p.path, p.why
        )));
    }
    if moved {
        log_folder(path, norm, &vault.log_folder())?;
    }
    if let Some(p) = owned().find(|p| norm.holds(&p.folded)) {
        return Err(VaultError::Refused(format!(
            "{path} holds {} ({}); it can be neither replaced nor moved",
            p.path, p.why
        )));
    }
    Ok(())
}

fn refuse_unreadable(path: &VaultPath) -> Result<(), VaultError> {
    let norm = fold(path.as_str());
    if let Some((_, name)) = normal()
        .unreadable
        .iter()
        .zip(protected::UNREADABLE)
        .find(|(d, _)| norm.within(d))
    {
        return Err(VaultError::Refused(format!(
            "{path} is in {name}/, which tools may not read"
        )));
    }
    Ok(())
}

/// Whether a `write_paths` pattern begins with a name (a folder or a file), not a wildcard: only
/// such a pattern is a grant for the person's notes it matches.
fn names_a_place(pattern: &str) -> bool {
    let first = pattern.split('/').next().unwrap_or("");
    !first.is_empty() && !first.contains(['*', '?', '[', '{'])
}

/// A glob where `*` stays within one folder and `**` crosses folders.
pub fn glob(pattern: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(pattern).literal_separator(true).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        (dir, v)
    }

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    /// docs/spec.md §26: a role's explicit `approve: {person_notes: …}` decides; else a `write_paths`
    /// entry that names the note's folder (or the note) grants it; a wildcard entry grants nothing.
    #[test]
    fn a_persons_note_asks_unless_granted_by_name() {
        let ask = AccessPolicy::new(&[]);
        assert_eq!(ask.person_note_mode(&p("Personal/ideas.md")), Mode::Ask);
        let named = AccessPolicy::new(&["Personal/".into(), "**/*.txt".into(), "top.md".into()]);
        assert_eq!(named.person_note_mode(&p("Personal/ideas.md")), Mode::Auto);
        assert_eq!(named.person_note_mode(&p("Personal/deep/er.md")), Mode::Auto);
        assert_eq!(named.person_note_mode(&p("top.md")), Mode::Auto);
        assert_eq!(
            named.person_note_mode(&p("Work/a.txt")),
            Mode::Ask,
            "a wildcard names no folder"
        );
        assert_eq!(named.person_note_mode(&p("Work/a.md")), Mode::Ask);
        let mut explicit = named.clone();
        explicit.person_notes = Some(Mode::Ask);
        assert_eq!(
            explicit.person_note_mode(&p("Personal/ideas.md")),
            Mode::Ask,
            "explicit wins"
        );
        explicit.person_notes = Some(Mode::Deny);
        assert_eq!(explicit.person_note_mode(&p("x.md")), Mode::Deny);
    }

    #[test]
    fn default_policy_writes_anywhere_but_protected() {
        let (_d, v) = vault();
        let policy = AccessPolicy::new(&[]);
        assert!(policy.check_write(&v, &p("project/x.md")).is_ok());
        for bad in [
            "roles/x.md",
            ".obsidian/app.json",
            ".git/config",
            ".trash/a.md",
            ".tabd/state.json",
            "agent/inbox/risk/x.md",
            "agent/inbox/risk/processed/x.md",
            "Roles/x.md",
        ] {
            assert!(
                matches!(policy.check_write(&v, &p(bad)), Err(VaultError::Refused(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn write_paths_limit_and_can_name_protected_folders() {
        let (_d, v) = vault();
        let policy = AccessPolicy::new(&["project/**".into(), "notes/".into(), "roles/delivery.md".into()]);
        assert!(policy.check_write(&v, &p("project/a/b.md")).is_ok());
        assert!(policy.check_write(&v, &p("notes/2026-01-01.md")).is_ok());
        assert!(
            policy.check_write(&v, &p("roles/delivery.md")).is_ok(),
            "named explicitly"
        );
        assert!(policy.check_write(&v, &p("roles/risk.md")).is_err());
        let err = policy.check_write(&v, &p("notes.md")).unwrap_err();
        assert!(
            err.to_string().contains("outside this role's write_paths"),
            "{err}"
        );
        let star = AccessPolicy::new(&["**".into()]);
        assert!(
            star.check_write(&v, &p("roles/x.md")).is_err(),
            "`**` does not name roles/"
        );
    }

    /// `## Inbox` may name any folder: each role's inbox is protected like `agent/inbox/`, in
    /// every spelling, its `processed/` too, and the folders above it cannot be moved.
    #[test]
    fn every_roles_inbox_is_written_only_where_write_paths_name_it() {
        let (d, v) = vault();
        std::fs::create_dir_all(d.path().join("project/incoming")).unwrap();
        let inbox = p("project/incoming/");
        let policy = AccessPolicy::new(&[]).with_inboxes([&inbox]);
        for bad in [
            "project/incoming/x.md",
            "Project/INCOMING/x.md",
            "project/incoming./x.md",
            "project/incoming/processed/x.md",
            "project",
        ] {
            let err = policy.check_write(&v, &p(bad)).unwrap_err();
            assert!(
                err.to_string().contains("inbox project/incoming/"),
                "{bad}: {err}"
            );
        }
        assert!(policy.check_write(&v, &p("project/other.md")).is_ok());
        let broad = AccessPolicy::new(&["project/**".into()]).with_inboxes([&inbox]);
        assert!(
            broad.check_write(&v, &p("project/incoming/x.md")).is_err(),
            "`project/**` does not name it"
        );
        let named = AccessPolicy::new(&["project/incoming/**".into()]).with_inboxes([&inbox]);
        assert!(
            named.check_write(&v, &p("project/incoming/x.md")).is_ok(),
            "named explicitly"
        );
    }

    /// `[log] folder` moves what is tabd's with the log (docs/spec.md §24, §26): the folder it names
    /// is, in any spelling and as a folder above it, and so is `agent/log/` (where a day goes
    /// when its note is not tabd's); `daily/` is then the person's, written like any folder.
    #[test]
    fn the_log_folder_is_tabds_wherever_the_config_puts_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("notes")).unwrap();
        let v = Vault::open(d.path()).unwrap().with_log_folder("Logs/tabd");
        let everything = AccessPolicy::new(&["**".into()]);
        for policy in [AccessPolicy::new(&[]), everything] {
            for path in [
                "Logs/tabd/2026-11-25.md",
                "logs/TABD./2026-11-25.md",
                "agent/log/2026-11-25.md",
            ] {
                let err = policy.check_write(&v, &p(path)).unwrap_err().to_string();
                assert!(err.contains("tabd's own"), "{path}: {err}");
            }
            let err = policy.check_move(&v, &p("notes/x.md"), &p("Logs")).unwrap_err();
            assert!(err.to_string().contains("holds Logs/tabd"), "{err}");
            assert!(policy.check_write(&v, &p("daily/2026-11-25.md")).is_ok());
        }
    }

    /// Issue 36, items 5 and 6: tabd's own files are no role's write target, whatever its
    /// write_paths say — in any spelling, as either end of a move, or as a folder above them.
    #[test]
    fn tabds_own_files_are_never_written_whatever_write_paths_say() {
        let (d, v) = vault();
        for dir in [
            "daily",
            "agent/memory",
            "agent/approvals",
            ".tabd/groups",
            "notes",
        ] {
            std::fs::create_dir_all(d.path().join(dir)).unwrap();
        }
        std::fs::write(d.path().join("notes/x.md"), "x").unwrap();
        let owned = [
            "daily/2026-11-25.md",
            "daily/2031-01-01.md",
            "Daily/2026-11-25.md",
            "daily./2026-11-25.md",
            "agent/status.md",
            "agent/Status.MD",
            "agent/status.md.",
            "memory.md",
            "MEMORY.md",
            "agent/memory/risk.md",
            "agent/memory/delivery.md",
            "agent/approvals/x.md",
            ".tabd/groups/123.json",
            ".tabd/suspended/x.json",
            ".TABD/x",
        ];
        let everything = AccessPolicy::new(
            &[
                "daily/**",
                "Daily/**",
                "daily./**",
                "agent/**",
                "agent/status.md",
                "agent/Status.MD",
                "agent/status.md.",
                "memory.md",
                "MEMORY.md",
                "agent/memory/**",
                "agent/approvals/**",
                ".tabd/**",
                ".TABD/**",
                "**",
            ]
            .map(String::from),
        );
        for policy in [AccessPolicy::new(&[]), everything] {
            for path in owned {
                let err = policy.check_write(&v, &p(path)).unwrap_err().to_string();
                assert!(err.contains("tabd's own"), "{path}: {err}");
                let err = policy.check_move(&v, &p("notes/x.md"), &p(path)).unwrap_err();
                assert!(err.to_string().contains("tabd's own"), "→ {path}: {err}");
            }
            for folder in ["agent", "daily"] {
                assert!(
                    policy.check_move(&v, &p(folder), &p("notes/y")).is_err(),
                    "{folder}"
                );
            }
        }
        std::fs::write(d.path().join("daily/2026-11-25.md"), "log").unwrap();
        let err = AccessPolicy::new(&["**".into()])
            .check_move(&v, &p("daily/2026-11-25.md"), &p("notes/log.md"))
            .unwrap_err();
        assert!(err.to_string().contains("tabd's own"), "{err}");
        // A link to one is the file itself.
        std::os::unix::fs::symlink("../daily", d.path().join("notes/log")).unwrap();
        let err = AccessPolicy::new(&["notes/**".into()])
            .check_write(&v, &p("notes/log/2026-11-25.md"))
            .unwrap_err();
        assert!(err.to_string().contains("tabd's own"), "{err}");
        // An undo puts memory back (only `remember` changed it), nothing else of tabd's.
        let policy = AccessPolicy::new(&[]);
        assert!(policy.check_restore(&v, &p("memory.md")).is_ok());
        assert!(policy.check_restore(&v, &p("agent/memory/risk.md")).is_ok());
        assert!(policy.check_restore(&v, &p("daily/2026-11-25.md")).is_err());
        assert!(policy.check_restore(&v, &p("agent/status.md")).is_err());
    }

    #[test]
    fn reads_of_state_and_git_refused() {
        let (_d, v) = vault();
        let policy = AccessPolicy::new(&[]);
        assert!(policy.check_read(&v, &p(".tabd/state.json")).is_err());
        assert!(policy.check_read(&v, &p(".git/config")).is_err());
        assert!(
            policy.check_read(&v, &p("roles/x.md")).is_ok(),
            "roles may be read"
        );
    }

    #[test]
    fn a_link_into_a_protected_folder_is_refused() {
        let (d, v) = vault();
        std::fs::create_dir_all(d.path().join("roles")).unwrap();
        std::fs::create_dir_all(d.path().join("project")).unwrap();
        std::os::unix::fs::symlink("../roles", d.path().join("project/sneaky")).unwrap();
        let err = AccessPolicy::new(&[])
            .check_write(&v, &p("project/sneaky/delivery.md"))
            .unwrap_err();
        assert!(
            err.to_string().contains("is a link to roles/delivery.md"),
            "{err}"
        );
    }

    #[test]
    fn a_protected_path_is_protected_with_every_folder_above_it() {
        let (d, v) = vault();
        std::fs::create_dir_all(d.path().join("agent/approvals")).unwrap();
        std::fs::create_dir_all(d.path().join("agent/inbox/risk")).unwrap();
        std::fs::create_dir_all(d.path().join("notes")).unwrap();
        std::fs::write(d.path().join("notes/x.md"), "x").unwrap();
        let policy = AccessPolicy::new(&[]);
        for (from, to) in [
            ("agent", "xdir"),
            ("agent", "notes/agent"),
            ("notes/x.md", "agent"),
        ] {
            let err = policy.check_move(&v, &p(from), &p(to)).unwrap_err();
            assert!(err.to_string().contains("holds agent/"), "{from} → {to}: {err}");
        }
        // The same through a symlink the vault holds: it resolves to `agent`.
        std::os::unix::fs::symlink("../agent", d.path().join("notes/ag")).unwrap();
        let err = policy.check_move(&v, &p("notes/ag"), &p("xdir")).unwrap_err();
        assert!(err.to_string().contains("agent"), "{err}");
        assert!(d.path().join("agent/approvals").is_dir());
        // Writing a file where the folder is, through the link, is refused too.
        assert!(policy.check_write(&v, &p("notes/ag")).is_err());
        assert!(policy.check_write(&v, &p("notes/ag/approvals/a.md")).is_err());
    }

    #[test]
    fn move_file_moves_files_only_unless_folder_moves_are_granted() {
        let (d, v) = vault();
        std::fs::create_dir_all(d.path().join("project/old")).unwrap();
        std::fs::write(d.path().join("project/old/a.md"), "a").unwrap();
        let files_only = AccessPolicy::new(&[]);
        let err = files_only
            .check_move(&v, &p("project/old"), &p("project/new"))
            .unwrap_err();
        assert!(err.to_string().contains("moves files only"), "{err}");
        assert!(files_only
            .check_move(&v, &p("project/old/a.md"), &p("project/a.md"))
            .is_ok());
        let folders = AccessPolicy {
            move_folders: true,
            ..AccessPolicy::new(&[])
        };
        assert!(folders
            .check_move(&v, &p("project/old"), &p("project/new"))
            .is_ok());
        // A folder holding a protected path never moves, granted or not.
        std::fs::create_dir_all(d.path().join("project/old/.claude")).unwrap();
        std::fs::write(d.path().join("project/old/.claude/settings.json"), "{}").unwrap();
        let err = folders
            .check_move(&v, &p("project/old"), &p("project/new"))
            .unwrap_err();
        assert!(err.to_string().contains(".claude"), "{err}");
    }

    #[test]
    fn look_alike_names_of_protected_folders_are_refused() {
        let (_d, v) = vault();
        let policy = AccessPolicy::new(&[]);
        for bad in [
            "agent/approvals /x.md",
            "agent/approvals./x.md",
            "agent/Approvals/x.md",
            "agent/approval\u{015B}/x.md",
            "agent/approvals\u{0301}/x.md",
            "agent/\u{FF41}pprovals/x.md",
            "Roles/x.md",
            "roles./x.md",
            ".Tabd/x",
        ] {
            let err = policy.check_write(&v, &p(bad));
            assert!(matches!(err, Err(VaultError::Refused(_))), "{bad}: {err:?}");
        }
        assert!(policy
            .check_write(&v, &p("project/R\u{00E9}sum\u{00E9}.md"))
            .is_ok());
        assert_eq!(
            fold("agent/Approval\u{015B} ./x").cased,
            ["agent", "approvals", "x"]
        );
    }

    #[test]
    fn files_other_programs_load_as_settings_are_not_written() {
        let (_d, v) = vault();
        let policy = AccessPolicy::new(&[]);
        for bad in [
            ".claude/settings.json",
            "project/.claude/settings.local.json",
            ".mcp.json",
            "CLAUDE.md",
            "project/AGENTS.md",
            ".gemini/settings.json",
            ".codex/config.toml",
            ".vscode/tasks.json",
            ".envrc",
            ".git/hooks/pre-commit",
            ".obsidian/plugins/x/main.js",
            // Issue 29, item 5: written once, by a model, and then loaded by other programs.
            "project/.git/config",
            "project/.hg/hgrc",
            ".github/workflows/ci.yml",
            ".github/copilot-instructions.md",
            "AGENTS.override.md",
            ".cursorrules",
            ".windsurfrules",
            ".clinerules",
            ".zed/settings.json",
            "opencode.json",
            ".continue/config.json",
            ".roo/rules.md",
            ".kiro/steering.md",
            ".amazonq/rules.md",
            ".npmrc",
            ".mise.toml",
            // Case variants: the same file on macOS and Windows.
            ".Claude/settings.json",
            "Claude.md",
            ".MCP.json",
            "project/agents.md",
            // Issue 36, item 10: what a stock role made, and more spellings of each.
            "CLAUDE.MD",
            "AGENTS.MD",
            "AGENTS.override.MD",
            "gemini.md",
            "conventions.md",
            "Mise.toml",
            "QWEN.MD",
            "agent/INBOX/x.md",
            "\u{FF23}\u{FF2C}\u{FF21}\u{FF35}\u{FF24}\u{FF25}.md",
            "claude.md.",
            "claude.md ",
            "project/package.json",
            "Makefile",
            "project/.claude/settings.json",
            // Invisible characters and look-alikes.
            "CLAUDE\u{00AD}.md",
            "CLAU\u{200D}DE.md",
            "agent/approvaIs/x.md",
            "agent/approva\u{217C}s/x.md",
            "r\u{043E}les/x.md",
        ] {
            let err = policy.check_write(&v, &p(bad));
            assert!(matches!(err, Err(VaultError::Refused(_))), "{bad}: {err:?}");
        }
        for good in [
            "project/notes.md",
            "project/agent notes.md",
            "notes/2026-11-24.md",
        ] {
            assert!(policy.check_write(&v, &p(good)).is_ok(), "{good}");
        }
        let dotted = AccessPolicy::new(&["project/.notes/**".into()]);
        assert!(
            dotted.check_write(&v, &p("project/.notes/a.md")).is_ok(),
            "a hidden folder named explicitly"
        );
        assert!(dotted.check_write(&v, &p("project/.git/config")).is_err());
        let named = AccessPolicy::new(&["CLAUDE.md".into()]);
        assert!(named.check_write(&v, &p("CLAUDE.md")).is_ok(), "named explicitly");
    }
}
