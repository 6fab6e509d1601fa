//! The record of an in-place write, made before the write (issue 36): which note, where in it,
//! the bytes it replaces and the bytes it writes, sealed with tabd's key and bound to the note's
//! path. Read back after a crash it is input like any other file on disk (docs/spec.md §24): it is
//! used only when its seal holds for that note, its shape is exactly what tabd writes, and the
//! note is exactly as a crash in the middle of that write could have left it.
//!
//! On disk: the seal's line (`signing::Key::seal`), one line of JSON (`Head`), then the replaced
//! bytes and the written bytes, as they are.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::super::{layout, VaultPath};
use crate::base::signing::{Key, Unsealed};

/// What a record is sealed for: a MAC made for any other kind of record never passes for one.
const PURPOSE: &str = "daily-note splice";

/// At most this much of what comes before the replaced bytes is held to its digest.
pub(super) const BEFORE: usize = 4096;

/// A record larger than this is not one tabd wrote; tabd writes none so large (an entry and the
/// 64 KiB it replaces, 64 MiB in all).
pub(super) const MAX_RECORD: u64 = 64 << 20;

/// The record's JSON line is at most this long.
const MAX_HEAD: usize = 4096;

/// The JSON line of a record: where the write goes and what is around it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Head {
    /// The note, as the seal binds it (said again for a person reading the file).
    path: String,
    /// Where in the note the write starts.
    at: u64,
    /// How many bytes before `at` `before_sha256` covers.
    before: u64,
    before_sha256: String,
    /// The lengths of the replaced and the written bytes that follow the line.
    old: u64,
    text: u64,
}

/// Why a record found beside a note was not used (and was removed).
#[derive(Debug, thiserror::Error)]
pub(super) enum NotUsed {
    #[error("{0}")]
    Unsealed(#[from] Unsealed),
    #[error("it is not a record tabd writes ({0})")]
    Malformed(&'static str),
    #[error("it cannot be read as a record: {0}")]
    Unreadable(String),
    #[error(
        "the note is not as a crash during that write could have left it (it changed since, or the \
         record is an old copy brought back)"
    )]
    Stale,
}

/// A record opened: the write it promises.
#[derive(Debug)]
pub(super) struct Intent<'a> {
    pub at: u64,
    /// How many bytes before `at` are checked against their digest.
    pub before: u64,
    before_sha256: String,
    pub old: &'a [u8],
    pub text: &'a [u8],
}

/// Where the record of a write into `note` is: `.tabd/splices/` and a digest of the note's path
/// (any path makes a plain name, one name per note).
pub(super) fn record_path(note: &VaultPath) -> VaultPath {
    let digest = Sha256::digest(note.as_str().as_bytes());
    let name = hex(&digest[..16]);
    VaultPath::parse(&format!("{}/{name}", layout::SPLICES), false).unwrap_or_else(|_| VaultPath::root())
}

/// The record of writing `text` at `at` in `note`, over `old`, after `before`.
pub(super) fn seal(key: &Key, note: &VaultPath, at: u64, before: &[u8], old: &[u8], text: &[u8]) -> Vec<u8> {
    let head = Head {
        path: note.as_str().to_string(),
        at,
        before: before.len() as u64,
        before_sha256: hex(&Sha256::digest(before)),
        old: old.len() as u64,
        text: text.len() as u64,
    };
    let mut body = serde_json::to_vec(&head).unwrap_or_default();
    body.push(b'\n');
    body.extend_from_slice(old);
    body.extend_from_slice(text);
    key.seal(PURPOSE, &[note.as_str().as_bytes()], &body)
}

/// The note a record names, unchecked: only to know which note's lock to take before the record
/// is opened (`open`) under it.
pub(super) fn named_note(file: &[u8]) -> Option<String> {
    let body = &file[file.iter().position(|b| *b == b'\n')? + 1..];
    let line = &body[..body.iter().take(MAX_HEAD).position(|b| *b == b'\n')?];
    serde_json::from_slice::<Head>(line).ok().map(|h| h.path)
}

/// The write a record promises, when its seal holds for `note` and it is shaped as tabd writes.
pub(super) fn open<'a>(key: &Key, note: &VaultPath, file: &'a [u8]) -> Result<Intent<'a>, NotUsed> {
    let body = key.open(PURPOSE, &[note.as_str().as_bytes()], file)?;
    let Some(end) = body.iter().take(MAX_HEAD).position(|b| *b == b'\n') else {
        return Err(NotUsed::Malformed("no line of JSON first"));
    };
    let head: Head =
        serde_json::from_slice(&body[..end]).map_err(|_| NotUsed::Malformed("its line is not its JSON"))?;
    let rest = &body[end + 1..];
    if head.path != note.as_str() {
        return Err(NotUsed::Malformed("it names another note"));
    }
    if head.old.checked_add(head.text) != Some(rest.len() as u64) {
        return Err(NotUsed::Malformed("its lengths are not the bytes it holds"));
    }
    if head.before > BEFORE as u64 || head.before > head.at || head.text == 0 {
        return Err(NotUsed::Malformed("what it says is out of bounds"));
    }
    let (old, text) = rest.split_at(head.old as usize);
    Ok(Intent {
        at: head.at,
        before: head.before,
        before_sha256: head.before_sha256,
        old,
        text,
    })
}

