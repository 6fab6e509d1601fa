//! The vault on disk: the only way tabd touches files in it — tools, run logs, state, the
//! status note, approvals (docs/spec.md §2: tabd never writes outside the vault).
//!
//! Confinement has two layers:
//! 1. `VaultPath::parse` refuses, by looking at the text, absolute paths, `..`, NUL and control
//!    characters, backslashes, look-alike dots and slashes, percent-encoded separators, and
//!    over-long names.
//! 2. Every filesystem call goes through a `cap_std::fs::Dir` opened on the vault root. cap-std
//!    resolves each component itself (with `openat2(RESOLVE_BENEATH)` where the kernel has it,
//!    else component by component with `O_NOFOLLOW`), so a symlink — present at check time or
//!    swapped in later — can never lead outside the vault. Renames and creations happen inside
//!    a parent folder opened through cap-std, by single file name.
//!
//! Files are opened non-blocking and checked to be regular files before they are read: a
//! named pipe (FIFO) in the vault would otherwise block the opening thread until a writer
//! appears, forever.
//!
//! Residual risk: a symlink *inside* the vault that points to another place inside the vault
//! is followed. The protected-path policy is checked on the canonical (symlink-resolved) path,
//! but someone who can write to the vault could swap such a link between that check and the
//! write; the write then still lands inside the vault. Someone with that access can already
//! write there directly, so this grants nothing new.

pub mod layout;
pub mod leftovers;
mod lock;
mod path;
pub mod protected;
mod splice;

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, FileTypeExt, MetadataExt, OpenOptions, OpenOptionsExt};

pub use lock::FileLock;
pub use path::{VaultPath, MAX_NAME_BYTES, MAX_PATH_BYTES};
pub use splice::{Splice, SpliceGuard};

/// Why a path or an operation was refused or failed. Callers branch on the variant, never on
/// the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaultError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0} does not exist")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("{path} is {size} bytes, more than the {cap}-byte limit")]
    TooLarge { path: String, size: u64, cap: u64 },
    #[error("{0} is not UTF-8 text")]
    NotUtf8(String),
    /// A folder, named pipe, socket or device where a file was expected.
    #[error("{path} is {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    /// The filesystem itself is failing (full, read-only, I/O errors): no retry with other
    /// arguments can help.
    #[error("{0}")]
    Storage(String),
    /// Another process has held the file's lock far longer than a write takes: it is stopped
    /// (Ctrl-Z, a paused device) or hung, and the write gives up rather than wait with it.
    #[error("{path}: another program has held its lock for {secs} s (a tabd stopped with Ctrl-Z, or a device paused on a folder it shares?)")]
    Held { path: String, secs: u64 },
    #[error("{0}")]
    Io(String),
}

/// One file or folder found by `Vault::walk`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: VaultPath,
    pub is_dir: bool,
    /// A regular file (after following a symlink inside the vault).
    pub is_file: bool,
    /// The entry itself is a symlink.
    pub is_symlink: bool,
    pub size: u64,
    pub modified: Option<SystemTime>,
    /// Inode number: tells a note from another one later given the same name.
    pub ino: u64,
    /// How many names the file has on disk (hard links): more than one, and another name may be
    /// outside the vault (`read_for_model`).
    pub links: u64,
}

/// A name in a folder that tabd cannot handle as a note, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OddEntry {
    /// The name as a person would see it (non-UTF-8 bytes replaced).
    pub name: String,
    pub why: &'static str,
}

/// How durable a write must be before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Atomic (readers see the old file or the new one) but not synced: for files tabd rewrites
    /// constantly and can always make again (the status note).
    None,
    /// The file's data is on disk (fsync) before the rename that makes it visible.
    File,
    /// Also the rename itself (fsync of the folder): for state whose loss would repeat work.
    FileAndFolder,
}

/// The end of a file as `Vault::append_with` read it.
#[derive(Debug, Clone, Copy)]
pub struct FileEnd<'a> {
    /// The file's last bytes (all of them when `whole`); may begin inside a line or a character.
    pub bytes: &'a [u8],
    /// Whether `bytes` is the whole file.
    pub whole: bool,
}

