//! Agent CLIs as the model (docs/spec.md §16): runs claude, codex, gemini or a custom CLI headless for
//! one turn, in the run's own folder (never the vault), with only the environment it needs, and
//! kills its whole process group at the deadline. The CLI's only tools are tabd's: the run serves
//! them (see `mcp_server`) and this module only starts the CLI pointed at them.
//!
//! - `output` — reading each CLI's result shape, and telling an outage from a bad run.

pub mod output;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

pub use crate::setup::config::profile::{Profile, RawProfile};
pub use output::CliReport;

use crate::base::environment::{Env, CHILD_BASE_ENV};
use crate::base::process::{ChildSpec, Confinement, Folders, Home, HomeFile, Launcher, StartError, Stream};
use crate::base::vault::leftovers::{Stamp, Watch};

/// Largest stdout or stderr kept from a CLI.
const MAX_OUTPUT: usize = 16 * 1024 * 1024;
/// How long `--help` may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// A probe's answer is trusted this long (a CLI upgraded meanwhile is probed again).
pub const PROBE_FRESH: Duration = Duration::from_secs(600);

/// Gemini's own tools, excluded so only tabd's remain.
const GEMINI_BUILTINS: &str = r#"["run_shell_command", "write_file", "replace", "read_file", "read_many_files", "glob", "search_file_content", "list_directory", "web_fetch", "google_web_search", "save_memory"]"#;

/// Variables each built-in CLI needs to log in and reach its service, passed from tabd's
/// environment when set (nothing else is: the CLI never sees tabd's other secrets). Its config
/// folder (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`) is never the person's: it is set to the CLI's
/// private one (`Profile::private_env`).
fn login_env(profile: &str) -> &'static [&'static str] {
    match profile {
        "claude" => &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        ],
        "codex" => &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
        "gemini" => &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
        _ => &[],
    }
}

/// The environment a CLI runs with: the basics every program needs, its login variables, the
/// profile's `pass_env` names (a trailing `*` passes a prefix), and its `env` table.
pub fn child_env(profile: &Profile, env: &Env) -> Result<HashMap<String, String>, ProbeError> {
    let mut out = HashMap::new();
    let named = CHILD_BASE_ENV.iter().chain(login_env(&profile.name));
    for name in named {
        if let Some(v) = env.get(name) {
            out.insert(name.to_string(), v.to_string());
        }
    }
    for pattern in &profile.pass_env {
        match pattern.strip_suffix('*') {
            Some(prefix) => out.extend(env.vars().filter(|(k, _)| k.starts_with(prefix))),
            None => {
                if let Some(v) = env.get(pattern) {
                    out.insert(pattern.clone(), v.to_string());
                }
            }
        }
    }
    for (k, v) in &profile.env {
        let v = env.expand(v).map_err(|source| ProbeError::Env {
            profile: profile.name.clone(),
            name: k.clone(),
            source,
        })?;
        out.insert(k.clone(), v);
    }
    Ok(out)
}

/// Which CLIs were found, and with the flags tabd needs, recently: owned by whoever runs CLIs
/// (the daemon, `tabd fire`), timed by the caller's clock.
#[derive(Default)]
pub struct Probes {
    seen: Mutex<HashMap<String, Probed>>,
}

/// When a CLI was probed, and what the probe found.
type Probed = (Instant, Result<(), ProbeError>);

/// Why a CLI cannot be used: not there, not startable, silent, or without a flag tabd needs.
/// Kept (cloned) for `PROBE_FRESH`, so the causes are kept as their text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("[profiles.{profile}] env {name}: {source}")]
    Env {
        profile: String,
        name: String,
        source: crate::base::environment::ExpandError,
    },
    #[error(
        "the `{command}` CLI is not installed or not on tabd's PATH (profile {profile}); install it or set \
         [profiles.{profile}] command"
    )]
    NotInstalled { command: String, profile: String },
    #[error("`{command}` could not be started: {why}")]
    NotStarted { command: String, why: String },
    #[error("`{command}` did not answer within {} s", PROBE_TIMEOUT.as_secs())]
    Silent { command: String },
    #[error("`{command}` could not be read: {why}")]
    Unreadable { command: String, why: String },
    #[error(
        "the installed `{command}` lacks {} (`{asked}` does not list them): tabd needs them to run it \
         without its own tools; install a version that has them, or adjust [profiles.{profile}]",
        .missing.join(", ")
    )]
    LacksFlags {
        command: String,
        profile: String,
        missing: Vec<String>,
        /// The help command that was read.
        asked: String,
    },
}

