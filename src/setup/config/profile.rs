//! Which agent CLI to run and how (docs/spec.md §16): built-in profiles for claude, codex and gemini,
//! and `[profiles.NAME]` tables in the config, which may also adjust a built-in one.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::base::environment::{Env, ExpandError};

/// How a CLI prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// One JSON object: `result`, `usage`, `total_cost_usd`, `is_error`, `permission_denials`.
    ClaudeJson,
    /// JSON lines: `item.completed` agent messages, `turn.completed` usage, `error` / `turn.failed`.
    CodexJsonl,
    /// One JSON object: `response`, `stats.models.*.tokens`, `error`.
    GeminiJson,
    /// Plain text: the whole stdout is the summary; no usage.
    Text,
}

/// A CLI profile, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub command: String,
    /// With placeholders: `{prompt_file}`, `{mcp_config}`, `{allowed_tools}`, `{tabd}` (tabd's
    /// own path), `{serve_args}` (a JSON list: the `mcp serve` arguments). The prompt itself goes
    /// by stdin or `{prompt_file}`, never in the arguments (readable by every user in
    /// /proc/PID/cmdline, and limited to 128 KiB).
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Variables of tabd's environment passed through by name (`FOO`, or `FOO_*` for a prefix),
    /// beyond the basics and the CLI's own login variables.
    pub pass_env: Vec<String>,
    pub output: OutputFormat,
    /// The prompt goes to the CLI's stdin (else stdin is empty).
    pub prompt_on_stdin: bool,
    /// Flags the CLI's help must list; checked before the first run (CLIs drop flags).
    pub required_flags: Vec<String>,
    /// How to ask for that help (`["exec", "--help"]` for codex, whose flags live on `exec`).
    pub help_args: Vec<String>,
    /// Extra files written into the run folder before the CLI starts: path → content, with the
    /// same placeholders (gemini reads its MCP servers from `.gemini/settings.json`).
    pub files: Vec<(String, String)>,
    /// What the CLI may reach (docs/spec.md §20): by default its private folder (its `HOME`), its
    /// run folder, the network (it calls its model), and no part of the vault.
    pub sandbox: super::sandbox::ChildSandbox,
    /// Variables that point the CLI at its config folder inside its private one
    /// (`CLAUDE_CONFIG_DIR` → `.claude`): never the person's own, whose settings, hooks and MCP
    /// servers a compromised CLI could otherwise rewrite for the person's next session.
    pub private_env: Vec<(String, String)>,
    /// Login files copied from the person's folders into the private one before each start
    /// (when the person's copy is newer); never copied back.
    pub auth: Vec<AuthFile>,
}

/// A login file a CLI needs, copied from the person's config folder into its private one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthFile {
    /// The variable that names the person's folder, when set (`CLAUDE_CONFIG_DIR`)…
    pub dir_var: Option<&'static str>,
    /// …else this folder (`~/.claude`).
    pub dir: &'static str,
    pub file: &'static str,
    /// The folder inside the private one it goes to (`.claude`).
    pub to: &'static str,
}

fn auth(dir_var: Option<&'static str>, dir: &'static str, file: &'static str, to: &'static str) -> AuthFile {
    AuthFile {
        dir_var,
        dir,
        file,
        to,
    }
}

/// `[profiles.NAME]` as written. Every key is optional when NAME is a built-in profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawProfile {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    pass_env: Option<Vec<String>>,
    output: Option<OutputFormat>,
    prompt_on_stdin: Option<bool>,
    /// No longer a choice: a CLI always runs in its own run folder (refused with a reason).
    workdir: Option<String>,
    required_flags: Option<Vec<String>>,
    help_args: Option<Vec<String>>,
    /// The CLI's sandbox (docs/spec.md §20); `readable` and `writable` add to the profile's own.
    vault: Option<super::sandbox::VaultAccess>,
    network: Option<bool>,
    readable: Option<Vec<String>>,
    writable: Option<Vec<String>>,
    deny_read: Option<Vec<String>>,
    unix_sockets: Option<Vec<String>>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The built-in profiles. Flags are those of claude 2.1, codex 0.169 and gemini 0.61.
pub fn builtin(name: &str) -> Option<Profile> {
    match name {
        "claude" => Some(claude()),
        "codex" => Some(codex()),
        "gemini" => Some(gemini()),
        _ => None,
    }
}

