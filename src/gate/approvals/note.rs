//! The approval note (docs/spec.md §15, contract): frontmatter a person flips in Obsidian's Properties
//! editor, the model's reason, and the arguments as an editable JSON block.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use crate::formats::frontmatter;
use crate::records::state::approval_ledger::{Approval, Gist, NoteStatus};

/// What the note says, as tabd reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub id: Option<String>,
    /// The `tool` value: the call a note asks for can never be changed by editing it.
    pub tool: Option<String>,
    /// The `role` value, to tell which host's note it is.
    pub role: Option<String>,
    /// The `status` value, in any case; `None` when missing, not text, or a word tabd does not
    /// use (such a note is left to the person).
    pub status: Option<NoteStatus>,
    /// The arguments as they now stand: `Err` when the block is missing or not JSON.
    pub args: Result<Value, NoteError>,
}

/// Why a note cannot be read, or its arguments cannot be run as they stand. Each message is
/// written into the note for the person, so it says what to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoteError {
    #[error("{0}")]
    Frontmatter(#[from] frontmatter::FrontmatterError),
    #[error("it has no frontmatter (status, id, …)")]
    NoFrontmatter,
    #[error("the note has more than one `## Arguments` section; keep one")]
    TwoArgumentSections,
    #[error("there is no ```json block under `## Arguments`")]
    NoJsonBlock,
    #[error("`### {0}` belongs to arguments that are a JSON object")]
    TextOutsideAnObject(String),
    #[error("`{0}` is given twice: in the JSON block and under `### {0}`; keep one")]
    GivenTwice(String),
    #[error("the arguments are not valid JSON ({0})")]
    Json(String),
}

/// Everything needed to write a new note.
pub struct NewNote<'a> {
    pub approval: &'a Approval,
    pub id: &'a str,
    pub role_display: &'a str,
    /// The tool's description as the server or tabd gives it.
    pub description: &'a str,
    pub reason: &'a str,
    pub args: &'a Value,
    /// The daily run log of the run that asked, as a vault path.
    pub run_log: &'a str,
    pub tz: Tz,
    /// What the call changes of the person's own notes, a section of its own (empty: none).
    pub theirs: &'a str,
}

/// The note's file name: `YYYY-MM-DD-<role>-<tool>-<id>.md`, the tool's `/` as `-`.
pub fn file_name(created: DateTime<Utc>, tz: Tz, role: &str, tool: &str, id: &str) -> String {
    let tool = crate::base::text::safe_name(tool, '-');
    format!(
        "{}-{role}-{tool}-{id}.md",
        created.with_timezone(&tz).format("%Y-%m-%d")
    )
}

/// The frontmatter tabd writes for request `id` (`a`) with `status`: a new note's, or one put
/// back over frontmatter that cannot be read.
fn fields<'a>(a: &'a Approval, id: &'a str, status: NoteStatus) -> [(&'static str, Value); 8] {
    [
        ("status", Value::from(status.as_str())),
        ("role", Value::from(a.role.as_str())),
        ("tool", Value::from(a.tool.as_str())),
        ("risk", Value::from(a.risk.as_str())),
        ("run_id", Value::from(a.run_id.as_str())),
        ("created", Value::from(stamp(a.created))),
        ("expires", Value::from(stamp(a.expires))),
        ("id", Value::from(id)),
    ]
}

