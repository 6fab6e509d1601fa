//! What a hook's ending means, by Claude Code's contract where it has one (docs/hooks.md): exit 0
//! goes on, exit 2 blocks with stderr as the reason; on stdout, JSON in Claude Code's shape
//! (`hookSpecificOutput`: `permissionDecision`, `permissionDecisionReason`, `updatedInput`,
//! `additionalContext`). Unlike Claude Code, a pre_tool hook fails closed: any other exit, a
//! crash, stdout that is not that JSON, or too much of it, denies the call.

use serde_json::Value;

use super::child::Ended;

/// The most of a hook's words a model or a daily line is given (one line, made inert).
pub const MAX_SAID: usize = 1000;

/// What a pre_tool hook decided.
#[derive(Debug, PartialEq)]
pub enum PreTool {
    /// Go on, with these arguments instead when `Some`.
    Allow(Option<Value>),
    /// Blocked: exit 2 (its stderr), or `permissionDecision: "deny"` (its reason). `None`: it
    /// gave none.
    Deny(Option<String>),
}

/// Why a hook's ending is not an answer: the call it was asked about is denied (pre_tool), or
/// its line is left out (post_tool); a daily line says which.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum NoAnswer {
    #[error("it exited with {status}{}", said(.stderr))]
    Exited { status: String, stderr: String },
    #[error("it wrote more than {} KiB to stdout", super::child::MAX_STDOUT / 1024)]
    TooMuch,
    #[error("its stdout is not a JSON object ({0})")]
    NotJson(String),
    #[error("its `{0}` is not what Claude Code's hook contract puts there")]
    Misshapen(&'static str),
    #[error("it answered `permissionDecision: \"ask\"`, which tabd does not take (a role's `approve` asks the person)")]
    Ask,
}

/// ` — "what it said"`, or nothing.
fn said(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" — \"{stderr}\"")
    }
}

/// Text a hook wrote, as one inert line: no line ends, no control characters or escape sequences,
/// at most `MAX_SAID` characters.
pub fn inert(bytes: &[u8]) -> String {
    let text = crate::base::text::one_line(&String::from_utf8_lossy(bytes), MAX_SAID);
    crate::base::text::for_terminal(&text).into_owned()
}

/// How it exited, in words (`exit status 1`, `signal 9`).
fn status_of(e: &Ended) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (e.status.code(), e.status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => "an unknown status".into(),
    }
}

fn failed(e: &Ended) -> NoAnswer {
    NoAnswer::Exited {
        status: status_of(e),
        stderr: inert(&e.stderr),
    }
}

/// `hookSpecificOutput` of stdout, when stdout is a JSON object; `Ok(None)` for empty stdout.
fn specific(e: &Ended) -> Result<Option<serde_json::Map<String, Value>>, NoAnswer> {
    if e.stdout_over {
        return Err(NoAnswer::TooMuch);
    }
    let text = String::from_utf8_lossy(&e.stdout);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(&text).map_err(|err| NoAnswer::NotJson(err.to_string()))?;
    let Value::Object(mut top) = value else {
        return Err(NoAnswer::NotJson("it is JSON, but not an object".into()));
    };
    match top.remove("hookSpecificOutput") {
        None => Ok(Some(serde_json::Map::new())),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(NoAnswer::Misshapen("hookSpecificOutput")),
    }
}

/// A pre_tool hook's ending: exit 0 allows (its JSON may replace the arguments or deny), exit 2
/// denies with its stderr; anything else is no answer, and the call is denied.
pub fn pre_tool(e: &Ended) -> Result<PreTool, NoAnswer> {
    match e.status.code() {
        Some(0) => {}
        Some(2) => return Ok(PreTool::Deny(Some(inert(&e.stderr)).filter(|s| !s.is_empty()))),
        _ => return Err(failed(e)),
    }
    let Some(out) = specific(e)? else {
        return Ok(PreTool::Allow(None));
    };
    let reason = match out.get("permissionDecisionReason") {
        None => None,
        Some(Value::String(s)) => Some(inert(s.as_bytes())).filter(|s| !s.is_empty()),
        Some(_) => return Err(NoAnswer::Misshapen("permissionDecisionReason")),
    };
    match out.get("permissionDecision") {
        None => {}
        Some(Value::String(d)) if d == "allow" => {}
        Some(Value::String(d)) if d == "deny" => return Ok(PreTool::Deny(reason)),
        Some(Value::String(d)) if d == "ask" => return Err(NoAnswer::Ask),
        Some(_) => return Err(NoAnswer::Misshapen("permissionDecision")),
    }
    match out.get("updatedInput") {
        None => Ok(PreTool::Allow(None)),
        Some(v @ Value::Object(_)) => Ok(PreTool::Allow(Some(v.clone()))),
        Some(_) => Err(NoAnswer::Misshapen("updatedInput")),
    }
}

