//! Where things live in a vault (docs/spec.md §2, §26): every path tabd uses, in one place.
//!
//! tabd's own folders — roles, the `agent/` area (inboxes, approvals, memory, the status note),
//! the global memory, skills, the run log — sit at the vault's root by default, or all under one
//! folder of it (`[vault] folder`, a `Layout` with a home): in a vault a person already lives in,
//! one name for all of tabd, and their own `roles/` or `daily/` stays theirs. The names below are
//! relative to that home. `.tabd/` and the files other programs keep (`.obsidian/`, `.git/`,
//! `AGENTS.md`) are always at the root.

/// Role files: `roles/<name>.md`.
pub(in crate::base::vault) const ROLES: &str = "roles";
/// The inboxes: `agent/inbox/<role>/`.
pub(in crate::base::vault) const INBOXES: &str = "agent/inbox";
/// Approval notes (docs/spec.md §15).
pub(in crate::base::vault) const APPROVALS: &str = "agent/approvals";
/// The status note the daemon keeps.
pub(in crate::base::vault) const STATUS_NOTE: &str = "agent/status.md";
/// The daily run logs: `daily/YYYY-MM-DD.md` (the default of `[log] folder`).
pub(in crate::base::vault) const DAILY: &str = "daily";
/// Where a day's run log goes when the note at its place in the log folder is not tabd's.
pub(in crate::base::vault) const LOG_ELSEWHERE: &str = "agent/log";
/// The memory every role reads: `memory.md` (changed only through `remember`).
pub(in crate::base::vault) const MEMORY: &str = "memory.md";
/// Each role's memory: `agent/memory/<role>.md` (changed only through `remember`).
pub(in crate::base::vault) const ROLE_MEMORIES: &str = "agent/memory";
/// Agent Skills: `skills/<name>/SKILL.md` and the skill's files beside it (docs/spec.md §25).
pub(in crate::base::vault) const SKILLS: &str = "skills";
/// A skill's instructions, in its folder.
pub const SKILL_FILE: &str = "SKILL.md";
/// The project's rules for every role, at the vault root (docs/spec.md §25).
pub const AGENTS_MD: &str = "AGENTS.md";
/// tabd's own folder: no role reads or writes it.
pub const TABD: &str = ".tabd";
/// The machine run records: `.tabd/runs/YYYY-MM-DD.jsonl`.
pub const RUNS: &str = ".tabd/runs";
/// tabd's state: budgets, attempts, ledgers (`state.json`), and its lock.
pub const STATE: &str = ".tabd/state.json";
pub const STATE_LOCK: &str = ".tabd/state.lock";
/// Held while an approval's note and daily line are written after its ledger change.
pub const APPROVALS_LOCK: &str = ".tabd/approvals.lock";
/// The status as JSON (what `tabd status` reads while the daemon runs).
pub const STATUS_JSON: &str = ".tabd/status.json";
/// Which files tabd made, and what it last left in each (`records::authorship`).
pub const AUTHORSHIP: &str = ".tabd/authorship.json";
/// Held while the authorship record is changed.
pub const AUTHORSHIP_LOCK: &str = ".tabd/authorship.lock";
/// The undo journal (docs/spec.md §19).
pub const JOURNAL: &str = ".tabd/journal";
/// Runs waiting for the person's decision (docs/spec.md §22).
pub const SUSPENDED: &str = ".tabd/suspended";
/// The process groups of children, for reaping after `kill -9`.
pub const GROUPS: &str = ".tabd/groups";
/// What a child granted `vault = "write"` left behind, moved out of its reach.
pub const QUARANTINE: &str = ".tabd/quarantine";
/// The record of an in-place write into a daily note, kept until the write is done (a crash
/// between: the next write finishes it).
pub const SPLICES: &str = ".tabd/splices";
/// The daemon's lock: one daemon per vault.
pub const DAEMON_LOCK: &str = ".tabd/lock";
/// The id of the last message of the ntfy reply topic acted on (docs/spec.md §27): the next start reads
/// on after it.
pub const NTFY_REPLIES: &str = ".tabd/ntfy-replies.json";
/// What tabd keeps of its Telegram chat (docs/spec.md §27): the next update to read, which message is
/// which event's, the `/ask` notes waiting for their run's answer.
pub const TELEGRAM: &str = ".tabd/telegram.json";
/// The folders tabd keeps inside an inbox: handled notes, given-up notes, kept notes.
pub const INBOX_FOLDERS: [&str; 3] = [PROCESSED, FAILED, ARCHIVE];
pub const PROCESSED: &str = "processed";
pub const FAILED: &str = "failed";
pub const ARCHIVE: &str = "archive";

/// The daily run log of `day` in the log folder `folder`: `daily/2026-11-25.md`.
pub fn daily_note(folder: &str, day: chrono::NaiveDate) -> String {
    format!("{folder}/{}.md", day.format("%Y-%m-%d"))
}

/// The run records of `day`: `.tabd/runs/2026-11-25.jsonl`.
pub fn run_records(day: chrono::NaiveDate) -> String {
    format!("{RUNS}/{}.jsonl", day.format("%Y-%m-%d"))
}

/// A role's run lock: one process runs a role at a time.
pub fn run_lock(role: &str) -> String {
    format!("{TABD}/run-{role}.lock")
}

