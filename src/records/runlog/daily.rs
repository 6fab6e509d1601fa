//! The daily note (docs/spec.md §9, §26): which notes are tabd's, where a day's log goes, and where in
//! it each entry goes.
//!
//! tabd appends only to a daily note it made. It makes one whole, with its header, in one step
//! (`create_unsynced`: a temp file linked into place, never replacing a note), and the header's
//! first line is a property, `tabd: run-log`, that says so. Before every write, under the
//! writers' lock, the note's first bytes are read again: a note that does not begin with that
//! line — the person's own journal, one Obsidian's Daily Notes made (empty or from a template) —
//! is never written; that day's log goes to `agent/log/` instead (`ELSEWHERE`), said once in the
//! daemon's log, and in `tabd status` and `tabd validate`.
//!
//! The property is input like any other text: it decides only whether tabd *appends* to the note
//! at a log path, never where tabd writes. A role cannot put it there — the log folder and
//! `agent/log/` are tabd's own (docs/spec.md §24: no role's write tools, `write_paths` or child write
//! them) — and a copy of it anywhere else changes nothing. A note made before tabd wrote the
//! property is tabd's when it begins as tabd made it then: the title and, on the next line but
//! one, a run's heading (`## 09:00 · `) or `## Events`.
//!
//! One `## Events` heading a day: event lines go under an `## Events` heading that stays the
//! note's last section, and a run's section goes in before it.

use std::collections::BTreeSet;

use crate::base::vault::{FileEnd, Splice, VaultError, VaultPath};

use super::{obsidian, RunLog};

/// The first line after `---` of every daily note tabd makes: the note is tabd's run log.
pub const MARKER: &str = "tabd: run-log";

/// How much of a note's start is read to see whose it is.
const HEAD: u64 = 256;

/// How much of a daily note's end a write reads to find the last heading: some hundred event
/// lines. In a longer stretch of events the next one opens a new `## Events` heading.
pub(super) const EVENTS_TAIL: u64 = 64 * 1024;

/// The start of a daily note tabd makes for the day `stem` (`2026-11-25`).
pub fn header(stem: &str) -> String {
    format!("---\n{MARKER}\n---\n# {stem}\n\n")
}

/// Whether a note that begins with `head` is a daily log tabd made for the day `stem`.
pub fn is_ours(head: &[u8], stem: &str) -> bool {
    let marked = [b"---\n".as_slice(), b"---\r\n".as_slice()].iter().any(|open| {
        head.strip_prefix(*open).is_some_and(|rest| {
            rest.strip_prefix(MARKER.as_bytes())
                .is_some_and(|after| after.starts_with(b"\n") || after.starts_with(b"\r\n"))
        })
    });
    marked || is_legacy(head, stem)
}

/// A note an earlier tabd made: `# 2026-11-25`, a blank line, then a run's heading or `## Events`.
fn is_legacy(head: &[u8], stem: &str) -> bool {
    let Some(rest) = head.strip_prefix(format!("# {stem}\n\n## ").as_bytes()) else {
        return false;
    };
    if rest.starts_with(b"Events\n") {
        return true;
    }
    // `09:00 · `
    rest.len() >= 8
        && rest[..5]
            .iter()
            .enumerate()
            .all(|(i, b)| if i == 2 { *b == b':' } else { b.is_ascii_digit() })
        && rest[5..].starts_with(" · ".as_bytes())
}

/// Where a heading line starts in `end`, and whether it is `## Events`, for the last `## ` line.
/// A tail that is not the whole note may start inside a line: that partial line is not a heading.
fn last_heading(end: FileEnd<'_>) -> Option<(usize, bool)> {
    let mut at = 0;
    let mut found = None;
    for (i, line) in end.bytes.split(|b| *b == b'\n').enumerate() {
        if (i > 0 || end.whole) && line.starts_with(b"## ") {
            found = Some((at, line.strip_suffix(b"\r").unwrap_or(line) == b"## Events"));
        }
        at += line.len() + 1;
    }
    found
}

/// The blank line that separates a new block from `before`.
fn gap(before: &[u8]) -> &'static str {
    match before {
        [] | [.., b'\n', b'\n'] => "",
        [.., b'\n'] => "\n",
        _ => "\n\n",
    }
}

