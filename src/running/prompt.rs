//! What one run sends the model (docs/spec.md §7.1), in three parts ordered for prompt caching:
//! 1. `system` — identity, mission, goals, the THINK step, rules, preferences, memory (stable);
//! 2. `context` — the role's context files with paths and modification times (cached while
//!    unchanged);
//! 3. `trigger` — now, why this run fired, what changed since the last run, the trigger notes.
//!
//! The "changed since your last run" list sits in part 3 rather than before the files: it
//! differs every run, and anything before the files would stop them being read from cache.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::base::calls::ToolSpec;
use crate::base::text::thousands;
use crate::base::trigger::{Trigger, TriggerKind};
use crate::base::vault::layout::Layout;
use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::capabilities::provider::{Block, Message, Request};
use crate::records::access::AccessPolicy;
use crate::records::context::{self, Loaded, Resolved};
use crate::records::inbox::Note;
use crate::records::runlog::NoteTruncated;
use crate::setup::config::{Config, ContextConfig};
use crate::setup::role::Role;

/// The think-then-act instruction of docs/spec.md §7, verbatim.
pub const THINK: &str = "Before taking any action, THINK:
1. What has changed since the last run? (check inbox, compare context)
2. What needs attention right now?
3. What is the most valuable action you can take this run?

Then act on your reasoning. Be efficient — do only what matters, then stop.";

/// Everything one run sends, before it becomes a provider request.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub system: String,
    pub context: String,
    pub trigger: String,
    pub tools: Vec<ToolSpec>,
    /// Content hashes of the memory files and every context file found, for the next run's
    /// change list and for `skip_unchanged`.
    pub hashes: BTreeMap<String, String>,
    /// Context files listed in an index instead of included, and why.
    pub indexed: Vec<(String, String)>,
    pub missing: Vec<String>,
    pub truncated: Vec<String>,
    /// Trigger notes larger than one prompt: shown in part, with how to read the rest.
    pub notes_truncated: Vec<NoteTruncated>,
    /// The skills the role lists that this prompt leaves out, and why: lines for the run's
    /// daily section.
    pub skills_left_out: Vec<String>,
}

pub struct PromptInput<'a> {
    pub vault: &'a Vault,
    pub role: &'a Role,
    pub config: &'a Config,
    /// Hashes from the last successful run; `None` on the first run.
    pub previous: Option<&'a BTreeMap<String, String>>,
    pub now: DateTime<Utc>,
    pub trigger: &'a Trigger,
    pub notes: &'a [Note],
    pub tools: Vec<ToolSpec>,
}

/// The memory files every run of `role` reads, in the order the system prompt shows them.
pub fn memory_files(layout: &Layout, role: &Role) -> [(String, String); 2] {
    let (global, own) = (layout.memory(), layout.role_memory(&role.name));
    [
        (format!("Memory ({global} — shared by all roles)"), global),
        (format!("Your memory ({own})"), own),
    ]
}

/// Cuts `text` to at most `max` bytes at a char boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    &text[..crate::base::text::floor_boundary(text, max)]
}

fn section(out: &mut String, title: &str, body: &str) {
    if !body.trim().is_empty() {
        out.push_str(&format!("\n\n## {title}\n{}", body.trim()));
    }
}

