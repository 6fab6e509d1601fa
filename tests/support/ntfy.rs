//! A local stand-in for an ntfy server on 127.0.0.1, speaking the parts tabd uses, as ntfy does:
//!
//! - JSON publishing: `POST /` with `{"topic", "title", "message", "actions", …}`;
//! - plain publishing: `POST /<topic>` with the message as the body (what a phone's `http`
//!   action button sends: its `body` to its `url`);
//! - the JSON stream: `GET /<topic>/json?since=<id|all>`, answered with chunked
//!   `application/x-ndjson`, one object a line — first `{"id","time","event":"open","topic"}`,
//!   then the cached messages after `since`, then each new one as it is published —
//!   `{"id","time","expires","event":"message","topic","message"}`, fields in ntfy's order.
//!
//! It keeps every message (like ntfy's cache) and every request, for the tests to look at; a
//! `tap` presses a push's button like the ntfy app does (POSTs the action's body to its url, with
//! its headers).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One message the server took.
#[derive(Clone, Debug)]
pub struct Message {
    pub id: String,
    pub time: i64,
    pub topic: String,
    pub message: String,
    /// The whole JSON that was published (JSON publishing only).
    pub published: Value,
}

/// One request, for assertions: method, path with query, headers (names in lower case).
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    messages: Vec<Message>,
    requests: Vec<Request>,
    /// Open JSON streams: their topic and connection.
    streams: Vec<(String, TcpStream)>,
    next: u64,
}

/// The stand-in; its threads end with the test process.
#[derive(Clone)]
pub struct Ntfy {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
}

impl Ntfy {
    pub fn start() -> Self {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let me = Ntfy {
            port: socket.local_addr().unwrap().port(),
            shared: Arc::default(),
        };
        let shared = me.shared.clone();
        std::thread::spawn(move || {
            for stream in socket.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || serve(stream, &shared));
            }
        });
        me
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn messages(&self, topic: &str) -> Vec<Message> {
        let s = self.shared.lock().unwrap();
        s.messages.iter().filter(|m| m.topic == topic).cloned().collect()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().unwrap().requests.clone()
    }

    /// How many JSON streams are open on `topic`.
    pub fn streams(&self, topic: &str) -> usize {
        self.shared
            .lock()
            .unwrap()
            .streams
            .iter()
            .filter(|(t, _)| t == topic)
            .count()
    }

    /// Publishes `body` to `topic` over HTTP, as a phone or `curl -d` does.
    pub fn publish(&self, topic: &str, body: &str, headers: &[(String, String)]) {
        self.post(&format!("/{topic}"), body, headers);
    }

    /// Presses the button labelled `label` of `push` (a message published as JSON) as the ntfy
    /// app does: its `body` POSTed to its `url`, with its `headers`.
    pub fn tap(&self, push: &Message, label: &str) {
        let action = push.published["actions"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["label"] == label))
            .unwrap_or_else(|| panic!("no {label} button on {}", push.published));
        assert_eq!(action["action"], "http", "{action}");
        assert_eq!(action["method"], "POST", "{action}");
        let url = action["url"].as_str().unwrap();
        let path = url
            .strip_prefix(&self.url())
            .unwrap_or_else(|| panic!("{url} is not this server"));
        let headers: Vec<(String, String)> = action["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        self.post(path, action["body"].as_str().unwrap(), &headers);
    }

    fn post(&self, path: &str, body: &str, headers: &[(String, String)]) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

fn serve(stream: TcpStream, shared: &Arc<Mutex<Shared>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().unwrap_or(0);
            }
            headers.push((name, value));
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    shared.lock().unwrap().requests.push(Request {
        method: method.clone(),
        path: path.clone(),
        headers,
    });
    let mut stream = stream;
    let (route, query) = path.split_once('?').unwrap_or((&path, ""));
    match (method.as_str(), route.strip_suffix("/json")) {
        ("GET", Some(topic)) => {
            let since = query
                .split('&')
                .find_map(|p| p.strip_prefix("since="))
                .unwrap_or("")
                .to_string();
            subscribe(stream, shared, topic.trim_start_matches('/'), &since);
        }
        ("POST", _) => {
            let (topic, text, published) = if route == "/" {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let topic = v["topic"].as_str().unwrap_or("").to_string();
                (topic, v["message"].as_str().unwrap_or("").to_string(), v)
            } else {
                let topic = route.trim_start_matches('/').to_string();
                (topic, String::from_utf8_lossy(&body).to_string(), Value::Null)
            };
            let m = publish(shared, topic, text, published);
            let line = message_line(&m);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{line}",
                line.len()
            );
        }
        _ => {
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    }
}

/// Takes a message, and writes it to every open stream of its topic.
fn publish(shared: &Arc<Mutex<Shared>>, topic: String, message: String, published: Value) -> Message {
    let mut s = shared.lock().unwrap();
    s.next += 1;
    let m = Message {
        id: format!("msg{:07}x", s.next),
        time: chrono::Utc::now().timestamp(),
        topic,
        message,
        published,
    };
    s.messages.push(m.clone());
    let line = message_line(&m);
    s.streams
        .retain_mut(|(t, conn)| *t != m.topic || chunk(conn, &line).is_ok());
    m
}

/// The JSON stream of `topic`: the open line, the messages after `since`, then new ones as they
/// come (the connection is kept in `streams`).
fn subscribe(mut stream: TcpStream, shared: &Arc<Mutex<Shared>>, topic: &str, since: &str) {
    let mut s = shared.lock().unwrap();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    s.next += 1;
    let open = format!(
        "{{\"id\":\"open{:07}x\",\"time\":{},\"event\":\"open\",\"topic\":{}}}\n",
        s.next,
        chrono::Utc::now().timestamp(),
        Value::from(topic)
    );
    if chunk(&mut stream, &open).is_err() {
        return;
    }
    let of_topic: Vec<&Message> = s.messages.iter().filter(|m| m.topic == topic).collect();
    let after = match since {
        "all" => 0,
        id => of_topic.iter().position(|m| m.id == id).map_or(0, |i| i + 1),
    };
    for m in &of_topic[after..] {
        if chunk(&mut stream, &message_line(m)).is_err() {
            return;
        }
    }
    s.streams.push((topic.to_string(), stream));
}

fn message_line(m: &Message) -> String {
    format!(
        "{{\"id\":\"{}\",\"time\":{},\"expires\":{},\"event\":\"message\",\"topic\":{},\"message\":{}}}\n",
        m.id,
        m.time,
        m.time + 43_200,
        Value::from(m.topic.as_str()),
        Value::from(m.message.as_str())
    )
}

/// One chunk of a chunked response.
fn chunk(stream: &mut TcpStream, text: &str) -> std::io::Result<()> {
    write!(stream, "{:x}\r\n{text}\r\n", text.len())?;
    stream.flush()
}