/// A run's section: before the note's closing `## Events` section if it has one, else at the end.
pub(super) fn run_entry(text: &str, end: FileEnd<'_>) -> Splice {
    if let Some((at, true)) = last_heading(end) {
        if let Ok(events) = std::str::from_utf8(&end.bytes[at..]) {
            let close = if events.ends_with('\n') { "" } else { "\n" };
            return Splice::Write {
                cut: events.len(),
                text: format!("{}{text}{events}{close}", gap(&end.bytes[..at])),
            };
        }
    }
    Splice::Write {
        cut: 0,
        text: format!("{}{text}", gap(end.bytes)),
    }
}

/// An event line: under the note's closing `## Events` heading, or a new one at the end.
pub(super) fn event_entry(line: &str, end: FileEnd<'_>) -> Splice {
    let text = if matches!(last_heading(end), Some((_, true))) {
        // A person may have typed at the end, without a line end.
        let cut = !end.bytes.is_empty() && !end.bytes.ends_with(b"\n");
        format!("{}{line}", if cut { "\n" } else { "" })
    } else {
        format!("{}## Events\n{line}", gap(end.bytes))
    };
    Splice::Write { cut: 0, text }
}

/// The day's name of a daily note path: `daily/2026-11-25.md` → `2026-11-25`.
fn stem(path: &VaultPath) -> &str {
    path.file_name().trim_end_matches(".md")
}

impl RunLog {
    /// The note in `agent/log/` that holds the day of `path` when `path` is not tabd's.
    pub fn elsewhere(&self, path: &VaultPath) -> VaultPath {
        let name = path.file_name();
        let elsewhere = self.vault.layout().log_elsewhere();
        let folder = if *self.folder() == elsewhere {
            format!("{elsewhere}/tabd")
        } else {
            elsewhere
        };
        VaultPath::parse(&format!("{folder}/{name}"), false).unwrap_or_else(|_| path.clone())
    }

    /// The notes that hold the log of `day`, in order: its note in the log folder if that is
    /// tabd's, then its note in `agent/log/` if there is one.
    pub fn notes_of(&self, day: chrono::NaiveDate) -> Vec<VaultPath> {
        let name = crate::base::vault::layout::daily_note(&self.folder(), day);
        let Ok(place) = VaultPath::parse(&name, false) else {
            return Vec::new();
        };
        let elsewhere = self.elsewhere(&place);
        let mut notes = Vec::new();
        notes.extend([place, elsewhere].into_iter().filter(|n| self.is_tabds(n)));
        notes
    }

    /// Whether the note at `path` is one tabd made (a note that is not there is not).
    pub fn is_tabds(&self, path: &VaultPath) -> bool {
        use std::io::Read;
        let Ok((file, _)) = self.vault.open_regular(path) else {
            return false;
        };
        let mut head = Vec::new();
        file.take(HEAD).read_to_end(&mut head).is_ok() && is_ours(&head, stem(path))
    }

    /// Whether Obsidian's Daily Notes keep the person's notes where `path` is, in the log folder
    /// (`obsidian`): then tabd writes no note there, its own included — Obsidian would open it
    /// as the person's journal.
    pub fn shared_with_daily_notes(&self, path: &VaultPath) -> bool {
        let folder = self.folder();
        path.parent().as_str() == folder
            && matches!(obsidian::read(&self.vault), obsidian::Reading::Read(d) if d.meets(&folder))
    }

    /// Whether tabd may append to the note at `path`: not where Daily Notes keep theirs, and
    /// missing (tabd will make it) or made by tabd.
    pub fn may_write(&self, path: &VaultPath) -> bool {
        !self.shared_with_daily_notes(path) && (!self.vault.exists(path) || self.is_tabds(path))
    }

    /// Where the day's log of the note `path` (at its place in the log folder) is: there, or
    /// in `agent/log/` when tabd may not write there.
    pub fn resolve(&self, path: VaultPath) -> VaultPath {
        if self.may_write(&path) {
            return path;
        }
        let elsewhere = self.elsewhere(&path);
        self.tell_once(&path, &elsewhere);
        elsewhere
    }

    /// The daemon's log says once per note that tabd writes the day's log elsewhere.
    fn tell_once(&self, path: &VaultPath, elsewhere: &VaultPath) {
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        if told.insert(path.as_str().to_string()) {
            let shared = self.shared_with_daily_notes(path);
            tracing::warn!("{}", displaced(path, elsewhere, shared));
        }
    }

