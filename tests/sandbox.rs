//! The children's sandbox (docs/spec.md §20, issues 24 and 28), attacked: the in-repo test server's
//! `probe` tool tries to read keys and tabd's state, read and write the vault, write outside its
//! folder, open the network, connect to Unix sockets, signal processes outside, type into the
//! terminal, plant a link for its next start, leave its session, use a CLI run's tool relay —
//! itself and from a grandchild — under several configs. Every attempt the config does not grant
//! fails; what it grants works; servers installed the usual ways start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_model::FakeModel;
use crate::support::mcp_server::{example_bin, server_bin};
use crate::support::{describe, stdout, wire, TestVault};

/// The sandbox as `tabd mcp list --json` reports it for the first server.
fn reported(v: &TestVault) -> Value {
    let out = v.tabd(&["mcp", "list", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    listed["servers"][0]["sandbox"].clone()
}

/// Whether the kernel enforces the sandbox, and its Landlock ABI (else these tests say so — or,
/// with `TABD_REQUIRE_SANDBOX=1`, which `.ci/run` sets where the kernel lists Landlock, fail:
/// a machine that should sandbox must not pass these tests by skipping them).
pub(crate) fn enforced(v: &TestVault) -> Option<u64> {
    let sb = reported(v);
    if sb["enforced"] != json!(true) {
        if std::env::var("TABD_REQUIRE_SANDBOX").is_ok_and(|r| r == "1") {
            panic!(
                "TABD_REQUIRE_SANDBOX=1, but this machine cannot sandbox: {}",
                sb["why_not"]
            );
        }
        eprintln!("skipped: this kernel cannot sandbox ({})", sb["why_not"]);
        return None;
    }
    sb["landlock_abi"].as_u64()
}

/// Runs `ops` once, its model calling `probe` on each server in `calls` with `attempts`; returns
/// each probe's answer.
fn probe(v: &TestVault, fake: &FakeModel, servers: &[&str], attempts: &Value) -> Vec<Value> {
    let calls: Vec<(String, String, Value)> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("p{i}"), format!("{s}__probe"), attempts.clone()))
        .collect();
    let refs: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, a)| (id.as_str(), name.as_str(), a.clone()))
        .collect();
    let before = fake.requests().len();
    fake.script([
        wire::tools("anthropic", None, &refs),
        wire::text("anthropic", "probed"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[before + 1].body);
    results
        .iter()
        .map(|r| serde_json::from_str(&r.1).unwrap_or_else(|_| panic!("{results:?}")))
        .collect()
}

fn ops_role(v: &TestVault, servers: &[&str]) {
    let tools: String = servers.iter().map(|s| format!("- {s}/*\n")).collect();
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        &format!("---\napprove: {{network: auto, destructive: auto}}\n---\n# Ops\n## Mission\nProbe.\n## Tools\n{tools}"),
    );
}

fn denied(r: &Value, k: &str) -> bool {
    r[k].as_str().is_some_and(|s| s.starts_with("denied"))
}

fn ok(r: &Value, k: &str) -> bool {
    r[k] == "ok"
}