fn bullets(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("- {}", i.replace('\n', "\n  ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Builds the prompt. Never fails on a missing or unreadable context file: it is listed.
pub fn build(input: &PromptInput<'_>) -> Prompt {
    let role = input.role;
    let cfg = &input.config.context;
    let mut hashes = BTreeMap::new();
    let policy = AccessPolicy::for_role(role);
    let (system, skills_left_out) = system_prompt(input.vault, role, &policy, cfg, &mut hashes);
    let resolved = context::resolve(input.vault, &policy, &role.context);
    let block = context_block(input.vault, role, &resolved, cfg, &mut hashes);
    let mut missing = resolved.missing.clone();
    missing.extend(block.vanished.iter().cloned());
    let (trigger, notes_truncated) = this_run(input, &hashes, &missing, &block.truncated);
    Prompt {
        system,
        context: block.text,
        trigger,
        tools: input.tools.clone(),
        hashes,
        indexed: block.indexed,
        missing,
        truncated: block.truncated,
        notes_truncated,
        skills_left_out,
    }
}

/// Identity, mission, goals, THINK, rules, the project's rules (`AGENTS.md`), preferences,
/// unknown sections, the skills and both memories; and the skills left out, and why.
fn system_prompt(
    vault: &Vault,
    role: &Role,
    policy: &AccessPolicy,
    cfg: &ContextConfig,
    hashes: &mut BTreeMap<String, String>,
) -> (String, Vec<String>) {
    let mut system = format!("You are the {} for this project.", role.display_name);
    if let Some(m) = &role.mission {
        section(&mut system, "Mission", m);
    }
    section(&mut system, "Goals", &bullets(&role.goals));
    section(&mut system, "How to work", THINK);
    section(&mut system, "Rules", &bullets(&role.rules));
    if let Some((body, hash)) = project::agents_md(vault, policy, cfg.max_file_bytes) {
        section(&mut system, project::AGENTS_HEADING, &body);
        if !hash.is_empty() {
            hashes.insert(crate::base::vault::layout::AGENTS_MD.to_string(), hash);
        }
    }
    if let Some(p) = &role.preferences {
        section(&mut system, "User Preferences", p);
    }
    for (heading, body) in &role.extra {
        section(&mut system, heading, body);
    }
    let (skills, left_out) = project::skills_listing(vault, role);
    if let Some(listing) = skills {
        section(&mut system, "Skills", &listing);
    }
    for (title, path) in memory_files(vault.layout(), role) {
        let Ok(p) = VaultPath::parse(&path, false) else {
            continue;
        };
        let Ok(loaded) = context::load(vault, &p) else {
            continue;
        };
        hashes.insert(path.clone(), loaded.hash.clone());
        let shown = cut(&loaded.text, cfg.max_file_bytes);
        let mut body = shown.to_string();
        if shown.len() < loaded.text.len() {
            body.push_str(&format!(
                "\n[… memory truncated at {} bytes; read_file {path} for the rest]",
                thousands(shown.len() as u64)
            ));
        }
        section(&mut system, &title, &body);
    }
    (system, left_out)
}

/// The context files as the prompt shows them, and what was left out.
#[derive(Debug, Default)]
struct ContextBlock {
    text: String,
    indexed: Vec<(String, String)>,
    truncated: Vec<String>,
    /// Resolved but gone (or unreadable as missing) by the time it was read.
    vanished: Vec<String>,
}

/// One file's fate in the context block.
enum Shown {
    Full(Loaded),
    Index(Loaded, Indexed),
}

/// Why a file is listed in the index instead of shown.
#[derive(Debug, Clone, PartialEq)]
enum Indexed {
    /// Its `status` says it is finished (`closed`, `done`, …): the index line shows the status.
    Closed(String),
    /// Newer notes filled its entry's share of `max_context_bytes` (the share, in bytes).
    Crowded(usize),
}

impl std::fmt::Display for Indexed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed(status) => write!(f, "status: {status}"),
            Self::Crowded(share) => write!(
                f,
                "older than the notes that fill this entry's share ({} bytes) of max_context_bytes",
                thousands(*share as u64)
            ),
        }
    }
}

fn context_block(
    vault: &Vault,
    role: &Role,
    resolved: &Resolved,
    cfg: &ContextConfig,
    hashes: &mut BTreeMap<String, String>,
) -> ContextBlock {
    let memories: Vec<String> = memory_files(vault.layout(), role)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let mut block = ContextBlock::default();
    let mut groups: Vec<(String, bool, Vec<Loaded>)> = Vec::new();
    let mut errors: Vec<(VaultPath, VaultError)> = Vec::new();
    for g in &resolved.groups {
        let mut loaded = Vec::new();
        for path in g
            .files
            .iter()
            .filter(|p| !memories.iter().any(|m| m == p.as_str()))
        {
            match context::load(vault, path) {
                Ok(l) => {
                    hashes.insert(path.as_str().to_string(), l.hash.clone());
                    loaded.push(l);
                }
                Err(VaultError::NotFound(_)) => block.vanished.push(path.as_str().to_string()),
                Err(e) => errors.push((path.clone(), e)),
            }
        }
        if !loaded.is_empty() {
            groups.push((g.entry.clone(), g.many, loaded));
        }
    }
    let plan = plan_shares(groups, cfg);
    let tz = role.schedule.tz;
    // Sized up front: growing a 400 KiB string by doubling copies it again and faults in pages.
    let shown_bytes: usize = plan
        .iter()
        .flat_map(|(_, shown)| shown)
        .map(|s| match s {
            Shown::Full(l) => l.text.len().min(cfg.max_file_bytes) + 160,
            Shown::Index(..) => 200,
        })
        .sum();
    block
        .text
        .reserve(shown_bytes.min(cfg.max_context_bytes + 64 * 1024) + 256);
    block.text.push_str("# Context files");
    let mut total = 0usize;
    for (entry, shown) in plan {
        render_group(&mut block, &entry, shown, cfg, tz, &mut total);
    }
    for (path, e) in errors {
        block
            .text
            .push_str(&format!("\n\n## {path}\n[not included: {e}]"));
    }
    if resolved.groups.is_empty() {
        block
            .text
            .push_str("\n\n(This role lists no context files that exist.)");
    }
    block
}

