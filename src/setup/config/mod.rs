//! Configuration (docs/spec.md §11): one TOML file, every key optional, unknown keys rejected with
//! their line, `${VAR}` expanded from the environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono_tz::Tz;
use serde::Deserialize;
use toml::Spanned;

pub mod cluster;
pub mod hooks;
pub mod http;
pub mod log;
pub mod mcp;
pub mod notify;
pub mod profile;
pub mod sandbox;
pub mod telemetry;
pub mod vaults;

use crate::base::environment::Env;
use crate::base::text::LineIndex;
use crate::formats::schedule::{parse_tz, system_tz};

/// A config problem, printed as `path:line: error: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: error: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    #[default]
    Anthropic,
    Openai,
    /// An agent CLI (claude, codex, gemini) runs the turn, with tabd's tools over MCP (docs/spec.md §16).
    Command,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
            Self::Command => "command",
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    /// A path, or a `[vault]` table (`vaults`).
    vault: Option<Spanned<toml::Value>>,
    vaults: std::collections::BTreeMap<Spanned<String>, vaults::RawSettings>,
    timezone: Option<Spanned<String>>,
    provider: RawProvider,
    limits: Limits,
    inbox: InboxConfig,
    approvals: ApprovalsConfig,
    journal: JournalConfig,
    sandbox: SandboxConfig,
    context: ContextConfig,
    daemon: RawDaemon,
    prices: std::collections::BTreeMap<String, crate::base::cost::Price>,
    notify: notify::NotifyConfig,
    mcp: std::collections::BTreeMap<Spanned<String>, crate::setup::config::mcp::RawServer>,
    profiles: std::collections::BTreeMap<String, crate::setup::config::profile::RawProfile>,
    cluster: Option<Spanned<cluster::RawCluster>>,
    log: log::RawLog,
    telemetry: Option<Spanned<telemetry::RawTelemetry>>,
    http: Option<Spanned<http::RawHttp>>,
    hooks: Option<Spanned<hooks::RawHooks>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawProvider {
    kind: ProviderKind,
    model: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    max_tokens: Option<u32>,
    timeout_s: Option<u64>,
    max_retries: Option<u32>,
    thinking_budget: Option<u32>,
    temperature: Option<f64>,
    cache_ttl: Option<crate::base::cost::CacheTtl>,
    /// For `kind = "command"`: a built-in profile (claude, codex, gemini) or a `[profiles.NAME]`.
    profile: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawDaemon {
    shutdown_grace_s: Option<u64>,
    host: Option<Spanned<String>>,
}

/// The model provider, resolved (docs/spec.md §10).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub model: String,
    pub base_url: String,
    pub api_key_env: String,
    pub max_tokens: u32,
    pub timeout: Duration,
    pub max_retries: u32,
    pub thinking_budget: u32,
    pub temperature: Option<f64>,
    /// Lifetime of prompt-cache entries; `None`: chosen per role from its schedule (docs/spec.md §17).
    pub cache_ttl: Option<crate::base::cost::CacheTtl>,
    /// For `kind = "command"`: the agent CLI to run.
    pub profile: Option<crate::setup::config::profile::Profile>,
}

impl ProviderConfig {
    /// What to tell the person when the provider needs a key that is not set (the Anthropic
    /// API does; an OpenAI-compatible local server may not): said by `validate` and `tabd run`.
    /// `env` is the process's environment with the env file under it, as every command reads
    /// it, so this says the key is in neither.
    pub fn missing_key(&self, env: &Env) -> Option<String> {
        (self.kind == ProviderKind::Anthropic && env.get(&self.api_key_env).is_none()).then(|| {
            let file = crate::base::environment::env_file_path(env)
                .map_or_else(|| "~/.config/tabd/env".to_string(), |p| p.display().to_string());
            format!(
                "{key} is not set, neither in tabd's environment nor in {file}, so model calls will pause until it is; put `{key}=…` in {file} (the service and every tabd command read it, and a running tabd reads it again when you save it) or export it (see docs/providers.md)",
                key = self.api_key_env
            )
        })
    }
}

/// Limits that stop runaway loops and bills (docs/spec.md §6). Roles may override most of them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_tool_calls: u32,
    pub max_tokens_per_run: u64,
    /// Per role, per local day.
    pub daily_token_budget: u64,
    /// All roles together, per local day.
    pub global_daily_token_budget: u64,
    pub max_runs_per_day: u32,
    #[serde(with = "humantime_serde")]
    pub min_interval: Duration,
    pub max_chain_depth: u32,
    pub max_concurrent_runs: u32,
    /// A run that takes longer than this fails (its notes count an attempt).
    #[serde(with = "humantime_serde")]
    pub run_deadline: Duration,
    /// Dollars one run may spend (docs/spec.md §17); none = no limit.
    pub max_cost_usd: Option<f64>,
    /// Dollars per role, per local day; none = no limit.
    pub daily_cost_budget_usd: Option<f64>,
    /// Dollars all roles together, per local day; none = no limit.
    pub global_daily_cost_budget_usd: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tool_calls: 30,
            max_tokens_per_run: 200_000,
            daily_token_budget: 2_000_000,
            global_daily_token_budget: 2_000_000,
            max_runs_per_day: 48,
            min_interval: Duration::from_secs(120),
            max_chain_depth: 3,
            max_concurrent_runs: 2,
            run_deadline: Duration::from_secs(600),
            max_cost_usd: None,
            daily_cost_budget_usd: None,
            global_daily_cost_budget_usd: None,
        }
    }
}

