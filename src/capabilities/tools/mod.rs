//! The vault tools of docs/spec.md §8 and the registry that checks and runs them.
//!
//! The harness is authoritative: a call to a tool the role does not list, input that does not
//! fit the tool's schema, or a path the policy refuses becomes an error *result* for the model,
//! never a panic and never an effect on disk.

mod agent;
pub mod delegate;
mod files;
pub mod pages;

pub use files::{changed_paths, span_read, MAX_WRITE_BYTES};

use chrono::DateTime;
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::base::calls::{Risk, ToolResult, ToolSpec};
use crate::base::vault::{Vault, VaultError};
use crate::records::access::AccessPolicy;
use crate::setup::role::{Role, RoleSet};

/// Everything a tool call may use.
pub struct ToolContext<'a> {
    pub vault: &'a Vault,
    pub role: &'a Role,
    pub roles: &'a RoleSet,
    pub policy: &'a AccessPolicy,
    /// Chain depth of the notes that triggered this run (0 for a scheduled run).
    pub hops: u32,
    pub max_chain_depth: u32,
    /// Now, in the role's time zone.
    pub now: DateTime<Tz>,
    /// Where the run keeps each file's state before it first changes it (`None`: not journaled,
    /// e.g. in unit tests).
    pub journal: Option<&'a crate::records::journal::RunJournal>,
    /// Whose each file is (docs/spec.md §26), so reads and listings can say which notes are the
    /// person's before the model tries to change one (`None`: not said).
    pub authorship: Option<&'a crate::records::authorship::Authorship>,
}

impl ToolContext<'_> {
    /// Call before changing `path` (a real path, after the access check): its prior state goes
    /// into the run's journal, so the change can be undone. A change that could not be journaled
    /// does not happen.
    /// A file over what the journal keeps of one is not changed: the model is told why (the run
    /// goes on).
    pub fn before_change(&self, path: &crate::base::vault::VaultPath) -> Result<(), ToolError> {
        match self.journal {
            Some(j) => j.before_change(path).map_err(|e| match e {
                VaultError::TooLarge { size, cap, .. } => {
                    ToolError::Refused(crate::records::journal::too_large_to_keep(path, size, cap))
                }
                e => ToolError::Fatal(format!("cannot keep {path} in the undo journal: {e}")),
            }),
            None => Ok(()),
        }
    }
}

impl ToolContext<'_> {
    /// Whether changing `path` (a real path) would wait for the person's approval: it is their
    /// note and this role was not granted their notes. Unknown (no record, a read failing) counts
    /// as theirs.
    pub fn waits_for_person(&self, path: &crate::base::vault::VaultPath) -> bool {
        use crate::records::authorship::Whose;
        let Some(a) = self.authorship else {
            return false;
        };
        self.policy.person_note_mode(path) != crate::base::calls::Mode::Auto
            && self.policy.check_write(self.vault, path).is_ok()
            && !matches!(a.whose(path), Ok(Whose::Tabds | Whose::Absent))
    }

    /// Like `before_change`, for an append to `path` whose current bytes are `prior` (`None`: it
    /// does not exist): the journal keeps their length and digest, not a copy.
    pub fn before_append(
        &self,
        path: &crate::base::vault::VaultPath,
        prior: Option<&[u8]>,
    ) -> Result<(), ToolError> {
        match self.journal {
            Some(j) => j
                .before_append(path, prior)
                .map_err(|e| ToolError::Fatal(format!("cannot keep {path} in the undo journal: {e}"))),
            None => Ok(()),
        }
    }
}

/// Why a call did nothing. Every variant but `Fatal` goes back to the model as its result;
/// `Fatal` (the vault's storage failing: disk full, read-only, I/O errors) ends the run, since no
/// model action can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("{0}")]
    Failed(String),
    #[error("the vault cannot be written: {0}")]
    Fatal(String),
}

impl From<VaultError> for ToolError {
    fn from(e: VaultError) -> Self {
        match e {
            VaultError::Refused(why) => Self::Refused(why),
            VaultError::Storage(why) => Self::Fatal(why),
            other => Self::Failed(other.to_string()),
        }
    }
}

/// A tool call that must end the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FatalToolError(pub String);

/// What each tool provides.
trait Tool: Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn risk(&self) -> Risk;
    fn schema(&self) -> Value;
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError>;
}

/// The JSON Schema of `T`, shaped for model APIs (no `$schema`/`title` noise) and for strict
/// validators: schemars's own formats (`uint`, `int64` …) are not JSON Schema's and make Ajv
/// and other strict clients reject the whole tool; the ranges they mean stay as `minimum`.
fn schema_of<T: JsonSchema>() -> Value {
    let mut value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    strip_nonstandard_formats(&mut value);
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
    }
    value
}

