//! The approval note (DESIGN §15, contract): frontmatter a person flips in Obsidian's Properties
//! editor, the model's reason, and the arguments as an editable JSON block.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use crate::frontmatter;
use crate::state::approvals::Approval;

/// What the note says, as tabd reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub id: Option<String>,
    /// The `status` value, lowercased; `None` when missing or not text.
    pub status: Option<String>,
    /// The arguments as they now stand: `Err` when the block is missing or not JSON.
    pub args: Result<Value, String>,
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
}

/// The note's file name: `YYYY-MM-DD-<role>-<tool>-<id>.md`, the tool's `/` as `-`.
pub fn file_name(created: DateTime<Utc>, tz: Tz, role: &str, tool: &str, id: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "{}-{role}-{tool}-{id}.md",
        created.with_timezone(&tz).format("%Y-%m-%d")
    )
}

pub fn render(n: &NewNote) -> String {
    let a = n.approval;
    let fields = [
        ("status", Value::from("pending")),
        ("role", Value::from(a.role.as_str())),
        ("tool", Value::from(a.tool.as_str())),
        ("risk", Value::from(a.risk.as_str())),
        ("run_id", Value::from(a.run_id.as_str())),
        ("created", Value::from(stamp(a.created))),
        ("expires", Value::from(stamp(a.expires))),
        ("id", Value::from(n.id)),
    ];
    let what = crate::runlog::one_line(n.description.lines().next().unwrap_or(""), 80);
    let title = if what.is_empty() {
        format!("{} asks to run {}", n.role_display, a.tool)
    } else {
        format!("{}: {}", n.role_display, what.trim_end_matches('.'))
    };
    let reason = if n.reason.trim().is_empty() {
        "(the model gave no reason)".to_string()
    } else {
        n.reason.trim().to_string()
    };
    let args = serde_json::to_string_pretty(n.args).unwrap_or_else(|_| n.args.to_string());
    let expires = a.expires.with_timezone(&n.tz).format("%Y-%m-%d %H:%M");
    format!(
        "{}# {title}\n\n\
         Set `status` to `approved` to run this call once, with the arguments below as they stand\n\
         then (you may edit them), or to `rejected`. Unanswered, it expires at {expires}.\n\n\
         **Why:** {reason}\n\n\
         **Tool:** `{}` ({} risk) — asked by the run `{}`, see [[{}]]\n\n\
         ## Arguments\n```json\n{args}\n```\n",
        frontmatter::render(&fields),
        a.tool,
        a.risk.as_str(),
        a.run_id,
        n.run_log.strip_suffix(".md").unwrap_or(n.run_log),
    )
}

/// An instant as the note shows it: `2026-11-22T09:00:04Z`.
pub(crate) fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Reads a note's id, status and arguments. `Err` when its frontmatter cannot be read at all.
pub fn read(text: &str) -> Result<Read, String> {
    let split = frontmatter::split(text).map_err(|e| e.to_string())?;
    let Some(fm) = split.frontmatter else {
        return Err("it has no frontmatter (status, id, …)".into());
    };
    let text_of = |k: &str| match fm.get(k).map(|e| &e.value) {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Read {
        id: text_of("id"),
        status: text_of("status").map(|s| s.to_lowercase()),
        args: arguments(&text[split.body_offset..]),
    })
}

