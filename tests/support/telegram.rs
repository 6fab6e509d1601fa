//! A local stand-in for the Telegram Bot API on 127.0.0.1, speaking the parts tabd uses as
//! Telegram does: `POST /bot<TOKEN>/<method>` with a JSON body, answered
//! `{"ok":true,"result":…}` (or `{"ok":false,"error_code","description"}`):
//!
//! - `getUpdates` with `offset` and `timeout`: the updates with an id at or past the offset
//!   (those before it are forgotten, as Telegram does), or, when there are none, an empty list
//!   after at most a second (the test's short timeout) or as soon as one comes;
//! - `sendMessage`, `editMessageText`, `answerCallbackQuery`: recorded, and answered with the
//!   message (its new `message_id`) or `true`.
//!
//! A test injects what the person does — a tap on a button (`tap`), a message (`say`) — from any
//! chat and user; `fail_with_500` makes every call answer HTTP 500 (with the request's path, the
//! token in it, in the description, as a careless server might).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

/// The chat and user the tests configure.
pub const CHAT: i64 = 424242;

#[derive(Default)]
struct Shared {
    token: String,
    /// Every update ever injected (ids from 1).
    updates: Vec<Value>,
    /// Every call: its method and body.
    calls: Vec<(String, Value)>,
    next_message: i64,
    fail: bool,
}

pub struct Bot {
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    arrived: Arc<tokio::sync::Notify>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

type Shared2 = (Arc<Mutex<Shared>>, Arc<tokio::sync::Notify>);

impl Bot {
    /// A stand-in for the bot whose token is `token`.
    pub fn start(token: &str) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            token: token.to_string(),
            next_message: 1000,
            ..Shared::default()
        }));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let state: Shared2 = (shared.clone(), arrived.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
                addr_tx
                    .send(listener.local_addr().expect("addr"))
                    .expect("send addr");
                let app = axum::Router::new()
                    .route("/{bot}/{method}", axum::routing::post(call))
                    .with_state(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        Self {
            addr: addr_rx.recv().expect("address"),
            shared,
            arrived,
            shutdown: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The `api_base` a config names.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn inject(&self, mut update: Value) -> i64 {
        let id = {
            let mut s = self.shared.lock().unwrap();
            let id = s.updates.len() as i64 + 1;
            update["update_id"] = json!(id);
            s.updates.push(update);
            id
        };
        self.arrived.notify_waiters();
        id
    }

    /// A tap on `message`'s button labelled `label`, by `from` in `chat`.
    pub fn tap_as(&self, message: &Value, label: &str, chat: i64, from: i64) {
        let buttons = message["reply_markup"]["inline_keyboard"][0]
            .as_array()
            .expect("buttons");
        let data = buttons.iter().find(|b| b["text"] == label).expect("the button")["callback_data"].clone();
        self.tap_data(message, &data, chat, from);
    }

    /// A tap on `message` whose callback data is `data`.
    pub fn tap_data(&self, message: &Value, data: &Value, chat: i64, from: i64) {
        let id = self.shared.lock().unwrap().updates.len() + 1;
        self.inject(json!({
            "callback_query": {
                "id": format!("cb{id}"),
                "from": {"id": from, "is_bot": false, "first_name": "P"},
                "chat_instance": "1",
                "message": {"message_id": message["message_id"], "date": 0, "chat": {"id": chat, "type": "private"}},
                "data": data,
            }
        }));
    }

    /// A tap by the person in their chat.
    pub fn tap(&self, message: &Value, label: &str) {
        self.tap_as(message, label, CHAT, CHAT);
    }

    /// A message `text` in `chat` by `from`, as a reply to `reply_to` when set; its message id.
    pub fn say_as(&self, text: &str, chat: i64, from: i64, reply_to: Option<i64>) -> i64 {
        let id = {
            let mut s = self.shared.lock().unwrap();
            s.next_message += 1;
            s.next_message
        };
        let mut message = json!({
            "message_id": id, "date": 0, "text": text,
            "chat": {"id": chat, "type": "private"},
            "from": {"id": from, "is_bot": false, "first_name": "P"},
        });
        if let Some(r) = reply_to {
            message["reply_to_message"] =
                json!({"message_id": r, "date": 0, "chat": {"id": chat, "type": "private"}});
        }
        self.inject(json!({ "message": message }));
        id
    }

    /// A message by the person in their chat.
    pub fn say(&self, text: &str) -> i64 {
        self.say_as(text, CHAT, CHAT, None)
    }

    /// Every call of `method`: its body (a sent message with the `message_id` it was given).
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// From now on every call answers HTTP 500.
    pub fn fail_with_500(&self) {
        self.shared.lock().unwrap().fail = true;
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        self.arrived.notify_waiters();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn call(
    State((shared, arrived)): State<Shared2>,
    Path((bot, method)): Path<(String, String)>,
    Json(mut body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let (token, fail) = {
        let s = shared.lock().unwrap();
        (s.token.clone(), s.fail)
    };
    if fail {
        let description = format!("Internal Server Error at /{bot}/{method}");
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"ok": false, "error_code": 500, "description": description})),
        );
    }
    if bot != format!("bot{token}") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        );
    }
    if method == "getUpdates" {
        shared.lock().unwrap().calls.push((method, body.clone()));
        let offset = body["offset"].as_i64().unwrap_or(0);
        let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(1));
        let pending = || -> Vec<Value> {
            let s = shared.lock().unwrap();
            s.updates
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap() >= offset)
                .cloned()
                .collect()
        };
        let notified = arrived.notified();
        let mut now = pending();
        if now.is_empty() {
            let _ = tokio::time::timeout(wait, notified).await;
            now = pending();
        }
        return (StatusCode::OK, Json(json!({"ok": true, "result": now})));
    }
    let result = {
        let mut s = shared.lock().unwrap();
        let result = match method.as_str() {
            "sendMessage" => {
                s.next_message += 1;
                body["message_id"] = json!(s.next_message);
                json!({"message_id": s.next_message, "date": 0, "chat": {"id": body["chat_id"]}, "text": body["text"]})
            }
            "editMessageText" => {
                json!({"message_id": body["message_id"], "date": 0, "chat": {"id": body["chat_id"]}, "text": body["text"]})
            }
            _ => json!(true),
        };
        s.calls.push((method, body));
        result
    };
    (StatusCode::OK, Json(json!({"ok": true, "result": result})))
}
