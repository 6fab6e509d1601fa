//! The trigger notes of part 3 (docs/spec.md §7.1). A note larger than one prompt (`max_file_bytes`)
//! shows its start, up to a line end where one is near, and then exactly how to read the rest:
//! where it is, how big it is, and the `read_file` call for the next page (docs/spec.md §8 paging).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::json;

use crate::base::text::thousands;
use crate::records::inbox::Note;
use crate::records::runlog::NoteTruncated;

/// The trigger notes, and those shown only in part.
pub(super) struct NotesText {
    pub text: String,
    pub truncated: Vec<NoteTruncated>,
}

/// What the model can use to read the rest of a note.
#[derive(Clone, Copy)]
pub(super) struct Readers {
    pub read_file: bool,
    pub search_files: bool,
}

pub(super) fn notes_text(notes: &[Note], max_file_bytes: usize, tz: Tz, readers: Readers) -> NotesText {
    let mut out = NotesText {
        text: String::new(),
        truncated: Vec::new(),
    };
    if notes.is_empty() {
        out.text = "\n\n## Trigger notes\nNone: no note is waiting in your inbox.".into();
        return out;
    }
    out.text.push_str(&format!(
        "\n\n## Trigger notes ({})\nHandle each of these; tabd moves them to processed/ after this run.",
        notes.len()
    ));
    for note in notes {
        let received = DateTime::<Utc>::from(note.modified)
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M");
        let hops = if note.hops_unknown {
            "unknown (treated as the end of a chain)".to_string()
        } else {
            note.hops.to_string()
        };
        out.text.push_str(&format!(
            "\n\n### {}\nfrom: {} · priority: {} · hops: {hops} · received {received}\n",
            note.path,
            note.from.as_deref().unwrap_or("a person"),
            note.priority.as_str(),
        ));
        let shown = start_of(&note.text, max_file_bytes);
        out.text.push_str(&format!("\n{shown}"));
        if let Some(t) = truncation(note, shown) {
            out.text.push_str(&rest_of(note, shown, readers));
            out.truncated.push(t);
        }
    }
    out
}

/// The notes of `notes` a prompt shows only in part (`read_bytes` left at 0), as `notes_text`
/// decides: what a run's record says of them.
pub fn larger_than_prompt(notes: &[Note], max_file_bytes: usize) -> Vec<NoteTruncated> {
    notes
        .iter()
        .filter_map(|n| truncation(n, start_of(&n.text, max_file_bytes)))
        .collect()
}

/// `note` as shown (`shown` of it), if that is not all of it.
fn truncation(note: &Note, shown: &str) -> Option<NoteTruncated> {
    (note.size > shown.len() as u64).then(|| NoteTruncated {
        path: note.path.as_str().to_string(),
        bytes: note.size,
        lines: note.lines as u64,
        included_bytes: shown.len() as u64,
        read_bytes: 0,
    })
}

/// The part of `text` a prompt shows: at most `max` bytes, ending at a line end when one is in
/// the second half of that (so the next page starts at a whole line).
fn start_of(text: &str, max: usize) -> &str {
    let shown = super::cut(text, max);
    if shown.len() == text.len() {
        return shown;
    }
    match shown.rfind('\n') {
        Some(i) if i + 1 >= shown.len() / 2 => &shown[..=i],
        _ => shown,
    }
}

