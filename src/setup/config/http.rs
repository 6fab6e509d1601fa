//! `[http]` (docs/spec.md §27): webhooks that start a role — `POST /hooks/<role>` becomes an inbox note
//! of that role. Typed data only: the server is a capability (`capabilities::http`).
//!
//! ```toml
//! [http]
//! listen = "127.0.0.1:8787"        # off without the table; a loopback address unless public = true
//! public = false                   # true: any address (behind a tunnel or a proxy you run)
//! max_body_kib = 1024              # a larger body is refused (413) while it is read
//! per_minute = 30                  # deliveries a role takes a minute (429 with Retry-After after)
//! timeout_s = 10                   # a client slower than this to send its request is dropped
//!
//! [http.hooks.delivery]            # POST /hooks/delivery
//! secret = "${GITHUB_HOOK_SECRET}" # HMAC-SHA256 key of X-Hub-Signature-256; from the environment
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The largest body, in KiB, when `max_body_kib` is not set.
pub const DEFAULT_MAX_BODY_KIB: u64 = 1024;
/// The most `max_body_kib` may say: a webhook is an event, not a file transfer.
pub const MAX_BODY_KIB_BOUND: u64 = 16 * 1024;
/// Deliveries one role takes a minute when `per_minute` is not set.
pub const DEFAULT_PER_MINUTE: u32 = 30;
/// The most `per_minute` may say: every delivery can be a run.
pub const PER_MINUTE_BOUND: u32 = 600;
/// How long a client has to send its whole request when `timeout_s` is not set.
pub const DEFAULT_TIMEOUT_S: u64 = 10;
/// The longest `timeout_s`: a connection held longer is a slow client, not a slow network.
pub const TIMEOUT_S_BOUND: u64 = 300;
/// The shortest secret: as many characters as `openssl rand -hex 8` writes. GitHub asks for a
/// random string "with high entropy"; a short one is guessable offline from one signed body.
pub const MIN_SECRET_LEN: usize = 16;

/// `[http]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    listen: Option<Spanned<String>>,
    #[serde(default)]
    public: bool,
    max_body_kib: Option<Spanned<u64>>,
    per_minute: Option<Spanned<u32>>,
    timeout_s: Option<Spanned<u64>>,
    #[serde(default)]
    hooks: BTreeMap<Spanned<String>, Spanned<RawHook>>,
}

/// `[http.hooks.NAME]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    secret: Option<Spanned<String>>,
}

/// `[http]`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    /// Where the server listens (port 0: a free port the system picks, said in the log).
    pub listen: SocketAddr,
    /// `public = true`: the person chose an address other machines reach.
    pub public: bool,
    /// The largest body taken, in bytes.
    pub max_body: usize,
    /// Deliveries one role takes in any minute.
    pub per_minute: u32,
    /// How long a client has for its request's head, and again for its body.
    pub timeout: Duration,
    /// The hooks by name: each is the role of the same name.
    pub hooks: BTreeMap<String, Hook>,
}

/// One `[http.hooks.NAME]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Hook {
    /// The HMAC-SHA256 key its sender signs bodies with, expanded from `${VAR}` (a secret:
    /// never shown, and redacted wherever its value lands).
    pub secret: String,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook").field("secret", &"…").finish()
    }
}

/// A problem in `[http]`, at a span of the file when there is one.
pub(super) struct Problem {
    pub span: Option<std::ops::Range<usize>>,
    pub message: String,
}

fn problem(span: Option<std::ops::Range<usize>>, message: String) -> Problem {
    Problem { span, message }
}

/// Whether `name` can be a hook's (and so a role's) name: letters, digits, `-` and `_`, at most
/// 64, not starting with `-` or `_` (an abstract role never runs).
pub fn hook_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_'])
}