    /// Writes what `entry` makes of the end of the day's note `path`, or of its note in
    /// `agent/log/` when the one at `path` is not tabd's; a note tabd must make gets its header
    /// first. Returns the note written.
    pub(super) fn write_day(
        &self,
        path: &VaultPath,
        entry: impl Fn(FileEnd<'_>) -> Splice,
    ) -> Result<VaultPath, VaultError> {
        let guard = self.guard()?;
        let elsewhere = self.elsewhere(path);
        let mut tried: BTreeSet<&VaultPath> = BTreeSet::new();
        for candidate in [path, &elsewhere] {
            if !tried.insert(candidate) {
                continue;
            }
            if self.shared_with_daily_notes(candidate) {
                self.tell_once(candidate, &elsewhere);
                continue;
            }
            let day = stem(candidate);
            match self.vault.create_unsynced(candidate, header(day).as_bytes()) {
                Ok(()) | Err(VaultError::AlreadyExists(_)) => {}
                Err(e) => return Err(e),
            }
            let wrote = self
                .vault
                .splice_end(candidate, HEAD, EVENTS_TAIL, guard, |head, end| {
                    if is_ours(head, day) {
                        entry(end)
                    } else {
                        Splice::Refuse
                    }
                })?;
            if wrote {
                return Ok(candidate.clone());
            }
            self.tell_once(candidate, &elsewhere);
        }
        Err(VaultError::Refused(format!(
            "{path} and {elsewhere} are notes tabd did not make; it never writes into them. Move \
             {elsewhere} away (it is not tabd's) and tabd makes its own there"
        )))
    }
}

impl RunLog {
    /// What a person should know about where the log goes, for `validate`, `run` and `status`:
    /// each a vault-relative file it is about and a sentence. Settings that cannot be read; Daily
    /// Notes that meet the log folder, with the config lines that keep them apart (`config`: the
    /// config file, shown); a note for `now`'s day at the log's place that is not tabd's.
    pub fn apart_notes(&self, now: chrono::DateTime<chrono::Utc>, config: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let folder = self.folder();
        match obsidian::read(&self.vault) {
            obsidian::Reading::Absent => {}
            obsidian::Reading::Unreadable(why) => out.push((
                obsidian::SETTINGS.to_string(),
                format!(
                    "Obsidian's Daily Notes settings ({}) cannot be used: {why}; tabd reads them as if \
                     no folder were set",
                    obsidian::SETTINGS
                ),
            )),
            obsidian::Reading::Read(d) if d.meets(&folder) => {
                out.push((obsidian::SETTINGS.to_string(), d.warning(&folder, config)))
            }
            obsidian::Reading::Read(_) => {}
        }
        let place = self.daily_place(now);
        if self.vault.exists(&place) && !self.is_tabds(&place) {
            let elsewhere = self.elsewhere(&place);
            out.push((place.to_string(), displaced(&place, &elsewhere, false)));
        }
        out
    }
}

/// The sentence that says where the day's log went instead, and why (`shared`: Obsidian's Daily
/// Notes keep the person's notes in the log folder).
pub fn displaced(path: &VaultPath, elsewhere: &VaultPath, shared: bool) -> String {
    let why = if shared {
        format!(
            "Obsidian's Daily Notes keep your notes in {}/ ({})",
            path.parent(),
            obsidian::SETTINGS
        )
    } else {
        format!("{path} is a note tabd did not make (yours, or one Obsidian's Daily Notes made)")
    };
    format!(
        "{why}: tabd never writes into your notes and logs that day in {elsewhere} instead. To keep \
         them apart for good, set [log] folder in the config (see docs/config.md)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(bytes: &[u8], whole: bool) -> FileEnd<'_> {
        FileEnd { bytes, whole }
    }

    #[test]
    fn a_note_is_tabds_by_its_first_line_or_as_an_older_tabd_began_it() {
        let day = "2026-11-25";
        assert!(is_ours(header(day).as_bytes(), day));
        assert!(is_ours(b"---\r\ntabd: run-log\r\n---\r\n", day));
        assert!(is_ours(
            b"# 2026-11-25\n\n## 09:00 \xc2\xb7 Delivery Manager \xc2\xb7 schedule\n",
            day
        ));
        assert!(is_ours(b"# 2026-11-25\n\n## Events\n- 09:00", day));
        for theirs in [
            b"".as_slice(),
            b"# 2026-11-25\n\nToday I ...\n",
            b"# 2026-11-25\n\n## Tasks\n",
            b"# 2026-11-24\n\n## Events\n",
            b"---\ntags: [daily]\ntabd: run-log\n---\n",
            b"---\ntabd: run-logs\n---\n",
            b"tabd: run-log\n",
            b" ---\ntabd: run-log\n",
        ] {
            assert!(!is_ours(theirs, day), "{:?}", String::from_utf8_lossy(theirs));
        }
    }

    #[test]
    fn a_run_goes_before_the_closing_events_and_an_event_after_them() {
        let note = b"---\ntabd: run-log\n---\n# d\n\n## 08:00 \xc2\xb7 R \xc2\xb7 schedule\n- ok\n\n## Events\n- 08:01 \xc2\xb7 R \xc2\xb7 one\n";
        let Splice::Write { cut, text } = run_entry("## 09:00 · R · schedule\n- ok\n\n", end(note, true))
        else {
            panic!("refused")
        };
        assert_eq!(cut, "## Events\n- 08:01 · R · one\n".len());
        assert_eq!(
            text,
            "## 09:00 · R · schedule\n- ok\n\n## Events\n- 08:01 · R · one\n"
        );
        let Splice::Write { cut, text } = event_entry("- 09:01 · R · two\n", end(note, true)) else {
            panic!("refused")
        };
        assert_eq!((cut, text.as_str()), (0, "- 09:01 · R · two\n"));
        // No events yet: the run at the end, the first event under a heading of its own.
        let plain = b"# d\n\n## 08:00 \xc2\xb7 R \xc2\xb7 schedule\n- ok\n";
        let Splice::Write { cut, text } = run_entry("## 09:00\n", end(plain, true)) else {
            panic!("refused")
        };
        assert_eq!((cut, text.as_str()), (0, "\n## 09:00\n"));
        let Splice::Write { text, .. } = event_entry("- x\n", end(plain, true)) else {
            panic!("refused")
        };
        assert_eq!(text, "\n## Events\nx".replace('x', "- x\n"));
        // A tail that starts inside a line: that line is no heading.
        let Splice::Write { cut, .. } = run_entry("## 09:00\n", end(b"## Events\n- a\n", false)) else {
            panic!("refused")
        };
        assert_eq!(cut, 0);
    }

    fn log_in(dir: &std::path::Path) -> RunLog {
        RunLog::writer(
            std::sync::Arc::new(crate::base::vault::Vault::open(dir).unwrap()),
            chrono_tz::UTC,
            crate::base::vault::SpliceGuard::for_tests(),
        )
    }

    fn at() -> chrono::DateTime<chrono::Utc> {
        super::super::tests::record().started_at
    }

    /// Bytes this thread has read through system calls (`rchar`: every `read`, cached or not).
    fn thread_read_bytes() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap()
    }

