//! Reading the run records back (`.tabd/runs/YYYY-MM-DD.jsonl`, for `tabd runs`): a day's file is
//! read as a stream, one line at a time, each at most `MAX_RECORD_LINE` bytes. `.tabd/` is in
//! the vault, so a sync tool or another program can put anything there: a file of any size, a
//! line without an end. A line over the cap is passed over unread (its bytes are counted, never
//! kept) and said, with its number; one that is not a record is said too; the others are read.

use std::io::{BufRead, BufReader, Read};

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
        .map_err(|e| VaultError::Io(format!("{path}: {e}")))
}

/// `each_record` over any reader, with lines of at most `cap` bytes (line end not counted).
fn each_record_in(
    from: impl Read,
    file: &str,
    cap: usize,
    mut record: impl FnMut(Value),
    mut unread: impl FnMut(Unread),
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        // One byte more than a line may hold, and its end.
        let limit = cap as u64 + 2;
        if (&mut reader).take(limit).read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let ended = line.last() == Some(&b'\n');
        if ended {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let skip = |why: String| Unread {
            file: file.to_string(),
            line: number,
            why,
        };
        if line.len() > cap {
            let rest = if ended { 0 } else { pass_line(&mut reader)? };
            let size = line.len() as u64 + rest;
            unread(skip(format!(
                "a line of {} bytes, over the {} bytes a run record may take",
                thousands(size),
                thousands(cap as u64)
            )));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
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
        }
    }
    Ok(())
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
