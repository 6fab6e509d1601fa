//! Reading the run logs back: the run records (`.tabd/runs/YYYY-MM-DD.jsonl`, for `tabd runs` and
//! crash recovery) as a stream, one line at a time, each at most `MAX_RECORD_LINE` bytes, and
//! whether a daily note already holds a run's section, in pieces. `.tabd/` and the daily notes
//! are in the vault, so a sync tool or another program can put anything there: a file of any
//! size, a line without an end, bytes that are not UTF-8. A line over the cap is passed over
//! unread (its bytes are counted, never kept) and said, with its number; one that is not a record
//! is said too; the others are read.

use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;

use serde_json::Value;

use crate::base::text::thousands;
use crate::base::vault::{Vault, VaultError, VaultPath};

/// The most one run record may take to be read back: far more than a run writes (its tool calls'
/// inputs come from model responses of at most 32 MiB each, and a run's record is a few KB), and
/// what one line may cost `tabd runs` in memory.
pub const MAX_RECORD_LINE: usize = 64 * 1024 * 1024;

/// One line of a run-record file that could not be read, and why (a sentence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// The file, vault-relative.
    pub file: String,
    /// 1-based.
    pub line: usize,
    pub why: String,
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}; skipped", self.file, self.line, self.why)
    }
}

/// Calls `record` with each run record of `path` in order, and `unread` with each line that is
/// not one (over the cap, or not a JSON object). Errors only when the file cannot be opened or
/// read at all.
pub fn each_record(
    vault: &Vault,
    path: &VaultPath,
    record: impl FnMut(Value),
    unread: impl FnMut(Unread),
) -> Result<(), VaultError> {
    let (file, _) = vault.open_regular(path)?;
    each_record_in(file, &path.to_string(), MAX_RECORD_LINE, record, unread)
        .map_err(|e| crate::base::vault::io_error(path, &e))
}

/// Whether a line of `path` (each read as `each_record` reads them) holds `needle`; stops at the
/// first. A file that cannot be read holds nothing.
pub fn has_line_with(vault: &Vault, path: &VaultPath, needle: &str) -> bool {
    let Ok((file, _)) = vault.open_regular(path) else {
        return false;
    };
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut found = false;
    let read = each_line_in(file, MAX_RECORD_LINE, |_, line| match line {
        Line::Read(bytes) if finder.find(bytes).is_some() => {
            found = true;
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    });
    found && read.is_ok()
}

/// Whether `path` holds `text` anywhere (across lines), read in pieces: memory stays that of
/// one piece and `text`, whatever the file's size or bytes. A file that cannot be read holds
/// nothing.
pub fn holds(vault: &Vault, path: &VaultPath, text: &str) -> bool {
    match vault.open_regular(path) {
        Ok((file, _)) => holds_in(file, text.as_bytes()).unwrap_or(false),
        Err(_) => false,
    }
}

/// `holds` over any reader.
fn holds_in(mut from: impl Read, text: &[u8]) -> std::io::Result<bool> {
    let finder = memchr::memmem::Finder::new(text);
    // What a match may still need from the piece before: all but one byte of `text`.
    let keep = text.len().saturating_sub(1);
    let piece = (64 * 1024).max(text.len());
    let mut window: Vec<u8> = Vec::with_capacity(keep + piece);
    let mut buf = vec![0u8; piece];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        window.extend_from_slice(&buf[..n]);
        if finder.find(&window).is_some() {
            return Ok(true);
        }
        let cut = window.len().saturating_sub(keep);
        window.drain(..cut);
    }
}

/// One line as `each_line_in` reads it.
enum Line<'a> {
    /// Its bytes, without the line end.
    Read(&'a [u8]),
    /// Over the cap: how many bytes it had (passed over, never kept).
    TooLong(u64),
}

