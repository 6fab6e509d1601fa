//! Entries of a role's `## Context Files`: a file, a folder, a glob or an Obsidian wikilink.

use crate::base::vault::{VaultError, VaultPath};

/// Why a context entry cannot be read; its `Display` is the sentence a diagnostic shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    #[error("empty context entry")]
    Empty,
    #[error("`{0}` links to nothing")]
    LinksToNothing(String),
    #[error(transparent)]
    Path(#[from] BadPath),
    #[error("`{text}` is not a valid glob: {reason}")]
    Glob { text: String, reason: String },
}

/// Why a vault-relative path written in a role file is refused: the vault's own reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPath(pub String);

/// One context entry, as written (vault-relative, `/` separators).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ContextEntry {
    /// `project/scope.md`
    File(String),
    /// `project/blockers/` — its `.md` files, recursively.
    Folder(String),
    /// `project/risks/*.md`
    Glob(String),
    /// `[[team]]` — resolved the way Obsidian does: shortest unique path match, `.md` implied.
    Wikilink(String),
}

impl ContextEntry {
    /// Reads one list item. Backticks around a path are dropped; `|alias` and `#heading` of a
    /// wikilink are ignored.
    pub fn parse(item: &str) -> Result<Self, BadEntry> {
        let text = item.lines().next().unwrap_or("").trim().trim_matches('`').trim();
        if text.is_empty() {
            return Err(BadEntry::Empty);
        }
        if let Some(inner) = text.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")) {
            let target = inner.split(['|', '#']).next().unwrap_or("").trim();
            if target.is_empty() {
                return Err(BadEntry::LinksToNothing(text.to_string()));
            }
            return Ok(Self::Wikilink(target.to_string()));
        }
        let path = check_relative(text)?;
        let text = if text.ends_with('/') {
            format!("{}/", path.as_str())
        } else {
            path.as_str().to_string()
        };
        let text = text.as_str();
        if text.contains(['*', '?', '[', '{']) {
            globset::Glob::new(text).map_err(|e| BadEntry::Glob {
                text: text.to_string(),
                reason: e.to_string(),
            })?;
            Ok(Self::Glob(text.to_string()))
        } else if text.ends_with('/') {
            Ok(Self::Folder(text.to_string()))
        } else {
            Ok(Self::File(text.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::File(s) | Self::Folder(s) | Self::Glob(s) | Self::Wikilink(s) => s,
        }
    }
}

impl std::fmt::Display for ContextEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Wikilink(s) => write!(f, "[[{s}]]"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// Checks a vault-relative path written by a person in a role file, with the same rules the
/// tools apply (so a path that passes `validate` is one tabd can use): no absolute paths, no
/// `..`, `/` as the only separator.
pub fn check_relative(path: &str) -> Result<VaultPath, BadPath> {
    VaultPath::parse(path, false).map_err(|e| match e {
        VaultError::Refused(why) => BadPath(why),
        other => BadPath(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind() {
        assert_eq!(
            ContextEntry::parse("project/scope.md"),
            Ok(ContextEntry::File("project/scope.md".into()))
        );
        assert_eq!(
            ContextEntry::parse("`memory.md`"),
            Ok(ContextEntry::File("memory.md".into()))
        );
        assert_eq!(
            ContextEntry::parse("project/blockers/"),
            Ok(ContextEntry::Folder("project/blockers/".into()))
        );
        assert_eq!(
            ContextEntry::parse("project/risks/*.md"),
            Ok(ContextEntry::Glob("project/risks/*.md".into()))
        );
        assert_eq!(
            ContextEntry::parse("[[team]]"),
            Ok(ContextEntry::Wikilink("team".into()))
        );
        assert_eq!(
            ContextEntry::parse("[[team|the team]]"),
            Ok(ContextEntry::Wikilink("team".into()))
        );
        assert_eq!(
            ContextEntry::parse("[[project/team#Roles]]"),
            Ok(ContextEntry::Wikilink("project/team".into()))
        );
    }

    #[test]
    fn refuses_escapes_and_junk() {
        assert!(ContextEntry::parse("/etc/passwd").is_err());
        assert!(ContextEntry::parse("../secrets.md").is_err());
        assert!(ContextEntry::parse("project/../../x").is_err());
        assert!(ContextEntry::parse("[[]]").is_err());
        assert!(ContextEntry::parse("project/[unclosed").is_err());
        assert!(ContextEntry::parse("project\\scope.md").is_err(), "backslashes");
    }
}
