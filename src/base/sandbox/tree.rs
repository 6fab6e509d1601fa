//! "Everything under a folder but these": Landlock only allows, it cannot take away, so a folder
//! with a hidden path inside is granted as its other entries, level by level down to the hidden
//! one (docs/spec.md §20: "grant the siblings on each level of a denied path").

use std::path::{Path, PathBuf};

/// The paths to grant so that everything under `root` is reachable except `hidden` (absolute,
/// canonical paths; those outside `root` are ignored). Symbolic links are never granted: what
/// one points to is reachable only if it is granted itself, so a link cannot carry a grant to a
/// hidden place. Entries that appear later in a folder that was split are not reachable.
pub fn all_but(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let inside: Vec<&Path> = hidden
        .iter()
        .map(PathBuf::as_path)
        .filter(|h| h.starts_with(root))
        .collect();
    if inside.contains(&root) {
        return Vec::new();
    }
    if inside.is_empty() {
        return vec![root.to_path_buf()];
    }
    let mut out = Vec::new();
    split(root, &inside, &mut out);
    out
}

/// Grants the entries of `dir`, going down into those that hold a hidden path.
fn split(dir: &Path, hidden: &[&Path], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() || hidden.contains(&path.as_path()) {
            continue;
        }
        let below: Vec<&Path> = hidden.iter().copied().filter(|h| h.starts_with(&path)).collect();
        if below.is_empty() {
            out.push(path);
        } else if kind.is_dir() {
            split(&path, &below, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(root: &Path, paths: &[PathBuf]) -> Vec<String> {
        let mut v: Vec<String> = paths
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_hidden_path_is_cut_out_level_by_level() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            "home/.ssh",
            "home/.config/tabd",
            "home/.config/git",
            "home/docs",
            "usr/bin",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.bashrc"), "x").unwrap();
        std::fs::write(root.join("home/.netrc"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/keys")).unwrap();
        let hidden = vec![
            root.join("home/.ssh"),
            root.join("home/.config/tabd"),
            root.join("home/.netrc"),
            PathBuf::from("/elsewhere/ignored"),
        ];
        let granted = all_but(&root, &hidden);
        assert_eq!(
            names(&root, &granted),
            ["home/.bashrc", "home/.config/git", "home/docs", "usr"],
            "siblings granted, the link to .ssh not"
        );
        assert_eq!(all_but(&root.join("usr"), &hidden), [root.join("usr")]);
        assert!(all_but(&root.join("home/.ssh"), &hidden).is_empty());
    }
}