/// Approval notes (docs/spec.md §15).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// A pending approval older than this expires and can no longer be approved.
    #[serde(with = "humantime_serde")]
    pub expire_after: Duration,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            expire_after: Duration::from_secs(48 * 3600),
        }
    }
}

/// `[sandbox]` (docs/spec.md §20): what happens where the kernel cannot sandbox children.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Refuse to start a child without a sandbox (default: start it, and say so once).
    pub require: bool,
}

/// The undo journal (docs/spec.md §19): how long and how much of it is kept.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JournalConfig {
    /// Journals of runs older than this many days are dropped.
    pub keep_days: u32,
    /// The journal's most size on disk, in MiB; the oldest runs go first.
    pub max_mib: u64,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            keep_days: 30,
            max_mib: 200,
        }
    }
}

/// Inbox behaviour (docs/spec.md §5).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InboxConfig {
    pub settle_ms: u64,
    /// How long a note typed in the inbox itself (it began empty, as Obsidian's `Untitled.md`
    /// does, or was renamed there) must stay unchanged: a person pauses longer than a program.
    pub typing_settle_s: u64,
    pub max_batch: usize,
    pub max_attempts: u32,
}

impl Default for InboxConfig {
    fn default() -> Self {
        Self {
            settle_ms: 5000,
            typing_settle_s: 60,
            max_batch: 20,
            max_attempts: 3,
        }
    }
}

impl InboxConfig {
    /// The settle times of `ready::Readiness`: a program's write, a person's typing.
    pub fn settle(&self) -> (Duration, Duration) {
        (
            Duration::from_millis(self.settle_ms),
            Duration::from_secs(self.typing_settle_s).max(Duration::from_millis(self.settle_ms)),
        )
    }
}

/// Prompt context caps (docs/spec.md §7).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    pub max_file_bytes: usize,
    pub max_context_bytes: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            max_file_bytes: 64 * 1024,
            max_context_bytes: 400 * 1024,
        }
    }
}

impl DaemonConfig {
    /// This machine's name for `runs_on`: the configured one, else the host name.
    pub fn host(&self) -> String {
        self.host
            .clone()
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    pub shutdown_grace: Duration,
    /// This machine's name for `runs_on`; default: the host name.
    pub host: Option<String>,
}

/// The whole configuration, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it came from, if any.
    pub path: Option<PathBuf>,
    pub vault: Option<PathBuf>,
    pub timezone: Tz,
    pub provider: ProviderConfig,
    pub limits: Limits,
    pub inbox: InboxConfig,
    pub approvals: ApprovalsConfig,
    pub journal: JournalConfig,
    pub sandbox: SandboxConfig,
    pub context: ContextConfig,
    pub daemon: DaemonConfig,
    /// Prices per model (built in, with `[prices."MODEL"]` on top).
    pub prices: crate::base::cost::PriceBook,
    /// MCP servers by name (docs/spec.md §14).
    pub mcp: std::collections::BTreeMap<String, crate::setup::config::mcp::ServerConfig>,
    /// Where tabd reaches the person (docs/spec.md §22).
    pub notify: notify::NotifyConfig,
    /// The other devices of this vault (docs/spec.md §23); `None`: this daemon is the only one.
    pub cluster: Option<cluster::ClusterConfig>,
    /// Where the daily run log goes (docs/spec.md §26), for every vault that says nothing of its own.
    pub log: log::LogConfig,
    /// What belongs to each vault (`[vault]`, `[vaults."PATH"]`): its layout and log.
    pub vaults: vaults::Vaults,
    /// Where traces go (docs/spec.md §25); `None`: no exporter, no spans.
    pub telemetry: Option<telemetry::TelemetryConfig>,
    /// Webhooks that start roles (docs/spec.md §27); `None`: no server.
    pub http: Option<http::HttpConfig>,
    /// The person's programs around tool calls and at each run's end (docs/spec.md §28).
    pub hooks: hooks::HooksConfig,
}

impl Config {
    /// The settings of the vault at `root` (canonical): its own entry, else the defaults — tabd's
    /// folders at its root, the run log in `[log] folder`.
    pub fn for_vault(&self, root: &Path) -> vaults::VaultSettings {
        let own = self.vaults.of(root).cloned().unwrap_or_default();
        let log = own.log.clone().or_else(|| match own.layout.home() {
            // `[log] folder` was written for tabd's folders at the root: under a home the log
            // goes with them, unless the person moved it.
            Some(_) if !self.log.set => Some(own.layout.daily()),
            _ => Some(self.log.folder.clone()),
        });
        vaults::VaultSettings { log, ..own }
    }
}

