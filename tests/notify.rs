//! `[notify]` (docs/spec.md §22) end to end: the real daemon tells a command (the event as JSON on
//! stdin) and a webhook (a local HTTP listener) that a call waits for approval — once; a channel
//! that fails shows in the status without its secret.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::fake_model::FakeModel;
use crate::support::{wire, TestVault};

const T: Duration = Duration::from_secs(30);

/// One request a local HTTP listener was sent.
#[derive(Clone, Debug)]
struct Request {
    /// Path with query.
    path: String,
    /// Its headers, names in lower case.
    headers: Vec<(String, String)>,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a local HTTP listener was sent. Paths under `/fail` get 500, under `/gone` 404. The
/// first request to a path under `/hang-once` is read whole and never answered: the listener
/// waits until the client gives up and closes the connection (a receiver that took the event
/// and then was too slow to say so); later ones get 200.
#[derive(Clone, Default)]
struct Listener {
    got: Arc<Mutex<Vec<Request>>>,
    /// How many connections the client closed while waiting for an answer that never came.
    gave_up: Arc<Mutex<usize>>,
    port: u16,
}

impl Listener {
    fn start() -> Self {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let me = Listener {
            got: Arc::default(),
            gave_up: Arc::default(),
            port: socket.local_addr().unwrap().port(),
        };
        let (got, gave_up) = (me.got.clone(), me.gave_up.clone());
        std::thread::spawn(move || {
            let mut hung = false;
            for stream in socket.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut length = 0;
                let mut headers = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                        if name == "content-length" {
                            length = value.parse().unwrap_or(0);
                        }
                        headers.push((name, value.to_string()));
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                got.lock().unwrap().push(Request {
                    path: path.clone(),
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                if path.starts_with("/hang-once") && !hung {
                    hung = true;
                    // Taken, and no answer: the next read ends when the client hangs up.
                    let mut rest = Vec::new();
                    let _ = reader.read_to_end(&mut rest);
                    *gave_up.lock().unwrap() += 1;
                    continue;
                }
                let status = if path.starts_with("/fail") {
                    "500 Internal Server Error"
                } else if path.starts_with("/gone") {
                    "404 Not Found"
                } else {
                    "200 OK"
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        me
    }

    fn got(&self) -> Vec<(String, Value)> {
        self.requests().into_iter().map(|r| (r.path, r.body)).collect()
    }

    fn requests(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }
}

/// A role whose `write_file` waits for approval, and a model that asks for one.
fn asking_vault(notify: &str) -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &format!("{}{notify}", daemon_config("")));
    v.write(
        "roles/ops.md",
        "---\nresume: false\napprove:\n  write_file: ask\n---\n# Ops\n## Mission\nKeep the plan.\n## Tools\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                Some("Record the plan."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "project/plan.md", "content": "ship"}),
                )],
            )
        } else {
            wire::text("anthropic", "Queued.")
        }
    });
    (v, fake)
}

#[test]
fn a_waiting_approval_reaches_a_command_and_a_webhook_once() {
    let hook = Listener::start();
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let notify = format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\nwebhook = \"http://127.0.0.1:{}/hook?token=${{HOOK_TOKEN}}\"\nobsidian_vault = \"Work\"\n",
        events.display(),
        hook.port
    );
    let (v, _fake) = asking_vault(&notify);
    let _d = Daemon::start_with_env(&v, &[("HOOK_TOKEN", "s3cret-token")]);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the command told", || {
        std::fs::read_to_string(&events).is_ok_and(|t| !t.is_empty())
    });
    wait_until(T, "the webhook told", || !hook.got().is_empty());
    let line = std::fs::read_to_string(&events).unwrap();
    let ev: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(ev["event"], "approval", "{ev}");
    assert_eq!(ev["role"], "ops");
    let note = ev["note"].as_str().unwrap();
    assert!(
        note.starts_with("agent/approvals/") && v.path(note).is_file(),
        "{ev}"
    );
    let url = ev["url"].as_str().unwrap();
    assert!(
        url.starts_with("obsidian://open?vault=Work&file=agent%2Fapprovals%2F"),
        "{url}"
    );
    let (path, body) = hook.got()[0].clone();
    assert_eq!(
        path, "/hook?token=s3cret-token",
        "the token is read from the environment when sending"
    );
    assert_eq!(body["event"], "approval");
    assert_eq!(body["note"], ev["note"]);
    // Issue 49, item 3: one event, one id, on every channel.
    assert!(
        ev["id"].as_str().is_some_and(|id| id.starts_with("tabd-")),
        "{ev}"
    );
    assert_eq!(body["id"], ev["id"], "the same id on the command and the webhook");
    // Another event in the vault (a note for another run) sends nothing about the same approval.
    v.write("agent/inbox/ops/again.md", "Again.");
    wait_until(T, "the second run", || v.daily().matches("Queued.").count() == 2);
    let state = v.state();
    assert!(
        state["approvals"]
            .as_object()
            .unwrap()
            .values()
            .all(|a| a["notified"] == true),
        "{state}"
    );
    assert_eq!(
        std::fs::read_to_string(&events).unwrap().lines().count(),
        1,
        "one message per event"
    );
    assert!(!v.daily().contains("s3cret-token"));
}

