//! A role's frontmatter keys, typed and checked, each error at the key's line.

use std::time::Duration;

use chrono_tz::Tz;
use serde_json::Value;

use crate::base::environment::Env;
use crate::base::text::did_you_mean;
use crate::formats::frontmatter::{Field, Frontmatter};
use crate::formats::schedule::parse_tz;
use crate::setup::role::caps::{self, Cap};

/// What to do with scheduled slots missed while tabd was not running (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    #[default]
    Once,
    Skip,
    All,
}

/// The machine settings of a role. Every key is optional; `None` / empty means "inherit, then
/// use the config default".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleSettings {
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub thinking_budget: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub max_tokens_per_run: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub daily_token_budget: Option<u64>,
    pub daily_cost_budget_usd: Option<f64>,
    pub max_runs_per_day: Option<u32>,
    pub min_interval: Option<Duration>,
    pub max_chain_depth: Option<u32>,
    pub timezone: Option<Tz>,
    pub enabled: Option<bool>,
    pub extends: Option<String>,
    pub can_trigger: Vec<String>,
    pub write_paths: Vec<String>,
    pub catch_up: Option<CatchUp>,
    pub stale_after: Option<Duration>,
    pub watch: Vec<String>,
    /// Tools taken away even if listed: `server/tool`, `server/*` or a vault tool's name.
    pub deny_tools: Vec<String>,
    pub skip_unchanged: Option<bool>,
    pub runs_on: Option<String>,
    /// `move_file` may move whole folders (default: files only).
    pub move_folders: Option<bool>,
    /// Risk class, `server/*`, `server/tool` or vault tool → auto/ask/deny (DESIGN §15). Merged
    /// through `extends` key by key, the child winning.
    pub approve: std::collections::BTreeMap<String, crate::base::calls::Mode>,
    /// Roles this role may hand a task to with `delegate` (DESIGN §18); empty: no `delegate` tool.
    pub can_delegate_to: Vec<String>,
    /// How deep delegation may go from a run of this role (1: its children cannot delegate).
    pub max_delegation_depth: Option<u32>,
    /// How many children one `delegate` call runs at once.
    pub max_parallel_delegates: Option<u32>,
    /// The contract of the role's final answer.
    pub output: Option<OutputContract>,
    /// What the role must have produced by when (DESIGN §22): checked at each deadline.
    pub expect: Vec<Expectation>,
    /// A run whose call waits for approval goes on once it is decided (default true).
    pub resume: Option<bool>,
}

/// `expect: {path: "reports/{date}.md", by: "weekdays at 8:30"}`: a file that must exist at each
/// time the `by` schedule names — a reported "ok" is not proof the work happened.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// A vault path; `{date}` is the deadline's date (YYYY-MM-DD), `{role}` the role's name.
    pub path: String,
    /// A schedule phrase (or cron) of the deadlines.
    pub by: String,
    /// `by`, compiled once when the role was read (the daemon asks for it at every wake).
    line: crate::formats::schedule::ScheduleLine,
}

impl PartialEq for Expectation {
    fn eq(&self, other: &Self) -> bool {
        (&self.path, &self.by) == (&other.path, &other.by)
    }
}

impl Eq for Expectation {}

impl Expectation {
    /// The deadlines.
    pub fn deadlines(&self) -> &crate::formats::schedule::ScheduleLine {
        &self.line
    }

    /// The path due at a deadline on `date`.
    pub fn path_on(&self, date: chrono::NaiveDate, role: &str) -> String {
        self.path
            .replace("{date}", &date.format("%Y-%m-%d").to_string())
            .replace("{role}", role)
    }
}

/// `output: {schema: PATH, path: TEMPLATE}` (DESIGN §18).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputContract {
    /// A JSON Schema file in the vault the final answer (a JSON object) must satisfy.
    pub schema: Option<String>,
    /// A vault file the final answer is also written to: `{date}`, `{role}`, `{run_id}`.
    pub path: Option<String>,
}

