//! The key that makes the journal tamper-evident (DESIGN §19, issue 29): every journal line
//! carries an HMAC-SHA256 under a key kept outside the vault (in tabd's state folder, 0600), so a
//! journal forged or edited in the vault — a synced copy, another program — is refused by
//! `tabd undo` instead of restored from.

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The journal's signing key.
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// The key file's name in tabd's state folder.
const FILE: &str = "journal.key";

impl Key {
    /// The key in `state` (tabd's state folder, outside the vault), made (32 random bytes, 0600)
    /// the first time.
    pub fn load_or_create(state: &Path) -> std::io::Result<Key> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = state.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) if bytes.len() >= 32 => return Ok(Key(bytes)),
            Ok(_) | Err(_) => {}
        }
        std::fs::create_dir_all(state)?;
        let mut bytes = vec![0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| f.write_all(&bytes));
        match made {
            Ok(()) => Ok(Key(bytes)),
            // Another tabd made it meanwhile: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Key(std::fs::read(&path)?)),
            Err(e) => Err(e),
        }
    }

    /// A key for tests and for runs that keep no journal of their own.
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }

    /// The MAC of one journal line of run `run_id`, hex.
    pub fn mac(&self, run_id: &str, line: &str) -> String {
        let mut m =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        m.update(run_id.as_bytes());
        m.update(b"\n");
        m.update(line.as_bytes());
        m.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `mac` is this key's MAC of `line` (compared in constant time).
    pub fn verifies(&self, run_id: &str, line: &str, mac: &str) -> bool {
        let want = self.mac(run_id, line);
        want.len() == mac.len()
            && want
                .bytes()
                .zip(mac.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_private_and_signs_lines() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = Key::load_or_create(dir.path()).unwrap();
        let b = Key::load_or_create(dir.path()).unwrap();
        let mac = a.mac("run-1", "{\"path\":\"a.md\"}");
        assert!(
            b.verifies("run-1", "{\"path\":\"a.md\"}", &mac),
            "the same key the second time"
        );
        assert!(
            !b.verifies("run-2", "{\"path\":\"a.md\"}", &mac),
            "bound to its run"
        );
        assert!(!b.verifies("run-1", "{\"path\":\"roles/x.md\"}", &mac));
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
