//! What answers over the network: the provider (one request, said as such), the `[notify]`
//! channels (a test push, only with `--push`) and the `[cluster]` servers (a write a quorum must
//! take). All asked at once, each within its own time; none with `--offline`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Check, Options, Status};
use crate::capabilities::cluster::{Cluster, ClusterError, DeviceSeen};
use crate::capabilities::notify::DeliveryError;
use crate::capabilities::provider::{BuildError, ProviderError};
use crate::doors::commands::validate::Findings;
use crate::doors::commands::Workspace;
use crate::setup::config::ProviderKind;

/// How long the cluster's servers get to take the probe's write.
const CLUSTER_WITHIN: Duration = Duration::from_secs(15);

/// What the network said; `None` where nothing was asked.
#[derive(Default)]
pub(super) struct Answers {
    key: Option<Result<(), BuildError>>,
    push: Option<Vec<(&'static str, Result<(), DeliveryError>)>>,
    cluster: Option<Result<Vec<DeviceSeen>, ClusterError>>,
}

/// Asks what there is to ask, all at once: the provider when it has a key to try (or needs
/// none), the channels when `push`, the cluster when there is one.
pub(super) async fn ask(ws: &Workspace, findings: &Findings, push: bool, now: DateTime<Utc>) -> Answers {
    let provider = &ws.config.provider;
    let key = async {
        if provider.kind == ProviderKind::Command || findings.key.is_some() {
            return None;
        }
        Some(crate::capabilities::provider::try_key(provider, &ws.env).await)
    };
    let pushed = async {
        if !push || !ws.config.notify.any() {
            return None;
        }
        let name = vault_name(ws);
        Some(crate::capabilities::notify::test_push(&ws.config.notify, ws.env.clone(), &name, now).await)
    };
    let (key, push, cluster) = tokio::join!(key, pushed, quorum(ws));
    Answers { key, push, cluster }
}

/// The vault's name as the devices and `obsidian://` links know it: its folder's.
fn vault_name(ws: &Workspace) -> String {
    ws.root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Connects and asks a quorum to take a write (`Cluster::quorum_probe`), within `CLUSTER_WITHIN`.
async fn quorum(ws: &Workspace) -> Option<Result<Vec<DeviceSeen>, ClusterError>> {
    let config = ws.config.cluster.as_ref()?;
    let cluster = match Cluster::connect(config, &vault_name(ws)).await {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    Some(
        match tokio::time::timeout(CLUSTER_WITHIN, cluster.quorum_probe()).await {
            Ok(done) => done,
            Err(_) => Err(cluster.explained(ClusterError::Unavailable {
                why: format!("none took a write within {} s", CLUSTER_WITHIN.as_secs()),
            })),
        },
    )
}

/// What the key check costs, said on its line.
const ONE_REQUEST: &str = "(one request to the provider, a few tokens)";

/// The provider's key: set (as `validate` says), and taken by the provider (one request).
pub(super) fn key(ws: &Workspace, findings: &Findings, answers: &Answers, offline: bool) -> Check {
    let cfg = &ws.config.provider;
    if cfg.kind == ProviderKind::Command {
        return Check::new(
            "key",
            Status::Skipped,
            "[provider] kind = \"command\": an agent CLI logs itself in (the config line says whether it is installed)",
        );
    }
    if let Some(missing) = &findings.key {
        return Check::new("key", Status::Fix, missing.clone());
    }
    let has_key = ws.env.get(&cfg.api_key_env).is_some();
    let what = if has_key {
        format!("{} is set", cfg.api_key_env)
    } else {
        format!("no {} (this server may need none)", cfg.api_key_env)
    };
    let answer = match (&answers.key, offline) {
        (Some(answer), _) => answer,
        (None, true) => return Check::new("key", Status::Ok, format!("{what}; not tried (--offline)")),
        (None, false) => return Check::new("key", Status::Skipped, format!("{what}; not tried")),
    };
    let at = crate::base::text::display_url(&cfg.base_url);
    match answer {
        Ok(()) => Check::new(
            "key",
            Status::Ok,
            format!(
                "{what}; {at} {} and knows the model {} {ONE_REQUEST}",
                if has_key { "took it" } else { "answered" },
                cfg.model
            ),
        ),
        Err(e) => {
            let status = match e {
                BuildError::BadBaseUrl(_) => Status::Fix,
                BuildError::Client(p) => judged(p),
            };
            Check::new("key", status, format!("{what}; {e} {ONE_REQUEST}"))
        }
    }
}

/// Whose an error of the key's request is: the person's to fix (the key refused, the model or
/// endpoint unknown, a spend limit), or a warning (the network, a busy or failing provider: the
/// key may be fine).
fn judged(e: &ProviderError) -> Status {
    match e {
        ProviderError::Http {
            status: 401 | 403 | 404,
            ..
        }
        | ProviderError::MissingKey { .. } => Status::Fix,
        ProviderError::Http { spend_limit, .. } if *spend_limit => Status::Fix,
        ProviderError::Http { .. }
        | ProviderError::Transport { .. }
        | ProviderError::Timeout { .. }
        | ProviderError::BadResponse { .. }
        | ProviderError::Deadline { .. }
        | ProviderError::Cli { .. } => Status::Warning,
    }
}

/// The `[notify]` channels: set and able to work here (as `validate` says), and with `--push`
/// reached by one test push each.
pub(super) fn notify(ws: &Workspace, findings: &Findings, answers: &Answers, opts: Options) -> Check {
    let n = &ws.config.notify;
    if !n.any() {
        return Check::new(
            "notify",
            Status::Skipped,
            "no [notify] channel: when tabd needs you (an approval, a pause, a note it gave up on) only the vault \
             says so — docs/notify.md sets up a command, a webhook (ntfy) or the desktop",
        );
    }
    let broken: Vec<String> = findings
        .notify
        .iter()
        .filter(|d| d.severity == crate::base::diag::Severity::Warning)
        .map(|d| d.message.clone())
        .collect();
    if !broken.is_empty() {
        return Check::new("notify", Status::Fix, broken.join("; "));
    }
    let mut set = Vec::new();
    if let Some(program) = n.command.first() {
        set.push(format!("command `{program}`"));
    }
    if let Some(url) = &n.webhook {
        set.push(format!("webhook {}", crate::base::text::display_webhook(url)));
    }
    if n.desktop {
        set.push("desktop".to_string());
    }
    let Some(pushed) = &answers.push else {
        let why = if opts.offline {
            "not tried (--offline)"
        } else {
            "not tried: `tabd doctor --push` sends each a test push"
        };
        return Check::new("notify", Status::Ok, format!("{}; {why}", set.join(", ")));
    };
    let failed: Vec<String> = pushed
        .iter()
        .filter_map(|(channel, r)| r.as_ref().err().map(|e| format!("{channel}: {e}")))
        .collect();
    let reached: Vec<&str> = pushed
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(c, _)| *c)
        .collect();
    if failed.is_empty() {
        return Check::new(
            "notify",
            Status::Ok,
            format!("a test push went out on {}: look for it", reached.join(", ")),
        );
    }
    let also = if reached.is_empty() {
        String::new()
    } else {
        format!(" ({} took it)", reached.join(", "))
    };
    Check::new(
        "notify",
        Status::Fix,
        format!(
            "the test push failed on {}{also}: nothing reaches you that way until it is fixed (docs/notify.md)",
            failed.join("; ")
        ),
    )
}

/// With `[cluster]`: a quorum of its servers takes a write (else `when_alone` decides every
/// slot and note), and which devices the heartbeats show.
pub(super) fn cluster(ws: &Workspace, answers: &Answers) -> Check {
    let Some(config) = &ws.config.cluster else {
        return Check::new(
            "cluster",
            Status::Skipped,
            "no [cluster]: this device runs every slot and note itself",
        );
    };
    let Some(answer) = &answers.cluster else {
        return Check::new("cluster", Status::Skipped, "not asked (--offline)");
    };
    match answer {
        Ok(devices) => {
            let now = Utc::now();
            let seen: Vec<String> = devices
                .iter()
                .map(|d| {
                    let ago = (now - d.last_heartbeat).to_std().unwrap_or_default();
                    let ago = humantime::format_duration(Duration::from_secs(ago.as_secs()));
                    format!("{} ({ago} ago)", d.device)
                })
                .collect();
            Check::new(
                "cluster",
                Status::Ok,
                format!(
                    "a quorum of the servers took a write as device {}; heartbeats seen: {}",
                    config.device,
                    if seen.is_empty() {
                        "none yet".to_string()
                    } else {
                        seen.join(", ")
                    }
                ),
            )
        }
        Err(e) => Check::new(
            "cluster",
            Status::Fix,
            format!(
                "{e}: until a quorum answers, when_alone = \"{}\" decides every slot and note; check the servers \
                 in [cluster] nats (docs/devices.md)",
                config.when_alone.as_str()
            ),
        ),
    }
}