impl Probes {
    /// Checks that the CLI exists and still lists the flags its profile uses, unless a check
    /// younger than `PROBE_FRESH` (at `now`) already said so.
    pub async fn check(
        &self,
        profile: &Profile,
        env: &HashMap<String, String>,
        launcher: &Launcher,
        now: Instant,
    ) -> Result<(), ProbeError> {
        let key = format!("{}\u{0}{}", profile.command, profile.required_flags.join(" "));
        if let Some((at, r)) = self.seen.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            if now.saturating_duration_since(*at) < PROBE_FRESH {
                return r.clone();
            }
        }
        let result = probe_now(profile, env, launcher).await;
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, (now, result.clone()));
        result
    }
}

async fn probe_now(
    profile: &Profile,
    env: &HashMap<String, String>,
    launcher: &Launcher,
) -> Result<(), ProbeError> {
    let command = || profile.command.clone();
    // The help command as the person would type it, for what is said about its answer.
    let asked = || format!("{} {}", profile.command, profile.help_args.join(" "));
    let not_started = |why: String| ProbeError::NotStarted {
        command: command(),
        why,
    };
    // Even `--help` runs as a tenant, in a private folder of its own (removed after) and sandbox.
    let folder = probe_folder(launcher, profile).map_err(|e| not_started(e.to_string()))?;
    let spec = cli_spec(
        profile,
        launcher,
        env,
        folder.path(),
        None,
        &profile.help_args,
        Stream::Null,
    );
    let started = match launcher.start(&spec) {
        Ok(s) => s,
        Err(StartError::Spawn { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProbeError::NotInstalled {
                command: command(),
                profile: profile.name.clone(),
            })
        }
        Err(StartError::Spawn { source, .. }) => return Err(not_started(source.to_string())),
        Err(e) => return Err(not_started(e.to_string())),
    };
    // A CLI that hangs on `--help` goes with this handle when the wait is given up.
    let _tenant = started.tenant;
    let out = match tokio::time::timeout(PROBE_TIMEOUT, started.child.wait_with_output()).await {
        Err(_) => return Err(ProbeError::Silent { command: asked() }),
        Ok(Err(e)) => {
            return Err(ProbeError::Unreadable {
                command: command(),
                why: e.to_string(),
            })
        }
        Ok(Ok(o)) => o,
    };
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let missing: Vec<String> = profile
        .required_flags
        .iter()
        .filter(|f| !help.contains(f.as_str()))
        .cloned()
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ProbeError::LacksFlags {
            command: command(),
            profile: profile.name.clone(),
            missing,
            asked: asked(),
        })
    }
}

/// How the CLI starts tabd's MCP server for the run.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    pub command: String,
    pub args: Vec<String>,
}

/// One turn to run.
pub struct CliTurn<'a> {
    pub profile: &'a Profile,
    /// The prompt: on the CLI's stdin, and in `prompt.md` in the run folder.
    pub prompt: &'a str,
    /// The run's private folder (outside the vault): the CLI's working folder.
    pub dir: &'a Path,
    /// The run's relay socket in that folder (tabd's tools): the one socket the CLI may reach.
    pub relay: &'a Path,
    /// Told the CLI's process (its keeper) once started: the relay admits only what runs below it.
    pub started: Option<&'a tokio::sync::watch::Sender<Option<i32>>>,
    pub server: ServerCommand,
    /// The names of tabd's tools, as the MCP server offers them.
    pub tools: &'a [String],
    pub env: HashMap<String, String>,
    pub deadline: Duration,
    /// Where the CLI's process group is written down while it runs.
    pub launcher: &'a Launcher,
    /// Lines for the run's daily section: what a CLI granted `vault = "write"` left in the
    /// vault that other programs load, moved aside after its turn (docs/spec.md §24).
    pub kept_aside: &'a Mutex<Vec<String>>,
}

/// How a CLI turn ended.
#[derive(Debug, Clone)]
pub enum CliEnd {
    /// The CLI finished (its report may still say it failed).
    Finished(CliReport),
    /// The deadline passed: the whole process group was killed.
    Deadline,
    /// It could not be started or its files written.
    NotStarted { message: String, outage: bool },
}

