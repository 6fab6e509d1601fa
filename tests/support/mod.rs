//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod daemon;
pub mod fake_model;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod wire;

/// A temp vault created by `tabd init`, plus an isolated environment for the binary.
pub struct TestVault {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// Whether commands get a (fake) API key in their environment.
    pub with_key: std::cell::Cell<bool>,
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
        };
        let out = t.tabd(&["init", vault.to_str().expect("utf-8 path")]);
        assert!(out.status.success(), "init failed:\n{}", describe(&out));
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

    /// Today's daily log (UTC, as the test configs use).
    pub fn daily(&self) -> String {
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        std::fs::read_to_string(self.path(&format!("daily/{today}.md"))).unwrap_or_default()
    }

    /// Today's JSONL records.
    pub fn records(&self) -> Vec<serde_json::Value> {
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        std::fs::read_to_string(self.path(&format!(".tabd/runs/{today}.jsonl")))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSONL line"))
            .collect()
    }

    pub fn set_config(&self, text: &str) {
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

    /// Like `command`, without `--vault`.
    pub fn bare_command(&self, args: &[&str]) -> Command {
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
            .env("OPENAI_API_KEY", if self.with_key.get() { TEST_KEY } else { "" })
            .arg("--config")
            .arg(&self.config)
            .args(args);
        cmd
    }

    pub fn tabd(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run tabd")
    }

    /// Every file of the vault, for failure messages.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        list(&self.root(), &self.root(), &mut out);
        out
    }
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