fn claude() -> Profile {
    Profile {
        name: "claude".into(),
        command: "claude".into(),
        args: strings(&[
            "-p",
            "--output-format",
            "json",
            "--tools",
            "",
            "--mcp-config",
            "{mcp_config}",
            "--strict-mcp-config",
            "--allowedTools",
            "{allowed_tools}",
            "--no-session-persistence",
            // Only the person's own settings: no project or local settings, hooks or
            // instructions, whatever folder it runs in.
            "--setting-sources",
            "user",
        ]),
        env: Vec::new(),
        pass_env: Vec::new(),
        output: OutputFormat::ClaudeJson,
        prompt_on_stdin: true,
        required_flags: strings(&[
            "--output-format",
            "--tools",
            "--mcp-config",
            "--strict-mcp-config",
            "--allowedTools",
            "--no-session-persistence",
            "--setting-sources",
        ]),
        help_args: strings(&["--help"]),
        files: Vec::new(),
        sandbox: Default::default(),
        private_env: vec![("CLAUDE_CONFIG_DIR".into(), ".claude".into())],
        auth: vec![auth(
            Some("CLAUDE_CONFIG_DIR"),
            "~/.claude",
            ".credentials.json",
            ".claude",
        )],
    }
}

fn codex() -> Profile {
    Profile {
        name: "codex".into(),
        command: "codex".into(),
        args: strings(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "-s",
            "read-only",
            "-c",
            "mcp_servers.tabd.command=\"{tabd}\"",
            "-c",
            "mcp_servers.tabd.args={serve_args}",
            "-",
        ]),
        env: Vec::new(),
        pass_env: Vec::new(),
        output: OutputFormat::CodexJsonl,
        prompt_on_stdin: true,
        required_flags: strings(&["--json", "--skip-git-repo-check", "--ephemeral"]),
        help_args: strings(&["exec", "--help"]),
        files: Vec::new(),
        sandbox: Default::default(),
        private_env: vec![("CODEX_HOME".into(), ".codex".into())],
        auth: vec![auth(Some("CODEX_HOME"), "~/.codex", "auth.json", ".codex")],
    }
}

fn gemini() -> Profile {
    Profile {
        name: "gemini".into(),
        command: "gemini".into(),
        // gemini reads the prompt from stdin and appends `-p` to it.
        args: strings(&[
            "-o",
            "json",
            "--allowed-mcp-server-names",
            "tabd",
            "-p",
            "Follow the instructions above.",
        ]),
        env: Vec::new(),
        pass_env: Vec::new(),
        output: OutputFormat::GeminiJson,
        prompt_on_stdin: true,
        required_flags: strings(&["--output-format", "--allowed-mcp-server-names"]),
        help_args: strings(&["--help"]),
        files: vec![(
            ".gemini/settings.json".into(),
            concat!(
                "{\"mcpServers\": {\"tabd\": {\"command\": \"{tabd}\", \"args\": {serve_args}, \"trust\": true}},\n",
                " \"excludeTools\": {gemini_builtins}, \"tools\": {\"exclude\": {gemini_builtins}}}\n"
            )
            .into(),
        )],
        sandbox: Default::default(),
        private_env: Vec::new(),
        auth: vec![
            auth(None, "~/.gemini", "oauth_creds.json", ".gemini"),
            auth(None, "~/.gemini", "google_accounts.json", ".gemini"),
        ],
    }
}

/// A `[profiles.NAME]` table's flag checks, and its sandbox keys over the profile's own (grants
/// add up).
fn apply_checks_and_sandbox(p: &mut Profile, r: &RawProfile) {
    if let Some(f) = &r.required_flags {
        p.required_flags = f.clone();
    }
    if let Some(h) = &r.help_args {
        p.help_args = h.clone();
    }
    let sandbox = &mut p.sandbox;
    if let Some(v) = r.vault {
        sandbox.vault = v;
    }
    if let Some(n) = r.network {
        sandbox.network = n;
    }
    sandbox.readable.extend(r.readable.iter().flatten().cloned());
    sandbox.writable.extend(r.writable.iter().flatten().cloned());
    sandbox.deny_read.extend(r.deny_read.iter().flatten().cloned());
    sandbox
        .unix_sockets
        .extend(r.unix_sockets.iter().flatten().cloned());
}

/// Why a CLI profile cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("no CLI profile `{name}`: the built-in ones are claude, codex and gemini{}", defined_in_config(.defined))]
    Unknown {
        name: String,
        /// The `[profiles.NAME]` tables the config has.
        defined: Vec<String>,
    },
    #[error(
        "[profiles.{name}] needs `command` and `output` (claude-json, codex-jsonl, gemini-json or text)"
    )]
    Incomplete { name: String },
    #[error("[profiles.{name}]: {source}")]
    Expand { name: String, source: ExpandError },
    #[error(
        "[profiles.{name}] args: `{{prompt}}` would put the prompt on the command line, where every \
         user of the machine can read it and 128 KiB is the limit; use `prompt_on_stdin = true` or \
         `{{prompt_file}}`"
    )]
    PromptInArgs { name: String },
    #[error(
        "[profiles.{name}] workdir: a CLI always runs in a private folder of its own, never in \
         the vault (so nothing a role writes can become its settings); remove this key"
    )]
    Workdir { name: String },
}

fn defined_in_config(defined: &[String]) -> String {
    if defined.is_empty() {
        String::new()
    } else {
        format!("; the config defines {}", defined.join(", "))
    }
}

