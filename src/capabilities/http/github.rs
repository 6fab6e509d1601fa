//! A GitHub event as a person reads it: the event and its action, the repository, a title, a
//! link, who sent it and the text it carries. Read from the payload's documented fields
//! (docs.github.com, "Webhook events and payloads"); a field that is missing or of another type
//! is left out, never guessed. Nothing here is Markdown yet: `note` renders it.

use serde_json::Value;

/// What a note says of one GitHub event.
#[derive(Debug, Default, PartialEq)]
pub struct Event {
    /// `issues`, `push`, … (the `X-GitHub-Event` header, checked plain).
    pub name: String,
    /// `opened`, `closed`, … when the payload has one.
    pub action: Option<String>,
    pub repository: Option<String>,
    pub title: Option<String>,
    /// An `http(s)://` link to what happened.
    pub link: Option<String>,
    pub sender: Option<String>,
    /// The text it carries (an issue's or comment's body, a push's commits), as written.
    pub body: Option<String>,
}

/// The objects an event is about, most specific first: a comment on an issue is about the
/// comment's text, and the issue gives the title.
const SUBJECTS: &[&str] = &[
    "pull_request",
    "issue",
    "discussion",
    "release",
    "check_run",
    "check_suite",
    "workflow_run",
    "workflow_job",
    "deployment",
    "package",
    "milestone",
    "project",
];

/// The objects whose text is the event's own, before the subject's.
const TEXTS: &[&str] = &["comment", "review", "answer"];

/// Most commits a push note lists (GitHub sends at most 20 in a payload).
const MAX_COMMITS: usize = 50;

/// `name` when it can be a GitHub event's name: 1 to 64 lowercase letters, digits and `_`.
pub fn event_name(name: &str) -> Option<&str> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(name)
}

/// The readable parts of event `name`'s `payload`.
pub fn read(name: &str, payload: &Value) -> Event {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let subject = SUBJECTS
        .iter()
        .find_map(|k| payload.get(*k).filter(|v| v.is_object()));
    let own = TEXTS
        .iter()
        .find_map(|k| payload.get(*k).filter(|v| v.is_object()));
    let mut event = Event {
        name: name.to_string(),
        action: text(payload, "action"),
        repository: payload.get("repository").and_then(|r| text(r, "full_name")),
        sender: payload.get("sender").and_then(|s| text(s, "login")),
        ..Event::default()
    };
    if name == "push" {
        push(payload, &mut event);
    } else if name == "ping" {
        event.body = text(payload, "zen");
    } else {
        event.title = subject.and_then(|s| {
            text(s, "title")
                .or_else(|| text(s, "name"))
                .or_else(|| text(s, "tag_name"))
        });
        event.body = own
            .and_then(|o| text(o, "body"))
            .or_else(|| subject.and_then(|s| text(s, "body")));
        event.link = own
            .and_then(|o| text(o, "html_url"))
            .or_else(|| subject.and_then(|s| text(s, "html_url")));
    }
    if event.link.is_none() {
        event.link = payload.get("repository").and_then(|r| text(r, "html_url"));
    }
    event.link = event.link.filter(|l| is_web_link(l));
    event
}

/// A push: its branch and commits.
fn push(payload: &Value, event: &mut Event) {
    let commits: Vec<&Value> = payload
        .get("commits")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let branch = payload
        .get("ref")
        .and_then(Value::as_str)
        .map(|r| r.strip_prefix("refs/heads/").unwrap_or(r).to_string());
    event.title = branch.map(|b| match commits.len() {
        1 => format!("1 commit to {b}"),
        n => format!("{n} commits to {b}"),
    });
    event.link = payload.get("compare").and_then(Value::as_str).map(str::to_string);
    let lines: Vec<String> = commits
        .iter()
        .take(MAX_COMMITS)
        .map(|c| {
            let id: String = c
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .chars()
                .take(7)
                .collect();
            let message = c
                .get("message")
                .and_then(Value::as_str)
                .and_then(|m| m.lines().next())
                .unwrap_or_default();
            let author = c
                .get("author")
                .and_then(|a| a.get("name"))
                .and_then(Value::as_str)
                .map(|a| format!(" ({a})"))
                .unwrap_or_default();
            format!("- {id} {message}{author}")
        })
        .collect();
    event.body = (!lines.is_empty()).then(|| lines.join("\n"));
}

/// A link a note may show: `https://` or `http://`, on one line, no spaces.
fn is_web_link(link: &str) -> bool {
    (link.starts_with("https://") || link.starts_with("http://"))
        && !link.chars().any(|c| c.is_whitespace() || c.is_control())
        && link.len() <= 2048
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_issue_a_comment_and_a_push_read_as_a_person_would() {
        let issue = json!({
            "action": "opened",
            "issue": {"title": "Login fails", "html_url": "https://github.com/o/r/issues/7", "body": "Steps:\n1. log in"},
            "repository": {"full_name": "o/r", "html_url": "https://github.com/o/r"},
            "sender": {"login": "ana"}
        });
        assert_eq!(
            read("issues", &issue),
            Event {
                name: "issues".into(),
                action: Some("opened".into()),
                repository: Some("o/r".into()),
                title: Some("Login fails".into()),
                link: Some("https://github.com/o/r/issues/7".into()),
                sender: Some("ana".into()),
                body: Some("Steps:\n1. log in".into()),
            }
        );
        let comment = json!({
            "action": "created",
            "issue": {"title": "Login fails", "html_url": "https://github.com/o/r/issues/7", "body": "old"},
            "comment": {"body": "Still broken", "html_url": "https://github.com/o/r/issues/7#c1"},
        });
        let e = read("issue_comment", &comment);
        assert_eq!(e.title.as_deref(), Some("Login fails"));
        assert_eq!(e.body.as_deref(), Some("Still broken"));
        assert_eq!(e.link.as_deref(), Some("https://github.com/o/r/issues/7#c1"));
        let push = json!({
            "ref": "refs/heads/main",
            "compare": "https://github.com/o/r/compare/a...b",
            "commits": [
                {"id": "0123456789abcdef", "message": "Fix login\n\nlong text", "author": {"name": "Ana"}},
                {"id": "fedcba9876543210", "message": "Docs"}
            ],
            "repository": {"full_name": "o/r"}
        });
        let e = read("push", &push);
        assert_eq!(e.title.as_deref(), Some("2 commits to main"));
        assert_eq!(e.link.as_deref(), Some("https://github.com/o/r/compare/a...b"));
        assert_eq!(
            e.body.as_deref(),
            Some("- 0123456 Fix login (Ana)\n- fedcba9 Docs")
        );
    }

    #[test]
    fn odd_payloads_leave_fields_out() {
        let e = read("star", &json!({"repository": 5, "sender": {"login": 3}}));
        assert_eq!(
            e,
            Event {
                name: "star".into(),
                ..Event::default()
            }
        );
        let e = read(
            "issues",
            &json!({"issue": {"title": "x", "html_url": "javascript:alert(1)"}}),
        );
        assert_eq!(e.link, None, "only web links");
        assert_eq!(
            read("ping", &json!({"zen": "Keep it simple."})).body.as_deref(),
            Some("Keep it simple.")
        );
    }

    #[test]
    fn event_names_are_plain() {
        assert_eq!(event_name("pull_request_review"), Some("pull_request_review"));
        for bad in ["", "Push", "a b", "a-b", "`x`"] {
            assert_eq!(event_name(bad), None, "{bad}");
        }
    }
}
