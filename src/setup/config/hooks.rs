//! `[hooks]` (docs/spec.md §28): the person's programs tabd runs around a role's tool calls and at the
//! end of each run (docs/hooks.md).
//!
//! ```toml
//! [hooks]                                   # every role runs these
//! pre_tool = ["/home/me/bin/guard", "--strict"]
//! post_tool = ["/home/me/bin/lint"]
//! run_end = ["/home/me/bin/ship-record"]
//! tools = ["write_file", "edit_file"]       # which calls pre_tool and post_tool see (default: all)
//! timeout_s = 10
//!
//! [hooks.sets.notes_guard]                  # only roles whose `hooks:` names it run these
//! pre_tool = ["/home/me/bin/notes-guard"]
//! ```
//!
//! A hook is an argv, never a shell string: nothing in it is split, globbed or expanded but a
//! leading `~/`. No `${VAR}`: a hook is never given a secret, not even in its arguments. Its
//! program must be there and runnable when the config is read, so a typo is found by `tabd
//! validate`, not by a run whose every call is denied.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::base::environment::Env;

/// A hook's time when its set does not say (`timeout_s`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `timeout_s` may be: a pre_tool hook holds its call, and the run, that long.
pub const MAX_TIMEOUT_S: u64 = 600;

/// One set of hooks as written: `[hooks]` itself, or a `[hooks.sets.NAME]`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSet {
    pre_tool: Option<Spanned<Vec<String>>>,
    post_tool: Option<Spanned<Vec<String>>>,
    run_end: Option<Spanned<Vec<String>>>,
    tools: Option<Spanned<Vec<String>>>,
    timeout_s: Option<Spanned<u64>>,
}

/// `[hooks]` as written: its own set's keys, and `sets`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHooks {
    pre_tool: Option<Spanned<Vec<String>>>,
    post_tool: Option<Spanned<Vec<String>>>,
    run_end: Option<Spanned<Vec<String>>>,
    tools: Option<Spanned<Vec<String>>>,
    timeout_s: Option<Spanned<u64>>,
    #[serde(default)]
    sets: BTreeMap<String, RawSet>,
}

/// The three moments a hook runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    PreTool,
    PostTool,
    RunEnd,
}

impl Event {
    /// Its key in the config.
    pub fn key(self) -> &'static str {
        match self {
            Self::PreTool => "pre_tool",
            Self::PostTool => "post_tool",
            Self::RunEnd => "run_end",
        }
    }

    /// Its name in the hook's input (`hook_event_name`), Claude Code's where it has one.
    pub fn event_name(self) -> &'static str {
        match self {
            Self::PreTool => "PreToolUse",
            Self::PostTool => "PostToolUse",
            Self::RunEnd => "RunEnd",
        }
    }
}

/// One hook: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program, found when the config was read (`~/` expanded, a bare name looked up on
    /// `PATH`).
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Command {
    /// How a person wrote it, for what is said of it.
    pub fn shown(&self) -> String {
        self.program.display().to_string()
    }
}

/// One set of hooks, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSet {
    /// Where it is written: `[hooks]` or `[hooks.sets.NAME]`.
    pub table: String,
    pub pre_tool: Option<Command>,
    pub post_tool: Option<Command>,
    pub run_end: Option<Command>,
    /// The calls its pre_tool and post_tool see, by the names a role file uses (`write_file`,
    /// `server/tool`, `server/*`); `None`: every call.
    pub tools: Option<Vec<String>>,
    pub timeout: Duration,
}

impl HookSet {
    /// Its hook for `event`, if it has one.
    pub fn command(&self, event: Event) -> Option<&Command> {
        match event {
            Event::PreTool => self.pre_tool.as_ref(),
            Event::PostTool => self.post_tool.as_ref(),
            Event::RunEnd => self.run_end.as_ref(),
        }
    }

    /// Whether its tool hooks see a call of `key` (the tool's name in the role file).
    pub fn sees(&self, key: &str) -> bool {
        let Some(tools) = &self.tools else {
            return true;
        };
        tools.iter().any(|t| match t.strip_suffix("/*") {
            Some(server) => key.split_once('/').is_some_and(|(s, _)| s == server),
            None => t == key,
        })
    }
}

/// `[hooks]`, resolved: the set every role runs, and the sets a role may name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HooksConfig {
    /// `[hooks]` itself (`None`: it sets no hook).
    pub every_role: Option<HookSet>,
    /// `[hooks.sets.NAME]`, by name.
    pub sets: BTreeMap<String, HookSet>,
}

impl HooksConfig {
    /// The sets a role with `hooks: names` runs, in order: `[hooks]` first (the person's policy
    /// for every role: a role cannot leave it out), then each named set as the role lists it.
    /// A name the config lacks was refused when the role was read.
    pub fn for_role(&self, names: &[String]) -> Vec<HookSet> {
        self.every_role
            .iter()
            .cloned()
            .chain(names.iter().filter_map(|n| self.sets.get(n).cloned()))
            .collect()
    }
}

/// A problem in `[hooks]`, at the span of the value it is about.
pub(super) type Problem = (Option<std::ops::Range<usize>>, String);