impl Default for Config {
    fn default() -> Self {
        match parse("", Path::new("<defaults>"), &Env::default(), None) {
            Ok(c) => c,
            Err(e) => panic!("invariant: the empty config is valid, but got {e}"),
        }
    }
}

/// Where the config comes from: `--config`, else `$TABD_CONFIG`, else the XDG config dir.
/// The flag says whether the person named it (then it must exist).
pub fn locate(cli: Option<&Path>, env: &Env) -> Option<(PathBuf, bool)> {
    if let Some(p) = cli {
        return Some((p.to_path_buf(), true));
    }
    if let Some(p) = env.get("TABD_CONFIG") {
        return Some((PathBuf::from(p), true));
    }
    // `directories` reads $XDG_CONFIG_HOME / $HOME from the process.
    let base = match env.get("XDG_CONFIG_HOME") {
        Some(xdg) => PathBuf::from(xdg),
        None => directories::BaseDirs::new()?.config_dir().to_path_buf(),
    };
    Some((base.join("tabd").join("config.toml"), false))
}

/// Loads the config from where `locate` says; a default location that does not exist gives the
/// defaults.
pub fn load(cli: Option<&Path>, env: &Env) -> Result<Config, ConfigError> {
    let Some((path, explicit)) = locate(cli, env) else {
        return parse("", Path::new("<defaults>"), env, None);
    };
    match crate::base::vault::read_regular_path(&path, 16 * 1024 * 1024) {
        Ok(text) => parse(&text, &path, env, Some(path.clone())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
            parse("", Path::new("<defaults>"), env, None)
        }
        Err(e) => Err(ConfigError {
            path: path.clone(),
            line: None,
            message: format!(
                "cannot read the config file ({e}); check the path given by --config or TABD_CONFIG"
            ),
        }),
    }
}

/// For commands that only read (`status`, `logs`, `approvals`, …): the config, or — when it has
/// an error — the defaults with whatever of `vault` and `timezone` can still be read from it, and
/// the error, which the command prints on top. A typo in `[limits]` must not lock the person out
/// of seeing what tabd is doing.
pub fn load_readable(cli: Option<&Path>, env: &Env) -> (Config, Option<ConfigError>) {
    let error = match load(cli, env) {
        Ok(c) => return (c, None),
        Err(e) => e,
    };
    let defaults = || parse("", Path::new("<defaults>"), env, None);
    let text = crate::base::vault::read_regular_path(&error.path, 16 * 1024 * 1024).unwrap_or_default();
    // TOML that parses but holds a bad value still names the vault and time zone.
    let table: toml::Table = toml::from_str(&text).unwrap_or_default();
    let salvage = |keys: &[&str]| {
        let kept: toml::Table = keys
            .iter()
            .filter_map(|k| {
                table
                    .get(*k)
                    .filter(|v| v.is_str())
                    .map(|v| (k.to_string(), v.clone()))
            })
            .collect();
        toml::to_string(&kept)
            .ok()
            .and_then(|t| parse(&t, &error.path, env, Some(error.path.clone())).ok())
    };
    let config = salvage(&["vault", "timezone"])
        .or_else(|| salvage(&["vault"]))
        .or_else(|| defaults().ok())
        .unwrap_or_default();
    (config, Some(error))
}

/// serde's type errors (`invalid type: string "many", expected u32`) in words a person can act
/// on; other messages as they are.
fn plain_words(message: &str) -> String {
    // toml stops at 80 levels of arrays and inline tables (and at 80-part keys), in its own words.
    if message.contains("max recursion depth met") || message == "recursion limit" {
        return "values nest too deep: tabd's config reader stops at 80 levels of arrays and inline \
                tables inside each other, or a key of 80 dotted parts"
            .to_string();
    }
    let Some(rest) = message.strip_prefix("invalid type: ") else {
        return message.to_string();
    };
    let Some((got, want)) = rest.split_once(", expected ") else {
        return message.to_string();
    };
    let want = match want.trim() {
        w if ["u8", "u16", "u32", "u64", "usize", "i32", "i64"].contains(&w) => {
            "a whole number, like 30 (no quotes)".to_string()
        }
        "f64" | "f32" => "a number, like 0.5 (no quotes)".to_string(),
        "a boolean" => "true or false (no quotes)".to_string(),
        "a string" => "text in quotes, like \"2m\"".to_string(),
        other => other.to_string(),
    };
    format!("expected {want}, but found {got}")
}

/// What resolving one config file needs: where problems are (for `path:line`) and the
/// environment `${VAR}` reads from.
struct Reader<'a> {
    path: &'a Path,
    lines: LineIndex,
    env: &'a Env,
}