    /// An event line costs the same whatever the note's size: the start and end of a 100 MiB
    /// daily note (sparse: no disk used) are read, never the note. Reading it whole (as before)
    /// made each line of a busy day slower than the last.
    #[test]
    fn an_event_line_reads_the_notes_ends_not_the_note() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        let file = dir.path().join(log.daily_place(at()).as_path());
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let mut f = std::fs::File::create(&file).unwrap();
        f.write_all(header("2026-11-23").as_bytes()).unwrap();
        f.set_len(100 << 20).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(b"\n## Events\n- 08:00 \xc2\xb7 Risk Manager \xc2\xb7 earlier\n")
            .unwrap();
        drop(f);
        let before = thread_read_bytes();
        log.write_line(at(), "Risk Manager", "skipped — budget").unwrap();
        let read = thread_read_bytes() - before;
        assert!(
            read <= 2 * EVENTS_TAIL + 2 * HEAD,
            "read {read} bytes of a 100 MiB note to append one line"
        );
        let mut f = std::fs::File::open(&file).unwrap();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::End(-200)).unwrap();
        let mut end = String::new();
        std::io::Read::read_to_string(&mut f, &mut end).unwrap();
        assert!(
            end.ends_with(
                "## Events\n- 08:00 · Risk Manager · earlier\n- 09:00 · Risk Manager · skipped — budget\n"
            ),
            "the line joins the events it follows: {end:?}"
        );
    }

    /// One `## Events` heading a day: events stay under it, the note's last section, and runs
    /// go in before it; a line a person typed at the end without a line end is not joined.
    #[test]
    fn one_events_heading_a_day_after_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        let day = log.daily_path(at());
        log.write_line(at(), "R", "one").unwrap();
        log.append_daily(&day, "## 09:00 · R · schedule\n- **Outcome:** ok\n\n")
            .unwrap();
        log.write_line(at(), "R", "two").unwrap();
        log.append_daily(&day, "## 10:00 · R · schedule\n- **Outcome:** ok\n\n")
            .unwrap();
        let file = dir.path().join(day.as_path());
        std::fs::write(&file, std::fs::read_to_string(&file).unwrap() + "my own words").unwrap();
        log.write_line(at(), "R", "three").unwrap();
        log.append_daily(&day, "## 11:00 · R · schedule\n- **Outcome:** ok\n\n")
            .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text,
            "---\ntabd: run-log\n---\n# 2026-11-23\n\n\
             ## 09:00 · R · schedule\n- **Outcome:** ok\n\n\
             ## 10:00 · R · schedule\n- **Outcome:** ok\n\n\
             ## 11:00 · R · schedule\n- **Outcome:** ok\n\n\
             ## Events\n- 09:00 · R · one\n- 09:00 · R · two\nmy own words\n- 09:00 · R · three\n"
        );
        assert_eq!(text.matches("## Events").count(), 1);
    }

    /// A note at the day's place that tabd did not make is never written, not even when it is
    /// empty (Obsidian's Daily Notes makes one so): the day goes to `agent/log/`, and the next
    /// day, free again, to the log folder.
    #[test]
    fn a_note_tabd_did_not_make_is_left_byte_for_byte_and_the_day_goes_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        let place = log.daily_place(at());
        let file = dir.path().join(place.as_path());
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        for mine in [
            "",
            "# 2026-11-23\n\nDear diary",
            "---\ntags: daily\n---\ntabd: run-log\n",
        ] {
            std::fs::write(&file, mine).unwrap();
            assert_eq!(log.daily_path(at()).as_str(), "agent/log/2026-11-23.md");
            log.append_daily(&place, "## 09:00 · R · schedule\n\n").unwrap();
            log.write_line(at(), "R", "skipped").unwrap();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), mine);
        }
        let elsewhere = std::fs::read_to_string(dir.path().join("agent/log/2026-11-23.md")).unwrap();
        assert!(elsewhere.starts_with(&header("2026-11-23")), "{elsewhere}");
        assert_eq!(
            elsewhere.matches("## 09:00 · R · schedule").count(),
            3,
            "{elsewhere}"
        );
        let tomorrow = at() + chrono::Duration::days(1);
        assert_eq!(log.daily_path(tomorrow).as_str(), "daily/2026-11-24.md");
        // Not tabd's there either: refused, said, nothing written.
        std::fs::write(dir.path().join("agent/log/2026-11-23.md"), "theirs").unwrap();
        let err = log.append_daily(&place, "## 10:00\n").unwrap_err();
        assert!(err.to_string().contains("tabd did not make"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "---\ntags: daily\n---\ntabd: run-log\n"
        );
    }

    /// Obsidian's Daily Notes in the log folder: tabd makes no note there (Obsidian would open
    /// it as the person's journal) and logs in `agent/log/`; one it made before is still read.
    #[test]
    fn where_daily_notes_keep_the_persons_notes_tabd_makes_none() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        std::fs::create_dir_all(dir.path().join(".obsidian")).unwrap();
        std::fs::write(
            dir.path().join(".obsidian/daily-notes.json"),
            r#"{"folder": "Daily/"}"#,
        )
        .unwrap();
        let place = log.daily_place(at());
        log.append_daily(&place, "## 09:00 · R · schedule\n\n").unwrap();
        assert!(!dir.path().join("daily").exists());
        assert_eq!(log.daily_path(at()).as_str(), "agent/log/2026-11-23.md");
        let earlier = chrono::NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
        std::fs::create_dir_all(dir.path().join("daily")).unwrap();
        std::fs::write(dir.path().join("daily/2026-11-22.md"), header("2026-11-22")).unwrap();
        assert_eq!(log.notes_of(earlier).len(), 1);
        let today = at().date_naive();
        let notes: Vec<String> = log.notes_of(today).iter().map(|p| p.to_string()).collect();
        assert_eq!(notes, ["agent/log/2026-11-23.md"]);
        // Garbage settings are read as none: the log folder again.
        std::fs::write(dir.path().join(".obsidian/daily-notes.json"), "{\"folder\": [").unwrap();
        assert_eq!(log.daily_path(at()).as_str(), "daily/2026-11-23.md");
    }
}