/// The command channel is the person's program, like a hook: it gets tabd's environment without
/// a secret — not the model's key, not a `${VAR}` the config expands for another channel.
#[test]
fn a_command_channel_is_given_no_secret() {
    let hook = Listener::start();
    let out = tempfile::tempdir().unwrap();
    let dump = out.path().join("env.txt");
    let notify = format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"env > {}; cat > /dev/null\"]\nwebhook = \"http://127.0.0.1:{}/hook?token=${{HOOK_TOKEN}}\"\n",
        dump.display(),
        hook.port
    );
    let (v, _fake) = asking_vault(&notify);
    let _d = Daemon::start_with_env(&v, &[("HOOK_TOKEN", "s3cret-token")]);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the command told", || {
        std::fs::read_to_string(&dump).is_ok_and(|t| t.contains("PATH="))
    });
    wait_until(T, "the webhook told (its token expanded)", || {
        !hook.got().is_empty()
    });
    let env = std::fs::read_to_string(&dump).unwrap();
    assert!(
        !env.contains("s3cret-token"),
        "a ${{VAR}} of the config reached the command: {env}"
    );
    assert!(
        !env.contains(crate::support::TEST_KEY),
        "the model's key reached the command: {env}"
    );
    assert!(env.contains("TABD_EVENT_ID=tabd-"), "{env}");
    assert!(env.contains("HOME="), "what is no secret is kept: {env}");
}

