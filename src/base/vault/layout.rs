//! Where things live in a vault (DESIGN §2): every fixed path tabd uses, in one place.

/// Role files: `roles/<name>.md`.
pub const ROLES: &str = "roles";
/// The inboxes: `agent/inbox/<role>/`.
pub const INBOXES: &str = "agent/inbox";
/// Approval notes (DESIGN §15).
pub const APPROVALS: &str = "agent/approvals";
/// The status note the daemon keeps.
pub const STATUS_NOTE: &str = "agent/status.md";
/// The daily run logs: `daily/YYYY-MM-DD.md` (the default of `[log] folder`).
pub const DAILY: &str = "daily";
/// Where a day's run log goes when the note at its place in the log folder is not tabd's.
pub const LOG_ELSEWHERE: &str = "agent/log";
/// The memory every role reads: `memory.md` (changed only through `remember`).
pub const MEMORY: &str = "memory.md";
/// Each role's memory: `agent/memory/<role>.md` (changed only through `remember`).
pub const ROLE_MEMORIES: &str = "agent/memory";
/// Agent Skills: `skills/<name>/SKILL.md` and the skill's files beside it (DESIGN §25).
pub const SKILLS: &str = "skills";
/// A skill's instructions, in its folder.
pub const SKILL_FILE: &str = "SKILL.md";
/// The project's rules for every role, at the vault root (DESIGN §25).
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
/// The undo journal (DESIGN §19).
pub const JOURNAL: &str = ".tabd/journal";
/// Runs waiting for the person's decision (DESIGN §22).
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

/// A role's inbox when its file names none: `agent/inbox/<role>`.
pub fn default_inbox(role: &str) -> String {
    format!("{INBOXES}/{role}")
}

/// A role's own memory: `agent/memory/<role>.md`.
pub fn role_memory(role: &str) -> String {
    format!("{ROLE_MEMORIES}/{role}.md")
}

/// A role's file: `roles/<role>.md`.
pub fn role_file(role: &str) -> String {
    format!("{ROLES}/{role}.md")
}

/// A role's run lock: one process runs a role at a time.
pub fn run_lock(role: &str) -> String {
    format!("{TABD}/run-{role}.lock")
}