impl RoleSettings {
    /// `child` extends `self` (DESIGN §3): the child's scalars win, lists join (the parent's
    /// first), `approve` entries are overridden one by one, `expect` is the child's when it has
    /// one. Every field is named here — no `..` — so a setting added to the struct and not
    /// decided here does not compile (issue 32: a field forgotten was silently not inherited).
    pub fn inherit(&mut self, child: &RoleSettings) {
        let RoleSettings {
            model,
            max_tokens,
            temperature,
            thinking_budget,
            max_tool_calls,
            max_tokens_per_run,
            max_cost_usd,
            daily_token_budget,
            daily_cost_budget_usd,
            max_runs_per_day,
            min_interval,
            max_chain_depth,
            timezone,
            enabled,
            extends: _, // each file's own: never inherited
            can_trigger,
            write_paths,
            catch_up,
            stale_after,
            watch,
            deny_tools,
            skip_unchanged,
            runs_on,
            move_folders,
            approve,
            can_delegate_to,
            max_delegation_depth,
            max_parallel_delegates,
            output,
            expect,
            resume,
        } = child;
        wins(&mut self.model, model);
        wins(&mut self.max_tokens, max_tokens);
        wins(&mut self.temperature, temperature);
        wins(&mut self.thinking_budget, thinking_budget);
        wins(&mut self.max_tool_calls, max_tool_calls);
        wins(&mut self.max_tokens_per_run, max_tokens_per_run);
        wins(&mut self.max_cost_usd, max_cost_usd);
        wins(&mut self.daily_token_budget, daily_token_budget);
        wins(&mut self.daily_cost_budget_usd, daily_cost_budget_usd);
        wins(&mut self.max_runs_per_day, max_runs_per_day);
        wins(&mut self.min_interval, min_interval);
        wins(&mut self.max_chain_depth, max_chain_depth);
        wins(&mut self.timezone, timezone);
        wins(&mut self.enabled, enabled);
        wins(&mut self.catch_up, catch_up);
        wins(&mut self.stale_after, stale_after);
        wins(&mut self.skip_unchanged, skip_unchanged);
        wins(&mut self.runs_on, runs_on);
        wins(&mut self.move_folders, move_folders);
        wins(&mut self.max_delegation_depth, max_delegation_depth);
        wins(&mut self.max_parallel_delegates, max_parallel_delegates);
        wins(&mut self.output, output);
        wins(&mut self.resume, resume);
        union(&mut self.can_trigger, can_trigger);
        union(&mut self.can_delegate_to, can_delegate_to);
        union(&mut self.write_paths, write_paths);
        union(&mut self.watch, watch);
        union(&mut self.deny_tools, deny_tools);
        for (k, v) in approve {
            self.approve.insert(k.clone(), *v);
        }
        if !expect.is_empty() {
            self.expect.clone_from(expect);
        }
    }
}

/// The child's value when it has one.
fn wins<T: Clone>(mine: &mut Option<T>, child: &Option<T>) {
    if child.is_some() {
        mine.clone_from(child);
    }
}

/// The parent's items, then the child's new ones.
fn union(mine: &mut Vec<String>, child: &[String]) {
    for item in child {
        if !mine.contains(item) {
            mine.push(item.clone());
        }
    }
}

/// The deepest delegation a role may ask for.
pub const MAX_DELEGATION_DEPTH: u32 = 5;

/// Every frontmatter key a role may use.
pub const KNOWN_KEYS: &[&str] = &[
    "model",
    "max_tokens",
    "temperature",
    "thinking_budget",
    "max_tool_calls",
    "max_tokens_per_run",
    "max_cost_usd",
    "daily_token_budget",
    "daily_cost_budget_usd",
    "max_runs_per_day",
    "min_interval",
    "max_chain_depth",
    "timezone",
    "enabled",
    "extends",
    "can_trigger",
    "write_paths",
    "catch_up",
    "stale_after",
    "watch",
    "deny_tools",
    "skip_unchanged",
    "runs_on",
    "approve",
    "move_folders",
    "can_delegate_to",
    "max_delegation_depth",
    "max_parallel_delegates",
    "output",
    "expect",
    "resume",
];

/// A settings problem at a 1-based file line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub line: usize,
    pub message: String,
}

/// Reads the typed settings out of a frontmatter block; returns every error found.
pub fn parse(fm: &Frontmatter, env: &Env) -> (RoleSettings, Vec<SettingError>) {
    let mut s = RoleSettings::default();
    let mut errors = Vec::new();
    for entry in &fm.entries {
        if let Err(message) = apply(&mut s, entry, env) {
            errors.push(SettingError {
                line: entry.line,
                message,
            });
        }
    }
    (s, errors)
}

