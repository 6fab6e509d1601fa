//! A child's sandbox as the person writes it in `[mcp.NAME]` or `[profiles.NAME]` (DESIGN §20),
//! and what that grants at start: folders to read, folders to write, the network.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::sandbox::{self, Spec};

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
    /// Extra folders or files it may read (`~` is the home folder).
    pub readable: Vec<String>,
    /// Extra folders or files it may change.
    pub writable: Vec<String>,
}

impl Default for ChildSandbox {
    fn default() -> Self {
        Self {
            vault: VaultAccess::None,
            network: true,
            readable: Vec::new(),
            writable: Vec::new(),
        }
    }
}

/// What tabd knows about the child it is starting.
pub struct Start<'a> {
    /// The vault's folder.
    pub vault_root: &'a Path,
    /// The child's own state folder (`.tabd/children/<name>/`) and its private temp folder.
    pub state_dir: &'a Path,
    pub tmp_dir: &'a Path,
    /// Another folder it works in (an agent CLI's run folder).
    pub work_dir: Option<&'a Path>,
    /// The program, found on PATH, and its arguments (files named there are readable).
    pub program: Option<&'a Path>,
    pub args: &'a [String],
    /// The person's home folder, for `~` in grants.
    pub home: Option<&'a Path>,
    /// tabd's environment (its `PATH` finds the runtimes).
    pub env: &'a crate::environment::Env,
}

impl ChildSandbox {
    /// `~/x` → the home folder's `x`.
    pub fn expand(&self, path: &str, home: Option<&Path>) -> PathBuf {
        match (path.strip_prefix("~/"), home) {
            (Some(rest), Some(h)) => h.join(rest),
            _ if path == "~" => home.map_or_else(|| PathBuf::from(path), Path::to_path_buf),
            _ => PathBuf::from(path),
        }
    }

    /// The rules for one start.
    pub fn spec(&self, start: &Start<'_>) -> Spec {
        let mut readable = sandbox::system_paths();
        if let Some(program) = start.program {
            readable.extend(sandbox::install_prefix(program));
        }
        // Runtimes a script is run by (`#!/usr/bin/env node`), wherever they are installed.
        for runtime in ["node", "python3", "deno", "bun"] {
            if let Some(found) = crate::process::find_program(runtime, start.env) {
                readable.extend(sandbox::install_prefix(&found));
            }
        }
        // A script or module named in the arguments (`--require x.js`, `server.py`).
        readable.extend(
            start
                .args
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.exists()),
        );
        readable.extend(self.readable.iter().map(|p| self.expand(p, start.home)));
        let mut writable = sandbox::device_paths();
        writable.push(start.state_dir.to_path_buf());
        writable.push(start.tmp_dir.to_path_buf());
        writable.extend(start.work_dir.map(Path::to_path_buf));
        writable.extend(self.writable.iter().map(|p| self.expand(p, start.home)));
        match self.vault {
            VaultAccess::None => {}
            VaultAccess::Read => readable.extend(vault_entries(start.vault_root)),
            VaultAccess::Write => writable.extend(vault_entries(start.vault_root)),
        }
        Spec {
            readable,
            writable,
            network: self.network,
        }
    }
}

/// The vault's top-level entries but `.tabd/` (tabd's state: never reachable by a child).
/// Landlock grants whole folders, so the vault is granted entry by entry.
fn vault_entries(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name() != ".tabd")
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}
