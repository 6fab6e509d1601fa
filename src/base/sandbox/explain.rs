//! When the sandbox stops something, say so (docs/spec.md §20). A child only sees `EACCES` or `EPERM`
//! ("permission denied", exit 126): read against the rules it ran under, the path in the message
//! tells whether the sandbox refused it, and which line of the config would grant it.

use std::path::{Path, PathBuf};

use super::places::Places;
use super::Spec;

/// The rules a child runs under, kept to explain what it reports.
#[derive(Debug, Clone)]
pub struct Applied {
    pub spec: Spec,
    pub places: Places,
    /// The config table that would grant more (`[mcp.memory]`, `[profiles.claude]`).
    pub table: String,
}

impl Applied {
    /// A sentence for a person when `text` (an error, a stderr) shows the sandbox refused
    /// something, naming the path and the line to add.
    pub fn explain(&self, text: &str) -> Option<String> {
        refusal(&self.spec, text, &|p| self.places.never_granted(p)).map(|r| r.sentence(&self.table))
    }
}

/// What a failure's text says, read against the child's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The path the sandbox refused.
    pub path: PathBuf,
    /// The line to add to the child's table (`writable = ["/home/me/graphs"]`), or why none can.
    pub grant: String,
}

impl Refusal {
    /// One sentence for a person: "the sandbox refused … ; to allow it, add … to [mcp.NAME]".
    pub fn sentence(&self, table: &str) -> String {
        if self.grant.starts_with("it ") {
            format!("the sandbox refused {} ({})", self.path.display(), self.grant)
        } else {
            format!(
                "the sandbox refused {}; to allow it, add `{}` to {table} in the config",
                self.path.display(),
                self.grant
            )
        }
    }
}

/// Words that mark a refusal in the messages of Node, Python, Go, Rust, shells.
const REFUSED: &[&str] = &[
    "permission denied",
    "eacces",
    "eperm",
    "operation not permitted",
    "errno 13",
    "errno 1]",
    "os error 13",
    "os error 1)",
    "read-only file system",
    "erofs",
];

/// The first refusal in `text` (a child's stderr, a tool's error) that `spec` explains, with the
/// grant that would allow it; `never` says why a path can never be granted.
pub fn refusal(spec: &Spec, text: &str, never: &dyn Fn(&Path) -> Option<&'static str>) -> Option<Refusal> {
    for line in text.lines() {
        let lower = line.to_ascii_lowercase();
        if !REFUSED.iter().any(|w| lower.contains(w)) {
            continue;
        }
        for path in paths_in(line) {
            if let Some(r) = explain_path(spec, &path, &lower, never) {
                return Some(r);
            }
        }
    }
    None
}

/// Absolute paths in a line (quoted or bare, up to a quote, space, comma or colon).
fn paths_in(line: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i] == b'/' && (i == 0 || b" '\"`(=[:".contains(&bytes[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let end = line[i..]
            .find(|c: char| c.is_whitespace() || "'\"`,;)]".contains(c) || c == ':')
            .map_or(line.len(), |n| i + n);
        let p = line[i..end].trim_end_matches('.');
        if p.len() > 1 {
            out.push(PathBuf::from(p));
        }
        i = end.max(i + 1);
    }
    out
}

fn explain_path(
    spec: &Spec,
    path: &Path,
    line: &str,
    never: &dyn Fn(&Path) -> Option<&'static str>,
) -> Option<Refusal> {
    let real = resolve(path);
    let socket = line.contains("connect")
        && std::fs::symlink_metadata(&real).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        });
    if socket {
        if spec.sockets.contains(&real) {
            return None;
        }
        return Some(Refusal {
            grant: format!("unix_sockets = [\"{}\"]", real.display()),
            path: real,
        });
    }
    if !spec.may_read(&real) {
        let grant = match never(&real) {
            Some(why) => why.to_string(),
            None => format!("readable = [\"{}\"]", real.display()),
        };
        return Some(Refusal { path: real, grant });
    }
    if spec.may_write(&real) {
        return None; // allowed: the refusal is the file's own permissions, not the sandbox
    }
    // A folder to grant: the path itself if it exists, else the nearest folder above it.
    let target = if real.exists() {
        real.clone()
    } else {
        real.ancestors()
            .skip(1)
            .find(|a| a.is_dir())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| real.clone())
    };
    let grant = match never(&target) {
        Some(why) => format!(
            "it is in {} — never granted, as {why}; name the file itself in the child's `env` or `args` \
             (a named file is granted alone) or grant a folder below with `writable`",
            target.display()
        ),
        None => format!("writable = [\"{}\"]", target.display()),
    };
    Some(Refusal { path: real, grant })
}

/// `path` with its deepest existing ancestor made canonical (a file not yet created included).
fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(home: &Path) -> Spec {
        Spec {
            hidden: vec![home.join(".ssh")],
            private: vec![home.join("state")],
            ..Spec::default()
        }
    }

    fn never(p: &Path) -> Option<&'static str> {
        (p.file_name().is_some_and(|n| n == "home")).then_some("it is or holds the home folder as a whole")
    }

    #[test]
    fn node_python_and_shell_refusals_name_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("graphs")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let s = spec(&home);
        let node = format!(
            "Error: EACCES: permission denied, open '{}'",
            home.join("graphs/memory.json").display()
        );
        let r = refusal(&s, &node, &never).unwrap();
        assert_eq!(
            r.grant,
            format!("writable = [\"{}\"]", home.join("graphs").display())
        );
        assert!(r.sentence("[mcp.memory]").contains("the sandbox refused"));
        let python = format!(
            "PermissionError: [Errno 13] Permission denied: '{}'",
            home.join(".ssh/config").display()
        );
        let r = refusal(&s, &python, &never).unwrap();
        assert!(r.grant.starts_with("readable = ["), "{r:?}");
        // A file directly in the home folder: the folder is never granted; say what to do.
        let shell = format!(
            "sh: 1: cannot create {}: Permission denied",
            home.join("x.json").display()
        );
        let r = refusal(&s, &shell, &never).unwrap();
        assert!(r.grant.contains("home folder as a whole"), "{r:?}");
        // Allowed by the sandbox: not its doing.
        let own = format!("open {}: permission denied", home.join("state/a").display());
        assert_eq!(refusal(&s, &own, &never), None);
        assert_eq!(refusal(&s, "all good: wrote /tmp/x", &never), None);
    }
}