#[test]
fn a_failing_channel_shows_in_status_without_its_secret() {
    let hook = Listener::start();
    let notify = format!(
        "[notify]\nwebhook = \"http://127.0.0.1:{}/fail/${{HOOK_TOKEN}}\"\nformat = \"ntfy\"\n",
        hook.port
    );
    let (v, _fake) = asking_vault(&notify);
    let d = Daemon::start_with_env(
        &v,
        &[
            ("HOOK_TOKEN", "s3cret-token"),
            ("TABD_TEST_NOTIFY_RETRY_MS", "50"),
        ],
    );
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the status showing the failing channel", || {
        v.read("agent/status.md").contains("tabd cannot reach you")
    });
    // ntfy's JSON publishing: the topic from the URL's last part, posted to the server's root.
    let (path, body) = hook.got()[0].clone();
    assert_eq!(path, "/fail/");
    assert_eq!(body["topic"], "s3cret-token");
    assert!(
        body["click"]
            .as_str()
            .unwrap()
            .starts_with("obsidian://open?vault="),
        "{body}"
    );
    assert!(hook.got().len() >= 2, "retried: {:?}", hook.got().len());
    // Issue 49, item 3: ntfy gets the event's id as its sequence id (a message with the same one
    // replaces the first on the phone), and every try has the same.
    let tries = hook.requests();
    let id = tries[0].body["sequence_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("tabd-"), "{:?}", tries[0]);
    for t in &tries {
        assert_eq!(t.body["sequence_id"], id.as_str(), "{t:?}");
        assert_eq!(t.header("x-sequence-id"), Some(id.as_str()), "{t:?}");
        assert_eq!(
            t.header("idempotency-key"),
            Some(format!("\"{id}\"").as_str()),
            "{t:?}"
        );
    }
    // `tabd status` reads status.json, written just after the note: wait for it too.
    let failing = |text: &str| text.contains("NOTIFY FAILING: webhook:") && text.contains("HTTP 500");
    let mut status = String::new();
    let until = std::time::Instant::now() + T;
    while std::time::Instant::now() < until {
        status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
        if failing(&status) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(failing(&status), "{status}");
    for text in [status, v.read("agent/status.md"), d.stderr(), v.daily()] {
        assert!(!text.contains("s3cret-token"), "{text}");
    }
}

/// Issue 36, finding 12: an ntfy topic written out in the URL is as good as a password: the
/// status, `agent/status.md` and the log show the webhook with its last part hidden.
#[test]
fn a_webhook_topic_written_out_is_hidden_in_status_and_log() {
    let hook = Listener::start();
    let notify = format!(
        "[notify]\nwebhook = \"http://127.0.0.1:{}/fail/literal-topic-4242\"\nformat = \"ntfy\"\n",
        hook.port
    );
    let (v, _fake) = asking_vault(&notify);
    let d = Daemon::start_with_env(&v, &[("TABD_TEST_NOTIFY_RETRY_MS", "50"), ("TABD_LOG", "debug")]);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the status showing the failing channel", || {
        v.read("agent/status.md").contains("tabd cannot reach you")
    });
    assert_eq!(
        hook.got()[0].1["topic"],
        "literal-topic-4242",
        "sent where it belongs"
    );
    // `tabd status` reads status.json, written just after the note: wait for it too.
    let mut status = String::new();
    wait_until(T, "tabd status showing the failing channel", || {
        status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
        status.contains("NOTIFY FAILING: webhook:")
    });
    for text in [
        &status,
        &v.read("agent/status.md"),
        &v.read(".tabd/status.json"),
        &d.stderr(),
    ] {
        assert!(!text.contains("literal-topic-4242"), "{text}");
    }
    let shown = format!("webhook: http://127.0.0.1:{}/fail/…: HTTP 500", hook.port);
    assert!(status.contains(&shown), "{status}");
}

/// A webhook that answers 404 is wrong until the person fixes it: tried once, not four times,
/// and the status says it was not retried (a 500 is retried: the test above).
#[test]
fn a_channel_no_retry_could_fix_is_tried_once_and_says_so() {
    let hook = Listener::start();
    let notify = format!("[notify]\nwebhook = \"http://127.0.0.1:{}/gone\"\n", hook.port);
    let (v, _fake) = asking_vault(&notify);
    let _d = Daemon::start_with_env(&v, &[("TABD_TEST_NOTIFY_RETRY_MS", "50")]);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    // The status is written once the channel's tries are over.
    wait_until(T, "the status showing the failing channel", || {
        v.read("agent/status.md").contains("HTTP 404")
    });
    let status = v.read("agent/status.md");
    assert!(status.contains("not retried"), "{status}");
    assert_eq!(hook.got().len(), 1, "tried once: {:?}", hook.got());
}

/// A script named `notify-send` first on a PATH: it writes its arguments, one a line, to
/// `notify-send.txt` in the test's folder. Returns (PATH, that file).
fn fake_notify_send(v: &TestVault) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = v.dir.path().join("bin");
    let said = v.dir.path().join("notify-send.txt");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("notify-send");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{}'\n", said.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    (path, said)
}

/// `desktop = true`: `notify-send` (here a script on PATH that writes down its arguments) gets
/// the event's title and message, after `--`.
#[test]
fn the_desktop_channel_hands_the_event_to_notify_send() {
    let (v, _fake) = asking_vault("[notify]\ndesktop = true\n");
    let (path, said) = fake_notify_send(&v);
    let _d = Daemon::start_with_env(
        &v,
        &[
            ("PATH", path.as_str()),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/test-bus"),
        ],
    );
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "notify-send to be run", || {
        std::fs::read_to_string(&said).is_ok_and(|t| t.lines().count() >= 4)
    });
    let args = std::fs::read_to_string(&said).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        args[..3],
        ["--app-name=tabd", "--", "Ops asks to write project/plan.md"]
    );
    // The change's first lines first, then what to do (issue 39, item 4).
    assert!(
        args[3].starts_with("“ship” — A write call waits for your approval"),
        "{args:?}"
    );
}

