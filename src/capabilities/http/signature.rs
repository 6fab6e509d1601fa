//! A delivery's signature: GitHub's `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the
//! exact body under the hook's secret. Checked with the `hmac` crate's `verify_slice` (constant
//! time: how much of a guess matched never shows in how long the answer takes).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header the signature comes in (GitHub's name; other senders use it the same way).
pub const HEADER: &str = "x-hub-signature-256";

/// Whether `header` (the signature header's value, if any) is the HMAC-SHA256 of `body` under
/// `secret`. A missing header, another scheme, a digest that is not 64 hex digits: false.
pub fn verifies(secret: &[u8], body: &[u8], header: Option<&[u8]>) -> bool {
    let Some(digest) = header.and_then(|h| h.strip_prefix(b"sha256=")) else {
        return false;
    };
    let Some(digest) = unhex(digest) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&digest).is_ok()
}

/// The header's value for `body` under `secret`, as a sender computes it (tests, `docs/triggers.md`).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// 64 hex digits (either case) as 32 bytes.
fn unhex(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GitHub's own example (docs.github.com, "Validating webhook deliveries"): the secret
    /// "It's a Secret to Everybody" and the payload "Hello, World!".
    #[test]
    fn githubs_example_verifies() {
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign(secret, body), header);
        assert!(verifies(secret, body, Some(header.as_bytes())));
        assert!(verifies(
            secret,
            body,
            Some(header.to_uppercase().replace("SHA256", "sha256").as_bytes())
        ));
    }

    #[test]
    fn anything_else_is_refused() {
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let good = sign(secret, body);
        assert!(
            !verifies(secret, b"Hello, World?", Some(good.as_bytes())),
            "another body"
        );
        assert!(
            !verifies(b"another secret", body, Some(good.as_bytes())),
            "another secret"
        );
        assert!(!verifies(secret, body, None), "no header");
        assert!(!verifies(secret, body, Some(b"")), "empty");
        assert!(
            !verifies(secret, body, Some(good.replace("sha256=", "sha1=").as_bytes())),
            "another scheme"
        );
        assert!(!verifies(secret, body, Some(&good.as_bytes()[..70])), "short");
        assert!(
            !verifies(secret, body, Some(format!("{good}00").as_bytes())),
            "long"
        );
        assert!(
            !verifies(secret, body, Some(good.replace('7', "g").as_bytes())),
            "not hex"
        );
    }
}
