//! An event's id (docs/spec.md §22): what lets a receiver tell a retried notification from a new one.
//!
//! A webhook that took an event and then timed out gets it again on the retry; without something
//! in common the two cannot be told apart (openclaw#102367). So every event has an id that is the
//! same on every try, on every channel and after a restart, and differs between events. It is
//! made from what makes the event the event — its key (`approval:<id>`, `failed:<path>`, …),
//! within its vault — never from a time or a counter, which a retry or a restart would change.
//!
//! Its shape is `tabd-` and 16 lowercase hex digits (64 bits of SHA-256): letters, digits and
//! `-` only, 21 characters, so it goes as it is into a JSON string, an environment variable, an
//! HTTP header's quoted string and ntfy's sequence id (a topic-like name, at most 64 of
//! `[-_A-Za-z0-9]`). It says nothing of the key (a note's path) it was made from.

use std::fmt;

use sha2::{Digest, Sha256};

/// What every id starts with: a receiver that sees ids from several senders knows tabd's.
const PREFIX: &str = "tabd-";

/// Hex digits kept of the digest: 64 bits, so two events of one person never share an id.
const HEX_DIGITS: usize = 16;

/// A stable event id, `tabd-3f9a0c1b2d4e5f60`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

impl EventId {
    /// The id of the event with `key` in the vault named `vault` (the name its links open).
    /// The vault is part of it: two vaults may each have a `failed:agent/inbox/ops/failed/todo.md`
    /// and tell the same phone, and one must not stand for the other there.
    pub fn of(vault: &str, key: &str) -> Self {
        // NUL parts them: no vault name (a folder's name) holds one, so no two pairs hash alike.
        let digest = Sha256::new()
            .chain_update(vault.as_bytes())
            .chain_update([0])
            .chain_update(key.as_bytes())
            .finalize();
        let hex: String = digest
            .iter()
            .take(HEX_DIGITS / 2)
            .map(|b| format!("{b:02x}"))
            .collect();
        Self(format!("{PREFIX}{hex}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `Idempotency-Key` header's value: draft-ietf-httpapi-idempotency-key-header makes it a
    /// Structured Field String (RFC 8941), so quoted. The id has no `"` or `\` to escape.
    pub fn as_idempotency_key(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_the_same_for_the_same_event_and_differs_between_events() {
        let id = EventId::of("Work", "approval:7c41e0");
        assert_eq!(
            id,
            EventId::of("Work", "approval:7c41e0"),
            "every try, every start"
        );
        assert_ne!(id, EventId::of("Work", "approval:7c41e1"), "another event");
        assert_ne!(
            id,
            EventId::of("Home", "approval:7c41e0"),
            "another vault's event"
        );
        // The parts cannot slide into each other.
        assert_ne!(EventId::of("ab", "c"), EventId::of("a", "bc"));
    }

    /// The shape the docs promise and ntfy's sequence ids accept.
    #[test]
    fn an_id_is_tabd_and_sixteen_hex_digits() {
        let id = EventId::of("Work", "failed:agent/inbox/ops/failed/x.md").to_string();
        let hex = id.strip_prefix("tabd-").unwrap();
        assert_eq!(hex.len(), 16, "{id}");
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{id}"
        );
        assert!(!id.contains("agent"), "the key's path is not shown: {id}");
    }

    /// A fixed key gives a fixed id: a change of the recipe would change every id a receiver
    /// keeps, so it must be a decision, not an accident. (SHA-256 of `Work`, NUL,
    /// `approval:7c41e0`, its first 8 bytes in hex: `python3 -c "import hashlib;
    /// print(hashlib.sha256(b'Work\\0approval:7c41e0').hexdigest()[:16])"`.)
    #[test]
    fn the_recipe_does_not_drift() {
        let id = EventId::of("Work", "approval:7c41e0");
        assert_eq!(id.as_str(), "tabd-c36c9f3c4af6856b");
        assert_eq!(id.as_idempotency_key(), "\"tabd-c36c9f3c4af6856b\"");
    }
}
