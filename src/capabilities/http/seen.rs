//! The delivery ids already written as notes: a sender that delivers again (GitHub's "Redeliver",
//! a retry after a timeout that did go through) gets 200 and nothing is written twice.
//!
//! Kept in `.tabd/webhooks.seen`, one line per delivery — the hook, the id and the line's MAC
//! under tabd's key (docs/spec.md §24: what decides an action read back from disk is authenticated; a
//! line planted there would silence a delivery). The last `KEEP` are kept: the file is appended
//! to, and written again with only those when it holds twice as many. A line that does not
//! verify (edited, a crash's cut-off last line) is not an id seen: it is counted and said.

use std::collections::{HashSet, VecDeque};

use crate::base::signing::Key;
use crate::base::vault::{layout, Vault, VaultError, VaultPath};

/// How many delivery ids are kept (the "last 10,000").
pub const KEEP: usize = 10_000;

/// What the lines' MACs are for: no other record's MAC passes for one of these.
const PURPOSE: &str = "webhook-delivery";

/// The longest delivery id taken (a GUID is 36 characters).
const MAX_ID: usize = 128;

/// The longest file read back: `2 × KEEP` lines of at most 64 + 128 + 64 + 3 bytes, and room.
const MAX_FILE: u64 = 8 * 1024 * 1024;

/// Where the ids are kept.
pub fn file() -> String {
    format!("{}/webhooks.seen", layout::TABD)
}

/// `text` when it can be a delivery id: 1 to 128 letters, digits, `.`, `_`, `:` and `-` (GitHub
/// sends a GUID). Anything else is refused before it reaches a file or a note.
pub fn delivery_id(text: &str) -> Option<&str> {
    let ok = !text.is_empty()
        && text.len() <= MAX_ID
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b));
    ok.then_some(text)
}

/// The ids seen, oldest first, and how many lines the file holds.
pub struct DeliveryIds {
    ids: HashSet<(String, String)>,
    order: VecDeque<(String, String)>,
    lines_on_disk: usize,
    keep: usize,
}

/// Why the ids cannot be read back: then which deliveries were written is unknown, and the
/// server does not start (it would write a redelivered note twice, or say nothing of it).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct Unreadable {
    path: String,
    #[source]
    source: VaultError,
}

impl DeliveryIds {
    /// The ids in the vault's file (none when there is no file yet), and how many of its lines
    /// did not verify.
    pub fn load(vault: &Vault, key: &Key, keep: usize) -> Result<(Self, usize), Unreadable> {
        let path = file();
        let mut seen = Self {
            ids: HashSet::new(),
            order: VecDeque::new(),
            lines_on_disk: 0,
            keep: keep.max(1),
        };
        let text = match VaultPath::parse(&path, false).and_then(|p| vault.read_text(&p, MAX_FILE)) {
            Ok(text) => text,
            Err(VaultError::NotFound(_)) => return Ok((seen, 0)),
            Err(source) => return Err(Unreadable { path, source }),
        };
        let mut forged = 0;
        for line in text.lines().filter(|l| !l.is_empty()) {
            seen.lines_on_disk += 1;
            match parse_line(key, line) {
                Some((hook, id)) => seen.remember(hook, id),
                None => forged += 1,
            }
        }
        Ok((seen, forged))
    }

    /// Whether `hook` wrote delivery `id` already.
    pub fn contains(&self, hook: &str, id: &str) -> bool {
        self.ids.contains(&(hook.to_string(), id.to_string()))
    }

    /// Keeps `id` of `hook` as written: in memory at once (so this daemon never writes it twice),
    /// then on disk. An error says the file did not take it: after a restart a redelivery
    /// would be written again.
    pub fn record(&mut self, vault: &Vault, key: &Key, hook: &str, id: &str) -> Result<(), VaultError> {
        self.remember(hook.to_string(), id.to_string());
        let path = VaultPath::parse(&file(), false)?;
        if self.lines_on_disk + 1 > 2 * self.keep {
            let text: String = self.order.iter().map(|(h, i)| line(key, h, i)).collect();
            vault.write_atomic(&path, text.as_bytes())?;
            self.lines_on_disk = self.order.len();
            return Ok(());
        }
        vault.append(&path, &line(key, hook, id), None, false)?;
        self.lines_on_disk += 1;
        Ok(())
    }