/// Decides, per entry, which files go in full and which to the index: one-file entries take
/// what they need (up to `max_file_bytes`); folders and globs share the rest equally, newest
/// notes first; notes whose status says they are finished go to the index.
fn plan_shares(groups: Vec<(String, bool, Vec<Loaded>)>, cfg: &ContextConfig) -> Vec<(String, Vec<Shown>)> {
    let singles: usize = groups
        .iter()
        .filter(|(_, many, _)| !many)
        .flat_map(|(_, _, files)| files.iter())
        .map(|l| l.text.len().min(cfg.max_file_bytes))
        .sum();
    let n_many = groups.iter().filter(|(_, many, _)| *many).count().max(1);
    let share = cfg.max_context_bytes.saturating_sub(singles) / n_many;
    let mut out = Vec::new();
    for (entry, many, files) in groups {
        if !many {
            out.push((entry, files.into_iter().map(Shown::Full).collect()));
            continue;
        }
        let mut newest_first = files;
        newest_first.sort_by(|a, b| b.modified.cmp(&a.modified).then(a.path.cmp(&b.path)));
        let mut used = 0usize;
        let mut shown = Vec::new();
        for l in newest_first {
            let size = l.text.len().min(cfg.max_file_bytes);
            if let Some(status) = l.closed_status() {
                shown.push(Shown::Index(l, Indexed::Closed(status)));
            } else if used + size <= share {
                used += size;
                shown.push(Shown::Full(l));
            } else {
                shown.push(Shown::Index(l, Indexed::Crowded(share)));
            }
        }
        // Included files in path order, so an unchanged folder keeps the same cached text.
        shown.sort_by(|a, b| shown_key(a).cmp(&shown_key(b)));
        out.push((entry, shown));
    }
    out
}

fn shown_key(s: &Shown) -> (u8, &str) {
    match s {
        Shown::Full(l) => (0, l.path.as_str()),
        Shown::Index(l, _) => (1, l.path.as_str()),
    }
}

fn modified_text(l: &Loaded, tz: Tz) -> String {
    l.modified
        .map(|t| {
            DateTime::<Utc>::from(t)
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M %Z")
                .to_string()
        })
        .unwrap_or_else(|| "unknown".into())
}

fn render_group(
    block: &mut ContextBlock,
    entry: &str,
    shown: Vec<Shown>,
    cfg: &ContextConfig,
    tz: Tz,
    total: &mut usize,
) {
    let mut index_lines = Vec::new();
    let mut over_cap = Vec::new();
    for s in shown {
        match s {
            Shown::Full(l) if *total >= cfg.max_context_bytes => over_cap.push(l.path.as_str().to_string()),
            Shown::Full(l) => {
                let room = cfg.max_file_bytes.min(cfg.max_context_bytes - *total);
                let text = cut(&l.text, room);
                *total += text.len();
                block.text.push_str(&format!(
                    "\n\n## {}\nmodified {} · {} bytes\n\n{text}",
                    l.path,
                    modified_text(&l, tz),
                    thousands(l.size)
                ));
                if text.len() < l.text.len() {
                    block.truncated.push(l.path.as_str().to_string());
                    block.text.push_str(&format!("\n[… truncated: showing the first {} of {} bytes; use read_file {} with an offset for the rest]",
                        thousands(text.len() as u64),
                        thousands(l.text.len() as u64),
                        l.path));
                }
            }
            Shown::Index(l, why) => {
                index_lines.push(format!(
                    "- {} — \"{}\" · modified {} · {} bytes{}",
                    l.path,
                    l.title(),
                    modified_text(&l, tz),
                    thousands(l.size),
                    match why {
                        Indexed::Closed(_) => format!(" · {why}"),
                        Indexed::Crowded(_) => String::new(),
                    }
                ));
                block.indexed.push((l.path.as_str().to_string(), why.to_string()));
            }
        }
    }
    if !index_lines.is_empty() {
        block.text.push_str(&format!(
            "\n\n## Index of {entry} (not included above; open one with read_file)\n{}",
            index_lines.join("\n")
        ));
    }
    if !over_cap.is_empty() {
        block.text.push_str(&format!(
            "\n\n[context limit of {} bytes reached; not included (use read_file): {}]",
            thousands(cfg.max_context_bytes as u64),
            over_cap.join(", ")
        ));
    }
}

