//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temp vault created by `tabd init`, plus an isolated environment for the binary.
pub struct TestVault {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl TestVault {
    /// A vault from the template, with a config file in UTC.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let vault = dir.path().join("vault");
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "timezone = \"UTC\"\n").expect("write config");
        let t = Self { dir, config };
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
pub mod fake_model;
