//! Agent CLIs as the model (DESIGN §16): runs claude, codex, gemini or a custom CLI headless for
//! one turn, in the run's own folder (never the vault), with only the environment it needs, and
//! kills its whole process group at the deadline. The CLI's only tools are tabd's: the run serves
//! them (see `mcp_server`) and this module only starts the CLI pointed at them.
//!
//! - `output` — reading each CLI's result shape, and telling an outage from a bad run.

pub mod output;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

pub use crate::setup::config::profile::{Profile, RawProfile};
pub use output::CliReport;

use crate::base::environment::{Env, CHILD_BASE_ENV};
use crate::base::process::{self, Launcher};
use crate::base::vault::leftovers::{Stamp, Watch};
use crate::setup::config::sandbox::VaultAccess;

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
    let mut cmd = tokio::process::Command::new(&profile.command);
    cmd.args(&profile.help_args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Even `--help` runs as a tenant, in a private folder of its own (removed after) and sandbox.
    process::as_tenant(&mut cmd);
    let not_started = |why: String| ProbeError::NotStarted {
        command: command(),
        why,
    };
    let folder = probe_folder(launcher, profile).map_err(not_started)?;
    confine(
        &mut cmd,
        profile,
        launcher,
        folder.path(),
        None,
        &profile.help_args,
    )
    .map_err(|e| not_started(e.to_string()))?;
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProbeError::NotInstalled {
                command: command(),
                profile: profile.name.clone(),
            })
        }
        Err(e) => {
            return Err(ProbeError::NotStarted {
                command: command(),
                why: e.to_string(),
            })
        }
    };
    // A CLI that hangs on `--help` goes with this handle when the wait is given up.
    let _tenant = launcher.tenant(&child, &profile.name);
    let out = match tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output()).await {
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
    /// vault that other programs load, moved aside after its turn (DESIGN §24).
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
fn probe_folder(launcher: &Launcher, profile: &Profile) -> Result<tempfile::TempDir, String> {
    let root =
        crate::base::sandbox::folders::make_root(&launcher.places().runs()).map_err(|e| e.to_string())?;
    tempfile::Builder::new()
        .prefix(&format!(
            "probe-{}-",
            crate::base::text::safe_name(&profile.name, '_')
        ))
        .tempdir_in(root)
        .map_err(|e| e.to_string())
}

/// The CLI's sandbox (DESIGN §20): a private folder made for this start only (`fresh_home`, in
/// `folder`: the run's own folder, or the probe's) as its `HOME`, with its config folder inside
/// it holding only the person's login files, never the person's own settings; a private temp
/// folder, its run folder and relay socket (`run`: `None` for the `--help` probe), and no part
/// of the vault: it reaches the vault only through tabd's tools.
fn confine(
    cmd: &mut tokio::process::Command,
    profile: &Profile,
    launcher: &Launcher,
    folder: &Path,
    run: Option<(&Path, &Path)>,
    args: &[String],
) -> Result<Confined, crate::base::process::StartError> {
    let PrivateHome {
        dirs,
        config_dirs,
        logins,
    } = private_home(folder, profile, launcher)?;
    // What the profile's own `env` sets is the person's choice and wins.
    let set = |k: &str| profile.env.iter().any(|(name, _)| name == k);
    for (k, v) in launcher.home_env(&dirs, set("HOME")) {
        if !set(&k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(config_dirs);
    let places = launcher.places();
    let mut own = vec![dirs.state.clone(), dirs.tmp.clone()];
    let mut sockets = Vec::new();
    if let Some((dir, relay)) = run {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        own.push(canonical(dir));
        sockets.push(canonical(relay));
    }
    let env: Vec<(String, String)> = profile
        .env
        .iter()
        .filter_map(|(k, v)| launcher.env.expand(v).ok().map(|v| (k.clone(), v)))
        .collect();
    let grants = profile.sandbox.grants(&crate::setup::config::sandbox::Start {
        places: &places,
        own: &own,
        sockets: &sockets,
        args,
        env: &env,
    });
    launcher.confine(cmd, &profile.name, &grants)?;
    let watch = match profile.sandbox.vault {
        VaultAccess::Write => Watch::new(
            &places.vault,
            &grants.spec.writable,
            &places.inboxes,
            format!("agent CLI `{}`", profile.name),
        ),
        VaultAccess::None | VaultAccess::Read => None,
    };
    Ok(Confined { watch, logins })
}

/// What confining a CLI set up: the vault folders to look through after it (`vault = "write"`),
/// and the login files copied into its private folder.
struct Confined {
    watch: Option<Watch>,
    logins: Vec<Login>,
}

/// A CLI's private folder for one start.
pub struct PrivateHome {
    pub dirs: crate::base::process::ChildDirs,
    /// The variables that point the CLI at its config folders inside it (`CLAUDE_CONFIG_DIR`).
    pub config_dirs: Vec<(String, std::path::PathBuf)>,
    /// The person's login files copied in.
    pub logins: Vec<Login>,
}

/// A login file copied into a CLI's private folder: where, from where, and what it said.
pub struct Login {
    copy: std::path::PathBuf,
    theirs: std::path::PathBuf,
    bytes: Vec<u8>,
}

/// The CLI's private folder for one start, rebuilt (`fresh_home`): its config folders inside it
/// (`CLAUDE_CONFIG_DIR` → `.claude`, unless the profile's `env` names the variable itself), and
/// in them the person's login files as they are now.
pub fn private_home(
    folder: &Path,
    profile: &Profile,
    launcher: &Launcher,
) -> Result<PrivateHome, crate::base::process::StartError> {
    let dirs = fresh_home(folder)?;
    let mut config_dirs = Vec::new();
    let set = |k: &str| profile.env.iter().any(|(name, _)| name == k);
    for (var, sub) in profile.private_env.iter().filter(|(v, _)| !set(v)) {
        let (path, _) = crate::base::sandbox::folders::subfolder(&dirs.state, sub)?;
        config_dirs.push((var.clone(), path));
    }
    let logins = seed_logins(profile, launcher, &dirs.state);
    Ok(PrivateHome {
        dirs,
        config_dirs,
        logins,
    })
}

/// After a run: a login copy the CLI rewrote (a refresh does) is dropped with the folder, and
/// where the CLI's service rotates refresh tokens (claude's and codex's do) the person's own copy
/// may no longer work: said, with what to do.
fn said_if_refreshed(profile: &Profile, logins: &[Login]) {
    for l in logins {
        if !as_copied(&l.copy, &l.bytes) {
            tracing::warn!(
                "{}: the CLI rewrote its copy of your login ({}) during the run, as a login refresh \
                 does; tabd never copies it back, so if your own copy stops working, log in again — \
                 or give tabd a login of its own (an API key, or for claude `claude setup-token` as \
                 CLAUDE_CODE_OAUTH_TOKEN in tabd's env file; see docs/providers.md)",
                profile.name,
                l.theirs.display()
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

/// The CLI's `HOME` for one start: `home` in `folder` (a folder tabd has just made, private to
/// it), made anew — whatever a folder of that name held is removed first, never followed — so
/// nothing an earlier start left there (settings with hooks, instructions, MCP servers, a login
/// copy of another account or dated in the future) is ever loaded again, by this role or another.
fn fresh_home(folder: &Path) -> Result<crate::base::process::ChildDirs, crate::base::process::StartError> {
    let root = std::fs::canonicalize(folder).map_err(|source| crate::base::process::StartError::Make {
        path: folder.to_path_buf(),
        source,
    })?;
    match std::fs::remove_dir_all(root.join(HOME)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(crate::base::process::StartError::Make {
                path: root.join(HOME),
                source: e,
            })
        }
        _ => {}
    }
    Ok(crate::base::sandbox::folders::child_dirs(&root, HOME)?)
}

/// The name of the CLI's `HOME` inside its run folder.
const HOME: &str = "home";

/// Copies the person's login files for the CLI into its (fresh) private folder as they are now,
/// by content — whatever their dates say; never the other way (a token copied back could be
/// another account's).
fn seed_logins(profile: &Profile, launcher: &Launcher, state: &Path) -> Vec<Login> {
    let mut logins = Vec::new();
    let home = launcher.home();
    for a in &profile.auth {
        let dir = a
            .dir_var
            .and_then(|v| launcher.env.get(v))
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| crate::setup::config::sandbox::expand_home(a.dir, home.as_deref()));
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
        let copied = crate::base::sandbox::folders::subfolder(state, a.to)
            .map_err(|e| e.to_string())
            .and_then(|(dir, fd)| {
                crate::base::sandbox::folders::replace_file(&fd, a.file, &bytes)
                    .map(|()| dir.join(a.file))
                    .map_err(|e| e.to_string())
            });
        match copied {
            Ok(copy) => logins.push(Login {
                copy,
                theirs: from,
                bytes,
            }),
            Err(e) => tracing::warn!(
                "{}: cannot copy the login file {}: {e}",
                profile.name,
                from.display()
            ),
        }
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

/// The CLI's command line, in its run folder, confined (DESIGN §20).
fn command(
    turn: &CliTurn<'_>,
    args: &[String],
) -> Result<(tokio::process::Command, Confined), crate::base::process::StartError> {
    let profile = turn.profile;
    let mut cmd = tokio::process::Command::new(&profile.command);
    cmd.args(args)
        .current_dir(turn.dir)
        .env_clear()
        .envs(&turn.env)
        .stdin(if profile.prompt_on_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    process::as_tenant(&mut cmd);
    let run = Some((turn.dir, turn.relay));
    let confined = confine(&mut cmd, profile, turn.launcher, turn.dir, run, args)?;
    Ok((cmd, confined))
}

/// Starts the CLI in its own process group, feeds the prompt, reads both streams, and kills the
/// group at the deadline. `watch`: the vault folders it may write, once it is confined.
async fn spawn_and_wait(turn: &CliTurn<'_>, args: &[String], watch: &mut Option<Watch>) -> CliEnd {
    let profile = turn.profile;
    let (mut cmd, confined) = match command(turn, args) {
        Ok(c) => c,
        Err(e) => {
            return CliEnd::NotStarted {
                message: e.to_string(),
                outage: true,
            }
        }
    };
    *watch = confined.watch;
    let logins = confined.logins;
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return CliEnd::NotStarted {
                message: format!("`{}` could not be started: {e}", profile.command),
                outage: true,
            }
        }
    };
    // Whatever happens from here (a panic, a cancelled run), the CLI and everything it started
    // go with this handle.
    let group = turn.launcher.tenant(&child, &profile.name);
    if let (Some(started), Some(pid)) = (turn.started, child.id()) {
        let _ = started.send(Some(pid as i32));
    }
    if let Some(mut stdin) = child.stdin.take() {
        let text = turn.prompt.to_string();
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| async move {
        let mut buf = Vec::new();
        if let Some(p) = pipe {
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
