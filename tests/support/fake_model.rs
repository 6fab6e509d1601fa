//! A fake model server on 127.0.0.1 that speaks the Anthropic Messages and OpenAI chat
//! completions wire formats, answers from a per-test script, and records every request.
//!
//! Canned bodies follow the providers' published examples (field names, nesting, ids, usage).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Status, JSON body, extra headers.
    Json(u16, Value, Vec<(String, String)>),
    /// Status and a raw (maybe malformed) body.
    Raw(u16, String),
    /// Wait, then answer.
    Delay(Duration, Box<Reply>),
    /// Answer once the test opens the gate; other requests are answered meanwhile.
    Held(Gate, Box<Reply>),
    /// Send 200 headers, then break the connection mid-body.
    DropMidBody,
    /// A 200 `text/event-stream` body (Anthropic's streaming Messages API; the real claude CLI
    /// streams).
    Sse(String),
}

/// What a `Reply::Held` waits for: shut until `open`, then open for good.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Gate {
    pub fn shut() -> Self {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    pub fn open(&self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Reply::Json(200, body, vec![])
    }
    pub fn status(status: u16, body: Value) -> Self {
        Reply::Json(status, body, vec![])
    }
    pub fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            Reply::Json(s, b, mut h) => {
                h.push((name.to_string(), value.to_string()));
                Reply::Json(s, b, h)
            }
            other => other,
        }
    }
    pub fn delayed(self, d: Duration) -> Self {
        Reply::Delay(d, Box::new(self))
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Value,
    pub at: Instant,
}

type Responder = Box<dyn Fn(&Recorded, usize) -> Reply + Send + Sync>;

struct State {
    script: Mutex<VecDeque<Reply>>,
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Condvar,
    violations: Mutex<Vec<String>>,
}

pub struct FakeModel {
    pub addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeModel {
    /// Starts the server on its own thread and runtime, so sync and async tests can use it.
    pub fn start() -> Self {
        let state = Arc::new(State {
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            violations: Mutex::new(Vec::new()),
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("send addr");
                let app = axum::Router::new().fallback(
                    move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                        let st = st.clone();
                        async move { handle(st, uri.path().to_string(), headers, body).await }
                    },
                );
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let addr = addr_rx.recv().expect("server address");
        Self {
            addr,
            state,
            shutdown: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Base URL for `kind = "anthropic"`.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL for `kind = "openai"`.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues replies, answered in order.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().unwrap().extend(replies);
    }

    /// Answers every request the script does not cover. Gets the request and its index.
    pub fn respond_with(&self, f: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static) {
        *self.state.responder.lock().unwrap() = Some(Box::new(f));
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Arrival times only (cheap: no request bodies copied).
    pub fn arrival_times(&self) -> Vec<Instant> {
        self.state.requests.lock().unwrap().iter().map(|r| r.at).collect()
    }

    /// Waits until at least `n` requests arrived; panics with what arrived after `timeout`.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        let mut reqs = self.state.requests.lock().unwrap();
        while reqs.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!("waited {timeout:?} for {n} model requests, got {}", reqs.len());
            }
            reqs = self.state.arrived.wait_timeout(reqs, left).unwrap().0;
        }
        reqs.clone()
    }

    /// Wire-format invariants broken by any request so far (e.g. a tool_result with no tool_use).
    pub fn violations(&self) -> Vec<String> {
        self.state.violations.lock().unwrap().clone()
    }
}

impl Drop for FakeModel {
    /// Stops the server and checks the wire-format invariants of every request it saw (each
    /// tool result answers an earlier tool call), so every test that uses it checks them.
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let violations = self.violations();
        if !violations.is_empty() && !std::thread::panicking() {
            panic!("requests broke the wire format: {violations:#?}");
        }
    }
}

async fn handle(st: Arc<State>, path: String, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rec = Recorded {
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body,
        at: Instant::now(),
    };
    let problems = check_invariants(&rec);
    st.violations.lock().unwrap().extend(problems);
    // Decide the reply first so the (possibly large) request is recorded by move, not cloned.
    let index = st.requests.lock().unwrap().len();
    let scripted = st.script.lock().unwrap().pop_front();
    let reply = match scripted {
        Some(r) => r,
        None => match st.responder.lock().unwrap().as_ref() {
            Some(f) => f(&rec, index),
            None => Reply::status(500, json!({"error": {"message": "fake model: script exhausted"}})),
        },
    };
    {
        let mut reqs = st.requests.lock().unwrap();
        reqs.push(rec);
        st.arrived.notify_all();
    }
    respond(reply).await
}

