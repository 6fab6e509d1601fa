//! The places no child reads (docs/spec.md §20): the person's secrets, and tabd's own places — the
//! vault's `.tabd/`, tabd's config and env files, the folders it keeps for children and for
//! agent-CLI runs. Everything else a program needs to run is readable.

use std::path::{Path, PathBuf};

/// Under the home folder: keys, credentials, password stores, shell histories, browser profiles.
/// (Only those that exist are hidden; the rest cannot be read anyway, and a folder created in the
/// home folder after a child starts is not reachable by it.)
pub const SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".pki",
    ".netrc",
    ".git-credentials",
    ".gitcookies",
    ".config/git/credentials",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".oci",
    ".kube",
    ".docker",
    ".config/containers/auth.json",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".s3cfg",
    ".boto",
    ".config/rclone",
    ".config/doctl",
    ".config/gh",
    ".config/hub",
    ".npmrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/python_keyring",
    ".config/op",
    ".config/Bitwarden",
    ".config/1Password",
    ".config/keepassxc",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".var/app",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".gemini/google_accounts.json",
];

/// Where tabd's own things are, for one vault.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    /// The person's home folder.
    pub home: Option<PathBuf>,
    /// The vault (canonical).
    pub vault: PathBuf,
    /// tabd's config file, and the folder of its config and env files.
    pub config: Vec<PathBuf>,
    /// tabd's state folder outside the vault (`~/.local/state/tabd`): children's folders, runs.
    pub state: PathBuf,
    /// Every role's inbox, vault-relative, wherever its `## Inbox` puts it: kept from a child
    /// granted `vault = "write"` like `agent/inbox/` (a note there starts a run). The `[log]
    /// folder`, when not `daily`, is kept so too (tabd's own, docs/spec.md §24).
    pub inboxes: Vec<String>,
    /// Where tabd's own folders are in the vault (`[vault] folder`): kept as they are anywhere.
    pub layout: crate::base::vault::layout::Layout,
}

impl Places {
    /// Where children's folders are kept for this vault: `<state>/children/<vault key>/`.
    pub fn children(&self) -> PathBuf {
        self.state.join("children").join(vault_key(&self.vault))
    }

    /// Where agent-CLI runs get their private folders.
    pub fn runs(&self) -> PathBuf {
        self.state.join("runs")
    }

    /// Every place hidden from children (canonical, existing), before any grant: the vault, its
    /// `.tabd/`, tabd's config and state, the person's secrets and `deny_read` (`extra`).
    pub fn hidden(&self, extra: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = vec![
            self.vault.clone(),
            self.vault.join(crate::base::vault::layout::TABD),
            self.state.clone(),
        ];
        out.extend(self.config.iter().cloned());
        if let Some(home) = &self.home {
            out.extend(SECRETS.iter().map(|s| home.join(s)));
        }
        out.extend(extra.iter().cloned());
        canonical_existing(out)
    }

    /// Why `path` (canonical) may never be granted to a child, if it may not: it is or holds the
    /// home folder, the vault, `.tabd/` or tabd's own state and config.
    pub fn never_granted(&self, path: &Path) -> Option<&'static str> {
        let holds = |p: &Path| p.starts_with(path);
        if self.home.as_deref().is_some_and(holds) {
            return Some("it is or holds the home folder as a whole");
        }
        if path.starts_with(&self.vault) || holds(&self.vault) {
            return Some("it is in or holds the vault (`vault = \"read\"` or `\"write\"` grants the vault)");
        }
        if path.starts_with(&self.state) || holds(&self.state) {
            return Some("it is in or holds tabd's own state folder");
        }
        if path
            .components()
            .any(|c| c.as_os_str() == crate::base::vault::layout::TABD)
        {
            return Some("it is in a `.tabd/` folder (tabd's state)");
        }
        if self.config.iter().any(|c| path.starts_with(c) || holds(c)) {
            return Some("it is in or holds tabd's config and secrets");
        }
        None
    }
}

/// A folder name that is the same for the same vault and differs between vaults: its name and
/// eight hex digits of its path's hash.
pub fn vault_key(vault: &Path) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(vault.as_os_str().as_encoded_bytes());
    let name = vault
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let safe = crate::base::text::safe_name(&name, '_');
    let hex: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{safe}-{hex}")
}

/// The existing ones, as canonical paths, without duplicates. (Most secrets on a machine do not
/// exist: one `lstat` tells, before the dearer walk to the canonical path.)
pub fn canonical_existing(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabd_places_are_never_granted_and_other_folders_are() {
        let places = Places {
            home: Some("/home/me".into()),
            vault: "/home/me/Vault".into(),
            config: vec!["/home/me/.config/tabd".into()],
            state: "/home/me/.local/state/tabd".into(),
            inboxes: Vec::new(),
            layout: Default::default(),
        };
        for p in [
            "/",
            "/home",
            "/home/me",
            "/home/me/Vault",
            "/home/me/Vault/project",
            "/srv/other/.tabd/journal",
            "/home/me/.local/state/tabd/children/x",
            "/home/me/.local/state",
            "/home/me/.config/tabd/env",
        ] {
            assert!(places.never_granted(Path::new(p)).is_some(), "{p}");
        }
        for p in ["/home/me/graphs", "/srv/exports", "/home/me/.config/other"] {
            assert_eq!(places.never_granted(Path::new(p)), None, "{p}");
        }
        let a = vault_key(Path::new("/home/me/Vault"));
        assert!(a.starts_with("Vault-") && a.len() == "Vault-".len() + 8, "{a}");
        assert_ne!(a, vault_key(Path::new("/home/you/Vault")));
    }
}