/// The marker after a note's start: how big the whole is and how to read the rest.
fn rest_of(note: &Note, shown: &str, readers: Readers) -> String {
    let whole_lines = shown.bytes().filter(|&b| b == b'\n').count();
    let partial = shown.len() - shown.rfind('\n').map_or(0, |i| i + 1);
    let (next_line, line_byte) = (whole_lines + 1, partial);
    let upto = match (whole_lines, partial) {
        (0, _) => format!("line 1 up to its byte {partial}"),
        (n, 0) => format!("lines 1–{n}"),
        (n, _) => format!("lines 1–{n} and line {next_line} up to its byte {partial}"),
    };
    let mut s = format!(
        "{}[… tabd: this note is larger than one prompt: {} bytes in {} lines. Above are its first {} bytes \
         ({upto}); the rest is not in this prompt. The note stays at {} until this run ends.",
        if shown.ends_with('\n') { "\n" } else { "\n\n" },
        thousands(note.size),
        thousands(note.lines as u64),
        thousands(shown.len() as u64),
        note.path,
    );
    if !readers.read_file {
        s.push_str(
            " This role has no read_file tool, so the rest cannot be read in this run; say so in your summary.]",
        );
        return s;
    }
    let mut args = json!({"path": note.path.as_str(), "offset": next_line});
    if line_byte > 0 {
        args["line_byte"] = json!(line_byte);
    }
    s.push_str(&format!(
        "\nRead the rest in pages of up to 64 KiB, starting with:\nread_file {args}\n\
         Each result ends with the offset of the page after it."
    ));
    if readers.search_files {
        s.push_str(&format!(
            " To find a part first: search_files {}.",
            json!({"query": "…", "path": note.path.as_str()})
        ));
    }
    s.push_str("\nIf you do not read all of it, say in your summary what you left unread.]");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::vault::VaultPath;

    fn note(text: &str) -> Note {
        Note {
            path: VaultPath::parse("agent/inbox/r/call.md", false).unwrap(),
            text: text.to_string(),
            lines: crate::records::inbox::line_count(text),
            frontmatter: None,
            frontmatter_error: None,
            text_error: None,
            priority: Default::default(),
            hops: 0,
            hops_unknown: false,
            from: None,
            draft: false,
            modified: std::time::SystemTime::UNIX_EPOCH,
            size: text.len() as u64,
            ino: 0,
        }
    }

    const ALL: Readers = Readers {
        read_file: true,
        search_files: true,
    };

    #[test]
    fn a_note_that_fits_is_shown_whole_without_a_marker() {
        let out = notes_text(&[note("short\nnote\n")], 100, chrono_tz::UTC, ALL);
        assert!(out.text.ends_with("\nshort\nnote\n"), "{}", out.text);
        assert!(out.truncated.is_empty());
    }

    #[test]
    fn a_bigger_note_shows_whole_lines_and_the_call_for_the_next_page() {
        let text: String = (1..=100).map(|i| format!("line {i:03}\n")).collect();
        let out = notes_text(&[note(&text)], 95, chrono_tz::UTC, ALL);
        assert!(
            out.text.contains(
                "line 010\n\n[… tabd: this note is larger than one prompt: 900 bytes in 100 lines. \
             Above are its first 90 bytes (lines 1–10)"
            ),
            "{}",
            out.text
        );
        assert!(!out.text.contains("line 011"));
        assert!(
            out.text
                .contains("\nread_file {\"offset\":11,\"path\":\"agent/inbox/r/call.md\"}\n"),
            "{}",
            out.text
        );
        assert!(out
            .text
            .contains("search_files {\"path\":\"agent/inbox/r/call.md\""));
        assert_eq!(
            out.truncated,
            [NoteTruncated {
                path: "agent/inbox/r/call.md".into(),
                bytes: 900,
                lines: 100,
                included_bytes: 90,
                read_bytes: 0
            }]
        );
        assert_eq!(
            larger_than_prompt(&[note(&text)], 95),
            out.truncated,
            "the record agrees"
        );
    }

    #[test]
    fn a_long_line_is_cut_inside_and_the_call_names_the_byte() {
        let text = format!("{}\nend\n", "x".repeat(500));
        let out = notes_text(&[note(&text)], 100, chrono_tz::UTC, ALL);
        assert!(out.text.contains("(line 1 up to its byte 100)"), "{}", out.text);
        assert!(
            out.text.contains("read_file {\"line_byte\":100,\"offset\":1,"),
            "{}",
            out.text
        );
    }

    #[test]
    fn without_read_file_the_model_is_told_it_cannot_read_the_rest() {
        let text = "word ".repeat(100);
        let none = Readers {
            read_file: false,
            search_files: false,
        };
        let out = notes_text(&[note(&text)], 100, chrono_tz::UTC, none);
        assert!(
            out.text.contains("This role has no read_file tool"),
            "{}",
            out.text
        );
        assert!(!out.text.contains("read_file {"));
        assert_eq!(out.truncated.len(), 1);
    }
}
