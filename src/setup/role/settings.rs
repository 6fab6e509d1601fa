//! A role's frontmatter keys, typed and checked, each error at the key's line.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono_tz::Tz;
use serde_json::Value;

use crate::base::calls::Mode;
use crate::base::environment::{Env, ExpandError};
use crate::base::text::did_you_mean;
use crate::formats::frontmatter::{Field, Frontmatter};
use crate::formats::schedule::{parse_tz, PhraseError, UnknownZone};
use crate::setup::config::{Limits, ProviderConfig};
use crate::setup::role::caps::{self, Cap, OverCap};
use crate::setup::role::LoadContext;

/// What to do with scheduled slots missed while tabd was not running (docs/spec.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    #[default]
    Once,
    Skip,
    All,
}

/// The one table of role settings, written as `key: Type, join, default, read;` under the
/// setting's doc (issue 37). From it come `RoleSettings` (one field per line), `KNOWN_KEYS` (in
/// the table's order: did-you-mean and the list of known settings), `apply` (a key → its reader),
/// `RoleSettings::inherit` (each line's join) and, for a default tabd knows, an accessor of the
/// same name that gives the role's value or that default. A setting added here is read, joined
/// through `extends`, known to did-you-mean and given its default at once; docs/roles.md's
/// settings table must list it (`every_setting_is_in_the_docs_and_every_documented_one_is_read`).
///
/// - join: `wins` (field `Option<T>`: the child's value when it has one), `own` (`Option<T>`, never
///   inherited), `union` (a list: the parent's items, then the child's new ones), `by_key` (a map:
///   the child's entries override the parent's one by one), `replaced` (a list: the child's
///   when it has one).
/// - default: `fixed(value)` (accessor `fn key(&self) -> T`), `from(Section.field)` (the config's
///   value: accessor `fn key(&self, from: &Section) -> T`), `from_optional(Section.field)` (the
///   config's, itself optional: `-> Option<T>`), `computed("…")` (decided where the role is
///   whole, said in words here), `none("…")` (unset means what the words say).
/// - read: `fn(key, value, env) -> Result<T, InvalidSetting>`.
macro_rules! role_settings {
    ($(
        $(#[doc = $doc:literal])*
        $key:ident: $ty:ty, $join:ident, $dkind:ident $dval:tt, $read:expr;
    )*) => {
        /// The machine settings of a role (generated from the table in `role_settings!`). Every
        /// key is optional; `None` / empty means "inherit, then use the default".
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct RoleSettings {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = role_settings!(@doc $dkind $dval)]
                pub $key: role_settings!(@field $join $ty),
            )*
        }

        /// Every frontmatter key a role may use, in the table's order.
        pub const KNOWN_KEYS: &[&str] = &[$(stringify!($key)),*];

        /// Reads one frontmatter entry into `s`: the key's own reader, else "unknown setting".
        fn apply(s: &mut RoleSettings, e: &Field, env: &Env) -> Result<(), InvalidSetting> {
            let v = &e.value;
            match e.key.as_str() {
                $(stringify!($key) => {
                    let value: $ty = ($read)(stringify!($key), v, env)?;
                    role_settings!(@set $join s.$key, value);
                })*
                key => return Err(InvalidSetting::Unknown(key.to_string())),
            }
            Ok(())
        }

        impl RoleSettings {
            /// `child` extends `self` (docs/spec.md §3), each setting by its table line's join: the
            /// child's scalars win, lists join (the parent's first), `approve` entries are
            /// overridden one by one, `expect` is the child's when it has one, `extends` is each
            /// file's own.
            pub fn inherit(&mut self, child: &RoleSettings) {
                $(role_settings!(@join $join self.$key, child.$key);)*
            }

            $(role_settings!(@default $key $ty, $dkind $dval);)*
        }
    };

    (@field wins $ty:ty) => { Option<$ty> };
    (@field own $ty:ty) => { Option<$ty> };
    (@field union $ty:ty) => { $ty };
    (@field by_key $ty:ty) => { $ty };
    (@field replaced $ty:ty) => { $ty };

    (@set wins $field:expr, $value:expr) => { $field = Some($value) };
    (@set own $field:expr, $value:expr) => { $field = Some($value) };
    (@set $join:ident $field:expr, $value:expr) => { $field = $value };

    (@join wins $mine:expr, $child:expr) => { wins(&mut $mine, &$child) };
    (@join own $mine:expr, $child:expr) => {};
    (@join union $mine:expr, $child:expr) => { union(&mut $mine, &$child) };
    (@join by_key $mine:expr, $child:expr) => { $mine.extend($child.iter().map(|(k, v)| (k.clone(), *v))) };
    (@join replaced $mine:expr, $child:expr) => {
        if !$child.is_empty() {
            $mine.clone_from(&$child);
        }
    };

    (@doc fixed ($value:expr)) => { concat!("Default: `", stringify!($value), "`.") };
    (@doc from ($section:ident . $field:ident)) => {
        concat!("Default: the config's value (`", stringify!($section), ".", stringify!($field), "`).")
    };
    (@doc from_optional ($section:ident . $field:ident)) => {
        concat!("Default: the config's value, if it has one (`", stringify!($section), ".", stringify!($field), "`).")
    };
    (@doc computed ($words:literal)) => { concat!("Default: ", $words, ".") };
    (@doc none ($words:literal)) => { concat!("Unset: ", $words, ".") };

    (@default $key:ident $ty:ty, fixed ($value:expr)) => {
        #[doc = concat!("`", stringify!($key), "`, else `", stringify!($value), "`.")]
        pub fn $key(&self) -> $ty {
            self.$key.unwrap_or($value)
        }
    };
    (@default $key:ident $ty:ty, from ($section:ident . $field:ident)) => {
        #[doc = concat!("`", stringify!($key), "`, else the config's (`", stringify!($section), ".", stringify!($field), "`).")]
        pub fn $key(&self, from: &$section) -> $ty {
            self.$key.as_ref().unwrap_or(&from.$field).clone()
        }
    };
    (@default $key:ident $ty:ty, from_optional ($section:ident . $field:ident)) => {
        #[doc = concat!("`", stringify!($key), "`, else the config's if it has one (`", stringify!($section), ".", stringify!($field), "`).")]
        pub fn $key(&self, from: &$section) -> Option<$ty> {
            self.$key.or(from.$field)
        }
    };
    (@default $key:ident $ty:ty, computed ($words:literal)) => {};
    (@default $key:ident $ty:ty, none ($words:literal)) => {};
}

