//! tabd's key (docs/spec.md §24): what tabd reads back from disk that decides an action — the undo
//! journal, suspended runs, process-group files — carries an HMAC-SHA256 under a key kept in
//! tabd's state folder (`~/.local/state/tabd/journal.key`, 0600), outside the vault: no role,
//! child or sync tool reaches it, so a record forged or edited in the vault is refused.
//!
//! Beside the key are *marks*: empty files that say something happened once ("the second part
//! of this run started", "this run's journal is still open"). They live outside the vault, so a
//! vault — or its `.tabd/` — restored from a backup or synced back cannot undo them.
//!
//! The key is made once, atomically: 32 random bytes written to a temp file, synced, then linked
//! into place without replacing a key another tabd made meanwhile, and the folder synced. A key
//! that is shorter than 32 bytes, open to other users, or not a plain file of this user's is
//! refused with what to do — never used, never silently replaced (everything signed with it
//! would silently stop being trusted, or a forgeable key would go on signing).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The key file's name in tabd's state folder (the journal's key first; its name stays).
pub const FILE: &str = "journal.key";

/// A key is at least this many bytes (and tabd makes exactly this many).
pub const MIN_LEN: usize = 32;

/// A longer file than this is not a key.
const MAX_LEN: u64 = 4096;

/// Where the marks are, under the state folder: `marks/<kind>/<name>`.
const MARKS: &str = "marks";

/// tabd's signing key, and the state folder its marks are kept in.
pub struct Key {
    bytes: Vec<u8>,
    /// `None`: a key for tests, which keeps no marks.
    home: Option<PathBuf>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Why a record's seal does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unsealed {
    /// No seal at all: written by an older tabd, or by someone else.
    #[error("it carries no signature (an older tabd wrote it, or something else did)")]
    NoSeal,
    /// A seal that does not match: edited, forged, or signed with another key.
    #[error("its signature does not match (it was edited or forged, or signed with another key)")]
    Forged,
}