/// A post_tool hook's ending: the line it adds for the model, if any — its JSON's
/// `additionalContext`, or its plain stdout, on exit 0; its stderr on exit 2 (Claude Code shows
/// that to the model too).
pub fn post_tool(e: &Ended) -> Result<Option<String>, NoAnswer> {
    let nonempty = |s: String| Some(s).filter(|s| !s.is_empty());
    match e.status.code() {
        Some(0) => {}
        Some(2) => return Ok(nonempty(inert(&e.stderr))),
        _ => return Err(failed(e)),
    }
    match specific(e) {
        Ok(None) => Ok(None),
        Ok(Some(out)) => match out.get("additionalContext") {
            None => Ok(None),
            Some(Value::String(s)) => Ok(nonempty(inert(s.as_bytes()))),
            Some(_) => Err(NoAnswer::Misshapen("additionalContext")),
        },
        // Plain words: the line itself.
        Err(NoAnswer::NotJson(_)) => Ok(nonempty(inert(&e.stdout))),
        Err(other) => Err(other),
    }
}

/// A run_end hook's ending: exit 0, or why not.
pub fn run_end(e: &Ended) -> Result<(), NoAnswer> {
    match e.status.code() {
        Some(0) => Ok(()),
        _ => Err(failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn ended(code: i32, stdout: &str, stderr: &str) -> Ended {
        Ended {
            status: std::process::ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stdout_over: false,
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_pre_tool_answer_reads_as_claude_codes_contract_and_fails_closed() {
        assert_eq!(pre_tool(&ended(0, "", "")), Ok(PreTool::Allow(None)));
        assert_eq!(
            pre_tool(&ended(2, "", "no\x1b[31m writes\nthere")),
            Ok(PreTool::Deny(Some("no\u{fffd}[31m writes there".into())))
        );
        let replaced =
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"path":"a.md"}}}"#;
        assert_eq!(
            pre_tool(&ended(0, replaced, "")),
            Ok(PreTool::Allow(Some(serde_json::json!({"path": "a.md"}))))
        );
        let denied =
            r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"not today"}}"#;
        assert_eq!(
            pre_tool(&ended(0, denied, "")),
            Ok(PreTool::Deny(Some("not today".into())))
        );
        assert!(matches!(
            pre_tool(&ended(1, "", "boom")),
            Err(NoAnswer::Exited { .. })
        ));
        assert!(matches!(
            pre_tool(&ended(0, "ok then", "")),
            Err(NoAnswer::NotJson(_))
        ));
        let ask = r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#;
        assert_eq!(pre_tool(&ended(0, ask, "")), Err(NoAnswer::Ask));
        let mut over = ended(0, "{}", "");
        over.stdout_over = true;
        assert_eq!(pre_tool(&over), Err(NoAnswer::TooMuch));
    }

    #[test]
    fn a_post_tool_line_is_its_context_or_its_words() {
        let json = r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint: ok"}}"#;
        assert_eq!(post_tool(&ended(0, json, "")), Ok(Some("lint: ok".into())));
        assert_eq!(
            post_tool(&ended(0, "plain\nwords", "")),
            Ok(Some("plain words".into()))
        );
        assert_eq!(post_tool(&ended(0, "", "")), Ok(None));
        assert_eq!(post_tool(&ended(2, "", "fix it")), Ok(Some("fix it".into())));
        assert!(post_tool(&ended(3, "", "")).is_err());
    }
}