fn respond(reply: Reply) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match reply {
            Reply::Json(status, body, headers) => {
                let mut b = Response::builder()
                    .status(StatusCode::from_u16(status).unwrap())
                    .header("content-type", "application/json");
                for (k, v) in headers {
                    b = b.header(k, v);
                }
                b.body(Body::from(body.to_string())).unwrap()
            }
            Reply::Sse(text) => Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .body(Body::from(text))
                .unwrap(),
            Reply::Raw(status, text) => Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json")
                .body(Body::from(text))
                .unwrap(),
            Reply::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                respond(*inner).await
            }
            Reply::Held(gate, inner) => {
                // Closed only by dropping the semaphore, which the gate holds: it cannot fail.
                let _ = gate.0.acquire().await;
                respond(*inner).await
            }
            Reply::DropMidBody => {
                let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                    Ok(Bytes::from_static(b"{\"id\":\"msg_")),
                    Err(std::io::Error::other("connection dropped")),
                ];
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .header("content-length", "500")
                    .body(Body::from_stream(futures_stream(chunks)))
                    .unwrap()
            }
        }
    })
}

fn futures_stream(
    items: Vec<Result<Bytes, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<Bytes, std::io::Error>> {
    tokio_stream::iter(items)
}

/// Each tool result must answer a tool call made earlier in the same conversation.
fn check_invariants(rec: &Recorded) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(messages) = rec.body.get("messages").and_then(Value::as_array) else {
        return problems;
    };
    let mut calls: Vec<String> = Vec::new();
    for m in messages {
        // Anthropic: content blocks.
        if let Some(blocks) = m.get("content").and_then(Value::as_array) {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_use") => calls.push(b["id"].as_str().unwrap_or("").to_string()),
                    Some("tool_result") => {
                        let id = b["tool_use_id"].as_str().unwrap_or("");
                        if !calls.iter().any(|c| c == id) {
                            problems.push(format!("tool_result {id} answers no earlier tool_use"));
                        }
                    }
                    _ => {}
                }
            }
        }
        // OpenAI: tool_calls and role=tool messages.
        if let Some(tc) = m.get("tool_calls").and_then(Value::as_array) {
            calls.extend(tc.iter().map(|c| c["id"].as_str().unwrap_or("").to_string()));
        }
        if m.get("role").and_then(Value::as_str) == Some("tool") {
            let id = m["tool_call_id"].as_str().unwrap_or("");
            if !calls.iter().any(|c| c == id) {
                problems.push(format!("tool message {id} answers no earlier tool call"));
            }
        }
    }
    problems.extend(unanswered_calls(messages));
    problems
}

/// Every call the model made is answered before the conversation goes on (issue 32): a
/// `tool_use` by a `tool_result` in the very next message (Anthropic), a `tool_calls` entry by a
/// `role: tool` message before the next other message (OpenAI). The real APIs reject a request
/// that breaks this with a 400.
fn unanswered_calls(messages: &[Value]) -> Vec<String> {
    let ids = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m.get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == kind)
                    .filter_map(|b| b[key].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for id in ids(m, "tool_use", "id") {
            let answered = messages
                .get(i + 1)
                .is_some_and(|next| ids(next, "tool_result", "tool_use_id").contains(&id));
            if !answered {
                problems.push(format!("tool_use {id} has no tool_result in the next message"));
            }
        }
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            let answers: Vec<&str> = messages[i + 1..]
                .iter()
                .take_while(|n| n["role"] == "tool")
                .filter_map(|n| n["tool_call_id"].as_str())
                .collect();
            for c in calls {
                let id = c["id"].as_str().unwrap_or("");
                if !answers.contains(&id) {
                    problems.push(format!("tool call {id} has no tool message after it"));
                }
            }
        }
    }
    problems
}