/// The roles' folder's name, as the template spells it (`Layout::roles` says where it is).
pub const ROLES_NAME: &str = ROLES;

/// The stock roles' work folder (the project they tend), as the template has it.
pub(in crate::base::vault) const PROJECT: &str = "project";
/// Drafts the stock communication role leaves for the person.
pub(in crate::base::vault) const DRAFTS: &str = "agent/drafts";
/// The run log's folder under a home (`<home>/log`); at the root it is `daily` (`DAILY`).
pub(in crate::base::vault) const LOG_UNDER_HOME: &str = "log";

/// Where tabd's own folders are in one vault: at its root, or under one folder (its home).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Layout {
    /// The folder they are under (vault-relative, no trailing `/`); `None`: the vault's root.
    home: Option<String>,
}

impl Layout {
    /// tabd's folders under `home` (already checked: a plain folder of the vault); an empty one
    /// is the root.
    pub fn under(home: &str) -> Self {
        let home = home.trim_matches('/');
        Self {
            home: (!home.is_empty()).then(|| home.to_string()),
        }
    }

    /// The folder tabd's folders are under, if not the root.
    pub fn home(&self) -> Option<&str> {
        self.home.as_deref()
    }

    /// `name` (relative to the home) as a vault path.
    pub fn at(&self, name: &str) -> String {
        match &self.home {
            Some(home) if name.is_empty() => home.clone(),
            Some(home) => format!("{home}/{name}"),
            None => name.to_string(),
        }
    }

    pub fn roles(&self) -> String {
        self.at(ROLES)
    }

    pub fn inboxes(&self) -> String {
        self.at(INBOXES)
    }

    pub fn approvals(&self) -> String {
        self.at(APPROVALS)
    }

    pub fn status_note(&self) -> String {
        self.at(STATUS_NOTE)
    }

    /// The run log's folder when `[log] folder` says none: `daily` at the root, `<home>/log`.
    pub fn daily(&self) -> String {
        match &self.home {
            Some(_) => self.at(LOG_UNDER_HOME),
            None => DAILY.to_string(),
        }
    }

    pub fn log_elsewhere(&self) -> String {
        self.at(LOG_ELSEWHERE)
    }

    pub fn memory(&self) -> String {
        self.at(MEMORY)
    }

    pub fn role_memories(&self) -> String {
        self.at(ROLE_MEMORIES)
    }

    pub fn skills(&self) -> String {
        self.at(SKILLS)
    }

    pub fn drafts(&self) -> String {
        self.at(DRAFTS)
    }

    pub fn project(&self) -> String {
        self.at(PROJECT)
    }

    /// A role's inbox when its file names none: `agent/inbox/<role>`.
    pub fn default_inbox(&self, role: &str) -> String {
        format!("{}/{role}", self.inboxes())
    }

    /// A role's own memory: `agent/memory/<role>.md`.
    pub fn role_memory(&self, role: &str) -> String {
        format!("{}/{role}.md", self.role_memories())
    }

    /// A role's file: `roles/<role>.md`.
    pub fn role_file(&self, role: &str) -> String {
        format!("{}/{role}.md", self.roles())
    }

    /// How the template's paths move in this layout, with the log in `log`: each start of a
    /// path (`project/`, `memory.md` …) and where it is here; those that stay are left out.
    pub fn template_moves(&self, log: &str) -> Vec<(&'static str, String)> {
        [
            ("project/", format!("{}/", self.project())),
            ("agent/", format!("{}/", self.at("agent"))),
            ("roles/", format!("{}/", self.roles())),
            ("skills/", format!("{}/", self.skills())),
            (MEMORY, self.memory()),
            ("daily/", format!("{log}/")),
        ]
        .into_iter()
        .filter(|(from, to)| from != to)
        .collect()
    }

    /// A path the template spells at the root (`project/scope.md`, `roles/x.md`), in this layout.
    pub fn from_template(&self, path: &str) -> String {
        self.at(path)
    }

    /// A vault path in this layout back to how the template spells it, when it is under the home.
    pub fn to_template<'a>(&self, path: &'a str) -> Option<&'a str> {
        match &self.home {
            Some(home) => path.strip_prefix(home.as_str())?.strip_prefix('/'),
            None => Some(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_moves_every_folder_of_tabds_and_nothing_else() {
        let root = Layout::default();
        assert_eq!(root.roles(), "roles");
        assert_eq!(root.daily(), "daily");
        assert_eq!(root.memory(), "memory.md");
        let home = Layout::under("tabd/");
        assert_eq!(home.roles(), "tabd/roles");
        assert_eq!(home.role_file("risk"), "tabd/roles/risk.md");
        assert_eq!(home.default_inbox("risk"), "tabd/agent/inbox/risk");
        assert_eq!(home.approvals(), "tabd/agent/approvals");
        assert_eq!(home.status_note(), "tabd/agent/status.md");
        assert_eq!(home.memory(), "tabd/memory.md");
        assert_eq!(home.daily(), "tabd/log");
        assert_eq!(home.skills(), "tabd/skills");
        assert_eq!(
            home.to_template("tabd/project/scope.md"),
            Some("project/scope.md")
        );
        assert_eq!(home.to_template("Personal/x.md"), None);
        assert_eq!(Layout::under(""), root);
    }
}
