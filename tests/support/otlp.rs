//! A local OTLP/HTTP receiver on 127.0.0.1: takes `POST /v1/traces`, decodes each
//! `ExportTraceServiceRequest` (protobuf, the opentelemetry-proto types) and keeps its spans and
//! the raw bytes (to check what never appears in them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::AnyValue;
use prost::Message;

/// One span as received, its attributes as strings (numbers in decimal, arrays as JSON).
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    /// 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub status_message: String,
    pub attrs: BTreeMap<String, String>,
}

impl Span {
    pub fn attr(&self, key: &str) -> &str {
        self.attrs
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("span {} has no attribute {key}: {:#?}", self.name, self.attrs))
    }
}

#[derive(Default)]
struct State {
    spans: Mutex<Vec<Span>>,
    raw: Mutex<Vec<u8>>,
    headers: Mutex<Vec<HeaderMap>>,
    arrived: Condvar,
}

pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    pub fn start() -> Self {
        let state = Arc::new(State::default());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
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
                let app = axum::Router::new().route(
                    "/v1/traces",
                    axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                        let st = st.clone();
                        async move { take(&st, headers, &body) }
                    }),
                );
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let addr = addr_rx.recv().expect("receiver address");
        Self {
            addr,
            state,
            shutdown: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The collector's address as a config names it.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<Span> {
        self.state.spans.lock().unwrap().clone()
    }

    /// Waits until `n` spans arrived (fails the test after `limit`).
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<Span> {
        let deadline = Instant::now() + limit;
        let mut spans = self.state.spans.lock().unwrap();
        while spans.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{} span(s) arrived, not {n}: {spans:#?}",
                spans.len()
            );
            spans = self.state.arrived.wait_timeout(spans, left).unwrap().0;
        }
        spans.clone()
    }

    /// Every byte received, for "this never appears" checks.
    pub fn raw(&self) -> Vec<u8> {
        self.state.raw.lock().unwrap().clone()
    }

    pub fn headers(&self) -> Vec<HeaderMap> {
        self.state.headers.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn take(st: &State, headers: HeaderMap, body: &[u8]) -> axum::http::StatusCode {
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    st.raw.lock().unwrap().extend_from_slice(body);
    st.headers.lock().unwrap().push(headers);
    let mut spans = st.spans.lock().unwrap();
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            for s in ss.spans {
                let (status, status_message) = s.status.map(|st| (st.code, st.message)).unwrap_or_default();
                spans.push(Span {
                    name: s.name,
                    trace_id: s.trace_id,
                    span_id: s.span_id,
                    parent_span_id: s.parent_span_id,
                    status,
                    status_message,
                    attrs: s
                        .attributes
                        .into_iter()
                        .map(|kv| (kv.key, kv.value.map(|v| shown(&v)).unwrap_or_default()))
                        .collect(),
                });
            }
        }
    }
    st.arrived.notify_all();
    axum::http::StatusCode::OK
}

fn shown(v: &AnyValue) -> String {
    match &v.value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::ArrayValue(a)) => {
            serde_json::to_string(&a.values.iter().map(shown).collect::<Vec<_>>()).unwrap()
        }
        other => format!("{other:?}"),
    }
}