impl Reader<'_> {
    /// A problem at `span`; a value expanded from `${VAR}` that it quotes is written back as
    /// `${VAR}` (the message reaches the terminal, the daily note and the status).
    fn err_at(&self, span: Option<std::ops::Range<usize>>, message: String) -> ConfigError {
        ConfigError {
            path: self.path.to_path_buf(),
            line: span.map(|s| self.lines.line_of(s.start)),
            message: self.env.redactor().apply(&message),
        }
    }

    fn expand(&self, s: &Spanned<String>) -> Result<String, ConfigError> {
        self.env
            .expand(s.get_ref())
            .map_err(|m| self.err_at(Some(s.span()), m.to_string()))
    }
}

/// `[notify]`'s settings that serde cannot check alone.
fn check_notify(r: &Reader<'_>, notify: &notify::NotifyConfig) -> Result<(), ConfigError> {
    notify.quiet().map_err(|m| r.err_at(None, m.to_string()))?;
    notify.replies().map_err(|m| r.err_at(None, m.to_string()))?;
    if let Some(t) = &notify.telegram {
        let at = Some(t.token.span());
        t.check().map_err(|m| r.err_at(at, m.to_string()))?;
        // The variable must be set now: a bot that cannot log in is said at its line, at start.
        r.expand(&t.token)?;
    }
    if notify.command.first().is_some_and(|c| c.trim().is_empty()) {
        return Err(r.err_at(
            None,
            "[notify] command: the first word is the program to run".into(),
        ));
    }
    Ok(())
}

/// Parses config `text` (from `path`, for messages).
pub fn parse(text: &str, path: &Path, env: &Env, source: Option<PathBuf>) -> Result<Config, ConfigError> {
    let r = Reader {
        path,
        lines: LineIndex::new(text),
        env,
    };
    let raw: RawConfig =
        toml::from_str(text).map_err(|e| r.err_at(e.span(), plain_words(e.message().trim())))?;
    let timezone = match &raw.timezone {
        Some(tz) => parse_tz(&r.expand(tz)?).map_err(|m| r.err_at(Some(tz.span()), m.to_string()))?,
        None => system_tz(),
    };
    let (vault, per_vault) = resolve_vaults(&r, raw.vault.as_ref(), raw.vaults)?;
    let provider = resolve_provider(&r, &raw.provider, &raw.profiles)?;
    if raw.limits.max_concurrent_runs == 0 {
        return Err(r.err_at(None, "[limits] max_concurrent_runs must be at least 1".into()));
    }
    if raw.inbox.max_batch == 0 {
        return Err(r.err_at(None, "[inbox] max_batch must be at least 1".into()));
    }
    let daemon = DaemonConfig {
        shutdown_grace: Duration::from_secs(raw.daemon.shutdown_grace_s.unwrap_or(20)),
        host: raw.daemon.host.as_ref().map(|h| r.expand(h)).transpose()?,
    };
    check_notify(&r, &raw.notify)?;
    let mut mcp = std::collections::BTreeMap::new();
    for (name, server) in raw.mcp {
        let resolved = mcp::resolve(&name, server).map_err(|e| r.err_at(e.span, e.message))?;
        mcp.insert(resolved.name.clone(), resolved);
    }
    let cluster = raw.cluster.map(|c| resolve_cluster(&r, c)).transpose()?;
    let log = log::resolve(&raw.log).map_err(|(span, m)| r.err_at(span, m))?;
    let telemetry = raw.telemetry.map(|t| resolve_telemetry(&r, t)).transpose()?;
    let http = raw.http.map(|h| resolve_http(&r, h)).transpose()?;
    let hooks = match raw.hooks {
        Some(h) => {
            let table = h.span();
            hooks::resolve(h.into_inner(), env).map_err(|(span, m)| r.err_at(span.or(Some(table)), m))?
        }
        None => hooks::HooksConfig::default(),
    };
    Ok(Config {
        path: source,
        vault,
        timezone,
        provider,
        limits: raw.limits,
        inbox: raw.inbox,
        approvals: raw.approvals,
        journal: raw.journal,
        sandbox: raw.sandbox,
        context: raw.context,
        daemon,
        prices: crate::base::cost::PriceBook::new(raw.prices),
        mcp,
        notify: raw.notify,
        cluster,
        log,
        vaults: per_vault,
        telemetry,
        http,
        hooks,
    })
}

