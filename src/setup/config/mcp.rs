//! `[mcp.NAME]` tables of the config (docs/spec.md §14): how to start or reach each MCP server.
//!
//! Servers live only in the config, never in the vault: a role file can be synced from another
//! machine or edited by anyone with vault access, and a command line in it would be code
//! execution. Secrets in `env` and `headers` (`${SLACK_TOKEN}`) are read from the environment
//! when the server starts, so a missing one stops that server, not tabd.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::base::calls::Risk;
use crate::base::environment::Env;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    url: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    keep_alive: Option<bool>,
    startup_timeout_s: Option<u64>,
    tool_timeout_s: Option<u64>,
    task_timeout_s: Option<u64>,
    required: Option<bool>,
    #[serde(default)]
    risk: BTreeMap<String, Spanned<String>>,
    /// The child's sandbox (docs/spec.md §20): command servers only.
    vault: Option<Spanned<super::sandbox::VaultAccess>>,
    network: Option<Spanned<bool>>,
    #[serde(default)]
    readable: Vec<String>,
    #[serde(default)]
    writable: Vec<String>,
    #[serde(default)]
    deny_read: Vec<String>,
    #[serde(default)]
    unix_sockets: Vec<String>,
}

/// How to reach a server. Every string is as written: `${VAR}` is expanded when the server
/// starts, and shown to people only as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Started once and supervised (true) or for each run that uses it (false).
    pub keep_alive: bool,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// How long a call the server runs as a task is waited for (docs/spec.md §29), within the run's
    /// deadline.
    pub task_timeout: Duration,
    /// A run cannot go on without it: it waits (no attempt counted) while the server is down.
    pub required: bool,
    /// Tool → risk class, over the server's own hints.
    pub risk: BTreeMap<String, Risk>,
    /// What a command server may reach (docs/spec.md §20).
    pub sandbox: super::sandbox::ChildSandbox,
}

impl ServerConfig {
    /// The command line or the URL, as written (`${VAR}` unexpanded: it may be a secret).
    pub fn target(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut line = vec![command.clone()];
                line.extend(args.iter().cloned());
                line.join(" ")
            }
            Transport::Http { url, .. } => crate::base::text::display_endpoint(url),
        }
    }

    /// Every `${VAR}` the server's table uses (for `tabd validate`).
    pub fn vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut add = |s: &str| out.extend(vars_in(s));
        match &self.transport {
            Transport::Stdio { command, args, env } => {
                add(command);
                args.iter().for_each(|a| add(a));
                env.iter().for_each(|(_, v)| add(v));
            }
            Transport::Http { url, headers } => {
                add(url);
                headers.iter().for_each(|(_, v)| add(v));
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// How long a task is waited for unless `task_timeout_s` says otherwise: an hour.
pub const DEFAULT_TASK_TIMEOUT_S: u64 = 3600;

/// A problem at a byte span of the config text.
pub(crate) struct SpanError {
    pub span: Option<std::ops::Range<usize>>,
    pub message: String,
}

fn at(s: &Spanned<impl std::any::Any>, message: String) -> SpanError {
    SpanError {
        span: Some(s.span()),
        message,
    }
}

/// True for a server name tabd accepts: it becomes part of tool names the model sees
/// (`server__tool`), so it may not itself contain `__` (two servers could then offer one name).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.contains("__")
        && !name.ends_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Checks that every `${…}` in `s` is well formed; the value is read when the server starts.
fn check_vars(s: &Spanned<String>) -> Result<String, SpanError> {
    let text = s.get_ref();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(at(s, format!("`${{` without a closing `}}` in \"{text}\"")));
        };
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(at(s, format!("`${{{name}}}` is not a valid variable name")));
        }
        rest = &after[end + 1..];
    }
    Ok(text.clone())
}

/// The `${VAR}` names used in `s`.
pub fn vars_in(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    out
}

