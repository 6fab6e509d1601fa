//! Model providers (docs/spec.md §10): one `Provider` trait, an Anthropic Messages and an
//! OpenAI-compatible chat implementation, and the one retry loop they share.
//!
//! The conversation model inside tabd is Anthropic-shaped (text, tool_use, tool_result and
//! thinking blocks); each adapter maps it to and from its wire format.

mod anthropic;
mod error;
mod http;
mod openai;

use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::base::calls::ToolSpec;
use crate::base::cost::{CacheTtl, Usage};
use crate::base::environment::Env;
use crate::setup::config::{ProviderConfig, ProviderKind};

pub use anthropic::AnthropicProvider;
pub use error::{FailureClass, ProviderError};
pub use openai::OpenAiProvider;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    User,
    Assistant,
}

/// One block of a message. Serialized only into a suspended run's record (`run::suspend`).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text; `cache` marks a cache breakpoint after it (the end of the stable prefix).
    Text {
        text: String,
        cache: bool,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
    /// The model's visible reasoning. `raw` is the block as received (with its `signature`),
    /// which Anthropic requires back unchanged during tool use.
    Thinking {
        text: String,
        raw: Option<Value>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Message {
    pub speaker: Speaker,
    pub content: Vec<Block>,
    /// For assistant messages: the content exactly as the provider sent it, echoed back as is.
    pub raw: Option<Value>,
}

impl Message {
    pub fn user(content: Vec<Block>) -> Self {
        Self {
            speaker: Speaker::User,
            content,
            raw: None,
        }
    }

    /// The text blocks, in order.
    pub fn texts(&self) -> Vec<&str> {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A request for one model turn.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Request {
    pub model: String,
    /// The stable system prompt (cached).
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub thinking_budget: u32,
    /// Offer the tools but forbid calling them (the closing summary after a limit).
    pub tool_choice_none: bool,
    /// Lifetime of the cache entries this request writes (`None`: the provider's default, 5m).
    pub cache_ttl: Option<CacheTtl>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    /// Anthropic paused a long turn; send the conversation back to continue.
    PauseTurn,
    Refusal,
    ContextWindowExceeded,
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub message: Message,
    pub stop: StopReason,
    pub usage: Usage,
    pub model: String,
}

impl Response {
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.message.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    pub fn text(&self) -> String {
        self.message.texts().join("\n\n")
    }
}

pub use futures::future::BoxFuture;

/// One model API. `send` makes exactly one HTTP attempt; `complete` adds retries.
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Response, ProviderError>>;
}

/// An API key that never prints.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// How the shared loop retries.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Told of every retry (with the wait and why).
    pub progress: crate::base::progress::Progress,
}

impl RetryPolicy {
    pub fn from_config(cfg: &ProviderConfig) -> Self {
        Self {
            max_retries: cfg.max_retries,
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            progress: Default::default(),
        }
    }
}

/// Makes rustls use ring (reqwest is built without a default crypto provider, to avoid aws-lc's
/// cmake build). Called before any HTTPS client is made; later calls do nothing.
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[expect(
            clippy::let_underscore_must_use,
            reason = "fails only when a provider is installed already, which is all this wants"
        )]
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Builds the configured provider. The key is read from the environment now; a missing key is
/// reported at the first call (so `tabd run` starts, and pauses model calls, without one). Every
/// error it returns has the environment's secrets written back as `${VAR}` (a `${VAR}` in
/// `base_url`'s path is in every URL an error quotes, and a server may echo the path).
pub fn build(cfg: &ProviderConfig, env: &Env) -> Result<Arc<dyn Provider>, BuildError> {
    if cfg.kind != ProviderKind::Command {
        // Found now, not as a failed request per run: an edited config with such a URL is
        // refused whole on reload. The URL itself is not quoted (it may hold a secret).
        reqwest::Url::parse(&cfg.base_url).map_err(BuildError::BadBaseUrl)?;
    }
    let key = env.get(&cfg.api_key_env).map(Secret::new);
    install_tls();
    let client = reqwest::Client::builder()
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout.min(Duration::from_secs(30)))
        .user_agent(concat!("tabd/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            ProviderError::Transport {
                provider: cfg.kind.as_str(),
                url: crate::base::text::display_url(&cfg.base_url),
                message: crate::base::text::scrub_url(&e.to_string(), &cfg.base_url),
            }
            .redacted(&env.redactor())
        })?;
    let inner: Arc<dyn Provider> = match cfg.kind {
        ProviderKind::Anthropic => Arc::new(
            AnthropicProvider::new(client, cfg, key)
                .with_env_file(crate::base::environment::env_file_path(env).map(|p| p.display().to_string())),
        ),
        ProviderKind::Openai => Arc::new(OpenAiProvider::new(client, cfg, key)),
        ProviderKind::Command => Arc::new(NoApi),
    };
    Ok(Arc::new(Redacted {
        inner,
        env: env.clone(),
    }))
}