/// What `notify-send` was given when `ops` finished with the model's answer `said`, one argument
/// a line.
fn notify_send_args_for_a_run_that_says(said: &'static str) -> Vec<String> {
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\ndesktop = true\nevents = [\"done\"]\n",
            daemon_config("")
        ),
    );
    v.write("roles/ops.md", "# Ops\n## Mission\nKeep the plan.\n");
    fake.respond_with(move |_, _| wire::text("anthropic", said));
    let (path, args) = fake_notify_send(&v);
    let _d = Daemon::start_with_env(
        &v,
        &[
            ("PATH", path.as_str()),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/test-bus"),
        ],
    );
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "notify-send to be run", || {
        std::fs::read_to_string(&args).is_ok_and(|t| t.lines().count() >= 4)
    });
    let args = std::fs::read_to_string(&args).unwrap();
    args.lines().map(str::to_string).collect()
}

/// Issue 36, finding 4: a model's text that starts with `-` (`--wait` makes `notify-send` wait
/// for the notification to close) reaches `notify-send` as text, after `--`, never as an option.
#[test]
fn model_text_reaches_notify_send_as_text_never_as_an_option() {
    assert_eq!(
        notify_send_args_for_a_run_that_says("--wait -u critical"),
        ["--app-name=tabd", "--", "Ops finished", "--wait -u critical"],
        "options first, then --, then the text as it was"
    );
}

/// Notification servers read a body as markup (the freedesktop spec's `<b>`, `<a href>`,
/// `<img>`): a model's link would be a live link in the person's notification. The body reaches
/// `notify-send` escaped, so the server shows the characters the model wrote; the title is plain
/// text by the spec.
#[test]
fn model_text_reaches_notify_send_as_text_never_as_markup() {
    let args = notify_send_args_for_a_run_that_says(
        "<a href=\"https://evil.example/\">Open the plan</a> & <img src=\"file:///etc/passwd\"/>",
    );
    assert_eq!(
        args,
        [
            "--app-name=tabd",
            "--",
            "Ops finished",
            "&lt;a href=\"https://evil.example/\"&gt;Open the plan&lt;/a&gt; &amp; \
             &lt;img src=\"file:///etc/passwd\"/&gt;"
        ]
    );
}

/// Whether `pid` runs a command line holding `marker` (a number reused by another process is
/// not ours; a zombie runs nothing).
fn runs(pid: i32, marker: &str) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "));
    !zombie
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
}

