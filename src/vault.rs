//! The vault on disk: the only way tabd's tools touch files.
//!
//! Confinement has two layers:
//! 1. `VaultPath::parse` refuses, by looking at the text, absolute paths, `..`, NUL and control
//!    characters, backslashes, look-alike dots and slashes, percent-encoded separators, and
//!    over-long names.
//! 2. Every filesystem call goes through a `cap_std::fs::Dir` opened on the vault root. cap-std
//!    resolves each component itself (with `openat2(RESOLVE_BENEATH)` where the kernel has it,
//!    else component by component with `O_NOFOLLOW`), so a symlink — present at check time or
//!    swapped in later — can never lead outside the vault. Renames and creations happen inside
//!    a parent folder opened through cap-std, by single file name.
//!
//! Residual risk: a symlink *inside* the vault that points to another place inside the vault
//! is followed. The protected-path policy is checked on the canonical (symlink-resolved) path,
//! but someone who can write to the vault could swap such a link between that check and the
//! write; the write then still lands inside the vault. Someone with that access can already
//! write there directly, so this grants nothing new.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// Longest path the tools accept, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest single file or folder name, in bytes (the Linux limit).
pub const MAX_NAME_BYTES: usize = 255;

/// A checked, normalized vault-relative path with `/` separators. The empty path is the root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VaultPath(String);

/// Why a path or an operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    Io(String),
}

/// Characters that look like `.` or `/` or `\` but are not: refused so a name can never
/// masquerade as a traversal in a log a person reads.
const LOOKALIKES: &[char] = &[
    '\u{2024}', '\u{2025}', '\u{2026}', '\u{FE52}', '\u{FF0E}', '\u{3002}', '\u{FF61}', // dots
    '\u{2215}', '\u{2044}', '\u{FF0F}', '\u{29F8}', '\u{2571}', '\u{1735}', // slashes
    '\u{FF3C}', '\u{29F5}', '\u{29F9}', '\u{FE68}', '\u{2216}', // backslashes
    '\u{202E}', '\u{202D}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{200B}',
    '\u{FEFF}', // bidi, zero width
];

impl VaultPath {
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Checks `raw` and normalizes it (`./a//b/` → `a/b`). `allow_root` accepts `""`, `.`, `/`-less root.
    pub fn parse(raw: &str, allow_root: bool) -> Result<Self, VaultError> {
        let refuse = |why: &str| Err(VaultError::Refused(format!("{} {why}", show(raw))));
        if raw.contains('\0') {
            return refuse("contains a NUL byte");
        }
        if raw.chars().any(|c| c.is_control()) {
            return refuse("contains control characters");
        }
        if raw.contains('\\') {
            return refuse("uses `\\`; separate folders with `/`");
        }
        if raw.contains(LOOKALIKES) {
            return refuse(
                "contains a character that looks like `.` or `/` but is not; use plain ASCII `.` and `/`",
            );
        }
        let lower = raw.to_ascii_lowercase();
        if ["%2e", "%2f", "%5c", "%00"].iter().any(|enc| lower.contains(enc)) {
            return refuse("contains a percent-encoded `.`, `/` or `\\`; write the path plainly");
        }
        if raw.starts_with('/') || raw.starts_with('~') || (raw.len() > 1 && raw.as_bytes()[1] == b':') {
            return refuse("is absolute; give a path inside the vault, like project/scope.md");
        }
        if raw.len() > MAX_PATH_BYTES {
            return refuse(&format!("is longer than {MAX_PATH_BYTES} bytes"));
        }
        let mut parts = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => continue,
                ".." => return refuse("leaves the vault (`..`)"),
                p if p.len() > MAX_NAME_BYTES => {
                    return refuse(&format!("has a name longer than {MAX_NAME_BYTES} bytes"))
                }
                p if p.trim().is_empty() => return refuse("has a name made only of spaces"),
                p => parts.push(p),
            }
        }
        if parts.is_empty() && !allow_root {
            return Err(VaultError::Refused(
                "an empty path names no file; give a path like project/scope.md".into(),
            ));
        }
        Ok(Self(parts.join("/")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path as a `Path` for cap-std (`.` for the root).
    pub fn as_path(&self) -> &Path {
        if self.0.is_empty() {
            Path::new(".")
        } else {
            Path::new(&self.0)
        }
    }

    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    pub fn parent(&self) -> VaultPath {
        match self.0.rfind('/') {
            Some(i) => Self(self.0[..i].to_string()),
            None => Self::root(),
        }
    }

    /// `self/name`; `name` must be one plain component.
    pub fn join(&self, name: &str) -> Result<Self, VaultError> {
        if self.0.is_empty() {
            Self::parse(name, false)
        } else {
            Self::parse(&format!("{}/{name}", self.0), false)
        }
    }

    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// True when `self` is `dir` or inside it (`dir` written without a trailing `/`).
    pub fn starts_with(&self, dir: &str) -> bool {
        let dir = dir.trim_end_matches('/');
        dir.is_empty() || self.0 == dir || self.0.starts_with(&format!("{dir}/"))
    }
}

impl std::fmt::Display for VaultPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("(vault root)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A path shown in a message: quoted and shortened, control characters escaped.
fn show(raw: &str) -> String {
    let escaped: String = raw.chars().flat_map(char::escape_debug).take(120).collect();
    if raw.chars().count() > 120 {
        format!("\"{escaped}…\"")
    } else {
        format!("\"{escaped}\"")
    }
}

/// One file or folder found by `Vault::walk`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: VaultPath,
    pub is_dir: bool,
    pub size: u64,
    pub modified: Option<SystemTime>,
}

/// The open vault.
#[derive(Debug)]
pub struct Vault {
    root: PathBuf,
    dir: Dir,
}

fn io_error(path: &VaultPath, e: &std::io::Error) -> VaultError {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => VaultError::NotFound(format!("{path} does not exist")),
        ErrorKind::AlreadyExists => VaultError::AlreadyExists(format!("{path} already exists")),
        // cap-std reports an escape (a symlink or `..` leading out) as PermissionDenied.
        ErrorKind::PermissionDenied if e.to_string().contains("outside") => {
            VaultError::Refused(format!("{path} leads outside the vault (through a symlink)"))
        }
        _ if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => VaultError::Refused(
            format!("{path} is or goes through a symlink that cannot be followed"),
        ),
        _ => VaultError::Io(format!("{path}: {e}")),
    }
}