/// The profile `name`: a `[profiles.NAME]` table over the built-in of that name, if any.
pub fn resolve(
    name: &str,
    tables: &BTreeMap<String, RawProfile>,
    env: &Env,
) -> Result<Profile, ProfileError> {
    let raw = tables.get(name);
    let mut p = base_profile(name, raw, tables)?;
    if let Some(r) = raw {
        apply_table(&mut p, name, r, env)?;
    }
    Ok(p)
}

/// What the table `raw` of `name` goes over: the built-in of that name, else a profile of the
/// table's own (it must name `command` and `output`).
fn base_profile(
    name: &str,
    raw: Option<&RawProfile>,
    tables: &BTreeMap<String, RawProfile>,
) -> Result<Profile, ProfileError> {
    match (builtin(name), raw) {
        (None, None) => Err(ProfileError::Unknown {
            name: name.to_string(),
            defined: tables.keys().cloned().collect(),
        }),
        (Some(b), _) => Ok(b),
        (None, Some(r)) => {
            let (Some(command), Some(output)) = (&r.command, r.output) else {
                return Err(ProfileError::Incomplete {
                    name: name.to_string(),
                });
            };
            Ok(Profile {
                name: name.to_string(),
                command: command.clone(),
                args: Vec::new(),
                env: Vec::new(),
                pass_env: Vec::new(),
                output,
                prompt_on_stdin: true,
                required_flags: Vec::new(),
                help_args: strings(&["--help"]),
                files: Vec::new(),
                sandbox: Default::default(),
                private_env: Vec::new(),
                auth: Vec::new(),
            })
        }
    }
}

/// The table's settings over `p`: `${VAR}` in its command expanded, its env kept unexpanded.
fn apply_table(p: &mut Profile, name: &str, r: &RawProfile, env: &Env) -> Result<(), ProfileError> {
    let ex = |s: &str| {
        env.expand(s).map_err(|source| ProfileError::Expand {
            name: name.to_string(),
            source,
        })
    };
    if let Some(c) = &r.command {
        p.command = ex(c)?;
    }
    if let Some(a) = &r.args {
        if a.iter().any(|x| x.contains("{prompt}")) {
            return Err(ProfileError::PromptInArgs {
                name: name.to_string(),
            });
        }
        p.args = a.clone();
    }
    if let Some(e) = &r.env {
        // Values stay unexpanded here: `${VAR}` is read when the CLI starts, so a secret is
        // never copied into tabd's config structures or logs.
        p.env = e.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    }
    if let Some(p2) = &r.pass_env {
        p.pass_env = p2.clone();
    }
    if let Some(o) = r.output {
        p.output = o;
    }
    if let Some(s) = r.prompt_on_stdin {
        p.prompt_on_stdin = s;
    }
    if r.workdir.is_some() {
        return Err(ProfileError::Workdir {
            name: name.to_string(),
        });
    }
    apply_checks_and_sandbox(p, r);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_custom_profiles_and_overrides() {
        let env = Env::from_pairs([("CLAUDE_BIN", "/opt/claude")]);
        let none = BTreeMap::new();
        let claude = resolve("claude", &none, &env).unwrap();
        assert_eq!(claude.command, "claude");
        assert_eq!(
            resolve("codex", &none, &env).unwrap().help_args,
            ["exec", "--help"],
            "codex lists exec's flags only under `exec --help`"
        );
        assert!(claude.args.contains(&"--strict-mcp-config".to_string()));
        assert_eq!(
            claude.args[claude.args.iter().position(|a| a == "--tools").unwrap() + 1],
            ""
        );
        let tables: BTreeMap<String, RawProfile> =
            toml::from_str("[claude]\ncommand = \"${CLAUDE_BIN}\"\n[mine]\ncommand = \"my-agent\"\noutput = \"text\"\nargs = [\"--prompt-file\", \"{prompt_file}\"]\n")
                .unwrap();
        let claude = resolve("claude", &tables, &env).unwrap();
        assert_eq!(claude.command, "/opt/claude");
        assert_eq!(
            claude.output,
            OutputFormat::ClaudeJson,
            "the rest of the built-in stays"
        );
        let mine = resolve("mine", &tables, &env).unwrap();
        assert_eq!(mine.output, OutputFormat::Text);
        assert_eq!(mine.args, ["--prompt-file", "{prompt_file}"]);
        let e = resolve("cursor", &tables, &env).unwrap_err().to_string();
        assert!(
            e.contains("built-in ones are claude, codex and gemini") && e.contains("mine"),
            "{e}"
        );
        let bad: BTreeMap<String, RawProfile> = toml::from_str("[x]\nargs = []\n").unwrap();
        assert!(resolve("x", &bad, &env)
            .unwrap_err()
            .to_string()
            .contains("needs `command` and `output`"));
        assert!(toml::from_str::<BTreeMap<String, RawProfile>>("[x]\ncolour = 1\n").is_err());
    }
}