fn apply(s: &mut RoleSettings, e: &Field, env: &Env) -> Result<(), String> {
    let key = e.key.as_str();
    let v = &e.value;
    match key {
        "model" => s.model = Some(string(key, v, env)?),
        "max_tokens" => s.max_tokens = Some(count(key, v)?),
        "temperature" => {
            let t = v
                .as_f64()
                .ok_or_else(|| type_error(key, "a number from 0 to 2, like 0.3", v))?;
            if !(0.0..=2.0).contains(&t) {
                return Err(format!("`temperature` must be between 0 and 2 (got {t})"));
            }
            s.temperature = Some(t);
        }
        "thinking_budget" => s.thinking_budget = Some(count(key, v)?),
        "max_tool_calls" => s.max_tool_calls = Some(count(key, v)?),
        "max_tokens_per_run" => s.max_tokens_per_run = Some(count(key, v)?),
        "daily_token_budget" => s.daily_token_budget = Some(count(key, v)?),
        "max_cost_usd" => s.max_cost_usd = Some(dollars(key, v)?),
        "daily_cost_budget_usd" => s.daily_cost_budget_usd = Some(dollars(key, v)?),
        "max_runs_per_day" => s.max_runs_per_day = Some(count(key, v)?),
        "max_chain_depth" => s.max_chain_depth = Some(count(key, v)?),
        "min_interval" => s.min_interval = Some(duration(key, v)?),
        "stale_after" => s.stale_after = Some(duration(key, v)?),
        "timezone" => s.timezone = Some(parse_tz(&string(key, v, env)?).map_err(|e| e.to_string())?),
        "enabled" => s.enabled = Some(boolean(key, v)?),
        "skip_unchanged" => s.skip_unchanged = Some(boolean(key, v)?),
        "move_folders" => s.move_folders = Some(boolean(key, v)?),
        "resume" => s.resume = Some(boolean(key, v)?),
        "extends" => s.extends = Some(string(key, v, env)?.trim_end_matches(".md").to_string()),
        "runs_on" => s.runs_on = Some(string(key, v, env)?),
        "can_trigger" => s.can_trigger = list(key, v, env, caps::CAN_TRIGGER)?,
        "can_delegate_to" => s.can_delegate_to = list(key, v, env, caps::CAN_DELEGATE_TO)?,
        "max_delegation_depth" => s.max_delegation_depth = Some(delegation_depth(v)?),
        "max_parallel_delegates" => s.max_parallel_delegates = Some(parallel_delegates(v)?),
        "output" => s.output = Some(output_contract(v, env)?),
        "expect" => s.expect = expectations(v, env)?,
        "write_paths" => s.write_paths = list(key, v, env, caps::WRITE_PATHS)?,
        "watch" => s.watch = list(key, v, env, caps::WATCH)?,
        "deny_tools" => {
            let items = list(key, v, env, caps::DENY_TOOLS)?;
            for i in &items {
                let ok =
                    crate::base::calls::is_tabd_tool(i) || crate::setup::role::McpAllow::parse(i, 0).is_ok();
                if !ok {
                    return Err(format!(
                        "`deny_tools`: `{i}` is neither a tool name nor server/tool or server/*{}; a misspelt \
                         name would leave the tool allowed",
                        tool_hint(i)
                    ));
                }
            }
            s.deny_tools = items;
        }
        "approve" => s.approve = approve_map(v)?,
        "catch_up" => {
            s.catch_up = Some(match string(key, v, env)?.as_str() {
                "once" => CatchUp::Once,
                "skip" => CatchUp::Skip,
                "all" => CatchUp::All,
                other => return Err(format!("`catch_up` must be once, skip or all (got \"{other}\")")),
            })
        }
        _ => {
            let hint = did_you_mean(key, KNOWN_KEYS.iter().copied())
                .map(|k| format!(" — did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(format!(
                "unknown setting `{key}`{hint} Known settings: {}. Remove or rename it.",
                KNOWN_KEYS.join(", ")
            ));
        }
    }
    Ok(())
}