impl Vault {
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())?;
        Ok(Self {
            root: root.to_path_buf(),
            dir,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path with every symlink resolved, still vault-relative; for a path that does not
    /// exist yet, its deepest existing ancestor is resolved and the rest appended.
    pub fn canonical(&self, path: &VaultPath) -> Result<VaultPath, VaultError> {
        let mut existing = path.clone();
        let mut rest: Vec<String> = Vec::new();
        loop {
            match self.dir.canonicalize(existing.as_path()) {
                Ok(real) => {
                    let real = real
                        .to_str()
                        .ok_or_else(|| VaultError::Refused(format!("{path} resolves to a non-UTF-8 name")))?;
                    let mut out = VaultPath::parse(real, true)?;
                    for name in rest.iter().rev() {
                        out = out.join(name)?;
                    }
                    return Ok(out);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !existing.is_root() => {
                    // A dangling symlink is NotFound too: refuse it rather than write through it.
                    if self.dir.symlink_metadata(existing.as_path()).is_ok() {
                        return Err(VaultError::Refused(format!("{existing} is a symlink to nothing")));
                    }
                    rest.push(existing.file_name().to_string());
                    existing = existing.parent();
                }
                Err(e) => return Err(io_error(path, &e)),
            }
        }
    }

    /// Reads a whole file as UTF-8 text (at most `cap` bytes are accepted).
    pub fn read_text(&self, path: &VaultPath, cap: u64) -> Result<String, VaultError> {
        self.read_text_with_meta(path, cap).map(|(text, _)| text)
    }

    /// Like `read_text`, with the file's size and modification time from the same open handle
    /// (one path resolution instead of two).
    pub fn read_text_with_meta(&self, path: &VaultPath, cap: u64) -> Result<(String, Entry), VaultError> {
        let file = self.dir.open(path.as_path()).map_err(|e| io_error(path, &e))?;
        let meta = file.metadata().map_err(|e| io_error(path, &e))?;
        let entry = Entry {
            path: path.clone(),
            is_dir: meta.is_dir(),
            size: meta.len(),
            modified: meta.modified().ok().map(|t| t.into_std()),
        };
        if meta.is_dir() {
            return Err(VaultError::Io(format!("{path} is a folder; use list_files")));
        }
        if meta.len() > cap {
            return Err(VaultError::Io(format!(
                "{path} is {} bytes, more than the {cap}-byte limit",
                meta.len()
            )));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(path, &e))?;
        let text =
            String::from_utf8(bytes).map_err(|_| VaultError::Io(format!("{path} is not UTF-8 text")))?;
        Ok((text, entry))
    }

    pub fn metadata(&self, path: &VaultPath) -> Result<Entry, VaultError> {
        let meta = self
            .dir
            .metadata(path.as_path())
            .map_err(|e| io_error(path, &e))?;
        Ok(Entry {
            path: path.clone(),
            is_dir: meta.is_dir(),
            size: meta.len(),
            modified: meta.modified().ok().map(|t| t.into_std()),
        })
    }

    pub fn exists(&self, path: &VaultPath) -> bool {
        self.dir.symlink_metadata(path.as_path()).is_ok()
    }

    fn open_parent(&self, path: &VaultPath, create: bool) -> Result<Dir, VaultError> {
        let parent = path.parent();
        if create && !parent.is_root() {
            self.dir
                .create_dir_all(parent.as_path())
                .map_err(|e| io_error(&parent, &e))?;
        }
        self.dir
            .open_dir(parent.as_path())
            .map_err(|e| io_error(&parent, &e))
    }

    /// Writes `bytes` to `path` atomically: a temp file in the same folder, fsync, rename.
    /// Readers see the old file or the new one, never a part. Parents are created.
    pub fn write_atomic(&self, path: &VaultPath, bytes: &[u8]) -> Result<(), VaultError> {
        let parent = self.open_parent(path, true)?;
        let name = path.file_name();
        let tmp = write_temp(&parent, name, bytes).map_err(|e| io_error(path, &e))?;
        if let Err(e) = parent.rename(&tmp, &parent, name) {
            let _ = parent.remove_file(&tmp);
            return Err(io_error(path, &e));
        }
        Ok(())
    }

    /// Like `write_atomic` but never replaces an existing file.
    pub fn create_atomic(&self, path: &VaultPath, bytes: &[u8]) -> Result<(), VaultError> {
        let parent = self.open_parent(path, true)?;
        let name = path.file_name();
        let tmp = write_temp(&parent, name, bytes).map_err(|e| io_error(path, &e))?;
        let result = rename_noreplace(&parent, &tmp, &parent, name);
        if result.is_err() {
            let _ = parent.remove_file(&tmp);
        }
        result.map_err(|e| io_error(path, &e))
    }

    /// Creates `dir/name`, or `name-2`, `name-3` … (before the extension) when taken; never
    /// replaces a file. Returns the path it created.
    pub fn create_unique(&self, dir: &VaultPath, name: &str, bytes: &[u8]) -> Result<VaultPath, VaultError> {
        for n in 1..1000 {
            let path = dir.join(&numbered_name(name, n))?;
            match self.create_atomic(&path, bytes) {
                Ok(()) => return Ok(path),
                Err(VaultError::AlreadyExists(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VaultError::Io(format!("no free name for {name} in {dir}")))
    }

    /// Renames `from` to `to`; refuses to replace an existing `to`. Parents of `to` are created.
    pub fn rename_noreplace(&self, from: &VaultPath, to: &VaultPath) -> Result<(), VaultError> {
        let from_parent = self.open_parent(from, false)?;
        let to_parent = self.open_parent(to, true)?;
        rename_noreplace(&from_parent, from.file_name(), &to_parent, to.file_name()).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::NotFound => VaultError::NotFound(format!("{from} does not exist")),
                std::io::ErrorKind::AlreadyExists => {
                    VaultError::AlreadyExists(format!("{to} already exists"))
                }
                _ => io_error(from, &e),
            }
        })
    }

    pub fn create_dir_all(&self, path: &VaultPath) -> Result<(), VaultError> {
        self.dir
            .create_dir_all(path.as_path())
            .map_err(|e| io_error(path, &e))
    }

    /// Lists `dir` (recursively if asked), sorted by path. Symlinked folders are not descended
    /// into (they could loop); `skip` decides which paths are left out entirely.
    pub fn walk(
        &self,
        dir: &VaultPath,
        recursive: bool,
        skip: &dyn Fn(&VaultPath) -> bool,
    ) -> Result<Vec<Entry>, VaultError> {
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(current) = stack.pop() {
            let entries = self
                .dir
                .read_dir(current.as_path())
                .map_err(|e| io_error(&current, &e))?;
            for entry in entries.flatten() {
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let Ok(path) = current.join(&name) else { continue };
                if skip(&path) {
                    continue;
                }
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let is_symlink = file_type.is_symlink();
                // Follow a symlink only to stat it (cap-std refuses one that leaves the vault).
                let Ok(meta) = (if is_symlink {
                    self.dir.metadata(path.as_path())
                } else {
                    entry.metadata()
                }) else {
                    continue;
                };
                if meta.is_dir() && recursive && !is_symlink {
                    stack.push(path.clone());
                }
                out.push(Entry {
                    path,
                    is_dir: meta.is_dir(),
                    size: meta.len(),
                    modified: meta.modified().ok().map(|t| t.into_std()),
                });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }
}

/// `name` for `n == 1`, else `name` with `-n` before its extension (`x.md` → `x-2.md`).
pub fn numbered_name(name: &str, n: u32) -> String {
    if n <= 1 {
        return name.to_string();
    }
    match name.rfind('.') {
        Some(i) if i > 0 => format!("{}-{n}{}", &name[..i], &name[i..]),
        _ => format!("{name}-{n}"),
    }
}

/// A temp file next to `name`, hidden (leading `.`) so watchers and Obsidian ignore it.
fn write_temp(parent: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<String> {
    let short: String = name.chars().take(40).collect();
    for _ in 0..16 {
        let tmp = format!(".{short}.tabd-{:08x}.tmp", rand::random::<u32>());
        let mut file = match parent.open_with(&tmp, OpenOptions::new().write(true).create_new(true)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written {
            drop(file);
            let _ = parent.remove_file(&tmp);
            return Err(e);
        }
        return Ok(tmp);
    }
    Err(std::io::Error::other("could not pick a temp file name"))
}

/// `renameat2(RENAME_NOREPLACE)` between two open folders, by single names; falls back to
/// link + unlink where the filesystem lacks it (both refuse to replace `to`).
fn rename_noreplace(from_dir: &Dir, from: &str, to_dir: &Dir, to: &str) -> std::io::Result<()> {
    use rustix::fs::{linkat, renameat_with, unlinkat, AtFlags, RenameFlags};
    match renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
            unlinkat(from_dir, from, AtFlags::empty())?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(
            VaultPath::parse("./project//scope.md", false).unwrap().as_str(),
            "project/scope.md"
        );
        assert_eq!(VaultPath::parse("project/", false).unwrap().as_str(), "project");
        assert!(VaultPath::parse("", true).unwrap().is_root());
        assert!(VaultPath::parse("", false).is_err());
        let p = VaultPath::parse("a/b/c.md", false).unwrap();
        assert_eq!(p.parent().as_str(), "a/b");
        assert_eq!(p.file_name(), "c.md");
        assert!(p.starts_with("a/b"));
        assert!(!p.starts_with("a/bc"));
    }

    #[test]
    fn unique_names_get_a_number_before_the_extension() {
        assert_eq!(numbered_name("x.md", 1), "x.md");
        assert_eq!(numbered_name("x.md", 3), "x-3.md");
        assert_eq!(numbered_name("a.b.md", 2), "a.b-2.md");
        assert_eq!(numbered_name("noext", 2), "noext-2");
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let inbox = VaultPath::parse("in", false).unwrap();
        let first = v.create_unique(&inbox, "n.md", b"1").unwrap();
        let second = v.create_unique(&inbox, "n.md", b"2").unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("in/n.md", "in/n-2.md"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("in/n.md")).unwrap(),
            "1",
            "never replaced"
        );
    }

    #[test]
    fn atomic_write_and_create() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let p = VaultPath::parse("x/y/z.md", false).unwrap();
        v.write_atomic(&p, b"one").unwrap();
        v.write_atomic(&p, b"two").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("x/y/z.md")).unwrap(),
            "two"
        );
        let err = v.create_atomic(&p, b"three").unwrap_err();
        assert!(matches!(err, VaultError::AlreadyExists(_)));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("x/y/z.md")).unwrap(),
            "two"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("x/y")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }
}
