//! Changing the end of a file tabd keeps (the daily run log) under the writers' `flock`, after
//! reading its first and last bytes: whose file it is is read from its head, where the next entry
//! goes from its end. A file that does not exist is never made here (the caller makes it whole,
//! header included, with `create_atomic`, so no writer ever sees it empty and half-made).

use std::io::{Read, Seek, SeekFrom, Write};

use cap_std::fs::{OpenOptions, OpenOptionsExt};

use super::{io_error, kind_name, lock, FileEnd, Vault, VaultError, VaultPath};

/// What `Vault::splice_end` does with a file, decided from its head and end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Splice {
    /// Leave the file as it is (not the caller's to write).
    Refuse,
    /// Replace the file's last `cut` bytes (0: append) with `text`.
    Write { cut: usize, text: String },
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
    /// The text is written in place from `len - cut`; when it is shorter than what it replaces
    /// the file is cut after it. A crash in the middle of it can leave the replaced bytes part
    /// overwritten; each entry tabd writes here is also in its JSONL record.
    pub fn splice_end(
        &self,
        path: &VaultPath,
        head: u64,
        tail: u64,
        decide: impl FnOnce(&[u8], FileEnd<'_>) -> Splice,
    ) -> Result<bool, VaultError> {
        let path = &*self.real(path);
        let parent = self.open_parent(path, false)?;
        let mut opts = OpenOptions::new();
        // Not append mode: a write at an offset would go to the end.
        opts.read(true)
            .write(true)
            .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
        let io = |e: std::io::Error| io_error(path, &e);
        let mut file = parent.open_with(path.file_name(), &opts).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(VaultError::NotRegular {
                path: path.to_string(),
                kind: kind_name(&meta.file_type()),
            });
        }
        // Released when `file` is closed at the end of this call.
        lock::flock(&file, true).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut first = Vec::new();
        (&mut file)
            .take(head.min(len))
            .read_to_end(&mut first)
            .map_err(io)?;
        let take = tail.min(len);
        let mut last = Vec::with_capacity(take as usize);
        file.seek(SeekFrom::End(-(take as i64))).map_err(io)?;
        (&mut file).take(take).read_to_end(&mut last).map_err(io)?;
        let end = FileEnd {
            bytes: &last,
            whole: take == len,
        };
        let (cut, text) = match decide(&first, end) {
            Splice::Write { cut, text } if cut as u64 <= take => (cut as u64, text),
            Splice::Write { .. } | Splice::Refuse => return Ok(false),
        };
        let at = len - cut;
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        let new_len = at + text.len() as u64;
        if new_len < len {
            file.set_len(new_len).map_err(io)?;
        }
        file.flush().map_err(io)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s, false).unwrap()
    }

    #[test]
    fn the_end_is_replaced_appended_to_or_left_alone_as_decided() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        let file = dir.path().join("log.md");
        std::fs::write(&file, "mine\nA\nEVENTS\n").unwrap();
        let wrote = v
            .splice_end(&p("log.md"), 5, 7, |head, end| {
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
        assert!(!v.splice_end(&p("log.md"), 5, 7, |_, _| Splice::Refuse).unwrap());
        let unseen = Splice::Write {
            cut: 8,
            text: String::new(),
        };
        assert!(!v.splice_end(&p("log.md"), 5, 7, |_, _| unseen).unwrap());
        let shorter = Splice::Write {
            cut: 7,
            text: "E\n".into(),
        };
        assert!(v.splice_end(&p("log.md"), 0, 7, |_, _| shorter).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\nA\nB\nE\n");
        let missing = v.splice_end(&p("none.md"), 5, 5, |_, _| Splice::Refuse);
        assert!(matches!(missing, Err(VaultError::NotFound(_))), "{missing:?}");
    }
}