/// The longest `try_key` waits for the provider's answer.
pub const TRY_KEY_WITHIN: Duration = Duration::from_secs(30);

/// One request to the configured provider, as cheap as a request gets (the word `ping`, an
/// answer of at most one token, no tools, no thinking, no retry), to learn whether it takes the
/// key and knows the model: `tabd doctor`'s key check. The answer waits `TRY_KEY_WITHIN` at most
/// (the configured `timeout_s` is for long turns). Its errors are redacted, as `build`'s.
pub async fn try_key(cfg: &ProviderConfig, env: &Env) -> Result<(), BuildError> {
    let quick = ProviderConfig {
        timeout: cfg.timeout.min(TRY_KEY_WITHIN),
        max_retries: 0,
        ..cfg.clone()
    };
    let provider = build(&quick, env)?;
    let req = Request {
        model: quick.model.clone(),
        system: String::new(),
        messages: vec![Message::user(vec![Block::Text {
            text: "ping".into(),
            cache: false,
        }])],
        tools: Vec::new(),
        max_tokens: 1,
        temperature: None,
        thinking_budget: 0,
        tool_choice_none: false,
        cache_ttl: None,
    };
    provider.send(&req).await?;
    Ok(())
}

/// Why the configured provider cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("[provider] base_url is not a URL ({0})")]
    BadBaseUrl(url::ParseError),
    #[error(transparent)]
    Client(#[from] ProviderError),
}

/// A provider whose errors never hold a secret of the environment.
struct Redacted {
    inner: Arc<dyn Provider>,
    env: Env,
}

impl Provider for Redacted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async move {
            self.inner
                .send(req)
                .await
                .map_err(|e| e.redacted(&self.env.redactor()))
        })
    }
}

/// Stands in for the API provider when `kind = "command"`: runs go through `run_turn` instead,
/// so nothing ever calls it.
pub struct NoApi;

impl Provider for NoApi {
    fn name(&self) -> &'static str {
        "command"
    }

    fn send<'a>(&'a self, _req: &'a Request) -> BoxFuture<'a, Result<Response, ProviderError>> {
        Box::pin(async {
            Err(ProviderError::BadResponse {
                provider: "command",
                message: "kind = \"command\" runs an agent CLI, not an API".into(),
            })
        })
    }
}

/// Sends `req`, retrying what is worth retrying (docs/spec.md §10) with exponential backoff and
/// jitter, honouring `retry-after`, and never waiting past `deadline`.
pub async fn complete(
    provider: &dyn Provider,
    req: &Request,
    policy: &RetryPolicy,
    deadline: Instant,
) -> Result<Response, ProviderError> {
    // When the deadline cuts a retry short, the person needs the failure that made tabd retry
    // (HTTP 503, a refused connection), not only "the deadline passed".
    let last_failure: std::sync::Mutex<Option<ProviderError>> = std::sync::Mutex::new(None);
    let deadline_or_last = || {
        last_failure
            .lock()
            .ok()
            .and_then(|mut last| last.take())
            .unwrap_or(ProviderError::Deadline {
                provider: provider.name(),
            })
    };
    let attempt = || async {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(deadline_or_last());
        }
        match tokio::time::timeout(remaining, provider.send(req)).await {
            Ok(Err(e)) => {
                if let Ok(mut last) = last_failure.lock() {
                    *last = Some(e.clone());
                }
                Err(e)
            }
            Ok(ok) => ok,
            Err(_) => Err(deadline_or_last()),
        }
    };
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_factor(2.0)
        .with_max_times(policy.max_retries as usize)
        .with_jitter();
    attempt
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(ProviderError::is_retryable)
        .adjust(|err, delay| {
            // `None` means the backoff gave up (max_retries); retry-after never extends that.
            let delay = delay?;
            let delay = err
                .retry_after()
                .map_or(delay, |ra| ra.max(Duration::from_millis(1)));
            (Instant::now() + delay < deadline).then_some(delay)
        })
        .notify(|err, delay| {
            tracing::warn!("{err}; retrying in {:.1}s", delay.as_secs_f64());
            policy.progress.emit(crate::base::progress::Step::Retrying {
                wait: delay,
                why: crate::base::text::one_line(&err.to_string(), 120),
            });
        })
        .await
}