/// `vault` (a path, or a `[vault]` table) and `[vaults."PATH"]`: the vault to use when none is
/// given, and each vault's own settings.
fn resolve_vaults(
    r: &Reader<'_>,
    vault: Option<&Spanned<toml::Value>>,
    raw: std::collections::BTreeMap<Spanned<String>, vaults::RawSettings>,
) -> Result<(Option<PathBuf>, vaults::Vaults), ConfigError> {
    let expand = |s: &str, span: std::ops::Range<usize>| -> Result<String, vaults::Problem> {
        r.env
            .expand(s)
            .map(|v| expand_home(&v, r.env).to_string_lossy().into_owned())
            .map_err(|m| (Some(span), m.to_string()))
    };
    let (path, named) = match vault {
        Some(v) => vaults::read_vault(v, &expand).map_err(|(span, m)| r.err_at(span, m))?,
        None => (None, None),
    };
    let path = path.map(PathBuf::from);
    let mut entries: Vec<(PathBuf, vaults::VaultSettings)> = vaults::read_vaults(raw, &expand)
        .map_err(|(span, m)| r.err_at(span, m))?
        .into_iter()
        .map(|(p, s)| (PathBuf::from(p), s))
        .collect();
    if let (Some(p), Some(settings)) = (&path, named) {
        entries.insert(0, (p.clone(), settings));
    }
    Ok((path, vaults::Vaults { entries }))
}

/// `[telemetry]`, with its `${VAR}`s expanded as secrets and its problems at their lines.
fn resolve_telemetry(
    r: &Reader<'_>,
    raw: Spanned<telemetry::RawTelemetry>,
) -> Result<telemetry::TelemetryConfig, ConfigError> {
    let table = raw.span();
    let expand = |s: &Spanned<String>| {
        r.expand(s).map_err(|e| telemetry::Problem {
            span: Some(s.span()),
            message: e.message,
        })
    };
    telemetry::resolve(raw.into_inner(), &expand)
        .map_err(|p| r.err_at(p.span.or(Some(table.clone())), p.message))
}

/// `[http]`, with its hooks' secrets expanded (secrets) and its problems at their lines.
fn resolve_http(r: &Reader<'_>, raw: Spanned<http::RawHttp>) -> Result<http::HttpConfig, ConfigError> {
    let table = raw.span();
    let expand = |s: &Spanned<String>| {
        r.expand(s).map_err(|e| http::Problem {
            span: Some(s.span()),
            message: e.message,
        })
    };
    http::resolve(raw.into_inner(), &expand).map_err(|p| r.err_at(p.span.or(Some(table.clone())), p.message))
}

/// `[cluster]`, with its `${VAR}`s expanded as secrets and its problems at their lines.
fn resolve_cluster(
    r: &Reader<'_>,
    raw: Spanned<cluster::RawCluster>,
) -> Result<cluster::ClusterConfig, ConfigError> {
    let table = raw.span();
    let expand = |s: &Spanned<String>| {
        r.expand(s).map_err(|e| cluster::Problem {
            span: Some(s.span()),
            message: e.message,
        })
    };
    let home = |p: &str| expand_home(p, r.env);
    cluster::resolve(raw.into_inner(), &expand, &home, cluster::host_device())
        .map_err(|p| r.err_at(p.span.or(Some(table.clone())), p.message))
}

/// `[provider]`, with each kind's defaults.
fn resolve_provider(
    r: &Reader<'_>,
    p: &RawProvider,
    profiles: &std::collections::BTreeMap<String, crate::setup::config::profile::RawProfile>,
) -> Result<ProviderConfig, ConfigError> {
    let model = match &p.model {
        Some(m) => r.expand(m)?,
        None => match p.kind {
            ProviderKind::Anthropic => "claude-sonnet-4-5".to_string(),
            // Local servers name models freely; llama.cpp ignores the name.
            ProviderKind::Openai => "default".to_string(),
            // The CLI's own default (its price comes from the CLI when it reports one).
            ProviderKind::Command => String::new(),
        },
    };
    let base_url = match &p.base_url {
        Some(u) => {
            let url = r.expand(u)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(r.err_at(
                    Some(u.span()),
                    format!("base_url \"{url}\" must start with http:// or https://"),
                ));
            }
            url.trim_end_matches('/').to_string()
        }
        None => match p.kind {
            ProviderKind::Anthropic | ProviderKind::Command => "https://api.anthropic.com".to_string(),
            ProviderKind::Openai => "http://127.0.0.1:11434/v1".to_string(),
        },
    };
    let api_key_env = match &p.api_key_env {
        Some(k) => r.expand(k)?,
        None => match p.kind {
            ProviderKind::Anthropic | ProviderKind::Command => "ANTHROPIC_API_KEY".to_string(),
            ProviderKind::Openai => "OPENAI_API_KEY".to_string(),
        },
    };
    if let Some(t) = p.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
        return Err(r.err_at(
            None,
            format!("[provider] temperature must be between 0 and 2 (got {t})"),
        ));
    }
    let profile = match (p.kind, &p.profile) {
        (ProviderKind::Command, None) => return Err(r.err_at(
            None,
            "[provider] kind = \"command\" needs a profile: claude, codex, gemini or a [profiles.NAME] table"
                .into(),
        )),
        (ProviderKind::Command, Some(name)) => Some(
            crate::setup::config::profile::resolve(&r.expand(name)?, profiles, r.env)
                .map_err(|m| r.err_at(Some(name.span()), m.to_string()))?,
        ),
        (_, Some(name)) => {
            return Err(r.err_at(
                Some(name.span()),
                "[provider] profile is only for kind = \"command\"".into(),
            ))
        }
        (_, None) => None,
    };
    Ok(ProviderConfig {
        kind: p.kind,
        model,
        base_url,
        api_key_env,
        max_tokens: p.max_tokens.unwrap_or(4096),
        timeout: Duration::from_secs(p.timeout_s.unwrap_or(120)),
        max_retries: p.max_retries.unwrap_or(4),
        thinking_budget: p.thinking_budget.unwrap_or(0),
        temperature: p.temperature,
        cache_ttl: p.cache_ttl,
        profile,
    })
}

