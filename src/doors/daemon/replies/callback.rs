//! A Telegram button's callback data: what a tap on Approve or Reject brings back. Telegram takes
//! at most 64 bytes there, and a decision token (`gate::approvals::token`, ~150) does not fit, so
//! a button carries a short form: `a:<approval id>:<mac>` or `r:<approval id>:<mac>`, the MAC
//! (tabd's key, a purpose of its own, 128 bits in 32 hex digits) bound to the same things a
//! token is — the approval's id, the decision, the hash of the arguments the message showed, and
//! the request's expiry.
//!
//! Why a short MAC is enough: callback data is not a bearer credential anyone can publish, as an
//! ntfy token is. It reaches tabd only through its own authenticated long poll (the bot's token),
//! and only a tap from the configured chat, by a configured user, is read at all. The MAC is what
//! keeps a tap to the one request and decision its message showed: garbled data, data for an
//! approval since replaced, or for arguments edited since, does not verify. Once it verifies, the
//! daemon makes the full token of that claim and hands it to the one decision function
//! (`approval_pass::decide::tap`), which checks expiry, replays and the ledger as for a tap on
//! ntfy.

use crate::base::signing::Key;
use crate::gate::approvals::token::{Claim, Decision};

/// The MAC's purpose: it never passes for any other record's.
const PURPOSE: &str = "telegram callback v1";

/// Telegram's limit on callback data, in bytes.
pub const MAX_DATA: usize = 64;

/// The hex digits of the MAC kept.
const MAC_DIGITS: usize = 32;

/// Why callback data decides nothing. Never quotes the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotACallback {
    #[error("it is not a button tabd made (garbled)")]
    Garbled,
}

/// The callback data of `claim`'s button, if it fits Telegram's 64 bytes.
pub fn make(key: &Key, claim: &Claim) -> Option<String> {
    let data = format!("{}:{}:{}", letter(claim.d), claim.id, mac(key, claim));
    (data.len() <= MAX_DATA).then_some(data)
}

/// The approval id and decision `data` names, unchecked: the caller looks the request up and
/// checks the MAC against it (`verifies`).
pub fn read(data: &str) -> Result<(String, Decision, String), NotACallback> {
    let mut parts = data.splitn(3, ':');
    let (Some(d), Some(id), Some(mac)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(NotACallback::Garbled);
    };
    let d = match d {
        "a" => Decision::Approve,
        "r" => Decision::Reject,
        _ => return Err(NotACallback::Garbled),
    };
    let plain =
        |s: &str| !s.is_empty() && s.len() <= MAX_DATA && s.bytes().all(|b| b.is_ascii_alphanumeric());
    if !plain(id) || mac.len() != MAC_DIGITS || !mac.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(NotACallback::Garbled);
    }
    Ok((id.to_string(), d, mac.to_string()))
}

/// Whether `given` is the MAC of `claim` (compared in constant time).
pub fn verifies(key: &Key, claim: &Claim, given: &str) -> bool {
    let want = mac(key, claim);
    want.len() == given.len()
        && want
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn letter(d: Decision) -> &'static str {
    match d {
        Decision::Approve => "a",
        Decision::Reject => "r",
    }
}

fn mac(key: &Key, claim: &Claim) -> String {
    let exp = claim.exp.to_string();
    let full = key.mac(
        PURPOSE,
        &[
            claim.id.as_bytes(),
            letter(claim.d).as_bytes(),
            claim.args.as_bytes(),
            exp.as_bytes(),
        ],
    );
    full.chars().take(MAC_DIGITS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(d: Decision, args: &str) -> Claim {
        Claim::of("7c41e0", d, args, "2026-11-24T09:00:04Z".parse().unwrap())
    }

    /// A button's data fits Telegram's 64 bytes and verifies only for its own claim: another
    /// decision, other arguments, another expiry or another key's MAC do not.
    #[test]
    fn callback_data_fits_and_binds_the_decision_and_the_arguments() {
        let key = Key::from_bytes(&[7; 32]);
        let args = "0123456789abcdef0123456789abcdef";
        let data = make(&key, &claim(Decision::Approve, args)).unwrap();
        assert!(data.len() <= MAX_DATA, "{data}");
        let (id, d, mac) = read(&data).unwrap();
        assert_eq!((id.as_str(), d), ("7c41e0", Decision::Approve));
        assert!(verifies(&key, &claim(Decision::Approve, args), &mac));
        assert!(!verifies(&key, &claim(Decision::Reject, args), &mac));
        assert!(!verifies(&key, &claim(Decision::Approve, "other"), &mac));
        assert!(!verifies(
            &Key::from_bytes(&[8; 32]),
            &claim(Decision::Approve, args),
            &mac
        ));
        for garbled in [
            "",
            "a:7c41e0",
            "x:7c41e0:00",
            "a:7c 41:0123456789abcdef0123456789abcdef",
            "a::0",
        ] {
            assert_eq!(read(garbled), Err(NotACallback::Garbled), "{garbled}");
        }
    }
}
