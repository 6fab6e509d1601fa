//! What a role may read and write in the vault (DESIGN §8): protected folders, `write_paths`, refused reads.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::role::Role;
use crate::vault::{Vault, VaultError, VaultPath};

/// Folders no tool reads: tabd's own state and git's.
const UNREADABLE: &[&str] = &[".tabd", ".git"];

/// Folders no tool writes unless the role's `write_paths` names them explicitly.
const PROTECTED: &[(&str, &str)] = &[
    ("roles", "role files are edited by you, not by the agent"),
    (".tabd", "tabd's own state"),
    (".obsidian", "Obsidian's settings"),
    (".git", "the vault's git history"),
    (".trash", "Obsidian's trash"),
    // Inboxes are written only by `trigger_role`, which sets `hops`, so chains stay bounded.
    ("agent/inbox", "inboxes take notes through trigger_role only"),
];

/// Folders no role may ever write, whatever its `write_paths` say.
const NEVER_WRITABLE: &[(&str, &str)] = &[(
    "agent/approvals",
    "approval notes are decided by the person; a role can never create, edit or move them, so it cannot approve its own calls",
)];

/// A role's access rules, built once per run.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// `write_paths` as written and compiled; `None` = anywhere not protected.
    write_paths: Option<(Vec<String>, GlobSet)>,
}

impl AccessPolicy {
    pub fn for_role(role: &Role) -> Self {
        Self::new(&role.settings.write_paths)
    }

    pub fn new(write_paths: &[String]) -> Self {
        if write_paths.is_empty() {
            return Self { write_paths: None };
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
        }
    }

    /// Checks a read; returns the canonical path to use.
    pub fn check_read(&self, vault: &Vault, path: &VaultPath) -> Result<VaultPath, VaultError> {
        refuse_unreadable(path)?;
        let real = vault.canonical(path)?;
        refuse_unreadable(&real)?;
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

    fn check_write_lexical(&self, path: &VaultPath) -> Result<(), VaultError> {
        let lower = VaultPath::parse(&path.as_str().to_lowercase(), true)?;
        if let Some((dir, why)) = NEVER_WRITABLE.iter().find(|(d, _)| lower.starts_with(d)) {
            return Err(VaultError::Refused(format!("{path} is in {dir}/: {why}")));
        }
        for (dir, why) in PROTECTED {
            if lower.starts_with(dir) && !self.names(path, dir) {
                return Err(VaultError::Refused(format!(
                    "{path} is in {dir}/ ({why}); a role may write there only if its write_paths names it"
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

    /// True when a `write_paths` pattern starting with `dir/` matches `path`.
    fn names(&self, path: &VaultPath, dir: &str) -> bool {
        let Some((patterns, _)) = &self.write_paths else {
            return false;
        };
        patterns.iter().any(|p| {
            p.to_lowercase().starts_with(&format!("{dir}/"))
                && glob(p).is_ok_and(|g| g.compile_matcher().is_match(path.as_str()))
        })
    }
}

fn refuse_unreadable(path: &VaultPath) -> Result<(), VaultError> {
    let lower = path.as_str().to_lowercase();
    let lower = VaultPath::parse(&lower, true)?;
    if let Some(dir) = UNREADABLE.iter().find(|d| lower.starts_with(d)) {
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
}
