//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod approvals;
pub mod context;
pub mod daemon;
pub mod fake_model;
pub mod mcp_client;
pub mod mcp_server;
pub mod nats;
pub mod ntfy;
pub mod otlp;
pub mod telegram;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod wire;

/// A temp vault created by `tabd init`, plus an isolated environment for the binary.
pub struct TestVault {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// Whether commands get a (fake) API key in their environment.
    pub with_key: std::cell::Cell<bool>,
    /// What `tabd init` wrote into the config for this vault (`vault = …` on top, `[vaults."…"]`
    /// below), kept around every config a test writes after.
    pub vault_table: std::cell::RefCell<(String, String)>,
}

pub const TEST_KEY: &str = "sk-test-0000-never-in-logs";

impl TestVault {
    /// A vault from the template, with a config file in UTC.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let vault = dir.path().join("vault");
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "timezone = \"UTC\"\n").expect("write config");
        let t = Self {
            dir,
            config,
            with_key: std::cell::Cell::new(true),
            vault_table: Default::default(),
        };
        context::vault_created(&vault);
        let out = t.tabd(&["init", vault.to_str().expect("utf-8 path")]);
        assert!(out.status.success(), "init failed:\n{}", describe(&out));
        t
    }

    /// A vault a person already lives in — `files` (path, text) written first — then `tabd
    /// init` on it (tabd's folders under `tabd/`). Its config keeps what init wrote for it.
    pub fn existing(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let vault = dir.path().join("vault");
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "timezone = \"UTC\"\n").expect("write config");
        let t = Self {
            dir,
            config,
            with_key: std::cell::Cell::new(true),
            vault_table: Default::default(),
        };
        for (rel, text) in files {
            t.write(rel, text);
        }
        let out = t.tabd(&["init", vault.to_str().expect("utf-8 path")]);
        assert!(out.status.success(), "init failed:\n{}", describe(&out));
        let written = std::fs::read_to_string(&t.config).expect("the config init wrote");
        let table = written
            .find("[vaults.")
            .map(|i| written[i..].to_string())
            .expect("init names the vault's own folder");
        let named = written
            .lines()
            .find(|l| l.starts_with("vault = "))
            .map(|l| format!("{l}\n"))
            .expect("init names the vault");
        *t.vault_table.borrow_mut() = (named, table);
        t
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("vault")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel))
            .unwrap_or_else(|e| panic!("read {rel}: {e}\n{}", self.listing()))
    }

    /// A config pointing at `fake` with the given provider kind; `extra` is appended as is.
    pub fn use_model(&self, fake: &fake_model::FakeModel, kind: &str, extra: &str) {
        let url = if kind == "anthropic" {
            fake.anthropic_url()
        } else {
            fake.openai_url()
        };
        self.set_config(&format!(
            "timezone = \"UTC\"\n[provider]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"test-model\"\nmax_retries = 1\n{extra}"
        ));
    }

    /// Every file under `rel`, sorted, as vault paths.
    pub fn files_in(&self, rel: &str) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Makes the stock roles inbox-only, so no scheduled run (comms runs every 30 minutes in
    /// working hours) can land in the middle of a test that counts runs.
    pub fn unschedule_stock_roles(&self) {
        for role in ["comms", "delivery", "product", "risk"] {
            let rel = format!("roles/{role}.md");
            let text = self.read(&rel);
            let Some(start) = text.find("## Schedule\n") else {
                continue;
            };
            let body = start + "## Schedule\n".len();
            let end = text[body..].find("\n## ").map_or(text.len(), |i| body + i + 1);
            self.write(&rel, &format!("{}on-demand\n{}", &text[..body], &text[end..]));
        }
    }

    /// Lets stock role `role` change the person's notes without asking (`approve: {person_notes:
    /// auto}`, docs/spec.md §26): for tests about something else (undo, crashes) whose notes the test
    /// wrote as the person.
    pub fn grant_person_notes(&self, role: &str) {
        let rel = format!("roles/{role}.md");
        let text = self.read(&rel);
        let rest = text
            .strip_prefix("---\n")
            .expect("a stock role starts with frontmatter");
        self.write(&rel, &format!("---\napprove: {{person_notes: auto}}\n{rest}"));
    }

    /// Takes the `write_paths` fence off stock role `role`: it may write anywhere tabd does not
    /// protect (the person's notes still ask, as `_base` says).
    pub fn write_anywhere(&self, role: &str) {
        let rel = format!("roles/{role}.md");
        let text = self.read(&rel);
        let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("write_paths:")).collect();
        assert!(kept.len() < text.lines().count(), "{rel} has no write_paths line");
        self.write(&rel, &(kept.join("\n") + "\n"));
    }

    /// Every daily log, oldest first (a test that runs across midnight sees both days).
    pub fn daily(&self) -> String {
        self.concat("daily", ".md")
    }

    /// Every JSONL record, oldest day first.
    pub fn records(&self) -> Vec<serde_json::Value> {
        // A record is one `write` of a line ending in `\n`; read while a run appends one, a
        // file may end in part of it (no `\n` yet). That part is not a record yet; every
        // complete line must be one.
        self.texts_of(".tabd/runs", ".jsonl")
            .iter()
            .flat_map(|text| {
                let complete = text.rfind('\n').map_or("", |end| &text[..end]);
                complete
                    .lines()
                    .map(|l| serde_json::from_str(l).expect("JSONL line"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn concat(&self, dir: &str, ext: &str) -> String {
        self.texts_of(dir, ext).concat()
    }

    /// The texts of the files in `dir` ending in `ext`, in name order.
    fn texts_of(&self, dir: &str, ext: &str) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.path(dir))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.to_string_lossy().ends_with(ext));
        files.sort();
        files
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }

    /// `.tabd/state.json` (`Null` while it is missing or being replaced).
    pub fn state(&self) -> serde_json::Value {
        std::fs::read_to_string(self.path(".tabd/state.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The daemon's `.tabd/status.json`, if it wrote one.
    pub fn status_json(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.path(".tabd/status.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The live view of `role` in `.tabd/status.json` (what the daemon saw at its last scan).
    pub fn live(&self, role: &str) -> serde_json::Value {
        self.status_json()
            .and_then(|s| {
                s["roles"]
                    .as_array()?
                    .iter()
                    .find(|r| r["role"] == role)
                    .map(|r| r["live"].clone())
            })
            .unwrap_or(serde_json::Value::Null)
    }

    /// The status generation (grows with every status write of the daemon).
    pub fn generation(&self) -> u64 {
        self.status_json()
            .and_then(|s| s["generation"].as_u64())
            .unwrap_or(0)
    }

    pub fn set_config(&self, text: &str) {
        let (named, table) = &*self.vault_table.borrow();
        let text = if table.is_empty() {
            text.to_string()
        } else {
            format!("{named}{text}\n{table}")
        };
        std::fs::write(&self.config, text).expect("write config");
    }

    /// A command for the binary with a clean environment: only what the test passes.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare_command(args);
        if args.first().is_none_or(|a| *a != "init") {
            cmd.arg("--vault").arg(self.root());
        }
        cmd
    }

    /// Like `command`, without `--config`: tabd looks for its config where a person's would be,
    /// `$XDG_CONFIG_HOME/tabd/config.toml` (see `xdg_config`).
    pub fn command_with_default_config(&self, args: &[&str]) -> Command {
        let mut cmd = self.environment();
        cmd.args(args).arg("--vault").arg(self.root());
        cmd
    }

    /// Like `command_with_default_config`, without `--vault`: what a person types.
    pub fn as_a_person(&self, args: &[&str]) -> Command {
        let mut cmd = self.environment();
        cmd.args(args);
        cmd
    }

    /// Where `command_with_default_config` looks for the config.
    pub fn xdg_config(&self) -> PathBuf {
        self.dir.path().join("xdg/tabd/config.toml")
    }

    /// Like `command`, with another config file (a second device of the same vault).
    pub fn command_with_config(&self, config: &Path, args: &[&str]) -> Command {
        self.command_on(config, &self.root(), args)
    }

    /// Like `command_with_config`, on another copy of the vault (a device whose sync tool keeps
    /// the vault in a folder of its own).
    pub fn command_on(&self, config: &Path, vault: &Path, args: &[&str]) -> Command {
        let mut cmd = self.environment();
        cmd.arg("--config")
            .arg(config)
            .args(args)
            .arg("--vault")
            .arg(vault);
        cmd
    }

    /// Like `command`, without `--vault`.
    pub fn bare_command(&self, args: &[&str]) -> Command {
        let mut cmd = self.environment();
        cmd.arg("--config").arg(&self.config).args(args);
        cmd
    }

    /// The binary with a clean environment: only what the test passes.
    fn environment(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tabd"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg"))
            .env("TABD_LOG", "warn")
            .env(
                "ANTHROPIC_API_KEY",
                if self.with_key.get() { TEST_KEY } else { "" },
            )
            .env("OPENAI_API_KEY", if self.with_key.get() { TEST_KEY } else { "" });
        cmd
    }

    pub fn tabd(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run tabd")
    }

    /// Runs tabd and fails the test (instead of hanging it) if it takes longer than `limit`.
    pub fn tabd_within(&self, args: &[&str], limit: std::time::Duration) -> Output {
        let mut child = self
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn tabd");
        let deadline = std::time::Instant::now() + limit;
        while child.try_wait().expect("wait").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!("tabd {args:?} hung for {limit:?}:\n{}", describe(&out));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.wait_with_output().expect("output")
    }

    /// Every file of the vault, for failure messages.
    pub fn listing(&self) -> String {
        listing_of(&self.root())
    }
}

/// Every file under `root`, with sizes.
pub fn listing_of(root: &Path) -> String {
    let mut out = String::new();
    list(root, root, &mut out);
    out
}

fn list(root: &Path, dir: &Path, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
        if p.is_dir() {
            out.push_str(&format!("  {rel}/\n"));
            list(root, &p, out);
        } else {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.push_str(&format!("  {rel} ({len} B)\n"));
        }
    }
}

/// A program a test needs is not here (`what`, and `install`: how to get it). With `switch=1` —
/// `.ci/run` sets it where its install step put the program there — the test fails saying so: a
/// machine that should run it must not pass by skipping. Otherwise the test says it skips.
pub fn missing(switch: &str, what: &str, install: &str) {
    if std::env::var(switch).is_ok_and(|v| v == "1") {
        panic!("{switch}=1, but {what}: {install}");
    }
    eprintln!("skipped: {what} ({install}; with {switch}=1 this fails instead)");
}

/// Status, stdout and stderr of a finished command, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
