//! `tabd service install | uninstall` (docs/spec.md §26): the systemd user unit for this binary, set up
//! in one command. Install writes the unit (this binary's real path, the vault, the env file),
//! keeps an existing config (writes the quick start's one when there is none), creates the env
//! file (0600) if missing, then `systemctl --user daemon-reload` and `enable --now tabd` and shows
//! `status`. Uninstall disables and stops it and removes the unit it wrote; config, env file and
//! vault stay.
//!
//! Without a user service manager (no systemd, or no user session bus: `su`, a container) install
//! says what it wrote, that tabd is not enabled or started, and how to run it instead; uninstall
//! still removes the unit it wrote, and says what it could not stop.
//!
//! `systemctl` is the person's service manager, run in the foreground as their shell would run
//! it; it is not a tenant (no sandbox, no keeper): tabd hands it nothing of the vault.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{CliError, Workspace};
use crate::base::environment::{self, Env};
use crate::doors::args::{Cli, ServiceCommand};
use crate::setup::config;

/// The unit as shipped (`systemd/tabd.service`): install fills in the paths.
const UNIT_TEMPLATE: &str = include_str!("../../../systemd/tabd.service");

/// The first line of a unit tabd wrote: uninstall removes only a unit that starts with it.
const MARK: &str = "# Written by `tabd service install`; `tabd service uninstall` removes it.";

/// The unit's name.
const UNIT: &str = "tabd.service";

/// Where the person's user units live: `~/.config/systemd/user/`.
pub fn unit_path(env: &Env) -> Result<PathBuf, CliError> {
    environment::config_home(env)
        .map(|c| c.join("systemd").join("user").join(UNIT))
        .ok_or_else(|| {
            CliError::usage("HOME is not set, so there is no ~/.config/systemd/user/ to write the unit into")
        })
}

/// The user unit at its place, as `tabd doctor` checks it against this binary and vault.
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledUnit {
    pub path: PathBuf,
    /// `tabd service install` wrote it (its first line says so).
    pub ours: bool,
    /// What its `ExecStart=` runs: the program, then its arguments (`run`, `--vault DIR` …);
    /// empty when it has no `ExecStart=`.
    pub exec: Vec<String>,
}

impl InstalledUnit {
    /// The value after `flag` on its command line (`--vault DIR` or `--vault=DIR`).
    pub fn arg(&self, flag: &str) -> Option<&str> {
        let mut words = self.exec.iter().skip(1);
        while let Some(w) = words.next() {
            if w == flag {
                return words.next().map(String::as_str);
            }
            if let Some(v) = w.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        None
    }
}

/// The unit at `~/.config/systemd/user/tabd.service`, read: `Ok(None)` when there is none.
pub fn installed_unit(env: &Env) -> Result<Option<InstalledUnit>, CliError> {
    let path = unit_path(env)?;
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::failed(format!("cannot read {}: {e}", path.display()))),
    };
    // The last `ExecStart=` counts (a drop-in may reset it; this is the file itself).
    let exec = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("ExecStart="))
        .next_back()
        .map(unit_words)
        .unwrap_or_default();
    Ok(Some(InstalledUnit {
        ours: text.starts_with(MARK),
        path,
        exec,
    }))
}

