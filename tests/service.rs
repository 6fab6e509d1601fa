//! Issue 39, item 2: `tabd service install | uninstall`, and the env file every command reads.
//!
//! These tests put a stand-in `systemctl` first on PATH: a script that writes down its arguments
//! (and prints a status line for `status`). It is not a fake of tabd's own behaviour: it stands
//! for the person's service manager, which a test cannot drive without a user session bus (none
//! here, and none in CI), and what tabd owes it is exactly the calls it makes, in order. The unit
//! tabd writes is checked by the real `systemd-analyze verify` where it is installed.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{describe, stdout, TestVault};

/// A `systemctl` that records each call's arguments, one call a line, in `systemctl.log`; `mode`
/// `"no-bus"` makes every call fail as systemctl does outside a user session.
pub(crate) fn fake_systemctl(v: &TestVault, mode: &str) -> (String, PathBuf) {
    let bin = v.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = v.dir.path().join("systemctl.log");
    let fail = if mode == "no-bus" {
        "echo 'Failed to connect to bus: No medium found' >&2; exit 1"
    } else {
        ""
    };
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{}'\n{fail}\ncase \"$*\" in *status*) echo '● tabd.service - tabd: AI roles for your Markdown vault'; echo '     Active: active (running)'; exit 0;; esac\nexit 0\n",
        log.display()
    );
    let path = bin.join("systemctl");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path_var = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    (path_var, log)
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `tabd service ARGS --vault VAULT` with the config where a person's would be
/// (`$XDG_CONFIG_HOME/tabd/`), `path_var` as PATH.
fn service(v: &TestVault, path_var: &str, args: &[&str]) -> Output {
    let mut all = vec!["service"];
    all.extend_from_slice(args);
    v.command_with_default_config(&all)
        .env("PATH", path_var)
        .output()
        .expect("run tabd service")
}

fn unit_path(v: &TestVault) -> PathBuf {
    v.dir.path().join("xdg/systemd/user/tabd.service")
}

fn env_path(v: &TestVault) -> PathBuf {
    v.dir.path().join("xdg/tabd/env")
}

/// The unit passes `systemd-analyze verify` with no word of complaint (it exits 0 even on bad
/// values, so any output is a failure), where systemd-analyze is installed (on the PATH, as
/// `.ci/verify-systemd` finds it, or in the system's folders).
fn verify(v: &TestVault, unit: &Path) {
    let path = std::env::var("PATH").unwrap_or_default();
    let folders = path
        .split(':')
        .filter(|d| !d.is_empty())
        .chain(["/usr/bin", "/bin"]);
    let Some(analyze) = folders
        .map(|d| Path::new(d).join("systemd-analyze"))
        .find(|p| p.exists())
    else {
        crate::support::missing(
            "TABD_REQUIRE_SYSTEMD",
            "systemd-analyze is not installed, so the unit is not verified",
            "apt-get install systemd",
        );
        return;
    };
    let out = std::process::Command::new(analyze)
        .args(["verify", "--man=no"])
        .arg(unit)
        .env("HOME", v.dir.path())
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.trim().is_empty(),
        "systemd-analyze verify said:\n{said}\n{}",
        std::fs::read_to_string(unit).unwrap()
    );
}

