//! The `notes_truncated` of a run record (docs/spec.md §9, extended): trigger notes larger than one
//! prompt, and what the daily section says of them, so a run whose model may not have read all
//! of its note is never a bare `ok`.

use serde::{Deserialize, Serialize};

use super::{wikilink, RunRecord};
use crate::base::text::thousands;

/// A trigger note larger than one prompt (the JSONL `notes_truncated`), and how much of it the
/// model saw: its first `included_bytes` in the prompt, `read_bytes` more through `read_file`
/// (each byte counted once). The rest was never read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteTruncated {
    /// Where the note was when the run read it (as in `trigger.notes`).
    pub path: String,
    /// The whole note.
    pub bytes: u64,
    pub lines: u64,
    /// Its start, in the prompt.
    pub included_bytes: u64,
    /// Read beyond that through `read_file`.
    pub read_bytes: u64,
}

impl NoteTruncated {
    /// Bytes the model never saw.
    pub fn unread_bytes(&self) -> u64 {
        self.bytes
            .saturating_sub(self.included_bytes)
            .saturating_sub(self.read_bytes)
    }
}

/// The Outcome's qualifier when a note was larger than one prompt: never a bare `ok` for a run
/// whose model may not have read all of its note.
pub(super) fn larger_than_prompt(rec: &RunRecord) -> Option<String> {
    let notes = &rec.notes_truncated;
    let unread = notes.iter().filter(|t| t.unread_bytes() > 0).count();
    match (notes.as_slice(), unread) {
        ([], _) => None,
        ([t], 0) => Some(format!(
            "note larger than one prompt ({}), read in full in pages",
            size_text(t.bytes)
        )),
        ([t], _) => Some(format!(
            "note larger than one prompt ({}), {} of it never read",
            size_text(t.bytes),
            share(t.unread_bytes(), t.bytes)
        )),
        (_, 0) => Some(format!(
            "{} notes larger than one prompt, read in full in pages",
            notes.len()
        )),
        (_, n) => Some(format!(
            "{} notes larger than one prompt, {n} of them not read in full",
            notes.len()
        )),
    }
}

/// `- **Larger than one prompt:** [[note]] — …`: what of the note the model saw.
pub(super) fn larger_than_prompt_lines(rec: &RunRecord) -> String {
    let mut s = String::new();
    for t in &rec.notes_truncated {
        let at = rec
            .moved
            .iter()
            .find(|m| m.from == t.path)
            .map_or(t.path.as_str(), |m| m.to.as_str());
        let unread = match t.unread_bytes() {
            0 => "nothing left unread".to_string(),
            n => format!("{} ({}) never read", size_text(n), share(n, t.bytes)),
        };
        s.push_str(&format!(
            "- **Larger than one prompt:** {} — {} in {} lines; the prompt held its first {}, the model read {} more in pages (`read_file`); {unread}\n",
            wikilink(at),
            size_text(t.bytes),
            thousands(t.lines),
            size_text(t.included_bytes),
            size_text(t.read_bytes),
        ));
    }
    s
}

/// `5.9 MB`, `64 KB`, `812 bytes` (decimal units, as file managers show them).
fn size_text(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} bytes"),
        1_000..1_000_000 => format!("{} KB", bytes / 1_000),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// `part` of `whole` as a percentage a person reads (`<1%` rather than a misleading `0%`).
fn share(part: u64, whole: u64) -> String {
    let pct = part.saturating_mul(100) / whole.max(1);
    if pct == 0 && part > 0 {
        "<1%".into()
    } else {
        format!("{pct}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::runlog::{HumanRun, Moved, RunLog};

    fn big(bytes: u64, included: u64, read: u64) -> NoteTruncated {
        NoteTruncated {
            path: "agent/inbox/delivery/call.md".into(),
            bytes,
            lines: 84_445,
            included_bytes: included,
            read_bytes: read,
        }
    }

    fn section(notes: Vec<NoteTruncated>) -> String {
        let mut rec = super::super::tests::record();
        rec.trigger.notes = vec!["agent/inbox/delivery/call.md".into()];
        rec.moved = vec![Moved {
            from: "agent/inbox/delivery/call.md".into(),
            to: "agent/inbox/delivery/processed/call.md".into(),
        }];
        rec.notes_truncated = notes;
        let vault = std::sync::Arc::new(crate::base::vault::Vault::open(std::path::Path::new("/")).unwrap());
        RunLog::new(vault, chrono_tz::UTC).render_run(&rec, &HumanRun::default())
    }

    #[test]
    fn a_note_larger_than_one_prompt_is_never_a_bare_ok() {
        let s = section(vec![big(5_900_000, 65_000, 131_000)]);
        assert!(
            s.contains(
                "- **Outcome:** ok — note larger than one prompt (5.9 MB), 96% of it never read · 14.2 s"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "- **Larger than one prompt:** [[agent/inbox/delivery/processed/call]] — 5.9 MB in 84,445 lines; \
                 the prompt held its first 65 KB, the model read 131 KB more in pages (`read_file`); 5.7 MB (96%) never read\n"
            ),
            "{s}"
        );
        let s = section(vec![big(200_000, 65_000, 135_000)]);
        assert!(
            s.contains("ok — note larger than one prompt (200 KB), read in full in pages · "),
            "{s}"
        );
        assert!(s.contains("; nothing left unread\n"), "{s}");
        let s = section(vec![big(200_000, 65_000, 135_000), big(9_000_000, 65_000, 0)]);
        assert!(
            s.contains("ok — 2 notes larger than one prompt, 1 of them not read in full · "),
            "{s}"
        );
        let s = section(vec![big(100_000_000, 65_000, 0)]);
        assert!(s.contains("99% of it never read"), "{s}");
        assert!(!section(vec![]).contains("larger than one prompt"));
    }

    #[test]
    fn the_record_says_it_only_when_a_note_was_cut() {
        let mut rec = super::super::tests::record();
        let v = serde_json::to_value(&rec).unwrap();
        assert!(v.get("notes_truncated").is_none(), "absent when every note fit");
        rec.notes_truncated = vec![big(5_900_000, 65_000, 131_000)];
        let v = serde_json::to_value(&rec).unwrap();
        assert_eq!(
            v["notes_truncated"],
            serde_json::json!([{"path": "agent/inbox/delivery/call.md", "bytes": 5_900_000, "lines": 84_445,
                                "included_bytes": 65_000, "read_bytes": 131_000}])
        );
    }
}
