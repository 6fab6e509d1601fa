//! The person's hooks (docs/spec.md §28, docs/hooks.md): `pre_tool` and `post_tool` around every tool
//! call the harness makes — from every door, since every door's calls pass through it — and
//! `run_end` once a run's record is written.
//!
//! A hook is the person's own program: started through the one launcher as a tenant (its own
//! session; at its time it is killed with everything it started), not confined, in the vault's
//! folder, with tabd's environment less every secret (`Env::without_secrets`). What it is given
//! on stdin is JSON with Claude Code's names where Claude Code has the field, with every secret
//! written back as `${NAME}`; what it says is bounded and made inert before a model or a note
//! sees it.
//!
//! - `child` — one hook run once: start, feed, bounded output, time;
//! - `answer` — what its ending means (exit codes and JSON, Claude Code's contract).

pub mod answer;
pub mod child;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::base::calls::{Risk, ToolResult};
use crate::base::environment::Redactor;
use crate::base::process::Launcher;
use crate::setup::config::hooks::{Command, Event, HookSet, HooksConfig};

/// The most of a tool's result a post_tool hook is given.
const MAX_RESULT_GIVEN: usize = 16 * 1024;

/// The hooks of one run (or one session) of one role, and how they start.
#[derive(Clone, Default)]
pub struct Hooks {
    sets: Vec<HookSet>,
    launcher: Launcher,
    /// Their environment: tabd's, without a secret.
    env: Vec<(String, String)>,
    secrets: Arc<Redactor>,
    vault: PathBuf,
    role: String,
    run_id: String,
}

/// A call as the hooks see it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Its tool's name in the role file (`write_file`, `server/tool`).
    pub tool: &'a str,
    pub risk: Risk,
    pub input: &'a Value,
    /// The model's id for the call, where the door has one.
    pub call_id: Option<&'a str>,
    /// The person approved it in a note (it runs now).
    pub approved: bool,
}

/// What the pre_tool hooks made of a call.
#[derive(Debug)]
pub enum Verdict {
    /// It goes on to the harness's checks, with these arguments instead when `Some`.
    Allow(Option<Value>),
    /// It does not run: `to_model` is its result; `daily`, a line for the run's daily section
    /// when the hook failed rather than decided.
    Deny { to_model: String, daily: Option<String> },
}

/// What the post_tool hooks added: lines for the model beside the result, and lines for the
/// daily section (a hook that failed).
#[derive(Debug, Default)]
pub struct After {
    pub for_model: Vec<String>,
    pub daily: Vec<String>,
}

impl Hooks {
    /// The hooks a run of `role` (`hooks:` naming `names`) runs: the config's `[hooks]` then its
    /// named sets. `also_secret`: variables that hold a secret though nothing says so by name or
    /// use (the provider's key variable).
    pub fn new(
        config: &HooksConfig,
        names: &[String],
        launcher: &Launcher,
        also_secret: &[&str],
        (vault, role, run_id): (PathBuf, &str, &str),
    ) -> Self {
        let sets = config.for_role(names);
        if sets.is_empty() {
            return Self::default();
        }
        Self {
            sets,
            env: launcher.env.without_secrets(also_secret),
            secrets: launcher.env.redactor(),
            launcher: launcher.clone(),
            vault,
            role: role.to_string(),
            run_id: run_id.to_string(),
        }
    }

    /// Whether any hook is set.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// What every hook's input starts with.
    fn input_of(&self, event: Event) -> serde_json::Map<String, Value> {
        let vault = self.vault.display().to_string();
        let mut m = serde_json::Map::new();
        m.insert("hook_event_name".into(), event.event_name().into());
        m.insert("session_id".into(), self.run_id.clone().into());
        m.insert("run_id".into(), self.run_id.clone().into());
        m.insert("cwd".into(), vault.clone().into());
        m.insert("vault".into(), vault.into());
        m.insert("role".into(), self.role.clone().into());
        m
    }

    /// A call's input for `event`.
    fn call_input(&self, event: Event, call: &Call<'_>, input: &Value) -> serde_json::Map<String, Value> {
        let mut m = self.input_of(event);
        m.insert("tool_name".into(), call.tool.into());
        m.insert("tool_input".into(), input.clone());
        m.insert(
            "tool_use_id".into(),
            call.call_id.map_or(Value::Null, Value::from),
        );
        m.insert("risk".into(), call.risk.as_str().into());
        m.insert("approved".into(), call.approved.into());
        m
    }

