//! One try of one event on one channel: the command (the event as JSON on stdin), the webhook
//! (JSON, or ntfy's JSON publishing), the desktop (`notify-send`). Programs start through the one
//! launcher (a `ChildSpec`: tabd's environment only, a tenant), and a try that runs out of time
//! ends the program and everything it started before it returns.
//!
//! Every try of an event carries its id (`EventId`, the same on each): in the JSON, as
//! `TABD_EVENT_ID` for the command, as an `Idempotency-Key` header for the webhook, and as ntfy's
//! sequence id — so a receiver that took a try whose answer never came sees the retry as the same
//! event.

use std::time::Duration;

use serde_json::{json, Value};

use super::{DeliveryError, Event, EventId};
use crate::base::environment::Env;
use crate::base::process::{ChildSpec, Launcher, StartError, Stream};
use crate::setup::config::notify::{NotifyConfig, WebhookFormat};

/// How long one try of one channel may take, unless `TABD_TEST_NOTIFY_TRY_MS` says otherwise.
const TRY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a killed program's keeper is waited for (it ends at once unless the kernel is stuck).
const REAP_WAIT: Duration = Duration::from_secs(5);

/// The most of a program's stderr kept (for the status's one line).
const MAX_STDERR: u64 = 16 * 1024;

/// The variable the command channel's program finds the event's id in.
const EVENT_ID_VAR: &str = "TABD_EVENT_ID";

/// The channels `[notify]` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Command,
    Webhook,
    Desktop,
    Telegram,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::Webhook => "webhook",
            Self::Desktop => "desktop",
            Self::Telegram => "telegram",
        }
    }

    /// The channels `config` sets, in the order the status lists them.
    pub(super) fn set_in(config: &NotifyConfig) -> Vec<Kind> {
        let mut out = Vec::new();
        if !config.command.is_empty() {
            out.push(Self::Command);
        }
        if config.webhook.is_some() {
            out.push(Self::Webhook);
        }
        if config.desktop {
            out.push(Self::Desktop);
        }
        if config.telegram.is_some() {
            out.push(Self::Telegram);
        }
        out
    }
}

/// What a try needs besides the event.
pub(super) struct Deliveries {
    pub config: NotifyConfig,
    pub env: Env,
    pub vault_name: String,
    pub http: Option<reqwest::Client>,
    pub try_timeout: Duration,
    /// `[notify.telegram]`'s bot (`None` also when its token cannot be read: said at start).
    pub telegram: Option<std::sync::Arc<super::telegram::Telegram>>,
}