    fn remember(&mut self, hook: String, id: String) {
        let entry = (hook, id);
        if !self.ids.insert(entry.clone()) {
            return;
        }
        self.order.push_back(entry);
        while self.order.len() > self.keep {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }
}

/// One line of the file: hook, id and their MAC, tab-separated.
fn line(key: &Key, hook: &str, id: &str) -> String {
    let mac = key.mac(PURPOSE, &[hook.as_bytes(), id.as_bytes()]);
    format!("{hook}\t{id}\t{mac}\n")
}

/// A line's hook and id when its MAC verifies.
fn parse_line(key: &Key, line: &str) -> Option<(String, String)> {
    let mut parts = line.split('\t');
    let (hook, id, mac) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || delivery_id(id).is_none() {
        return None;
    }
    key.verifies(PURPOSE, &[hook.as_bytes(), id.as_bytes()], mac)
        .then(|| (hook.to_string(), id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> (tempfile::TempDir, Vault) {
        let dir = tempfile::tempdir().unwrap();
        let v = Vault::open(dir.path()).unwrap();
        (dir, v)
    }

    #[test]
    fn ids_are_kept_across_a_restart_for_their_own_hook() {
        let (_d, v) = vault();
        let key = Key::from_bytes(&[7; 32]);
        let (mut seen, forged) = DeliveryIds::load(&v, &key, KEEP).unwrap();
        assert_eq!(forged, 0);
        assert!(!seen.contains("delivery", "g-1"));
        seen.record(&v, &key, "delivery", "g-1").unwrap();
        assert!(seen.contains("delivery", "g-1"));
        let (again, forged) = DeliveryIds::load(&v, &key, KEEP).unwrap();
        assert_eq!(forged, 0);
        assert!(again.contains("delivery", "g-1"));
        assert!(!again.contains("risk", "g-1"), "an id belongs to its hook");
    }

    #[test]
    fn a_line_tabd_did_not_sign_is_no_id_seen() {
        let (_d, v) = vault();
        let key = Key::from_bytes(&[7; 32]);
        let (mut seen, _) = DeliveryIds::load(&v, &key, KEEP).unwrap();
        seen.record(&v, &key, "delivery", "real").unwrap();
        let path = v.root().join(file());
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("delivery\tplanted\t0000\n");
        text.push_str(&line(&Key::from_bytes(&[8; 32]), "delivery", "other-key"));
        text.push_str("delivery\tcut-off\t12");
        std::fs::write(&path, text).unwrap();
        let (again, forged) = DeliveryIds::load(&v, &key, KEEP).unwrap();
        assert_eq!(forged, 3);
        assert!(again.contains("delivery", "real"));
        for id in ["planted", "other-key", "cut-off"] {
            assert!(!again.contains("delivery", id), "{id}");
        }
    }

    #[test]
    fn only_the_last_ids_are_kept_and_the_file_stays_bounded() {
        let (_d, v) = vault();
        let key = Key::from_bytes(&[7; 32]);
        let (mut seen, _) = DeliveryIds::load(&v, &key, 3).unwrap();
        for i in 0..10 {
            seen.record(&v, &key, "d", &format!("id-{i}")).unwrap();
        }
        assert!(!seen.contains("d", "id-6"));
        assert!((7..10).all(|i| seen.contains("d", &format!("id-{i}"))));
        let lines = std::fs::read_to_string(v.root().join(file()))
            .unwrap()
            .lines()
            .count();
        assert!(lines <= 6, "at most twice KEEP lines on disk: {lines}");
        let (again, forged) = DeliveryIds::load(&v, &key, 3).unwrap();
        assert_eq!(forged, 0);
        assert!((7..10).all(|i| again.contains("d", &format!("id-{i}"))));
        assert!(!again.contains("d", "id-5"));
    }

    #[test]
    fn an_unreadable_file_is_unknown_not_empty() {
        let (_d, v) = vault();
        let key = Key::from_bytes(&[7; 32]);
        std::fs::create_dir_all(v.root().join(file())).unwrap();
        assert!(
            DeliveryIds::load(&v, &key, KEEP).is_err(),
            "a folder where the file is"
        );
    }

    #[test]
    fn delivery_ids_are_plain() {
        assert_eq!(
            delivery_id("72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
        );
        for bad in ["", "a b", "a\tb", "a/b", "ü", &"x".repeat(129)] {
            assert_eq!(delivery_id(bad), None, "{bad:?}");
        }
    }
}
