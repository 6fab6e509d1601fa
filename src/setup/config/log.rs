//! `[log]` (docs/spec.md §26): where the daily run log goes.
//!
//! ```toml
//! [log]
//! folder = "daily"   # the default; a folder of the vault that is not tabd's other places
//! ```

use serde::Deserialize;
use toml::Spanned;

use crate::base::vault::layout::Layout;
use crate::base::vault::protected::{fold, own_places};
use crate::base::vault::{VaultError, VaultPath};

/// `[log]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    folder: Option<Spanned<String>>,
}

/// `[log]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// The vault folder of the daily notes (`YYYY-MM-DD.md`), without a trailing `/`.
    pub folder: String,
    /// Whether the config says it (`[log] folder`), or it is the default.
    pub set: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            folder: Layout::default().daily(),
            set: false,
        }
    }
}

/// `[log]` checked; a problem at the span of the value it is about.
pub(super) fn resolve(raw: &RawLog) -> Result<LogConfig, (Option<std::ops::Range<usize>>, String)> {
    let Some(folder) = &raw.folder else {
        return Ok(LogConfig::default());
    };
    check_folder(folder.get_ref(), &Layout::default())
        .map(|folder| LogConfig { folder, set: true })
        .map_err(|m| (Some(folder.span()), m.to_string()))
}

/// A `[log] folder` that cannot hold the log, as written, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[log] folder = \"{written}\": {why}; write a folder of its own inside the vault, like \"tabd-log\" \
     (the default is \"daily\")"
)]
pub struct BadLogFolder {
    pub written: String,
    pub why: LogFolderProblem,
}

/// Why a folder cannot hold the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFolderProblem {
    #[error("the log needs a folder, not the vault's top")]
    Top,
    #[error("not a folder inside the vault ({0})")]
    Outside(VaultError),
    #[error("{0} is hidden: Obsidian does not show it, and hidden folders are tabd's or other programs'")]
    Hidden(String),
    /// In or above one of tabd's places or a protected folder (`why`: what that place is for).
    #[error("it meets {name} ({why})")]
    Meets { name: String, why: &'static str },
}

/// The log folder as tabd uses it (no `./`, no trailing `/`), or why it cannot be one: it must be
/// a folder inside the vault, not hidden, and neither in nor above one of tabd's other places or
/// the folders a role writes only by name (inboxes, roles, approvals, `.tabd` …), where `layout`
/// puts them.
pub fn check_folder(written: &str, layout: &Layout) -> Result<String, BadLogFolder> {
    let folder = written
        .trim()
        .trim_start_matches("./")
        .trim_end_matches('/')
        .to_string();
    let refuse = |why: LogFolderProblem| {
        Err(BadLogFolder {
            written: written.to_string(),
            why,
        })
    };
    if folder.is_empty() {
        return refuse(LogFolderProblem::Top);
    }
    let path = match VaultPath::parse(&folder, false) {
        Ok(p) if !p.is_root() => p,
        Ok(_) => return refuse(LogFolderProblem::Top),
        Err(e) => return refuse(LogFolderProblem::Outside(e)),
    };
    if let Some(part) = path.components().find(|c| c.starts_with('.')) {
        return refuse(LogFolderProblem::Hidden(part.to_string()));
    }
    let mine = fold(&folder);
    let own = own_places(layout);
    let elsewhere = fold(&layout.log_elsewhere());
    let others = own
        .tabd_owns
        .iter()
        .filter(|p| !p.is_log() && p.folded != elsewhere)
        .chain(&own.protected);
    for p in others {
        if mine.within(&p.folded) || mine.holds(&p.folded) {
            return refuse(LogFolderProblem::Meets {
                name: p.path.clone(),
                why: p.why,
            });
        }
    }
    Ok(folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_folder_at_root(written: &str) -> Result<String, BadLogFolder> {
        check_folder(written, &Layout::default())
    }

    #[test]
    fn a_log_folder_is_a_plain_folder_of_its_own() {
        assert_eq!(check_folder_at_root("daily").unwrap(), "daily");
        assert_eq!(check_folder_at_root("./Logs/tabd/").unwrap(), "Logs/tabd");
        assert_eq!(check_folder_at_root("agent/log").unwrap(), "agent/log");
        for (bad, says) in [
            ("", "not the vault's top"),
            ("/", "not the vault's top"),
            ("../logs", "not a folder inside the vault"),
            ("/home/me/logs", "not a folder inside the vault"),
            (".tabd", "hidden"),
            ("notes/.hidden", "hidden"),
            ("agent/inbox/log", "agent/inbox"),
            ("Agent/Inbox", "agent/inbox"),
            ("agent", "agent/"),
            ("agent/approvals", "agent/approvals"),
            ("roles", "roles"),
            ("memory.md", "memory.md"),
        ] {
            let err = check_folder(bad, &Layout::default()).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("like \"tabd-log\""),
                "{bad}: {err}"
            );
        }
    }
}
