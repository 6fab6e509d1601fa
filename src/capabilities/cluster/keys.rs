//! The names of what devices claim: a KV key allows only `[-/_=.a-zA-Z0-9]`, and a vault's,
//! a role's or a note's name may hold anything, so each part is kept when plain and written as
//! a hash otherwise. Every device derives the same key from the same thing.

use sha2::{Digest, Sha256};

/// A claim's key in the claims bucket (also the key of its done marker).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey(String);

impl ClaimKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A scheduled slot of a role: `<vault>.slot.<role>.<unix seconds>`.
    pub fn slot(vault: &str, role: &str, slot: chrono::DateTime<chrono::Utc>) -> Self {
        Self(format!(
            "{}.slot.{}.{}",
            token(vault),
            token(role),
            slot.timestamp()
        ))
    }

    /// An inbox note, by its path and its settled content's hash (docs/spec.md §23: a note rewritten
    /// under the same name is another note): `<vault>.note.<role>.<hash of both>`.
    pub fn note(vault: &str, role: &str, path: &str, content_hash: &str) -> Self {
        let mut h = Sha256::new();
        h.update(path.as_bytes());
        h.update([0]);
        h.update(content_hash.as_bytes());
        Self(format!(
            "{}.note.{}.{}",
            token(vault),
            token(role),
            &hex(&h.finalize())[..32]
        ))
    }

    /// A record devices hand each other (`shared`): `<vault>.<kind>.<id>`.
    pub fn shared(vault: &str, kind: &str, id: &str) -> Self {
        Self(format!("{}.{}.{}", token(vault), token(kind), token(id)))
    }

    /// The `n`th catch-up of a role after the servers were out of reach (`catch_up`), kept in the
    /// done bucket: `<vault>.catchup.<role>.<n>`.
    pub fn catch_up(vault: &str, role: &str, n: u32) -> Self {
        Self(format!("{}.catchup.{}.{n}", token(vault), token(role)))
    }

    /// A key made only to see that a quorum takes a write (`tabd doctor`), never claimed by a
    /// run: `<vault>.probe.<device>.<a random number>`.
    pub fn probe(vault: &str, device: &str, nonce: u64) -> Self {
        Self(format!("{}.probe.{}.{nonce:016x}", token(vault), token(device)))
    }

    /// An approval's execution (docs/spec.md §15, §23): `<vault>.approval.<id>`.
    pub fn approval(vault: &str, id: &str) -> Self {
        Self(format!("{}.approval.{}", token(vault), token(id)))
    }
}

impl std::fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A device's heartbeat key: `<vault>.<device>`.
pub fn device(vault: &str, device: &str) -> String {
    format!("{}.{}", token(vault), token(device))
}

/// The prefix of every device key of `vault`.
pub fn devices_of(vault: &str) -> String {
    format!("{}.", token(vault))
}

/// `part` as it is when plain (`[A-Za-z0-9_-]`, 1–64), else `h` and a hash of it.
pub fn token(part: &str) -> String {
    let plain = !part.is_empty()
        && part.len() <= 64
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        return part.to_string();
    }
    format!("h{}", &hex(&Sha256::digest(part.as_bytes()))[..24])
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(key: &str) -> bool {
        !key.starts_with('.')
            && !key.ends_with('.')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-/_=.".contains(c))
    }

    #[test]
    fn keys_are_valid_for_any_name_and_the_same_on_every_device() {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let slot = ClaimKey::slot("Work", "risk", at);
        assert_eq!(slot.as_str(), "Work.slot.risk.1800000000");
        let odd = ClaimKey::slot("My Vault (2)", "Risk Manager.md", at);
        assert!(valid(odd.as_str()), "{odd}");
        assert_eq!(odd, ClaimKey::slot("My Vault (2)", "Risk Manager.md", at));
        let a = ClaimKey::note("Work", "risk", "agent/inbox/risk/a.md", "abc");
        assert!(valid(a.as_str()), "{a}");
        assert_ne!(
            a,
            ClaimKey::note("Work", "risk", "agent/inbox/risk/a.md", "abd"),
            "new content, new note"
        );
        assert_ne!(a, ClaimKey::note("Work", "risk", "agent/inbox/risk/b.md", "abc"));
        assert!(valid(&device("Work", "laptop")));
        assert!(valid(ClaimKey::approval("Vault", "7c41e0").as_str()));
        assert!(valid(ClaimKey::probe("My Vault", "laptop", 7).as_str()));
        assert_eq!(
            ClaimKey::catch_up("Work", "risk", 2).as_str(),
            "Work.catchup.risk.2"
        );
        assert!(valid(
            ClaimKey::catch_up("My Vault", "Risk Manager.md", 1).as_str()
        ));
        assert_eq!(token(""), token(""));
        assert!(token("").starts_with('h'));
    }
}
