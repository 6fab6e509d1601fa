//! Agent Skills (docs/spec.md §25): `skills/<name>/SKILL.md` in the vault, read and checked against
//! the open format's rules (agentskills.io/specification, and its reference validator
//! `skills-ref`): a `name` of at most 64 lowercase letters, digits and single hyphens, the same
//! as the skill's folder; a `description` of 1–1024 characters; optional `license`,
//! `compatibility` (at most 500 characters), `metadata` (strings by string keys) and
//! `allowed-tools` (a string or a list of strings), which tabd accepts and does not act on.
//!
//! A role lists the skills it may use (`## Skills`); a run's prompt lists each one's name,
//! description and path, and the model reads the body and the files beside it with `read_file`.
//! Nothing here runs anything: a skill's scripts are files like any other.

use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::base::diag::Diagnostic;
use crate::base::text::LineIndex;
use crate::base::vault::layout::{self, Layout};
use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::formats::frontmatter;

/// Longest skill name, in characters (the format's limit).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description, in characters (the format's limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility`, in characters (the format's limit).
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// Largest `SKILL.md` tabd reads to list a skill (the format asks for under 500 lines; the
/// model reads the body with `read_file`, in pages).
pub const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// The frontmatter fields the format defines.
const FIELDS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// Why a name is not a skill name (the name in NFKC form).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSkillName {
    #[error("a skill name is empty")]
    Empty,
    #[error("`{name}` is {chars} characters; a skill name has at most {MAX_NAME_CHARS}")]
    TooLong { name: String, chars: usize },
    #[error("`{0}` has capitals; a skill name is lowercase")]
    Capitals(String),
    #[error("`{0}` may use only lowercase letters, digits and `-`")]
    OtherCharacters(String),
    #[error("`{0}` starts or ends with `-`")]
    HyphenAtAnEnd(String),
    #[error("`{0}` has `--`; hyphens come one at a time")]
    HyphensInARow(String),
}

/// Checks a skill name against the format: 1–64 characters, lowercase letters and digits
/// (Unicode ones too, compared in NFKC form, as `skills-ref` does) and hyphens, no hyphen first,
/// last or twice in a row. A name that passes is one plain path component.
pub fn check_name(name: &str) -> Result<(), BadSkillName> {
    let name: String = name.nfkc().collect();
    let chars = name.chars().count();
    if chars == 0 {
        return Err(BadSkillName::Empty);
    }
    if chars > MAX_NAME_CHARS {
        return Err(BadSkillName::TooLong { name, chars });
    }
    if name.to_lowercase() != name {
        return Err(BadSkillName::Capitals(name));
    }
    if !name.chars().all(|c| c.is_alphanumeric() || c == '-') {
        return Err(BadSkillName::OtherCharacters(name));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(BadSkillName::HyphenAtAnEnd(name));
    }
    if name.contains("--") {
        return Err(BadSkillName::HyphensInARow(name));
    }
    Ok(())
}

/// `skills/<name>`: the skill's folder (under tabd's home, `layout`).
pub fn folder(layout: &Layout, name: &str) -> String {
    format!("{}/{name}", layout.skills())
}

/// `skills/<name>/SKILL.md`.
pub fn file(layout: &Layout, name: &str) -> String {
    format!("{}/{}", folder(layout, name), layout::SKILL_FILE)
}

/// Whether `path` is inside the folder of one of `skills` — compared exactly, never folded: this
/// is what a role may read through its skills, and a path that only looks like one is not one.
pub fn within(layout: &Layout, skills: &[String], path: &VaultPath) -> bool {
    skills.iter().any(|name| {
        let folder = folder(layout, name);
        check_name(name).is_ok() && path.starts_with(&folder) && path.as_str() != folder
    })
}

/// A skill ready to list in a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    /// On one line.
    pub description: String,
    /// `skills/<name>/SKILL.md`.
    pub path: VaultPath,
}

/// Why a listed skill cannot be used: the run goes on without it, and says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    BadName(#[from] BadSkillName),
    /// A name that passed `check_name` is one path component; kept for the vault's own refusal.
    #[error("{0}")]
    BadPath(VaultError),
    #[error("there is no {path}")]
    Missing { path: String },
    #[error("{path} cannot be read: {why}")]
    Unreadable { path: String, why: String },
    #[error("{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Diagnostic>),
}