fn delegation_depth(v: &Value) -> Result<u32, String> {
    let n: u32 = count("max_delegation_depth", v)?;
    if n > MAX_DELEGATION_DEPTH {
        return Err(format!(
            "`max_delegation_depth` is at most {MAX_DELEGATION_DEPTH} (got {n}): every level multiplies runs and cost"
        ));
    }
    Ok(n)
}

fn parallel_delegates(v: &Value) -> Result<u32, String> {
    let n: u32 = count("max_parallel_delegates", v)?;
    if n == 0 {
        return Err("`max_parallel_delegates` must be 1 or more (1: one child at a time)".into());
    }
    Ok(n)
}

/// `output: {schema: schemas/risk.json, path: "reports/{date}-{role}.md"}`.
fn output_contract(v: &Value, env: &Env) -> Result<OutputContract, String> {
    let Value::Object(map) = v else {
        return Err(type_error(
            "output",
            "a map like {schema: schemas/assessment.json, path: \"reports/{date}-{role}.md\"}",
            v,
        ));
    };
    let mut out = OutputContract::default();
    for (key, value) in map {
        let text = string(&format!("output.{key}"), value, env)?;
        match key.as_str() {
            "schema" => out.schema = Some(text),
            "path" => {
                placeholders("output.path", &text, &["date", "role", "run_id"])?;
                out.path = Some(text)
            }
            other => {
                return Err(format!(
                    "`output` has no key `{other}`{}; it takes `schema` (a JSON Schema file) and `path` (where the answer is written)",
                    did_you_mean(other, ["schema", "path"].into_iter())
                        .map(|k| format!(" — did you mean `{k}`?"))
                        .unwrap_or_default()
                ))
            }
        }
    }
    Ok(out)
}

/// Checks that a path template names only the `allowed` placeholders (`{date}`, …).
fn placeholders(key: &str, template: &str, allowed: &[&str]) -> Result<(), String> {
    for part in template.split('{').skip(1) {
        let name = part.split('}').next().unwrap_or("");
        if !allowed.contains(&name) {
            let names: Vec<String> = allowed.iter().map(|a| format!("{{{a}}}")).collect();
            let list = match names.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => "none".into(),
            };
            return Err(format!("`{key}`: unknown placeholder {{{name}}}; use {list}"));
        }
    }
    Ok(())
}