    /// Runs `command` of `set` for `event` with `input` (secrets written back as `${NAME}`).
    async fn run(
        &self,
        set: &HookSet,
        command: &Command,
        event: Event,
        input: serde_json::Map<String, Value>,
    ) -> Result<child::Ended, child::NotEnded> {
        let mut input = Value::Object(input);
        self.secrets.apply_json(&mut input);
        let mut bytes = serde_json::to_vec(&input).unwrap_or_default();
        bytes.push(b'\n');
        child::run(
            &self.launcher,
            child::Run {
                name: format!("hook {}", event.key()),
                program: &command.program,
                args: &command.args,
                env: self.env.clone(),
                cwd: self.vault.clone(),
                input: bytes,
                timeout: set.timeout,
            },
        )
        .await
    }

    /// The daily line of a hook that gave no answer.
    fn failed_line(set: &HookSet, command: &Command, event: Event, what: &str, why: &str) -> String {
        format!(
            "**Hook failed:** {} {} `{}`{what}: {why}",
            set.table,
            event.key(),
            command.shown()
        )
    }

    /// Every pre_tool hook that sees the call, in order; each gets the arguments the one before
    /// it let through. The first that denies, or gives no answer, stops the call.
    pub async fn pre_tool(&self, call: &Call<'_>) -> Verdict {
        let mut replaced: Option<Value> = None;
        for set in self.sets.iter().filter(|s| s.sees(call.tool)) {
            let Some(command) = &set.pre_tool else {
                continue;
            };
            let input = replaced.as_ref().unwrap_or(call.input);
            let on = format!(" on `{}`", call.tool);
            let answer = match self
                .run(
                    set,
                    command,
                    Event::PreTool,
                    self.call_input(Event::PreTool, call, input),
                )
                .await
            {
                Ok(ended) => answer::pre_tool(&ended).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match answer {
                Ok(answer::PreTool::Allow(Some(v))) => replaced = Some(v),
                Ok(answer::PreTool::Allow(None)) => {}
                Ok(answer::PreTool::Deny(reason)) => {
                    return Verdict::Deny {
                        to_model: match reason {
                            Some(r) => format!("refused by the person's pre_tool hook: {r}"),
                            None => "refused by the person's pre_tool hook (it gave no reason)".into(),
                        },
                        daily: None,
                    }
                }
                Err(why) => {
                    return Verdict::Deny {
                        to_model: "refused: the person's pre_tool hook could not decide on this call, so it \
                                   did not run; say so in your answer rather than retrying"
                            .into(),
                        daily: Some(Self::failed_line(
                            set,
                            command,
                            Event::PreTool,
                            &on,
                            &format!("{why}; the call was denied"),
                        )),
                    }
                }
            }
        }
        Verdict::Allow(replaced)
    }

    /// Every post_tool hook that sees the call, given the call as it ran and its result. A hook
    /// that fails never fails the call: a daily line says it.
    pub async fn post_tool(&self, call: &Call<'_>, result: &ToolResult) -> After {
        let mut after = After::default();
        for set in self.sets.iter().filter(|s| s.sees(call.tool)) {
            let Some(command) = &set.post_tool else {
                continue;
            };
            let mut input = self.call_input(Event::PostTool, call, call.input);
            let cut = crate::base::text::floor_boundary(&result.text, MAX_RESULT_GIVEN);
            input.insert(
                "tool_response".into(),
                json!({ "ok": result.ok, "text": &result.text[..cut], "cut": cut < result.text.len() }),
            );
            let answer = match self.run(set, command, Event::PostTool, input).await {
                Ok(ended) => answer::post_tool(&ended).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match answer {
                Ok(Some(line)) => after.for_model.push(format!("hook: {line}")),
                Ok(None) => {}
                Err(why) => after.daily.push(Self::failed_line(
                    set,
                    command,
                    Event::PostTool,
                    &format!(" after `{}`", call.tool),
                    &format!("{why}; the call's result stands"),
                )),
            }
        }
        after
    }

    /// Every run_end hook, given the run's record (as its JSONL line has it). Returns the daily
    /// lines of those that failed; a failure never changes the run's outcome.
    pub async fn run_end(&self, record: &Value) -> Vec<String> {
        let mut lines = Vec::new();
        for set in &self.sets {
            let Some(command) = &set.run_end else {
                continue;
            };
            let mut input = self.input_of(Event::RunEnd);
            input.insert("record".into(), record.clone());
            let answer = match self.run(set, command, Event::RunEnd, input).await {
                Ok(ended) => answer::run_end(&ended).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(why) = answer {
                lines.push(Self::failed_line(
                    set,
                    command,
                    Event::RunEnd,
                    "",
                    &format!("{why}; the run's outcome stands"),
                ));
            }
        }
        lines
    }
}