/// One try may take `TRY_TIMEOUT` (`TABD_TEST_NOTIFY_TRY_MS` shortens it for tests).
pub(super) fn try_timeout(env: &Env) -> Duration {
    env.get("TABD_TEST_NOTIFY_TRY_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(TRY_TIMEOUT, Duration::from_millis)
}

impl Deliveries {
    /// What the channels of `config` need to try an event: an HTTP client when a webhook is set;
    /// `vault_name` names the vault in `obsidian://` links unless `obsidian_vault` does.
    pub(super) fn new(config: &NotifyConfig, env: Env, vault_name: &str) -> Self {
        let try_timeout = try_timeout(&env);
        let http = config.webhook.as_ref().and_then(|_| {
            crate::capabilities::provider::install_tls();
            reqwest::Client::builder()
                .timeout(try_timeout)
                .user_agent(concat!("tabd/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok()
        });
        let telegram = config.telegram.as_ref().and_then(|t| {
            super::telegram::Telegram::of(t, &env)
                .map_err(|e| tracing::warn!("notify: Telegram is off: {e}"))
                .ok()
                .map(std::sync::Arc::new)
        });
        Self {
            telegram,
            config: config.clone(),
            vault_name: config
                .obsidian_vault
                .clone()
                .unwrap_or_else(|| vault_name.to_string()),
            http,
            try_timeout,
            env,
        }
    }

    /// One try of `ev` on `kind`.
    pub(super) async fn try_once(&self, kind: Kind, ev: &Event) -> Result<(), DeliveryError> {
        // A title or message may quote the model's words, and those a secret (docs/spec.md §24).
        let secrets = self.env.redactor();
        let ev = &Event {
            title: secrets.apply(&ev.title),
            message: secrets.apply(&ev.message),
            ..ev.clone()
        };
        // An event in an earlier push's place is ntfy's and Telegram's alone (they replace or
        // edit it): elsewhere it would be one more.
        let replaces =
            kind == Kind::Telegram || (kind == Kind::Webhook && self.config.format == WebhookFormat::Ntfy);
        if ev.replaces.is_some() && !replaces {
            return Ok(());
        }
        // From the key, so every try (and every channel, and a start after a restart) has it.
        let id = EventId::of(&self.vault_name, &ev.key);
        let payload = super::payload(ev, &id, &self.vault_name);
        match kind {
            Kind::Command => self.command(&payload, &id).await,
            Kind::Webhook => self.webhook(ev, &payload, &id).await,
            Kind::Desktop => self.desktop(ev).await,
            Kind::Telegram => match &self.telegram {
                Some(t) => t.deliver(ev).await,
                None => Err(DeliveryError::Setup(
                    "[notify.telegram] token: its variable is not set".into(),
                )),
            },
        }
    }

    /// The command, with the event as one JSON line on stdin and its id in `TABD_EVENT_ID` (a
    /// shell script need not parse JSON to know a retry): it must exit 0.
    async fn command(&self, payload: &Value, id: &EventId) -> Result<(), DeliveryError> {
        let argv = &self.config.command;
        let Some(program) = argv.first() else {
            return Ok(());
        };
        let env = vec![(EVENT_ID_VAR.to_string(), id.to_string())];
        self.run_once(program, &argv[1..], Some(format!("{payload}\n")), env)
            .await
    }

    /// Runs a channel's program once as a tenant, with tabd's environment without its secrets
    /// (and `env` over it) and
    /// `input` on its stdin, for at most the try's time: it must exit 0, and its stderr says why
    /// it did not. Out of time, it is killed with everything it started, and reaped, before this
    /// returns.
    async fn run_once(
        &self,
        program: &str,
        args: &[String],
        input: Option<String>,
        env: Vec<(String, String)>,
    ) -> Result<(), DeliveryError> {
        // Not confined: a channel is the person's own program, reaching what they set it up to
        // (a relay, a phone). It is given no secret, as the person's hooks are not: the model's
        // key, the env file's values and every `${VAR}` the config expands stay tabd's — a
        // script that needs a token of its own reads it itself.
        let spec = ChildSpec {
            name: format!("notify {program}"),
            program: program.to_string(),
            args: args.to_vec(),
            inherited: self.env.without_secrets(&[]),
            env,
            stdin: if input.is_some() {
                Stream::Piped
            } else {
                Stream::Null
            },
            stderr: Stream::Piped,
            ..ChildSpec::default()
        };
        let program = program.to_string();
        let started = Launcher::default().start(&spec).map_err(|e| match e {
            StartError::Spawn { source, .. } => DeliveryError::Start {
                program: program.clone(),
                source,
            },
            other => DeliveryError::Setup(other.to_string()),
        })?;
        let (mut child, tenant) = (started.child, started.tenant);
        // From here the program and all it starts end with `tenant`: at the time-out below, or
        // if this try is dropped half-way.
        let io = |source| DeliveryError::Io {
            program: program.clone(),
            source,
        };
        let ended = tokio::time::timeout(self.try_timeout, feed_and_wait(&mut child, input, io)).await;
        let (status, said) = match ended {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                end(&tenant, &mut child).await;
                return Err(e);
            }
            Err(_) => {
                end(&tenant, &mut child).await;
                return Err(DeliveryError::Timeout {
                    program,
                    after: self.try_timeout,
                });
            }
        };
        if status.success() {
            return Ok(());
        }
        Err(DeliveryError::Exited {
            said: crate::base::text::one_line(&String::from_utf8_lossy(&said), 200),
            program,
            status,
        })
    }

    /// The webhook: the event as JSON, or ntfy's JSON publishing (topic from the URL's path);
    /// either way with the event's id as its `Idempotency-Key`.
    async fn webhook(&self, ev: &Event, payload: &Value, id: &EventId) -> Result<(), DeliveryError> {
        let Some(url) = self.config.webhook.as_deref() else {
            return Ok(());
        };
        let Some(http) = &self.http else {
            return Err(DeliveryError::Setup(
                "no HTTP client (TLS could not start)".into(),
            ));
        };
        // Shown as written, its last part hidden: a topic or token may sit in the path.
        let shown = crate::base::text::display_webhook(url);
        let url = self
            .env
            .expand(url)
            .map_err(|e| DeliveryError::Setup(format!("[notify] webhook: {e}")))?;
        let request = match self.config.format {
            WebhookFormat::Json => http.post(&url).json(payload),
            WebhookFormat::Ntfy => {
                let (root, topic) = ntfy_parts(&url).ok_or_else(|| {
                    DeliveryError::Setup(format!(
                        "{shown}: an ntfy webhook is the topic's URL, like https://ntfy.sh/my-topic"
                    ))
                })?;
                // A decided approval stands in its push's place (its sequence id), buttons gone.
                let sequence = ev
                    .replaces
                    .as_deref()
                    .map_or_else(|| id.clone(), |key| EventId::of(&self.vault_name, key));
                let mut body = json!({
                    "topic": topic,
                    "title": payload["title"],
                    "message": payload["message"],
                    "click": payload["url"],
                    "tags": [payload["event"]],
                    "sequence_id": sequence.as_str(),
                });
                let auth = self.access_token()?;
                if let Some(actions) = self.buttons(ev, root, auth.as_deref())? {
                    body["actions"] = actions;
                }
                // ntfy (2.16 and later) takes a publisher's id as the message's sequence id: a
                // second message with the same one replaces the first on the phone. In the JSON
                // (its publishing table's `sequence_id`) and as the header its own client sends.
                let request = http
                    .post(format!("{root}/"))
                    .header("X-Sequence-ID", sequence.as_str())
                    .json(&body);
                match auth {
                    Some(token) => request.bearer_auth(token),
                    None => request,
                }
            }
        };
        let request = request.header("Idempotency-Key", id.as_idempotency_key());
        let resp = request.send().await.map_err(|e| {
            // reqwest names the URL it used (the topic, a token): said without it, by its cause.
            let e = e.without_url();
            let mut cause: &dyn std::error::Error = &e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            DeliveryError::Transport(format!("{shown}: {cause}"))
        })?;
        match resp.status() {
            s if s.is_success() => Ok(()),
            s => Err(DeliveryError::Http {
                shown,
                status: s.as_u16(),
            }),
        }
    }

    /// `[notify] access_token`, read from the environment now.
    fn access_token(&self) -> Result<Option<String>, DeliveryError> {
        self.config
            .access_token
            .as_deref()
            .map(|t| self.env.expand(t))
            .transpose()
            .map_err(|e| DeliveryError::Setup(format!("[notify] access_token: {e}")))
    }

    /// An approval's Approve and Reject buttons (ntfy's `http` actions), when it carries decision
    /// tokens and `reply_topic` is set: a tap publishes the button's token to the reply topic on
    /// the same server, as the phone (with the access token, when there is one).
    fn buttons(&self, ev: &Event, root: &str, auth: Option<&str>) -> Result<Option<Value>, DeliveryError> {
        let (Some(replies), Some(topic)) = (&ev.replies, self.config.reply_topic.as_deref()) else {
            return Ok(None);
        };
        let topic = self
            .env
            .expand(topic)
            .map_err(|e| DeliveryError::Setup(format!("[notify] reply_topic: {e}")))?;
        let button = |label: &str, body: &str| {
            let mut action = json!({
                "action": "http",
                "label": label,
                "url": format!("{root}/{}", topic.trim()),
                "method": "POST",
                "body": body,
                "clear": true,
            });
            if let Some(token) = auth {
                action["headers"] = json!({ "Authorization": format!("Bearer {token}") });
            }
            action
        };
        Ok(Some(json!([
            button(replies.labels[0], &replies.approve),
            button(replies.labels[1], &replies.reject),
        ])))
    }

    /// A desktop notification over the session D-Bus (`notify-send`, where it and a session
    /// bus are there). The title and message follow `--`: text that starts with `-` is text,
    /// never an option of `notify-send`.
    async fn desktop(&self, ev: &Event) -> Result<(), DeliveryError> {
        if self.env.get("DBUS_SESSION_BUS_ADDRESS").is_none() {
            return Err(DeliveryError::Setup(
                "no session D-Bus here (DBUS_SESSION_BUS_ADDRESS is not set)".into(),
            ));
        }
        let args = desktop_args(&ev.title, &as_body_text(&ev.message)).map(str::to_string);
        match self.run_once("notify-send", &args, None, Vec::new()).await {
            Err(DeliveryError::Start { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Err(
                DeliveryError::Setup("notify-send is not installed (install libnotify-bin)".into()),
            ),
            done => done,
        }
    }
}

/// An ntfy topic's URL as its server's root and the topic: `https://ntfy.sh/my-topic` →
/// (`https://ntfy.sh`, `my-topic`).
pub(super) fn ntfy_parts(url: &str) -> Option<(&str, &str)> {
    url.trim_end_matches('/')
        .rsplit_once('/')
        .filter(|(root, _)| root.contains("://"))
}

/// `notify-send`'s arguments: its options, then `--`, then the person-facing text (the body as
/// `as_body_text` made it).
fn desktop_args<'a>(title: &'a str, body: &'a str) -> [&'a str; 4] {
    ["--app-name=tabd", "--", title, body]
}

/// `text` as a notification body shows it. The freedesktop notification spec lets a body carry
/// markup (XML: `<b>`, `<i>`, `<a href="…">`, `<img src="…">`), and the servers people use
/// (GNOME Shell, KDE, dunst, mako, xfce4-notifyd) read it so: a model's `<a href>` became a live
/// link. Escaped as XML text, every character is shown as written. The summary (title) is plain
/// text by the spec and stays as it is.
fn as_body_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Ends a tenant that is still running (and all it started), and reaps its keeper.
async fn end(tenant: &crate::base::process::Tenant, child: &mut tokio::process::Child) {
    tenant.kill();
    if tokio::time::timeout(REAP_WAIT, child.wait()).await.is_err() {
        tracing::warn!("notify: a killed program did not end within {REAP_WAIT:?}");
    }
}

/// Writes `input` to the program's stdin (then closes it) and waits for it to exit, keeping the
/// start of what it says on stderr; the rest is drained, so it never blocks writing it.
async fn feed_and_wait(
    child: &mut tokio::process::Child,
    input: Option<String>,
    io: impl Fn(std::io::Error) -> DeliveryError,
) -> Result<(std::process::ExitStatus, Vec<u8>), DeliveryError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (stdin, stderr) = (child.stdin.take(), child.stderr.take());
    if let (Some(mut stdin), Some(input)) = (stdin, input) {
        stdin.write_all(input.as_bytes()).await.map_err(&io)?;
    }
    let said = async {
        let mut said = Vec::new();
        if let Some(mut stderr) = stderr {
            #[expect(
                clippy::let_underscore_must_use,
                reason = "stderr is read only to quote it in a failure: a read that fails quotes less"
            )]
            let _ = (&mut stderr).take(MAX_STDERR).read_to_end(&mut said).await;
            #[expect(
                clippy::let_underscore_must_use,
                reason = "stderr is drained only so the program never blocks writing it"
            )]
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
        }
        said
    };
    let (status, said) = tokio::join!(child.wait(), said);
    Ok((status.map_err(&io)?, said))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::config::notify::EventKind;

    fn deliveries(command: &[&str], try_timeout: Duration) -> Deliveries {
        Deliveries {
            telegram: None,
            config: NotifyConfig {
                command: command.iter().map(|s| s.to_string()).collect(),
                ..NotifyConfig::default()
            },
            env: Env::from_pairs([("PATH", std::env::var("PATH").unwrap_or_default())]),
            vault_name: "Work".into(),
            http: None,
            try_timeout,
        }
    }

    fn event(title: &str, message: &str) -> Event {
        Event {
            kind: EventKind::Done,
            role: "ops".into(),
            title: title.into(),
            message: message.into(),
            note: None,
            at: chrono::Utc::now(),
            key: "k".into(),
            replies: None,
            replaces: None,
        }
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    }

    /// A command that starts a grandchild in a session of its own and then hangs: at the try's
    /// end both are gone — killed and reaped before the try returns, not left running.
    #[tokio::test]
    async fn a_try_that_runs_out_of_time_ends_the_program_and_all_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let script = format!("echo $$ > {d}/me; setsid sleep 986 & echo $! > {d}/grandchild; exec sleep 987");
        let try_timeout = Duration::from_secs(5);
        let err = deliveries(&["sh", "-c", &script], try_timeout)
            .try_once(Kind::Command, &event("t", "m"))
            .await
            .unwrap_err();
        assert!(matches!(err, DeliveryError::Timeout { .. }), "{err}");
        let pid = |name: &str| -> i32 {
            std::fs::read_to_string(dir.path().join(name))
                .unwrap_or_else(|e| panic!("{name}: {e} (the command never started in {try_timeout:?}?)"))
                .trim()
                .parse()
                .unwrap()
        };
        assert!(!alive(pid("me")), "the program itself");
        assert!(
            !alive(pid("grandchild")),
            "what it started, in a session of its own"
        );
    }

    /// Issue 49, item 3: the command finds the event's id in `TABD_EVENT_ID` and in the JSON on
    /// its stdin, and a second try of the event has the same.
    #[tokio::test]
    async fn the_command_gets_the_event_id_in_its_environment_and_its_json_on_every_try() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tries");
        let script = format!(
            "printf '%s ' \"$TABD_EVENT_ID\" >> {0}; cat >> {0}",
            out.display()
        );
        let d = deliveries(&["sh", "-c", &script], Duration::from_secs(30));
        let ev = event("t", "m");
        for _ in 0..2 {
            d.try_once(Kind::Command, &ev).await.unwrap();
        }
        let tries = std::fs::read_to_string(&out).unwrap();
        let tries: Vec<(&str, Value)> = tries
            .lines()
            .map(|l| {
                let (var, json) = l.split_once(' ').unwrap();
                (var, serde_json::from_str(json).unwrap())
            })
            .collect();
        let id = EventId::of("Work", "k");
        assert_eq!(tries.len(), 2, "{tries:?}");
        for (var, json) in &tries {
            assert_eq!(*var, id.as_str());
            assert_eq!(json["id"], id.as_str());
        }
    }

    #[test]
    fn notify_send_gets_text_after_a_double_dash() {
        assert_eq!(
            desktop_args("--wait", "-u critical"),
            ["--app-name=tabd", "--", "--wait", "-u critical"]
        );
    }

    /// Markup in a body is shown as the characters it is made of; an entity a model wrote
    /// (`&lt;`) is shown as written too, not as the `<` it stands for.
    #[test]
    fn a_body_is_escaped_so_no_markup_is_read_in_it() {
        assert_eq!(
            as_body_text(r#"<a href="https://x.example/">open</a> & <b>now</b> &lt;"#),
            r#"&lt;a href="https://x.example/"&gt;open&lt;/a&gt; &amp; &lt;b&gt;now&lt;/b&gt; &amp;lt;"#
        );
        assert_eq!(as_body_text("plain — text"), "plain — text");
    }
}