/// Resolves `[http]`: `expand` reads `${VAR}` (and registers the value as a secret).
pub(super) fn resolve(
    raw: RawHttp,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<HttpConfig, Problem> {
    let listen = resolve_listen(raw.listen.as_ref(), raw.public, expand)?;
    let max_body_kib = bounded(
        raw.max_body_kib.as_ref(),
        DEFAULT_MAX_BODY_KIB,
        (1, MAX_BODY_KIB_BOUND),
        "max_body_kib",
        "KiB",
    )?;
    let per_minute = bounded(
        raw.per_minute.as_ref(),
        DEFAULT_PER_MINUTE,
        (1, PER_MINUTE_BOUND),
        "per_minute",
        "deliveries a minute",
    )?;
    let timeout_s = bounded(
        raw.timeout_s.as_ref(),
        DEFAULT_TIMEOUT_S,
        (1, TIMEOUT_S_BOUND),
        "timeout_s",
        "seconds",
    )?;
    let mut hooks = BTreeMap::new();
    for (name, hook) in raw.hooks {
        if !hook_name(name.get_ref()) {
            return Err(problem(
                Some(hook.span()),
                format!(
                    "[http.hooks.{}]: a hook is named after the role it writes to: letters, digits, - and _ (at most 64, not starting with - or _)",
                    crate::base::text::one_line(name.get_ref(), 64)
                ),
            ));
        }
        let secret = resolve_secret(name.get_ref(), &hook, expand)?;
        hooks.insert(name.into_inner(), Hook { secret });
    }
    Ok(HttpConfig {
        listen,
        public: raw.public,
        max_body: usize::try_from(max_body_kib * 1024).unwrap_or(usize::MAX),
        per_minute,
        timeout: Duration::from_secs(timeout_s),
        hooks,
    })
}

/// `listen`: an IP address and a port; one other machines reach only with `public = true`.
fn resolve_listen(
    listen: Option<&Spanned<String>>,
    public: bool,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<SocketAddr, Problem> {
    let Some(listen) = listen else {
        return Err(problem(
            None,
            "[http] needs listen = \"127.0.0.1:8787\" (an address and a port on this machine); remove the table to take no webhooks".into(),
        ));
    };
    let text = expand(listen)?;
    let addr: SocketAddr = text.trim().parse().map_err(|_| {
        problem(
            Some(listen.span()),
            format!(
                "[http] listen = \"{}\" is not an address and a port: write it like \"127.0.0.1:8787\" (an IP address, not a host name; [::1]:8787 for IPv6)",
                crate::base::text::one_line(&text, 80)
            ),
        )
    })?;
    if !addr.ip().is_loopback() && !public {
        return Err(problem(
            Some(listen.span()),
            format!(
                "[http] listen = \"{addr}\" is reached from other machines: tabd listens on this machine only (127.0.0.1 or [::1]) unless you write public = true next to it — reach it through a tunnel or a reverse proxy instead (docs/triggers.md)"
            ),
        ));
    }
    Ok(addr)
}

/// A hook's secret: written as `${VAR}` (the config file is often kept in git or synced; the
/// secret stays in the environment or the env file), at least `MIN_SECRET_LEN` characters.
fn resolve_secret(
    name: &str,
    hook: &Spanned<RawHook>,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<String, Problem> {
    let var = format!("{}_HOOK_SECRET", name.to_ascii_uppercase().replace('-', "_"));
    let Some(secret) = hook.get_ref().secret.as_ref() else {
        return Err(problem(
            Some(hook.span()),
            format!(
                "[http.hooks.{name}] needs secret = \"${{{var}}}\": the key its sender signs each body with"
            ),
        ));
    };
    if !secret.get_ref().contains("${") {
        return Err(problem(
            Some(secret.span()),
            format!(
                "[http.hooks.{name}] secret is written in the config itself: put it in the env file as {var}=… and write secret = \"${{{var}}}\""
            ),
        ));
    }
    let value = expand(secret)?;
    let n = value.chars().count();
    if n < MIN_SECRET_LEN {
        return Err(problem(
            Some(secret.span()),
            format!(
                "[http.hooks.{name}] secret is {n} characters; it needs at least {MIN_SECRET_LEN} (make one with `openssl rand -hex 32` and give the sender the same)"
            ),
        ));
    }
    Ok(value)
}

/// A number of `[http]` within `bounds`, or `default` when not written.
fn bounded<T>(
    value: Option<&Spanned<T>>,
    default: T,
    (lo, hi): (T, T),
    key: &str,
    unit: &str,
) -> Result<T, Problem>
where
    T: Copy + PartialOrd + std::fmt::Display,
{
    let Some(v) = value else { return Ok(default) };
    let n = *v.get_ref();
    if n < lo || n > hi {
        return Err(problem(
            Some(v.span()),
            format!("[http] {key} = {n}: write a number from {lo} to {hi} ({unit}; default {default})"),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::base::environment::Env;
    use crate::setup::config::{parse, Config, ConfigError};

    fn env() -> Env {
        Env::from_pairs([
            ("HOME", "/home/ana"),
            ("GITHUB_HOOK_SECRET", "0123456789abcdef-long-enough"),
            ("SHORT", "abc"),
        ])
    }

    fn ok(text: &str) -> Config {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> ConfigError {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_err()
    }

    #[test]
    fn no_http_table_means_no_server_and_the_design_example_parses() {
        assert!(ok("").http.is_none());
        let h = ok("[http]\nlisten = \"127.0.0.1:8787\"\n[http.hooks.delivery]            # POST /hooks/delivery\nsecret = \"${GITHUB_HOOK_SECRET}\"\n")
            .http
            .unwrap();
        assert_eq!(h.listen, "127.0.0.1:8787".parse().unwrap());
        assert!(!h.public);
        assert_eq!(h.max_body, 1024 * 1024);
        assert_eq!(h.per_minute, 30);
        assert_eq!(h.timeout, Duration::from_secs(10));
        assert_eq!(h.hooks["delivery"].secret, "0123456789abcdef-long-enough");
        let shown = format!("{h:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        let h = ok("[http]\nlisten = \"[::1]:0\"\nmax_body_kib = 64\nper_minute = 5\ntimeout_s = 2\n")
            .http
            .unwrap();
        assert_eq!(
            (h.max_body, h.per_minute, h.timeout, h.hooks.len()),
            (64 * 1024, 5, Duration::from_secs(2), 0)
        );
        let public = ok("[http]\nlisten = \"0.0.0.0:8787\"\npublic = true\n")
            .http
            .unwrap();
        assert!(public.public);
    }

    #[test]
    fn every_bad_value_is_refused_with_its_line_and_what_to_write() {
        for (text, line, says) in [
            ("[http]\npublic = true\n", 1, "needs listen"),
            ("[http]\nlisten = \"0.0.0.0:8787\"\n", 2, "public = true"),
            ("[http]\n\nlisten = \"192.168.1.5:80\"\n", 3, "public = true"),
            ("[http]\nlisten = \"[::]:8787\"\n", 2, "public = true"),
            ("[http]\nlisten = \"localhost:8787\"\n", 2, "not an address and a port"),
            ("[http]\nlisten = \"127.0.0.1\"\n", 2, "not an address and a port"),
            ("[http]\nlisten = \"127.0.0.1:1\"\nmax_body_kib = 0\n", 3, "from 1 to 16384"),
            ("[http]\nlisten = \"127.0.0.1:1\"\nper_minute = 100000\n", 3, "from 1 to 600"),
            ("[http]\nlisten = \"127.0.0.1:1\"\ntimeout_s = 0\n", 3, "from 1 to 300"),
            ("[http]\nlisten = \"127.0.0.1:1\"\nlisten_on = 1\n", 3, "listen_on"),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.delivery]\n",
                3,
                "needs secret = \"${DELIVERY_HOOK_SECRET}\"",
            ),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.delivery]\nsecret = \"hunter2hunter2hunter2\"\n",
                4,
                "in the env file",
            ),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.delivery]\nsecret = \"${SHORT}\"\n",
                4,
                "at least 16",
            ),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.delivery]\nsecret = \"${NOPE}\"\n",
                4,
                "NOPE",
            ),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.\"a b\"]\nsecret = \"${GITHUB_HOOK_SECRET}\"\n",
                3,
                "named after the role",
            ),
            (
                "[http]\nlisten = \"127.0.0.1:1\"\n[http.hooks.delivery]\nsecret = \"${GITHUB_HOOK_SECRET}\"\nkey = 1\n",
                5,
                "key",
            ),
        ] {
            let e = err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn hook_names_are_role_names() {
        for good in ["delivery", "risk-2", "a_b", "X1"] {
            assert!(hook_name(good), "{good}");
        }
        for bad in ["", "_base", "-x", "a/b", "a b", "ä", &"x".repeat(65)] {
            assert!(!hook_name(bad), "{bad}");
        }
    }
}
