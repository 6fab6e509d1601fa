//! The vocabulary every layer shares about tool calls: what a tool is offered as (`ToolSpec`),
//! how much harm a call can do (`Risk`), what the person decided for such calls (`Mode`), what a
//! call returns (`ToolResult`) and how the run record keeps it (`ToolCallRecord`, `Change`).
//! Plain data, no behaviour beyond naming: the tools, the harness and the logs all speak it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The vault tools of docs/spec.md §8, by name (the `tools` module implements each; a test keeps the
/// two lists equal).
pub const VAULT_TOOLS: &[&str] = &[
    "read_file",
    "list_files",
    "search_files",
    "write_file",
    "append_file",
    "move_file",
    "trigger_role",
    "remember",
];

/// The tool that hands a task to another role and returns its answer (docs/spec.md §18). Not a vault
/// tool: a run of another role does the work. Offered to roles with `can_delegate_to`.
pub const DELEGATE: &str = "delegate";

/// The `approve` entry for changes to the person's notes (files tabd did not make, docs/spec.md §26):
/// `ask` by default; `auto` is the person's grant, `deny` refuses such changes outright.
pub const PERSON_NOTES: &str = "person_notes";

/// The vault tools that change files a role names (not tabd's own: memory, inboxes).
pub const CHANGING_TOOLS: &[&str] = &["write_file", "append_file", "move_file"];

/// A tool tabd itself provides (`deny_tools` and `approve` may name it).
pub fn is_tabd_tool(name: &str) -> bool {
    VAULT_TOOLS.contains(&name) || name == DELEGATE
}

/// A tool as the model is offered it: its name, what it does, and the JSON Schema of its input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// How much harm a tool call can do (docs/spec.md §15): what the `approve` map decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads only.
    Read,
    /// Changes the vault.
    Write,
    /// Reaches outside the vault (an MCP tool that is not read-only).
    Network,
    /// Can destroy something outside the vault (an MCP tool marked destructive).
    Destructive,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Network => "network",
            Self::Destructive => "destructive",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "network" => Some(Self::Network),
            "destructive" => Some(Self::Destructive),
            _ => None,
        }
    }
}

/// A note or file a tool changed, for the run log's **Changed** line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Written,
    Appended,
    Moved,
    Triggered,
    Remembered,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Appended => "appended",
            Self::Moved => "moved",
            Self::Triggered => "triggered",
            Self::Remembered => "remembered",
        }
    }
}

/// One tool call as the run record keeps it (docs/spec.md §9 `tool_calls`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub name: String,
    pub input: Value,
    pub ok: bool,
    pub error: Option<String>,
    /// Bytes read or written.
    pub bytes: u64,
    /// The MCP server that ran it (docs/spec.md §14); absent for vault tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The approval note the call was queued in (docs/spec.md §15); absent when it ran at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

/// What a call returns: text for the model, and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub text: String,
    pub ok: bool,
    pub bytes: u64,
    pub changes: Vec<Change>,
    /// The call may or may not have happened (a timeout, a server that died mid-call): never
    /// "failed", which would invite a retry of something that may have been done.
    pub unknown: bool,
    /// The child's sandbox refused what the call needed (a sentence naming the path and the
    /// grant to add): the person may grant it and approve the call again.
    pub sandbox: Option<String>,
    /// Lines for the run's daily section beside the call (what tabd moved aside after it).
    pub notes: Vec<String>,
}

impl ToolResult {
    pub fn ok(text: String, bytes: u64, changes: Vec<Change>) -> Self {
        Self {
            text,
            ok: true,
            bytes,
            changes,
            unknown: false,
            sandbox: None,
            notes: Vec::new(),
        }
    }

    pub fn error(text: String) -> Self {
        Self {
            text,
            ok: false,
            bytes: 0,
            changes: Vec::new(),
            unknown: false,
            sandbox: None,
            notes: Vec::new(),
        }
    }

    /// The same failure, told that the sandbox caused it: the sentence is added to the text.
    pub fn refused_by_sandbox(mut self, sentence: String) -> Self {
        self.text = format!("{}\n(tabd: {sentence})", self.text);
        self.sandbox = Some(sentence);
        self
    }

    /// A call whose outcome cannot be known: it may have happened.
    pub fn unknown(text: String) -> Self {
        Self {
            unknown: true,
            ..Self::error(text)
        }
    }
}

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Runs at once.
    Auto,
    /// Becomes an approval note; runs only when the person approves it.
    Ask,
    /// Refused; the model is told.
    Deny,
}

impl Mode {
    /// The stricter of two modes (deny over ask over auto).
    pub fn stricter(self, other: Mode) -> Mode {
        match (self, other) {
            (Self::Deny, _) | (_, Self::Deny) => Self::Deny,
            (Self::Ask, _) | (_, Self::Ask) => Self::Ask,
            _ => Self::Auto,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "auto" => Some(Self::Auto),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// The run record's view of a finished call.
pub fn record_of(name: &str, input: &Value, result: &ToolResult, server: Option<&str>) -> ToolCallRecord {
    ToolCallRecord {
        name: name.to_string(),
        input: input.clone(),
        ok: result.ok,
        error: (!result.ok).then(|| result.text.clone()),
        bytes: result.bytes,
        server: server.map(str::to_string),
        approval: None,
    }
}