/// The first fenced code block under the `## Arguments` heading, parsed as JSON.
fn arguments(body: &str) -> Result<Value, String> {
    use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
    let mut in_heading = false;
    let mut heading = String::new();
    let mut under_arguments = false;
    let mut in_code = false;
    let mut code = String::new();
    for event in Parser::new(body) {
        match event {
            Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H2 => {
                in_heading = true;
                heading.clear();
            }
            Event::End(TagEnd::Heading(level)) if level <= HeadingLevel::H2 => {
                in_heading = false;
                under_arguments = heading.trim().eq_ignore_ascii_case("arguments");
            }
            Event::Text(t) if in_heading => heading.push_str(&t),
            Event::Start(Tag::CodeBlock(kind)) if under_arguments => {
                let _ = matches!(kind, CodeBlockKind::Fenced(_));
                in_code = true;
            }
            Event::Text(t) if in_code => code.push_str(&t),
            Event::End(TagEnd::CodeBlock) if in_code => {
                return serde_json::from_str(&code)
                    .map_err(|e| format!("the arguments are not valid JSON ({e})"));
            }
            _ => {}
        }
    }
    Err("there is no ```json block under `## Arguments`".into())
}

/// `text` with its frontmatter `status` set to `status` (every other key kept as the person left
/// it) and `append` added at the end.
pub fn update(text: &str, status: &str, append: &str) -> Result<String, String> {
    let split = frontmatter::split(text).map_err(|e| e.to_string())?;
    let fm = split.frontmatter.unwrap_or_default();
    let mut fields: Vec<(&str, Value)> = fm
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.clone()))
        .collect();
    match fields.iter_mut().find(|(k, _)| *k == "status") {
        Some(f) => f.1 = Value::from(status),
        None => fields.insert(0, ("status", Value::from(status))),
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

/// Sync tools keep both sides of a conflict as a copy; only the note itself is acted on.
pub fn is_conflict_copy(name: &str) -> bool {
    let lower = name.to_lowercase();
    [
        "sync-conflict",
        "conflicted copy",
        "(conflict",
        ".conflict",
        "conflict-",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::Phase;
    use crate::calls::Risk;
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
            phase: Phase::Pending,
            decided: None,
            outcome: None,
            reported: false,
            executions: 0,
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
        assert!(text.contains("**Why:** The client asked for a status."));
        assert!(text.contains("[[agent/runs/2026-11-22]]"));
        let r = read(&text).unwrap();
        assert_eq!(r.id.as_deref(), Some("7c41e0"));
        assert_eq!(r.status.as_deref(), Some("pending"));
        assert_eq!(r.args.unwrap(), args, "the arguments survive the note");
    }

    #[test]
    fn status_updates_keep_the_persons_edits_and_append() {
        let text = rendered(&json!({"a": 1}), "");
        assert!(text.contains("(the model gave no reason)"));
        let edited = text
            .replace("status: pending", "status: Approved")
            .replace("\"a\": 1", "\"a\": 2");
        let r = read(&edited).unwrap();
        assert_eq!(r.status.as_deref(), Some("approved"), "case does not matter");
        assert_eq!(r.args.unwrap(), json!({"a": 2}), "edited arguments are read");
        let done = update(&edited, "done", "## Result\nok\n").unwrap();
        let r = read(&done).unwrap();
        assert_eq!(r.status.as_deref(), Some("done"));
        assert_eq!(r.args.unwrap(), json!({"a": 2}));
        assert!(done.ends_with("\n\n## Result\nok\n"), "{done}");
        assert_eq!(r.id.as_deref(), Some("7c41e0"));
    }

    #[test]
    fn broken_arguments_and_frontmatter_are_reasons_not_panics() {
        let text = rendered(&json!({"a": 1}), "r").replace("\"a\": 1", "\"a\": ");
        let r = read(&text).unwrap();
        assert!(r.args.unwrap_err().contains("not valid JSON"));
        let no_block = "---\nstatus: approved\nid: x\n---\n# T\n## Arguments\nnone\n";
        assert!(read(no_block)
            .unwrap()
            .args
            .unwrap_err()
            .contains("no ```json block"));
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
        assert!(is_conflict_copy(
            "2026-11-22-comms-x-1.sync-conflict-20261122-090000-ABC.md"
        ));
        assert!(is_conflict_copy("note (conflicted copy 2026-11-22).md"));
        assert!(!is_conflict_copy("2026-11-22-comms-slack-post-7c41e0.md"));
    }
}