/// Reads and checks skill `name`. `Ok` holds the skill and what `validate` warns of; `Err`
/// why it cannot be used (`Invalid`: every error, then every warning, with its line in
/// `SKILL.md`).
pub fn load(vault: &Vault, name: &str) -> Result<(Skill, Vec<Diagnostic>), SkillError> {
    check_name(name)?;
    let raw = file(vault.layout(), name);
    let path = VaultPath::parse(&raw, false).map_err(SkillError::BadPath)?;
    let unreadable = |why: String| SkillError::Unreadable {
        path: raw.clone(),
        why,
    };
    // Through a link only to a place inside its own folder: a skill is what its folder holds.
    let real = match vault.canonical(&path) {
        Ok(real) => real,
        Err(VaultError::NotFound(_)) => return Err(SkillError::Missing { path: raw }),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    if !real.starts_with(&folder(vault.layout(), name)) {
        return Err(unreadable(format!(
            "it is a link to {real}, outside the skill's folder"
        )));
    }
    let text = match vault.read_for_model(&real, MAX_SKILL_BYTES) {
        Ok((text, _)) => text,
        Err(VaultError::NotFound(_)) => return Err(SkillError::Missing { path: raw }),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let mut found = check_text(name, Path::new(&raw), &text);
    found.extend(links(vault, name, Path::new(&raw), &text));
    if found.iter().any(Diagnostic::is_error) {
        found.sort_by_key(|d| (!d.is_error(), d.line));
        return Err(SkillError::Invalid(found));
    }
    let description = frontmatter::split(&text)
        .ok()
        .and_then(|s| s.frontmatter)
        .and_then(|f| {
            f.get_str("description")
                .map(|d| crate::base::text::one_line(d, MAX_DESCRIPTION_CHARS))
        })
        .unwrap_or_default();
    Ok((
        Skill {
            name: name.to_string(),
            description,
            path,
        },
        found,
    ))
}

/// The frontmatter of a `SKILL.md` in folder `name`, checked against the format.
fn check_text(name: &str, file: &Path, text: &str) -> Vec<Diagnostic> {
    let fm = match frontmatter::split(text) {
        Err(e) => return vec![Diagnostic::error(file, e.line, e.message)],
        Ok(split) => match split.frontmatter {
            Some(fm) => fm,
            None => {
                return vec![Diagnostic::error(
                    file,
                    1,
                    "a SKILL.md opens with frontmatter: a line `---`, `name:` and `description:`, and `---`",
                )]
            }
        },
    };
    let mut out = Vec::new();
    match fm.get("name") {
        None => out.push(Diagnostic::error(
            file,
            1,
            format!("`name` is missing; write `name: {name}` (the folder's name)"),
        )),
        Some(f) => match f.value.as_str() {
            None => out.push(Diagnostic::error(file, f.line, "`name` is not text")),
            Some(given) => {
                if let Err(why) = check_name(given.trim()) {
                    out.push(Diagnostic::error(file, f.line, format!("`name`: {why}")));
                } else if given.trim().nfkc().collect::<String>() != name.nfkc().collect::<String>() {
                    out.push(Diagnostic::error(
                        file,
                        f.line,
                        format!(
                            "`name: {}` differs from the skill's folder `{name}`; a skill's name is its folder's",
                            given.trim()
                        ),
                    ));
                }
            }
        },
    }
    out.extend(text_field(&fm, file, "description", MAX_DESCRIPTION_CHARS, true));
    out.extend(text_field(
        &fm,
        file,
        "compatibility",
        MAX_COMPATIBILITY_CHARS,
        false,
    ));
    out.extend(other_fields(&fm, file));
    out
}

/// A text field: present (if `required`), not empty, at most `max` characters.
fn text_field(
    fm: &frontmatter::Frontmatter,
    file: &Path,
    key: &str,
    max: usize,
    required: bool,
) -> Option<Diagnostic> {
    let Some(f) = fm.get(key) else {
        return required.then(|| {
            Diagnostic::error(
                file,
                1,
                format!("`{key}` is missing; say what the skill does and when to use it"),
            )
        });
    };
    let Some(text) = f.value.as_str() else {
        return Some(Diagnostic::error(file, f.line, format!("`{key}` is not text")));
    };
    let n = text.trim().chars().count();
    if n == 0 {
        return Some(Diagnostic::error(file, f.line, format!("`{key}` is empty")));
    }
    (n > max).then(|| {
        Diagnostic::error(
            file,
            f.line,
            format!("`{key}` is {n} characters; the format allows at most {max}"),
        )
    })
}

/// `license`, `metadata`, `allowed-tools` in their shapes; any other field a warning.
fn other_fields(fm: &frontmatter::Frontmatter, file: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for f in &fm.entries {
        let ok = match f.key.as_str() {
            "name" | "description" | "compatibility" => continue,
            "license" => f.value.is_string(),
            "metadata" => f
                .value
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string)),
            "allowed-tools" => {
                f.value.is_string() || f.value.as_array().is_some_and(|a| a.iter().all(Value::is_string))
            }
            other => {
                out.push(Diagnostic::warning(
                    file,
                    f.line,
                    format!(
                        "`{other}` is not a field of the skill format ({}); tabd ignores it",
                        FIELDS.join(", ")
                    ),
                ));
                continue;
            }
        };
        if !ok {
            let shape = match f.key.as_str() {
                "license" => "text",
                "metadata" => "a mapping of names to text (`version: \"1.0\"`)",
                _ => "text (tools separated by spaces) or a list of text",
            };
            out.push(Diagnostic::error(
                file,
                f.line,
                format!("`{}` should be {shape}", f.key),
            ));
        }
    }
    out
}

