//! Changing the end of a file tabd keeps (the daily run log) under the writers' `flock`, after
//! reading its first and last bytes: whose file it is is read from its head, where the next entry
//! goes from its end. A file that does not exist is never made here (the caller makes it whole,
//! header included, with `create_atomic`, so no writer ever sees it empty and half-made).
//!
//! An entry that replaces bytes (a run's section goes in before the day's `## Events`, which is
//! written again after it) is written down first: a record of the write in `.tabd/splices/`
//! (`intent`), sealed with tabd's key, synced with its folder; then the note is written in place
//! and synced; then the record goes. A crash in between leaves the record, and the next write to
//! that note — or `finish_splices` at start — finishes the write before anything else reads or
//! writes the note's end, when the note is exactly as that crash could have left it. An append
//! (nothing replaced) needs no record: a crash can cut only its own text short.

mod intent;

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use cap_std::fs::{File, OpenOptions, OpenOptionsExt};

use super::{io_error, kind_name, layout, lock, Durability, FileEnd, Vault, VaultError, VaultPath};
use crate::base::faults::Faults;
use crate::base::signing::Key;
use intent::{Intent, NotUsed};

/// The fault point that cuts an in-place write in the middle (`base::faults`).
const TORN: &str = "daily-splice-torn";

/// What `Vault::splice_end` does with a file, decided from its head and end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Splice {
    /// Leave the file as it is (not the caller's to write).
    Refuse,
    /// Replace the file's last `cut` bytes (0: append) with `text`.
    Write { cut: usize, text: String },
}

/// What makes an in-place write safe from a crash: tabd's key, which seals the record of the
/// write, and the fault points a test sets (`daily-splice-torn`).
#[derive(Debug, Clone)]
pub struct SpliceGuard {
    key: Arc<Key>,
    faults: Faults,
}

impl SpliceGuard {
    pub fn new(key: Arc<Key>, faults: Faults) -> Self {
        Self { key, faults }
    }

    /// A guard for unit tests: a fixed key, no faults.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::new(Arc::new(Key::from_bytes(&[1; 32])), Faults::default())
    }
}

/// What a record of an unfinished write came to.
enum Finished {
    /// The write was done already (the crash came after it, before the record went).
    Already,
    /// The rest of it was written now.
    Now,
}

impl Vault {
    /// `create_atomic` without syncing the file first: for a small file tabd can always make
    /// again (a daily note's header), made on the path of a run's log, where an fsync is a wait
    /// for nothing.
    pub fn create_unsynced(&self, path: &VaultPath, bytes: &[u8]) -> Result<(), VaultError> {
        self.create_new(path, bytes, false)
    }