/// The system's own Python (not a version manager's shim), if the machine has one. Without one
/// the interpreter tests say so and skip — or, with `TABD_REQUIRE_SANDBOX=1`, fail: they are
/// sandbox tests, and a machine that should sandbox must not pass them by skipping (issue 37).
fn system_python() -> Option<&'static str> {
    let paths = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"];
    let found = paths.into_iter().find(|p| Path::new(p).exists());
    if found.is_none() {
        if std::env::var("TABD_REQUIRE_SANDBOX").is_ok_and(|r| r == "1") {
            panic!(
                "TABD_REQUIRE_SANDBOX=1, but there is no system python3 ({}) for the sandbox's interpreter tests: \
                 install it (apt-get install python3)",
                paths.join(", ")
            );
        }
        eprintln!("skipped: no system python3");
    }
    found
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_hostile_server_reaches_only_what_its_config_grants() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let home = v.dir.path().canonicalize().unwrap();
    let root = v.root();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::fs::create_dir_all(home.join("docs")).unwrap();
    std::fs::write(home.join("docs/readme.txt"), "not a secret").unwrap();
    v.write("project/secret.md", "a note");
    // A link in the vault to the keys (finding 5: `vault = "read"` followed it).
    std::os::unix::fs::symlink(home.join(".ssh"), root.join("keys")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Local services a child must not reach (finding 3): a socket file (ssh-agent, docker,
    // the session bus) and an abstract socket.
    let sock = home.join("agent.sock");
    let _agent = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let abstract_name = format!("tabd-test-{}", std::process::id());
    let _bus = {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&a).unwrap()
    };
    v.use_model(
        &fake,
        "anthropic",
        &format!(
            "[mcp.locked]\ncommand = \"{bin}\"\nnetwork = false\n\n[mcp.reader]\ncommand = \"{bin}\"\nvault = \"read\"\n\n[mcp.docker]\ncommand = \"{bin}\"\nunix_sockets = [\"{}\"]\n",
            sock.display(),
            bin = server_bin().display()
        ),
    );
    ops_role(&v, &["locked", "reader", "docker"]);
    let Some(abi) = enforced(&v) else { return };
    // A process outside the sandbox (an editor holding unsaved notes).
    let mut editor = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let state = root.join(".tabd/state.json");
    std::fs::write(&state, "{}").unwrap_or_default();
    let p = |rel: &str| root.join(rel).display().to_string();
    let key = home.join(".ssh/id_rsa").display().to_string();
    let readme = home.join("docs/readme.txt").display().to_string();
    let outside = home.join("outside.txt").display().to_string();
    let sock_s = sock.display().to_string();
    let abs = format!("@{abstract_name}");
    let attempts = json!({
        "read": [key, state.display().to_string(), p("project/secret.md"), readme, p("keys/id_rsa")],
        "write": [outside, p("project/by-server.md"), "~/notes.txt"],
        "connect": addr,
        "unix": [sock_s, abs],
        "signal": [editor.id(), "tabd"],
        "escape": "~/escaped.pid",
        "grandchild": true,
    });
    let r = probe(&v, &fake, &["locked", "reader", "docker"], &attempts);
    let (locked, reader, docker) = (&r[0], &r[1], &r[2]);
    let read = |what: &str| format!("read {what}");
    let write = |what: &str| format!("write {what}");
    for (name, r) in [("locked", locked), ("locked's grandchild", &locked["grandchild"])] {
        assert!(denied(r, &read(&key)), "{name} read the ssh key: {r}");
        assert!(
            denied(r, &read(&state.display().to_string())),
            "{name} read tabd's state: {r}"
        );
        assert!(
            denied(r, &read(&p("project/secret.md"))),
            "{name} read the vault with vault = none: {r}"
        );
        assert!(
            ok(r, &read(&readme)),
            "{name} could not read what programs may read: {r}"
        );
        assert!(
            denied(r, &write(&outside)),
            "{name} wrote outside its folder: {r}"
        );
        assert!(
            ok(r, &write("~/notes.txt")),
            "{name} could not write its own folder: {r}"
        );
        assert!(
            denied(r, &format!("connect {addr}")),
            "{name} connected with network = false: {r}"
        );
        assert!(
            denied(r, "udp socket"),
            "{name} opened a UDP socket with network = false: {r}"
        );
        assert!(
            denied(r, &format!("unix {sock_s}")),
            "{name} reached a socket file: {r}"
        );
        assert!(
            denied(r, &format!("unix {abs}")),
            "{name} reached an abstract socket: {r}"
        );
        if abi >= 6 {
            assert!(
                denied(r, &format!("signal {}", editor.id())),
                "{name} signalled a process outside: {r}"
            );
            assert!(denied(r, "signal tabd"), "{name} signalled tabd: {r}");
        }
    }
    for (name, r) in [("reader", reader), ("reader's grandchild", &reader["grandchild"])] {
        assert!(
            ok(r, &read(&p("project/secret.md"))),
            "{name} could not read the vault with vault = read: {r}"
        );
        assert!(
            denied(r, &write(&p("project/by-server.md"))),
            "{name} wrote the vault with vault = read: {r}"
        );
        assert!(
            denied(r, &read(&state.display().to_string())),
            "{name} read .tabd/ through vault = read: {r}"
        );
        assert!(
            denied(r, &read(&p("keys/id_rsa"))),
            "{name} followed a vault link to the keys: {r}"
        );
        assert!(denied(r, &read(&key)), "{name} read the ssh key: {r}");
        assert!(
            ok(r, &format!("connect {addr}")),
            "{name} has the network by default: {r}"
        );
        assert!(
            denied(r, &format!("unix {sock_s}")),
            "{name} reached a socket file: {r}"
        );
    }
    assert!(
        ok(docker, &format!("unix {sock_s}")),
        "the granted socket: {docker}"
    );
    assert!(
        denied(docker, &format!("unix {abs}")),
        "only the granted socket: {docker}"
    );
    assert!(!v.path("project/by-server.md").exists());
    assert!(!home.join("outside.txt").exists());
    // The process that left its session ended with its server (finding 7).
    assert!(ok(locked, "escape"), "{locked}");
    let children = home.join(".local/state/tabd/children");
    let own = std::fs::read_dir(&children)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let pid: i32 = std::fs::read_to_string(own.join("locked/escaped.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "a grandchild that called setsid outlived its server");
    assert!(alive(editor.id() as i32), "the editor was not touched");
    editor.kill().unwrap();
    let _ = editor.wait();
}

/// A vault whose role `ops` uses one test server, `locked`; `None` where the kernel cannot sandbox.
fn one_locked_server() -> Option<(TestVault, FakeModel)> {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(
        &fake,
        "anthropic",
        &format!("[mcp.locked]\ncommand = \"{}\"\n", server_bin().display()),
    );
    ops_role(&v, &["locked"]);
    enforced(&v)?;
    Some((v, fake))
}

/// Finding 2: with tabd on the person's terminal, a child can neither open it nor type into it.
#[test]
fn a_child_cannot_reach_the_persons_terminal() {
    let Some((v, fake)) = one_locked_server() else {
        return;
    };
    fake.script([
        wire::tools("anthropic", None, &[("t", "locked__probe", json!({"tty": true}))]),
        wire::text("anthropic", "probed"),
    ]);
    // tabd runs with a terminal of its own as its controlling terminal, as in a person's shell.
    let (master, slave) = pty();
    let mut cmd = v.command(&["fire", "ops"]);
    let slave_path = slave.clone();
    // SAFETY: between fork and exec the step makes only system calls (setsid, open, ioctl) on a
    // path made before the fork; it allocates nothing.
    #[allow(unsafe_code, reason = "only system calls between fork and exec: see SAFETY")]
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            libc::setsid();
            let fd = libc::open(slave_path.as_ptr(), libc::O_RDWR);
            if fd < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    let r: Value = serde_json::from_str(&results[0].1).unwrap();
    assert!(denied(&r, "open /dev/tty"), "{r}");
    assert!(denied(&r, "TIOCSTI"), "{r}");
    drop(master);
}

/// A new pseudo-terminal: its master side (kept open) and the path of its slave.
#[allow(
    unsafe_code,
    reason = "a fresh descriptor of ours is owned once; ptsname's string is copied at once"
)]
fn pty() -> (std::fs::File, std::ffi::CString) {
    use std::os::fd::FromRawFd;
    // SAFETY: `m` is a descriptor just opened and handed to the File alone; ptsname's static
    // buffer is copied before anything else can call it.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0 && libc::grantpt(m) == 0 && libc::unlockpt(m) == 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(m)).to_owned();
        (std::fs::File::from_raw_fd(m), name)
    }
}