/// The open vault.
#[derive(Debug)]
pub struct Vault {
    root: PathBuf,
    dir: Dir,
    /// With `[cluster]`, this device's name: its `.tabd/` is `.tabd/devices/<name>/` (docs/spec.md
    /// §23: what is in `.tabd/` is per device; sync tools copy it, devices never share it).
    device: Option<String>,
    /// `[log] folder` when it is not the layout's (docs/spec.md §26): tabd's own, as `daily/` is.
    log: Option<String>,
    /// Where tabd's own folders are in it (`[vault] folder`, docs/spec.md §26).
    layout: layout::Layout,
}

/// What a kind of file is called in messages.
fn kind_name(ft: &cap_std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a folder"
    } else if ft.is_fifo() {
        "a named pipe (FIFO)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

pub(crate) fn io_error(path: &VaultPath, e: &std::io::Error) -> VaultError {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => VaultError::NotFound(path.to_string()),
        ErrorKind::AlreadyExists => VaultError::AlreadyExists(path.to_string()),
        // cap-std reports an escape (a symlink or `..` leading out) as PermissionDenied made by
        // itself, with no OS error number; a real EACCES carries one.
        ErrorKind::PermissionDenied if e.raw_os_error().is_none() => {
            VaultError::Refused(format!("{path} leads outside the vault (through a symlink)"))
        }
        _ if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => VaultError::Refused(
            format!("{path} is or goes through a symlink that cannot be followed"),
        ),
        _ if [
            rustix::io::Errno::NOSPC,
            rustix::io::Errno::ROFS,
            rustix::io::Errno::IO,
            rustix::io::Errno::DQUOT,
        ]
        .iter()
        .any(|n| e.raw_os_error() == Some(n.raw_os_error())) =>
        {
            VaultError::Storage(format!("{path}: {e}"))
        }
        _ if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => VaultError::NotRegular {
            path: path.to_string(),
            kind: "a socket or device",
        },
        _ => VaultError::Io(format!("{path}: {e}")),
    }
}

fn entry_of(path: VaultPath, meta: &cap_std::fs::Metadata, is_symlink: bool) -> Entry {
    Entry {
        path,
        is_dir: meta.is_dir(),
        is_file: meta.is_file(),
        is_symlink,
        size: meta.len(),
        modified: meta.modified().ok().map(|t| t.into_std()),
        ino: meta.ino(),
        links: meta.nlink(),
    }
}

/// Open flags for reading: never block on a FIFO, never become a controlling terminal.
fn read_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    o
}

