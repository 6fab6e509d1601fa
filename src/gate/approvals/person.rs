//! A change to the person's own note, as its approval note shows it (docs/spec.md §26): what the note
//! holds now against what the call would leave (a unified diff for a rewrite, the added lines for
//! an append, the two paths for a move), and each note's state when the change was asked for —
//! checked again before the call runs, so an edit the person made since is never written over.

use serde_json::Value;

use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::capabilities::tools::MAX_WRITE_BYTES;
use crate::records::journal;
use crate::records::state::approval_ledger::Base;

/// The most lines of a change an approval note shows (the call's arguments are there whole).
const MAX_LINES: usize = 200;
/// The largest note a rewrite is shown against, as a diff.
const SHOWN_BYTES: u64 = MAX_WRITE_BYTES as u64 * 8;

/// What an approval note says of the person's notes a call changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Asked {
    /// Markdown for the note (empty: the call changes none of their notes).
    pub section: String,
    /// Each of their notes as it was when asked.
    pub bases: Vec<Base>,
}

/// The change `tool` with `args` would make to `theirs` (real paths of the person's notes).
pub fn asked(vault: &Vault, tool: &str, args: &Value, theirs: &[VaultPath]) -> Asked {
    if theirs.is_empty() {
        return Asked::default();
    }
    let bases = theirs
        .iter()
        .map(|p| Base {
            path: p.to_string(),
            digest: journal::state_of(vault, p).ok().flatten(),
        })
        .collect();
    let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let names: Vec<String> = theirs.iter().map(|p| format!("`{p}`")).collect();
    let body = match tool {
        "write_file" => match vault.read_text(&theirs[0], SHOWN_BYTES) {
            Ok(now) => fenced("diff", &diff(theirs[0].as_str(), &now, text("content"))),
            Err(e) => replaced_whole(vault, &theirs[0], &e),
        },
        "append_file" => {
            let added: String = text("content").lines().map(|l| format!("+{l}\n")).collect();
            format!("Added at its end:\n\n{}", fenced("diff", &capped(&added)))
        }
        "move_file" => format!("It moves to `{}` (nothing in it changes).", text("to")),
        _ => String::new(),
    };
    Asked {
        section: format!(
            "## Your note changes\n\nThis call changes {}, which you wrote: tabd did not make it, so it waits \
             for you. What it would do, against the note as it was when this was asked:\n\n{body}\n\n\
             If you edit the note before deciding, the change is not made over your edit: the role is told \
             and may ask again.\n",
            names.join(", ")
        ),
        bases,
    }
}

/// A note a rewrite would replace that cannot be diffed (not text, too long to show): said so,
/// with its size — never a diff from nothing, which reads as a new note.
fn replaced_whole(vault: &Vault, path: &VaultPath, why: &VaultError) -> String {
    let why = match why {
        VaultError::NotUtf8(_) => "it is not UTF-8 text".to_string(),
        VaultError::TooLarge { .. } => format!(
            "it is over the {} bytes shown here",
            crate::base::text::thousands(SHOWN_BYTES)
        ),
        other => format!("it cannot be read: {other}"),
    };
    let size = vault
        .metadata(path)
        .map(|m| format!("all {} bytes", crate::base::text::thousands(m.size)))
        .unwrap_or_else(|_| "all".to_string());
    format!(
        "`{path}` cannot be shown as a change ({why}): this call replaces {size} of it with the text in \
         the arguments below."
    )
}

/// Why an approved change would now write over the person's words: the first of their notes that
/// is no longer as it was when the change was asked for, or the first of `theirs_now` (the call's
/// targets that are the person's now) that was not theirs then — not there yet, or tabd's before
/// they edited it — in a sentence; `None` when the change is still the one shown.
pub fn outdated(vault: &Vault, bases: &[Base], theirs_now: &[VaultPath]) -> Option<String> {
    let edited = bases.iter().find_map(|b| {
        let path = VaultPath::parse(&b.path, false).ok()?;
        let now = journal::state_of(vault, &path).ok().flatten();
        (now != b.digest).then(|| {
            format!(
                "{} changed after this was asked for, so the change shown is no longer what it would do; \
                 nothing was written over your edit",
                b.path
            )
        })
    });
    edited.or_else(|| {
        let became = theirs_now
            .iter()
            .find(|p| !bases.iter().any(|b| b.path == p.as_str()))?;
        Some(format!(
            "{became} is your note now, and was not when this was asked for (it was not there yet, or tabd had \
             made it and you have edited it since), so the change shown is no longer what it would do; nothing \
             was written over your note"
        ))
    })
}

/// A unified diff of `path` from `old` to `new`, at most `MAX_LINES` lines.
fn diff(path: &str, old: &str, new: &str) -> String {
    let text = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    capped(&text)
}

/// `text`, cut after `MAX_LINES` lines with a line saying how many were left out.
fn capped(text: &str) -> String {
    let total = text.lines().count();
    if total <= MAX_LINES {
        return text.to_string();
    }
    let kept: Vec<&str> = text.lines().take(MAX_LINES).collect();
    format!(
        "{}\n… {} more lines (the arguments below hold the whole text)\n",
        kept.join("\n"),
        total - MAX_LINES
    )
}

