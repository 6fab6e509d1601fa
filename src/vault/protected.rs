//! Paths of the vault with a meaning of their own (DESIGN §8): tabd's state, the person's role
//! files and decisions, files other programs load as settings. The access policy (`access`)
//! keeps roles' tools off them, and the child sandbox keeps them read-only for a server granted
//! `vault = "write"`: one list for both.

/// Folders no tool reads: tabd's own state and git's.
pub const UNREADABLE: &[&str] = &[".tabd", ".git"];

/// Folders no tool writes unless the role's `write_paths` names them explicitly.
pub const PROTECTED: &[(&str, &str)] = &[
    ("roles", "role files are edited by you, not by the agent"),
    (".tabd", "tabd's own state"),
    (".obsidian", "Obsidian's settings and plugins"),
    (".git", "the vault's git history and hooks"),
    (".trash", "Obsidian's trash"),
    // Inboxes are written only by `trigger_role`, which sets `hops`, so chains stay bounded.
    ("agent/inbox", "inboxes take notes through trigger_role only"),
];

/// Files and folders other programs load as settings, hooks, MCP servers or instructions — code
/// or orders that would run as you the next time you (or an agent CLI) work in this folder. No
/// role writes one, at any depth, unless its `write_paths` names it explicitly.
pub const AGENT_CONFIG: &[(&str, &str)] = &[
    (".claude", "Claude Code's settings and hooks"),
    (".gemini", "Gemini CLI's settings"),
    (".codex", "Codex's settings"),
    (".cursor", "Cursor's settings and rules"),
    (".vscode", "editor settings and tasks that run commands"),
    (".idea", "IDE settings that run commands"),
    (".mcp.json", "MCP servers an agent CLI starts"),
    ("CLAUDE.md", "instructions Claude Code loads"),
    ("CLAUDE.local.md", "instructions Claude Code loads"),
    ("AGENTS.md", "instructions Codex and other agents load"),
    ("GEMINI.md", "instructions Gemini CLI loads"),
    (".envrc", "commands direnv runs when you enter the folder"),
    (".gitmodules", "repositories git fetches"),
];

/// Folders no role may ever write, whatever its `write_paths` say.
pub const NEVER_WRITABLE: &[(&str, &str)] = &[(
    "agent/approvals",
    "approval notes are decided by the person; a role can never create, edit or move them, so it cannot approve its own calls",
)];
