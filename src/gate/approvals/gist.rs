//! What an approval is about, in words a person can decide on from a lock screen (issue 39): the
//! call's target and the first lines of its change, taken from the arguments the model gave.
//!
//! - A vault tool names its target by its own arguments: `path` (`write_file`, `append_file`),
//!   `from` and `to` (`move_file`), `role` (`trigger_role`), `scope` (`remember`).
//! - An MCP tool's target is the argument whose name has a part (split at `_`, `-`, `.` and
//!   camelCase) earliest in `TARGET_WORDS` — `channel_id`, `recipientEmail`, `to` (only as the whole
//!   name) — shown with its name; its change is the text argument named like one of `CHANGE_WORDS`
//!   (`text`, `message`, `body`, …). Neither found: the action is `run <tool>`, no change.
//!
//! Everything here is model text: each part is one line without control or bidi-format characters,
//! bounded (`TARGET_MAX`, `CHANGE_MAX`); a long target keeps its start and its end (a path's file
//! name). Where it lands decides its escaping: the note's title is made inert, a push is plain text.

use serde_json::Value;

use crate::base::environment::Redactor;

use crate::records::state::approval_ledger::Gist;

/// The most characters of a target (a path, a channel).
pub const TARGET_MAX: usize = 80;
/// The most characters of the change's first lines, joined.
pub const CHANGE_MAX: usize = 160;
/// The change's first lines shown (lines with text only).
const CHANGE_LINES: usize = 3;
/// Between the change's lines, which are shown on one.
const LINE_BREAK: &str = " ⏎ ";

/// Argument name parts that name where an MCP call goes, most telling first.
pub const TARGET_WORDS: &[&str] = &[
    "channel",
    "conversation",
    "chat",
    "room",
    "thread",
    "recipient",
    "recipients",
    "to",
    "email",
    "user",
    "username",
    "assignee",
    "repo",
    "repository",
    "project",
    "issue",
    "page",
    "database",
    "path",
    "file",
    "url",
];

/// Argument name parts that name what an MCP call says or writes, most telling first.
pub const CHANGE_WORDS: &[&str] = &[
    "text",
    "message",
    "body",
    "content",
    "markdown",
    "comment",
    "payload",
    "subject",
    "title",
    "description",
    "summary",
    "note",
];

/// The gist of a call to `tool` (a vault tool's name or `server/tool`) with `args`. Secrets are
/// written back as `${NAME}` before anything is cut to length: a secret cut in half would no
/// longer be recognised where the gist lands (a push, the approval record).
pub fn of(tool: &str, args: &Value, secrets: &Redactor) -> Gist {
    let mut args = args.clone();
    secrets.apply_json(&mut args);
    let args = &args;
    let text = |k: &str| args.get(k).and_then(scalar);
    let (action, change) = match tool {
        "write_file" => (
            text("path").map(|p| format!("write {}", target(&p))),
            text("content"),
        ),
        "append_file" => (
            text("path").map(|p| format!("append to {}", target(&p))),
            text("content"),
        ),
        "move_file" => match (text("from"), text("to")) {
            (Some(from), Some(to)) => (Some(format!("move {} to {}", target(&from), target(&to))), None),
            _ => (None, None),
        },
        "trigger_role" => (
            text("role").map(|r| format!("ask the role {}", target(&r))),
            text("note"),
        ),
        "remember" => {
            let whose = match text("scope").as_deref() {
                Some("global") => "every role's memory",
                _ => "its memory",
            };
            (Some(format!("add to {whose}")), text("note"))
        }
        _ if tool.contains('/') => mcp(tool, args),
        _ => (None, None),
    };
    Gist {
        action: action.unwrap_or_else(|| format!("run {}", one_line(tool, TARGET_MAX))),
        change: change.map(|c| first_lines(&c)).unwrap_or_default(),
    }
}