/// Issue 36, finding 4: a `command` channel whose first try hangs (and starts a grandchild in a
/// session of its own). The webhook gets the events meanwhile; when the try's time is up its
/// whole process tree is gone before the next try; and the next event is tried before the hung
/// one's retry (it waited one try, not four).
#[test]
fn a_stuck_command_is_killed_after_its_try_and_holds_up_neither_the_webhook_nor_the_next_event() {
    let hook = Listener::start();
    let out = tempfile::tempdir().unwrap();
    let d = out.path().display();
    // The first try ever hangs; every later one writes its event down.
    let script = format!(
        "ev=$(cat); if mkdir {d}/hung 2>/dev/null; then \
         setsid sleep 98761 & echo $! > {d}/hung/grandchild; echo $$ > {d}/hung/pid; exec sleep 98762; fi; \
         printf '%s\\n' \"$ev\" >> {d}/delivered"
    );
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\nevents = [\"failed_note\"]\ncommand = [\"sh\", \"-c\", {script:?}]\nwebhook = \"http://127.0.0.1:{}/hook\"\n",
            daemon_config("").replace("[inbox]\n", "[inbox]\nmax_attempts = 1\n"),
            hook.port
        ),
    );
    // Every run fails because of its note, which goes to failed/ at once: one event per note.
    v.write("roles/ops.md", "# Ops\n## Mission\nKeep the plan.\n");
    fake.respond_with(|_, _| {
        crate::support::fake_model::Reply::status(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        )
    });
    let _d = Daemon::start_with_env(
        &v,
        &[
            ("TABD_TEST_NOTIFY_TRY_MS", "10000"),
            ("TABD_TEST_NOTIFY_RETRY_MS", "50"),
        ],
    );
    let pid_of = |name: &str| -> Option<i32> {
        std::fs::read_to_string(out.path().join("hung").join(name))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    };
    let told = |note: &str| {
        hook.got()
            .iter()
            .any(|(_, ev)| ev["message"].as_str().is_some_and(|m| m.contains(note)))
    };
    v.write("agent/inbox/ops/first.md", "One.");
    wait_until(T, "the command's first try to hang", || {
        pid_of("pid").is_some() && pid_of("grandchild").is_some()
    });
    let (hung, grandchild) = (pid_of("pid").unwrap(), pid_of("grandchild").unwrap());
    wait_until(T, "the webhook told of the first note", || told("first.md"));
    v.write("agent/inbox/ops/second.md", "Two.");
    wait_until(T, "the webhook told of the second note", || told("second.md"));
    let delivered = out.path().join("delivered");
    assert!(
        !delivered.exists(),
        "the webhook was told of both while the command's first try still hung"
    );
    wait_until(T, "a later try of the command", || {
        std::fs::read_to_string(&delivered).is_ok_and(|t| !t.is_empty())
    });
    assert!(
        !runs(hung, "98762"),
        "the hung program was killed when its time was up"
    );
    assert!(
        !runs(grandchild, "98761"),
        "and what it started, in a session of its own"
    );
    let first = std::fs::read_to_string(&delivered).unwrap();
    assert!(
        first.lines().next().is_some_and(|l| l.contains("second.md")),
        "the next event went before the hung one's retry: {first}"
    );
    wait_until(T, "the hung event retried and delivered", || {
        std::fs::read_to_string(&delivered).is_ok_and(|t| t.contains("first.md"))
    });
}

/// Without a session bus there is no desktop to reach: the status says why at once, not retried.
#[test]
fn the_desktop_channel_without_a_session_bus_says_so() {
    let (v, _fake) = asking_vault("[notify]\ndesktop = true\n");
    let _d = Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the status showing the failing channel", || {
        v.read("agent/status.md").contains("no session D-Bus")
    });
    let status = v.read("agent/status.md");
    assert!(status.contains("desktop: no session D-Bus"), "{status}");
    assert!(status.contains("not retried"), "{status}");
}

/// `expect:` — a file a role must have produced by each deadline: missing, the daily note and a
/// `[notify]` command say so (a reported ok is no proof); once it is there, nothing more is said.
#[test]
fn a_missed_expectation_is_logged_and_notified() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let fake = FakeModel::start();
    let v = vault_with(
        &fake,
        &format!(
            "{}[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            daemon_config(""),
            events.display()
        ),
    );
    // A deadline every second (a cron with seconds), so the test sees several.
    v.write(
        "roles/reporter.md",
        "---\nexpect: {path: \"reports/{date}-{role}.md\", by: \"* * * * * *\"}\n---\n# Reporter\n## Mission\nReport.\n",
    );
    let _d = Daemon::start(&v);
    wait_until(T, "the missed expectation in the daily note", || {
        v.daily().contains("Reporter · expected [[reports/")
    });
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert!(
        v.daily().contains(&format!("[[reports/{today}-reporter]] by ")),
        "{}",
        v.daily()
    );
    wait_until(T, "the expect event", || {
        std::fs::read_to_string(&events).is_ok_and(|t| t.contains("\"expect\""))
    });
    // Produced: later deadlines find it.
    v.write(&format!("reports/{today}-reporter.md"), "the report");
    let written = chrono::Utc::now();
    let said = v.daily().matches("expected [[reports/").count();
    wait_until(T, "later deadlines checked", || {
        let state = v.state();
        state["roles"]["reporter"]["expect_checked"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .is_some_and(|t| t > written + chrono::Duration::seconds(2))
    });
    let now_said = v.daily().matches("expected [[reports/").count();
    assert!(
        now_said <= said + 1,
        "at most the deadline that raced the write: {said} → {now_said}"
    );
}