/// What the placeholders in a profile stand for.
struct Fill {
    prompt_file: String,
    mcp_config: String,
    allowed_tools: String,
    tabd: String,
    serve_args: String,
}

impl Fill {
    fn apply(&self, s: &str) -> String {
        s.replace("{prompt_file}", &self.prompt_file)
            .replace("{mcp_config}", &self.mcp_config)
            .replace("{allowed_tools}", &self.allowed_tools)
            .replace("{serve_args}", &self.serve_args)
            .replace("{gemini_builtins}", GEMINI_BUILTINS)
            .replace("{tabd}", &self.tabd)
    }
}

/// Writes the CLI's files into the run folder, starts it there and reads its result.
pub async fn run(turn: CliTurn<'_>) -> CliEnd {
    let profile = turn.profile;
    let at = |name: &str| turn.dir.join(name);
    let serve_json = serde_json::to_string(&turn.server.args).unwrap_or_default();
    let fill = Fill {
        prompt_file: at("prompt.md").to_string_lossy().into_owned(),
        mcp_config: at("mcp.json").to_string_lossy().into_owned(),
        allowed_tools: turn
            .tools
            .iter()
            .map(|t| format!("mcp__tabd__{t}"))
            .collect::<Vec<_>>()
            .join(","),
        tabd: turn.server.command.clone(),
        serve_args: serve_json,
    };
    let mcp_config = serde_json::json!({
        "mcpServers": { "tabd": { "type": "stdio", "command": turn.server.command, "args": turn.server.args } }
    });
    let mut files = vec![
        ("prompt.md".to_string(), turn.prompt.to_string()),
        ("mcp.json".to_string(), format!("{mcp_config:#}\n")),
    ];
    for (name, content) in &profile.files {
        files.push((name.clone(), fill.apply(content)));
    }
    for (name, text) in &files {
        if let Err(e) = write_private(turn.dir, name, text) {
            return CliEnd::NotStarted {
                message: format!("cannot write the CLI's file {name}: {e}"),
                outage: false,
            };
        }
    }
    let args: Vec<String> = profile.args.iter().map(|a| fill.apply(a)).collect();
    spawn_and_read(&turn, &args).await
}

/// A file of the run folder (which tabd created, private to it).
fn write_private(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let rel = Path::new(name);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(std::io::Error::other(
            "a profile file must stay inside the run folder",
        ));
    }
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

/// A private folder (0700) for one `--help` probe, under tabd's runs folder; removed when dropped.
fn probe_folder(launcher: &Launcher, profile: &Profile) -> Result<tempfile::TempDir, ProbeFolderError> {
    let root = crate::base::sandbox::folders::make_root(&launcher.places().runs())?;
    Ok(tempfile::Builder::new()
        .prefix(&format!(
            "probe-{}-",
            crate::base::text::safe_name(&profile.name, '_')
        ))
        .tempdir_in(root)?)
}

