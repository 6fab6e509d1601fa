//! Agent CLIs as the model (DESIGN §16): `[provider] kind = "command"` runs claude, codex, gemini
//! or a custom CLI headless for one turn. The CLI gets the same prompt as an API run and **no tools
//! of its own**: its only tools are tabd's, served by `tabd mcp serve --role R --run-id ID`, so the
//! sandbox, `approve`, `deny_tools` and the limits hold whatever the CLI is. tabd kills the CLI's
//! whole process group at the run's deadline, reads its result, usage and cost, and takes the tool
//! calls from what its MCP server recorded.
//!
//! - `profile` — the built-in and configured profiles;
//! - `output` — reading each CLI's result shape, and telling an outage from a bad run.

pub mod output;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use crate::config::profile::{Profile, RawProfile};

use crate::process_group;
use crate::provider::{ProviderError, Request};
use crate::role::Role;
use crate::run::RunEnv;
use crate::turn::{TurnEnd, TurnOutcome};
use crate::vault::VaultPath;

/// Largest stdout or stderr kept from a CLI.
const MAX_OUTPUT: usize = 16 * 1024 * 1024;
/// How long `--help` may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// A probe's answer is trusted this long (a CLI upgraded meanwhile is probed again).
const PROBE_FRESH: Duration = Duration::from_secs(600);

/// Gemini's own tools, excluded so only tabd's remain.
const GEMINI_BUILTINS: &str = r#"["run_shell_command", "write_file", "replace", "read_file", "read_many_files", "glob", "search_file_content", "list_directory", "web_fetch", "google_web_search", "save_memory"]"#;

fn failed(message: String, outage: bool) -> TurnOutcome {
    TurnOutcome::ended(TurnEnd::Failed(ProviderError::Cli {
        provider: "command",
        message,
        outage,
    }))
}

/// Checks once in a while that the CLI exists and still has the flags its profile uses.
async fn probe(profile: &Profile, env: &HashMap<String, String>) -> Result<(), String> {
    type Cache = Mutex<HashMap<String, (Instant, Result<(), String>)>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = format!("{}\u{0}{}", profile.command, profile.required_flags.join(" "));
    if let Some((at, r)) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        if at.elapsed() < PROBE_FRESH {
            return r.clone();
        }
    }
    let result = probe_now(profile, env).await;
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, (Instant::now(), result.clone()));
    result
}

async fn probe_now(profile: &Profile, env: &HashMap<String, String>) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(&profile.command);
    cmd.args(&profile.help_args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(PROBE_TIMEOUT, cmd.output()).await {
        Err(_) => {
            return Err(format!(
                "`{} {}` did not answer within 30 s",
                profile.command,
                profile.help_args.join(" ")
            ))
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "the `{}` CLI is not installed or not on tabd's PATH (profile {}); install it or set [profiles.{}] command",
                profile.command, profile.name, profile.name
            ))
        }
        Ok(Err(e)) => return Err(format!("`{}` could not be started: {e}", profile.command)),
        Ok(Ok(o)) => o,
    };
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let missing: Vec<&str> = profile
        .required_flags
        .iter()
        .map(String::as_str)
        .filter(|f| !help.contains(f))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the installed `{}` lacks {} (`{} {}` does not list them): tabd needs them to run it without its own tools; \
             install a version that has them, or adjust [profiles.{}]",
            profile.command,
            missing.join(", "),
            profile.command,
            profile.help_args.join(" "),
            profile.name
        ))
    }
}

/// What the placeholders in a profile stand for.
struct Fill {
    prompt: String,
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
            .replace("{prompt}", &self.prompt)
    }
}

/// The prompt as one text: the system prompt, then the first user message.
pub fn prompt_text(req: &Request) -> String {
    let user: Vec<&str> = req
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            crate::provider::Block::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    format!("{}\n\n---\n\n{}\n", req.system.trim_end(), user.join("\n\n"))
}

