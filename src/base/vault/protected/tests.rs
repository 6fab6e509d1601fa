use crate::base::vault::layout::Layout;
use proptest::prelude::*;

use super::*;

#[test]
fn the_ascii_shortcut_is_the_skeleton() {
    for b in 0u8..0x80 {
        let c = (b as char).to_string();
        let skeleton: String = unicode_security::skeleton(&c).collect();
        assert_eq!(ascii_prototype(b as char), skeleton, "{b:#x}");
    }
    // And both forms of ASCII text are what the tables give.
    for text in ["CLAUDE.MD", "Mise.toml", "agent/approvaIs", "x|1I0O`\"%m"] {
        let wide: String = text.nfkc().collect();
        assert_eq!(
            fold_text(text),
            (
                skeleton(&wide.to_lowercase()).to_lowercase(),
                skeleton(&wide).to_lowercase()
            ),
            "{text}"
        );
    }
}

/// Issue 36, item 10: what a stock role created, every other case of the names, full-width
/// letters, trailing dots and spaces, look-alikes: each one is the protected name.
#[test]
fn case_width_look_alikes_and_trailing_dots_all_fold_to_the_name() {
    let loaded = |p: &str| fold(p).loaded_at().is_some();
    for p in [
        "CLAUDE.MD",
        "AGENTS.MD",
        "AGENTS.override.MD",
        "gemini.md",
        "conventions.md",
        "Mise.toml",
        "QWEN.MD",
        "\u{FF23}\u{FF2C}\u{FF21}\u{FF35}\u{FF24}\u{FF25}.md",
        "claude.md.",
        "claude.md ",
        "claude.md. . ",
        "claude.md\u{3000}",
        "Claude.Md",
        "project/deep/er/still/deeper/and/deeper/CLAUDE.MD",
        "CLAUDE\u{00AD}.md",
        "CLAU\u{200D}DE.md",
        "C\u{0406}AUDE.md",
        "\u{FF0E}envrc",
        "MISE.PROD.TOML",
        "Mise/Config.Toml",
        "PACKAGE.JSON",
        "makefile",
        "MAKEFILE",
        "work.CODE-WORKSPACE",
        "Logseq/Custom.JS",
    ] {
        assert!(loaded(p), "{p} is not caught");
    }
    for p in [
        "project/notes.md",
        "claude-notes.md",
        "mise.md",
        "Makefile.md",
        "logseq/page.md",
        "config.toml",
    ] {
        assert!(!loaded(p), "{p} is caught");
    }
    let owned = |p: &str| owned_by_tabd(&fold(p), &Layout::default()).map(|(n, _)| n);
    assert_eq!(
        owned("agent/INBOX/x.md"),
        None,
        "inboxes are protected, not tabd's"
    );
    assert!(fold("agent/INBOX/x.md").within(&fold(layout::INBOXES)));
    assert!(fold("agent/approvaIs/x.md").within(&fold(layout::APPROVALS)));
    assert!(fold("agent/\u{FF41}pprovals/x.md").within(&fold(layout::APPROVALS)));
    assert!(fold("agent/\u{0410}PPROVALS/x.md").within(&fold(layout::APPROVALS)));
    assert_eq!(owned("Daily/2026-11-25.md").as_deref(), Some(layout::DAILY));
    assert_eq!(owned("daily./2026-11-25.md").as_deref(), Some(layout::DAILY));
    assert_eq!(owned("AGENT/Status.MD").as_deref(), Some(layout::STATUS_NOTE));
    assert_eq!(owned("agent/status.md ").as_deref(), Some(layout::STATUS_NOTE));
    assert_eq!(owned("MEMORY.md").as_deref(), Some(layout::MEMORY));
    assert_eq!(
        owned("agent/Memory/risk.md").as_deref(),
        Some(layout::ROLE_MEMORIES)
    );
    assert_eq!(owned(".TABD/groups/1.json").as_deref(), Some(layout::TABD));
    assert_eq!(
        owned("\u{FF0E}tabd/suspended/x.json").as_deref(),
        Some(layout::TABD)
    );
    assert_eq!(owned("project/daily/x.md"), None);
    assert_eq!(owned("agent/status-report.md"), None);
}

/// The names `LOADED` lists, as the docs list them.
fn every_name() -> Vec<&'static str> {
    LOADED.iter().flat_map(|l| l.names.iter().copied()).collect()
}

/// One spelling of a name: each character in either case, full-width or not.
fn respelled(name: &str, picks: &[u8]) -> String {
    name.chars()
        .zip(picks.iter().cycle())
        .map(|(c, pick)| {
            let c = match pick % 2 {
                0 => c.to_ascii_uppercase(),
                _ => c.to_ascii_lowercase(),
            };
            // Full-width forms exist for every printable ASCII character.
            match (pick / 2) % 2 {
                1 if c.is_ascii_graphic() && c != '/' => {
                    char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c)
                }
                _ => c,
            }
        })
        .collect()
}

proptest! {
    /// Any case and width of a protected name (with trailing dots and spaces, in any folder) is
    /// that name: for the files other programs load, and for tabd's own.
    #[test]
    fn every_spelling_of_a_protected_name_is_caught(
        which in 0usize..1000,
        picks in proptest::collection::vec(0u8..4, 1..24),
        folder in "[a-z]{1,8}(/[a-z]{1,8}){0,2}",
        tail in "[. \u{3000}]{0,3}",
    ) {
        let names = every_name();
        let name = names[which % names.len()].replace('*', "x");
        let path = format!("{folder}/{}{tail}", respelled(&name, &picks));
        prop_assert!(fold(&path).loaded_at().is_some(), "{} not caught", path);
        let (owned, _) = TABD_OWNS[which % TABD_OWNS.len()];
        let path = format!("{}{tail}/x.md", respelled(owned, &picks));
        prop_assert!(owned_by_tabd(&fold(&path), &Layout::default()).is_some(), "{} not tabd's", path);
    }
}

/// The docs list every name, who loads it and why (issue 36: "the list … is in the docs").
#[test]
fn the_security_docs_list_every_name() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).unwrap();
    for name in every_name() {
        assert!(
            docs.contains(&format!("`{name}`")),
            "docs/security.md does not list `{name}`"
        );
    }
    for (name, _) in TABD_OWNS.iter().chain(PROTECTED) {
        assert!(
            docs.contains(&format!("`{name}")),
            "docs/security.md does not list `{name}`"
        );
    }
}
