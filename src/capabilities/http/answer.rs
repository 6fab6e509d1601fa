//! One request, answered. In order, each step before the next costs more:
//!
//! 1. the path names a hook (`/hooks/<role>` of the config), else 404 — the same for a role
//!    without a hook and no role at all, so nothing says which roles exist;
//! 2. `POST`, else 405;
//! 3. the body, read within the size cap (413, also when `Content-Length` says so at once) and
//!    the client timeout (408, and the connection closed: a client that sends headers and then
//!    stalls holds nothing);
//! 4. the signature (`X-Hub-Signature-256`) over those exact bytes, else 401;
//! 5. a delivery id seen before: 200, nothing written;
//! 6. the role's minute (`per_minute`), else 429 with `Retry-After`;
//! 7. the note written (202), off the server's tasks.
//!
//! Every answer has an empty body: nothing the sender sent, and nothing of the vault, is echoed.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};

use super::deliver::{Desk, NotWritten, Written};
use super::note::{self, Delivery};
use super::rate::{self, Rate};
use super::{github, seen, signature};
use crate::base::clock::Clock;

/// What every request is answered with: the hooks, the limits, and where notes go.
pub struct Answerer {
    /// Each hook's secret, by hook (role) name.
    pub hooks: BTreeMap<String, Vec<u8>>,
    pub max_body: usize,
    pub timeout: Duration,
    pub rate: Mutex<Rate>,
    pub desk: Arc<Desk>,
    pub clock: Arc<dyn Clock>,
}

/// The headers a delivery id comes in: GitHub's, then the one other senders are told to use.
const ID_HEADERS: [&str; 2] = ["x-github-delivery", "x-delivery-id"];

type Answer = Response<Empty<Bytes>>;

fn answer(status: StatusCode) -> Answer {
    let mut r = Response::new(Empty::new());
    *r.status_mut() = status;
    r
}

/// A refusal that also ends the connection: what is left of the request is never read.
fn closing(status: StatusCode) -> Answer {
    let mut r = answer(status);
    r.headers_mut()
        .insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    r
}

/// Answers `req` (never an error: every failure is a status).
pub async fn answer_request<B>(this: Arc<Answerer>, req: Request<B>) -> Result<Answer, Infallible>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    Ok(this.answer(req).await)
}

impl Answerer {
    async fn answer<B>(&self, req: Request<B>) -> Answer
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (hook, secret) = match self.route(&req) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        let (parts, body) = req.into_parts();
        let body = match self.read_body(&hook, body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let signature = parts.headers.get(signature::HEADER).map(|v| v.as_bytes());
        if !signature::verifies(secret, &body, signature) {
            tracing::info!("webhook `{hook}`: the signature does not match its secret; nothing written");
            return answer(StatusCode::UNAUTHORIZED);
        }
        let Ok(id) = delivery_id(&parts.headers) else {
            return answer(StatusCode::BAD_REQUEST);
        };
        if id.as_deref().is_some_and(|id| self.desk.seen(&hook, id)) {
            return answer(StatusCode::OK);
        }
        let taken = self
            .rate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take(&hook, self.clock.instant());
        if let Err(wait) = taken {
            tracing::info!("webhook `{hook}`: more deliveries than [http] per_minute allows; asked to retry");
            let mut r = answer(StatusCode::TOO_MANY_REQUESTS);
            r.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(rate::retry_after(wait)),
            );
            return r;
        }
        let delivery = Delivery {
            github_event: parts
                .headers
                .get("x-github-event")
                .and_then(|v| v.to_str().ok())
                .and_then(github::event_name)
                .map(str::to_string),
            headers: note::shown_headers(parts.headers.iter().map(|(k, v)| (k.as_str(), v.as_bytes()))),
            hook,
            id,
            body: body.to_vec(),
        };
        self.write(delivery).await
    }

    /// The hook the path names and its secret, for a `POST` whose declared length fits.
    fn route<B>(&self, req: &Request<B>) -> Result<(String, &[u8]), Answer> {
        let Some((hook, secret)) = req
            .uri()
            .path()
            .strip_prefix("/hooks/")
            .and_then(|name| self.hooks.get_key_value(name))
        else {
            return Err(closing(StatusCode::NOT_FOUND));
        };
        if req.method() != Method::POST {
            let mut r = closing(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
            return Err(r);
        }
        if declared_length(req.headers()).is_some_and(|n| n > self.max_body as u64) {
            return Err(closing(StatusCode::PAYLOAD_TOO_LARGE));
        }
        Ok((hook.clone(), secret.as_slice()))
    }

    /// The whole body, read within the size cap and the client timeout.
    async fn read_body<B>(&self, hook: &str, body: B) -> Result<Bytes, Answer>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        match tokio::time::timeout(self.timeout, Limited::new(body, self.max_body).collect()).await {
            Err(_) => {
                tracing::info!(
                    "webhook `{hook}`: the client took longer than {:?} to send its body; dropped",
                    self.timeout
                );
                Err(closing(StatusCode::REQUEST_TIMEOUT))
            }
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                Err(closing(StatusCode::PAYLOAD_TOO_LARGE))
            }
            Ok(Err(_)) => Err(closing(StatusCode::BAD_REQUEST)),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
        }
    }

    /// The note written off the server's tasks, and the answer that says so.
    async fn write(&self, delivery: Delivery) -> Answer {
        let desk = self.desk.clone();
        let now = self.clock.now();
        let hook = delivery.hook.clone();
        let done = tokio::task::spawn_blocking(move || desk.deliver(&delivery, now)).await;
        match done {
            Ok(Ok(Written::Note(path))) => {
                tracing::info!("webhook `{hook}`: wrote {path}");
                answer(StatusCode::ACCEPTED)
            }
            Ok(Ok(Written::Again)) => answer(StatusCode::OK),
            Ok(Err(e @ NotWritten::NoRole(_))) => {
                tracing::warn!("webhook `{hook}`: {e}");
                answer(StatusCode::NOT_FOUND)
            }
            Ok(Err(e)) => {
                tracing::warn!("webhook `{hook}`: {e}");
                answer(StatusCode::SERVICE_UNAVAILABLE)
            }
            Err(e) => {
                tracing::warn!(
                    "webhook `{hook}`: writing its note stopped ({e}); nothing may have been written"
                );
                answer(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// The body's length as the request declares it, if it does.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// A delivery id tabd does not take (`seen::delivery_id`): the delivery is refused (400) rather
/// than written without one, which would let it be written twice.
struct BadDeliveryId;

/// The delivery id, if the request carries one.
fn delivery_id(headers: &HeaderMap) -> Result<Option<String>, BadDeliveryId> {
    let Some(value) = ID_HEADERS.iter().find_map(|h| headers.get(*h)) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(seen::delivery_id)
        .map(|id| Some(id.to_string()))
        .ok_or(BadDeliveryId)
}