impl Vault {
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())?;
        Ok(Self {
            root: root.to_path_buf(),
            dir,
            device: None,
            log: None,
            layout: layout::Layout::default(),
        })
    }

    /// This vault with tabd's folders where `layout` puts them (set before `with_log_folder`).
    pub fn with_layout(mut self, layout: layout::Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Where tabd's own folders are in this vault.
    pub fn layout(&self) -> &layout::Layout {
        &self.layout
    }

    /// This vault as device `name` of a cluster sees it: `.tabd/x` is `.tabd/devices/<name>/x`
    /// for every call (what `layout` names stays the same everywhere else).
    pub fn for_device(mut self, name: &str) -> Self {
        self.device = Some(name.to_string());
        self
    }

    /// This vault with its daily run log in `folder` (`[log] folder`).
    pub fn with_log_folder(mut self, folder: &str) -> Self {
        self.log = (folder != self.layout.daily()).then(|| folder.to_string());
        self
    }

    /// The folder of the daily run log: `[log] folder`, else the layout's (`daily`).
    pub fn log_folder(&self) -> std::borrow::Cow<'_, str> {
        match &self.log {
            Some(folder) => std::borrow::Cow::Borrowed(folder),
            None => std::borrow::Cow::Owned(self.layout.daily()),
        }
    }

    /// Whether the log is where the layout puts it (no `[log] folder` moved it).
    pub fn log_in_place(&self) -> bool {
        self.log.is_none()
    }

    /// This device's name in a cluster, if the vault is opened as one (`for_device`).
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    /// Where `path` really is: a path in `.tabd/` moves to this device's folder there (a path
    /// already in `.tabd/devices/` stays: a walk returns real paths).
    fn real<'a>(&self, path: &'a VaultPath) -> std::borrow::Cow<'a, VaultPath> {
        let Some(device) = &self.device else {
            return std::borrow::Cow::Borrowed(path);
        };
        let text = path.as_str();
        let rest = match text.strip_prefix(layout::TABD) {
            Some("") => "",
            Some(r) if r.starts_with('/') && !r.starts_with("/devices/") && r != "/devices" => r,
            _ => return std::borrow::Cow::Borrowed(path),
        };
        match VaultPath::parse(&format!("{}/devices/{device}{rest}", layout::TABD), false) {
            Ok(moved) => std::borrow::Cow::Owned(moved),
            Err(_) => std::borrow::Cow::Borrowed(path),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path with every symlink resolved, still vault-relative; for a path that does not
    /// exist yet, its deepest existing ancestor is resolved and the rest appended.
    pub fn canonical(&self, path: &VaultPath) -> Result<VaultPath, VaultError> {
        let mut existing = path.clone();
        let mut rest: Vec<String> = Vec::new();
        loop {
            match self.dir.canonicalize(existing.as_path()) {
                Ok(real) => {
                    let real = real
                        .to_str()
                        .ok_or_else(|| VaultError::Refused(format!("{path} resolves to a non-UTF-8 name")))?;
                    let mut out = VaultPath::parse(real, true)?;
                    for name in rest.iter().rev() {
                        out = out.join(name)?;
                    }
                    return Ok(out);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !existing.is_root() => {
                    // A dangling symlink is NotFound too: refuse it rather than write through it.
                    if self.dir.symlink_metadata(existing.as_path()).is_ok() {
                        return Err(VaultError::Refused(format!("{existing} is a symlink to nothing")));
                    }
                    rest.push(existing.file_name().to_string());
                    existing = existing.parent();
                }
                Err(e) => return Err(io_error(path, &e)),
            }
        }
    }

    /// `canonical` for many paths at once: each folder is resolved once, then each file costs one
    /// `lstat` (its own name is not a symlink: its real path is its real folder's, plus the name).
    /// A context of 100 files in one folder took 100 full resolutions per run before.
    pub fn canonicals(&self) -> Canonicals<'_> {
        Canonicals {
            vault: self,
            folders: std::cell::RefCell::new(std::collections::HashMap::new()),
            missing: std::cell::RefCell::new(std::collections::HashSet::new()),
        }
    }

    /// Opens a regular file for reading without ever blocking: FIFOs, sockets, devices and
    /// folders are refused as `NotRegular`. (To read one as a stream: one too large to read
    /// whole.)
    pub fn open_regular(&self, path: &VaultPath) -> Result<(File, Entry), VaultError> {
        let path = &*self.real(path);
        let file = self
            .dir
            .open_with(path.as_path(), &read_options())
            .map_err(|e| io_error(path, &e))?;
        let meta = file.metadata().map_err(|e| io_error(path, &e))?;
        if !meta.is_file() {
            return Err(VaultError::NotRegular {
                path: path.to_string(),
                kind: kind_name(&meta.file_type()),
            });
        }
        Ok((file, entry_of(path.clone(), &meta, false)))
    }

    /// Reads a text whose bytes go to the model (a tool's read, a context file, a skill, an inbox
    /// note, `AGENTS.md`): as `read_text_with_meta`, but a file with more than one name on disk is
    /// refused — a hard link in the vault to a file outside it (`~/.ssh/id_rsa`) is readable
    /// through the vault under a name nobody checked, and the link can be made by anyone who
    /// may write the vault folder, without reading the file (a child granted `vault = "write"`).
    pub fn read_for_model(&self, path: &VaultPath, cap: u64) -> Result<(String, Entry), VaultError> {
        let (text, entry) = self.read_text_with_meta(path, cap)?;
        if entry.links > 1 {
            return Err(VaultError::Refused(format!(
                "{path} has {} names on disk (hard links): another may be a file outside the vault, so no \
                 role reads it; keep a copy of it instead of a link",
                entry.links
            )));
        }
        Ok((text, entry))
    }

    /// Reads a whole regular file (at most `cap` bytes are accepted).
    pub fn read_bytes(&self, path: &VaultPath, cap: u64) -> Result<(Vec<u8>, Entry), VaultError> {
        let (file, entry) = self.open_regular(path)?;
        if entry.size > cap {
            return Err(VaultError::TooLarge {
                path: path.to_string(),
                size: entry.size,
                cap,
            });
        }
        let mut bytes = Vec::with_capacity(entry.size as usize);
        file.take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(path, &e))?;
        Ok((bytes, entry))
    }

    /// Reads a whole file as UTF-8 text (at most `cap` bytes are accepted).
    pub fn read_text(&self, path: &VaultPath, cap: u64) -> Result<String, VaultError> {
        self.read_text_with_meta(path, cap).map(|(text, _)| text)
    }

    /// Like `read_text`, with the file's size and modification time from the same open handle
    /// (one path resolution instead of two).
    pub fn read_text_with_meta(&self, path: &VaultPath, cap: u64) -> Result<(String, Entry), VaultError> {
        let (bytes, entry) = self.read_bytes(path, cap)?;
        let text = String::from_utf8(bytes).map_err(|_| VaultError::NotUtf8(path.to_string()))?;
        Ok((text, entry))
    }

    /// Metadata of `path`, following a symlink inside the vault.
    pub fn metadata(&self, path: &VaultPath) -> Result<Entry, VaultError> {
        let path = &*self.real(path);
        let meta = self
            .dir
            .metadata(path.as_path())
            .map_err(|e| io_error(path, &e))?;
        let is_symlink = self
            .dir
            .symlink_metadata(path.as_path())
            .is_ok_and(|m| m.file_type().is_symlink());
        Ok(entry_of(path.clone(), &meta, is_symlink))
    }

    pub fn exists(&self, path: &VaultPath) -> bool {
        let path = &*self.real(path);
        self.dir.symlink_metadata(path.as_path()).is_ok()
    }

    fn open_parent(&self, path: &VaultPath, create: bool) -> Result<Dir, VaultError> {
        let parent = path.parent();
        if create && !parent.is_root() {
            if let Err(e) = self.dir.create_dir_all(parent.as_path()) {
                // A symlink leading out of the vault looks like "already exists" here: opening
                // it tells the real reason.
                return Err(match self.dir.open_dir(parent.as_path()) {
                    Err(e2) => io_error(&parent, &e2),
                    Ok(_) => io_error(&parent, &e),
                });
            }
        }
        self.dir
            .open_dir(parent.as_path())
            .map_err(|e| io_error(&parent, &e))
    }

    /// Writes `bytes` to `path` atomically: a temp file in the same folder, fsync, rename.
    /// Readers see the old file or the new one, never a part. Parents are created.
    pub fn write_atomic(&self, path: &VaultPath, bytes: &[u8]) -> Result<(), VaultError> {
        self.write_atomic_with(path, bytes, Durability::File)
    }

    /// `write_atomic` with a choice of durability. This is the one atomic-write path of tabd.
    pub fn write_atomic_with(
        &self,
        path: &VaultPath,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<(), VaultError> {
        let path = &*self.real(path);
        let parent = self.open_parent(path, true)?;
        let name = path.file_name();
        let tmp = write_temp(&parent, name, bytes, durability != Durability::None)
            .map_err(|e| io_error(path, &e))?;
        if let Err(e) = parent.rename(&tmp, &parent, name) {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "the rename's error is returned; a temp file left behind is a known leftover"
            )]
            let _ = parent.remove_file(&tmp);
            return Err(io_error(path, &e));
        }
        if durability == Durability::FileAndFolder {
            sync_dir(&parent).map_err(|e| io_error(path, &e))?;
        }
        Ok(())
    }

    /// Like `write_atomic` but never replaces an existing file.
    pub fn create_atomic(&self, path: &VaultPath, bytes: &[u8]) -> Result<(), VaultError> {
        self.create_new(path, bytes, true)
    }

    /// Writes `bytes` to a temporary file (synced first when `sync`) and renames it to `path`
    /// only if nothing is there yet.
    pub(super) fn create_new(&self, path: &VaultPath, bytes: &[u8], sync: bool) -> Result<(), VaultError> {
        let path = &*self.real(path);
        let parent = self.open_parent(path, true)?;
        let name = path.file_name();
        let tmp = write_temp(&parent, name, bytes, sync).map_err(|e| io_error(path, &e))?;
        let result = rename_noreplace(&parent, &tmp, &parent, name);
        if result.is_err() {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "the rename's error is returned; a temp file left behind is a known leftover"
            )]
            let _ = parent.remove_file(&tmp);
        }
        result.map_err(|e| io_error(path, &e))
    }

    /// Creates `dir/name`, or `name-2`, `name-3` … (before the extension) when taken; never
    /// replaces a file. Returns the path it created.
    pub fn create_unique(&self, dir: &VaultPath, name: &str, bytes: &[u8]) -> Result<VaultPath, VaultError> {
        let dir = &*self.real(dir);
        for n in 1..1000 {
            let path = dir.join(&numbered_name(name, n))?;
            match self.create_atomic(&path, bytes) {
                Ok(()) => return Ok(path),
                Err(VaultError::AlreadyExists(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VaultError::Io(format!("no free name for {name} in {dir}")))
    }

    /// Renames `from` to `to`; refuses to replace an existing `to`. Parents of `to` are created.
    pub fn rename_noreplace(&self, from: &VaultPath, to: &VaultPath) -> Result<(), VaultError> {
        let from = &*self.real(from);
        let to = &*self.real(to);
        let from_parent = self.open_parent(from, false)?;
        let to_parent = self.open_parent(to, true)?;
        rename_noreplace(&from_parent, from.file_name(), &to_parent, to.file_name()).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::NotFound => VaultError::NotFound(from.to_string()),
                std::io::ErrorKind::AlreadyExists => VaultError::AlreadyExists(to.to_string()),
                _ => io_error(from, &e),
            }
        })
    }

    /// Renames `from` to `to`, replacing `to` (for tabd's own files, e.g. setting aside a
    /// corrupt state file).
    pub fn rename_replace(&self, from: &VaultPath, to: &VaultPath) -> Result<(), VaultError> {
        let from = &*self.real(from);
        let to = &*self.real(to);
        let from_parent = self.open_parent(from, false)?;
        let to_parent = self.open_parent(to, true)?;
        from_parent
            .rename(from.file_name(), &to_parent, to.file_name())
            .map_err(|e| io_error(from, &e))
    }

    pub fn remove_file(&self, path: &VaultPath) -> Result<(), VaultError> {
        let path = &*self.real(path);
        self.dir
            .remove_file(path.as_path())
            .map_err(|e| io_error(path, &e))
    }

    pub fn create_dir_all(&self, path: &VaultPath) -> Result<(), VaultError> {
        let path = &*self.real(path);
        self.dir
            .create_dir_all(path.as_path())
            .map_err(|e| io_error(path, &e))
    }

    /// Appends `text` to the regular file `path` under an exclusive `flock` (so writers in this
    /// and other processes never interleave), as one `write_all` on an append-mode handle.
    /// A new (empty) file gets `header` first; otherwise, when `separate` is set, the text is
    /// put after one blank line even if a person edited the end of the file.
    pub fn append(
        &self,
        path: &VaultPath,
        text: &str,
        header: Option<&str>,
        separate: bool,
    ) -> Result<(), VaultError> {
        let tail = if separate { 2 } else { 0 };
        self.append_with(path, header, tail, |end| {
            let mut entry = String::new();
            if separate && end.bytes.len() >= 2 && !end.bytes.ends_with(b"\n\n") {
                entry.push_str(if end.bytes.ends_with(b"\n") { "\n" } else { "\n\n" });
            }
            entry.push_str(text);
            entry
        })
    }

    /// Appends what `entry` makes of the file's last `tail` bytes (fewer in a shorter file), read
    /// under the same `flock` as the write: a decision about the end of a file that costs the
    /// same whatever the file's size (the whole file is never read). A new (empty) file gets
    /// `header` before the entry.
    pub fn append_with(
        &self,
        path: &VaultPath,
        header: Option<&str>,
        tail: u64,
        entry: impl FnOnce(FileEnd<'_>) -> String,
    ) -> Result<(), VaultError> {
        let path = &*self.real(path);
        let parent = self.open_parent(path, true)?;
        let name = path.file_name();
        let mut opts = OpenOptions::new();
        opts.read(true)
            .append(true)
            .create(true)
            .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
        let io = |e: std::io::Error| io_error(path, &e);
        let mut file = parent.open_with(name, &opts).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(VaultError::NotRegular {
                path: path.to_string(),
                kind: kind_name(&meta.file_type()),
            });
        }
        // Released when `file` is closed at the end of this call.
        lock::flock(&file, true).map_err(|e| lock::lock_error(path, &e))?;
        let len = file.metadata().map_err(io)?.len();
        let take = tail.min(len);
        let mut bytes = Vec::with_capacity(take as usize);
        if take > 0 {
            file.seek(SeekFrom::End(-(take as i64))).map_err(io)?;
            (&mut file).take(take).read_to_end(&mut bytes).map_err(io)?;
        }
        let mut text = String::new();
        if len == 0 {
            text.push_str(header.unwrap_or(""));
        }
        text.push_str(&entry(FileEnd {
            bytes: &bytes,
            whole: take == len,
        }));
        file.write_all(text.as_bytes()).map_err(io)?;
        file.flush().map_err(io)
    }

    /// Takes an exclusive `flock` on the lock file `path` (created if missing). With `wait`
    /// false, returns `None` at once when another holder has it.
    pub fn lock(&self, path: &VaultPath, wait: bool) -> Result<Option<FileLock>, VaultError> {
        let path = &*self.real(path);
        let parent = self.open_parent(path, true)?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true);
        let file = parent
            .open_with(path.file_name(), &opts)
            .map_err(|e| io_error(path, &e))?;
        FileLock::take(file, wait).map_err(|e| lock::lock_error(path, &e))
    }

    /// Whether another holder has the lock on the existing file `path` right now (false when the
    /// file cannot be opened: the write that follows says why).
    pub fn held_elsewhere(&self, path: &VaultPath) -> bool {
        // Taken and let go at once (the file is closed): only asks.
        self.open_writable(&self.real(path))
            .is_ok_and(|file| FileLock::take(file, false).is_ok_and(|held| held.is_none()))
    }

    /// Lists `dir` (recursively if asked), sorted by path. Symlinked folders are not descended
    /// into (they could loop); `skip` decides which paths are left out entirely. Names that are
    /// not UTF-8 are left out (see `list_notes` for a listing that reports them).
    pub fn walk(
        &self,
        dir: &VaultPath,
        recursive: bool,
        skip: &dyn Fn(&VaultPath) -> bool,
    ) -> Result<Vec<Entry>, VaultError> {
        let dir = &*self.real(dir);
        let mut out = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(current) = stack.pop() {
            let listing = self.list(&current)?;
            for entry in listing.entries {
                if skip(&entry.path) {
                    continue;
                }
                if entry.is_dir && recursive && !entry.is_symlink {
                    stack.push(entry.path.clone());
                }
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// One folder's entries, and the names in it that tabd cannot use (non-UTF-8 names,
    /// symlinks that lead nowhere or out of the vault).
    pub fn list(&self, dir: &VaultPath) -> Result<Listing, VaultError> {
        let dir = &*self.real(dir);
        let mut listing = Listing::default();
        let entries = self.dir.read_dir(dir.as_path()).map_err(|e| io_error(dir, &e))?;
        for entry in entries.flatten() {
            let raw = entry.file_name();
            let Some(name) = raw.to_str() else {
                listing.odd.push(OddEntry {
                    name: raw.to_string_lossy().into_owned(),
                    why: "its name is not valid UTF-8; rename it",
                });
                continue;
            };
            let Ok(path) = dir.join(name) else {
                listing.odd.push(OddEntry {
                    name: name.to_string(),
                    why: "its name cannot be used as a vault path; rename it",
                });
                continue;
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let is_symlink = file_type.is_symlink();
            // Follow a symlink only to stat it (cap-std refuses one that leaves the vault).
            let meta = if is_symlink {
                self.dir.metadata(path.as_path())
            } else {
                entry.metadata()
            };
            match meta {
                Ok(meta) => listing.entries.push(entry_of(path, &meta, is_symlink)),
                Err(_) if is_symlink => listing.odd.push(OddEntry {
                    name: name.to_string(),
                    why: "it is a symlink that leads nowhere or out of the vault",
                }),
                Err(_) => {}
            }
        }
        listing.entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(listing)
    }

    /// Removes temp files that a crash left behind (`.NAME.tabd-XXXXXXXX.tmp`, from
    /// `write_atomic`), older than `min_age` so a concurrent writer's file is never touched.
    /// `.git`, `.obsidian` and `.trash` are not entered. Returns the paths removed.
    pub fn remove_stale_temps(&self, min_age: Duration) -> Vec<VaultPath> {
        let skip = |p: &VaultPath| {
            matches!(p.as_str(), ".git" | ".obsidian" | ".trash") || p.as_str().ends_with("/.git")
        };
        let Ok(entries) = self.walk(&VaultPath::root(), true, &skip) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        let mut removed = Vec::new();
        for e in entries {
            let old_enough = e
                .modified
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age >= min_age);
            let legacy = e.path.parent().as_str() == layout::TABD && is_legacy_temp(e.path.file_name());
            let temp = is_tabd_temp(e.path.file_name()) || legacy;
            if e.is_file && !e.is_symlink && old_enough && temp && self.remove_file(&e.path).is_ok() {
                removed.push(e.path);
            }
        }
        removed
    }
}

/// Reads a regular file outside the vault (the config file) without blocking: a FIFO or a
/// device is refused, never opened for a blocking read.
pub fn read_regular_path(path: &Path, cap: u64) -> std::io::Result<String> {
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let ft = meta.file_type();
        let kind = if ft.is_dir() {
            "a folder"
        } else if ft.is_fifo() {
            "a named pipe (FIFO)"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::other(format!("it is {kind}, not a regular file")));
    }
    if meta.len() > cap {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {cap}-byte limit",
            meta.len()
        )));
    }
    let mut text = String::new();
    file.take(cap).read_to_string(&mut text)?;
    Ok(text)
}