/// Calls `each` with every line of `from` and its number (1-based), each at most `cap` bytes
/// (line end not counted), until it says to stop.
fn each_line_in(
    from: impl Read,
    cap: usize,
    mut each: impl FnMut(usize, Line<'_>) -> ControlFlow<()>,
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        // One byte more than a line may hold, and its end (`\r\n` at most).
        let limit = cap as u64 + 2;
        if (&mut reader).take(limit).read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let ended = line.last() == Some(&b'\n');
        if ended {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let seen = if line.len() > cap {
            let rest = if ended { 0 } else { pass_line(&mut reader)? };
            each(number, Line::TooLong(line.len() as u64 + rest))
        } else {
            each(number, Line::Read(&line))
        };
        if seen.is_break() {
            return Ok(());
        }
    }
    Ok(())
}

/// `each_record` over any reader, with lines of at most `cap` bytes (line end not counted).
fn each_record_in(
    from: impl Read,
    file: &str,
    cap: usize,
    mut record: impl FnMut(Value),
    mut unread: impl FnMut(Unread),
) -> std::io::Result<()> {
    each_line_in(from, cap, |number, line| {
        let skip = |why: String| Unread {
            file: file.to_string(),
            line: number,
            why,
        };
        match line {
            Line::TooLong(size) => unread(skip(format!(
                "a line of {} bytes, over the {} bytes a run record may take",
                thousands(size),
                thousands(cap as u64)
            ))),
            Line::Read(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Line::Read(line) => match serde_json::from_slice::<Value>(line) {
                Ok(v) if v.is_object() => record(v),
                Ok(_) => unread(skip("not a run record (a JSON object)".into())),
                Err(e) => {
                    // serde_json says `at line 1 column N`: the line is this one.
                    let said = e.to_string();
                    let what = said.split(" at line ").next().unwrap_or(&said);
                    unread(skip(format!(
                        "not a run record: not JSON ({what} at column {})",
                        e.column()
                    )))
                }
            },
        }
        ControlFlow::Continue(())
    })
}

/// Reads past the rest of a line, keeping none of it; returns how many bytes it had (its end
/// included).
fn pass_line(reader: &mut impl BufRead) -> std::io::Result<u64> {
    let mut passed = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(passed);
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(passed + i as u64);
            }
            None => {
                let n = buf.len();
                reader.consume(n);
                passed += n as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &[u8], cap: usize) -> (Vec<Value>, Vec<String>) {
        let mut records = Vec::new();
        let mut unread = Vec::new();
        each_record_in(
            text,
            "runs.jsonl",
            cap,
            |v| records.push(v),
            |u| unread.push(u.to_string()),
        )
        .unwrap();
        (records, unread)
    }

    #[test]
    fn a_line_over_the_cap_is_passed_over_and_named_and_the_rest_is_read() {
        let long = format!("{{\"run_id\": \"{}\"}}", "x".repeat(200));
        let text = format!(
            "{{\"run_id\": \"a\"}}\n{long}\n\n{{\"run_id\": \"b\"}}\r\nnot json\n[1]\n{}\n{{\"run_id\": \"c\"}}",
            "y".repeat(64)
        );
        let (records, unread) = read(text.as_bytes(), 64);
        let ids: Vec<&str> = records.iter().filter_map(|r| r["run_id"].as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(unread.len(), 4, "{unread:?}");
        assert!(
            unread[0]
                == "runs.jsonl:2: a line of 214 bytes, over the 64 bytes a run record may take; skipped",
            "{unread:?}"
        );
        assert_eq!(
            unread[1],
            "runs.jsonl:5: not a run record: not JSON (expected ident at column 2); skipped"
        );
        assert!(
            unread[2].starts_with("runs.jsonl:6: not a run record"),
            "{unread:?}"
        );
        // Exactly the cap is a line; one byte more is not.
        assert!(
            unread[3].starts_with("runs.jsonl:7: not a run record"),
            "{unread:?}"
        );
        let (_, unread) = read(format!("{}\n", "z".repeat(65)).as_bytes(), 64);
        assert!(unread[0].contains(":1: a line of 65 bytes"), "{unread:?}");
    }

    /// A run's section is found wherever it is — across the pieces the note is read in, after
    /// bytes that are not UTF-8 — and not found when only its start is there.
    #[test]
    fn a_section_is_found_across_pieces_and_past_bytes_that_are_not_utf8() {
        let section = format!(
            "## 09:00 · Delivery · inbox\n{}\nUndo: `tabd undo x`\n",
            "- a line\n".repeat(20)
        );
        for at in [0, 1, 64 * 1024 - 10, 64 * 1024, 200_000] {
            let mut note = vec![b'\xff'; at];
            note.extend_from_slice(section.as_bytes());
            note.extend_from_slice(b"after\n");
            assert!(holds_in(note.as_slice(), section.as_bytes()).unwrap(), "{at}");
            let cut = &note[..at + section.len() - 1];
            assert!(!holds_in(cut, section.as_bytes()).unwrap(), "{at}, cut");
        }
        let big = "x".repeat(100_000);
        assert!(holds_in(format!("a{big}b").as_bytes(), big.as_bytes()).unwrap());
    }

    /// A record is found on its line past lines over the cap and lines that are not UTF-8.
    #[test]
    fn a_record_is_found_past_long_and_broken_lines() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        let path = VaultPath::parse("runs.jsonl", false).unwrap();
        let mut text = b"\xff\xfe\n".to_vec();
        text.extend_from_slice(&vec![b'y'; MAX_RECORD_LINE + 10]);
        text.extend_from_slice(b"\n{\"run_id\":\"r-2\"}\n");
        vault.write_atomic(&path, &text).unwrap();
        assert!(has_line_with(&vault, &path, "\"run_id\":\"r-2\""));
        assert!(!has_line_with(&vault, &path, "\"run_id\":\"r-3\""));
        assert!(!has_line_with(
            &vault,
            &VaultPath::parse("none.jsonl", false).unwrap(),
            "x"
        ));
    }

    #[test]
    fn a_last_line_without_an_end_is_read_or_passed_over() {
        let (records, unread) = read(b"{\"run_id\": \"a\"}", 64);
        assert_eq!(records.len(), 1);
        assert!(unread.is_empty());
        let (records, unread) = read("w".repeat(1000).as_bytes(), 64);
        assert!(records.is_empty());
        assert!(unread[0].contains(":1: a line of 1,000 bytes"), "{unread:?}");
    }
}