/// Part 3: now, why, what changed, notices, the trigger notes (and those shown only in part).
fn this_run(
    input: &PromptInput<'_>,
    hashes: &BTreeMap<String, String>,
    missing: &[String],
    truncated: &[String],
) -> (String, Vec<NoteTruncated>) {
    let tz = input.role.schedule.tz;
    let now_local = input.now.with_timezone(&tz);
    let mut out = format!(
        "# This run\nNow: {} ({})\nWhy this run: {}",
        now_local.format("%A %Y-%m-%d %H:%M"),
        tz.name(),
        why_text(input.trigger, input.notes.len(), input.now, tz)
    );
    out.push_str("\n\n## Changes since your last run\n");
    out.push_str(&changes_text(input.previous, hashes, missing));
    if !truncated.is_empty() {
        out.push_str(&format!(
            "\nTruncated above (read the rest with read_file): {}",
            truncated.join(", ")
        ));
    }
    let mut notes_truncated = Vec::new();
    match &input.trigger.delegation {
        Some(d) => out.push_str(&task_text(d, input.config.context.max_file_bytes)),
        None => {
            let has = |name: &str| input.tools.iter().any(|t| t.name == name);
            let readers = notes::Readers {
                read_file: has("read_file"),
                search_files: has("search_files"),
            };
            let notes = notes::notes_text(input.notes, input.config.context.max_file_bytes, tz, readers);
            out.push_str(&notes.text);
            notes_truncated = notes.truncated;
        }
    }
    out.push_str(&answer_contract(input));
    (out, notes_truncated)
}

fn why_text(trigger: &Trigger, notes: usize, now: DateTime<Utc>, tz: Tz) -> String {
    match trigger.kind {
        TriggerKind::Schedule => {
            let mut s = format!("your schedule (`{}`)", trigger.cron.as_deref().unwrap_or(""));
            if let Some(r) = trigger.rerun {
                // What the interrupted run already did is in the vault: the model should look
                // before it does any of it a second time.
                s.push_str(&format!(
                    "; this run was due at {} and runs now, at {}: the run of this slot that started at {} \
                     did not finish (tabd was stopped, killed or crashed), so it runs once more. It may have done part \
                     of its work already: check what is there before you change anything",
                    r.slot.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S"),
                    now.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S"),
                    r.interrupted_run_started_at.with_timezone(&tz).format("%H:%M:%S"),
                ));
            } else if let Some(due) = trigger.scheduled_for {
                let late = (now - due).num_minutes();
                if late >= 2 {
                    s.push_str(&format!("; this run was due at {} and runs {late} minutes late (tabd was not running or the computer was asleep)",
                        due.with_timezone(&tz).format("%Y-%m-%d %H:%M")));
                }
            }
            if trigger.missed > 1 {
                s.push_str(&format!("; it stands for {} missed scheduled runs", trigger.missed));
            }
            s
        }
        TriggerKind::Inbox => format!("{notes} new note(s) in your inbox"),
        TriggerKind::Manual => "a person started it by hand (`tabd fire`)".into(),
        TriggerKind::Resume => "the person decided the calls this run waited for; it goes on".into(),
        TriggerKind::Watch => format!("a watched file changed: {}", trigger.watched.join(", ")),
        TriggerKind::Delegate => match &trigger.delegation {
            Some(d) => format!(
                "{} handed you a task and waits for your answer (delegation depth {}); your final message is the answer they get",
                d.parent_role, d.depth
            ),
            None => "another role handed you a task".into(),
        },
    }
}

/// A delegated run's task, in place of trigger notes.
fn task_text(d: &crate::base::trigger::Delegation, max_file_bytes: usize) -> String {
    let shown = cut(&d.task, max_file_bytes);
    let mut out = format!(
        "\n\n## Your task (from {})\nYou do not see their conversation: what you need is in this task or in the vault. \
         No inbox notes come with this run.\n\n{shown}",
        d.parent_role
    );
    if shown.len() < d.task.len() {
        out.push_str(&format!(
            "\n[… task truncated at {} bytes]",
            thousands(shown.len() as u64)
        ));
    }
    out
}