/// Why tabd's key cannot be used. Each says what to do: tabd does not start without its key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "tabd's key {} is {len} bytes long; a key is at least {MIN_LEN} random bytes. It was cut short (a crash \
         or a full disk while it was made) or written by something else, so nothing can be trusted to it. Move \
         it away (`mv {0} {0}.short`) and start tabd again: it makes a new key. Runs journaled under the old \
         key can no longer be undone by tabd, and runs waiting for an approval under it will not go on \
         (the decision still reaches the role's next run)",
        path.display()
    )]
    Short { path: PathBuf, len: u64 },
    #[error(
        "tabd's key {} is {len} bytes long: that is not a key tabd made. Move it away (`mv {0} {0}.bad`) \
         and start tabd again: it makes a new key",
        path.display()
    )]
    Long { path: PathBuf, len: u64 },
    #[error(
        "tabd's key {} can be read or written by other users (mode {mode:04o}): `chmod 600 {0}`; if someone \
         else may have read it, move it away instead (`mv {0} {0}.old`) and start tabd again for a new one",
        path.display()
    )]
    Open { path: PathBuf, mode: u32 },
    #[error(
        "tabd's key {} is not a plain file of yours (a link, a folder, or another user's): move it away \
         and start tabd again: it makes a new key",
        path.display()
    )]
    NotOurs { path: PathBuf },
    #[error("cannot read or make tabd's key {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl Key {
    /// The key in `state` (tabd's state folder, outside the vault), made the first time.
    pub fn load_or_create(state: &Path) -> Result<Key, KeyError> {
        let path = state.join(FILE);
        let io = |source| KeyError::Io {
            path: path.clone(),
            source,
        };
        let bytes = match read(&path) {
            Err(KeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                create(state, &path).map_err(io)?;
                read(&path)?
            }
            other => other?,
        };
        Ok(Key {
            bytes,
            home: Some(state.to_path_buf()),
        })
    }

    /// The key the devices of a cluster share (`[cluster] key`, docs/spec.md §24): it signs and checks
    /// what they hand each other through the servers, and keeps no marks (each device keeps its
    /// own, under its own key's folder).
    pub fn shared(secret: &[u8]) -> Key {
        Key {
            bytes: secret.to_vec(),
            home: None,
        }
    }

    /// A key for tests (it keeps no marks).
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key {
            bytes: bytes.to_vec(),
            home: None,
        }
    }

    #[allow(
        clippy::expect_used,
        reason = "HMAC takes a key of any length: new_from_slice cannot fail"
    )]
    fn hmac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.bytes).expect("HMAC takes a key of any length")
    }

    /// The MAC of `parts` for `purpose` (what kind of record), hex. Each part goes in with its
    /// length, so no two different lists of parts are signed alike, and a MAC made for one
    /// purpose never passes for another.
    pub fn mac(&self, purpose: &str, parts: &[&[u8]]) -> String {
        let mut m = self.hmac();
        for part in std::iter::once(purpose.as_bytes()).chain(parts.iter().copied()) {
            m.update(&(part.len() as u64).to_le_bytes());
            m.update(part);
        }
        hex(&m.finalize().into_bytes())
    }

    /// Whether `mac` is this key's MAC of `parts` for `purpose` (compared in constant time).
    pub fn verifies(&self, purpose: &str, parts: &[&[u8]], mac: &str) -> bool {
        same(&self.mac(purpose, parts), mac)
    }

    /// A record to write: `body` after a first line with its MAC for `purpose` and `bound`
    /// (what it belongs to: a run id, an owner). The MAC covers the exact bytes, so reading
    /// back needs no canonical form.
    pub fn seal(&self, purpose: &str, bound: &[&[u8]], body: &[u8]) -> Vec<u8> {
        let mut parts = bound.to_vec();
        parts.push(body);
        let mut out = format!("{{\"mac\":\"{}\"}}\n", self.mac(purpose, &parts)).into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// The body of a record `seal` wrote, when its MAC for `purpose` and `bound` verifies.
    pub fn open<'a>(&self, purpose: &str, bound: &[&[u8]], file: &'a [u8]) -> Result<&'a [u8], Unsealed> {
        let Some(at) = file.iter().position(|b| *b == b'\n') else {
            return Err(Unsealed::NoSeal);
        };
        let (first, body) = (&file[..at], &file[at + 1..]);
        let Some(mac) = std::str::from_utf8(first)
            .ok()
            .and_then(|l| l.strip_prefix("{\"mac\":\""))
            .and_then(|l| l.strip_suffix("\"}"))
        else {
            return Err(Unsealed::NoSeal);
        };
        let mut parts = bound.to_vec();
        parts.push(body);
        if self.verifies(purpose, &parts, mac) {
            Ok(body)
        } else {
            Err(Unsealed::Forged)
        }
    }

    /// Whether `mac` is this key's MAC of `message` as such — the format of the journal lines
    /// tabd wrote before issue 36 (run id, a newline, the line).
    pub fn verifies_plain(&self, message: &[u8], mac: &str) -> bool {
        let mut m = self.hmac();
        m.update(message);
        same(&hex(&m.finalize().into_bytes()), mac)
    }

    /// Marks `name` (of `kind`) once: true the first time, false when it was marked already.
    /// With `durable`, the mark is on disk (file and folder synced) before this returns.
    pub fn mark(&self, kind: &str, name: &str, durable: bool) -> std::io::Result<bool> {
        let dir = self.marks(kind)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(checked(name)?));
        match made {
            Ok(f) => {
                if durable {
                    f.sync_all()?;
                    sync_dir(&dir)?;
                }
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether `name` (of `kind`) is marked. A key that keeps no marks knows of none.
    pub fn is_marked(&self, kind: &str, name: &str) -> bool {
        let Ok(dir) = self.marks(kind) else {
            return false;
        };
        checked(name).is_ok_and(|n| std::fs::symlink_metadata(dir.join(n)).is_ok())
    }

    /// Takes the mark off `name` (of `kind`), if it is there.
    pub fn unmark(&self, kind: &str, name: &str) {
        if let (Ok(dir), Ok(n)) = (self.marks(kind), checked(name)) {
            match std::fs::remove_file(dir.join(n)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    // Said, not dropped: a mark left on says what no longer holds.
                    tracing::warn!("cannot take the {kind} mark off {n}: {e}");
                }
                _ => {}
            }
        }
    }

    /// Takes off the marks of `kind` older than `age` (by their time on disk).
    pub fn forget_marks_older_than(&self, kind: &str, age: std::time::Duration) -> usize {
        let Ok(dir) = self.marks(kind) else {
            return 0;
        };
        let Some(cutoff) = std::time::SystemTime::now().checked_sub(age) else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < cutoff))
            .filter(|e| std::fs::remove_file(e.path()).is_ok())
            .count()
    }

    fn marks(&self, kind: &str) -> std::io::Result<PathBuf> {
        match &self.home {
            Some(home) => Ok(home.join(MARKS).join(checked(kind)?)),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this key keeps no marks (a key for tests)",
            )),
        }
    }
}

/// `name` when it is a plain file name (letters, digits, `.`, `_`, `-`; not starting with a dot).
fn checked(name: &str) -> std::io::Result<&str> {
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        Ok(name)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ))
    }
}