/// `expect: {path: …, by: …}`, or a list of them.
fn expectations(v: &Value, env: &Env) -> Result<Vec<Expectation>, String> {
    let items = match v {
        Value::Array(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    // Each one is a deadline the daemon keeps all day: counted before any is compiled.
    caps::EXPECT.check(items.len())?;
    let example = "{path: \"reports/{date}.md\", by: \"weekdays at 8:30\"}";
    items
        .iter()
        .map(|item| {
            let Value::Object(map) = item else {
                return Err(type_error("expect", &format!("a map like {example}"), item));
            };
            if let Some(other) = map.keys().find(|k| *k != "path" && *k != "by") {
                return Err(format!(
                    "`expect` has no key `{other}`; it takes `path` and `by`, like {example}"
                ));
            }
            let get = |k: &str| match map.get(k) {
                Some(value) => string(&format!("expect.{k}"), value, env),
                None => Err(format!("`expect` needs `{k}`, like {example}")),
            };
            let (path, by) = (get("path")?, get("by")?);
            placeholders("expect.path", &path, &["date", "role"])?;
            crate::setup::role::context::check_relative(
                &path.replace("{date}", "2026-01-01").replace("{role}", "r"),
            )
            .map_err(|e| format!("`expect.path`: {e}"))?;
            match crate::formats::schedule::ScheduleLine::compile(&by, 0) {
                Ok(Some(line)) => Ok(Expectation { path, by, line }),
                Ok(None) => Err(format!(
                    "`expect.by` \"{by}\" names no time: write one like \"weekdays at 8:30\""
                )),
                Err(e) => Err(format!("`expect.by`: {e}")),
            }
        })
        .collect()
}

/// `approve: {network: ask, slack/conversations_add_message: ask, memory/read_graph: auto}`.
fn approve_map(v: &Value) -> Result<std::collections::BTreeMap<String, crate::base::calls::Mode>, String> {
    use crate::base::calls::Mode;
    let Value::Object(map) = v else {
        return Err(type_error(
            "approve",
            "a map like {network: ask, slack/conversations_add_message: ask}",
            v,
        ));
    };
    caps::APPROVE.check(map.len())?;
    let mut out = std::collections::BTreeMap::new();
    for (key, mode) in map {
        let known = crate::base::calls::Risk::parse(key).is_some()
            || crate::base::calls::is_tabd_tool(key)
            || crate::setup::role::McpAllow::parse(key, 0).is_ok();
        if !known {
            let classes = ["read", "write", "network", "destructive"];
            let hint = did_you_mean(
                key,
                classes
                    .iter()
                    .copied()
                    .chain(crate::base::calls::VAULT_TOOLS.iter().copied())
                    .chain([crate::base::calls::DELEGATE]),
            )
            .map(|k| format!(" — did you mean `{k}`?"))
            .unwrap_or_default();
            return Err(format!(
                "`approve`: `{key}` is neither a risk class (read, write, network, destructive), a tool name, nor server/tool or server/*{hint}"
            ));
        }
        let mode = mode
            .as_str()
            .and_then(Mode::parse)
            .ok_or_else(|| format!("`approve`: `{key}` must be auto, ask or deny (got {mode})"))?;
        out.insert(key.clone(), mode);
    }
    Ok(out)
}

/// " — did you mean `write_file`?" for a misspelt vault tool name, else nothing.
fn tool_hint(name: &str) -> String {
    did_you_mean(
        name,
        crate::base::calls::VAULT_TOOLS
            .iter()
            .copied()
            .chain([crate::base::calls::DELEGATE]),
    )
    .map(|k| format!(" — did you mean `{k}`?"))
    .unwrap_or_default()
}

fn type_error(key: &str, want: &str, got: &Value) -> String {
    format!("`{key}` must be {want} (got {got})")
}

fn string(key: &str, v: &Value, env: &Env) -> Result<String, String> {
    match v {
        Value::String(s) => env.expand(s).map_err(|e| format!("`{key}`: {e}")),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(type_error(key, "text", v)),
    }
}

fn count<T: TryFrom<u64>>(key: &str, v: &Value) -> Result<T, String> {
    let n = v
        .as_u64()
        .ok_or_else(|| type_error(key, "a whole number of 0 or more, like 30", v))?;
    T::try_from(n).map_err(|_| format!("`{key}` is too large (got {n})"))
}

fn dollars(key: &str, v: &Value) -> Result<f64, String> {
    match v.as_f64() {
        Some(d) if d >= 0.0 && d.is_finite() => Ok(d),
        _ => Err(type_error(
            key,
            "an amount in US dollars of 0 or more, like 0.50",
            v,
        )),
    }
}

/// `true`/`false`, and the words people write in Obsidian's Properties: `yes`/`no`, `on`/`off`
/// (YAML 1.1 read them as booleans; the YAML tabd reads, 1.2, reads them as text).
fn boolean(key: &str, v: &Value) -> Result<bool, String> {
    if let Some(b) = v.as_bool() {
        return Ok(b);
    }
    match v.as_str().map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("yes" | "on" | "true") => Ok(true),
        Some("no" | "off" | "false") => Ok(false),
        _ => Err(type_error(key, "true or false (yes or no)", v)),
    }
}

fn duration(key: &str, v: &Value) -> Result<Duration, String> {
    let text = v
        .as_str()
        .ok_or_else(|| type_error(key, "a duration like 2m, 90s or 2h", v))?;
    parse_duration(text).map_err(|e| format!("`{key}`: {e}"))
}

/// Parses `2m`, `90s`, `2h 30m`, `90 min`, `1 hour` (humantime).
fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("\"{text}\" is not a duration ({e}); write one like 2m, 90s or 2h"))
}

