//! `tabd mcp serve --role ROLE` with a test as its MCP client, over stdio.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::TestVault;

/// `tabd mcp serve --role ROLE` with this test as its MCP client.
pub struct Client {
    log: std::path::PathBuf,
    /// Answers that came before they were asked for.
    early: Vec<Value>,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
}

impl Client {
    pub fn start(v: &TestVault, role: &str) -> Client {
        let mut child = v
            .command(&["mcp", "serve", "--role", role])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(v.dir.path().join("serve.log")).unwrap())
            .spawn()
            .expect("tabd mcp serve");
        let stdin = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let mut c = Client {
            log: v.dir.path().join("serve.log"),
            early: Vec::new(),
            child,
            stdin,
            lines,
        };
        c.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
        c.answer(0);
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    pub fn send(&mut self, msg: Value) {
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Asks `delegate` of the worker (without waiting for the answer).
    pub fn delegate(&mut self, id: u64) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "delegate", "arguments": {"role": "worker", "task": format!("Task {id}.")}}}));
    }

    /// The answer to request `id` (answers to others are kept for later).
    pub fn answer(&mut self, id: u64) -> Value {
        if let Some(i) = self.early.iter().position(|v| v["id"] == json!(id)) {
            return self.early.remove(i);
        }
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no answer to {id} from tabd mcp serve: {e}\n{}", self.log()));
            if v["id"] == json!(id) {
                return v;
            }
            self.early.push(v);
        }
    }

    /// Calls `name` with `arguments` as request `id` and returns the answer's `result`.
    pub fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}));
        let answer = self.answer(id);
        assert!(answer.get("result").is_some(), "{answer}\n{}", self.log());
        answer["result"].clone()
    }

    /// A call result's text, and whether it is an error.
    pub fn text(result: &Value) -> (String, bool) {
        (
            result["content"][0]["text"].as_str().unwrap_or("").to_string(),
            result["isError"] == json!(true),
        )
    }

    /// The child's result object in a `delegate` answer.
    pub fn result(answer: &Value) -> Value {
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or("");
        let v: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{answer}"));
        v.as_array().map_or(v.clone(), |a| a[0].clone())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Ends the session as a client does (its stdin closed) and waits for the server to exit.
    pub fn stop(mut self) {
        drop(self.stdin);
        let status = self.child.wait().expect("tabd mcp serve exits");
        assert!(
            status.success(),
            "{status:?}\n{}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}