impl Intent<'_> {
    /// The most bytes the note can hold from `at` on while this write is not finished: the
    /// replaced bytes, or the written ones once more was written than was there.
    pub fn longest(&self) -> u64 {
        self.old.len().max(self.text.len()) as u64
    }

    /// Whether `bytes` (the `before` bytes up to `at`, read now) are the ones the write followed.
    pub fn follows(&self, bytes: &[u8]) -> bool {
        hex(&Sha256::digest(bytes)) == self.before_sha256
    }

    /// How much of the write is in place, when `now` (the note from `at` to its end) is what the
    /// write leaves after some of its first bytes: the written bytes' start, then the rest of the
    /// replaced ones. `None`: the note is not as this write could have left it.
    ///
    /// The longest start `now` shares with the text is enough to look at: had fewer bytes been
    /// written, the replaced bytes between match the text there, so both read the same.
    pub fn written(&self, now: &[u8]) -> Option<usize> {
        let k = now.iter().zip(self.text).take_while(|(a, b)| a == b).count();
        let rest = self.old.get(k..).unwrap_or_default();
        (now.len() == k + rest.len() && now[k..] == *rest).then_some(k)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> VaultPath {
        VaultPath::parse("daily/2026-11-25.md", false).unwrap()
    }

    /// Every state a write can be cut at reads as that write, partly done; anything else does not.
    #[test]
    fn a_note_cut_anywhere_in_the_write_reads_as_that_write() {
        let key = Key::from_bytes(&[5; 32]);
        for (old, text) in [
            (&b"## Events\n- a\n"[..], &b"## 09:00\n\n## Events\n- a\n"[..]),
            (b"## Events\n- a long line\n", b"## E\n"),
            (b"same\n", b"same\n"),
        ] {
            let file = seal(&key, &note(), 100, b"head\n", old, text);
            let intent = open(&key, &note(), &file).unwrap();
            for k in 0..=text.len() {
                let mut now = text[..k].to_vec();
                now.extend_from_slice(old.get(k..).unwrap_or_default());
                let got = intent.written(&now).unwrap_or_else(|| panic!("k = {k}"));
                // Finishing: the rest of the text from there, the note cut after it.
                now.truncate(got);
                now.extend_from_slice(&text[got..]);
                assert_eq!(now, text, "k = {k}");
            }
            let mut longer = text.to_vec();
            longer.extend_from_slice(b"- b\n");
            assert_eq!(intent.written(&longer), None, "written, then more after it");
            assert_eq!(intent.written(b"something else\n"), None);
            assert!(intent.follows(b"head\n"));
            assert!(!intent.follows(b"HEAD\n"));
        }
    }

    /// A record opens only for the note it was sealed for, under tabd's key, unedited.
    #[test]
    fn a_record_opens_only_for_its_note_under_tabds_key() {
        let key = Key::from_bytes(&[5; 32]);
        let file = seal(&key, &note(), 100, b"", b"old", b"new");
        assert_eq!(named_note(&file).as_deref(), Some("daily/2026-11-25.md"));
        let other = VaultPath::parse("daily/2026-11-26.md", false).unwrap();
        assert!(matches!(
            open(&key, &other, &file),
            Err(NotUsed::Unsealed(Unsealed::Forged))
        ));
        assert!(matches!(
            open(&Key::from_bytes(&[6; 32]), &note(), &file),
            Err(NotUsed::Unsealed(Unsealed::Forged))
        ));
        let mut edited = file.clone();
        *edited.last_mut().unwrap() = b'X';
        assert!(matches!(open(&key, &note(), &edited), Err(NotUsed::Unsealed(_))));
        let body = &file[file.iter().position(|b| *b == b'\n').unwrap() + 1..];
        assert!(matches!(
            open(&key, &note(), body),
            Err(NotUsed::Unsealed(Unsealed::NoSeal))
        ));
        // Sealed, but not shaped as tabd writes one.
        let odd = key.seal(PURPOSE, &[note().as_str().as_bytes()], b"{\"path\":1}\nxx");
        assert!(matches!(open(&key, &note(), &odd), Err(NotUsed::Malformed(_))));
        assert_ne!(record_path(&note()), record_path(&other));
        assert!(record_path(&note()).as_str().starts_with(".tabd/splices/"));
    }
}
