//! The one HTTP exchange both adapters make: POST JSON, map failures to `ProviderError`.

use serde_json::Value;

use super::error::{advice, is_spend_limit, parse_retry_after};
use super::{Block, ProviderError, Request};

/// What an adapter tells `post_json` about itself, for error messages.
pub(crate) struct Endpoint<'a> {
    pub provider: &'static str,
    pub url: &'a str,
    pub key_env: &'a str,
    pub model: &'a str,
    pub timeout: std::time::Duration,
}

/// A request body as JSON bytes. Serializing typed, borrowed structs into a buffer sized up front
/// saves copying the prompt into a `Value` tree and regrowing the buffer (measured in
/// benches/daemon.rs: the body was a fifth of tabd's CPU per run).
pub(crate) fn to_bytes(body: &impl serde::Serialize, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    // Writing plain structs into a Vec cannot fail: keys are strings, floats are finite or null.
    if let Err(e) = serde_json::to_writer(&mut out, body) {
        tracing::error!("request body not serializable: {e}");
    }
    out
}

/// About how many bytes a request's JSON takes: its text plus a little for escapes and framing.
pub(crate) fn size_hint(req: &Request) -> usize {
    let text: usize = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|b| match b {
            Block::Text { text, .. } | Block::Thinking { text, .. } => text.len(),
            Block::ToolResult { content, .. } => content.len(),
            Block::ToolUse { .. } => 256,
        })
        .sum();
    let tools = req.tools.len() * 1024;
    let all = req.system.len() + text + tools;
    all + all / 16 + 4096
}

/// The longest provider error text kept in a message.
const MAX_ERROR_TEXT: usize = 600;

/// The most bytes of a response tabd reads: far above any answer a model gives (its
/// `max_tokens` of text), far below what would strain memory.
pub(crate) const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// The response's body, at most [`MAX_RESPONSE_BYTES`]: a server that sends more is cut off
/// rather than read into memory whole.
async fn body_of(ep: &Endpoint<'_>, mut response: reqwest::Response) -> Result<Vec<u8>, ProviderError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(ep, &e))? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ProviderError::BadResponse {
                provider: ep.provider,
                message: format!(
                    "it is larger than {} MiB, more than any answer; the server at {} is not behaving as a model API",
                    MAX_RESPONSE_BYTES / (1024 * 1024),
                    crate::base::text::display_url(ep.url)
                ),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

pub(crate) async fn post_json(
    client: &reqwest::Client,
    ep: &Endpoint<'_>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<Value, ProviderError> {
    let mut request = client
        .post(ep.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.map_err(|e| transport(ep, &e))?;
    let status = response.status();
    let retry_after = parse_retry_after(response.headers());
    let bytes = body_of(ep, response).await?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        let spend_limit = status.as_u16() == 429 && is_spend_limit(&text);
        return Err(ProviderError::Http {
            provider: ep.provider,
            status: status.as_u16(),
            message: error_message(&text),
            retry_after,
            spend_limit,
            advice: advice(status.as_u16(), ep.key_env, ep.model, spend_limit),
        });
    }
    crate::formats::json::parse_slice(&bytes).map_err(|e| ProviderError::BadResponse {
        provider: ep.provider,
        message: match e {
            crate::formats::json::JsonError::Syntax(e) => format!(
                "not JSON ({e}): {}",
                shorten(&String::from_utf8_lossy(&bytes), 200)
            ),
            too_deep @ crate::formats::json::JsonError::TooDeep => too_deep.to_string(),
        },
    })
}

fn transport(ep: &Endpoint<'_>, e: &reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        return ProviderError::Timeout {
            provider: ep.provider,
            url: crate::base::text::display_url(ep.url),
            timeout: ep.timeout,
        };
    }
    // The innermost cause says what actually went wrong ("connection refused", "connection closed").
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    // Both go into the daily note and the run record: no password or key from the URL.
    ProviderError::Transport {
        provider: ep.provider,
        url: crate::base::text::display_url(ep.url),
        message: crate::base::text::scrub_url(&cause.to_string(), ep.url),
    }
}

/// The provider's own error message: `error.message` of either wire format, else the raw text.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let err = v.get("error")?;
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| err.as_str())?;
        let kind = err.get("type").and_then(Value::as_str);
        Some(match kind {
            // `… provided. (invalid_request_error)` reads as two sentences: one stop, after.
            Some(k) => format!("{} ({k})", msg.trim_end().trim_end_matches('.')),
            None => msg.to_string(),
        })
    });
    let text = message.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        "(empty body)".into()
    } else {
        shorten(&text, MAX_ERROR_TEXT)
    }
}

pub(crate) fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}
