//! What a file event means to the daemon, decided by its path alone (pure).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::ready::FsEvent;
use crate::base::vault::layout::Layout;

/// The paths the daemon cares about, as of the last reload.
#[derive(Debug, Default, Clone)]
pub struct Paths {
    pub root: PathBuf,
    /// The config file, or where it would be when there is none yet.
    pub config: Option<PathBuf>,
    /// The env file (`~/.config/tabd/env`), or where it would be.
    pub env_file: Option<PathBuf>,
    /// Inbox folder → the roles reading it.
    pub inbox_owners: HashMap<PathBuf, Vec<String>>,
    /// Watched file (vault path) → the roles watching it.
    pub watched: HashMap<String, Vec<String>>,
    /// Folders the watcher watches (a `Gone` for one of them means it must be watched anew).
    pub watched_dirs: Vec<PathBuf>,
    /// Where tabd's folders are in the vault.
    pub layout: Layout,
}

impl Paths {
    /// The approval notes' folder (docs/spec.md §15).
    pub fn approvals(&self) -> PathBuf {
        self.root.join(self.layout.approvals())
    }

    /// The roles' folder.
    pub fn roles(&self) -> PathBuf {
        self.root.join(self.layout.roles())
    }

    /// The folder of the inboxes tabd makes (`agent/inbox/`).
    pub fn inboxes(&self) -> PathBuf {
        self.root.join(self.layout.inboxes())
    }
}

/// One event, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventClass {
    /// Events may have been lost: rescan everything.
    Rescan,
    /// A role file changed: reload (debounced).
    Roles,
    /// The config file or the env file changed: reload (debounced).
    Config,
    /// A folder appeared or vanished where inboxes live, or a watched folder went away:
    /// re-point the watcher and rescan.
    Folders,
    /// A note event in these roles' inbox.
    Inbox(Vec<String>),
    /// Something in a folder of `agent/inbox/` that no role reads (`deliverry/`): say so now.
    Stranded,
    /// An approval note changed: look at the approvals.
    Approvals,
    /// A watched file changed, for these roles.
    Watched { path: String, roles: Vec<String> },
    /// Nothing the daemon acts on.
    Other,
}

pub fn classify(ev: &FsEvent, paths: &Paths) -> EventClass {
    let p = match ev {
        FsEvent::Rescan => return EventClass::Rescan,
        FsEvent::Written(p) | FsEvent::RenamedTo { to: p, .. } | FsEvent::Gone(p) => p,
    };
    if matches!(ev, FsEvent::Gone(_)) && paths.watched_dirs.iter().any(|d| d == p) {
        return EventClass::Folders;
    }
    let parent = p.parent().unwrap_or(Path::new(""));
    if parent == paths.roles() {
        return EventClass::Roles;
    }
    // The config file or the env file, or a folder on its way made (`~/.config/tabd` before
    // `config.toml`).
    if [&paths.config, &paths.env_file]
        .into_iter()
        .flatten()
        .any(|c| c == p || c.starts_with(p))
    {
        return EventClass::Config;
    }
    if parent == paths.inboxes() {
        return EventClass::Folders;
    }
    if parent == paths.approvals() {
        return EventClass::Approvals;
    }
    if let Some(owners) = paths.inbox_owners.get(parent) {
        return EventClass::Inbox(owners.clone());
    }
    if parent.parent() == Some(paths.inboxes().as_path()) {
        return EventClass::Stranded;
    }
    let rel = p.strip_prefix(&paths.root).ok().and_then(Path::to_str);
    match rel.and_then(|r| paths.watched.get(r).map(|roles| (r, roles))) {
        Some((r, roles)) => EventClass::Watched {
            path: r.to_string(),
            roles: roles.clone(),
        },
        None => EventClass::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Paths {
        Paths {
            root: "/v".into(),
            config: Some("/etc/tabd.toml".into()),
            env_file: Some("/home/u/.config/tabd/env".into()),
            inbox_owners: HashMap::from([("/v/agent/inbox/risk".into(), vec!["risk".to_string()])]),
            watched: HashMap::from([("project/timeline.md".to_string(), vec!["delivery".to_string()])]),
            watched_dirs: vec!["/v/agent/inbox/risk".into()],
            layout: Layout::default(),
        }
    }

    #[test]
    fn each_path_has_its_meaning() {
        let p = paths();
        let w = |s: &str| FsEvent::Written(s.into());
        assert_eq!(classify(&FsEvent::Rescan, &p), EventClass::Rescan);
        assert_eq!(classify(&w("/v/roles/risk.md"), &p), EventClass::Roles);
        assert_eq!(classify(&w("/etc/tabd.toml"), &p), EventClass::Config);
        assert_eq!(
            classify(&w("/home/u/.config/tabd/env"), &p),
            EventClass::Config,
            "the env file is read again like the config"
        );
        // A folder on the way to a config not made yet: reload, which watches it.
        let mut later = p.clone();
        later.config = Some("/home/u/.config/tabd/config.toml".into());
        assert_eq!(classify(&w("/home/u/.config/tabd"), &later), EventClass::Config);
        assert_eq!(
            classify(&w("/home/u/.config/other.conf"), &later),
            EventClass::Other
        );
        assert_eq!(classify(&w("/v/agent/inbox/new-role"), &p), EventClass::Folders);
        assert_eq!(
            classify(&w("/v/agent/inbox/deliverry/a.md"), &p),
            EventClass::Stranded
        );
        assert_eq!(
            classify(&w("/v/agent/inbox/risk/processed/a.md"), &p),
            EventClass::Other
        );
        assert_eq!(
            classify(&w("/v/agent/inbox/risk/a.md"), &p),
            EventClass::Inbox(vec!["risk".into()])
        );
        assert_eq!(
            classify(&w("/v/project/timeline.md"), &p),
            EventClass::Watched {
                path: "project/timeline.md".into(),
                roles: vec!["delivery".into()]
            }
        );
        assert_eq!(classify(&w("/v/project/other.md"), &p), EventClass::Other);
        assert_eq!(
            classify(&w("/v/agent/approvals/2026-11-22-comms-slack-post-7c41e0.md"), &p),
            EventClass::Approvals
        );
    }

    #[test]
    fn a_watched_folder_that_goes_away_must_be_watched_anew() {
        let p = paths();
        assert_eq!(
            classify(&FsEvent::Gone("/v/agent/inbox/risk".into()), &p),
            EventClass::Folders
        );
    }
}
