//! A role file whose frontmatter lost its opening `---` (deleted by hand): its settings, closed by
//! the `---` under them, would read as a Markdown heading and be lost without a word. Found
//! (`formats::frontmatter::headless_block`, and a key that is a role setting, so prose before a
//! thematic break is not taken for it), said at the first setting's line, and left out of the
//! body.

use crate::formats::frontmatter::{headless_block, Headless};

/// A block of settings at the top of a role file with no opening `---` (it was deleted): its
/// lines are `key: value` and at least one key is a role setting, so it is not prose.
pub(super) fn block(text: &str) -> Option<Headless> {
    headless_block(text).filter(|block| {
        block
            .keys
            .iter()
            .any(|(key, _)| super::settings::KNOWN_KEYS.contains(&key.as_str()))
    })
}

/// What to do about a frontmatter that lost its opening `---`.
pub(super) fn message(block: &Headless) -> String {
    let first = block.first_line();
    let names: Vec<String> = block.keys.iter().take(3).map(|(k, _)| format!("`{k}`")).collect();
    let more = if block.keys.len() > 3 { ", …" } else { "" };
    let last = block.closing_line.saturating_sub(1).max(first);
    let lines = if last == first {
        format!("line {first} holds")
    } else {
        format!("lines {first}–{last} hold")
    };
    format!(
        "the frontmatter's opening `---` is missing: {lines} settings ({}{more}) closed by the `---` on \
         line {}, but no `---` opens them, so none of them is read; add a line `---` above line {first}",
        names.join(", "),
        block.closing_line,
    )
}

/// `text` with the block blanked, line breaks kept: the body's lines stay where they are in the
/// file, and Markdown reads no heading out of the settings.
pub(super) fn without(text: &str, block: &Headless) -> String {
    let head: String = text[..block.end].chars().filter(|c| *c == '\n').collect();
    format!("{head}{}", &text[block.end..])
}