/// What the final answer must be, when the role has an output schema (docs/spec.md §18).
fn answer_contract(input: &PromptInput<'_>) -> String {
    let Some(path) = input
        .role
        .settings
        .output
        .as_ref()
        .and_then(|o| o.schema.as_deref())
    else {
        return String::new();
    };
    let schema = VaultPath::parse(path, false)
        .ok()
        .and_then(|p| input.vault.read_text(&p, 1024 * 1024).ok())
        .unwrap_or_default();
    format!(
        "\n\n## Your answer\nEnd with one message that is a single JSON object and nothing else (no prose around it); \
         tabd checks it against this JSON Schema ({path}) and asks you once to repair it if it does not fit:\n```json\n{}\n```",
        schema.trim()
    )
}

fn changes_text(
    previous: Option<&BTreeMap<String, String>>,
    now: &BTreeMap<String, String>,
    missing: &[String],
) -> String {
    let mut lines = Vec::new();
    match previous {
        None => lines.push(
            "This is your first run (or tabd has no record of an earlier one): everything is new to you."
                .to_string(),
        ),
        Some(prev) => {
            let (new, changed, gone) = context::diff(prev, now);
            let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            if !new.is_empty() {
                lines.push(format!("- New: {}", list(&new)));
            }
            if !changed.is_empty() {
                lines.push(format!("- Changed: {}", list(&changed)));
            }
            if !gone.is_empty() {
                lines.push(format!("- Gone: {}", list(&gone)));
            }
            if lines.is_empty() {
                lines.push("No context file changed.".into());
            }
        }
    }
    if !missing.is_empty() {
        lines.push(format!(
            "- Listed in your role but missing: {}",
            missing.join(", ")
        ));
    }
    lines.join("\n")
}

impl Prompt {
    /// Adds a part to "this run" (after the notes were chosen: servers that are down, approvals).
    pub fn add_notice(&mut self, title: &str, body: &str) {
        section(&mut self.trigger, title, body);
    }

    /// The request, built by moving this prompt's text (no copy of the context).
    pub fn into_request(
        self,
        model: &str,
        max_tokens: u32,
        temperature: Option<f64>,
        thinking_budget: u32,
    ) -> Request {
        Request {
            model: model.to_string(),
            system: self.system,
            messages: vec![Message::user(vec![
                Block::Text {
                    text: self.context,
                    cache: true,
                },
                Block::Text {
                    text: self.trigger,
                    cache: false,
                },
            ])],
            tools: self.tools,
            max_tokens,
            temperature,
            thinking_budget,
            tool_choice_none: false,
            cache_ttl: None,
        }
    }

    pub fn bytes(&self) -> usize {
        self.system.len() + self.context.len() + self.trigger.len()
    }

    /// A rough token estimate (4 bytes a token), for people, not for billing.
    pub fn estimated_tokens(text_bytes: usize) -> usize {
        text_bytes.div_ceil(4)
    }

    /// The prompt as `tabd prompt` prints it.
    pub fn render(&self) -> String {
        let tools_json = serde_json::to_string_pretty(
            &self
                .tools
                .iter()
                .map(|t| serde_json::json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let est = |n: usize| {
            format!(
                "{} bytes, ~{} tokens",
                thousands(n as u64),
                thousands(Self::estimated_tokens(n) as u64)
            )
        };
        let stable = self.system.len() + self.context.len();
        let mut out = format!(
            "===== SYSTEM ({}) =====\n{}\n\n===== CONTEXT ({}; cached with the system prompt) =====\n{}\n\n===== THIS RUN ({}) =====\n{}\n\n===== TOOLS ({}) =====\n{}\n",
            est(self.system.len()),
            self.system,
            est(self.context.len()),
            self.context,
            est(self.trigger.len()),
            self.trigger,
            self.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            tools_json,
        );
        if !self.indexed.is_empty() {
            out.push_str(&format!(
                "\n===== INDEXED, NOT INCLUDED ({}) =====\n",
                self.indexed.len()
            ));
            for (path, why) in &self.indexed {
                out.push_str(&format!("{path} — {why}\n"));
            }
        }
        out.push_str(&format!(
            "\n===== TOTAL: {} · cacheable prefix {:.0}% =====\n",
            est(self.bytes() + tools_json.len()),
            100.0 * stable as f64 / self.bytes().max(1) as f64
        ));
        out
    }
}

mod notes;
mod project;

pub use notes::larger_than_prompt;

#[cfg(test)]
mod tests;
