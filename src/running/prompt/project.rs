//! What every run's system prompt reads from the project beyond the role's own file (docs/spec.md
//! §25): the vault's root `AGENTS.md`, the project's rules for every role, and the skills the
//! role lists, each by name, description and path only — the model reads a body when it needs
//! it. Both sit in the stable, cached part of the prompt.

use std::io::Read as _;

use crate::base::text::{one_line, thousands};
use crate::base::vault::{layout, Vault, VaultPath};
use crate::records::access::AccessPolicy;
use crate::records::context;
use crate::setup::role::Role;
use crate::setup::skills;

/// The heading `AGENTS.md` goes under, after the role's own rules.
pub const AGENTS_HEADING: &str = "Project rules (AGENTS.md)";

/// The vault's `AGENTS.md` as the prompt shows it, at most `max_bytes` of it (a longer one is cut,
/// with where to read the rest), and the hash of what was shown; `None` when there is none. A
/// file tabd may not read (a link into `.tabd/`) or cannot (not text) is named, not shown.
pub fn agents_md(vault: &Vault, policy: &AccessPolicy, max_bytes: usize) -> Option<(String, String)> {
    let path = VaultPath::parse(layout::AGENTS_MD, false).ok()?;
    if !vault.exists(&path) {
        return None;
    }
    let not_included = |why: String| {
        Some((
            format!("[{} is not included: {why}]", layout::AGENTS_MD),
            String::new(),
        ))
    };
    let real = match policy.check_read(vault, &path) {
        Ok(real) => real,
        Err(e) => return not_included(e.to_string()),
    };
    // Only what is shown is read: a huge file costs a prompt no more than its cut.
    let (file, entry) = match vault.open_regular(&real) {
        Ok((_, entry)) if entry.links > 1 => {
            return not_included(format!(
                "it has {} names on disk (hard links): another may be a file outside the vault",
                entry.links
            ))
        }
        Ok(opened) => opened,
        Err(e) => return not_included(e.to_string()),
    };
    let mut bytes = Vec::with_capacity(entry.size.min(max_bytes as u64) as usize);
    if let Err(e) = file.take(max_bytes as u64).read_to_end(&mut bytes) {
        return not_included(e.to_string());
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        // Cut inside a character at the end: keep the whole ones.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return not_included("it is not UTF-8 text".into()),
    };
    let mut body = text.trim_end().to_string();
    if (text.len() as u64) < entry.size {
        body.push_str(&format!(
            "\n[… {} truncated at {} of {} bytes; read_file {} with an offset for the rest]",
            layout::AGENTS_MD,
            thousands(text.len() as u64),
            thousands(entry.size),
            layout::AGENTS_MD
        ));
    }
    Some((body, context::hash(text.as_bytes())))
}

/// The listing of the skills `role` lists, and a line for each one it runs without (for the
/// run's daily section). `None` when it lists none or none can be used.
pub fn skills_listing(vault: &Vault, role: &Role) -> (Option<String>, Vec<String>) {
    let mut lines = Vec::new();
    let mut left_out = Vec::new();
    for name in &role.skills {
        match skills::load(vault, name) {
            Ok((skill, _)) => lines.push(format!(
                "- `{}` ({}): {}",
                skill.name, skill.path, skill.description
            )),
            // One line, whatever the file or the role's list holds: a line break in a name would
            // start a heading of its own in the daily note.
            Err(e) => left_out.push(format!(
                "**Skill left out:** `{}` — {}",
                one_line(name, 80),
                one_line(&e.to_string(), 2000)
            )),
        }
    }
    if lines.is_empty() {
        return (None, left_out);
    }
    let how = if role.reads_only_skills() {
        "read_file reads inside these skills' folders only"
    } else {
        "read them with read_file"
    };
    let text = format!(
        "Skills are instructions for particular tasks. When a task matches a skill's description, read its SKILL.md \
         before you act, and the files it names (relative to its folder: references/, assets/ …) only when you need \
         them; {how}. A skill's scripts are files to read: nothing runs them.\n{}",
        lines.join("\n")
    );
    (Some(text), left_out)
}
