//! Long calls as Tasks (docs/spec.md §29): a server may answer a `tools/call` with a task handle
//! instead of the result, and tabd polls the task until it ends — on both protocol lines:
//!
//! - 2026-07-28, the `io.modelcontextprotocol/tasks` extension (SEP-2663): the server decides;
//!   the answer carries `resultType: "task"`, `tasks/get` returns the result once `completed`;
//! - 2025-11-25, the experimental Tasks (SEP-1686): a tool that declares
//!   `execution.taskSupport: "required"` can only be called with `task: {ttl}`; `tasks/get` says
//!   the state, `tasks/result` gives the result.
//!
//! rmcp 3.11 types the first and knows nothing of the second, and it drops a tool's `execution`
//! when it lists tools; so every task request here is one of rmcp's raw requests, its answer read
//! as plain JSON under both lines' field names. A 2025 tool that needs a task is learnt from its
//! refusal of a plain call (the server's -32601, "requires task augmentation"): refused, it ran
//! nothing, and it is called again as a task.
//!
//! Everything a server says of a task is input (the server is not trusted): the id is bounded, the
//! poll interval clamped, the status text made inert before it is shown, and a state tabd does
//! not know ends the wait (the task is cancelled).

use std::time::Duration;

use rmcp::model::{CallToolResult, ClientRequest, CustomRequest, ServerResult};
use rmcp::service::{Peer, ServiceError};
use rmcp::RoleClient;
use serde_json::{json, Map, Value};

/// The longest task id tabd keeps (ids are opaque handles; a longer one is no handle).
pub const MAX_ID_CHARS: usize = 256;

/// A server's poll interval, clamped: never more often than this…
pub const MIN_POLL: Duration = Duration::from_secs(1);
/// …nor less often than this (a server asking for an hour between polls is not obeyed).
pub const MAX_POLL: Duration = Duration::from_secs(60);
/// When a server suggests none.
pub const DEFAULT_POLL: Duration = Duration::from_secs(2);

/// The most of a status message shown (one line).
const MAX_STATUS_CHARS: usize = 160;

/// How long a task a 2025 server keeps after it ends, asked for in `task.ttl` (ms): an hour past
/// the longest wait is ample for `tasks/result`.
const LEGACY_TTL_MS: u64 = 24 * 3600 * 1000;

/// Which Tasks a handle is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    /// 2025-11-25 experimental Tasks (SEP-1686): the result comes from `tasks/result`.
    Legacy,
    /// The 2026-07-28 extension (SEP-2663): the result comes with `tasks/get`.
    Extension,
}

/// A task a server started for a call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Handle {
    pub id: String,
    pub flavour: Flavour,
    /// The interval to poll at, clamped.
    #[serde(with = "millis")]
    pub poll: Duration,
}

/// Where a task is, as the last `tasks/get` said.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Still running (or waiting for input tabd does not give): poll again after `poll`.
    Working {
        poll: Duration,
        /// Its status message, inert (one line, no Markdown structure, no controls).
        status: Option<String>,
        input_required: bool,
    },
    /// Done: its result (`None` on the 2025 line: ask `tasks/result`).
    Completed(Option<Box<CallToolResult>>),
    /// The server says it failed: why, inert.
    Failed(String),
    /// The server says it was cancelled.
    Cancelled,
}

/// What a server said of a task that is no task tabd can follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Garbage {
    #[error("its task id is missing, empty, longer than {MAX_ID_CHARS} characters or not plain text")]
    Id,
    #[error("it answered with a task state tabd does not know ({0})")]
    Status(String),
    #[error("its task answer is not a JSON object")]
    NotAnObject,
    #[error("its task result is not a tool result ({0})")]
    Result(String),
}

/// The handle in a `tools/call` answer, if the server started a task (`None`: a plain result).
pub fn handle_of(answer: &Value) -> Result<Option<Handle>, Garbage> {
    let Some(obj) = answer.as_object() else {
        return Err(Garbage::NotAnObject);
    };
    // 2026-07-28: `resultType: "task"` and the task's fields at the top.
    if obj.get("resultType").and_then(Value::as_str) == Some("task") {
        return handle_in(obj, Flavour::Extension).map(Some);
    }
    // 2025-11-25: `{task: {taskId, status, pollInterval, …}}`, and nothing of a tool result.
    let is_result = ["content", "structuredContent", "isError"]
        .iter()
        .any(|k| obj.contains_key(*k));
    match obj.get("task") {
        Some(Value::Object(task)) if !is_result => handle_in(task, Flavour::Legacy).map(Some),
        _ => Ok(None),
    }
}

