//! A decision token (docs/spec.md §27): what a button of an `approval` push carries, and what a tap
//! publishes back to tabd. tabd signs it with its own key (`base::signing`, outside the vault: it
//! never leaves tabd), bound to one request — its id, the decision, the hash of the arguments the
//! push showed, and the request's expiry — so a token says exactly one thing, and nobody without
//! the key can make one that says another.
//!
//! Its shape is `base64url(payload) "." hex(mac)`: ASCII without spaces, so it goes as it is
//! into an ntfy action's body and comes back as a message. The payload is JSON
//! `{"id","d","args","exp"}`; the MAC is over the payload's exact bytes (no canonical JSON needed),
//! for this purpose only (a MAC tabd makes for its journal never passes for a token).
//!
//! Reading a token checks only that tabd made it (`read`). Whether it may still decide — expired,
//! used before, for a request that is not this one any more, its note's arguments edited since
//! the push — is the decider's check against the ledger and the note (`approval_pass::decide`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::signing::Key;

/// The MAC's purpose: a token's MAC never passes for another record's.
const PURPOSE: &str = "ntfy decision token v1";

/// Longest text read as a token: a real one is about 150 characters.
const MAX_LEN: usize = 1024;

/// What a button decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Reject,
}

impl Decision {
    pub fn approves(self) -> bool {
        self == Self::Approve
    }

    /// The button's label on the push.
    pub fn label(self) -> &'static str {
        match self {
            Self::Approve => "Approve",
            Self::Reject => "Reject",
        }
    }
}

/// What a token says: request `id` is to be decided `d`, as long as its arguments hash to `args`
/// and not after `exp` (Unix seconds: the request's own expiry, which also tells it from an
/// older request given the same id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub id: String,
    pub d: Decision,
    pub args: String,
    pub exp: i64,
}

impl Claim {
    /// The claim a button of request `id` makes: its arguments' hash and expiry as recorded.
    pub fn of(id: &str, d: Decision, args_hash: &str, expires: DateTime<Utc>) -> Self {
        Self {
            id: id.to_string(),
            d,
            args: args_hash.to_string(),
            exp: expires.timestamp(),
        }
    }

    /// Whether the token has run out at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        now.timestamp() >= self.exp
    }
}

/// Why a text is not a token tabd made. Its words never quote the text: a token is a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotAToken {
    #[error("it is not a decision token (garbage, or a message someone else published to the reply topic)")]
    Garbage,
    #[error("its signature does not match: it was forged or changed, or another tabd made it")]
    Forged,
}

/// The token for `claim`, signed with `key`.
pub fn make(key: &Key, claim: &Claim) -> String {
    // A struct of strings and numbers: serializing it cannot fail; an empty payload would fail
    // every check, never pass one.
    let payload = serde_json::to_vec(claim).unwrap_or_default();
    let mac = key.mac(PURPOSE, &[&payload]);
    format!("{}.{mac}", URL_SAFE_NO_PAD.encode(&payload))
}

/// The claim of `text`, if tabd's `key` made it (spaces around it are a phone's, not the token's).
pub fn read(key: &Key, text: &str) -> Result<Claim, NotAToken> {
    let text = text.trim();
    if text.len() > MAX_LEN {
        return Err(NotAToken::Garbage);
    }
    let (payload, mac) = text.split_once('.').ok_or(NotAToken::Garbage)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| NotAToken::Garbage)?;
    if mac.len() != 64 || !mac.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(NotAToken::Garbage);
    }
    // The MAC first: nothing of a payload tabd did not sign is looked at.
    if !key.verifies(PURPOSE, &[&payload], mac) {
        return Err(NotAToken::Forged);
    }
    serde_json::from_slice(&payload).map_err(|_| NotAToken::Garbage)
}

/// A name for `text` that says nothing of it (32 hex digits of SHA-256): what tabd remembers of a
/// token it took, so the same token is refused the next time.
pub fn digest(text: &str) -> String {
    Sha256::digest(text.trim().as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Claim {
        Claim::of(
            "7c41e0",
            Decision::Approve,
            "0123456789abcdef0123456789abcdef",
            "2026-11-24T09:00:04Z".parse().unwrap(),
        )
    }

    #[test]
    fn a_token_tabd_made_reads_back_as_its_claim() {
        let key = Key::from_bytes(&[7; 32]);
        let token = make(&key, &claim());
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{token}"
        );
        assert_eq!(read(&key, &token), Ok(claim()));
        assert_eq!(
            read(&key, &format!(" {token}\n")),
            Ok(claim()),
            "a phone's spaces"
        );
    }

    /// Another key, a changed payload or a changed MAC: forged. Text that is no token: garbage.
    #[test]
    fn anything_tabd_did_not_sign_is_refused() {
        let key = Key::from_bytes(&[7; 32]);
        let other = make(&Key::from_bytes(&[8; 32]), &claim());
        assert_eq!(read(&key, &other), Err(NotAToken::Forged));
        let token = make(&key, &claim());
        let (_, mac) = token.split_once('.').unwrap();
        let mut rejecting = claim();
        rejecting.d = Decision::Reject;
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&rejecting).unwrap());
        assert_eq!(read(&key, &format!("{payload}.{mac}")), Err(NotAToken::Forged));
        for garbage in ["", "approve", "a.b", "....", &"x".repeat(5000)] {
            assert_eq!(read(&key, garbage), Err(NotAToken::Garbage), "{garbage:.20}");
        }
    }

    #[test]
    fn a_token_runs_out_at_its_requests_expiry() {
        let c = claim();
        assert!(!c.expired("2026-11-24T09:00:03Z".parse().unwrap()));
        assert!(c.expired("2026-11-24T09:00:04Z".parse().unwrap()));
    }

    #[test]
    fn a_digest_names_a_token_without_showing_it() {
        let d = digest("abc.def");
        assert_eq!(d.len(), 32);
        assert_eq!(d, digest(" abc.def\n"));
        assert_ne!(d, digest("abc.deg"));
        assert!(!d.contains("abc"));
    }
}