/// Issue 39, item 4: a person decides from the lock screen. The note's title and the push name
/// what the call does to which file, the push starts with the first lines of the change, each on
/// one line; a secret the model put into the change (a variable named like one, here) is written
/// back as `${VAR}` in the push.
#[test]
fn an_approval_push_names_the_file_and_the_first_lines_of_the_change() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let fake = FakeModel::start();
    let notify = format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
        events.display()
    );
    let v = vault_with(&fake, &format!("{}{notify}", daemon_config("")));
    v.write(
        "roles/review.md",
        "---\nresume: false\napprove:\n  write_file: ask\n---\n# Weekly Review\n## Mission\nReview the week.\n## Tools\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                Some("The week's review."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "reviews/week.md", "content": "# Week 47\n\n- shipped the importer (key s3cret-token)\n- fixed auth\n- more\n"}),
                )],
            )
        } else {
            wire::text("anthropic", "Queued.")
        }
    });
    let _d = Daemon::start_with_env(&v, &[("HOOK_TOKEN", "s3cret-token")]);
    v.write("agent/inbox/review/go.md", "Review the week.");
    wait_until(T, "the command told", || {
        std::fs::read_to_string(&events).is_ok_and(|t| !t.is_empty())
    });
    let line = std::fs::read_to_string(&events).unwrap();
    let ev: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(ev["title"], "Weekly Review asks to write reviews/week.md", "{ev}");
    let message = ev["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "“# Week 47 ⏎ - shipped the importer (key ${HOOK_TOKEN}) ⏎ - fixed auth ⏎ …” — A write call waits for your approval"
        ),
        "{message}"
    );
    assert!(!line.contains("s3cret-token"), "{line}");
    let note = v.read(ev["note"].as_str().unwrap());
    assert!(
        note.contains("\n# Weekly Review asks to write reviews/week.md\n"),
        "{note}"
    );
}

/// Issue 39, item 4: the `paused` push opens the status note, like every push opens its note,
/// and its message reads as sentences — a capital first, the server's own full stop not put
/// before tabd's note of its error type.
#[test]
fn a_paused_push_links_the_status_note_and_reads_as_a_sentence() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let fake = FakeModel::start();
    let notify = format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
        events.display()
    );
    let v = vault_with(&fake, &format!("{}{notify}", daemon_config("")));
    fake.respond_with(|_, _| wire::error("anthropic", 401, "authentication_error", "invalid x-api-key."));
    let _d = Daemon::start(&v);
    v.write("agent/inbox/delivery/n.md", "waits out the outage");
    wait_until(T, "the paused event", || {
        std::fs::read_to_string(&events).is_ok_and(|t| t.contains("\"paused\""))
    });
    let line = std::fs::read_to_string(&events).unwrap();
    let ev: Value = serde_json::from_str(line.lines().find(|l| l.contains("\"paused\"")).unwrap()).unwrap();
    assert_eq!(ev["note"], "agent/status.md", "{ev}");
    assert!(
        ev["url"].as_str().unwrap().ends_with("&file=agent%2Fstatus"),
        "{ev}"
    );
    let message = ev["message"].as_str().unwrap();
    assert_eq!(
        message,
        "Anthropic: HTTP 401: invalid x-api-key (authentication_error) — the API key in ANTHROPIC_API_KEY was rejected; check it. Notes wait in their inboxes; no attempt is counted."
    );
}