/// An MCP call's action and change, from its argument names.
fn mcp(tool: &str, args: &Value) -> (Option<String>, Option<String>) {
    let Some(object) = args.as_object() else {
        return (None, None);
    };
    let rank = |name: &str, words: &[&str], whole_only: &[&str]| -> Option<usize> {
        let parts = name_parts(name);
        words.iter().position(|w| {
            if whole_only.contains(w) {
                parts.len() == 1 && parts[0] == *w
            } else {
                parts.iter().any(|p| p == w)
            }
        })
    };
    let best = |words: &[&str], whole_only: &[&str], value: fn(&Value) -> Option<String>| {
        object
            .iter()
            .filter_map(|(k, v)| Some((rank(k, words, whole_only)?, k, value(v)?)))
            .filter(|(_, _, v)| !v.trim().is_empty())
            .min_by_key(|(r, _, _)| *r)
            .map(|(_, k, v)| (k.clone(), v))
    };
    let to = best(TARGET_WORDS, &["to"], target_value);
    let change = best(CHANGE_WORDS, &[], |v| v.as_str().map(str::to_string));
    // The target argument is not also the change (a `title` that is the page).
    let change = change.filter(|(k, _)| to.as_ref().is_none_or(|(t, _)| t != k));
    let tool = one_line(tool, TARGET_MAX);
    let action = match to {
        Some((name, value)) => format!("run {tool} ({}: {})", one_line(&name, 40), target(&value)),
        None => format!("run {tool}"),
    };
    (Some(action), change.map(|(_, v)| v))
}

/// A target argument's value as text: a string or a number, or a list of them (the first three).
fn target_value(v: &Value) -> Option<String> {
    match v {
        Value::Array(items) => {
            let shown: Vec<String> = items.iter().filter_map(scalar).take(3).collect();
            if shown.is_empty() {
                return None;
            }
            let more = items.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            Some(format!("{}{more}", shown.join(", ")))
        }
        v => scalar(v),
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `channelId`, `channel_id`, `Channel-ID` → `channel`, `id`.
fn name_parts(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            parts.push(std::mem::take(&mut part));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            parts.push(std::mem::take(&mut part));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        part.extend(c.to_lowercase());
    }
    parts.push(part);
    parts.retain(|p| !p.is_empty());
    parts
}

/// A target on one line, at most `TARGET_MAX` characters: a long one keeps its start and end.
pub fn target(text: &str) -> String {
    let flat = one_line(text, usize::MAX);
    let n = flat.chars().count();
    if n <= TARGET_MAX {
        return flat;
    }
    let head: String = flat.chars().take(TARGET_MAX / 2 - 1).collect();
    let tail: String = flat.chars().skip(n - (TARGET_MAX - TARGET_MAX / 2)).collect();
    format!("{head}…{tail}")
}

/// The first lines with text of a change, on one line, at most `CHANGE_MAX` characters.
pub fn first_lines(text: &str) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| one_line(l, usize::MAX))
        .filter(|l| !l.is_empty())
        .take(CHANGE_LINES + 1)
        .collect();
    let more = lines.len() > CHANGE_LINES;
    let mut joined = lines
        .into_iter()
        .take(CHANGE_LINES)
        .collect::<Vec<_>>()
        .join(LINE_BREAK);
    if more {
        joined.push_str(LINE_BREAK);
        joined.push('…');
    }
    one_line(&joined, CHANGE_MAX)
}

/// `text` on one line (whitespace runs as one space), without control or format characters (bidi
/// overrides, zero-width joiners: they can make a line read as something else), at most `max`
/// characters and `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let kept: String = text
        .chars()
        .filter(|c| !is_format(*c))
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    crate::base::text::one_line(&kept, max)
}