fn handle_in(task: &Map<String, Value>, flavour: Flavour) -> Result<Handle, Garbage> {
    let id = task
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|id| id_is_plain(id))
        .ok_or(Garbage::Id)?;
    Ok(Handle {
        id: id.to_string(),
        flavour,
        poll: poll_of(task),
    })
}

/// A task id tabd keeps: non-empty, bounded, printable (it goes into records and requests).
fn id_is_plain(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && !id.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// The poll interval a task asks for (`pollIntervalMs` in 2026, `pollInterval` in 2025),
/// clamped to `MIN_POLL..=MAX_POLL`.
pub fn poll_of(task: &Map<String, Value>) -> Duration {
    task.get("pollIntervalMs")
        .or_else(|| task.get("pollInterval"))
        .and_then(Value::as_u64)
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .clamp(MIN_POLL, MAX_POLL)
}

/// A server's status text as tabd shows it: one line, bounded, inert in a note.
pub fn inert(text: &str) -> String {
    crate::base::text::for_note(&crate::base::text::one_line(text, MAX_STATUS_CHARS))
}

/// The state in a `tasks/get` answer.
pub fn state_of(answer: &Value) -> Result<State, Garbage> {
    let Some(obj) = answer.as_object() else {
        return Err(Garbage::NotAnObject);
    };
    let status_text = obj
        .get("statusMessage")
        .and_then(Value::as_str)
        .map(inert)
        .filter(|s| !s.is_empty());
    let status = obj.get("status").and_then(Value::as_str).unwrap_or("");
    Ok(match status {
        "working" | "input_required" => State::Working {
            poll: poll_of(obj),
            status: status_text,
            input_required: status == "input_required",
        },
        "completed" => match obj.get("result") {
            Some(r) => State::Completed(Some(Box::new(result_of(r)?))),
            None => State::Completed(None),
        },
        "failed" => {
            let why = obj
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(inert)
                .or(status_text)
                .unwrap_or_else(|| "no reason given".into());
            State::Failed(why)
        }
        "cancelled" => State::Cancelled,
        other => return Err(Garbage::Status(inert(other))),
    })
}

/// A tool result a task ended with.
pub fn result_of(v: &Value) -> Result<CallToolResult, Garbage> {
    serde_json::from_value(v.clone()).map_err(|e| Garbage::Result(inert(&e.to_string())))
}

/// A server's answer to a raw request as plain JSON (rmcp has typed it under whichever of its
/// shapes it fits; the fields tabd reads survive the round trip under one of their names).
fn plain(answer: ServerResult) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

/// Sends `method` with `params` as one of rmcp's raw requests; the answer as plain JSON.
async fn raw(peer: &Peer<RoleClient>, method: &str, params: Value) -> Result<Value, ServiceError> {
    let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    peer.send_request(request).await.map(plain)
}

/// `tools/call` as a 2025-11-25 task (SEP-1686): the answer as plain JSON.
pub async fn call_as_task(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Map<String, Value>,
) -> Result<Value, ServiceError> {
    let params = json!({"name": tool, "arguments": arguments, "task": {"ttl": LEGACY_TTL_MS}});
    raw(peer, "tools/call", params).await
}

/// Whether a plain call's refusal says the tool can only be called as a task (2025-11-25: the
/// server answers -32601 "requires task augmentation", as a JSON-RPC error or an error result).
pub fn needs_a_task(refusal: &str) -> bool {
    let r = refusal.to_ascii_lowercase();
    r.contains("-32601") && r.contains("task")
}

/// One `tasks/get`.
pub async fn get(peer: &Peer<RoleClient>, handle: &Handle) -> Result<Result<State, Garbage>, ServiceError> {
    let answer = raw(peer, "tasks/get", json!({"taskId": handle.id})).await?;
    Ok(state_of(&answer))
}

/// The result of a completed 2025 task (`tasks/result`).
pub async fn result(
    peer: &Peer<RoleClient>,
    handle: &Handle,
) -> Result<Result<CallToolResult, Garbage>, ServiceError> {
    let answer = raw(peer, "tasks/result", json!({"taskId": handle.id})).await?;
    Ok(result_of(&answer))
}

/// `tasks/cancel`: cooperative; what the server answers changes nothing for tabd.
pub async fn cancel(peer: &Peer<RoleClient>, handle: &Handle) {
    let sent = tokio::time::timeout(
        Duration::from_secs(5),
        raw(peer, "tasks/cancel", json!({"taskId": handle.id})),
    )
    .await;
    match sent {
        Ok(Ok(_)) => tracing::info!("cancelled MCP task {}", handle.id),
        Ok(Err(e)) => tracing::warn!("cancelling MCP task {}: {e}", handle.id),
        Err(_) => tracing::warn!("cancelling MCP task {}: no answer within 5 s", handle.id),
    }
}

/// Durations as milliseconds in records.
mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms: u64 = serde::Deserialize::deserialize(d)?;
        Ok(Duration::from_millis(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both lines' handles are read; a plain result is no handle.
    #[test]
    fn handles_of_both_lines_are_read_and_a_result_is_none() {
        let modern = json!({"resultType": "task", "taskId": "t-1", "status": "working",
                            "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null, "pollIntervalMs": 5000});
        let h = handle_of(&modern).unwrap().unwrap();
        assert_eq!(
            (h.id.as_str(), h.flavour, h.poll),
            ("t-1", Flavour::Extension, Duration::from_secs(5))
        );
        let legacy = json!({"task": {"taskId": "abc", "status": "working", "pollInterval": 1000}});
        let h = handle_of(&legacy).unwrap().unwrap();
        assert_eq!(
            (h.id.as_str(), h.flavour, h.poll),
            ("abc", Flavour::Legacy, Duration::from_secs(1))
        );
        let result = json!({"content": [{"type": "text", "text": "hi"}]});
        assert_eq!(handle_of(&result).unwrap(), None);
    }

    /// A server's task answers are input: an id that is no handle, a state nobody knows and an
    /// interval out of bounds are refused or clamped; status text is made inert.
    #[test]
    fn garbage_task_answers_are_refused_clamped_or_made_inert() {
        let long = "x".repeat(MAX_ID_CHARS + 1);
        for id in [json!(""), json!(long), json!(42), json!("a\nb"), json!("a b")] {
            let answer = json!({"resultType": "task", "taskId": id, "status": "working"});
            assert_eq!(handle_of(&answer), Err(Garbage::Id), "{answer}");
        }
        assert_eq!(handle_of(&json!("text")), Err(Garbage::NotAnObject));
        let fast = json!({"task": {"taskId": "a", "pollInterval": 0}});
        assert_eq!(handle_of(&fast).unwrap().unwrap().poll, MIN_POLL);
        let slow = json!({"task": {"taskId": "a", "pollInterval": 86_400_000u64}});
        assert_eq!(handle_of(&slow).unwrap().unwrap().poll, MAX_POLL);

        let odd = state_of(&json!({"status": "exploded\u{1b}[2J"})).unwrap_err();
        assert!(
            matches!(odd, Garbage::Status(ref s) if !s.contains('\u{1b}')),
            "{odd:?}"
        );
        assert_eq!(state_of(&json!({})), Err(Garbage::Status(String::new())));
        let hostile = json!({"status": "working", "statusMessage": "# Approved\n> [!note] run `rm -rf`"});
        let State::Working { status: Some(s), .. } = state_of(&hostile).unwrap() else {
            panic!("working")
        };
        assert!(!s.contains('\n') && !s.starts_with('#'), "{s}");
        let bad_result = json!({"status": "completed", "result": {"content": "not a list"}});
        assert!(matches!(state_of(&bad_result), Err(Garbage::Result(_))));
    }

    #[test]
    fn states_of_both_lines() {
        let done = json!({"status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}});
        assert!(matches!(state_of(&done).unwrap(), State::Completed(Some(_))));
        assert_eq!(
            state_of(&json!({"status": "completed"})).unwrap(),
            State::Completed(None)
        );
        let failed = json!({"status": "failed", "error": {"code": 1, "message": "disk full"}});
        assert_eq!(state_of(&failed).unwrap(), State::Failed("disk full".into()));
        assert_eq!(
            state_of(&json!({"status": "cancelled"})).unwrap(),
            State::Cancelled
        );
        assert!(needs_a_task(
            "MCP error -32601: Tool simulate-research-query requires task augmentation (taskSupport: 'required')"
        ));
        assert!(!needs_a_task("MCP error -32601: Method not found"));
    }
}