/// Response bodies shaped like the providers' published examples.
pub mod canned {
    use serde_json::{json, Value};

    pub fn anthropic_usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Value {
        json!({ "input_tokens": input, "output_tokens": output,
                "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read })
    }

    /// `{"type":"message", … "stop_reason":"end_turn"}` with one text block.
    pub fn anthropic_text(text: &str) -> Value {
        json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": text }],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": anthropic_usage(2095, 503, 0, 0)
        })
    }

    /// A `tool_use` turn: optional text first, then the calls `(id, name, input)`.
    pub fn anthropic_tool_use(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Value {
        let mut content = Vec::new();
        if let Some(t) = text {
            content.push(json!({ "type": "text", "text": t }));
        }
        for (id, name, input) in calls {
            content.push(json!({ "type": "tool_use", "id": id, "name": name, "input": input }));
        }
        json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": anthropic_usage(472, 89, 0, 0)
        })
    }

    /// A canned Messages API message as the streaming API sends it: `message_start`, each block's
    /// start / delta / stop, `message_delta` with the stop reason, `message_stop`.
    pub fn anthropic_sse(message: &Value) -> String {
        let mut out = String::new();
        let mut event = |name: &str, data: Value| out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        let mut start = message.clone();
        start["content"] = json!([]);
        start["stop_reason"] = Value::Null;
        start["usage"]["output_tokens"] = json!(1);
        event(
            "message_start",
            json!({"type": "message_start", "message": start}),
        );
        for (i, block) in message["content"].as_array().into_iter().flatten().enumerate() {
            let (first, delta) = match block["type"].as_str() {
                Some("tool_use") => (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ),
                _ => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": block["text"]}),
                ),
            };
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": first}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": delta}),
            );
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": i}),
            );
        }
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
                   "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
        );
        event("message_stop", json!({"type": "message_stop"}));
        out
    }

    pub fn anthropic_error(kind: &str, message: &str) -> Value {
        json!({ "type": "error", "error": { "type": kind, "message": message }, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy" })
    }

    pub fn openai_usage(prompt: u64, completion: u64, cached: u64) -> Value {
        json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": { "cached_tokens": cached, "audio_tokens": 0 },
                "completion_tokens_details": { "reasoning_tokens": 0, "audio_tokens": 0,
                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0 } })
    }

    pub fn openai_text(text: &str) -> Value {
        json!({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{ "index": 0,
                "message": { "role": "assistant", "content": text, "refusal": null, "annotations": [] },
                "logprobs": null, "finish_reason": "stop" }],
            "usage": openai_usage(19, 10, 0),
            "service_tier": "default"
        })
    }

    /// Tool calls with `arguments` as a JSON string, as the spec says.
    pub fn openai_tool_calls(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Value {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, input)| {
                json!({ "id": id, "type": "function",
                "function": { "name": name, "arguments": input.to_string() } })
            })
            .collect();
        json!({
            "id": "chatcmpl-abc123",
            "object": "chat.completion",
            "created": 1699896916,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{ "index": 0,
                "message": { "role": "assistant", "content": text, "tool_calls": tool_calls, "refusal": null },
                "logprobs": null, "finish_reason": "tool_calls" }],
            "usage": openai_usage(82, 17, 0)
        })
    }

    pub fn openai_error(kind: &str, message: &str) -> Value {
        json!({ "error": { "message": message, "type": kind, "param": null, "code": kind } })
    }
}

#[test]
fn a_call_without_its_answer_breaks_the_wire_format() {
    use serde_json::json;
    let anthropic = [
        json!({"role": "user", "content": [{"type": "text", "text": "go"}]}),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}),
        json!({"role": "user", "content": [{"type": "text", "text": "no answer"}]}),
    ];
    assert_eq!(
        unanswered_calls(&anthropic),
        ["tool_use t1 has no tool_result in the next message"]
    );
    let openai = [
        json!({"role": "assistant", "tool_calls": [{"id": "c1"}, {"id": "c2"}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "user", "content": "next"}),
    ];
    assert_eq!(
        unanswered_calls(&openai),
        ["tool call c2 has no tool message after it"]
    );
    let fine = [
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
    ];
    assert!(unanswered_calls(&fine).is_empty());
}
