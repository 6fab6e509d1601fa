//! Provider errors: what happened, whether to retry, and whose fault it is.

use std::time::Duration;

/// Whose failure an error is (docs/spec.md §5): the run's (its notes count an attempt) or the
/// provider's (model calls pause; notes wait without an attempt counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The provider is unusable: no key, rejected key, unknown model, down, rate-limited.
    Outage,
    /// This request failed: rejected as invalid or too large, or the run's deadline passed.
    RunFailure,
    /// Something this role needs (a `required` MCP server) is down: the role waits, its notes
    /// stay, no attempt is counted; other roles go on.
    Unavailable,
    /// tabd itself was stopped during the run: the notes stay, no attempt is counted, and they
    /// run again at the next start.
    Stopped,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// `file`: the env file tabd reads (`~/.config/tabd/env`), where the person puts the key.
    #[error("{provider}: no API key — {}", key_advice(env, file.as_deref()))]
    MissingKey {
        provider: &'static str,
        env: String,
        file: Option<String>,
    },
    #[error("{provider}: HTTP {status}: {message}{}", advice.as_deref().map(|a| format!(" — {a}")).unwrap_or_default())]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
        spend_limit: bool,
        advice: Option<String>,
    },
    #[error("{provider}: cannot reach {url}: {message} — is the server running and the base_url right?")]
    Transport {
        provider: &'static str,
        url: String,
        message: String,
    },
    #[error("{provider}: no answer within {}s (timeout_s) from {url}", timeout.as_secs_f64())]
    Timeout {
        provider: &'static str,
        url: String,
        timeout: Duration,
    },
    #[error("{provider}: the response could not be read: {message}")]
    BadResponse { provider: &'static str, message: String },
    #[error("{provider}: the run's deadline passed while waiting for the model")]
    Deadline { provider: &'static str },
    /// An agent CLI failed (docs/spec.md §16): `outage` when it cannot be used right now (not
    /// installed, not logged in, rate-limited, a flag missing), else a bad run.
    #[error("{provider}: {message}")]
    Cli {
        provider: &'static str,
        message: String,
        outage: bool,
    },
}

impl ProviderError {
    /// 408, 409, 429 (unless a spend limit), 5xx, 529, connection failures and timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http {
                status, spend_limit, ..
            } => matches!(status, 408 | 409 | 500..=599) || (*status == 429 && !spend_limit),
            Self::Transport { .. } | Self::Timeout { .. } => true,
            Self::MissingKey { .. } | Self::BadResponse { .. } | Self::Deadline { .. } | Self::Cli { .. } => {
                false
            }
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub fn class(&self) -> FailureClass {
        match self {
            Self::Http {
                status: 400 | 413 | 422,
                ..
            }
            | Self::Deadline { .. }
            | Self::Cli { outage: false, .. } => FailureClass::RunFailure,
            _ => FailureClass::Outage,
        }
    }

    /// The error with `secrets` written back as `${VAR}` in every text it holds (docs/spec.md §24).
    pub fn redacted(self, secrets: &crate::base::environment::Redactor) -> Self {
        let r = |s: String| secrets.apply(&s);
        match self {
            Self::Http {
                provider,
                status,
                message,
                retry_after,
                spend_limit,
                advice,
            } => Self::Http {
                provider,
                status,
                message: r(message),
                retry_after,
                spend_limit,
                advice: advice.map(r),
            },
            Self::Transport {
                provider,
                url,
                message,
            } => Self::Transport {
                provider,
                url: r(url),
                message: r(message),
            },
            Self::Timeout {
                provider,
                url,
                timeout,
            } => Self::Timeout {
                provider,
                url: r(url),
                timeout,
            },
            Self::BadResponse { provider, message } => Self::BadResponse {
                provider,
                message: r(message),
            },
            Self::Cli {
                provider,
                message,
                outage,
            } => Self::Cli {
                provider,
                message: r(message),
                outage,
            },
            Self::MissingKey { provider, env, file } => Self::MissingKey { provider, env, file },
            Self::Deadline { provider } => Self::Deadline { provider },
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What a person does about a missing key: the variable, the env file it goes in and that a
/// running tabd reads that file again when it is saved (no restart), or the environment.
fn key_advice(env: &str, file: Option<&str>) -> String {
    match file {
        Some(file) => format!(
            "put {env}=… in {file} (tabd reads that file again when you save it) or set {env} in tabd's environment; see docs/providers.md"
        ),
        None => format!(
            "set {env} in tabd's environment (the variable named by [provider] api_key_env; see docs/providers.md)"
        ),
    }
}

/// What a person should do about an HTTP error, by status.
pub(crate) fn advice(status: u16, key_env: &str, model: &str, spend_limit: bool) -> Option<String> {
    Some(match status {
        401 => format!("the API key in {key_env} was rejected; check it"),
        403 => format!("the key in {key_env} may not use this model or endpoint"),
        404 => format!("model `{model}` or the endpoint was not found; check [provider] model and base_url"),
        413 => "the request is too large; trim the role's context files".into(),
        429 if spend_limit => "a spend limit or quota was reached; raise it in the provider's console".into(),
        429 => "rate limited; tabd retries with backoff".into(),
        500..=599 => "the provider is failing; tabd retries later".into(),
        _ => return None,
    })
}

/// The longest `retry-after` taken as given; anything longer (`inf`, `1e20`) is a day, which no
/// run deadline reaches, so the request is not retried in this run.
const MAX_RETRY_AFTER_SECS: f64 = 86_400.0;

/// Seconds from a header as a duration; never panics on what a server sends (NaN, inf, huge).
fn header_secs(secs: f64) -> Option<Duration> {
    if secs.is_nan() {
        return None;
    }
    Duration::try_from_secs_f64(secs.clamp(0.0, MAX_RETRY_AFTER_SECS)).ok()
}

/// Reads `retry-after-ms` or `retry-after` (seconds or an HTTP date).
pub(crate) fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        return header_secs(ms / 1000.0);
    }
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return header_secs(secs);
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (when.timestamp_millis() - chrono::Utc::now().timestamp_millis()).max(0);
    Some(Duration::from_millis(secs as u64))
}

/// True when an error body says a spend limit / quota (not a rate limit) was hit.
pub(crate) fn is_spend_limit(body: &str) -> bool {
    let b = body.to_lowercase();
    [
        "spend limit",
        "spending limit",
        "insufficient_quota",
        "credit balance",
        "billing",
        "exceeded your current quota",
    ]
    .iter()
    .any(|s| b.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, spend_limit: bool) -> ProviderError {
        ProviderError::Http {
            provider: "anthropic",
            status,
            message: "m".into(),
            retry_after: None,
            spend_limit,
            advice: None,
        }
    }

    #[test]
    fn retry_and_class_rules() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(http(s, false).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!http(s, false).is_retryable(), "{s}");
        }
        assert!(!http(429, true).is_retryable(), "spend limits are never retried");
        assert_eq!(http(400, false).class(), FailureClass::RunFailure);
        assert_eq!(http(413, false).class(), FailureClass::RunFailure);
        for s in [401, 403, 404, 429, 500, 529] {
            assert_eq!(http(s, false).class(), FailureClass::Outage, "{s}");
        }
        assert_eq!(
            ProviderError::MissingKey {
                provider: "anthropic",
                env: "K".into(),
                file: None,
            }
            .class(),
            FailureClass::Outage
        );
        assert_eq!(
            ProviderError::Deadline {
                provider: "anthropic"
            }
            .class(),
            FailureClass::RunFailure
        );
    }

    #[test]
    fn spend_limit_bodies() {
        assert!(is_spend_limit(r#"{"error":{"type":"insufficient_quota"}}"#));
        assert!(is_spend_limit(
            "You have reached your specified API usage limits. Spend limit reached"
        ));
        assert!(!is_spend_limit(
            r#"{"error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#
        ));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn hostile_retry_after_values_never_panic() {
        let day = Some(Duration::from_secs(86_400));
        for (header, value, want) in [
            ("retry-after", "inf", day),
            ("retry-after", "1e20", day),
            ("retry-after", "-5", Some(Duration::ZERO)),
            ("retry-after", "NaN", None),
            ("retry-after-ms", "inf", day),
            ("retry-after-ms", "1e300", day),
            ("retry-after-ms", "-inf", Some(Duration::ZERO)),
        ] {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(header, value.parse().unwrap());
            assert_eq!(parse_retry_after(&h), want, "{header}: {value}");
        }
    }
}