/// Each relative link and image of the body must name a file inside the skill's folder that
/// exists. Links to the web, mail and anchors are not checked.
fn links(vault: &Vault, name: &str, file: &Path, text: &str) -> Vec<Diagnostic> {
    let Ok(base) = url::Url::parse("file:///skill/") else {
        return Vec::new();
    };
    let lines = LineIndex::new(text);
    let mut out = Vec::new();
    let opts = Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    for (event, range) in Parser::new_ext(text, opts).into_offset_iter() {
        let dest = match event {
            Event::Start(Tag::Link {
                link_type, dest_url, ..
            })
            | Event::Start(Tag::Image {
                link_type, dest_url, ..
            }) if !matches!(link_type, LinkType::Email | LinkType::Autolink) => dest_url,
            _ => continue,
        };
        let line = lines.line_of(range.start);
        if let Some(why) = broken(vault, name, &base, &dest) {
            out.push(Diagnostic::error(file, line, format!("the link `{dest}` {why}")));
        }
    }
    out
}

/// Why link `dest` of skill `name` leads nowhere, if it does.
fn broken(vault: &Vault, name: &str, base: &url::Url, dest: &str) -> Option<String> {
    if dest.starts_with('#') || dest.trim().is_empty() {
        return None;
    }
    let joined = base.join(dest).ok()?;
    if joined.scheme() != "file" || dest.contains("://") {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(joined.path())
        .decode_utf8()
        .ok()?
        .into_owned();
    if dest.starts_with('/') {
        return Some("is absolute; write it relative to the skill's folder".into());
    }
    let Some(inside) = decoded.strip_prefix("/skill/") else {
        return Some("leads out of the skill's folder; link to files beside SKILL.md".into());
    };
    let target = match VaultPath::parse(&format!("{}/{inside}", folder(vault.layout(), name)), false) {
        Ok(p) => p,
        Err(e) => return Some(format!("is not a path tabd reads: {e}")),
    };
    match vault.canonical(&target) {
        Ok(real) if !real.starts_with(&folder(vault.layout(), name)) => {
            Some(format!("is a link to {real}, outside the skill's folder"))
        }
        Ok(real) if vault.exists(&real) => None,
        Ok(_) | Err(VaultError::NotFound(_)) => Some(format!("names {target}, which does not exist")),
        Err(e) => Some(format!("cannot be followed: {e}")),
    }
}

/// What `validate` says of the skills `roles` list: each listed skill once, its problems at the
/// `SKILL.md` line, and a skill that is not there (or not a skill name) at the role's line.
/// `listed`: (skill name, role file, line).
pub fn diagnostics(vault: &Vault, listed: &[(String, PathBuf, usize)]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (name, role_file, line) in listed {
        match load(vault, name) {
            Ok((_, warnings)) if !seen.contains(&name.as_str()) => out.extend(warnings),
            Ok(_) => {}
            Err(SkillError::Invalid(errors)) if !seen.contains(&name.as_str()) => out.extend(errors),
            Err(SkillError::Invalid(_)) => {}
            Err(e @ (SkillError::BadName(_) | SkillError::BadPath(_) | SkillError::Missing { .. })) => out
                .push(Diagnostic::error(
                    role_file,
                    *line,
                    format!("skill `{name}`: {e}; the role runs without it"),
                )),
            Err(e @ SkillError::Unreadable { .. }) => out.push(Diagnostic::error(
                Path::new(&file(vault.layout(), name)),
                0,
                format!("{e}; the roles that list it run without it"),
            )),
        }
        seen.push(name);
    }
    out.sort_by(|a, b| (&a.path, a.line, &a.message).cmp(&(&b.path, b.line, &b.message)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests;
