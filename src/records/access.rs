//! What a role may read and write in the vault (DESIGN §8): protected folders, `write_paths`, refused reads.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::base::vault::{Canonicals, Vault, VaultError, VaultPath};
use crate::setup::role::Role;

pub use crate::base::vault::protected::normalised;
use crate::base::vault::protected::{loaded_by_programs, normal};

/// True when `path` (normalised) is `dir` or inside it.
fn within(path: &str, dir: &str) -> bool {
    path == dir || path.starts_with(&format!("{dir}/"))
}

/// True when `path` (normalised) is a folder that contains `dir`.
fn contains(path: &str, dir: &str) -> bool {
    dir.starts_with(&format!("{path}/"))
}

/// A role's access rules, built once per run.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// `write_paths` as written and compiled; `None` = anywhere not protected.
    write_paths: Option<(Vec<String>, GlobSet)>,
    /// `move_folders: true`: `move_file` may move whole folders (never one that holds a
    /// protected path).
    move_folders: bool,
}

impl AccessPolicy {
    pub fn for_role(role: &Role) -> Self {
        Self {
            move_folders: role.settings.move_folders.unwrap_or(false),
            ..Self::new(&role.settings.write_paths)
        }
    }

    pub fn new(write_paths: &[String]) -> Self {
        if write_paths.is_empty() {
            return Self {
                write_paths: None,
                move_folders: false,
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
        }
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
        self.check_write_lexical(path)?;
        let real = vault.canonical(path)?;
        if real != *path {
            self.check_write_lexical(&real).map_err(|e| match e {
                VaultError::Refused(why) => VaultError::Refused(format!("{path} is a link to {real}: {why}")),
                other => other,
            })?;
        }
        Ok(real)
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
                self.check_write_lexical(&e.path).map_err(|err| match err {
                    VaultError::Refused(why) => {
                        VaultError::Refused(format!("{from} holds {}, so it cannot be moved: {why}", e.path))
                    }
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
    /// leads after symlinks).
    fn check_write_lexical(&self, path: &VaultPath) -> Result<(), VaultError> {
        let norm = normalised(path.as_str());
        // A protected path is protected with every folder above it: moving or replacing one of
        // those would move the protected path too.
        for (dir, why) in &normal().never_writable {
            if within(&norm, dir) {
                return Err(VaultError::Refused(format!("{path} is in {dir}/: {why}")));
            }
            if contains(&norm, dir) {
                return Err(VaultError::Refused(format!(
                    "{path} holds {dir}/ ({why}); it can be neither replaced nor moved"
                )));
            }
        }
        for (dir, why) in &normal().protected {
            if contains(&norm, dir) {
                return Err(VaultError::Refused(format!(
                    "{path} holds {dir}/ ({why}); it can be neither replaced nor moved"
                )));
            }
            if within(&norm, dir) && !self.names(path, dir) {
                return Err(VaultError::Refused(format!(
                    "{path} is in {dir}/ ({why}); a role may write there only if its write_paths names it"
                )));
            }
        }
        // Files other programs load, at any depth: hidden names, and the few visible ones.
        let parts: Vec<&str> = norm.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            if let Some(why) = loaded_by_programs(part) {
                let at = parts[..=i].join("/");
                if !self.names(path, &at) {
                    return Err(VaultError::Refused(format!(
                        "{path}: `{part}` is {why}; a role may write it only if its write_paths names it"
                    )));
                }
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

    /// True when a `write_paths` pattern naming `dir` (normalised) itself, not through `**`,
    /// matches `path`.
    fn names(&self, path: &VaultPath, dir: &str) -> bool {
        let Some((patterns, _)) = &self.write_paths else {
            return false;
        };
        patterns.iter().any(|p| {
            let named = normalised(p);
            (named == dir || named.starts_with(&format!("{dir}/")))
                && glob(p).is_ok_and(|g| g.compile_matcher().is_match(path.as_str()))
        })
    }
}

fn refuse_unreadable(path: &VaultPath) -> Result<(), VaultError> {
    let norm = normalised(path.as_str());
    if let Some(dir) = normal().unreadable.iter().find(|d| within(&norm, d)) {
        return Err(VaultError::Refused(format!(
            "{path} is in {dir}/, which tools may not read"
        )));
    }
    Ok(())
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
        let policy = AccessPolicy::new(&["project/**".into(), "daily/".into(), "roles/delivery.md".into()]);
        assert!(policy.check_write(&v, &p("project/a/b.md")).is_ok());
        assert!(policy.check_write(&v, &p("daily/2026-01-01.md")).is_ok());
        assert!(
            policy.check_write(&v, &p("roles/delivery.md")).is_ok(),
            "named explicitly"
        );
        assert!(policy.check_write(&v, &p("roles/risk.md")).is_err());
        let err = policy.check_write(&v, &p("memory.md")).unwrap_err();
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
        assert_eq!(normalised("agent/Approval\u{015B} ./x"), "agent/approvals/x");
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
            "daily/2026-11-24.md",
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