/// A unit's command line as systemd splits it: words apart by spaces, a word in double or
/// single quotes whole, a backslash keeping the next character as it is; `%%` is `%` and `$$`
/// is `$` (what `unit_word` writes, read back); the prefixes `-@:+!` before the program dropped.
fn unit_words(line: &str) -> Vec<String> {
    let line = line.trim_start().trim_start_matches(['-', '@', ':', '+', '!']);
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (c, quote) {
            ('\\', _) => word.get_or_insert_with(String::new).extend(chars.next()),
            (q, None) if q == '"' || q == '\'' => {
                quote = Some(q);
                word.get_or_insert_with(String::new);
            }
            (q, Some(open)) if q == open => quote = None,
            (c, None) if c.is_whitespace() => words.extend(word.take()),
            (c, _) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
        .into_iter()
        .map(|w| w.replace("%%", "%").replace("$$", "$"))
        .collect()
}

/// `tabd service install | uninstall`.
pub fn run(cli: &Cli, env: Env, action: &ServiceCommand) -> Result<u8, CliError> {
    match action {
        ServiceCommand::Install => install(cli, &Workspace::open(cli, env)?),
        ServiceCommand::Uninstall => uninstall(&env),
    }
}

/// `tabd service install`.
fn install(cli: &Cli, ws: &Workspace) -> Result<u8, CliError> {
    let unit_path = unit_path(&ws.env)?;
    let env_file = environment::env_file_path(&ws.env).ok_or_else(|| {
        CliError::usage("HOME is not set, so there is no ~/.config/tabd/env for the unit to read")
    })?;
    refuse_a_unit_not_ours(&unit_path)?;
    let Some(systemctl) = crate::base::process::find_program("systemctl", &ws.env) else {
        return Err(CliError::failed(format!(
            "systemctl is not on PATH, so this machine has no systemd to run tabd as a service: nothing was \
             written. Run tabd yourself instead: `{}` (in a terminal multiplexer, or from your session's \
             autostart); it reads the same config and env file",
            run_yourself(cli, ws)
        )));
    };
    let exe = this_binary()?;
    let written_config = keep_or_write_config(cli, ws)?;
    let args = run_args(cli, ws, written_config.is_some());
    let unit = unit_text(&exe, &args, &env_file)?;
    let had = std::fs::read_to_string(&unit_path).ok();
    write_file(&unit_path, unit.as_bytes(), 0o644)?;
    say!(
        "Unit:     {} (runs {} run{})",
        unit_path.display(),
        exe.display(),
        shown_args(&args)
    );
    match &written_config {
        Some(path) => say!(
            "Config:   {} (written: vault = {})",
            path.display(),
            ws.root.display()
        ),
        None => say!(
            "Config:   {} (kept as it is)",
            ws.config
                .path
                .as_ref()
                .map_or_else(|| "none: the defaults".to_string(), |p| p.display().to_string())
        ),
    }
    env_file_lines(ws, &env_file)?;
    let call = |args: &[&str]| {
        run_systemctl(&systemctl, args).map_err(|e| not_started(e, &run_yourself(cli, ws), &unit_path))
    };
    call(&["daemon-reload"])?;
    call(&["enable", "--now", UNIT])?;
    let changed = had.is_some_and(|h| h != unit);
    if changed {
        say!(
            "The unit changed: `systemctl --user restart tabd` runs the new one if tabd was running already."
        );
    }
    say!();
    let status = Command::new(&systemctl)
        .args(["--user", "--no-pager", "--lines=0", "status", UNIT])
        .output()
        .map_err(|e| CliError::failed(format!("cannot run systemctl: {e}")))?;
    say_raw!("{}", String::from_utf8_lossy(&status.stdout));
    say!();
    say!("Its log: journalctl --user -u tabd -f     The roles: tabd status");
    Ok(0)
}

/// What install says when systemctl could not enable and start the unit it wrote: for want of a
/// service manager, how to run tabd instead, and what becomes of the unit.
fn not_started(e: SystemctlError, run_yourself: &str, unit_path: &Path) -> CliError {
    match e {
        SystemctlError::Unreachable { .. } => CliError::failed(format!(
            "{e}. {} So the unit is written but tabd is not enabled or started. Run it yourself instead: \
             `{run_yourself}` (in a terminal multiplexer, or from your session's autostart). The unit stays at \
             {}: `tabd service install` again where systemd's user manager runs enables it, and `tabd service \
             uninstall` removes it",
            why_unreachable(),
            unit_path.display()
        )),
        other => CliError::failed(other.to_string()),
    }
}

/// `tabd service uninstall`.
fn uninstall(env: &Env) -> Result<u8, CliError> {
    let unit_path = unit_path(env)?;
    match std::fs::read_to_string(&unit_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say!("No tabd unit at {}: nothing to remove.", unit_path.display());
            return Ok(0);
        }
        Err(e) => {
            return Err(CliError::failed(format!(
                "cannot read {}: {e}",
                unit_path.display()
            )))
        }
        Ok(_) => refuse_a_unit_not_ours(&unit_path)?,
    }
    // The unit goes even when no service manager can be reached to stop it (installed from a
    // desktop session, removed under `su`; or no systemd here at all).
    // `Ok`: stopped and disabled, by this systemctl; `Err`: why nothing could be.
    let stopped = match crate::base::process::find_program("systemctl", env) {
        Some(path) => match run_systemctl(&path, &["disable", "--now", UNIT]) {
            Ok(()) => Ok(path),
            Err(e @ SystemctlError::Unreachable { .. }) => Err(e.to_string()),
            Err(other) => return Err(CliError::failed(other.to_string())),
        },
        None => Err("systemctl is not on PATH".to_string()),
    };
    std::fs::remove_file(&unit_path)
        .map_err(|e| CliError::failed(format!("cannot remove {}: {e}", unit_path.display())))?;
    match stopped {
        Ok(systemctl) => {
            run_systemctl(&systemctl, &["daemon-reload"]).map_err(|e| CliError::failed(e.to_string()))?;
            say!("Stopped and disabled tabd; removed {}.", unit_path.display());
        }
        Err(why) => say!(
            "Removed {}. Nothing was stopped or disabled: {why}. If tabd runs as a service in another \
             session of yours, it keeps running there until that session ends (or until `systemctl --user \
             stop tabd` there).",
            unit_path.display(),
        ),
    }
    let config = config::locate(None, env).map(|(p, _)| p);
    let kept: Vec<String> = [config, environment::env_file_path(env)]
        .into_iter()
        .flatten()
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    say!(
        "Kept: {}the vault (uninstall removes only the unit it wrote).",
        kept.iter().map(|k| format!("{k}, ")).collect::<String>()
    );
    Ok(0)
}