/// Reads the key at `path`: a plain file of this user's, private, of a key's length.
fn read(path: &Path) -> Result<Vec<u8>, KeyError> {
    let io = |source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => KeyError::NotOurs {
                path: path.to_path_buf(),
            },
            _ => io(e),
        })?;
    let meta = file.metadata().map_err(io)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me {
        return Err(KeyError::NotOurs {
            path: path.to_path_buf(),
        });
    }
    let len = meta.len();
    if len > MAX_LEN {
        return Err(KeyError::Long {
            path: path.to_path_buf(),
            len,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    Read::by_ref(&mut file)
        .take(MAX_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() < MIN_LEN {
        return Err(KeyError::Short {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
        });
    }
    // After its length: a short key is no key, whoever can read it.
    if meta.mode() & 0o077 != 0 {
        return Err(KeyError::Open {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(bytes)
}

/// Makes a new key at `path` atomically: a synced temp file linked into place (never over a key
/// another tabd made meanwhile: then theirs is the key), the folder synced.
fn create(state: &Path, path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state)?;
    let mut bytes = [0u8; MIN_LEN];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    let tmp = state.join(format!(
        ".{FILE}.{}.{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        });
    let placed = written.and_then(|()| place_noreplace(&tmp, path));
    #[expect(
        clippy::let_underscore_must_use,
        reason = "the temp file only: what failed, if anything, is `placed`, returned below"
    )]
    let _ = std::fs::remove_file(&tmp);
    match placed {
        Ok(()) => sync_dir(state),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Puts `tmp` at `path` unless something is there: a hard link (the temp file is removed by
/// the caller), or where the file system has none, a rename that does not replace.
fn place_noreplace(tmp: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            use rustix::fs::{renameat_with, RenameFlags, CWD};
            renameat_with(CWD, tmp, CWD, path, RenameFlags::NOREPLACE).map_err(std::io::Error::from)
        }
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether two MACs (hex) are equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_made_once_private_and_signs_for_one_purpose() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let a = Key::load_or_create(&state).unwrap();
        let b = Key::load_or_create(&state).unwrap();
        let mac = a.mac("journal", &[b"run-1", b"{}"]);
        assert!(
            b.verifies("journal", &[b"run-1", b"{}"], &mac),
            "the same key the second time"
        );
        assert!(
            !b.verifies("suspended", &[b"run-1", b"{}"], &mac),
            "bound to its purpose"
        );
        assert!(
            !b.verifies("journal", &[b"run-1{", b"}"], &mac),
            "parts keep their bounds"
        );
        assert!(!b.verifies("journal", &[b"run-2", b"{}"], &mac));
        let meta = std::fs::metadata(state.join(FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), MIN_LEN as u64);
        let leftovers: Vec<_> = std::fs::read_dir(&state)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, [FILE], "no temp file left");
    }

    /// Issue 36, finding 9: a short key (an empty one is what a crash between creating and
    /// writing it used to leave), one open to others and a link are refused, never used nor
    /// replaced; the message says what to do.
    #[test]
    fn a_short_open_or_linked_key_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        for short in [&b""[..], &[7u8; 31][..]] {
            std::fs::write(&path, short).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            let err = Key::load_or_create(dir.path()).unwrap_err();
            assert!(matches!(err, KeyError::Short { .. }), "{err:?}");
            assert!(err.to_string().contains("Move it away"), "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), short, "left as it was");
        }
        std::fs::write(&path, [7u8; 32]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Key::load_or_create(dir.path()).unwrap_err();
        assert!(matches!(err, KeyError::Open { mode: 0o644, .. }), "{err:?}");
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("elsewhere"), [7u8; 32]).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        let err = Key::load_or_create(dir.path()).unwrap_err();
        assert!(matches!(err, KeyError::NotOurs { .. }), "{err:?}");
    }

    #[test]
    fn a_sealed_record_opens_only_as_written_and_for_what_it_belongs_to() {
        let key = Key::from_bytes(&[3; 32]);
        let file = key.seal("suspended run", &[b"run-1"], b"{\"n\":1}");
        assert_eq!(
            key.open("suspended run", &[b"run-1"], &file),
            Ok(&b"{\"n\":1}"[..])
        );
        assert_eq!(
            key.open("suspended run", &[b"run-2"], &file),
            Err(Unsealed::Forged)
        );
        assert_eq!(
            key.open("process groups", &[b"run-1"], &file),
            Err(Unsealed::Forged)
        );
        let mut edited = file.clone();
        *edited.last_mut().unwrap() = b']';
        assert_eq!(
            key.open("suspended run", &[b"run-1"], &edited),
            Err(Unsealed::Forged)
        );
        assert_eq!(
            key.open("suspended run", &[b"run-1"], b"{\"n\":1}"),
            Err(Unsealed::NoSeal)
        );
        let other = Key::from_bytes(&[4; 32]);
        assert_eq!(
            other.open("suspended run", &[b"run-1"], &file),
            Err(Unsealed::Forged)
        );
    }

    #[test]
    fn a_mark_is_made_once_and_survives_until_taken_off() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::load_or_create(dir.path()).unwrap();
        assert!(!key.is_marked("resumed", "run-1.1"));
        assert!(key.mark("resumed", "run-1.1", true).unwrap());
        assert!(
            !key.mark("resumed", "run-1.1", false).unwrap(),
            "the second time: marked already"
        );
        assert!(key.is_marked("resumed", "run-1.1"));
        assert!(!key.is_marked("open", "run-1.1"), "kinds are apart");
        assert!(key.mark("resumed", "../escape", false).is_err());
        key.unmark("resumed", "run-1.1");
        assert!(!key.is_marked("resumed", "run-1.1"));
        assert!(
            Key::from_bytes(&[1; 32]).mark("resumed", "x", false).is_err(),
            "a test key keeps none"
        );
    }
}
