//! `[mcp.NAME]` tables of the config (DESIGN §14): how to start or reach each MCP server.
//!
//! Servers live only in the config, never in the vault: a role file can be synced from another
//! machine or edited by anyone with vault access, and a command line in it would be code
//! execution. Secrets in `env` and `headers` (`${SLACK_TOKEN}`) are read from the environment
//! when the server starts, so a missing one stops that server, not tabd.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::calls::Risk;
use crate::environment::Env;

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
    required: Option<bool>,
    #[serde(default)]
    risk: BTreeMap<String, Spanned<String>>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout. `env` values may hold `${VAR}`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP. `headers` values may hold `${VAR}`.
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
    /// A run cannot go on without it: it waits (no attempt counted) while the server is down.
    pub required: bool,
    /// Tool → risk class, over the server's own hints.
    pub risk: BTreeMap<String, Risk>,
}

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

/// True for a server name tabd accepts: it becomes part of tool names the model sees.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Checks and resolves one `[mcp.NAME]` table.
pub(crate) fn resolve(name: &Spanned<String>, raw: RawServer, env: &Env) -> Result<ServerConfig, SpanError> {
    let n = name.get_ref();
    if !valid_name(n) {
        return Err(at(
            name,
            format!("[mcp.{n}]: a server name may use only a-z, 0-9, `-` and `_` (at most 32)"),
        ));
    }
    let expand = |s: &Spanned<String>| env.expand(s.get_ref()).map_err(|m| at(s, m));
    let transport = match (&raw.command, &raw.url) {
        (Some(command), None) => Transport::Stdio {
            command: expand(command)?,
            args: raw.args.iter().map(expand).collect::<Result<_, _>>()?,
            env: raw
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                .collect(),
        },
        (None, Some(url)) => {
            let u = expand(url)?;
            if !(u.starts_with("http://") || u.starts_with("https://")) {
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
                    .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                    .collect(),
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
    Ok(ServerConfig {
        name: n.clone(),
        transport,
        keep_alive: raw.keep_alive.unwrap_or(false),
        startup_timeout: Duration::from_secs(raw.startup_timeout_s.unwrap_or(30).max(1)),
        tool_timeout: Duration::from_secs(raw.tool_timeout_s.unwrap_or(60).max(1)),
        required: raw.required.unwrap_or(false),
        risk,
    })
}

/// Expands `${VAR}` in `(name, value)` pairs, at server start.
pub fn expand_pairs(pairs: &[(String, String)], env: &Env) -> Result<Vec<(String, String)>, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            env.expand(v)
                .map(|v| (k.clone(), v))
                .map_err(|e| format!("{k}: {e}"))
        })
        .collect()
}