/// One turn through the CLI. `tools` are the names the role's MCP server offers.
pub async fn run_turn(
    env: &RunEnv,
    role: &Role,
    run_id: &str,
    prompt: String,
    tools: &[String],
    deadline: Duration,
) -> TurnOutcome {
    let Some(profile) = env.config.provider.profile.clone() else {
        return failed("kind = \"command\" without a profile".into(), true);
    };
    let mut process_env: HashMap<String, String> = env.process_env.vars().collect();
    for (k, v) in &profile.env {
        match env.process_env.expand(v) {
            Ok(v) => {
                process_env.insert(k.clone(), v);
            }
            Err(e) => return failed(format!("[profiles.{}] env {k}: {e}", profile.name), true),
        }
    }
    if let Err(why) = probe(&profile, &process_env).await {
        return failed(why, true);
    }
    let dir = match VaultPath::parse(&format!(".tabd/cli/{run_id}"), false) {
        Ok(d) => d,
        Err(e) => return failed(format!("run folder: {e}"), false),
    };
    let root = env.vault.root().to_path_buf();
    let abs = |p: &VaultPath| root.join(p.as_path()).to_string_lossy().into_owned();
    let tabd = std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "tabd".into());
    let mut serve_args = vec!["--vault".to_string(), root.to_string_lossy().into_owned()];
    if let Some(config) = &env.config.path {
        serve_args.push("--config".into());
        serve_args.push(config.to_string_lossy().into_owned());
    }
    serve_args.extend(["mcp", "serve", "--role", &role.name, "--run-id", run_id].map(String::from));
    let serve_json = serde_json::to_string(&serve_args).unwrap_or_default();
    let prompt_path = dir.join("prompt.md").ok();
    let mcp_path = dir.join("mcp.json").ok();
    let (Some(prompt_path), Some(mcp_path)) = (prompt_path, mcp_path) else {
        return failed("run folder paths".into(), false);
    };
    let fill = Fill {
        prompt: prompt.clone(),
        prompt_file: abs(&prompt_path),
        mcp_config: abs(&mcp_path),
        allowed_tools: tools
            .iter()
            .map(|t| format!("mcp__tabd__{t}"))
            .collect::<Vec<_>>()
            .join(","),
        tabd: tabd.clone(),
        serve_args: serve_json.clone(),
    };
    let mcp_config = serde_json::json!({
        "mcpServers": { "tabd": { "type": "stdio", "command": tabd, "args": serve_args } }
    });
    let mut files = vec![
        (prompt_path.clone(), prompt.clone()),
        (mcp_path.clone(), format!("{mcp_config:#}\n")),
    ];
    for (name, content) in &profile.files {
        match dir.join(name) {
            Ok(p) => files.push((p, fill.apply(content))),
            Err(e) => return failed(format!("[profiles.{}] file {name}: {e}", profile.name), false),
        }
    }
    let vault = env.vault.clone();
    let written = crate::blocking::run(|| {
        files.iter().try_for_each(|(p, text)| {
            vault.write_atomic_with(p, text.as_bytes(), crate::vault::Durability::None)
        })
    });
    if let Err(e) = written {
        return failed(format!("cannot write the CLI's files: {e}"), false);
    }
    let workdir = match profile.workdir {
        crate::config::profile::WorkDir::Vault => root.clone(),
        crate::config::profile::WorkDir::Run => root.join(dir.as_path()),
    };
    let args: Vec<String> = profile.args.iter().map(|a| fill.apply(a)).collect();
    let outcome = spawn_and_read(&profile, &args, &workdir, &process_env, &prompt, deadline).await;
    let mut outcome = match outcome {
        Ok((report, ran)) => {
            let mut o = TurnOutcome::ended(match report.failure {
                None => TurnEnd::Done,
                Some((message, outage)) => TurnEnd::Failed(ProviderError::Cli {
                    provider: "command",
                    message,
                    outage,
                }),
            });
            o.summary = report.summary;
            o.usage = report.usage;
            o.cost_usd = report.cost_usd;
            o.model = report.model;
            o.requests = u32::from(ran);
            o
        }
        Err(end) => TurnOutcome::ended(end),
    };
    (outcome.calls, outcome.changes) = crate::mcp::serve::read_calls(env, run_id);
    let vault = env.vault.clone();
    let calls = crate::mcp::serve::calls_path(run_id);
    crate::blocking::run(|| {
        let _ = std::fs::remove_dir_all(vault.root().join(dir.as_path()));
        if let Some(c) = calls {
            let _ = vault.remove_file(&c);
        }
    });
    outcome
}

/// Starts the CLI in its own process group, feeds the prompt, reads both streams, and kills the
/// group at the deadline.
async fn spawn_and_read(
    profile: &Profile,
    args: &[String],
    workdir: &std::path::Path,
    env: &HashMap<String, String>,
    prompt: &str,
    deadline: Duration,
) -> Result<(output::CliReport, bool), TurnEnd> {
    let mut cmd = tokio::process::Command::new(&profile.command);
    cmd.args(args)
        .current_dir(workdir)
        .env_clear()
        .envs(env)
        .stdin(if profile.prompt_on_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        TurnEnd::Failed(ProviderError::Cli {
            provider: "command",
            message: format!("`{}` could not be started: {e}", profile.command),
            outage: true,
        })
    })?;
    let pgid = process_group::of(&child);
    if let Some(mut stdin) = child.stdin.take() {
        let text = prompt.to_string();
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
    let kill = |sig| process_group::signal(pgid, sig);
    let status = match tokio::time::timeout(deadline, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            kill(process_group::Signal::KILL);
            let _ = child.wait().await;
            return Err(TurnEnd::Failed(ProviderError::Deadline { provider: "command" }));
        }
    };
    // The leader is gone; anything it left in its group (an MCP server it started) goes too.
    kill(process_group::Signal::KILL);
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    if !stderr.trim().is_empty() {
        tracing::debug!(
            "{} stderr: {}",
            profile.name,
            crate::runlog::one_line(&stderr, 2000)
        );
    }
    let ok = status.is_some_and(|s| s.success());
    Ok((output::read(profile.output, &stdout, &stderr, ok), true))
}
