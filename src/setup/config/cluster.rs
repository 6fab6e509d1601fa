//! `[cluster]` (docs/spec.md §23): many devices, one vault, coordinated through NATS JetStream. Typed
//! data only: the client is a capability (`capabilities::cluster`).
//!
//! ```toml
//! [cluster]
//! nats = ["nats://home-server:4222"]  # credentials as ${VAR} in the URL (user:pass@, token@) …
//! creds = "~/.config/tabd/tabd.creds"  # … or a NATS credentials file
//! device = "laptop"                    # default: the host name
//! lease_s = 30
//! when_alone = "skip"                  # or "run"; a role may override
//! key = "${TABD_CLUSTER_KEY}"          # shared by the devices: approvals and waiting runs go on anywhere
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The shortest and longest lease: shorter than 2 s a busy laptop misses renewals (every third of
/// it); longer than an hour a device that died holds its slots for too long.
pub const LEASE_BOUNDS: (u64, u64) = (2, 3600);
/// The lease when `lease_s` is not set.
pub const DEFAULT_LEASE_S: u64 = 30;

/// What a device does when it cannot reach a quorum of the servers (a write does not succeed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenAlone {
    /// Run nothing that needs a claim: logged, and caught up when the cluster returns.
    #[default]
    Skip,
    /// Run anyway (another device may run the same slot or note: doubles are possible).
    Run,
}

impl WhenAlone {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Run => "run",
        }
    }

    /// `"skip"` or `"run"`.
    pub fn parse(text: &str) -> Result<Self, BadWhenAlone> {
        match text {
            "skip" => Ok(Self::Skip),
            "run" => Ok(Self::Run),
            other => Err(BadWhenAlone(other.to_string())),
        }
    }
}

/// A `when_alone` that is neither word; it says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "when_alone = \"{0}\": write \"skip\" (the default: nothing runs without a quorum, \
     caught up when it returns) or \"run\" (runs anyway; another device may run it too)"
)]
pub struct BadWhenAlone(pub String);

/// A `[cluster] nats` entry the client cannot use. `shown` is the URL without its password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadServerUrl {
    #[error("[cluster] nats: \"{shown}\" is not a URL ({reason}); write it like \"nats://host:4222\"")]
    NotAUrl { shown: String, reason: url::ParseError },
    #[error("[cluster] nats: \"{shown}\" must start with nats:// or tls://")]
    OtherScheme { shown: String },
    #[error("[cluster] nats: \"{shown}\" names no host")]
    NoHost { shown: String },
}

/// `[cluster]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    nats: Option<Spanned<Vec<Spanned<String>>>>,
    device: Option<Spanned<String>>,
    lease_s: Option<Spanned<u64>>,
    when_alone: Option<Spanned<String>>,
    creds: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
}

/// The shortest cluster key: as many characters as `openssl rand -hex 16` writes.
pub const MIN_KEY_LEN: usize = 32;