role_settings! {
    /// Model for this role.
    model: String, wins, from(ProviderConfig.model), string;
    /// A cheaper model of the same provider asked first at a scheduled run (docs/spec.md §25): no
    /// tool call ends the run `triaged`, a tool call hands it to `model`.
    triage_model: String, wins, none("a scheduled run asks `model` only"), model_name;
    /// Longest answer per model call.
    max_tokens: u32, wins, from(ProviderConfig.max_tokens), count;
    /// 0 to 2.
    temperature: f64, wins, from_optional(ProviderConfig.temperature), temperature;
    /// Extended thinking tokens (Anthropic); 0 = off.
    thinking_budget: u32, wins, from(ProviderConfig.thinking_budget), count;
    /// Tool calls per run before the run is wrapped up.
    max_tool_calls: u32, wins, from(Limits.max_tool_calls), count;
    /// Input + output tokens per run.
    max_tokens_per_run: u64, wins, from(Limits.max_tokens_per_run), count;
    /// US dollars per run.
    max_cost_usd: f64, wins, from_optional(Limits.max_cost_usd), dollars;
    /// Tokens per day for this role.
    daily_token_budget: u64, wins, from(Limits.daily_token_budget), count;
    /// US dollars per day for this role.
    daily_cost_budget_usd: f64, wins, from_optional(Limits.daily_cost_budget_usd), dollars;
    /// Runs per day.
    max_runs_per_day: u32, wins, from(Limits.max_runs_per_day), count;
    /// Least time between two runs not caused by a note the person wrote.
    min_interval: Duration, wins, from(Limits.min_interval), duration;
    /// How long a chain of `trigger_role` notes may get.
    max_chain_depth: u32, wins, from(Limits.max_chain_depth), count;
    /// Time zone of the schedule (IANA name).
    timezone: Tz, wins, from(LoadContext.default_tz), timezone;
    /// Switch the role off without deleting it.
    enabled: bool, wins, fixed(true), boolean;
    /// The role this one inherits from (`_base`, `.md` dropped).
    extends: String, own, none("no parent"), extends;
    /// Roles it may send notes to with `trigger_role`.
    can_trigger: Vec<String>, union, none("any role"), |k, v, env| list(k, v, env, caps::CAN_TRIGGER);
    /// Where it may write (globs).
    write_paths: Vec<String>, union, none("anywhere but protected folders"), |k, v, env| list(k, v, env, caps::WRITE_PATHS);
    /// Missed runs: once, skip or all (docs/spec.md §4).
    catch_up: CatchUp, wins, fixed(CatchUp::Once), catch_up;
    /// With `catch_up: once`, missed runs older than this are forgotten.
    stale_after: Duration, wins, fixed(Duration::from_secs(2 * 3600)), duration;
    /// Notes whose change fires the role.
    watch: Vec<String>, union, none("no note fires it"), |k, v, env| list(k, v, env, caps::WATCH);
    /// Tools taken away even if listed: `server/tool`, `server/*` or a vault tool's name.
    deny_tools: Vec<String>, union, none("nothing taken away"), deny_tools;
    /// A scheduled run is skipped, at zero tokens, when nothing changed since the last one.
    skip_unchanged: bool, wins, computed("on for interval schedules (`every …`), off for clock times (`Role::skip_unchanged`)"), boolean;
    /// Only the tabd on this host runs the role.
    runs_on: String, wins, none("every host"), string;
    /// Risk class, `server/*`, `server/tool` or vault tool → auto/ask/deny (docs/spec.md §15).
    approve: BTreeMap<String, Mode>, by_key, none("read and write auto, network and destructive ask"), approve_map;
    /// `move_file` may move whole folders.
    move_folders: bool, wins, fixed(false), boolean;
    /// Roles this role may hand a task to with `delegate` (docs/spec.md §18).
    can_delegate_to: Vec<String>, union, none("no `delegate` tool"), |k, v, env| list(k, v, env, caps::CAN_DELEGATE_TO);
    /// How deep delegation may go from a run of this role (1: its children cannot delegate).
    max_delegation_depth: u32, wins, fixed(1), delegation_depth;
    /// How many children one `delegate` call runs at once.
    max_parallel_delegates: u32, wins, fixed(3), parallel_delegates;
    /// The contract of the role's final answer.
    output: OutputContract, wins, none("any answer"), output_contract;
    /// What the role must have produced by when (docs/spec.md §22): checked at each deadline.
    expect: Vec<Expectation>, replaced, none("nothing expected"), expectations;
    /// Hook sets of the config (`[hooks.sets.NAME]`) this role runs after the config's own
    /// `[hooks]`, which every role runs (docs/spec.md §28).
    hooks: Vec<String>, union, none("only the config's `[hooks]`"), |k, v, env| list(k, v, env, caps::HOOKS);
    /// A run whose call waits for approval goes on once it is decided.
    resume: bool, wins, fixed(true), boolean;
    /// Every N tool calls the run waits for the person at a checkpoint (docs/spec.md §28).
    checkpoint_every: u32, wins, none("no checkpoint"), checkpoint_every;
    /// With `[cluster]` and no quorum of its servers: skip or run (docs/spec.md §23).
    when_alone: crate::setup::config::cluster::WhenAlone, wins, none("the config's `[cluster] when_alone`"), when_alone;
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

/// `output: {schema: PATH, path: TEMPLATE}` (docs/spec.md §18).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputContract {
    /// A JSON Schema file in the vault the final answer (a JSON object) must satisfy.
    pub schema: Option<String>,
    /// A vault file the final answer is also written to: `{date}`, `{role}`, `{run_id}`.
    pub path: Option<String>,
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
        if let Err(e) = apply(&mut s, entry, env) {
            errors.push(SettingError {
                line: entry.line,
                message: e.to_string(),
            });
        }
    }
    (s, errors)
}