/// `[hooks]` checked: every program there and runnable, every timeout in range.
pub(super) fn resolve(raw: RawHooks, env: &Env) -> Result<HooksConfig, Problem> {
    let own = RawSet {
        pre_tool: raw.pre_tool,
        post_tool: raw.post_tool,
        run_end: raw.run_end,
        tools: raw.tools,
        timeout_s: raw.timeout_s,
    };
    let every_role = resolve_set("[hooks]".into(), own, env)?;
    let mut sets = BTreeMap::new();
    for (name, set) in raw.sets {
        let table = format!("[hooks.sets.{name}]");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err((
                None,
                format!(
                    "{table}: a set's name is letters, digits, `_` and `-` (a role names it in `hooks:`)"
                ),
            ));
        }
        let resolved = resolve_set(table.clone(), set, env)?.unwrap_or(HookSet {
            table,
            pre_tool: None,
            post_tool: None,
            run_end: None,
            tools: None,
            timeout: DEFAULT_TIMEOUT,
        });
        sets.insert(name, resolved);
    }
    Ok(HooksConfig { every_role, sets })
}

/// One set checked; `None` when it names no hook.
fn resolve_set(table: String, raw: RawSet, env: &Env) -> Result<Option<HookSet>, Problem> {
    let command = |event: Event, v: &Option<Spanned<Vec<String>>>| -> Result<Option<Command>, Problem> {
        v.as_ref()
            .map(|argv| command(&table, event, argv, env))
            .transpose()
    };
    let pre_tool = command(Event::PreTool, &raw.pre_tool)?;
    let post_tool = command(Event::PostTool, &raw.post_tool)?;
    let run_end = command(Event::RunEnd, &raw.run_end)?;
    let timeout = match &raw.timeout_s {
        Some(t) if !(1..=MAX_TIMEOUT_S).contains(t.get_ref()) => {
            return Err((
                Some(t.span()),
                format!(
                    "{table} timeout_s must be from 1 to {MAX_TIMEOUT_S} seconds (got {}): a pre_tool hook holds its call that long",
                    t.get_ref()
                ),
            ))
        }
        Some(t) => Duration::from_secs(*t.get_ref()),
        None => DEFAULT_TIMEOUT,
    };
    if let Some(tools) = &raw.tools {
        if let Some(bad) = tools.get_ref().iter().find(|t| t.trim().is_empty()) {
            return Err((
                Some(tools.span()),
                format!("{table} tools: `{bad}` is no tool name; write names as a role file does (`write_file`, `server/tool`, `server/*`)"),
            ));
        }
    }
    if pre_tool.is_none() && post_tool.is_none() && run_end.is_none() {
        return Ok(None);
    }
    Ok(Some(HookSet {
        table,
        pre_tool,
        post_tool,
        run_end,
        tools: raw.tools.map(Spanned::into_inner),
        timeout,
    }))
}

/// One hook's argv checked: a program that is there and runnable, no `${VAR}`.
fn command(table: &str, event: Event, argv: &Spanned<Vec<String>>, env: &Env) -> Result<Command, Problem> {
    let at = |m: String| (Some(argv.span()), format!("{table} {}: {m}", event.key()));
    let Some((program, args)) = argv.get_ref().split_first() else {
        return Err(at(
            "the first word is the program to run, like [\"/home/me/bin/guard\"]".into(),
        ));
    };
    if argv.get_ref().iter().any(|a| a.contains("${")) {
        return Err(at(
            "`${VAR}` is not expanded in a hook: a hook is never given a secret; let the program read what it needs itself".into(),
        ));
    }
    let written = super::expand_home(program, env);
    let Some(found) = crate::base::process::find_program(&written.to_string_lossy(), env) else {
        return Err(at(format!(
            "`{program}` is not there or not runnable; write a program's path, or a program on PATH"
        )));
    };
    Ok(Command {
        program: found,
        args: args.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(tools: Option<&[&str]>) -> HookSet {
        HookSet {
            table: "[hooks]".into(),
            pre_tool: None,
            post_tool: None,
            run_end: None,
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    #[test]
    fn a_set_sees_the_calls_its_tools_name() {
        assert!(set(None).sees("write_file"));
        let s = set(Some(&["write_file", "web/*"]));
        assert!(s.sees("write_file"));
        assert!(s.sees("web/fetch"));
        assert!(!s.sees("read_file"));
        assert!(!s.sees("webby/fetch"));
    }

    #[test]
    fn the_config_set_runs_first_and_a_role_cannot_leave_it_out() {
        let mut hooks = HooksConfig {
            every_role: Some(set(None)),
            ..HooksConfig::default()
        };
        let mut named = set(None);
        named.table = "[hooks.sets.extra]".into();
        hooks.sets.insert("extra".into(), named);
        let tables = |names: &[&str]| {
            hooks
                .for_role(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .into_iter()
                .map(|s| s.table)
                .collect::<Vec<_>>()
        };
        assert_eq!(tables(&[]), ["[hooks]"]);
        assert_eq!(tables(&["extra"]), ["[hooks]", "[hooks.sets.extra]"]);
    }
}