/// Why a `--help` probe's folder could not be made: tabd's runs folder, or the folder in it.
#[derive(Debug, thiserror::Error)]
enum ProbeFolderError {
    #[error(transparent)]
    Root(#[from] crate::base::sandbox::folders::FolderError),
    #[error(transparent)]
    Made(#[from] std::io::Error),
}

/// What the CLI is (docs/spec.md §20): its environment (`env`: what `child_env` gave it), and a private
/// folder made for this start only (`Folders::Fresh`, in `folder`: the run's own folder, or the
/// probe's) as its `HOME`, with its config folder inside it holding only the person's login
/// files, never the person's own settings; a private temp folder, its run folder and relay socket
/// (`run`: `None` for the `--help` probe), and no part of the vault: it reaches the vault only
/// through tabd's tools.
fn cli_spec(
    profile: &Profile,
    launcher: &Launcher,
    env: &HashMap<String, String>,
    folder: &Path,
    run: Option<(&Path, &Path)>,
    args: &[String],
    stdin: Stream,
) -> ChildSpec {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut confinement = confinement(profile, launcher, folder);
    if let Some((dir, relay)) = run {
        confinement.own.push(canonical(dir));
        confinement.sockets.push(canonical(relay));
    }
    ChildSpec {
        name: profile.name.clone(),
        program: profile.command.clone(),
        args: args.to_vec(),
        inherited: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        env: own_env(profile, launcher),
        cwd: run.map(|(dir, _)| dir.to_path_buf()),
        stdin,
        stdout: Stream::Piped,
        stderr: Stream::Piped,
        confined: Some(confinement),
    }
}

/// The profile's own `env` table, expanded (what cannot be is left out: `child_env` has said so).
fn own_env(profile: &Profile, launcher: &Launcher) -> Vec<(String, String)> {
    profile
        .env
        .iter()
        .filter_map(|(k, v)| launcher.env.expand(v).ok().map(|v| (k.clone(), v)))
        .collect()
}

/// The CLI's folders and sandbox: its home made fresh in `folder`, its config folders inside
/// (`CLAUDE_CONFIG_DIR` → `.claude`, unless the profile's `env` names the variable itself) with
/// the person's login files as they are now, and what `[profiles.NAME]` grants.
fn confinement(profile: &Profile, launcher: &Launcher, folder: &Path) -> Confinement {
    Confinement {
        sandbox: profile.sandbox.clone(),
        table: format!("[profiles.{}]", profile.name),
        label: format!("agent CLI `{}`", profile.name),
        folders: Folders::Fresh(folder.to_path_buf()),
        home_folders: profile.private_env.clone(),
        home_files: logins(profile, launcher),
        ..Confinement::default()
    }
}

/// The CLI's private folder for one start, rebuilt (`Folders::Fresh`): its config folders and,
/// in them, the person's login files as they are now.
pub fn private_home(folder: &Path, profile: &Profile, launcher: &Launcher) -> Result<Home, StartError> {
    launcher.make_home(
        &profile.name,
        &confinement(profile, launcher, folder),
        &own_env(profile, launcher),
    )
}

/// After a run: a login copy the CLI rewrote (a refresh does) is dropped with the folder, and
/// where the CLI's service rotates refresh tokens (claude's and codex's do) the person's own copy
/// may no longer work: said, with what to do.
fn said_if_refreshed(profile: &Profile, logins: &[(std::path::PathBuf, HomeFile)]) {
    for (copy, login) in logins {
        if !as_copied(copy, &login.bytes) {
            tracing::warn!(
                "{}: the CLI rewrote its copy of your login ({}) during the run, as a login refresh \
                 does; tabd never copies it back, so if your own copy stops working, log in again — \
                 or give tabd a login of its own (an API key, or for claude `claude setup-token` as \
                 CLAUDE_CODE_OAUTH_TOKEN in tabd's env file; see docs/providers.md)",
                profile.name,
                login.from.display()
            );
        }
    }
}

/// Whether `copy` (in the CLI's folder: the CLI may have put anything there) still holds exactly
/// `bytes`: a regular file of that length, opened through no link and never waited on (a named
/// pipe there stalled tabd's read for good), and read no further than one byte past that length.
fn as_copied(copy: &Path, bytes: &[u8]) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(copy)
    else {
        return false;
    };
    if !file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
    {
        return false;
    }
    let mut now = Vec::with_capacity(bytes.len());
    file.take(bytes.len() as u64 + 1).read_to_end(&mut now).is_ok() && now == bytes
}

/// The person's login files for the CLI, as they are now — by content, whatever their dates say —
/// to be copied into its (fresh) private folder; never the other way (a token copied back could
/// be another account's).
fn logins(profile: &Profile, launcher: &Launcher) -> Vec<HomeFile> {
    let mut logins = Vec::new();
    let home = launcher.home();
    for a in &profile.auth {
        let dir = a
            .dir_var
            .and_then(|v| launcher.env.get(v))
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| crate::base::sandbox::grants::expand_home(a.dir, home.as_deref()));
        let from = dir.join(a.file);
        let bytes = match std::fs::read(&from) {
            Ok(b) => b,
            // Not logged in that way (an API key in the environment needs no file).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(
                    "{}: cannot read the login file {}: {e}",
                    profile.name,
                    from.display()
                );
                continue;
            }
        };
        logins.push(HomeFile {
            folder: a.to.to_string(),
            name: a.file.to_string(),
            bytes,
            from,
            what: "the login file".into(),
        });
    }
    logins
}