/// A folder's real path, and the real folder held open (absent when it is missing).
type ResolvedFolder = (VaultPath, Option<std::rc::Rc<Dir>>);

/// Resolves many paths, each folder once (see `Vault::canonicals`).
pub struct Canonicals<'a> {
    vault: &'a Vault,
    /// Each folder's real path, and the real folder held open.
    folders: std::cell::RefCell<std::collections::HashMap<VaultPath, ResolvedFolder>>,
    /// Paths the lookups found missing, so callers need not ask again.
    missing: std::cell::RefCell<std::collections::HashSet<VaultPath>>,
}

impl Canonicals<'_> {
    /// The same answer as `Vault::canonical`.
    pub fn canonical(&self, path: &VaultPath) -> Result<VaultPath, VaultError> {
        if path.is_root() {
            return Ok(path.clone());
        }
        let parent = path.parent();
        let cached = self.folders.borrow().get(&parent).cloned();
        let (real_parent, folder) = match cached {
            Some(r) => r,
            None => {
                let real = self.vault.canonical(&parent)?;
                // Held open so each file costs one `fstatat` of its own name, not a walk.
                let folder = self.vault.dir.open_dir(real.as_path()).ok().map(std::rc::Rc::new);
                self.folders
                    .borrow_mut()
                    .insert(parent, (real.clone(), folder.clone()));
                (real, folder)
            }
        };
        let found = match &folder {
            // One name, no slashes, looked up in a folder already resolved inside the vault.
            Some(dir) => rustix::fs::statat(&**dir, path.file_name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink)
                .map_err(std::io::Error::from),
            None => self
                .vault
                .dir
                .symlink_metadata(path.as_path())
                .map(|m| m.file_type().is_symlink()),
        };
        match found {
            // Not a link: it is where its folder really is. (A missing one too: nothing to follow.)
            Ok(false) => real_parent.join(path.file_name()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.missing.borrow_mut().insert(path.clone());
                real_parent.join(path.file_name())
            }
            _ => self.vault.canonical(path),
        }
    }

    /// True when `canonical(path)` found nothing there (saves a second lookup).
    pub fn found_missing(&self, path: &VaultPath) -> bool {
        self.missing.borrow().contains(path)
    }
}