pub fn render(n: &NewNote) -> String {
    let a = n.approval;
    let fields = fields(a, n.id, NoteStatus::Pending);
    // The description's first sentence when it is short enough for a title; never one cut off
    // mid-sentence (issue 30).
    let first = n.description.lines().next().unwrap_or("").trim();
    let sentence = first
        .split_once(". ")
        .map_or(first, |(s, _)| s)
        .trim_end_matches('.');
    let short = !sentence.is_empty() && sentence.chars().count() <= 100;
    // What the call does to what (issue 39): `Weekly Review asks to write reviews/week.md`. A
    // record an older tabd wrote has no gist: the description, as then.
    let title = match &a.gist {
        Some(g) => title(n.role_display, g),
        None if short => format!("{}: {sentence}", n.role_display),
        None => format!("{} asks to run {}", n.role_display, a.tool),
    };
    let title = inert(&title);
    // The tool's own words under the title, when the title does not already say them.
    let about = if a.gist.is_some() && short {
        format!("{}.\n\n", inert(sentence))
    } else {
        String::new()
    };
    // The model's text (and a server's description) is quoted so it can never form a heading, a
    // fence, frontmatter or a comment: the `## Arguments` block that runs is the one the person
    // sees, in every view.
    let reason = if n.reason.trim().is_empty() {
        "(the model gave no reason)".to_string()
    } else {
        // Escaped whole (`inert`): only the line ends need the common form first.
        crate::base::text::unify_line_ends(n.reason.trim())
            .lines()
            .map(|l| format!("> {}", inert(l)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (args, long_texts) = split_long_texts(n.args);
    let args = serde_json::to_string_pretty(&args).unwrap_or_else(|_| args.to_string());
    let expires = crate::base::text::shown(a.expires, n.tz);
    let theirs = if n.theirs.is_empty() {
        String::new()
    } else {
        format!("{}\n", n.theirs.trim_end())
    };
    format!(
        "{}# {title}\n\n{about}\
         Set `status` to `approved` to run this call once, with the arguments below as they stand\n\
         then (you may edit them), or to `rejected`. Unanswered, it expires at {expires}.\n\n\
         **Why:**\n\n{reason}\n\n\
         **Tool:** `{}` ({} risk) — asked by the run `{}`, see [[{}]]\n\n\
         {theirs}## Arguments\n```json\n{args}\n```\n{long_texts}",
        frontmatter::render(&fields),
        a.tool,
        a.risk.as_str(),
        a.run_id,
        n.run_log.strip_suffix(".md").unwrap_or(n.run_log),
    )
}

/// A call's title, on one line, as plain text: `<Role> asks to <action>` (`gist`). The note
/// escapes it; a push sends it as it is.
pub fn title(role_display: &str, gist: &Gist) -> String {
    format!(
        "{} asks to {}",
        super::gist::one_line(role_display, 60),
        super::gist::one_line(&gist.action, super::gist::TARGET_MAX * 2)
    )
}

/// The arguments with each text that spans lines (a file's content, a message with line breaks)
/// taken out of the JSON, and those texts as they will be used, each in a block of its own under
/// `### <name>` that a person edits as text (not as a JSON string full of `\n`).
fn split_long_texts(args: &Value) -> (Value, String) {
    let Some(object) = args.as_object() else {
        return (args.clone(), String::new());
    };
    let mut kept = object.clone();
    let mut blocks = String::new();
    for (key, value) in object {
        let Some(text) = value.as_str().filter(|t| t.contains('\n')) else {
            continue;
        };
        if key.contains(['\n', '\r']) || key.trim() != key || key.is_empty() {
            continue;
        }
        kept.remove(key);
        // A fence longer than any run of backticks in the text, so the text cannot close it.
        let mut fence = "```".to_string();
        while text.contains(&fence) {
            fence.push('`');
        }
        // One line break more than the text has: reading drops exactly one, so a text with or
        // without a final line break comes back as it was.
        blocks.push_str(&format!("\n### {}\n{fence}text\n{text}\n{fence}\n", inert(key)));
    }
    (Value::Object(kept), blocks)
}

/// `text` with every character that can open Markdown or Obsidian syntax backslash-escaped
/// (CommonMark): it reads the same, but can start no fence, code span, HTML comment, link,
/// embed, table cell, heading or Obsidian `%%` comment.
pub fn inert(text: &str) -> String {
    const OPENERS: &[char] = &[
        '\\', '`', '*', '_', '[', ']', '<', '>', '#', '%', '|', '~', '$', '=', '!', '{', '}',
    ];
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for c in text.chars() {
        if OPENERS.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An instant as the note shows it: `2026-11-22T09:00:04Z`.
pub(crate) fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Reads a note's id, status and arguments. `Err` when its frontmatter cannot be read at all.
pub fn read(text: &str) -> Result<Read, NoteError> {
    let split = frontmatter::split(text)?;
    let Some(fm) = split.frontmatter else {
        return Err(NoteError::NoFrontmatter);
    };
    let text_of = |k: &str| match fm.get(k).map(|e| &e.value) {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Read {
        id: text_of("id"),
        tool: text_of("tool"),
        role: text_of("role"),
        status: text_of("status").as_deref().and_then(NoteStatus::parse),
        args: arguments(&text[split.body_offset..]),
    })
}

/// The fenced code block under the one top-level `## Arguments` heading, parsed as JSON. A
/// heading or block inside a quote, a list or HTML is not the note's own: it is ignored.
fn arguments(body: &str) -> Result<Value, NoteError> {
    use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
    let mut depth = 0usize; // inside quotes, lists, footnotes
    let mut in_heading = false;
    let mut heading = String::new();
    let mut under_arguments = false;
    let mut sections = 0;
    let mut in_code = false;
    let mut code: Option<String> = None;
    // `### <name>` under `## Arguments`: a long text argument, in the block that follows it.
    let mut in_sub = false;
    let mut sub: Option<String> = None;
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut in_text = false;
    for event in Parser::new(body) {
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_) | Tag::FootnoteDefinition(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::FootnoteDefinition) => {
                depth = depth.saturating_sub(1)
            }
            Event::Start(Tag::Heading { level, .. }) if depth == 0 && level <= HeadingLevel::H2 => {
                in_heading = true;
                heading.clear();
            }
            Event::End(TagEnd::Heading(level)) if in_heading && level <= HeadingLevel::H2 => {
                in_heading = false;
                under_arguments = heading.trim().eq_ignore_ascii_case("arguments");
                sections += usize::from(under_arguments);
                sub = None;
            }
            Event::Start(Tag::Heading {
                level: HeadingLevel::H3,
                ..
            }) if depth == 0 && under_arguments => {
                in_sub = true;
                heading.clear();
            }
            Event::End(TagEnd::Heading(HeadingLevel::H3)) if in_sub => {
                in_sub = false;
                sub = Some(heading.trim().to_string());
            }
            Event::Text(t) | Event::Code(t) if in_heading || in_sub => heading.push_str(&t),
            Event::Start(Tag::CodeBlock(_)) if depth == 0 && under_arguments && sub.is_some() => {
                in_text = true;
                texts.push((sub.take().unwrap_or_default(), String::new()));
            }
            Event::Start(Tag::CodeBlock(_)) if depth == 0 && under_arguments && code.is_none() => {
                in_code = true;
                code = Some(String::new());
            }
            Event::Text(t) if in_text => {
                if let Some((_, text)) = texts.last_mut() {
                    text.push_str(&t);
                }
            }
            Event::Text(t) if in_code => {
                if let Some(c) = code.as_mut() {
                    c.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) if in_text => in_text = false,
            Event::End(TagEnd::CodeBlock) if in_code => in_code = false,
            _ => {}
        }
    }
    if sections > 1 {
        return Err(NoteError::TwoArgumentSections);
    }
    match code {
        Some(c) => with_texts(strict_json(&c)?, texts),
        None => Err(NoteError::NoJsonBlock),
    }
}

/// The arguments of the JSON block with the long texts of their own blocks put back.
fn with_texts(mut args: Value, texts: Vec<(String, String)>) -> Result<Value, NoteError> {
    for (key, mut text) in texts {
        let Some(object) = args.as_object_mut() else {
            return Err(NoteError::TextOutsideAnObject(key));
        };
        if object.contains_key(&key) {
            return Err(NoteError::GivenTwice(key));
        }
        text.pop(); // the one line break the note adds (see `split_long_texts`)
        object.insert(key, Value::String(text));
    }
    Ok(args)
}

/// JSON that names no key twice in one object: `{"a": 1, "a": 2}` is ambiguous (a person may
/// have edited the first while the second is what would run), so it is refused.
pub fn strict_json(text: &str) -> Result<Value, NoteError> {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
    struct Strict;
    impl<'de> serde::de::DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_string()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_none<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut v = Vec::new();
            while let Some(x) = seq.next_element_seed(Strict)? {
                v.push(x);
            }
            Ok(Value::Array(v))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut m = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                if m.contains_key(&k) {
                    return Err(serde::de::Error::custom(format!(
                        "the key `{k}` appears twice in one object, so which value is meant is ambiguous; keep one"
                    )));
                }
                let v = map.next_value_seed(Strict)?;
                m.insert(k, v);
            }
            Ok(Value::Object(m))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde::de::DeserializeSeed::deserialize(Strict, &mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| NoteError::Json(e.to_string()))?;
    Ok(value)
}

/// `text` with its frontmatter `status` set to `status` (every other key kept as the person left
/// it) and `append` added at the end.
pub fn update(text: &str, status: NoteStatus, append: &str) -> Result<String, frontmatter::FrontmatterError> {
    let split = frontmatter::split(text)?;
    let fm = split.frontmatter.unwrap_or_default();
    let mut fields: Vec<(&str, Value)> = fm
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.clone()))
        .collect();
    match fields.iter_mut().find(|(k, _)| *k == "status") {
        Some(f) => f.1 = Value::from(status.as_str()),
        None => fields.insert(0, ("status", Value::from(status.as_str()))),
    }
    let mut out = frontmatter::render(&fields);
    let body = &text[split.body_offset..];
    out.push_str(body);
    if !append.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(append);
        if !append.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// `text` with its `status` set and `append` added, as `update` does — and when its frontmatter
/// cannot be read (too deep, too large, not YAML) or is gone, with new frontmatter written from
/// tabd's record of the request (`id`, `a`). Nothing of the person's is lost: the body is kept
/// byte for byte, and a block tabd could not read is kept after `append`, as it was, in a fence.
pub fn update_or_restore(text: &str, status: NoteStatus, append: &str, (id, a): (&str, &Approval)) -> String {
    let (unread, body) = match frontmatter::split(text) {
        Ok(split) if split.frontmatter.is_some() => match update(text, status, append) {
            Ok(t) => return t,
            Err(_) => ("", text),
        },
        Ok(_) => ("", text),
        // A block never closed: only its opening line is taken out; every line after it stays.
        Err(_) => {
            let end = frontmatter::block_end(text)
                .or_else(|| text.find('\n').map(|i| i + 1))
                .unwrap_or(text.len());
            text.split_at(end)
        }
    };
    let fresh = frontmatter::render(&fields(a, id, status));
    let mut out =
        update(&format!("{fresh}{body}"), status, append).unwrap_or_else(|_| format!("{fresh}{body}"));
    if !unread.is_empty() {
        // A fence longer than any run of backticks in the block, so the block cannot close it.
        let mut fence = "```".to_string();
        while unread.contains(&fence) {
            fence.push('`');
        }
        let end = if unread.ends_with('\n') { "" } else { "\n" };
        out.push_str(&format!(
            "\nThe properties tabd could not read, as they were (it wrote new ones from its record of this \
             request above):\n\n{fence}yaml\n{unread}{end}{fence}\n"
        ));
    }
    out
}

/// A name tabd gives approval notes: `YYYY-MM-DD-<role>-<tool>-<6 hex>.md`.
pub fn is_tabd_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".md") else {
        return false;
    };
    let b = stem.as_bytes();
    let date_ok = b.len() > 11
        && b[..10].iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
        && b[10] == b'-';
    let id_ok = stem
        .rsplit_once('-')
        .is_some_and(|(_, id)| id.len() == 6 && id.bytes().all(|c| c.is_ascii_hexdigit()));
    date_ok
        && id_ok
        && stem[11..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A copy a sync tool made of one of tabd's notes when both sides changed: tabd's name followed
/// by the tool's marker — Syncthing `.sync-conflict-…`, Dropbox, Nextcloud and Obsidian Sync
/// `… (… conflicted copy …)`, OneDrive and Resilio `-<host>` / `.conflict…`. Only the part of the
/// name tabd did not write is looked at: a role or tool called "conflict" is not a copy.
pub fn is_conflict_copy(name: &str) -> bool {
    if is_tabd_name(name) {
        return false;
    }
    let Some(stem) = name.strip_suffix(".md") else {
        return false;
    };
    // The longest prefix that is a name tabd wrote, and what a sync tool added after it.
    let added = (12..=stem.len())
        .rev()
        .filter(|&i| stem.is_char_boundary(i))
        .find(|&i| is_tabd_name(&format!("{}.md", &stem[..i])))
        .map(|i| stem[i..].to_lowercase());
    let Some(added) = added else {
        return false;
    };
    added.starts_with(".sync-conflict-")
        || (added.starts_with(" (") && added.contains("conflict"))
        || added.starts_with(".conflict")
        || added.starts_with("-conflict")
        || added.starts_with(" conflict")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::calls::Risk;
    use serde_json::json;

    fn approval() -> Approval {
        let t = chrono::DateTime::parse_from_rfc3339("2026-11-22T09:00:04Z")
            .unwrap()
            .with_timezone(&Utc);
        Approval {
            role: "comms".into(),
            tool: "slack/conversations_add_message".into(),
            exposed: "slack__conversations_add_message".into(),
            risk: Risk::Network,
            note: String::new(),
            args_hash: String::new(),
            run_id: "20261122T090000Z-comms-3f2a".into(),
            created: t,
            expires: t + chrono::Duration::hours(48),
            phase: NoteStatus::Pending,
            decided: None,
            outcome: None,
            reported: false,
            executions: 0,
            notified: false,
            outcome_told: None,
            also_for: Vec::new(),
            hops: 0,
            followup: None,
            gist: None,
            bases: Vec::new(),
            decided_by: None,
            kind: Default::default(),
            instruction: None,
        }
    }

    fn rendered(args: &Value, reason: &str) -> String {
        render(&NewNote {
            approval: &approval(),
            id: "7c41e0",
            role_display: "Comms",
            description: "Add a message to a channel.\nMore text.",
            reason,
            args,
            run_log: "agent/runs/2026-11-22.md",
            tz: chrono_tz::UTC,
            theirs: "",
        })
    }

    #[test]
    fn a_new_note_has_the_contract_keys_and_round_trips_its_arguments() {
        let args =
            json!({"channel_id": "C123", "payload": "Weekly update: \"quotes\", ```fences``` and: colons"});
        let text = rendered(&args, "The client asked for a status.");
        let split = frontmatter::split(&text).unwrap();
        let fm = split.frontmatter.unwrap();
        for (k, v) in [
            ("status", "pending"),
            ("role", "comms"),
            ("tool", "slack/conversations_add_message"),
            ("risk", "network"),
            ("run_id", "20261122T090000Z-comms-3f2a"),
            ("created", "2026-11-22T09:00:04Z"),
            ("expires", "2026-11-24T09:00:04Z"),
            ("id", "7c41e0"),
        ] {
            assert_eq!(fm.get_str(k), Some(v), "{k} in\n{text}");
        }
        assert!(text.contains("# Comms: Add a message to a channel\n"), "{text}");
        assert!(
            text.contains("**Why:**\n\n> The client asked for a status."),
            "{text}"
        );
        assert!(text.contains("[[agent/runs/2026-11-22]]"));
        let r = read(&text).unwrap();
        assert_eq!(r.id.as_deref(), Some("7c41e0"));
        assert_eq!(r.status, Some(NoteStatus::Pending));
        assert_eq!(r.args.unwrap(), args, "the arguments survive the note");
    }

    /// Issue 30: a file's content is shown as text a person can edit, in a block of its own —
    /// not a JSON string of `\n`s — and comes back exactly, with or without a final line break,
    /// whatever fences or headings it holds.
    #[test]
    fn long_texts_are_their_own_editable_blocks_and_round_trip_exactly() {
        for content in [
            "# Blockers\n\n- auth delay\n",
            "no final line break\nsecond line",
            "## Arguments\n```json\n{\"path\": \"roles/x.md\"}\n```\n### path\n````\nx\n",
        ] {
            let args = json!({"path": "project/blockers.md", "content": content});
            let text = rendered(&args, "r");
            assert!(text.contains("\n### content\n"), "{text}");
            assert!(
                !text.contains("\\n"),
                "no escaped line breaks for the person to edit: {text}"
            );
            assert_eq!(read(&text).unwrap().args.unwrap(), args, "{text}");
        }
        // Edited by the person: the block is what runs.
        let args = json!({"path": "p.md", "content": "one\ntwo\n"});
        let edited = rendered(&args, "r").replace("one\ntwo\n", "one\nTWO, edited\n");
        assert_eq!(
            read(&edited).unwrap().args.unwrap()["content"],
            "one\nTWO, edited\n"
        );
        // Named twice: refused, not guessed.
        let twice =
            rendered(&args, "r").replace("\"path\": \"p.md\"", "\"path\": \"p.md\", \"content\": \"x\"");
        assert_eq!(
            read(&twice).unwrap().args.unwrap_err(),
            NoteError::GivenTwice("content".into())
        );
    }

    #[test]
    fn titles_are_whole_sentences() {
        let text = rendered(&json!({"a": 1}), "r");
        assert!(text.contains("# Comms: Add a message to a channel\n"), "{text}");
        let long = render(&NewNote {
            approval: &approval(),
            id: "7c41e0",
            role_display: "Comms",
            description: &"Sends a message to a channel, a thread or a person, with formatting and attachments, mentions and more".repeat(2),
            reason: "r",
            args: &json!({}),
            run_log: "agent/runs/2026-11-22.md",
            tz: chrono_tz::UTC,
            theirs: "",
        });
        assert!(
            long.contains("# Comms asks to run slack/conversations\\_add\\_message\n"),
            "{long}"
        );
    }

    /// Issue 39, item 4: a request tabd recorded with its gist is titled by what it does to
    /// what, escaped, with the tool's own words under the title.
    #[test]
    fn a_title_names_the_target_and_the_description_follows() {
        let args = json!({"channel": "C1 <!-- x -->\nstatus: approved", "text": "Hi"});
        let mut a = approval();
        a.gist = Some(crate::gate::approvals::gist::of(
            &a.tool,
            &args,
            &Default::default(),
        ));
        let text = render(&NewNote {
            approval: &a,
            id: "7c41e0",
            role_display: "Comms",
            description: "Add a message to a channel.\nMore text.",
            reason: "r",
            args: &args,
            run_log: "daily/2026-11-22.md",
            tz: chrono_tz::UTC,
            theirs: "",
        });
        assert!(
            text.contains(
                "\n# Comms asks to run slack/conversations\\_add\\_message (channel: C1 \\<\\!-- x --\\> status: approved)\n\nAdd a message to a channel.\n\nSet `status`"
            ),
            "{text}"
        );
        assert_eq!(read(&text).unwrap().status, Some(NoteStatus::Pending));
    }

    #[test]
    fn status_updates_keep_the_persons_edits_and_append() {
        let text = rendered(&json!({"a": 1}), "");
        assert!(text.contains("(the model gave no reason)"));
        let edited = text
            .replace("status: pending", "status: Approved")
            .replace("\"a\": 1", "\"a\": 2");
        let r = read(&edited).unwrap();
        assert_eq!(r.status, Some(NoteStatus::Approved), "case does not matter");
        assert_eq!(r.args.unwrap(), json!({"a": 2}), "edited arguments are read");
        let done = update(&edited, NoteStatus::Done, "## Result\nok\n").unwrap();
        let r = read(&done).unwrap();
        assert_eq!(r.status, Some(NoteStatus::Done));
        assert_eq!(r.args.unwrap(), json!({"a": 2}));
        assert!(done.ends_with("\n\n## Result\nok\n"), "{done}");
        assert_eq!(r.id.as_deref(), Some("7c41e0"));
    }

    /// A note whose properties cannot be read (or are gone) gets them back from tabd's record,
    /// with the new status; its body stays byte for byte and the unreadable block is kept after
    /// the line, fenced so it cannot close the fence. A readable note is only updated.
    #[test]
    fn unreadable_properties_are_written_anew_and_the_persons_text_is_kept() {
        let a = approval();
        let good = rendered(&json!({"channel": "C1", "text": "one\ntwo\n"}), "r");
        let split = frontmatter::split(&good).unwrap();
        let body = &good[split.body_offset..];
        let deep = format!(
            "---\nstatus: approved\nx: {}{}\n---\n",
            "[".repeat(70),
            "]".repeat(70)
        );
        let ticks = "---\nstatus: [approved ```` \n---\n".to_string();
        for broken in [deep.as_str(), ticks.as_str()] {
            let text = format!("{broken}{body}");
            let out = update_or_restore(&text, NoteStatus::Invalid, "**Invalid**: why.", ("7c41e0", &a));
            let r = read(&out).unwrap();
            assert_eq!(r.status, Some(NoteStatus::Invalid));
            assert_eq!(r.id.as_deref(), Some("7c41e0"));
            assert_eq!(r.tool.as_deref(), Some(a.tool.as_str()));
            assert_eq!(r.args, read(&good).unwrap().args, "the arguments as they were");
            assert!(out.contains(body), "{out}");
            assert!(out.contains(broken), "{out}");
            let after_line = &out[out.find("**Invalid**: why.").unwrap()..];
            assert!(after_line.contains(broken), "kept after the line: {out}");
            assert!(
                !after_line.contains("\n````yaml"),
                "a fence longer than the block's: {out}"
            );
        }
        // Never closed: only the opening line goes; every line after it stays as text.
        let unclosed = format!("---\nstatus: approved\n{body}");
        let out = update_or_restore(
            &unclosed,
            NoteStatus::Invalid,
            "**Invalid**: why.",
            ("7c41e0", &a),
        );
        assert!(out.contains(&unclosed[4..]), "{out}");
        assert_eq!(read(&out).unwrap().status, Some(NoteStatus::Invalid));
        // Gone: written from the record, the text below it.
        let out = update_or_restore(body, NoteStatus::Invalid, "**Invalid**: why.", ("7c41e0", &a));
        assert!(
            out.contains(body) && read(&out).unwrap().id.as_deref() == Some("7c41e0"),
            "{out}"
        );
        // Readable: only the status and the line change.
        let out = update_or_restore(&good, NoteStatus::Invalid, "**Invalid**: why.", ("7c41e0", &a));
        assert_eq!(
            out,
            update(&good, NoteStatus::Invalid, "**Invalid**: why.").unwrap()
        );
    }

    #[test]
    fn broken_arguments_and_frontmatter_are_reasons_not_panics() {
        let text = rendered(&json!({"a": 1}), "r").replace("\"a\": 1", "\"a\": ");
        let r = read(&text).unwrap();
        assert!(matches!(r.args.unwrap_err(), NoteError::Json(_)));
        let no_block = "---\nstatus: approved\nid: x\n---\n# T\n## Arguments\nnone\n";
        let why = read(no_block).unwrap().args.unwrap_err();
        assert_eq!(why, NoteError::NoJsonBlock);
        assert!(
            why.to_string().contains("no ```json block"),
            "the message says what to fix"
        );
        assert!(read("no frontmatter at all").is_err());
        assert!(read("---\nstatus: [unclosed\n---\n").is_err());
    }

    #[test]
    fn names_and_conflict_copies() {
        let t = approval().created;
        assert_eq!(
            file_name(
                t,
                chrono_tz::UTC,
                "comms",
                "slack/conversations_add_message",
                "7c41e0"
            ),
            "2026-11-22-comms-slack-conversations_add_message-7c41e0.md"
        );
        for copy in [
            "2026-11-22-comms-x-7c41e0.sync-conflict-20261122-090000-ABCDEFG.md",
            "2026-11-22-comms-x-7c41e0 (conflicted copy 2026-11-22).md",
            "2026-11-22-comms-x-7c41e0 (Ana's conflicted copy 2026-11-22).md",
            "2026-11-22-comms-x-7c41e0 (Conflicted copy laptop 202611220900).md",
        ] {
            assert!(is_conflict_copy(copy), "{copy}");
            assert!(!is_tabd_name(copy), "{copy}");
        }
        // Names tabd wrote are never copies, whatever the role or tool is called.
        for own in [
            "2026-11-22-comms-slack-post-7c41e0.md",
            "2026-11-22-conflict-manager-write_file-a1b2c3.md",
            "2026-11-22-ops-tracker-resolve-conflict-0a0b0c.md",
            "2026-11-22-ops-sync-conflict-x-0a0b0c.md",
        ] {
            assert!(is_tabd_name(own), "{own}");
            assert!(!is_conflict_copy(own), "{own}");
        }
        assert!(!is_conflict_copy("my own note about a conflict.md"));
    }
}