/// A server starts in its own folder, whatever tabd's working folder is (`tabd fire` typed in the
/// vault, which the server may not read).
#[test]
fn a_server_starts_in_its_own_folder() {
    let Some((v, fake)) = one_locked_server() else {
        return;
    };
    fake.script([
        wire::tools("anthropic", None, &[("c", "locked__probe", json!({"cwd": true}))]),
        wire::text("anthropic", "probed"),
    ]);
    let out = v
        .command(&["fire", "ops"])
        .current_dir(v.root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    let r: Value = serde_json::from_str(&results[0].1).unwrap_or_else(|_| panic!("{results:?}"));
    assert!(ok(&r, "list cwd"), "{r}");
    let state = v
        .dir
        .path()
        .canonicalize()
        .unwrap()
        .join(".local/state/tabd/children");
    assert!(
        r["cwd"].as_str().unwrap().starts_with(state.to_str().unwrap()),
        "{r}"
    );
}

/// Finding 1: a server that swaps its temp folder for a link to the vault gets, at its next start,
/// a real folder again — its writes through the old path land in its own folder, not the vault.
#[test]
fn a_planted_link_does_not_widen_the_next_start() {
    let Some((v, fake)) = one_locked_server() else {
        return;
    };
    let root = v.root().canonicalize().unwrap();
    let plant = json!({"plant": {"link": "~/tmp", "to": root.display().to_string()}});
    let first = probe(&v, &fake, &["locked"], &plant);
    assert!(ok(&first[0], "plant"), "{}", first[0]);
    let write = json!({"write": ["~/tmp/roles/pwned.md", "~/tmp/hello.md"]});
    let second = probe(&v, &fake, &["locked"], &write);
    assert!(
        ok(&second[0], "write ~/tmp/hello.md"),
        "its own temp folder works: {}",
        second[0]
    );
    assert!(
        !v.path("roles/pwned.md").exists() && !v.path("hello.md").exists(),
        "{}",
        v.listing()
    );
    let state = v.dir.path().join(".local/state/tabd/children");
    let own = std::fs::read_dir(&state)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("locked/tmp");
    assert!(
        std::fs::symlink_metadata(&own).unwrap().is_dir(),
        "a real folder again"
    );
    assert!(own.join("hello.md").exists());
}

/// Findings 4 and 6, and the CLI's folder (finding 1): an agent CLI gets a private config folder
/// (its login file copied in, the person's settings never writable), and its run's tool relay
/// answers only that CLI: not a sandboxed server that finds the socket, not a process of the CLI
/// without the run's key, not a process outside the CLI with the key.
#[test]
fn only_the_runs_own_cli_uses_its_relay_and_the_cli_has_a_private_config() {
    let v = TestVault::new();
    let home = v.dir.path().canonicalize().unwrap();
    let log = home.join("cli.jsonl");
    let release = home.join("release");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/.credentials.json"), "{\"token\": \"t\"}").unwrap();
    std::fs::write(home.join(".claude/settings.json"), "{}").unwrap();
    let calls = json!([
        ["locked__probe", {"relay": {"find": true}}],
        ["write_file", {"path": "project/ok.md", "content": "fine"}],
    ]);
    let settings = [home.join(".claude/settings.json"), home.join(".claude.json")];
    let writes = json!(settings
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>());
    v.set_config(&format!(
        "timezone = \"UTC\"\n[provider]\nkind = \"command\"\nprofile = \"claude\"\n\n[profiles.claude]\ncommand = \"{}\"\nenv = {{ FAKE_CLI_LOG = \"{}\", FAKE_CLI_CALLS = '{}', FAKE_CLI_NOKEY = \"1\", FAKE_CLI_WAIT = \"{}\", FAKE_CLI_WRITE = '{}' }}\n\n[mcp.locked]\ncommand = \"{}\"\n",
        example_bin("fake_agent_cli").display(),
        log.display(),
        calls,
        release.display(),
        writes,
        server_bin().display()
    ));
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "---\nwrite_paths: [project/**]\napprove: {network: auto}\n---\n# Ops\n## Mission\nM.\n## Tools\n- write_file\n- locked/*\n",
    );
    if enforced(&v).is_none() {
        return;
    }
    let run = v
        .command(&["fire", "ops"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the run goes on: its relay, as any process of this user could find it.
    let runs = home.join(".local/state/tabd/runs");
    let socket = wait_for(|| {
        std::fs::read_dir(&runs)
            .ok()?
            .flatten()
            .map(|e| e.path().join("mcp.sock"))
            .find(|p| p.exists())
    });
    let key = std::fs::read_to_string(socket.with_file_name("relay.key")).unwrap();
    let answer = match relay_with_key(&socket, &key) {
        Ok(a) => a,
        Err(e) => {
            std::fs::write(&release, "").unwrap();
            let out = run.wait_with_output().unwrap();
            panic!("cannot reach the run's relay ({e}):\n{}", describe(&out));
        }
    };
    assert!(
        answer.contains("refused"),
        "a process outside the CLI, with the key: {answer}"
    );
    std::fs::write(&release, "").unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let seen: Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().next().unwrap()).unwrap();
    assert!(
        seen["nokey"].as_str().unwrap().contains("refused"),
        "the CLI without the key: {seen}"
    );
    let probe: Value = serde_json::from_str(seen["results"][0]["text"].as_str().unwrap()).unwrap();
    assert!(probe["relays found"].as_u64().unwrap() >= 1, "{probe}");
    let relay = format!("relay {}", socket.display());
    assert!(
        denied(&probe, &relay),
        "a sandboxed server used the CLI's relay: {probe}"
    );
    assert!(!v.path("hijacked.md").exists(), "{}", v.listing());
    assert_eq!(v.read("project/ok.md"), "fine", "the CLI's own calls work");
    // Its config folder is its own, in the run's folder (removed with it), with the person's
    // login copied in; the person's untouched.
    let config_dir = PathBuf::from(seen["claude_config_dir"].as_str().unwrap());
    let cwd = PathBuf::from(seen["cwd"].as_str().unwrap());
    assert!(
        cwd.starts_with(home.join(".local/state/tabd/runs")) && config_dir.starts_with(&cwd),
        "{config_dir:?}"
    );
    assert!(seen["home"].as_str().unwrap().starts_with(cwd.to_str().unwrap()));
    assert_eq!(seen["login"], "{\"token\": \"t\"}");
    assert!(!cwd.exists(), "removed after the run");
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(),
        "{}"
    );
}

fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..2000 {
        if let Some(t) = f() {
            return t;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("never happened");
}

/// Speaks to a run's relay with its key, from this (unrelated) process.
fn relay_with_key(socket: &Path, key: &str) -> std::io::Result<String> {
    use std::io::{BufRead, BufReader, Write};
    // The socket's file appears at bind(), a moment before listen(): until then a connect is
    // refused. Wait for the listener, not for a time.
    let mut tries = 0;
    let stream = loop {
        match std::os::unix::net::UnixStream::connect(socket) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused && tries < 500 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other?,
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = stream.try_clone().unwrap();
    // A relay that refuses may close before the second line is written (EPIPE): what it
    // answered, if anything, is what counts.
    let _ = writeln!(w, "{}", json!({"tabd_relay_key": key.trim()}));
    let _ = writeln!(
        w,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
    );
    Ok(BufReader::new(stream)
        .lines()
        .map_while(Result::ok)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// `tabd mcp list` shows the rules applied; `tabd validate` what it grants and what it will not.
#[test]
fn the_sandbox_is_shown_and_checked() {
    let v = TestVault::new();
    let home = v.dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    v.set_config(&format!(
        "timezone = \"UTC\"\n[mcp.test]\ncommand = \"{}\"\nvault = \"read\"\nnetwork = false\nwritable = [\"/no/such/folder\", \"~\"]\nenv = {{ MEMORY_FILE_PATH = \"${{HOME}}/graph.json\" }}\n",
        server_bin().display()
    ));
    let out = v.tabd(&["validate"]);
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(
        all.contains("[mcp.test] writable: /no/such/folder does not exist"),
        "{all}"
    );
    assert!(all.contains("note: [mcp.test] grants MEMORY_FILE_PATH"), "{all}");
    assert!(!home.join("graph.json").exists(), "validate makes nothing");
    let sb = reported(&v);
    assert_eq!(sb["vault"], "read");
    assert_eq!(sb["network"], false);
    let has = |k: &str, p: &Path| {
        sb[k]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == &json!(p.display().to_string()))
    };
    assert!(has("hidden", &home.join(".ssh")), "{sb}");
    assert!(has("hidden", &v.root().canonicalize().unwrap()), "{sb}");
    assert!(
        has("writable", &home.join("graph.json")),
        "a file named in env: {sb}"
    );
    let own = sb["own"][0].as_str().unwrap();
    assert!(
        !own.starts_with(v.root().to_str().unwrap()),
        "own folder outside the vault: {own}"
    );
    let refused = sb["refused"].to_string();
    assert!(
        refused.contains("/no/such/folder") && refused.contains("home folder as a whole"),
        "{sb}"
    );
    assert!(sb["enforced"].is_boolean() && sb["not_enforced"].is_array());
    let text = stdout(&v.tabd(&["mcp", "list"]));
    assert!(
        text.contains("sandbox:") && text.contains("vault read") && text.contains("no network"),
        "{text}"
    );
}

/// Servers installed the way people install them start with nothing granted: a binary in `~/bin`
/// and `~/.local/bin`, a script run by the system's Python and by a pyenv shim; and when the
/// sandbox refuses one something, the failure says so and names the line to add.
#[test]
fn servers_installed_the_usual_ways_start_and_refusals_name_the_grant() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let home = v.dir.path().canonicalize().unwrap();
    for d in ["bin", ".local/bin", "graphs"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
        std::fs::copy(server_bin(), home.join(d).join("server")).ok();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/echo_server.py");
    let Some(python) = system_python() else { return };
    let mut config = format!(
        "[mcp.bin]\ncommand = \"{h}/bin/server\"\n\n[mcp.local]\ncommand = \"{h}/.local/bin/server\"\n\n[mcp.py]\ncommand = \"{python}\"\nargs = [\"{s}\"]\n",
        h = home.display(),
        s = script.display()
    );
    // A version manager's shim (pyenv's, on this machine's PATH), if there is one.
    let shim = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join("python3"))
        .find(|p| p.exists() && p.to_string_lossy().contains("/shims/"));
    let mut servers = vec!["bin", "local", "py"];
    if let Some(shim) = shim {
        config.push_str(&format!(
            "\n[mcp.pyenv]\ncommand = \"{}\"\nargs = [\"{}\"]\n",
            shim.display(),
            script.display()
        ));
        servers.push("pyenv");
    }
    v.use_model(&fake, "anthropic", &config);
    ops_role(&v, &servers);
    if enforced(&v).is_none() {
        return;
    }
    let out = v.tabd(&["mcp", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    for s in listed["servers"].as_array().unwrap() {
        assert_eq!(s["status"], "ok", "{} did not start: {s}", s["name"]);
    }
    // Writing where nothing grants it: the error says it was the sandbox, and what to add.
    let target = home.join("graphs/g.json").display().to_string();
    fake.script([
        wire::tools(
            "anthropic",
            None,
            &[
                ("a", "py__write", json!({"path": target})),
                ("b", "bin__probe", json!({"write": [target]})),
            ],
        ),
        wire::text("anthropic", "done"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    let grant = format!("writable = [\"{}\"]", home.join("graphs").display());
    assert!(
        results[0].1.contains("the sandbox refused") && results[0].1.contains(&grant),
        "{results:?}"
    );
    let daily = v.daily();
    assert!(daily.contains("the sandbox refused"), "{daily}");
}

/// An approved call the sandbox stopped is `blocked`, not `failed`: the note names the grant, the
/// ledger says it did not do its work, and with the grant added it may be approved again — and
/// then it runs.
#[test]
fn an_approved_call_stopped_by_the_sandbox_may_be_approved_again_after_the_grant() {
    use crate::support::daemon::{daemon_config, wait_until, Daemon};
    let v = TestVault::new();
    let fake = FakeModel::start();
    let home = v.dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join("graphs")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/echo_server.py");
    let Some(python) = system_python() else { return };
    let server = |grant: &str| {
        format!(
            "{}[mcp.py]\ncommand = \"{python}\"\nargs = [\"{}\"]\n{grant}",
            daemon_config(""),
            script.display()
        )
    };
    v.use_model(&fake, "anthropic", &server(""));
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "# Ops\n## Mission\nWrite the graph.\n## Tools\n- py/*\n",
    );
    if enforced(&v).is_none() {
        return;
    }
    let target = home.join("graphs/g.json");
    fake.script([
        wire::tools(
            "anthropic",
            Some("Write it."),
            &[("w", "py__write", json!({"path": target.display().to_string()}))],
        ),
        wire::text("anthropic", "Queued."),
    ]);
    assert!(v.tabd(&["fire", "ops"]).status.success());
    let note = format!(
        "agent/approvals/{}",
        v.files_in("agent/approvals").pop().expect("an approval note")
    );
    let id = note
        .trim_end_matches(".md")
        .rsplit('-')
        .next()
        .unwrap()
        .to_string();
    let status = |v: &TestVault| {
        v.read(&note)
            .lines()
            .find_map(|l| l.strip_prefix("status: ").map(str::to_string))
            .unwrap_or_default()
    };
    assert!(v.tabd(&["approve", &id]).status.success());
    let mut d = Daemon::start(&v);
    wait_until(Duration::from_secs(20), "blocked", || status(&v) == "blocked");
    d.signal(libc::SIGTERM);
    d.wait_exit(Duration::from_secs(20));
    let text = v.read(&note);
    let grant = format!("writable = [\"{}\"]", home.join("graphs").display());
    assert!(
        text.contains("Stopped by the sandbox") && text.contains(&grant),
        "{text}"
    );
    assert!(!target.exists());
    // The person grants it and approves again: it runs, once.
    v.use_model(&fake, "anthropic", &server(&format!("{grant}\n")));
    let out = v.tabd(&["approve", &id]);
    assert!(out.status.success(), "{}", describe(&out));
    let mut d = Daemon::start(&v);
    wait_until(Duration::from_secs(20), "done", || status(&v) == "done");
    d.signal(libc::SIGTERM);
    d.wait_exit(Duration::from_secs(20));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "written");
}

/// A server the sandbox stops at its start: `tabd mcp list` says so, names the line to add, and
/// shows the error line even when a long stack trace follows it.
#[test]
fn a_server_stopped_at_start_says_it_was_the_sandbox() {
    let v = TestVault::new();
    let home = v.dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join("cache")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/echo_server.py");
    let Some(python) = system_python() else { return };
    v.set_config(&format!(
        "timezone = \"UTC\"\n[mcp.py]\ncommand = \"{python}\"\nargs = [\"{}\"]\nenv = {{ ECHO_WRITE_AT_START = \"file:{}\" }}\n",
        script.display(),
        home.join("cache/x/y.json").display()
    ));
    if enforced(&v).is_none() {
        return;
    }
    let out = v.tabd(&["mcp", "list"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let grant = format!("writable = [\"{}\"]", home.join("cache").display());
    assert!(
        text.contains("DOWN") && text.contains("the sandbox refused") && text.contains(&grant),
        "{text}"
    );
    assert!(
        text.contains("Error: EACCES: permission denied"),
        "the cause, above the trace: {text}"
    );
}
