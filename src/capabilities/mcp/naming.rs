//! The names the model sees for MCP tools (docs/spec.md §14): `server__tool`, only `[A-Za-z0-9_-]`, at
//! most 64 characters (what model APIs accept), with a short hash of the real name when it had
//! to be shortened, so two long names never collide.

use sha2::{Digest, Sha256};

pub const MAX_NAME: usize = 64;

pub fn exposed_name(server: &str, tool: &str) -> String {
    let joined = format!("{server}__{tool}");
    let clean = crate::base::text::safe_name(&joined, '_');
    if clean.len() <= MAX_NAME && clean == joined {
        return clean;
    }
    let digest = Sha256::digest(joined.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME - hash.len() - 1;
    let head: String = clean.chars().take(keep).collect();
    format!("{head}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_join_and_odd_ones_are_cleaned_with_a_hash() {
        assert_eq!(exposed_name("memory", "read_graph"), "memory__read_graph");
        let dotted = exposed_name("slack", "chat.post");
        assert!(dotted.starts_with("slack__chat_post_") && dotted.len() == "slack__chat_post_".len() + 8);
        let long = exposed_name("tracker", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME);
        assert_ne!(long, exposed_name("tracker", &"x".repeat(101)), "no collisions");
        assert!(long
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