/// A folder listing: usable entries, and odd names with the reason.
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<Entry>,
    pub odd: Vec<OddEntry>,
}

/// True for the names `write_atomic` gives its temp files.
pub fn is_tabd_temp(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".tmp") else {
        return false;
    };
    let Some((head, hex)) = stem.rsplit_once(".tabd-") else {
        return false;
    };
    head.starts_with('.') && hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// tabd 0.1 wrote state through tempfile's `.tmpXXXXXX` names in `.tabd/`.
fn is_legacy_temp(name: &str) -> bool {
    name.len() == 10 && name.starts_with(".tmp") && name[4..].bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `name` for `n == 1`, else `name` with `-n` before its extension (`x.md` → `x-2.md`).
pub fn numbered_name(name: &str, n: u32) -> String {
    if n <= 1 {
        return name.to_string();
    }
    match name.rfind('.') {
        Some(i) if i > 0 => format!("{}-{n}{}", &name[..i], &name[i..]),
        _ => format!("{name}-{n}"),
    }
}

/// A temp file next to `name`, hidden (leading `.`) so watchers and Obsidian ignore it.
fn write_temp(parent: &Dir, name: &str, bytes: &[u8], sync: bool) -> std::io::Result<String> {
    let short: String = name.chars().take(40).collect();
    for _ in 0..16 {
        let tmp = format!(".{short}.tabd-{:08x}.tmp", rand::random::<u32>());
        let mut file = match parent.open_with(&tmp, OpenOptions::new().write(true).create_new(true)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
        if let Err(e) = written {
            drop(file);
            #[expect(
                clippy::let_underscore_must_use,
                reason = "the write's error is returned; a temp file left behind is a known leftover"
            )]
            let _ = parent.remove_file(&tmp);
            return Err(e);
        }
        return Ok(tmp);
    }
    Err(std::io::Error::other("could not pick a temp file name"))
}

/// fsync of a folder (so a rename in it survives a power cut). cap-std's handle may be
/// `O_PATH`, which cannot be synced, so the folder is opened for reading first.
fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    use rustix::fs::{openat, Mode, OFlags};
    let fd = openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fsync(&fd)?;
    Ok(())
}

/// `renameat2(RENAME_NOREPLACE)` between two open folders, by single names; falls back to
/// link + unlink where the filesystem lacks it (both refuse to replace `to`).
fn rename_noreplace(from_dir: &Dir, from: &str, to_dir: &Dir, to: &str) -> std::io::Result<()> {
    use rustix::fs::{linkat, renameat_with, unlinkat, AtFlags, RenameFlags};
    match renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
            unlinkat(from_dir, from, AtFlags::empty())?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