/// A unit at `path` that tabd did not write is the person's: never overwritten or removed.
fn refuse_a_unit_not_ours(path: &Path) -> Result<(), CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) if !text.starts_with(MARK) => Err(CliError::failed(format!(
            "{} was not written by `tabd service install`, so tabd leaves it alone: move it away (or \
             remove it) and run this again",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// `tabd run` as the person would type it for this vault and config, to run tabd without a
/// service manager.
fn run_yourself(cli: &Cli, ws: &Workspace) -> String {
    let mut words = vec!["tabd".to_string(), "run".to_string(), "--vault".to_string()];
    words.push(shell_word(&ws.root.display().to_string()));
    let default_place = cli.config.is_none() && ws.env.get("TABD_CONFIG").is_none();
    if let (false, Some(path)) = (default_place, &ws.config.path) {
        words.push("--config".to_string());
        words.push(shell_word(&path.display().to_string()));
    }
    words.join(" ")
}

/// A path as a shell reads it: quoted when it holds anything but plain characters.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Why `systemctl --user` reaches no service manager here, and what helps: systemd is not this
/// machine's init (a container, WSL without it), or it is and this session has no user manager.
fn why_unreachable() -> &'static str {
    // sd_booted(3): systemd is the init system exactly when this folder exists.
    if Path::new("/run/systemd/system").is_dir() {
        "This happens under `su`/`sudo` or in a session without systemd's user manager: log in as this \
         user (a desktop or an SSH login), or run `loginctl enable-linger $USER` once."
    } else {
        "This machine does not run systemd (there is no /run/systemd/system), so there is no user \
         service manager to start tabd."
    }
}

/// This binary's real path: what the unit runs, wherever it was installed.
fn this_binary() -> Result<PathBuf, CliError> {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| CliError::failed(format!("cannot tell where this tabd binary is: {e}")))
}

/// The config stays as the person wrote it. With none at the default place, the quick start's
/// one is written: `vault = "…"`. Returns the file written, if one was.
fn keep_or_write_config(cli: &Cli, ws: &Workspace) -> Result<Option<PathBuf>, CliError> {
    if ws.config.path.is_some() {
        return Ok(None);
    }
    let Some((path, _)) = config::locate(cli.config.as_deref(), &ws.env) else {
        return Ok(None);
    };
    if path.exists() {
        return Ok(None);
    }
    let mut table = toml::Table::new();
    table.insert("vault".into(), toml::Value::String(ws.root.display().to_string()));
    let text = format!(
        "# tabd's settings (docs/config.md lists every key); secrets go in {}, never here.\n{}",
        environment::env_file_path(&ws.env)
            .map_or_else(|| "~/.config/tabd/env".into(), |p| p.display().to_string()),
        toml::to_string(&table).map_err(|e| CliError::failed(e.to_string()))?
    );
    create_new(&path, text.as_bytes(), 0o644)?;
    Ok(Some(path))
}

/// What `tabd run` needs beyond the config: `--vault` when the config does not name this vault,
/// `--config` when it is not at the default place.
fn run_args(cli: &Cli, ws: &Workspace, wrote_config: bool) -> Vec<String> {
    let mut args = Vec::new();
    let named = ws
        .config
        .vault
        .as_ref()
        .and_then(|v| std::fs::canonicalize(v).ok())
        .is_some_and(|v| v == ws.root);
    if !named && !wrote_config {
        args.push("--vault".to_string());
        args.push(ws.root.display().to_string());
    }
    let default_place = cli.config.is_none() && ws.env.get("TABD_CONFIG").is_none();
    if let (false, Some(path)) = (default_place, &ws.config.path) {
        args.push("--config".to_string());
        args.push(path.display().to_string());
    }
    args
}

fn shown_args(args: &[String]) -> String {
    args.iter().map(|a| format!(" {a}")).collect()
}

/// The shipped unit with this install's lines: the mark, `ExecStart`, `EnvironmentFile`.
fn unit_text(exe: &Path, args: &[String], env_file: &Path) -> Result<String, CliError> {
    let mut words = vec![unit_word(&exe.display().to_string())?, "run".to_string()];
    for a in args {
        words.push(unit_word(a)?);
    }
    let env_path = env_file.display().to_string();
    if env_path.chars().any(char::is_control) {
        return Err(CliError::failed(format!(
            "the env file's path {env_path:?} has a control character: a unit cannot name it"
        )));
    }
    let mut out = format!(
        "{MARK}\n# It runs {} — `tabd service install` again after moving the binary.\n",
        exe.display()
    );
    let mut in_header = true;
    for line in UNIT_TEMPLATE.lines() {
        // The shipped file's opening comments say how to install it by hand: not this unit's.
        if in_header && line.starts_with('#') {
            continue;
        }
        in_header = false;
        if line.starts_with("ExecStart=") {
            out.push_str(&format!("ExecStart={}\n", words.join(" ")));
        } else if line.starts_with("EnvironmentFile=") {
            out.push_str(&format!("EnvironmentFile=-{}\n", env_path.replace('%', "%%")));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// One word of a unit's command line: in double quotes, with what systemd would expand escaped
/// (`%` specifiers, `$` variables, `\` and `"`).
fn unit_word(word: &str) -> Result<String, CliError> {
    if word.chars().any(char::is_control) {
        return Err(CliError::failed(format!(
            "{word:?} has a control character: a unit cannot run it"
        )));
    }
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    Ok(format!("\"{escaped}\""))
}

/// The env file: created (0600, with what to write in it) when missing; its name and what is
/// set in it said, never a value.
fn env_file_lines(ws: &Workspace, path: &Path) -> Result<(), CliError> {
    let key = &ws.config.provider.api_key_env;
    let needs_key = ws.config.provider.kind == config::ProviderKind::Anthropic;
    if !path.exists() {
        let text = format!(
            "# Secrets for tabd, one KEY=VALUE a line (systemd's EnvironmentFile; tabd's commands read it too).\n\
             # Keep this file private: chmod 600. Then `systemctl --user restart tabd`.\n# {key}=\n"
        );
        create_new(path, text.as_bytes(), 0o600)?;
        say!("Env file: {} (made, 0600)", path.display());
        if needs_key {
            say!("          put your API key there as `{key}=…`, then `systemctl --user restart tabd`");
        }
        return Ok(());
    }
    let file = environment::EnvFile::read(path).unwrap_or_default();
    let names: Vec<&str> = file.vars.iter().map(|(k, _)| k.as_str()).collect();
    say!(
        "Env file: {} (kept; sets {})",
        path.display(),
        if names.is_empty() {
            "nothing".to_string()
        } else {
            names.join(", ")
        }
    );
    if needs_key && !names.contains(&key.as_str()) {
        say!("          {key} is not in it: add `{key}=…` there (the service does not see your shell's variables)");
    }
    Ok(())
}

/// Why `systemctl --user ARGS` did not do what was asked.
#[derive(Debug, thiserror::Error)]
enum SystemctlError {
    #[error("cannot run {program}: {source}")]
    NotRun { program: String, source: std::io::Error },
    /// It ran, but reached no user service manager: no systemd, or no user session bus.
    #[error("`{what}` cannot reach your user session's service manager (systemctl says: {said})")]
    Unreachable { what: String, said: String },
    #[error("`{what}` failed: {said}")]
    Failed { what: String, said: String },
}

/// `systemctl --user ARGS`.
fn run_systemctl(systemctl: &Path, args: &[&str]) -> Result<(), SystemctlError> {
    let out = Command::new(systemctl)
        .arg("--user")
        .args(args)
        .output()
        .map_err(|source| SystemctlError::NotRun {
            program: systemctl.display().to_string(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let what = format!("systemctl --user {}", args.join(" "));
    // systemctl's exit codes do not tell these apart; its words do (`Failed to connect to bus`,
    // `$DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined`, `System has not been booted
    // with systemd as init system`).
    let unreachable = ["bus", "XDG_RUNTIME_DIR", "not been booted with systemd"]
        .iter()
        .any(|w| said.contains(w));
    Err(if unreachable {
        SystemctlError::Unreachable { what, said }
    } else {
        SystemctlError::Failed { what, said }
    })
}

/// Writes `path` (its folder made), replacing what was there, with `mode`.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CliError> {
    use std::os::unix::fs::PermissionsExt as _;
    let fail = |e: std::io::Error| CliError::failed(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    std::fs::write(path, bytes).map_err(fail)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(fail)
}

/// Creates `path` (its folder made) with `mode` from the start; never replaces a file.
fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CliError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let fail = |e: std::io::Error| CliError::failed(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped unit has the lines install fills in, once each; what systemd would expand in
    /// a path is escaped.
    #[test]
    fn the_unit_runs_this_binary_with_its_paths_escaped() {
        let unit = unit_text(
            Path::new("/home/a b/100%/bin/tabd"),
            &["--vault".into(), "/home/a b/$vault".into()],
            Path::new("/home/a b/.config/tabd/env"),
        )
        .unwrap();
        assert!(unit.starts_with(MARK), "{unit}");
        let exec: Vec<&str> = unit.lines().filter(|l| l.starts_with("ExecStart=")).collect();
        assert_eq!(
            exec,
            ["ExecStart=\"/home/a b/100%%/bin/tabd\" run \"--vault\" \"/home/a b/$$vault\""]
        );
        let env: Vec<&str> = unit
            .lines()
            .filter(|l| l.starts_with("EnvironmentFile="))
            .collect();
        assert_eq!(env, ["EnvironmentFile=-/home/a b/.config/tabd/env"]);
        assert!(
            !unit.contains("cp systemd/tabd.service"),
            "the shipped file's install comment is not this unit's: {unit}"
        );
        assert!(unit_word("a\nb").is_err());
        // Read back as `tabd doctor` reads it: the same program and words.
        let line = exec[0].strip_prefix("ExecStart=").unwrap();
        assert_eq!(
            unit_words(line),
            ["/home/a b/100%/bin/tabd", "run", "--vault", "/home/a b/$vault"]
        );
        assert_eq!(
            unit_words(r#"-/usr/bin/tabd run --vault='/a b' "x\"y" c\ d"#),
            ["/usr/bin/tabd", "run", "--vault=/a b", "x\"y", "c d"]
        );
    }
}