/// One command sets the service up: the unit runs this very binary on the vault, the person's
/// config is kept to the byte, the env file is made 0600, systemctl is called in order; and
/// uninstall takes back only the unit.
#[test]
fn install_writes_the_unit_keeps_the_config_and_enables_it_and_uninstall_takes_it_back() {
    let v = TestVault::new();
    let (path_var, log) = fake_systemctl(&v, "");
    let config = v.xdg_config();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let mine = "# my settings\ntimezone = \"UTC\"\n\n[provider]\nkind = \"openai\"\nmodel = \"qwen2.5:7b-instruct\"\n";
    std::fs::write(&config, mine).unwrap();

    let out = service(&v, &path_var, &["install"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        mine,
        "the config is kept as it was"
    );
    let unit = std::fs::read_to_string(unit_path(&v)).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_tabd")).unwrap();
    let root = std::fs::canonicalize(v.root()).unwrap();
    assert!(
        unit.contains(&format!(
            "ExecStart=\"{}\" run \"--vault\" \"{}\"\n",
            exe.display(),
            root.display()
        )),
        "this binary, and the vault the config does not name:\n{unit}"
    );
    assert!(
        unit.contains(&format!("EnvironmentFile=-{}\n", env_path(&v).display())),
        "{unit}"
    );
    assert!(unit.starts_with("# Written by `tabd service install`"), "{unit}");
    verify(&v, &unit_path(&v));
    let mode = std::fs::metadata(env_path(&v)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the env file is private");
    assert_eq!(
        calls(&log),
        [
            "--user daemon-reload",
            "--user enable --now tabd.service",
            "--user --no-pager --lines=0 status tabd.service"
        ]
    );
    let said = stdout(&out);
    assert!(
        said.contains("Active: active (running)"),
        "the status is shown: {said}"
    );

    let out = service(&v, &path_var, &["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!unit_path(&v).exists(), "the unit is gone");
    assert_eq!(
        calls(&log)[3..],
        ["--user disable --now tabd.service", "--user daemon-reload"]
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), mine);
    assert!(
        env_path(&v).exists() && v.path("roles/delivery.md").exists(),
        "env file and vault stay"
    );
}

/// With no config, install writes the quick start's one (`vault = …`), and the unit needs no
/// `--vault`; an env file that is there is kept, and its values never printed.
#[test]
fn install_without_a_config_writes_the_vault_into_one_and_keeps_an_env_file() {
    let v = TestVault::new();
    let (path_var, _log) = fake_systemctl(&v, "");
    std::fs::create_dir_all(env_path(&v).parent().unwrap()).unwrap();
    std::fs::write(env_path(&v), "ANTHROPIC_API_KEY=sk-ant-never-shown-123\n").unwrap();
    std::fs::set_permissions(env_path(&v), std::fs::Permissions::from_mode(0o600)).unwrap();

    let out = service(&v, &path_var, &["install"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let root = std::fs::canonicalize(v.root()).unwrap();
    let config = std::fs::read_to_string(v.xdg_config()).unwrap();
    assert!(
        config.contains(&format!("vault = \"{}\"", root.display())),
        "{config}"
    );
    let unit = std::fs::read_to_string(unit_path(&v)).unwrap();
    assert!(unit.contains("\" run\n"), "the config names the vault: {unit}");
    let printed = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains("ANTHROPIC_API_KEY"), "{printed}");
    assert!(!printed.contains("sk-ant-never-shown-123"), "{printed}");
    assert_eq!(
        std::fs::read_to_string(env_path(&v)).unwrap(),
        "ANTHROPIC_API_KEY=sk-ant-never-shown-123\n"
    );
}

/// No user session bus (`su`, a container without systemd, CI): install says what it wrote, that
/// tabd is not enabled or started and how to run it instead, exit 1; uninstall (issue 48) still
/// removes the unit it wrote, says it stopped nothing, and keeps the config, env file and vault.
#[test]
fn without_a_user_session_install_says_how_to_run_tabd_and_uninstall_removes_the_unit() {
    let v = TestVault::new();
    let (path_var, log) = fake_systemctl(&v, "no-bus");
    let out = service(&v, &path_var, &["install"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let root = std::fs::canonicalize(v.root()).unwrap();
    for said in [
        "cannot reach your user session's service manager".to_string(),
        "the unit is written but tabd is not enabled or started".to_string(),
        format!("Run it yourself instead: `tabd run --vault {}`", root.display()),
        format!("The unit stays at {}", unit_path(&v).display()),
        "`tabd service uninstall` removes it".to_string(),
    ] {
        assert!(err.contains(&said), "{said:?} in {err}");
    }
    assert!(
        err.contains("loginctl enable-linger") || err.contains("does not run systemd"),
        "why, as this machine has it: {err}"
    );
    let wrote = stdout(&out);
    assert!(
        wrote.contains(&format!("Unit:     {}", unit_path(&v).display())) && wrote.contains("Env file:"),
        "what it wrote: {wrote}"
    );
    assert_eq!(
        calls(&log),
        ["--user daemon-reload"],
        "nothing after the first failure"
    );
    assert!(unit_path(&v).exists());

    let out = service(&v, &path_var, &["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!unit_path(&v).exists(), "the unit it wrote is gone");
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "Removed {}. Nothing was stopped or disabled",
            unit_path(&v).display()
        )) && said.contains("cannot reach your user session"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "Kept: {}, {}, the vault",
            v.xdg_config().display(),
            env_path(&v).display()
        )),
        "{said}"
    );
    assert!(v.xdg_config().exists() && env_path(&v).exists() && v.path("roles/delivery.md").exists());
    assert_eq!(calls(&log)[1..], ["--user disable --now tabd.service"]);
}

/// No systemctl at all (issue 48): install writes nothing and says how to run tabd instead;
/// a unit written before is still removed by uninstall, config and env file kept.
#[test]
fn without_systemctl_install_writes_nothing_and_uninstall_still_removes_the_unit() {
    let v = TestVault::new();
    let empty = v.dir.path().join("no-systemctl");
    std::fs::create_dir_all(&empty).unwrap();
    let no_systemctl = empty.display().to_string();
    let out = service(&v, &no_systemctl, &["install"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let root = std::fs::canonicalize(v.root()).unwrap();
    assert!(
        err.contains("systemctl is not on PATH")
            && err.contains("nothing was written")
            && err.contains(&format!("`tabd run --vault {}`", root.display())),
        "{err}"
    );
    assert!(!unit_path(&v).exists() && !env_path(&v).exists() && !v.xdg_config().exists());

    // Installed while systemd was there; removed where it is not.
    let (path_var, _log) = fake_systemctl(&v, "");
    let out = service(&v, &path_var, &["install"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let config = std::fs::read_to_string(v.xdg_config()).unwrap();
    let out = service(&v, &no_systemctl, &["uninstall"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!unit_path(&v).exists());
    let said = stdout(&out);
    assert!(
        said.contains("Nothing was stopped or disabled: systemctl is not on PATH"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(v.xdg_config()).unwrap(), config);
    assert!(env_path(&v).exists());
}

/// A tabd.service tabd did not write is the person's: install and uninstall leave it alone.
#[test]
fn a_unit_tabd_did_not_write_is_left_alone() {
    let v = TestVault::new();
    let (path_var, log) = fake_systemctl(&v, "");
    std::fs::create_dir_all(unit_path(&v).parent().unwrap()).unwrap();
    let theirs = "[Service]\nExecStart=/opt/tabd run\n";
    std::fs::write(unit_path(&v), theirs).unwrap();
    for action in ["install", "uninstall"] {
        let out = service(&v, &path_var, &[action]);
        assert_eq!(out.status.code(), Some(1), "{action}: {}", describe(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("was not written by `tabd service install`"),
            "{action}: {}",
            describe(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(unit_path(&v)).unwrap(), theirs);
    assert!(calls(&log).is_empty());
}

/// The key put in the env file for the service is seen by `tabd validate` typed in a shell;
/// the file's values are never shown, and a file others can read gets a warning.
#[test]
fn validate_sees_the_api_key_from_the_env_file() {
    let v = TestVault::new();
    v.with_key.set(false);
    let out = v.tabd(&["validate"]);
    assert!(
        stdout(&out).contains("ANTHROPIC_API_KEY is not set"),
        "without the file: {}",
        describe(&out)
    );
    std::fs::create_dir_all(env_path(&v).parent().unwrap()).unwrap();
    std::fs::write(
        env_path(&v),
        "# for the service\nANTHROPIC_API_KEY=\"sk-ant-from-the-env-file-42\"\n",
    )
    .unwrap();
    std::fs::set_permissions(env_path(&v), std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = v.tabd(&["validate"]);
    let said = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(!said.contains("ANTHROPIC_API_KEY is not set"), "{said}");
    assert!(
        !said.contains("warning: "),
        "a private file is read quietly: {said}"
    );

    std::fs::set_permissions(env_path(&v), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = v.tabd(&["validate"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("can be read by other users (mode 644)") && err.contains("chmod 600"),
        "{err}"
    );
    assert!(
        !err.contains("sk-ant-from-the-env-file-42") && !stdout(&out).contains("sk-ant-from-the-env-file-42")
    );
}

/// Issue 48: the README's order — `tabd init` on a vault with notes, `tabd service install`, then
/// `tabd status` with no `--vault` — works: init names the vault in the config it writes, install
/// keeps that config, and status finds the vault and tabd's folders under `tabd/` there.
#[test]
fn init_then_service_install_then_status_works_without_naming_the_vault_again() {
    let v = TestVault::new();
    let theirs = v.dir.path().join("Notes");
    std::fs::create_dir_all(theirs.join(".obsidian")).unwrap();
    std::fs::write(theirs.join("journal.md"), "mine\n").unwrap();
    let (path_var, _log) = fake_systemctl(&v, "");
    let person = |args: &[&str]| v.as_a_person(args).env("PATH", &path_var).output().unwrap();
    let out = person(&["init", theirs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = person(&["service", "install", "--vault", theirs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    let out = person(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let said = stdout(&out);
    let root = std::fs::canonicalize(&theirs).unwrap();
    assert!(said.contains(&format!("vault: {}", root.display())), "{said}");
    assert!(said.contains("delivery (Delivery Manager)"), "{said}");
    assert_eq!(
        std::fs::read_to_string(theirs.join("journal.md")).unwrap(),
        "mine\n"
    );
}