/// Issue 49, item 3 (openclaw#102367, #30246): a webhook that took the event and then did not
/// answer in time gets it again on the retry — with the same `Idempotency-Key` and body `id`, so
/// it can tell the retry from a new event — and once the retry is answered the event is
/// delivered, not reported failed. The next event has another id.
#[test]
fn a_webhook_that_took_an_event_and_timed_out_gets_the_retry_with_the_same_id() {
    let hook = Listener::start();
    let notify = format!(
        "[notify]\nwebhook = \"http://127.0.0.1:{}/hang-once\"\n",
        hook.port
    );
    let (v, fake) = asking_vault(&notify);
    // Each note asks to write a file of its own: two calls, two approvals, two events.
    fake.respond_with(|req, _| {
        if !wire::tool_results(&req.body).is_empty() {
            return wire::text("anthropic", "Queued.");
        }
        let path = if wire::all_text(&req.body).contains("Again.") {
            "project/again.md"
        } else {
            "project/plan.md"
        };
        wire::tools(
            "anthropic",
            None,
            &[("w1", "write_file", json!({"path": path, "content": "ship"}))],
        )
    });
    let d = Daemon::start_with_env(
        &v,
        &[
            ("TABD_TEST_NOTIFY_TRY_MS", "1500"),
            ("TABD_TEST_NOTIFY_RETRY_MS", "50"),
        ],
    );
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the retry", || hook.requests().len() >= 2);
    assert_eq!(
        *hook.gave_up.lock().unwrap(),
        1,
        "the first try was taken whole, and tabd gave up waiting for its answer"
    );
    let reqs = hook.requests();
    let (first, retry) = (&reqs[0], &reqs[1]);
    assert_eq!(first.body["event"], "approval", "{first:?}");
    let id = first.body["id"].as_str().unwrap();
    assert!(id.starts_with("tabd-"), "{first:?}");
    let key = format!("\"{id}\"");
    assert_eq!(
        first.header("idempotency-key"),
        Some(key.as_str()),
        "a quoted string, as draft-ietf-httpapi-idempotency-key-header has it"
    );
    assert_eq!(retry.body, first.body, "the same event, its id and all");
    assert_eq!(retry.header("idempotency-key"), Some(key.as_str()));
    // The next event has an id of its own. And the channel's task writes how an event ended
    // (the status, the log) before it takes the next one: by now the first is over.
    v.write("agent/inbox/ops/again.md", "Again.");
    wait_until(T, "the next event", || hook.requests().len() >= 3);
    let next = &hook.requests()[2];
    assert_eq!(next.body["event"], "approval", "{next:?}");
    assert_ne!(next.body["note"], first.body["note"], "another approval");
    assert_ne!(next.body["id"], first.body["id"], "another event, another id");
    assert_ne!(next.header("idempotency-key"), Some(key.as_str()));
    assert!(
        !d.stderr().contains("notify: webhook failed"),
        "delivered on the retry, not failed: {}",
        d.stderr()
    );
    let status = String::from_utf8_lossy(&v.tabd(&["status"]).stdout).to_string();
    assert!(!status.contains("NOTIFY FAILING"), "{status}");
    assert!(!v.read("agent/status.md").contains("tabd cannot reach you"));
}

/// Issue 49, item 3: an event said again after a restart has the id it had before. (`paused` is
/// said once per cause a day while tabd runs; that memory does not outlive a restart, so the
/// restarted daemon says it again — and a receiver sees the same event.) The command finds the
/// id in `TABD_EVENT_ID` and in the JSON on its stdin.
#[test]
fn an_event_said_again_after_a_restart_has_the_same_id() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.txt");
    // A line per event: the variable, a space, the JSON.
    let script = format!(
        "printf '%s ' \"$TABD_EVENT_ID\" >> {0}; cat >> {0}",
        events.display()
    );
    let fake = FakeModel::start();
    let notify = format!("[notify]\ncommand = [\"sh\", \"-c\", {script:?}]\n");
    let v = vault_with(&fake, &format!("{}{notify}", daemon_config("")));
    fake.respond_with(|_, _| wire::error("anthropic", 401, "authentication_error", "invalid x-api-key."));
    let said = || -> Vec<(String, Value)> {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"paused\""))
            .map(|l| {
                let (var, json) = l.split_once(' ').unwrap();
                (var.to_string(), serde_json::from_str(json).unwrap())
            })
            .collect()
    };
    let mut d = Daemon::start(&v);
    v.write("agent/inbox/delivery/n.md", "waits out the outage");
    wait_until(T, "the paused event", || said().len() == 1);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(T), Some(0));
    let _d = Daemon::start(&v);
    wait_until(T, "the paused event after the restart", || said().len() == 2);
    let said = said();
    let (before, after) = (&said[0], &said[1]);
    assert!(before.0.starts_with("tabd-"), "{before:?}");
    assert_eq!(before.1["id"], before.0.as_str(), "the variable is the JSON's id");
    assert_eq!(after.0, before.0, "the same event, the same id: {said:?}");
    assert_eq!(after.1["id"], before.1["id"]);
}
