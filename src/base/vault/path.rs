//! `VaultPath`: a vault-relative path checked by its text alone (absolute paths, `..`, NUL and
//! control characters, backslashes, look-alike dots and slashes, percent-encoded separators,
//! over-long names are refused). The filesystem layer (`super::Vault`) adds the checks text
//! cannot make (symlinks, file kinds).

use std::path::Path;

use super::VaultError;

/// Longest path the tools accept, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest single file or folder name, in bytes (the Linux limit).
pub const MAX_NAME_BYTES: usize = 255;

/// A checked, normalized vault-relative path with `/` separators. The empty path is the root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VaultPath(String);

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
pub(crate) fn show(raw: &str) -> String {
    let escaped: String = raw.chars().flat_map(char::escape_debug).take(120).collect();
    if raw.chars().count() > 120 {
        format!("\"{escaped}…\"")
    } else {
        format!("\"{escaped}\"")
    }
}