/// Runs the CLI's turn; then, for a CLI granted `vault = "write"`, moves aside what it left in
/// the vault that other programs load (`vault::leftovers`), into `turn.kept_aside`.
async fn spawn_and_read(turn: &CliTurn<'_>, args: &[String]) -> CliEnd {
    let since = Stamp::now();
    let mut watch = None;
    let end = spawn_and_wait(turn, args, &mut watch).await;
    if let (Some(watch), Some(vault)) = (watch, turn.launcher.vault.clone()) {
        let child = watch.child.clone();
        let kept = tokio::task::spawn_blocking(move || watch.sweep(&vault, since))
            .await
            .unwrap_or_default();
        let mut lines = turn.kept_aside.lock().unwrap_or_else(|p| p.into_inner());
        lines.extend(kept.iter().map(|k| k.line(&child)));
    }
    end
}

/// Starts the CLI in its run folder through the launcher (a tenant, confined: docs/spec.md §20), feeds
/// the prompt, reads both streams, and kills the group at the deadline. `watch`: the vault
/// folders it may write, once it is confined.
async fn spawn_and_wait(turn: &CliTurn<'_>, args: &[String], watch: &mut Option<Watch>) -> CliEnd {
    let profile = turn.profile;
    let stdin = if profile.prompt_on_stdin {
        Stream::Piped
    } else {
        Stream::Null
    };
    let run = Some((turn.dir, turn.relay));
    let spec = cli_spec(profile, turn.launcher, &turn.env, turn.dir, run, args, stdin);
    let started = match turn.launcher.start(&spec) {
        Ok(s) => s,
        Err(e) => {
            return CliEnd::NotStarted {
                message: e.to_string(),
                outage: true,
            }
        }
    };
    *watch = started.watch;
    let logins = started.home.map(|h| h.placed).unwrap_or_default();
    let mut child = started.child;
    // Whatever happens from here (a panic, a cancelled run), the CLI and everything it started
    // go with this handle.
    let group = started.tenant;
    if let (Some(started), Some(pid)) = (turn.started, child.id()) {
        // Fails only when the relay is gone: the run is ending, and nothing is let in.
        #[expect(clippy::let_underscore_must_use)]
        let _ = started.send(Some(pid as i32));
    }
    if let Some(mut stdin) = child.stdin.take() {
        let text = turn.prompt.to_string();
        tokio::spawn(async move {
            // A CLI that exits before it reads its prompt says so in its own output and status,
            // which the turn reads.
            #[expect(clippy::let_underscore_must_use)]
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| async move {
        let mut buf = Vec::new();
        if let Some(p) = pipe {
            // A pipe that breaks leaves what was read; the CLI's status says how it ended.
            #[expect(clippy::let_underscore_must_use)]
            let _ = p.take(MAX_OUTPUT as u64).read_to_end(&mut buf).await;
        }
        String::from_utf8_lossy(&buf).into_owned()
    };
    let stdout = tokio::spawn(read(child.stdout.take().map(|p| Box::new(p) as _)));
    let stderr = tokio::spawn(read(child.stderr.take().map(|p| Box::new(p) as _)));
    let status = match tokio::time::timeout(turn.deadline, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            group.kill();
            // Only to reap it: it was just killed, and the turn ends at its deadline anyway.
            #[expect(clippy::let_underscore_must_use)]
            let _ = child.wait().await;
            return CliEnd::Deadline;
        }
    };
    // The leader is gone; anything it left in its group (an MCP server it started) goes too.
    drop(group);
    said_if_refreshed(profile, &logins);
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    if !stderr.trim().is_empty() {
        tracing::debug!(
            "{} stderr: {}",
            profile.name,
            crate::base::text::one_line(&stderr, 2000)
        );
    }
    let ok = status.is_some_and(|s| s.success());
    CliEnd::Finished(output::read(profile.output, &stdout, &stderr, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_failure_names_the_command_as_typed_and_what_to_do() {
        let silent = ProbeError::Silent {
            command: "codex exec --help".into(),
        };
        assert_eq!(
            silent.to_string(),
            "`codex exec --help` did not answer within 30 s"
        );
        let old = ProbeError::LacksFlags {
            command: "claude".into(),
            profile: "claude".into(),
            missing: vec!["--tools".into(), "--strict-mcp-config".into()],
            asked: "claude --help".into(),
        };
        assert_eq!(
            old.to_string(),
            "the installed `claude` lacks --tools, --strict-mcp-config (`claude --help` does not list \
             them): tabd needs them to run it without its own tools; install a version that has them, \
             or adjust [profiles.claude]"
        );
    }
}