/// A list, at most `cap` long (counted before any item is read).
fn list(key: &str, v: &Value, env: &Env, cap: Cap) -> Result<Vec<String>, String> {
    match v {
        Value::Array(items) => {
            cap.check(items.len())?;
            items.iter().map(|i| string(key, i, env)).collect()
        }
        Value::String(_) => Ok(vec![string(key, v, env)?]),
        Value::Null => Ok(Vec::new()),
        _ => Err(type_error(key, "a list, like [risk, comms]", v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::frontmatter::split;

    fn settings(yaml: &str) -> (RoleSettings, Vec<SettingError>) {
        let text = format!("---\n{yaml}\n---\n# R\n");
        let fm = split(&text).unwrap().frontmatter.unwrap();
        parse(&fm, &Env::from_pairs([("MODEL", "m-from-env")]))
    }

    #[test]
    fn every_key_typed() {
        let (s, errors) = settings(
            "model: ${MODEL}\nmax_tokens: 1000\ntemperature: 0.3\nthinking_budget: 2048\n\
             max_tool_calls: 12\nmax_tokens_per_run: 50000\ndaily_token_budget: 100000\n\
             max_runs_per_day: 10\nmin_interval: 5m\nmax_chain_depth: 2\ntimezone: Europe/Lisbon\n\
             enabled: false\nextends: _base\ncan_trigger: [risk]\nwrite_paths:\n  - project/**\n\
             catch_up: all\nstale_after: 3h\nwatch: project/timeline.md\nskip_unchanged: true\n\
             runs_on: laptop",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.model.as_deref(), Some("m-from-env"));
        assert_eq!(s.max_tokens, Some(1000));
        assert_eq!(s.temperature, Some(0.3));
        assert_eq!(s.thinking_budget, Some(2048));
        assert_eq!(s.max_tool_calls, Some(12));
        assert_eq!(s.max_tokens_per_run, Some(50000));
        assert_eq!(s.daily_token_budget, Some(100000));
        assert_eq!(s.max_runs_per_day, Some(10));
        assert_eq!(s.min_interval, Some(Duration::from_secs(300)));
        assert_eq!(s.max_chain_depth, Some(2));
        assert_eq!(s.timezone, Some(chrono_tz::Europe::Lisbon));
        assert_eq!(s.enabled, Some(false));
        assert_eq!(s.extends.as_deref(), Some("_base"));
        assert_eq!(s.can_trigger, ["risk"]);
        assert_eq!(s.write_paths, ["project/**"]);
        assert_eq!(s.catch_up, Some(CatchUp::All));
        assert_eq!(s.stale_after, Some(Duration::from_secs(3 * 3600)));
        assert_eq!(s.watch, ["project/timeline.md"]);
        assert_eq!(s.skip_unchanged, Some(true));
        assert_eq!(s.runs_on.as_deref(), Some("laptop"));
    }

    #[test]
    fn type_errors_name_key_and_line() {
        let (_, errors) = settings(
            "model: m\nmax_tool_calls: thirty\ntemperature: 7\nenabled: yes please\nmin_interval: 5\n\
             timezone: Mars/Base\ncatch_up: sometimes\nmax_tokens: -1\nwatch: {a: 1}",
        );
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7, 8, 9, 10], "{errors:#?}");
        assert!(errors[0]
            .message
            .contains("`max_tool_calls` must be a whole number"));
        assert!(errors[4].message.contains("IANA"));
    }

    #[test]
    fn unknown_key_suggests_the_right_one() {
        let (_, errors) = settings("modle: x");
        assert_eq!(errors[0].line, 2);
        assert!(
            errors[0].message.contains("did you mean `model`"),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn missing_env_var_is_an_error() {
        let (_, errors) = settings("model: ${NOT_SET}");
        assert!(errors[0].message.contains("NOT_SET"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("90 min").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn delegation_settings_are_checked() {
        let (s, errors) = settings(
            "can_delegate_to: [risk]\nmax_delegation_depth: 2\nmax_parallel_delegates: 4\noutput: {schema: s.json, path: \"r/{date}-{role}.md\"}",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.can_delegate_to, ["risk"]);
        assert_eq!(
            (s.max_delegation_depth, s.max_parallel_delegates),
            (Some(2), Some(4))
        );
        assert_eq!(s.output.unwrap().path.as_deref(), Some("r/{date}-{role}.md"));
        for (bad, says) in [
            ("max_delegation_depth: 6", "at most 5"),
            ("max_parallel_delegates: 0", "1 or more"),
            ("output: {schema: s.json, paht: x}", "did you mean `path`"),
            (
                "output: {path: \"r/{day}.md\"}",
                "unknown placeholder {day}; use {date}, {role} or {run_id}",
            ),
            ("output: s.json", "a map like"),
        ] {
            let (_, errors) = settings(bad);
            assert!(errors[0].message.contains(says), "{bad}: {errors:?}");
        }
    }
}