/// Checks and resolves one `[mcp.NAME]` table.
pub(crate) fn resolve(name: &Spanned<String>, raw: RawServer) -> Result<ServerConfig, SpanError> {
    let n = name.get_ref();
    if !valid_name(n) {
        return Err(at(
            name,
            format!("[mcp.{n}]: a server name may use only a-z, 0-9, `-` and `_` (at most 32; no `__` and no `_` at the end: `__` joins server and tool names, so two servers could otherwise offer the same name)"),
        ));
    }
    // `${VAR}` anywhere in a server's table is read when the server starts (so a secret never
    // sits expanded in tabd's config or reaches a log); here only its form is checked.
    let transport = match (&raw.command, &raw.url) {
        (Some(command), None) => Transport::Stdio {
            command: check_vars(command)?,
            args: raw.args.iter().map(check_vars).collect::<Result<_, _>>()?,
            env: raw
                .env
                .iter()
                .map(|(k, v)| check_vars(v).map(|v| (k.clone(), v)))
                .collect::<Result<_, _>>()?,
        },
        (None, Some(url)) => {
            let u = check_vars(url)?;
            if !(u.starts_with("http://") || u.starts_with("https://") || u.starts_with("${")) {
                return Err(at(
                    url,
                    format!("[mcp.{n}] url \"{u}\" must start with http:// or https://"),
                ));
            }
            if !raw.args.is_empty() || !raw.env.is_empty() {
                return Err(at(
                    url,
                    format!("[mcp.{n}]: `args` and `env` are for `command` servers"),
                ));
            }
            Transport::Http {
                url: u,
                headers: raw
                    .headers
                    .iter()
                    .map(|(k, v)| check_vars(v).map(|v| (k.clone(), v)))
                    .collect::<Result<_, _>>()?,
            }
        }
        (Some(c), Some(_)) => return Err(at(c, format!("[mcp.{n}] has both `command` and `url`; give one"))),
        (None, None) => {
            return Err(at(
                name,
                format!(
                    "[mcp.{n}] needs `command` (a program speaking MCP on stdio) or `url` (streamable HTTP)"
                ),
            ))
        }
    };
    if matches!(transport, Transport::Stdio { .. }) && !raw.headers.is_empty() {
        return Err(at(name, format!("[mcp.{n}]: `headers` are for `url` servers")));
    }
    let sandbox = sandbox_of(n, name, &raw, &transport)?;
    let risk = risk_of(n, &raw)?;
    Ok(ServerConfig {
        name: n.clone(),
        transport,
        keep_alive: raw.keep_alive.unwrap_or(false),
        startup_timeout: Duration::from_secs(raw.startup_timeout_s.unwrap_or(30).max(1)),
        tool_timeout: Duration::from_secs(raw.tool_timeout_s.unwrap_or(60).max(1)),
        task_timeout: Duration::from_secs(raw.task_timeout_s.unwrap_or(DEFAULT_TASK_TIMEOUT_S).max(1)),
        required: raw.required.unwrap_or(false),
        risk,
        sandbox,
    })
}

/// `risk = { tool = "class" }`, checked.
fn risk_of(n: &str, raw: &RawServer) -> Result<BTreeMap<String, Risk>, SpanError> {
    let mut risk = BTreeMap::new();
    for (tool, class) in &raw.risk {
        let r = Risk::parse(class.get_ref()).ok_or_else(|| {
            at(
                class,
                format!(
                    "[mcp.{n}] risk of `{tool}`: \"{}\" is not a risk class; use read, write, network or destructive",
                    class.get_ref()
                ),
            )
        })?;
        risk.insert(tool.clone(), r);
    }
    Ok(risk)
}

/// A command server's sandbox keys (an HTTP server runs elsewhere: refused there).
fn sandbox_of(
    n: &str,
    name: &Spanned<String>,
    raw: &RawServer,
    transport: &Transport,
) -> Result<super::sandbox::ChildSandbox, SpanError> {
    let sandboxed = raw.vault.is_some()
        || raw.network.is_some()
        || !raw.readable.is_empty()
        || !raw.writable.is_empty()
        || !raw.deny_read.is_empty()
        || !raw.unix_sockets.is_empty();
    if matches!(transport, Transport::Http { .. }) && sandboxed {
        return Err(at(
            name,
            format!(
                "[mcp.{n}]: `vault`, `network`, `readable`, `writable`, `deny_read` and `unix_sockets` sandbox a \
                 program tabd starts; an HTTP server runs elsewhere (its connection is tabd's own)"
            ),
        ));
    }
    Ok(super::sandbox::ChildSandbox {
        vault: raw.vault.as_ref().map(|v| *v.get_ref()).unwrap_or_default(),
        network: raw.network.as_ref().map(|v| *v.get_ref()).unwrap_or(true),
        readable: raw.readable.clone(),
        writable: raw.writable.clone(),
        deny_read: raw.deny_read.clone(),
        unix_sockets: raw.unix_sockets.clone(),
    })
}

/// Expands `${VAR}` in `(name, value)` pairs, at server start.
pub fn expand_pairs(pairs: &[(String, String)], env: &Env) -> Result<Vec<(String, String)>, PairError> {
    pairs
        .iter()
        .map(|(k, v)| {
            env.expand(v).map(|v| (k.clone(), v)).map_err(|source| PairError {
                name: k.clone(),
                source,
            })
        })
        .collect()
}

/// A `${VAR}` that could not be filled in, in the value of `name` (an env variable or header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {source}")]
pub struct PairError {
    pub name: String,
    pub source: crate::base::environment::ExpandError,
}