/// Removes `format` values JSON Schema does not define, everywhere in `schema`.
fn strip_nonstandard_formats(schema: &mut Value) {
    const STANDARD: &[&str] = &[
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ];
    match schema {
        Value::Object(map) => {
            let odd = map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD.contains(&f));
            if odd {
                map.remove("format");
            }
            map.values_mut().for_each(strip_nonstandard_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nonstandard_formats),
        _ => {}
    }
}

/// Deserializes `input` into the tool's argument struct; a mismatch is an error for the model.
fn args<T: DeserializeOwned>(input: &Value) -> Result<T, ToolError> {
    if !input.is_object() {
        return Err(ToolError::InvalidInput(format!(
            "expected a JSON object of arguments, got {input}"
        )));
    }
    serde_json::from_value(input.clone()).map_err(|e| ToolError::InvalidInput(e.to_string()))
}

static TOOLS: &[&dyn Tool] = &[
    &files::ReadFile,
    &files::ListFiles,
    &files::SearchFiles,
    &files::WriteFile,
    &files::AppendFile,
    &files::MoveFile,
    &agent::TriggerRole,
    &agent::Remember,
];

fn find(name: &str) -> Option<&'static dyn Tool> {
    TOOLS.iter().copied().find(|t| t.name() == name)
}

/// Every tool's spec, built once (schema generation is not free and never changes).
fn cached_specs() -> &'static [ToolSpec] {
    static SPECS: std::sync::OnceLock<Vec<ToolSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        TOOLS
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.schema(),
            })
            .collect()
    })
}

/// The specs of the vault tools `role` may call, in the order of docs/spec.md §8.
pub fn specs_for(role: &Role) -> Vec<ToolSpec> {
    cached_specs()
        .iter()
        .filter(|s| role.has_tool(&s.name))
        .cloned()
        .collect()
}

/// All vault tool specs.
pub fn all_specs() -> Vec<ToolSpec> {
    cached_specs().to_vec()
}

/// The risk class of vault tool `name` (docs/spec.md §15), if it is one.
pub fn vault_risk(name: &str) -> Option<Risk> {
    find(name).map(|t| t.risk())
}

/// What vault tool `name` does, as the model is told (for approval notes).
pub fn vault_description(name: &str) -> Option<&'static str> {
    find(name).map(|t| t.description())
}

/// Why a role may not call `name`, which it does not list: one text wherever it is refused.
/// `tools`: the names it may call.
pub fn not_listed(name: &str, role: &Role, tools: &[&str]) -> String {
    format!(
        "this role may not use `{name}`; its tools are: {} (a person can add it under ## Tools in {})",
        tools.join(", "),
        role.path.display()
    )
}

/// Runs one vault tool call. Never panics on model input; an `Err` means the run cannot go on
/// (see `ToolError::Fatal`). The harness decides whether the call may run at all.
pub fn execute(ctx: &ToolContext<'_>, name: &str, input: &Value) -> Result<ToolResult, FatalToolError> {
    let result = match find(name) {
        None => Err(ToolError::Refused(format!(
            "there is no tool named `{name}`; your tools are: {}",
            ctx.role.tools.join(", ")
        ))),
        Some(_) if !ctx.role.has_tool(name) => {
            let tools: Vec<&str> = ctx.role.tools.iter().map(String::as_str).collect();
            Err(ToolError::Refused(not_listed(name, ctx.role, &tools)))
        }
        Some(tool) => tool.call(ctx, input),
    };
    match result {
        Ok(r) => Ok(r),
        Err(ToolError::Fatal(why)) => Err(FatalToolError(why)),
        Err(e) => Ok(ToolResult::error(e.to_string())),
    }
}

/// Writes a run's final answer to the note its role's `output.path` names (docs/spec.md §18): the
/// `write_file` tool's checks (`write_paths`, protected folders, size), without the role having to
/// list `write_file` — the person named the note, the model only wrote the text.
pub fn write_answer(ctx: &ToolContext<'_>, path: &str, answer: &str) -> Result<ToolResult, FatalToolError> {
    let input = serde_json::json!({ "path": path, "content": answer });
    match files::WriteFile.call(ctx, &input) {
        Ok(r) => Ok(r),
        Err(ToolError::Fatal(why)) => Err(FatalToolError(why)),
        Err(e) => Ok(ToolResult::error(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