/// `~/x` → `$HOME/x`.
pub fn expand_home(path: &str, env: &Env) -> PathBuf {
    match (path.strip_prefix("~/"), env.get("HOME")) {
        (Some(rest), Some(home)) => Path::new(home).join(rest),
        _ if path == "~" => env.get("HOME").map_or_else(|| PathBuf::from(path), PathBuf::from),
        _ => PathBuf::from(path),
    }
}

/// The vault: `--vault`, else `$TABD_VAULT`, else `vault` in the config.
pub fn resolve_vault(cli: Option<&Path>, env: &Env, config: &Config) -> Result<PathBuf, NoVault> {
    let chosen = cli
        .map(Path::to_path_buf)
        .or_else(|| env.get("TABD_VAULT").map(|v| expand_home(v, env)))
        .or_else(|| config.vault.clone())
        .ok_or(NoVault::NotGiven)?;
    if !chosen.is_dir() {
        let near = near_vaults(&chosen);
        return Err(NoVault::NotAFolder { path: chosen, near });
    }
    Ok(chosen)
}

/// The folders beside `path` whose names are a likely typo of its name and that are tabd vaults
/// (they have `roles/`): what `--vault ~/Valt` probably meant. Nearest first, at most three; a
/// folder with very many entries is looked through only so far.
fn near_vaults(path: &Path) -> Vec<PathBuf> {
    const LOOKED_AT: usize = 10_000;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let names: Vec<String> = entries
        .take(LOOKED_AT)
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n != name)
        .collect();
    let mut near: Vec<(usize, PathBuf)> = names
        .iter()
        .filter(|n| crate::base::text::did_you_mean(name, [n.as_str()]).is_some())
        .map(|n| {
            (
                strsim::levenshtein(&name.to_lowercase(), &n.to_lowercase()),
                parent.join(n),
            )
        })
        .filter(|(_, p)| p.join(crate::base::vault::layout::TABD).is_dir())
        .collect();
    near.sort();
    near.into_iter().take(3).map(|(_, p)| p).collect()
}

/// Why there is no vault to open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoVault {
    #[error(
        "no vault given: pass --vault DIR, set TABD_VAULT, or set `vault = \"…\"` in the config file \
         (create one with `tabd init DIR`)"
    )]
    NotGiven,
    #[error("the vault {} is not a folder; {}", path.display(), not_a_folder_advice(path, near))]
    NotAFolder {
        path: PathBuf,
        /// Vaults beside it with a near name (`near_vaults`).
        near: Vec<PathBuf>,
    },
}