/// `[cluster]`, resolved.
#[derive(Clone, PartialEq)]
pub struct ClusterConfig {
    /// The servers' URLs, `${VAR}` expanded (so they may hold a secret: shown only through
    /// `display_url`, and every value expanded is redacted wherever it lands).
    pub nats: Vec<String>,
    /// A NATS credentials file (JWT and nkey seed).
    pub creds: Option<PathBuf>,
    /// This device's name: unique among the vault's devices, a plain name.
    pub device: String,
    /// How long a device keeps what it claimed without renewing it.
    pub lease: Duration,
    pub when_alone: WhenAlone,
    /// The secret every device of the vault shares (docs/spec.md §24): what they pass each other
    /// through the servers — approval requests, their execution records, waiting runs — is
    /// signed with it. Without it an approval runs on the device that asked, as before.
    pub key: Option<String>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field(
                "nats",
                &self
                    .nats
                    .iter()
                    .map(|u| crate::base::text::display_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("creds", &self.creds)
            .field("device", &self.device)
            .field("lease", &self.lease)
            .field("when_alone", &self.when_alone)
            .field("key", &self.key.as_ref().map(|_| "…"))
            .finish()
    }
}

/// A problem in `[cluster]`, at a span of the file when there is one.
pub(super) struct Problem {
    pub span: Option<std::ops::Range<usize>>,
    pub message: String,
}

fn problem(span: Option<std::ops::Range<usize>>, message: String) -> Problem {
    Problem { span, message }
}

/// Whether `name` is a plain device name: letters, digits, `-` and `_`, 1–64 of them, starting
/// with a letter or digit (it is part of the keys every device reads).
pub fn plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The host name as a device name: its first label (`laptop.local` → `laptop`), when plain.
pub fn host_device() -> Option<String> {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let first = host.split('.').next().unwrap_or_default().to_string();
    plain_name(&first).then_some(first)
}

/// Resolves `[cluster]`: `expand` reads `${VAR}` (and registers the value as a secret), `home`
/// expands a leading `~/` of `creds`.
pub(super) fn resolve(
    raw: RawCluster,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
    home: &dyn Fn(&str) -> PathBuf,
    host: Option<String>,
) -> Result<ClusterConfig, Problem> {
    let nats = resolve_nats(raw.nats, expand)?;
    let device = resolve_device(raw.device.as_ref(), expand, host)?;
    let lease_s = resolve_lease(raw.lease_s.as_ref())?;
    let when_alone = match &raw.when_alone {
        Some(w) => {
            WhenAlone::parse(w.get_ref()).map_err(|m| problem(Some(w.span()), format!("[cluster] {m}")))?
        }
        None => WhenAlone::Skip,
    };
    let creds = raw
        .creds
        .as_ref()
        .map(|c| expand(c).map(|p| home(&p)))
        .transpose()?;
    let key = raw.key.as_ref().map(|k| resolve_key(k, expand)).transpose()?;
    Ok(ClusterConfig {
        nats,
        creds,
        device,
        lease: Duration::from_secs(lease_s),
        when_alone,
        key,
    })
}

/// `nats`: the servers' URLs, each `${VAR}` expanded and checked; at least one.
fn resolve_nats(
    nats: Option<Spanned<Vec<Spanned<String>>>>,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<Vec<String>, Problem> {
    let Some(list) = nats else {
        return Err(problem(
            None,
            "[cluster] needs nats = [\"nats://host:4222\"]: the NATS JetStream server(s) the devices share (see docs/devices.md)".into(),
        ));
    };
    if list.get_ref().is_empty() {
        return Err(problem(
            Some(list.span()),
            "[cluster] nats is empty: name at least one server, like [\"nats://home-server:4222\"]".into(),
        ));
    }
    let mut nats = Vec::new();
    for url in list.get_ref() {
        let text = expand(url)?;
        check_url(&text).map_err(|m| problem(Some(url.span()), m.to_string()))?;
        nats.push(text);
    }
    Ok(nats)
}

/// `device`: this device's name, a plain name; the host's name when it is not set.
fn resolve_device(
    device: Option<&Spanned<String>>,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
    host: Option<String>,
) -> Result<String, Problem> {
    match device {
        Some(d) => {
            let name = expand(d)?;
            if !plain_name(&name) {
                return Err(problem(
                    Some(d.span()),
                    format!(
                        "[cluster] device = \"{name}\" is not a plain name: use letters, digits, - and _ \
                         (at most 64), unique among the vault's devices"
                    ),
                ));
            }
            Ok(name)
        }
        None => host.ok_or_else(|| {
            problem(
                None,
                "[cluster] device is not set and the host name is not a plain name: set device = \"laptop\" (letters, digits, - and _)".into(),
            )
        }),
    }
}

/// `lease_s`: how long a device's claim holds without renewal, within `LEASE_BOUNDS`.
fn resolve_lease(lease_s: Option<&Spanned<u64>>) -> Result<u64, Problem> {
    match lease_s {
        Some(l) => {
            let s = *l.get_ref();
            let (lo, hi) = LEASE_BOUNDS;
            if !(lo..=hi).contains(&s) {
                return Err(problem(
                    Some(l.span()),
                    format!("[cluster] lease_s = {s}: write a number of seconds from {lo} to {hi} (default {DEFAULT_LEASE_S})"),
                ));
            }
            Ok(s)
        }
        None => Ok(DEFAULT_LEASE_S),
    }
}

/// `key`: the secret the devices share, at least `MIN_KEY_LEN` characters.
fn resolve_key(
    k: &Spanned<String>,
    expand: &dyn Fn(&Spanned<String>) -> Result<String, Problem>,
) -> Result<String, Problem> {
    let text = expand(k)?;
    let n = text.chars().count();
    if n < MIN_KEY_LEN {
        return Err(problem(
            Some(k.span()),
            format!(
                "[cluster] key is {n} characters; it needs at least {MIN_KEY_LEN}, the same on every device \
                 (make one with `openssl rand -hex 32`, keep it in the env file as TABD_CLUSTER_KEY and \
                 write key = \"${{TABD_CLUSTER_KEY}}\")"
            ),
        ));
    }
    Ok(text)
}

/// A server URL the client can use: `nats://` or `tls://`, with a host.
fn check_url(text: &str) -> Result<(), BadServerUrl> {
    let shown = crate::base::text::display_url(text);
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(reason) => return Err(BadServerUrl::NotAUrl { shown, reason }),
    };
    if !matches!(url.scheme(), "nats" | "tls") {
        return Err(BadServerUrl::OtherScheme { shown });
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(BadServerUrl::NoHost { shown });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::base::environment::Env;
    use crate::setup::config::{parse, Config, ConfigError};

    fn env() -> Env {
        Env::from_pairs([("HOME", "/home/ana"), ("NATS_PASSWORD", "hunter2-long-secret")])
    }

    fn ok(text: &str) -> Config {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> ConfigError {
        parse(text, Path::new("config.toml"), &env(), None).unwrap_err()
    }

    #[test]
    fn no_cluster_table_means_no_cluster_and_the_design_example_parses() {
        assert!(ok("").cluster.is_none());
        let c = ok("[cluster]\nnats = [\"nats://home-server:4222\"]\ndevice = \"laptop\"\nlease_s = 30\nwhen_alone = \"skip\"\n")
            .cluster
            .unwrap();
        assert_eq!(c.nats, ["nats://home-server:4222"]);
        assert_eq!(
            (c.device.as_str(), c.lease, c.when_alone),
            ("laptop", Duration::from_secs(30), WhenAlone::Skip)
        );
        let c = ok("[cluster]\nnats = [\"nats://a:4222\", \"tls://b:4222\"]\nwhen_alone = \"run\"\ncreds = \"~/tabd.creds\"\n")
            .cluster
            .unwrap();
        assert_eq!(c.lease, Duration::from_secs(DEFAULT_LEASE_S));
        assert_eq!(c.when_alone, WhenAlone::Run);
        assert_eq!(c.creds, Some(PathBuf::from("/home/ana/tabd.creds")));
        // Without `device`, the host's name (its first label) when it is a plain name.
        if let Some(host) = host_device() {
            assert_eq!(
                ok("[cluster]\nnats = [\"nats://a:4222\"]\n")
                    .cluster
                    .unwrap()
                    .device,
                host
            );
        }
    }

    #[test]
    fn a_password_from_the_environment_is_a_secret_in_the_url() {
        let config = ok("[cluster]\nnats = [\"nats://tabd:${NATS_PASSWORD}@home:4222\"]\ndevice = \"d1\"\n");
        let c = config.cluster.unwrap();
        assert_eq!(c.nats, ["nats://tabd:hunter2-long-secret@home:4222"]);
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let keyed = ok("[cluster]\nnats = [\"nats://h:4222\"]\ndevice = \"d1\"\nkey = \"${NATS_PASSWORD}-and-more-of-it\"\n");
        let key = keyed.cluster.unwrap();
        assert_eq!(key.key.as_deref(), Some("hunter2-long-secret-and-more-of-it"));
        assert!(!format!("{key:?}").contains("hunter2"));
        assert_eq!(
            env()
                .redactor()
                .apply("cannot reach nats://tabd:hunter2-long-secret@home:4222"),
            "cannot reach nats://tabd:${NATS_PASSWORD}@home:4222"
        );
    }

    #[test]
    fn every_bad_value_is_refused_with_its_line_and_what_to_write() {
        for (text, line, says) in [
            ("[cluster]\ndevice = \"d\"\n", 1, "needs nats"),
            ("[cluster]\nnats = []\n", 2, "is empty"),
            (
                "[cluster]\nnats = [\n  \"http://h:4222\",\n]\n",
                3,
                "nats:// or tls://",
            ),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\ndevice = \"my laptop\"\n",
                3,
                "plain name",
            ),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\ndevice = \"a.b\"\n",
                3,
                "plain name",
            ),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\nlease_s = 1\n",
                3,
                "from 2 to 3600",
            ),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\nlease_s = 99999\n",
                3,
                "from 2 to 3600",
            ),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\nwhen_alone = \"maybe\"\n",
                3,
                "\"skip\"",
            ),
            ("[cluster]\nnats = [\"nats://a:1\"]\nlease = 3\n", 3, "lease"),
            ("[cluster]\nnats = [\"nats://${NOPE}:1\"]\n", 2, "NOPE"),
            ("[cluster]\nnats = \"nats://a:1\"\n", 2, "sequence"),
            (
                "[cluster]\nnats = [\"nats://a:1\"]\nkey = \"short\"\n",
                3,
                "at least 32",
            ),
        ] {
            let e = err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }
}
