//! `tabd init`, `validate` and `schedule` through the real binary.

use crate::support::{describe, stdout, TestVault};

#[test]
fn init_then_validate_exits_zero() {
    let v = TestVault::new();
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains("roles: 4 ok (comms, delivery, product, risk)"),
        "{text}"
    );
    assert!(text.contains("0 errors"), "{text}");
    for role in ["delivery", "risk", "comms", "product"] {
        assert!(v.path(&format!("agent/inbox/{role}")).is_dir(), "{}", v.listing());
    }
}

#[test]
fn init_never_overwrites() {
    let v = TestVault::new();
    v.write("roles/delivery.md", "# Mine\n");
    let out = v.tabd(&["init", v.root().to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(v.read("roles/delivery.md"), "# Mine\n");
    assert!(stdout(&out).contains("Created no file"), "{}", describe(&out));
    assert!(
        stdout(&out).contains("tabd is set up here already"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_broken_role_exits_1_with_its_line_and_others_stay_fine() {
    let v = TestVault::new();
    v.write(
        "roles/risk.md",
        "---\nextends: _base\nmax_tool_calls: many\n---\n# Risk Manager\n\n## Schedule\nevery blue moon\n",
    );
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains("roles/risk.md:3: error: `max_tool_calls` must be a whole number"),
        "{text}"
    );
    assert!(
        text.contains("roles/risk.md:8: error: cannot read schedule \"every blue moon\""),
        "{text}"
    );
    assert!(text.contains("roles: 3 ok (comms, delivery, product)"), "{text}");
    assert!(text.contains("broken: 1 (risk)"), "{text}");
}

/// Issue 48: validate's summary matches its lines — a role an error names (a skill it lists is
/// missing) is not counted ok, and the abstract `_base` is counted apart.
#[test]
fn a_role_with_an_error_is_not_counted_ok() {
    let v = TestVault::new();
    let risk = v.read("roles/risk.md");
    v.write("roles/risk.md", &format!("{risk}\n## Skills\n- nosuch\n"));
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains("roles/risk.md:") && text.contains("error: skill `nosuch`"),
        "{text}"
    );
    assert!(
        text.contains("roles: 3 ok (comms, delivery, product)\n"),
        "{text}"
    );
    assert!(text.contains("with errors: 1 (risk)"), "{text}");
    assert!(text.contains("abstract: 1 (_base)"), "{text}");
    assert!(text.contains("1 error,"), "{text}");
}

#[test]
fn schedule_json_has_the_contract_shape() {
    let v = TestVault::new();
    v.set_config("timezone = \"America/New_York\"\n");
    let out = v.tabd(&[
        "schedule",
        "--json",
        "--from",
        "2026-03-06T12:00:00-05:00",
        "--next",
        "5",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let roles = json["roles"].as_array().expect("roles array");
    assert_eq!(roles.len(), 4);
    let delivery = roles.iter().find(|r| r["role"] == "delivery").expect("delivery");
    assert_eq!(delivery["cron"], serde_json::json!(["0 9,17 * * 1-5"]));
    assert_eq!(delivery["timezone"], "America/New_York");
    assert_eq!(delivery["error"], serde_json::Value::Null);
    assert_eq!(
        delivery["next"],
        serde_json::json!([
            "2026-03-06T17:00:00-05:00",
            "2026-03-09T09:00:00-04:00",
            "2026-03-09T17:00:00-04:00",
            "2026-03-10T09:00:00-04:00",
            "2026-03-10T17:00:00-04:00"
        ])
    );
    let risk = roles.iter().find(|r| r["role"] == "risk").expect("risk");
    assert_eq!(
        risk["next"][1], "2026-03-08T08:30:00-04:00",
        "first fire after the spring-forward"
    );
    for r in roles {
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["cron", "error", "next", "role", "timezone"]);
    }
}

/// One role's entry in `tabd schedule --json`'s output.
fn schedule_of(out: &std::process::Output, role: &str) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    json["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role)
        .unwrap()
        .clone()
}

#[test]
fn schedule_json_reports_broken_roles() {
    let v = TestVault::new();
    v.write("roles/risk.md", "# Risk\n## Schedule\nsometimes\n");
    let out = v.tabd(&["schedule", "--json"]);
    let risk = schedule_of(&out, "risk");
    assert!(
        risk["error"].as_str().unwrap().contains("roles/risk.md:3"),
        "{risk}"
    );
    assert_eq!(risk["next"], serde_json::json!([]));
}

/// Several day+time pairs in one phrase are one cron each (never a cross product), `tabd
/// schedule` says in words what it understood, and `validate` notes a bare hour's reading.
#[test]
fn schedule_says_what_it_understood_and_pairs_days_with_their_times() {
    let v = TestVault::new();
    v.set_config("timezone = \"Europe/Lisbon\"\n");
    v.write(
        "roles/risk.md",
        "# Risk\n## Mission\nWatch.\n## Schedule\nfriday at 4pm and monday at 9am\nevery friday at 4 UTC\n",
    );
    let out = v.tabd(&[
        "schedule",
        "--json",
        "--from",
        "2026-07-01T00:00:00Z",
        "--next",
        "3",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let risk = schedule_of(&out, "risk");
    assert_eq!(
        risk["cron"],
        serde_json::json!(["0 16 * * 5", "0 9 * * 1", "0 16 * * 5"])
    );
    // Lisbon is UTC+1 in July: the UTC line fires at 17:00 there, after the 16:00 Lisbon one.
    assert_eq!(
        risk["next"],
        serde_json::json!([
            "2026-07-03T16:00:00+01:00",
            "2026-07-03T17:00:00+01:00",
            "2026-07-06T09:00:00+01:00"
        ])
    );
    let text = stdout(&v.tabd(&["schedule"]));
    assert!(text.contains("understood: fri at 16:00; mon at 09:00"), "{text}");
    assert!(text.contains("understood: fri at 16:00 (UTC)"), "{text}");
    let out = v.tabd(&["validate"]);
    let said = stdout(&out);
    assert!(
        said.contains("roles/risk.md:6: note: \"at 4\" read as 16:00"),
        "{said}"
    );
    assert_eq!(out.status.code(), Some(0), "a note is not an error: {said}");
}

#[test]
fn config_errors_exit_2_with_file_and_line() {
    let v = TestVault::new();
    v.set_config("timezone = \"UTC\"\n[provider]\nmodle = \"x\"\n");
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml:3: error:"), "{err}");
}

#[test]
fn missing_vault_is_a_usage_error() {
    let v = TestVault::new();
    let out = v
        .bare_command(&["validate"])
        .arg("--vault")
        .arg(v.path("nope"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tabd init"));
}

/// Issue 39, item 8: `--vault ~/Valt` for `~/Vault` names the vault beside it with the near
/// name before it offers `tabd init`; a near folder that is no vault is not suggested.
#[test]
fn a_mistyped_vault_path_suggests_the_vault_it_probably_meant() {
    let v = TestVault::new();
    let root = v.root();
    let typo = root.with_file_name("vaul");
    std::fs::create_dir_all(root.with_file_name("vaulx")).unwrap();
    let out = v
        .bare_command(&["run"])
        .arg("--vault")
        .arg(&typo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "the vault {} is not a folder; did you mean {} (a tabd vault)? Or, for a new vault, create it with `tabd init {}`",
            typo.display(),
            root.display(),
            typo.display()
        )),
        "{err}"
    );
    assert!(!err.contains("vaulx"), "{err}");
}

#[test]
fn bad_from_is_a_usage_error() {
    let v = TestVault::new();
    let out = v.tabd(&["schedule", "--from", "tomorrow"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

/// A wait that times out says why: it shows the vault's files (and the daemon's stderr, when the
/// test started one) instead of only "timed out".
#[test]
fn a_wait_that_times_out_shows_the_vault() {
    let v = TestVault::new();
    v.write("project/marker-for-the-listing.md", "x");
    let caught = std::panic::catch_unwind(|| {
        crate::support::daemon::wait_until(std::time::Duration::ZERO, "something that never happens", || {
            false
        })
    });
    let msg = caught
        .err()
        .and_then(|e| e.downcast::<String>().ok())
        .map(|s| *s)
        .unwrap_or_default();
    assert!(msg.contains("something that never happens"), "{msg}");
    assert!(msg.contains("project/marker-for-the-listing.md"), "{msg}");
}

/// A command line that fits a person's habits (issue 21): the version names its commit, shells
/// get completions, `tabd logs` shows one role's part of today's log.
#[test]
fn version_completions_and_logs() {
    let v = TestVault::new();
    let out = v.tabd(&["--version"]);
    let text = stdout(&out);
    assert!(text.starts_with("tabd 0.") && text.contains("(commit "), "{text}");
    let out = v.tabd(&["completions", "bash"]);
    assert!(
        out.status.success() && stdout(&out).contains("_tabd"),
        "{}",
        describe(&out)
    );
    let out = v.tabd(&["logs"]);
    assert!(
        stdout(&out).contains("Nothing logged today yet"),
        "{}",
        describe(&out)
    );
    let day = chrono::Utc::now()
        .with_timezone(&chrono_tz::UTC)
        .format("%Y-%m-%d")
        .to_string();
    v.write(
        &format!("daily/{day}.md"),
        &format!("---\ntabd: run-log\n---\n# {day}\n\n## 09:00 · Delivery Manager · schedule\n- **Outcome:** ok\n\n## 09:05 · Risk Manager · inbox\n- **Outcome:** failed\n"),
    );
    let out = v.tabd(&["logs", "delivery"]);
    let text = stdout(&out);
    assert!(
        text.contains("Delivery Manager") && !text.contains("Risk Manager"),
        "{text}"
    );
    // Another day, a run delegated to risk, the last N entries.
    v.write(
        "daily/2026-11-02.md",
        "# 2026-11-02

## 08:00 · Delivery Manager · inbox
- **Outcome:** ok

### Delegated · Risk Manager
- **Task:** rate the delay

### Summary
Asked risk.
",
    );
    let text = stdout(&v.tabd(&["logs", "--date", "2026-11-02", "risk"]));
    assert!(
        text.contains(
            "## 08:00 · Delivery Manager · inbox (delegated)
### Delegated · Risk Manager
- **Task:** rate the delay"
        ) && !text.contains("Asked risk."),
        "{text}"
    );
    let text = stdout(&v.tabd(&["logs", "-n", "1"]));
    assert!(
        text.contains("09:05 · Risk Manager") && !text.contains("09:00 · Delivery"),
        "{text}"
    );
    // The last two entries since 2026-11-02 are today's two (issue 37: `contains(2026-11-02) ||
    // contains(today)` passed whichever day was shown). Only on 2026-11-02 itself is there one file.
    let text = stdout(&v.tabd(&["logs", "--since", "2026-11-02", "-n", "2"]));
    if day.as_str() > "2026-11-02" {
        assert!(
            text.contains(&format!("# {day}"))
                && !text.contains("# 2026-11-02")
                && text.contains("09:00 · Delivery Manager")
                && text.contains("09:05 · Risk Manager"),
            "{text}"
        );
    } else {
        assert!(text.contains("# 2026-11-02"), "{text}");
    }
    assert!(stdout(&v.tabd(&["logs", "--date", "2026-11-03"])).contains("Nothing logged on 2026-11-03"));
    assert_eq!(v.tabd(&["logs", "--date", "soon"]).status.code(), Some(2));
    // One role's status.
    let text = stdout(&v.tabd(&["status", "risk"]));
    assert!(
        text.contains("risk (Risk Manager)") && !text.contains("delivery (Delivery Manager)"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&v.tabd(&["status", "risk", "--json"]).stdout).unwrap();
    assert_eq!(json["roles"].as_array().map(Vec::len), Some(1), "{json}");
    let out = v.tabd(&["status", "rsik"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did you mean `risk`?"),
        "{}",
        describe(&out)
    );
    let out = v.tabd(&["-q", "validate"]);
    assert!(out.status.code().is_some(), "{}", describe(&out));
    let out = v.tabd(&["-q", "-v", "validate"]);
    assert_eq!(out.status.code(), Some(2), "-q and -v together is a usage error");
}

/// `tabd completions bash | head -1` or `tabd schedule | head`: the reader leaves early and tabd
/// ends quietly, by SIGPIPE as any Unix tool (the shell says 141), never with a panic report.
#[test]
fn a_reader_that_leaves_early_gets_no_panic() {
    let v = TestVault::new();
    for args in [&["completions", "bash"][..], &["schedule"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader); // closed before tabd writes a byte: the write must fail
        let out = v
            .command(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.code() == Some(0) || out.status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {:?} {err}",
            out.status
        );
    }
}

/// A bad value in the config does not lock the person out: the commands that only read work with
/// what they can, print the config's error on top and exit 0; those that act still refuse (2).
#[test]
fn a_broken_config_leaves_the_read_only_commands_working() {
    let v = TestVault::new();
    v.set_config("timezone = \"Europe/Lisbon\"\n[limits]\nmax_tool_calls = \"many\"\n");
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["logs"],
        &["approvals"],
        &["runs"],
        &["schedule"],
    ] {
        let out = v.tabd(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("config.toml:3: error:"), "{args:?}: {err}");
    }
    let text = stdout(&v.tabd(&["status"]));
    assert!(
        text.contains("CONFIG ERROR: ") && text.contains("config.toml:3"),
        "{text}"
    );
    // The time zone could still be read.
    assert!(stdout(&v.tabd(&["schedule"])).contains("(Europe/Lisbon)"));
    for args in [&["fire", "delivery"][..], &["validate"], &["approve", "x"]] {
        assert_eq!(v.tabd(args).status.code(), Some(2), "{args:?}");
    }
    // Not even TOML: still readable with --vault, and the error says where.
    v.set_config("[limits\n");
    let out = v.tabd(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config.toml:1"),
        "{}",
        describe(&out)
    );
}

/// `[notify]` that cannot work on this machine is found by `validate`, not when tabd needs you.
#[test]
fn validate_checks_the_notify_channels() {
    let v = TestVault::new();
    v.set_config(
        "timezone = \"UTC\"\n[notify]\ncommand = [\"no-such-alerter\"]\nwebhook = \"https://ntfy.sh/${NOPE_TOKEN}\"\nquiet_hours = \"22:00-07:00\"\n",
    );
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert!(
        text.contains("[notify] command: `no-such-alerter` is not installed"),
        "{text}"
    );
    assert!(
        text.contains("[notify] webhook:") && text.contains("NOPE_TOKEN"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(0), "warnings, not errors: {text}");
    v.set_config("timezone = \"UTC\"\n[notify]\nquiet_hours = \"late\"\n");
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("quiet_hours"),
        "{}",
        describe(&out)
    );
}