    /// Reads the first `head` and last `tail` bytes of the existing regular file `path` under an
    /// exclusive `flock` (the one `append` takes, so no tabd writer comes between) and does what
    /// `decide` makes of them. `Ok(false)`: refused, the file is untouched. A `cut` larger than
    /// the end read is refused too (only bytes that were seen are replaced).
    ///
    /// First, a write into this file that a crash cut short is finished (`guard`). The text is
    /// written from `len - cut`; when it replaces bytes, its record is written first and the file
    /// is synced before the record goes; when it is shorter than what it replaces the file is cut
    /// after it.
    pub fn splice_end(
        &self,
        path: &VaultPath,
        head: u64,
        tail: u64,
        guard: &SpliceGuard,
        decide: impl FnOnce(&[u8], FileEnd<'_>) -> Splice,
    ) -> Result<bool, VaultError> {
        let path = &*self.real(path);
        let io = |e: std::io::Error| io_error(path, &e);
        let mut file = self.open_locked(path)?;
        self.finish_locked(path, &mut file, guard)?;
        let len = file.metadata().map_err(io)?.len();
        let first = read_at(&mut file, 0, head.min(len)).map_err(io)?;
        let take = tail.min(len);
        let last = read_at(&mut file, len - take, take).map_err(io)?;
        let end = FileEnd {
            bytes: &last,
            whole: take == len,
        };
        let (cut, text) = match decide(&first, end) {
            Splice::Write { cut, text } if cut as u64 <= take => (cut, text),
            Splice::Write { .. } | Splice::Refuse => return Ok(false),
        };
        let at = len - cut as u64;
        if cut == 0 {
            write_at(&mut file, at, text.as_bytes()).map_err(io)?;
            return Ok(true);
        }
        let (seen, old) = last.split_at(last.len() - cut);
        let before = &seen[seen.len().saturating_sub(intent::BEFORE)..];
        let record = intent::record_path(path);
        let sealed = intent::seal(&guard.key, path, at, before, old, text.as_bytes());
        if sealed.len() as u64 > intent::MAX_RECORD {
            return Err(VaultError::TooLarge {
                path: path.to_string(),
                size: sealed.len() as u64,
                cap: intent::MAX_RECORD,
            });
        }
        self.write_atomic_with(&record, &sealed, Durability::FileAndFolder)?;
        if guard.faults.hit(TORN) {
            // Half the text in place, then the abort: what a crash in the middle leaves.
            let half = &text.as_bytes()[..text.len() / 2];
            write_at(&mut file, at, half).map_err(io)?;
            guard.faults.abort_at(TORN);
        }
        overwrite(&mut file, at, text.as_bytes(), len).map_err(io)?;
        self.forget_record(path, &record);
        Ok(true)
    }

    /// Finishes the write into the note `path` that a crash cut short, if there is one: before
    /// the note is read to see whether an entry is in it. No note: nothing to do.
    pub fn finish_splice(&self, path: &VaultPath, guard: &SpliceGuard) -> Result<(), VaultError> {
        let path = &*self.real(path);
        match self.open_locked(path) {
            Ok(mut file) => self.finish_locked(path, &mut file, guard),
            Err(VaultError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Finishes every write into a note that a crash cut short, before anything reads a note to
    /// see what is in it (a run's recovery asks whether its section is there). Returns what could
    /// not be done, each a sentence.
    pub fn finish_splices(&self, guard: &SpliceGuard) -> Vec<String> {
        let Ok(folder) = VaultPath::parse(layout::SPLICES, false) else {
            return Vec::new();
        };
        let listing = match self.list(&folder) {
            Ok(l) => l,
            Err(VaultError::NotFound(_)) => return Vec::new(),
            Err(e) => return vec![format!("{folder}: {e}")],
        };
        let mut problems = Vec::new();
        for entry in listing.entries.iter().filter(|e| !e.is_dir) {
            let Some(name) = entry.path.as_str().rsplit('/').next() else {
                continue;
            };
            if super::is_tabd_temp(name) {
                continue;
            }
            if let Err(e) = self.finish_recorded(&folder, name, guard) {
                problems.push(format!("{folder}/{name}: {e}"));
            }
        }
        problems
    }

    /// Finishes the write the record `folder/name` holds, under its note's lock; a record that
    /// names no note of its own name, or a note that is gone, is not used.
    fn finish_recorded(&self, folder: &VaultPath, name: &str, guard: &SpliceGuard) -> Result<(), VaultError> {
        let record = folder.join(name)?;
        let (bytes, _) = match self.read_bytes(&record, intent::MAX_RECORD) {
            Ok(read) => read,
            Err(VaultError::NotFound(_)) => return Ok(()),
            Err(e) => return self.discard(&record, None, &NotUsed::Unreadable(e.to_string())),
        };
        let note = intent::named_note(&bytes).and_then(|p| VaultPath::parse(&p, false).ok());
        let Some(note) = note.filter(|n| intent::record_path(n) == record) else {
            return self.discard(&record, None, &NotUsed::Malformed("it names no note of its name"));
        };
        match self.open_locked(&note) {
            Ok(mut file) => self.finish_locked(&note, &mut file, guard),
            Err(VaultError::NotFound(_)) => self.discard(&record, Some(&note), &NotUsed::Stale),
            Err(e) => Err(e),
        }
    }

    /// Opens the existing regular file `path` to read and write at offsets (not in append mode:
    /// a write at an offset would go to the end), and takes the writers' `flock` on it; it is
    /// released when the file is closed.
    fn open_locked(&self, path: &VaultPath) -> Result<File, VaultError> {
        let file = self.open_writable(path)?;
        lock::flock(&file, true).map_err(|e| lock::lock_error(path, &e))?;
        Ok(file)
    }

    /// Opens the existing regular file `path` to read and write (never made, never blocking on a
    /// FIFO): as a writer that locks it opens it — where `flock` is emulated with `fcntl` (NFS,
    /// CIFS) an exclusive lock needs a file open for writing.
    pub(super) fn open_writable(&self, path: &VaultPath) -> Result<File, VaultError> {
        let parent = self.open_parent(path, false)?;
        let mut opts = OpenOptions::new();
        opts.read(true)
            .write(true)
            .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
        let io = |e: std::io::Error| io_error(path, &e);
        let file = parent.open_with(path.file_name(), &opts).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(VaultError::NotRegular {
                path: path.to_string(),
                kind: kind_name(&meta.file_type()),
            });
        }
        Ok(file)
    }

    /// With `file` (the note `path`) locked: finishes the write its record says a crash cut
    /// short, when the note is exactly as that crash could have left it, and removes the record
    /// either way. No record: nothing to do.
    fn finish_locked(
        &self,
        path: &VaultPath,
        file: &mut File,
        guard: &SpliceGuard,
    ) -> Result<(), VaultError> {
        let record = intent::record_path(path);
        let bytes = match self.read_bytes(&record, intent::MAX_RECORD) {
            Ok((bytes, _)) => bytes,
            Err(VaultError::NotFound(_)) => return Ok(()),
            Err(e @ (VaultError::TooLarge { .. } | VaultError::NotRegular { .. })) => {
                return self.discard(&record, Some(path), &NotUsed::Unreadable(e.to_string()));
            }
            Err(e) => return Err(e),
        };
        let finished = match intent::open(&guard.key, path, &bytes) {
            Ok(intent) => finish(file, &intent).map_err(|e| io_error(path, &e))?,
            Err(why) => Err(why),
        };
        match finished {
            Ok(Finished::Already) => {}
            Ok(Finished::Now) => {
                tracing::warn!("{path}: finished the write a crash cut short (its record was {record})")
            }
            Err(why) => return self.discard(&record, Some(path), &why),
        }
        self.forget_record(path, &record);
        Ok(())
    }

    /// Removes a record that is not used, saying why.
    fn discard(&self, record: &VaultPath, note: Option<&VaultPath>, why: &NotUsed) -> Result<(), VaultError> {
        let of = note.map(|n| format!(" of a write into {n}")).unwrap_or_default();
        tracing::warn!("the record {record}{of} was not used and is removed: {why}");
        match self.remove_file(record) {
            Ok(()) | Err(VaultError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes the record of a write that is done. One left behind (a failed removal) is found
    /// done by the next write, and removed then.
    fn forget_record(&self, path: &VaultPath, record: &VaultPath) {
        match self.remove_file(record) {
            Ok(()) | Err(VaultError::NotFound(_)) => {}
            Err(e) => tracing::warn!("{path}: the record of a finished write ({record}) stays: {e}"),
        }
    }
}

/// Finishes `intent` in `file` when the note is as a crash in its middle could have left it.
fn finish(file: &mut File, intent: &Intent<'_>) -> std::io::Result<Result<Finished, NotUsed>> {
    let len = file.metadata()?.len();
    if intent.at > len || len - intent.at > intent.longest() {
        return Ok(Err(NotUsed::Stale));
    }
    let from = intent.at - intent.before;
    let bytes = read_at(file, from, len - from)?;
    let (before, now) = bytes.split_at(intent.before as usize);
    if !intent.follows(before) {
        return Ok(Err(NotUsed::Stale));
    }
    let Some(written) = intent.written(now) else {
        return Ok(Err(NotUsed::Stale));
    };
    if now == intent.text {
        return Ok(Ok(Finished::Already));
    }
    let at = intent.at + written as u64;
    overwrite(file, at, &intent.text[written..], len)?;
    Ok(Ok(Finished::Now))
}

/// `n` bytes of `file` from `at` (fewer at its end).
fn read_at(file: &mut File, at: u64, n: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(n as usize);
    file.seek(SeekFrom::Start(at))?;
    Read::take(&mut *file, n).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn write_at(file: &mut File, at: u64, bytes: &[u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(at))?;
    file.write_all(bytes)?;
    file.flush()
}

/// Writes `bytes` at `at` over a file of `len` bytes, cuts it after them when it was longer, and
/// syncs it: only then may the write's record go.
fn overwrite(file: &mut File, at: u64, bytes: &[u8], len: u64) -> std::io::Result<()> {
    write_at(file, at, bytes)?;
    let end = at + bytes.len() as u64;
    if end < len {
        file.set_len(end)?;
    }
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    fn guard() -> SpliceGuard {
        SpliceGuard::for_tests()
    }

    #[test]
    fn the_end_is_replaced_appended_to_or_left_alone_as_decided() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let g = &guard();
        let file = dir.path().join("log.md");
        std::fs::write(&file, "mine\nA\nEVENTS\n").unwrap();
        let wrote = v
            .splice_end(&p("log.md"), 5, 7, g, |head, end| {
                assert_eq!(head, b"mine\n");
                assert_eq!(end.bytes, b"EVENTS\n");
                assert!(!end.whole);
                Splice::Write {
                    cut: 7,
                    text: "B\nEVENTS\n".into(),
                }
            })
            .unwrap();
        assert!(wrote);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\nA\nB\nEVENTS\n");
        assert!(!v
            .splice_end(&p("log.md"), 5, 7, g, |_, _| Splice::Refuse)
            .unwrap());
        let unseen = Splice::Write {
            cut: 8,
            text: String::new(),
        };
        assert!(!v.splice_end(&p("log.md"), 5, 7, g, |_, _| unseen).unwrap());
        let shorter = Splice::Write {
            cut: 7,
            text: "E\n".into(),
        };
        assert!(v.splice_end(&p("log.md"), 0, 7, g, |_, _| shorter).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\nA\nB\nE\n");
        let missing = v.splice_end(&p("none.md"), 5, 5, g, |_, _| Splice::Refuse);
        assert!(matches!(missing, Err(VaultError::NotFound(_))), "{missing:?}");
        assert!(
            !dir.path().join(layout::SPLICES).exists()
                || std::fs::read_dir(dir.path().join(layout::SPLICES))
                    .unwrap()
                    .next()
                    .is_none(),
            "no record is left once a write is done"
        );
    }

    const NOTE: &str = "daily/d.md";
    const EARLIER: &str = "# d\n\n## 08:00\n\n";
    const EVENTS: &str = "## Events\n- 08:01 one\n";
    const TEXT: &str = "## 09:00\n- ok\n\n## Events\n- 08:01 one\n";

    /// A vault whose note `NOTE` was being written (`EVENTS` replaced by `TEXT`) when tabd died:
    /// its record is there, and the note holds the first `written` bytes of the text.
    fn torn(key: &Key, written: usize) -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let note = p(NOTE);
        let at = EARLIER.len() as u64;
        let record = intent::seal(
            key,
            &note,
            at,
            EARLIER.as_bytes(),
            EVENTS.as_bytes(),
            TEXT.as_bytes(),
        );
        v.write_atomic(&intent::record_path(&note), &record).unwrap();
        let mut now = TEXT.as_bytes()[..written].to_vec();
        now.extend_from_slice(EVENTS.as_bytes().get(written..).unwrap_or_default());
        std::fs::create_dir_all(dir.path().join("daily")).unwrap();
        std::fs::write(dir.path().join(NOTE), [EARLIER.as_bytes(), &now].concat()).unwrap();
        (dir, v)
    }

    fn append(v: &Vault, g: &SpliceGuard, line: &str) {
        let line = line.to_string();
        let wrote = v.splice_end(&p(NOTE), 0, 64, g, |_, _| Splice::Write { cut: 0, text: line });
        assert!(wrote.unwrap());
    }

    fn records(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir.join(layout::SPLICES)).map_or(0, |d| d.count())
    }

    /// Cut at any byte, the write is finished by the next write into the note, before it.
    #[test]
    fn the_next_write_finishes_a_write_a_crash_cut_short() {
        let g = guard();
        for written in 0..=TEXT.len() {
            let (dir, v) = torn(&g.key, written);
            append(&v, &g, "- 09:01 two\n");
            let text = std::fs::read_to_string(dir.path().join(NOTE)).unwrap();
            assert_eq!(
                text,
                format!("{EARLIER}{TEXT}- 09:01 two\n"),
                "cut after {written} bytes"
            );
            assert_eq!(records(dir.path()), 0);
        }
    }

    /// A record is used only for a note exactly as the crash could have left it, sealed with
    /// tabd's key for that note: one from another key, or over a note that changed since (an
    /// old copy brought back by a sync or a restore), is removed and the note is left as it is.
    #[test]
    fn a_forged_or_stale_record_is_never_used() {
        let g = guard();
        let other = Key::from_bytes(&[2; 32]);
        let (dir, v) = torn(&other, 10);
        let before = std::fs::read_to_string(dir.path().join(NOTE)).unwrap();
        append(&v, &g, "- x\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(NOTE)).unwrap(),
            format!("{before}- x\n")
        );
        assert_eq!(records(dir.path()), 0, "removed");

        let (dir, v) = torn(&g.key, TEXT.len());
        let note = dir.path().join(NOTE);
        // Done, and a line written after it; then the record comes back.
        std::fs::write(&note, format!("{EARLIER}{TEXT}- 09:05 later\n")).unwrap();
        append(&v, &g, "- y\n");
        assert_eq!(
            std::fs::read_to_string(&note).unwrap(),
            format!("{EARLIER}{TEXT}- 09:05 later\n- y\n")
        );
        assert_eq!(records(dir.path()), 0);

        // What came before the write is not what it followed.
        let (dir, v) = torn(&g.key, 3);
        let note = dir.path().join(NOTE);
        let edited = std::fs::read_to_string(&note)
            .unwrap()
            .replacen("08:00", "07:00", 1);
        std::fs::write(&note, &edited).unwrap();
        append(&v, &g, "- z\n");
        assert_eq!(std::fs::read_to_string(&note).unwrap(), format!("{edited}- z\n"));
    }

    /// At start, every record is finished under its note's lock (a past day's note no write
    /// comes to again); one that names no note of its name, or a note that is gone, is removed.
    #[test]
    fn finish_splices_finishes_every_note_and_drops_what_is_not_a_record() {
        let g = guard();
        let (dir, v) = torn(&g.key, 7);
        let folder = dir.path().join(layout::SPLICES);
        std::fs::write(folder.join("junk"), "not a record").unwrap();
        let elsewhere = intent::seal(&g.key, &p("daily/gone.md"), 0, b"", b"a", b"b");
        std::fs::write(
            folder.join(intent::record_path(&p("daily/gone.md")).file_name()),
            elsewhere,
        )
        .unwrap();
        assert_eq!(v.finish_splices(&g), Vec::<String>::new());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(NOTE)).unwrap(),
            format!("{EARLIER}{TEXT}")
        );
        assert_eq!(records(dir.path()), 0);
    }
}
