//! What a failing wait shows: the vault and the daemon of the test that waited. Each test runs
//! on a thread of its own, so this is kept per thread.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    static VAULT: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    static DAEMON_STDERR: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
}

pub fn vault_created(root: &Path) {
    VAULT.with(|v| *v.borrow_mut() = Some(root.to_path_buf()));
}

pub fn daemon_started(stderr: &Path) {
    DAEMON_STDERR.with(|d| *d.borrow_mut() = Some(stderr.to_path_buf()));
}

/// The last 40 lines the daemon wrote, and the vault's files.
pub fn describe() -> String {
    let mut out = String::new();
    if let Some(path) = DAEMON_STDERR.with(|d| d.borrow().clone()) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        out.push_str(&format!(
            "--- the daemon's stderr (last {} lines)\n{}\n",
            tail.len(),
            tail.join("\n")
        ));
    }
    if let Some(root) = VAULT.with(|v| v.borrow().clone()) {
        out.push_str(&format!(
            "--- the vault ({})\n{}",
            root.display(),
            super::listing_of(&root)
        ));
    }
    out
}