/// `expect`'s example, in its messages.
const EXPECT_EXAMPLE: &str = "{path: \"reports/{date}.md\", by: \"weekdays at 8:30\"}";

/// Why one setting's value cannot be used. The sentence a person reads is its `Display`, made
/// when `parse` puts it at the key's line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidSetting {
    #[error("unknown setting `{0}`{hint} Known settings: {known}. Remove or rename it.", hint = hint(did_you_mean(.0, KNOWN_KEYS.iter().copied())), known = KNOWN_KEYS.join(", "))]
    Unknown(String),
    #[error("`{key}` must be {want} (got {got})")]
    Type {
        key: String,
        want: &'static str,
        got: Value,
    },
    #[error("`{key}`: {source}")]
    Env { key: String, source: ExpandError },
    #[error("`{key}` is too large (got {n})")]
    TooLarge { key: String, n: u64 },
    #[error("`temperature` must be between 0 and 2 (got {0})")]
    Temperature(f64),
    #[error(transparent)]
    Zone(#[from] UnknownZone),
    #[error("`{key}`: {source}")]
    Duration { key: String, source: NotADuration },
    #[error("`catch_up` must be once, skip or all (got \"{0}\")")]
    CatchUp(String),
    #[error("`when_alone` must be skip or run (got \"{0}\"): with [cluster] and no quorum, skip waits, run may double")]
    WhenAlone(String),
    #[error(transparent)]
    OverCap(#[from] OverCap),
    #[error("`deny_tools`: `{0}` is neither a tool name nor server/tool or server/*{hint}; a misspelt name would leave the tool allowed", hint = tool_hint(.0))]
    DenyTool(String),
    #[error("`max_delegation_depth` is at most {MAX_DELEGATION_DEPTH} (got {0}): every level multiplies runs and cost")]
    DelegationDepth(u32),
    #[error("`max_parallel_delegates` must be 1 or more (1: one child at a time)")]
    NoParallelDelegates,
    #[error("`checkpoint_every` must be a whole number of 1 or more, like 10 (got {0}); leave it out for no checkpoint")]
    CheckpointEvery(Value),
    #[error("`output` has no key `{0}`{hint}; it takes `schema` (a JSON Schema file) and `path` (where the answer is written)", hint = hint(did_you_mean(.0, ["schema", "path"].into_iter())))]
    OutputKey(String),
    #[error("`{key}`: unknown placeholder {{{name}}}; use {list}", list = one_of(allowed))]
    Placeholder {
        key: &'static str,
        name: String,
        allowed: &'static [&'static str],
    },
    #[error("`expect` has no key `{0}`; it takes `path` and `by`, like {EXPECT_EXAMPLE}")]
    ExpectKey(String),
    #[error("`expect` needs `{0}`, like {EXPECT_EXAMPLE}")]
    ExpectNeeds(&'static str),
    /// `check_relative`'s reason for the path.
    #[error("`expect.path`: {0}")]
    ExpectPath(crate::setup::role::context::BadPath),
    #[error("`expect.by` \"{0}\" names no time: write one like \"weekdays at 8:30\"")]
    ExpectNoTime(String),
    #[error("`expect.by`: {0}")]
    ExpectBy(#[source] PhraseError),
    #[error("`approve`: `{0}` is neither a risk class (read, write, network, destructive), person_notes, a tool name, nor server/tool or server/*{hint}", hint = hint(did_you_mean(.0, APPROVE_WORDS.iter().copied().chain(crate::base::calls::VAULT_TOOLS.iter().copied()).chain([crate::base::calls::DELEGATE]))))]
    ApproveKey(String),
    #[error("`approve`: `{key}` must be auto, ask or deny (got {got})")]
    ApproveMode { key: String, got: Value },
}

/// A text that is not a duration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{text}\" is not a duration ({source}); write one like 2m, 90s or 2h")]
pub struct NotADuration {
    text: String,
    source: humantime::DurationError,
}

/// The risk classes `approve` takes, for did-you-mean.
const APPROVE_WORDS: [&str; 5] = [
    "read",
    "write",
    "network",
    "destructive",
    crate::base::calls::PERSON_NOTES,
];

/// " — did you mean `model`?", or nothing.
fn hint(suggestion: Option<&str>) -> String {
    suggestion
        .map(|k| format!(" — did you mean `{k}`?"))
        .unwrap_or_default()
}

/// `{date}`, `{date} or {role}`, `{date}, {role} or {run_id}`.
fn one_of(allowed: &[&str]) -> String {
    let names: Vec<String> = allowed.iter().map(|a| format!("{{{a}}}")).collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "none".into(),
    }
}

/// " — did you mean `write_file`?" for a misspelt vault tool name, else nothing.
fn tool_hint(name: &str) -> String {
    hint(did_you_mean(
        name,
        crate::base::calls::VAULT_TOOLS
            .iter()
            .copied()
            .chain([crate::base::calls::DELEGATE]),
    ))
}

fn temperature(key: &str, v: &Value, _env: &Env) -> Result<f64, InvalidSetting> {
    let t = v
        .as_f64()
        .ok_or_else(|| type_error(key, "a number from 0 to 2, like 0.3", v))?;
    if !(0.0..=2.0).contains(&t) {
        return Err(InvalidSetting::Temperature(t));
    }
    Ok(t)
}

fn timezone(key: &str, v: &Value, env: &Env) -> Result<Tz, InvalidSetting> {
    Ok(parse_tz(&string(key, v, env)?)?)
}

/// A model's name as its provider spells it (`claude-haiku-4-5`, `qwen2.5-coder:1.5b`): one word
/// of printable characters, at most 200 bytes.
fn model_name(key: &str, v: &Value, env: &Env) -> Result<String, InvalidSetting> {
    let name = string(key, v, env)?;
    let fits =
        !name.is_empty() && name.len() <= 200 && !name.chars().any(|c| c.is_whitespace() || c.is_control());
    if !fits {
        return Err(type_error(
            key,
            "a model name of one word, like claude-haiku-4-5",
            v,
        ));
    }
    Ok(name)
}

/// `extends: _base` or `_base.md`: the parent's name.
fn extends(key: &str, v: &Value, env: &Env) -> Result<String, InvalidSetting> {
    Ok(string(key, v, env)?.trim_end_matches(".md").to_string())
}

fn when_alone(
    key: &str,
    v: &Value,
    env: &Env,
) -> Result<crate::setup::config::cluster::WhenAlone, InvalidSetting> {
    let text = string(key, v, env)?;
    crate::setup::config::cluster::WhenAlone::parse(&text).map_err(|_| InvalidSetting::WhenAlone(text))
}

fn catch_up(key: &str, v: &Value, env: &Env) -> Result<CatchUp, InvalidSetting> {
    Ok(match string(key, v, env)?.as_str() {
        "once" => CatchUp::Once,
        "skip" => CatchUp::Skip,
        "all" => CatchUp::All,
        other => return Err(InvalidSetting::CatchUp(other.to_string())),
    })
}

/// Each item a vault tool's name, `server/tool` or `server/*`: a misspelt one would leave the
/// tool allowed.
fn deny_tools(key: &str, v: &Value, env: &Env) -> Result<Vec<String>, InvalidSetting> {
    let items = list(key, v, env, caps::DENY_TOOLS)?;
    if let Some(bad) = items
        .iter()
        .find(|i| !crate::base::calls::is_tabd_tool(i) && crate::setup::role::McpAllow::parse(i, 0).is_err())
    {
        return Err(InvalidSetting::DenyTool(bad.clone()));
    }
    Ok(items)
}

fn delegation_depth(key: &str, v: &Value, env: &Env) -> Result<u32, InvalidSetting> {
    let n: u32 = count(key, v, env)?;
    if n > MAX_DELEGATION_DEPTH {
        return Err(InvalidSetting::DelegationDepth(n));
    }
    Ok(n)
}

fn parallel_delegates(key: &str, v: &Value, env: &Env) -> Result<u32, InvalidSetting> {
    let n: u32 = count(key, v, env)?;
    if n == 0 {
        return Err(InvalidSetting::NoParallelDelegates);
    }
    Ok(n)
}

/// `checkpoint_every: N`: N tool calls between two checkpoints, at least 1.
fn checkpoint_every(_key: &str, v: &Value, _env: &Env) -> Result<u32, InvalidSetting> {
    v.as_u64()
        .filter(|n| *n >= 1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| InvalidSetting::CheckpointEvery(v.clone()))
}

/// `output: {schema: schemas/risk.json, path: "reports/{date}-{role}.md"}`.
fn output_contract(key: &str, v: &Value, env: &Env) -> Result<OutputContract, InvalidSetting> {
    let Value::Object(map) = v else {
        return Err(type_error(
            key,
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
            other => return Err(InvalidSetting::OutputKey(other.to_string())),
        }
    }
    Ok(out)
}

/// Checks that a path template names only the `allowed` placeholders (`{date}`, …).
fn placeholders(
    key: &'static str,
    template: &str,
    allowed: &'static [&'static str],
) -> Result<(), InvalidSetting> {
    for part in template.split('{').skip(1) {
        let name = part.split('}').next().unwrap_or("");
        if !allowed.contains(&name) {
            return Err(InvalidSetting::Placeholder {
                key,
                name: name.to_string(),
                allowed,
            });
        }
    }
    Ok(())
}

/// `expect: {path: …, by: …}`, or a list of them.
fn expectations(key: &str, v: &Value, env: &Env) -> Result<Vec<Expectation>, InvalidSetting> {
    let items = match v {
        Value::Array(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    // Each one is a deadline the daemon keeps all day: counted before any is compiled.
    caps::EXPECT.check(items.len())?;
    items.iter().map(|item| expectation(key, item, env)).collect()
}

/// One `{path: …, by: …}`.
fn expectation(key: &str, item: &Value, env: &Env) -> Result<Expectation, InvalidSetting> {
    let Value::Object(map) = item else {
        return Err(type_error(
            key,
            "a map like {path: \"reports/{date}.md\", by: \"weekdays at 8:30\"}",
            item,
        ));
    };
    if let Some(other) = map.keys().find(|k| *k != "path" && *k != "by") {
        return Err(InvalidSetting::ExpectKey(other.clone()));
    }
    let get = |k: &'static str| match map.get(k) {
        Some(value) => string(&format!("expect.{k}"), value, env),
        None => Err(InvalidSetting::ExpectNeeds(k)),
    };
    let (path, by) = (get("path")?, get("by")?);
    placeholders("expect.path", &path, &["date", "role"])?;
    crate::setup::role::context::check_relative(&path.replace("{date}", "2026-01-01").replace("{role}", "r"))
        .map_err(InvalidSetting::ExpectPath)?;
    match crate::formats::schedule::ScheduleLine::compile(&by, 0) {
        Ok(Some(line)) => Ok(Expectation { path, by, line }),
        Ok(None) => Err(InvalidSetting::ExpectNoTime(by)),
        Err(e) => Err(InvalidSetting::ExpectBy(e)),
    }
}

/// `approve: {network: ask, slack/conversations_add_message: ask, memory/read_graph: auto}`.
fn approve_map(key: &str, v: &Value, _env: &Env) -> Result<BTreeMap<String, Mode>, InvalidSetting> {
    let Value::Object(map) = v else {
        return Err(type_error(
            key,
            "a map like {network: ask, slack/conversations_add_message: ask}",
            v,
        ));
    };
    caps::APPROVE.check(map.len())?;
    let mut out = BTreeMap::new();
    for (key, mode) in map {
        let known = crate::base::calls::Risk::parse(key).is_some()
            || key == crate::base::calls::PERSON_NOTES
            || crate::base::calls::is_tabd_tool(key)
            || crate::setup::role::McpAllow::parse(key, 0).is_ok();
        if !known {
            return Err(InvalidSetting::ApproveKey(key.clone()));
        }
        let mode = mode
            .as_str()
            .and_then(Mode::parse)
            .ok_or_else(|| InvalidSetting::ApproveMode {
                key: key.clone(),
                got: mode.clone(),
            })?;
        out.insert(key.clone(), mode);
    }
    Ok(out)
}

fn type_error(key: &str, want: &'static str, got: &Value) -> InvalidSetting {
    InvalidSetting::Type {
        key: key.to_string(),
        want,
        got: got.clone(),
    }
}

fn string(key: &str, v: &Value, env: &Env) -> Result<String, InvalidSetting> {
    match v {
        Value::String(s) => env.expand(s).map_err(|source| InvalidSetting::Env {
            key: key.to_string(),
            source,
        }),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(type_error(key, "text", v)),
    }
}

fn count<T: TryFrom<u64>>(key: &str, v: &Value, _env: &Env) -> Result<T, InvalidSetting> {
    let n = v
        .as_u64()
        .ok_or_else(|| type_error(key, "a whole number of 0 or more, like 30", v))?;
    T::try_from(n).map_err(|_| InvalidSetting::TooLarge {
        key: key.to_string(),
        n,
    })
}

fn dollars(key: &str, v: &Value, _env: &Env) -> Result<f64, InvalidSetting> {
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
fn boolean(key: &str, v: &Value, _env: &Env) -> Result<bool, InvalidSetting> {
    if let Some(b) = v.as_bool() {
        return Ok(b);
    }
    match v.as_str().map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("yes" | "on" | "true") => Ok(true),
        Some("no" | "off" | "false") => Ok(false),
        _ => Err(type_error(key, "true or false (yes or no)", v)),
    }
}

fn duration(key: &str, v: &Value, _env: &Env) -> Result<Duration, InvalidSetting> {
    let text = v
        .as_str()
        .ok_or_else(|| type_error(key, "a duration like 2m, 90s or 2h", v))?;
    parse_duration(text).map_err(|source| InvalidSetting::Duration {
        key: key.to_string(),
        source,
    })
}

/// Parses `2m`, `90s`, `2h 30m`, `90 min`, `1 hour` (humantime).
fn parse_duration(text: &str) -> Result<Duration, NotADuration> {
    humantime::parse_duration(text.trim()).map_err(|source| NotADuration {
        text: text.to_string(),
        source,
    })
}

/// A list, at most `cap` long (counted before any item is read).
fn list(key: &str, v: &Value, env: &Env, cap: Cap) -> Result<Vec<String>, InvalidSetting> {
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

    /// `checkpoint_every` is a whole number of 1 or more; anything else is an error at its line.
    #[test]
    fn checkpoint_every_is_one_or_more() {
        let (s, errors) = settings("checkpoint_every: 3");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.checkpoint_every, Some(3));
        for bad in [
            "checkpoint_every: 0",
            "checkpoint_every: -1",
            "checkpoint_every: \"x\"",
            "checkpoint_every: 2.5",
        ] {
            let (s, errors) = settings(&format!("model: m\n{bad}"));
            assert_eq!(s.checkpoint_every, None, "{bad}");
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].line, 3, "{bad}: {errors:?}");
            assert!(
                errors[0]
                    .message
                    .starts_with("`checkpoint_every` must be a whole number of 1 or more"),
                "{bad}: {errors:?}"
            );
        }
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
