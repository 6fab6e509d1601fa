//! Paths of the vault with a meaning of their own (DESIGN §8): tabd's state, the person's role
//! files and decisions, files other programs load as settings. The access policy (`access`)
//! keeps roles' tools off them, and the child sandbox keeps them read-only for a server granted
//! `vault = "write"`: one list for both, compared in one normal form (`normalised`).
//!
//! Files other programs load are found by a rule, not only a list: every hidden file or folder
//! (a name starting with `.`: `.git/config`, `.github/workflows/`, `.cursorrules`, `.npmrc`,
//! `.mise.toml`, `.zed/` …, at any depth), and the few visible names agents read
//! (`SETTINGS_NAMES`: `CLAUDE.md`, `AGENTS.override.md`, `opencode.json` …).

use super::layout;

/// Folders no tool reads: tabd's own state and git's.
pub const UNREADABLE: &[&str] = &[layout::TABD, ".git"];

/// Folders no tool writes unless the role's `write_paths` names them explicitly.
pub const PROTECTED: &[(&str, &str)] = &[
    (layout::ROLES, "role files are edited by you, not by the agent"),
    (layout::TABD, "tabd's own state"),
    (".obsidian", "Obsidian's settings and plugins"),
    (".git", "the vault's git history and hooks"),
    (".trash", "Obsidian's trash"),
    // Inboxes are written only by `trigger_role`, which sets `hops`, so chains stay bounded.
    (layout::INBOXES, "inboxes take notes through trigger_role only"),
];

/// Visible names other programs load as instructions or settings — orders that would run as you
/// the next time you (or an agent CLI) work in that folder. (Hidden names are all treated so.)
/// No role writes one, at any depth, unless its `write_paths` names it explicitly.
pub const SETTINGS_NAMES: &[(&str, &str)] = &[
    ("CLAUDE.md", "instructions Claude Code loads"),
    ("CLAUDE.local.md", "instructions Claude Code loads"),
    ("AGENTS.md", "instructions Codex and other agents load"),
    ("AGENTS.override.md", "instructions Codex loads"),
    ("GEMINI.md", "instructions Gemini CLI loads"),
    ("QWEN.md", "instructions Qwen Code loads"),
    ("CONVENTIONS.md", "conventions aider loads"),
    ("opencode.json", "opencode's settings"),
    ("opencode.jsonc", "opencode's settings"),
    ("mise.toml", "tasks and tools mise runs in this folder"),
];

/// Why a hidden name is dangerous to let a role write.
pub const HIDDEN_WHY: &str =
    "a hidden file or folder: git (`.git/config`, hooks), CI (`.github/workflows`), \
     editors and agents (`.vscode`, `.zed`, `.claude`, `.cursorrules`, `.mcp.json` …) and tools (`.envrc`, \
     `.npmrc`, `.mise.toml`) load such files as settings that run as you";

/// Whether a name (one path component, in `normalised` form) is one other programs load: hidden,
/// or one of `SETTINGS_NAMES`. Returns why.
pub fn loaded_by_programs(component: &str) -> Option<&'static str> {
    if component.starts_with('.') {
        return Some(HIDDEN_WHY);
    }
    normal()
        .settings
        .iter()
        .find(|(name, _)| name == component)
        .map(|(_, why)| *why)
}

/// The form two names share when a person (or an operating system) would read them as the same:
/// invisible characters dropped (soft hyphen, zero-width joiner …), look-alikes folded to one
/// skeleton (Unicode TR39: `approvaIs` with a capital I, Cyrillic `а`), accents dropped, lower
/// case (the real file on macOS and Windows), trailing spaces and dots cut from each part
/// (`agent/Approvalś /` → `agent/approvals`). Protected paths are compared in this form, so a
/// look-alike folder cannot be created beside a real one.
pub fn normalised(path: &str) -> String {
    use unicode_normalization::char::is_combining_mark;
    path.split('/')
        .map(|part| {
            // Look-alikes first (a capital I is an l), then case.
            let folded: String = if part.is_ascii() {
                // The common case, on every path a run reads: the skeleton of ASCII, without
                // its tables (checked against them in the tests).
                part.chars()
                    .map(ascii_prototype)
                    .collect::<String>()
                    .to_lowercase()
            } else {
                unicode_security::skeleton(part)
                    .filter(|c| !is_combining_mark(*c))
                    .collect::<String>()
                    .to_lowercase()
            };
            folded.trim_end_matches([' ', '.', '\t']).to_string()
        })
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// The TR39 prototype of an ASCII character (the eight that have one other than themselves).
fn ascii_prototype(c: char) -> &'static str {
    match c {
        '"' => "''",
        '%' => "°/₀",
        '0' => "O",
        '1' | 'I' | '|' => "l",
        '`' => "'",
        'm' => "rn",
        _ => ascii_str(c),
    }
}

/// `c` as a one-character string (ASCII only).
fn ascii_str(c: char) -> &'static str {
    const ASCII: &str = "\0\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\x7f";
    let i = c as usize;
    ASCII.get(i..i + 1).unwrap_or("")
}

/// The protected names in normal form, worked out once.
pub struct Normal {
    pub unreadable: Vec<String>,
    pub protected: Vec<(String, &'static str)>,
    pub never_writable: Vec<(String, &'static str)>,
    pub settings: Vec<(String, &'static str)>,
}

/// `Normal`, made on first use (constants, not state).
pub fn normal() -> &'static Normal {
    static NORMAL: std::sync::LazyLock<Normal> = std::sync::LazyLock::new(|| {
        let pairs = |list: &[(&str, &'static str)]| list.iter().map(|(n, w)| (normalised(n), *w)).collect();
        Normal {
            unreadable: UNREADABLE.iter().map(|n| normalised(n)).collect(),
            protected: pairs(PROTECTED),
            never_writable: pairs(NEVER_WRITABLE),
            settings: pairs(SETTINGS_NAMES),
        }
    });
    &NORMAL
}

/// Folders no role may ever write, whatever its `write_paths` say.
pub const NEVER_WRITABLE: &[(&str, &str)] = &[(
    layout::APPROVALS,
    "approval notes are decided by the person; a role can never create, edit or move them, so it cannot approve its own calls",
)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ascii_shortcut_is_the_skeleton() {
        for b in 0u8..0x80 {
            let c = (b as char).to_string();
            let skeleton: String = unicode_security::skeleton(&c).collect();
            assert_eq!(ascii_prototype(b as char), skeleton, "{b:#x}");
        }
        assert_eq!(
            normalised("agent/approvaIs/x.md"),
            normalised("agent/approvals/x.md")
        );
    }
}
