//! `[telemetry]` (docs/spec.md §25): OpenTelemetry GenAI traces over OTLP/HTTP. Typed data only: the
//! exporter is a capability (`capabilities::telemetry`).
//!
//! ```toml
//! [telemetry]
//! otlp = "http://127.0.0.1:4318"   # a collector's OTLP/HTTP address; /v1/traces is added
//! headers = { Authorization = "Bearer ${OTLP_TOKEN}" }
//! content = false                  # true: prompts, answers and tool arguments go in the spans
//! ```
//!
//! Unset: no exporter is built and no span is made.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// Where OTLP/HTTP takes traces, below a collector's address.
pub const TRACES_PATH: &str = "/v1/traces";

/// `[telemetry]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    otlp: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    content: bool,
}

/// `[telemetry]`, resolved.
#[derive(Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The traces endpoint, `${VAR}` expanded (it may hold a secret: shown only through
    /// `display_url`, and every value expanded is redacted wherever it lands).
    pub endpoint: String,
    /// HTTP headers sent with every export (an API key), `${VAR}` expanded.
    pub headers: Vec<(String, String)>,
    /// Prompts, answers, tool arguments and results in the spans (redacted of secrets).
    pub content: bool,
}

impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("endpoint", &crate::base::text::display_url(&self.endpoint))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("content", &self.content)
            .finish()
    }
}

/// A problem in `[telemetry]`, at a span of the file when there is one.
pub(super) struct Problem {
    pub span: Option<std::ops::Range<usize>>,
    pub message: String,
}

/// `raw` resolved: the address checked and made the traces endpoint (`expand` turns `${VAR}`
/// into its value and remembers it as a secret).
pub(super) fn resolve(
    raw: RawTelemetry,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<TelemetryConfig, Problem> {
    let Some(otlp) = raw.otlp.as_ref() else {
        return Err(Problem {
            span: None,
            message: "[telemetry] needs otlp = \"http://HOST:4318\" (a collector's OTLP/HTTP address); \
                      remove the table to send no traces"
                .into(),
        });
    };
    let written = expand(otlp)?;
    let endpoint = traces_endpoint(&written).map_err(|why| Problem {
        span: Some(otlp.span()),
        message: format!(
            "[telemetry] otlp = \"{}\": {why}; write the collector's OTLP/HTTP address, such as \"http://127.0.0.1:4318\"",
            crate::base::text::display_url(&written)
        ),
    })?;
    let mut headers = Vec::with_capacity(raw.headers.len());
    for (name, value) in &raw.headers {
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        let v = expand(value)?;
        if !ok || v.contains(['\r', '\n']) {
            return Err(Problem {
                span: Some(value.span()),
                message: format!(
                    "[telemetry] headers: `{name}` is not a header tabd can send (a name of letters, digits and -, a value on one line)"
                ),
            });
        }
        headers.push((name.clone(), v));
    }
    Ok(TelemetryConfig {
        endpoint,
        headers,
        content: raw.content,
    })
}

/// Why an address is no collector's OTLP/HTTP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadOtlpAddress {
    #[error("it needs http:// or https:// in front")]
    NoScheme,
    #[error("not a URL ({0})")]
    NotAUrl(url::ParseError),
    #[error("OTLP over HTTP takes http:// or https://, not {0}://")]
    OtherScheme(String),
    #[error("no host")]
    NoHost,
    #[error("an address takes no ?query or #fragment")]
    QueryOrFragment,
}

/// The OTLP/HTTP traces endpoint for a collector's address: `/v1/traces` added unless the path
/// already ends so.
pub fn traces_endpoint(address: &str) -> Result<String, BadOtlpAddress> {
    if !address.contains("://") {
        return Err(BadOtlpAddress::NoScheme);
    }
    let mut url = url::Url::parse(address.trim()).map_err(BadOtlpAddress::NotAUrl)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BadOtlpAddress::OtherScheme(url.scheme().to_string()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(BadOtlpAddress::NoHost);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(BadOtlpAddress::QueryOrFragment);
    }
    if !url.path().ends_with(TRACES_PATH) {
        let path = format!("{}{TRACES_PATH}", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_becomes_the_traces_endpoint() {
        for (given, want) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            ("https://otel.example/otlp", "https://otel.example/otlp/v1/traces"),
            ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
        ] {
            assert_eq!(traces_endpoint(given).unwrap(), want, "{given}");
        }
        for (given, why) in [
            ("127.0.0.1:4318", "http:// or https:// in front"),
            ("grpc://c:4317", "not grpc://"),
            ("http://[::1", "not a URL"),
            ("http://c:4318/?k=v", "no ?query"),
        ] {
            let e = traces_endpoint(given).unwrap_err().to_string();
            assert!(e.contains(why), "{given}: {e}");
        }
    }
}