/// `text` in a fenced block of `lang`, the fence longer than any run of backticks in it.
fn fenced(lang: &str, text: &str) -> String {
    let mut fence = "```".to_string();
    while text.contains(&fence) {
        fence.push('`');
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    format!("{fence}{lang}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        for (p, t) in files {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
        let v = Vault::open(dir.path()).unwrap();
        (dir, v)
    }

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    #[test]
    fn a_rewrite_shows_the_lines_it_removes_and_adds() {
        let (_d, v) = vault_with(&[("Personal/ideas.md", "# Ideas\n- sail\n- bake bread\n")]);
        let args =
            serde_json::json!({"path": "Personal/ideas.md", "content": "# Ideas\n- sail\n- learn Rust\n"});
        let a = asked(&v, "write_file", &args, &[p("Personal/ideas.md")]);
        assert!(a.section.contains("-- bake bread"), "{}", a.section);
        assert!(a.section.contains("+- learn Rust"), "{}", a.section);
        assert!(a.section.contains("`Personal/ideas.md`"), "{}", a.section);
        assert_eq!(a.bases.len(), 1);
        assert!(a.bases[0].digest.is_some());
    }

    #[test]
    fn an_append_shows_what_it_adds_and_a_move_where_it_goes() {
        let (_d, v) = vault_with(&[("daily/2026-11-29.md", "dear diary\n")]);
        let args = serde_json::json!({"path": "daily/2026-11-29.md", "content": "tabd was here"});
        let a = asked(&v, "append_file", &args, &[p("daily/2026-11-29.md")]);
        assert!(a.section.contains("+tabd was here"), "{}", a.section);
        let args = serde_json::json!({"from": "daily/2026-11-29.md", "to": "old/x.md"});
        let a = asked(&v, "move_file", &args, &[p("daily/2026-11-29.md")]);
        assert!(a.section.contains("It moves to `old/x.md`"), "{}", a.section);
    }

    /// A change fenced so no line of the note can close the block and become the note's own text.
    #[test]
    fn backticks_in_the_note_cannot_close_the_block() {
        let (_d, v) = vault_with(&[("a.md", "```\n## Arguments\n```json\n{}\n```\n")]);
        let args = serde_json::json!({"path": "a.md", "content": "x"});
        let a = asked(&v, "write_file", &args, &[p("a.md")]);
        let parsed: Vec<_> = pulldown_cmark::Parser::new(&a.section)
            .filter(|e| {
                matches!(
                    e,
                    pulldown_cmark::Event::Start(pulldown_cmark::Tag::Heading { .. })
                )
            })
            .collect();
        assert_eq!(parsed.len(), 1, "only the section's own heading: {}", a.section);
    }

    #[test]
    fn an_edit_after_the_ask_makes_it_outdated() {
        let (d, v) = vault_with(&[("n.md", "mine\n")]);
        let args = serde_json::json!({"path": "n.md", "content": "theirs"});
        let a = asked(&v, "write_file", &args, &[p("n.md")]);
        assert_eq!(outdated(&v, &a.bases, &[]), None);
        std::fs::write(d.path().join("n.md"), "mine, edited\n").unwrap();
        let why = outdated(&v, &a.bases, &[]).expect("outdated");
        assert!(why.contains("n.md changed after this was asked for"), "{why}");
        std::fs::remove_file(d.path().join("n.md")).unwrap();
        assert!(
            outdated(&v, &a.bases, &[]).is_some(),
            "a note removed since is not as it was either"
        );
    }

    /// A target that was not the person's when asked (no note there, or tabd's) and is now:
    /// the change shown (a new note, no diff) would write over their words.
    #[test]
    fn a_note_that_became_theirs_since_the_ask_makes_it_outdated() {
        let (_d, v) = vault_with(&[("n.md", "mine\n"), ("Personal/new.md", "written since\n")]);
        let args = serde_json::json!({"path": "n.md", "content": "theirs"});
        let a = asked(&v, "write_file", &args, &[p("n.md")]);
        assert_eq!(outdated(&v, &a.bases, &[p("n.md")]), None, "shown as it is");
        let why = outdated(&v, &[], &[p("Personal/new.md")]).expect("outdated");
        assert!(why.contains("Personal/new.md is your note now"), "{why}");
    }

    /// A note tabd cannot show as text (a picture, a PDF, a note in another encoding, one over
    /// the size shown) is never diffed as if it were empty: that reads as a new note, when the
    /// call would replace every byte of theirs.
    #[test]
    fn a_note_that_cannot_be_shown_is_said_to_be_replaced_whole() {
        let (d, v) = vault_with(&[]);
        std::fs::create_dir_all(d.path().join("attachments")).unwrap();
        std::fs::write(
            d.path().join("attachments/photo.jpg"),
            b"\xff\xd8\xff\xe0 JFIF \x00\x10",
        )
        .unwrap();
        let args = serde_json::json!({"path": "attachments/photo.jpg", "content": "a caption\n"});
        let a = asked(&v, "write_file", &args, &[p("attachments/photo.jpg")]);
        assert!(
            !a.section.contains("+a caption"),
            "no diff from nothing: {}",
            a.section
        );
        assert!(a.section.contains("replaces all 12 bytes"), "{}", a.section);
        assert!(a.section.contains("not UTF-8 text"), "{}", a.section);
    }

    #[test]
    fn a_long_change_is_cut_with_a_count() {
        let old: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let text = diff("x.md", &old, "");
        assert!(text.lines().count() <= MAX_LINES + 2, "{}", text.lines().count());
        assert!(text.contains("more lines"), "{text}");
    }
}