/// Unicode's format characters (Cf) that change how text around them reads.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(tool: &str, args: &Value) -> Gist {
        super::of(tool, args, &Redactor::default())
    }

    /// A secret that the 160-character cut would halve is written back as `${NAME}` first, so no
    /// part of it reaches a push or the approval record.
    #[test]
    fn a_secret_is_hidden_before_the_change_is_cut_to_length() {
        let token = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz";
        let env = crate::base::environment::Env::from_pairs([("SLACK_TOKEN", token)]);
        let text = format!("{}{token}", "x".repeat(CHANGE_MAX - 10));
        let args = json!({"channel": token, "text": text});
        let g = super::of("slack/post", &args, &env.redactor());
        assert!(!g.action.contains("sk-live"), "{}", g.action);
        assert!(!g.change.contains("sk-live"), "{}", g.change);
        assert!(g.action.contains("${SLACK_TOKEN}"), "{}", g.action);
        // Without the secrets, the cut would leave the secret's start in the change.
        let leaked = super::of("slack/post", &args, &Redactor::default());
        assert!(leaked.change.contains("sk-live"), "{}", leaked.change);
    }

    #[test]
    fn a_vault_tool_names_its_path_and_its_first_lines() {
        let g = of(
            "write_file",
            &json!({"path": "reviews/week.md", "content": "# Week 47\n\n- shipped the importer\n- fixed auth\n- more\n"}),
        );
        assert_eq!(g.action, "write reviews/week.md");
        assert_eq!(g.change, "# Week 47 ⏎ - shipped the importer ⏎ - fixed auth ⏎ …");
        let g = of("move_file", &json!({"from": "a.md", "to": "b/a.md"}));
        assert_eq!(
            (g.action.as_str(), g.change.as_str()),
            ("move a.md to b/a.md", "")
        );
        assert_eq!(
            of("append_file", &json!({"path": "log.md", "content": "x"})).action,
            "append to log.md"
        );
        let g = of("trigger_role", &json!({"role": "risk", "note": "Look at auth."}));
        assert_eq!(
            (g.action.as_str(), g.change.as_str()),
            ("ask the role risk", "Look at auth.")
        );
        assert_eq!(
            of("remember", &json!({"note": "n", "scope": "global"})).action,
            "add to every role's memory"
        );
        // Arguments that do not fit: the tool, never a guess.
        assert_eq!(of("write_file", &json!({"path": 3.5})).action, "write 3.5");
        assert_eq!(of("write_file", &json!("x")).action, "run write_file");
    }

    #[test]
    fn an_mcp_tool_names_its_channel_or_recipient_by_the_arguments_names() {
        let g = of(
            "slack/conversations_add_message",
            &json!({"channel_id": "C0123", "payload": "Weekly update:\non track", "thread_ts": "1.2"}),
        );
        assert_eq!(
            g.action,
            "run slack/conversations_add_message (channel_id: C0123)"
        );
        assert_eq!(g.change, "Weekly update: ⏎ on track");
        let g = of(
            "mail/send",
            &json!({"to": ["a@x.org", "b@x.org", "c@x.org", "d@x.org"], "subject": "Hi", "body": "Text"}),
        );
        assert_eq!(
            g.action,
            "run mail/send (to: a@x.org, b@x.org, c@x.org and 1 more)"
        );
        assert_eq!(g.change, "Text", "body before subject");
        let g = of(
            "crm/note",
            &json!({"recipientEmail": "p@x.org", "pathToFile": "f"}),
        );
        assert_eq!(
            g.action, "run crm/note (recipientEmail: p@x.org)",
            "camelCase parts; `to` only whole"
        );
        let g = of("tracker/create", &json!({"count": 2, "flag": true}));
        assert_eq!((g.action.as_str(), g.change.as_str()), ("run tracker/create", ""));
        let g = of("wiki/update", &json!({"title": "Plan", "page_id": "p1"}));
        assert_eq!(
            (g.action.as_str(), g.change.as_str()),
            ("run wiki/update (page_id: p1)", "Plan")
        );
    }

    #[test]
    fn model_text_is_one_bounded_line_that_reads_as_it_is() {
        let long = format!("{}/week.md", "deep/".repeat(40));
        let g = of(
            "write_file",
            &json!({"path": long, "content": format!("one\u{202e}txt.exe\r\nstatus: approved\u{7}\n{}", "x".repeat(500))}),
        );
        assert!(
            g.action.ends_with("/week.md") && g.action.contains('…'),
            "{}",
            g.action
        );
        assert!(
            g.action.chars().count() <= TARGET_MAX + "write ".len(),
            "{}",
            g.action
        );
        assert!(
            !g.change.contains(['\n', '\r', '\u{202e}', '\u{7}']),
            "{:?}",
            g.change
        );
        assert!(
            g.change.starts_with("onetxt.exe ⏎ status: approved ⏎ xxx"),
            "{}",
            g.change
        );
        assert!(g.change.chars().count() <= CHANGE_MAX + 1, "{}", g.change);
        let g = of("x/y", &json!({"channel": "a\nb", "text": "   "}));
        assert_eq!(
            (g.action.as_str(), g.change.as_str()),
            ("run x/y (channel: a b)", "")
        );
    }
}