/// A vault beside it with a near name first (a typo is likelier than a new vault), then init.
fn not_a_folder_advice(path: &Path, near: &[PathBuf]) -> String {
    let init = format!("`tabd init {}`", path.display());
    match near {
        [] => format!("create it with {init}"),
        [one] => format!(
            "did you mean {} (a tabd vault)? Or, for a new vault, create it with {init}",
            one.display()
        ),
        many => format!(
            "did you mean one of these tabd vaults: {}? Or, for a new vault, create it with {init}",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::frontmatter::hostile;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(hostile::config(96))]
        /// Deep, huge and malformed TOML: a config, or an error naming the file (and a line inside
        /// it when there is one) in words; never a panic or an overflow.
        #[test]
        fn any_config_text_is_read_or_refused_with_a_sentence(text in hostile::any_toml()) {
            if let Err(e) = parse(&text, Path::new("config.toml"), &env(), None) {
                prop_assert_eq!(e.path.as_path(), Path::new("config.toml"));
                prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= text.lines().count().max(1)), "{e}");
                prop_assert!(e.message.len() > 10, "{e}");
            }
        }
    }

    /// A case the property test found: the parser's error is at the end of the text, after its
    /// final line break; it is named on the last line (2), not on a line 3 the file lacks.
    #[test]
    fn an_error_at_the_end_of_the_file_is_on_its_last_line() {
        let text = "#[limits]\n\"\"\"[limits]\n";
        let e = parse(text, Path::new("config.toml"), &env(), None).expect_err("not TOML");
        assert_eq!(e.line, Some(2), "{e}");
    }

    fn env() -> Env {
        Env::from_pairs([("HOME", "/home/ana"), ("MY_MODEL", "claude-opus-4-1")])
    }

    fn parse_ok(text: &str) -> Config {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn parse_err(text: &str) -> ConfigError {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_err()
    }

    /// `[notify.telegram]`: read as written; a token written in the file, a token whose
    /// variable is not set, and a chat that is no number are each refused at their line.
    #[test]
    fn telegram_is_read_and_its_mistakes_are_said_at_their_line() {
        let with = |env: &[(&str, &str)], body: &str| {
            let text = format!("[notify]\ndesktop = false\n\n[notify.telegram]\n{body}");
            parse(
                &text,
                Path::new("config.toml"),
                &Env::from_pairs(env.iter().copied()),
                None,
            )
        };
        let ok = with(&[("TG", "1:abc")], "token = \"${TG}\"\nchat = 42\n").unwrap();
        let t = ok.notify.telegram.unwrap();
        assert_eq!(
            (t.chat, t.api(), t.obeyed()),
            (42, "https://api.telegram.org", vec![42])
        );
        let e = with(&[], "chat = 42\ntoken = \"1:abc\"\n").unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("write the variable that holds it"), "{e}");
        let e = with(&[], "token = \"${TG}\"\nchat = 42\n").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("TG"), "{e}");
        let e = with(&[("TG", "1:abc")], "token = \"${TG}\"\nchat = \"me\"\n").unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("a whole number"), "{e}");
    }

    #[test]
    fn defaults() {
        let c = parse_ok("");
        assert_eq!(c.provider.kind, ProviderKind::Anthropic);
        assert_eq!(c.provider.base_url, "https://api.anthropic.com");
        assert_eq!(c.provider.api_key_env, "ANTHROPIC_API_KEY");
        assert_eq!(c.provider.max_tokens, 4096);
        assert_eq!(c.provider.max_retries, 4);
        assert_eq!(c.limits.max_concurrent_runs, 2);
        assert_eq!(c.limits.min_interval, Duration::from_secs(120));
        assert_eq!(
            c.inbox,
            InboxConfig {
                settle_ms: 5000,
                typing_settle_s: 60,
                max_batch: 20,
                max_attempts: 3
            }
        );
        assert_eq!(c.daemon.shutdown_grace, Duration::from_secs(20));
        assert_eq!(c.approvals.expire_after, Duration::from_secs(48 * 3600));
        let c = parse_ok("[approvals]\nexpire_after = \"3d\"\n");
        assert_eq!(c.approvals.expire_after, Duration::from_secs(3 * 86400));
    }

    #[test]
    fn the_design_example_parses() {
        let c = parse_ok(
            r#"
vault = "~/Obsidian/Work"
timezone = "Europe/Lisbon"

[provider]
kind = "anthropic"
model = "${MY_MODEL}"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"
max_tokens = 4096
timeout_s = 120
max_retries = 4
thinking_budget = 0

[limits]
max_concurrent_runs = 2
min_interval = "30s"

[inbox]
settle_ms = 5000
max_batch = 20
max_attempts = 3
"#,
        );
        assert_eq!(c.vault, Some(PathBuf::from("/home/ana/Obsidian/Work")));
        assert_eq!(c.timezone, chrono_tz::Europe::Lisbon);
        assert_eq!(c.provider.model, "claude-opus-4-1");
        assert_eq!(c.limits.min_interval, Duration::from_secs(30));
    }

    #[test]
    fn openai_defaults() {
        let c = parse_ok("[provider]\nkind = \"openai\"\n");
        assert_eq!(c.provider.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(c.provider.api_key_env, "OPENAI_API_KEY");
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_line() {
        let e = parse_err("timezone = \"UTC\"\n\n[provider]\nkind = \"anthropic\"\nmodle = \"x\"\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("modle"), "{e}");
        assert!(e.to_string().starts_with("config.toml:5: error:"), "{e}");
        let e = parse_err("[limitz]\n");
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn bad_values_carry_lines() {
        let e = parse_err("\n\ntimezone = \"Mars/Olympus\"\n");
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("IANA"));
        let e = parse_err("[provider]\nkind = \"gemini\"\n");
        assert_eq!(e.line, Some(2), "{e}");
        let e = parse_err("[provider]\nmodel = \"${NOPE}\"\n");
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("NOPE"));
        let e = parse_err("[limits]\nmin_interval = \"soon\"\n");
        assert_eq!(e.line, Some(2), "{e}");
        let e = parse_err("[provider]\nbase_url = \"localhost:8080\"\n");
        assert!(e.message.contains("http://"));
        let e = parse_err("[inbox]\nsettle_ms = \"five\"\n");
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn type_errors_say_what_to_write() {
        let e = parse_err("[limits]\nmax_tool_calls = \"many\"\n");
        assert_eq!(e.line, Some(2));
        assert!(
            e.message.contains("expected a whole number, like 30") && e.message.contains("\"many\""),
            "{e}"
        );
        assert!(!e.message.contains("u32"), "no Rust type names: {e}");
    }

    #[test]
    fn prices_and_cache_ttl() {
        let c = parse_ok(
            "[provider]\ncache_ttl = \"1h\"\n[prices.\"qwen2.5\"]\ninput = 0\noutput = 0\n[prices.\"claude-sonnet-4-5\"]\ninput = 2.5\noutput = 12\ncache_read = 0.2\n",
        );
        assert_eq!(c.provider.cache_ttl, Some(crate::base::cost::CacheTtl::OneHour));
        assert_eq!(c.prices.price("qwen2.5-coder:1.5b").map(|p| p.output), Some(0.0));
        let s = c.prices.price("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!((s.input, s.cache_read, s.cache_write), (2.5, 0.2, 3.125));
        let e = parse_err("[prices.\"m\"]\ninput = 1\noutput = 2\ncache_wirte = 3\n");
        assert_eq!(e.line, Some(4), "{e}");
        let e = parse_err("[provider]\ncache_ttl = \"10m\"\n");
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn mcp_servers_are_checked_with_their_lines() {
        let c = parse_ok(
            "[mcp.memory]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]\nenv = { MEMORY_FILE_PATH = \"${HOME}/m.json\" }\nkeep_alive = true\nrisk = { read_graph = \"read\" }\n\n[mcp.tracker]\nurl = \"http://127.0.0.1:3001/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\nrequired = true\ntool_timeout_s = 5\ntask_timeout_s = 7200\n",
        );
        let m = &c.mcp["memory"];
        assert!(m.keep_alive && !m.required);
        assert_eq!(m.startup_timeout, Duration::from_secs(30));
        assert_eq!(m.task_timeout, Duration::from_secs(3600), "an hour unless said");
        assert_eq!(m.risk["read_graph"], crate::base::calls::Risk::Read);
        let crate::setup::config::mcp::Transport::Stdio { command, args, env } = &m.transport else {
            panic!()
        };
        assert_eq!((command.as_str(), args.len()), ("npx", 2));
        assert_eq!(
            env[0].1, "${HOME}/m.json",
            "secrets are expanded when the server starts"
        );
        let t = &c.mcp["tracker"];
        assert!(t.required);
        assert_eq!(t.tool_timeout, Duration::from_secs(5));
        assert_eq!(t.task_timeout, Duration::from_secs(7200));
        for (text, line) in [
            ("[mcp.x]\ncommand = \"a\"\nmodl = 1\n", 3),
            ("\n[mcp.Bad_Name]\ncommand = \"a\"\n", 2),
            ("[mcp.x]\ncommand = \"a\"\nurl = \"http://h\"\n", 2),
            ("[mcp.x]\nkeep_alive = true\n", 1),
            ("[mcp.x]\nurl = \"ftp://h\"\n", 2),
            ("[mcp.x]\ncommand = \"a\"\nrisk = { t = \"scary\" }\n", 3),
        ] {
            let e = parse_err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
        }
    }

    #[test]
    fn locate_order() {
        let e = Env::from_pairs([("TABD_CONFIG", "/etc/t.toml"), ("XDG_CONFIG_HOME", "/x")]);
        assert_eq!(
            locate(Some(Path::new("/a.toml")), &e),
            Some((PathBuf::from("/a.toml"), true))
        );
        assert_eq!(locate(None, &e), Some((PathBuf::from("/etc/t.toml"), true)));
        let e = Env::from_pairs([("XDG_CONFIG_HOME", "/x")]);
        assert_eq!(
            locate(None, &e),
            Some((PathBuf::from("/x/tabd/config.toml"), false))
        );
    }

    #[test]
    fn missing_default_file_means_defaults_but_missing_named_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Env::from_pairs([("XDG_CONFIG_HOME", dir.path().to_str().unwrap())]);
        assert!(load(None, &e).is_ok());
        let missing = dir.path().join("nope.toml");
        assert!(load(Some(&missing), &e).is_err());
    }

    #[test]
    fn vault_resolution_order() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().to_str().unwrap();
        let mut c = parse_ok("");
        c.vault = Some(PathBuf::from("/does/not/exist"));
        let e = Env::from_pairs([("TABD_VAULT", v)]);
        assert_eq!(resolve_vault(None, &e, &c).unwrap(), dir.path());
        let err = resolve_vault(None, &Env::default(), &c).unwrap_err();
        assert_eq!(
            err,
            NoVault::NotAFolder {
                path: PathBuf::from("/does/not/exist"),
                near: Vec::new()
            }
        );
        assert_eq!(
            err.to_string(),
            "the vault /does/not/exist is not a folder; create it with `tabd init /does/not/exist`"
        );
        c.vault = None;
        let err = resolve_vault(None, &Env::default(), &c).unwrap_err();
        assert_eq!(err, NoVault::NotGiven);
        assert!(err.to_string().contains("--vault"), "{err}");
    }
}
