//! What one run sends the model (DESIGN §7.1), in three parts ordered for prompt caching:
//! 1. `system` — identity, mission, goals, the THINK step, rules, preferences, memory (stable);
//! 2. `context` — the role's context files with paths and modification times (cached while
//!    unchanged);
//! 3. `trigger` — now, why this run fired, what changed since the last run, the trigger notes.
//!
//! The "changed since your last run" list sits in part 3 rather than before the files: it
//! differs every run, and anything before the files would stop them being read from cache.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::inbox::Note;
use crate::provider::{Block, Message, Request};
use crate::role::{ContextEntry, Role};
use crate::text::thousands;
use crate::tools::{self, AccessPolicy, ToolSpec};
use crate::vault::{Entry, Vault, VaultError, VaultPath};

/// The think-then-act instruction of DESIGN §7, verbatim.
pub const THINK: &str = "Before taking any action, THINK:
1. What has changed since the last run? (check inbox, compare context)
2. What needs attention right now?
3. What is the most valuable action you can take this run?

Then act on your reasoning. Be efficient — do only what matters, then stop.";

/// Why a run fired, as the prompt and the logs say it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerKind {
    Schedule,
    Inbox,
    Manual,
    Watch,
}

impl TriggerKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Schedule => "schedule",
            Self::Inbox => "inbox",
            Self::Manual => "manual",
            Self::Watch => "watch",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub kind: TriggerKind,
    /// For a scheduled run: the slot it was due, and the cron line(s) of the schedule.
    pub scheduled_for: Option<DateTime<Utc>>,
    pub cron: Option<String>,
    /// Slots that were missed and are covered by this run (catch-up).
    pub missed: usize,
    /// For a watch run: the files whose change fired it.
    pub watched: Vec<String>,
}

impl Trigger {
    pub fn manual() -> Self {
        Self {
            kind: TriggerKind::Manual,
            scheduled_for: None,
            cron: None,
            missed: 0,
            watched: Vec::new(),
        }
    }
    pub fn inbox() -> Self {
        Self {
            kind: TriggerKind::Inbox,
            ..Self::manual()
        }
    }
}

/// One context file as included.
#[derive(Debug, Clone)]
pub struct ContextFile {
    pub path: String,
    pub bytes: u64,
    pub hash: String,
    pub included: usize,
}

/// Everything one run sends, before it becomes a provider request.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub system: String,
    pub context: String,
    pub trigger: String,
    pub tools: Vec<ToolSpec>,
    /// Content hashes of every context file found (for the next run's change list).
    pub hashes: BTreeMap<String, String>,
    pub files: Vec<ContextFile>,
    pub missing: Vec<String>,
    pub truncated: Vec<String>,
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
}

pub fn hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Cuts `text` to at most `max` bytes at a char boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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
    let tz = role.schedule.tz;
    let policy = AccessPolicy::for_role(role);

    // 1. The stable system prompt.
    let mut system = format!("You are the {} for this project.", role.display_name);
    if let Some(m) = &role.mission {
        section(&mut system, "Mission", m);
    }
    section(&mut system, "Goals", &bullets(&role.goals));
    section(&mut system, "How to work", THINK);
    section(&mut system, "Rules", &bullets(&role.rules));
    if let Some(p) = &role.preferences {
        section(&mut system, "User Preferences", p);
    }
    for (heading, body) in &role.extra {
        section(&mut system, heading, body);
    }
    for (title, path) in [
        (
            "Memory (memory.md — shared by all roles)".to_string(),
            "memory.md".to_string(),
        ),
        (
            format!("Your memory (agent/memory/{}.md)", role.name),
            format!("agent/memory/{}.md", role.name),
        ),
    ] {
        if let Ok(p) = VaultPath::parse(&path, false) {
            if let Ok(text) = input.vault.read_text(&p, 8 * cfg.max_file_bytes as u64) {
                let shown = cut(&text, cfg.max_file_bytes);
                let mut body = shown.to_string();
                if shown.len() < text.len() {
                    body.push_str(&format!(
                        "\n[… memory truncated at {} bytes; read_file {path} for the rest]",
                        thousands(shown.len() as u64)
                    ));
                }
                section(&mut system, &title, &body);
            }
        }
    }

    // 2. Context files (the memory notes are already in the system prompt).
    let (mut found, mut missing) = resolve_context(input.vault, &policy, &role.context);
    let role_memory = format!("agent/memory/{}.md", role.name);
    found.retain(|e| e.path.as_str() != "memory.md" && e.path.as_str() != role_memory);
    let mut context = String::with_capacity(cfg.max_context_bytes.min(1 << 20) + 256 * found.len());
    context.push_str("# Context files");
    let mut hashes = BTreeMap::new();
    let mut files = Vec::new();
    let mut truncated = Vec::new();
    let mut total = 0usize;
    let mut omitted = Vec::new();
    for listed in &found {
        // One open per file: the size and time come from the same handle as the text.
        let (text, entry) = match input.vault.read_text_with_meta(&listed.path, 64 * 1024 * 1024) {
            Ok(t) => t,
            Err(VaultError::NotFound(_)) => {
                missing.push(listed.path.as_str().to_string());
                continue;
            }
            Err(e) => {
                let _ = write!(context, "\n\n## {}\n[not included: {e}]", listed.path);
                continue;
            }
        };
        let h = hash(text.as_bytes());
        hashes.insert(entry.path.as_str().to_string(), h.clone());
        if total >= cfg.max_context_bytes {
            omitted.push(entry.path.as_str().to_string());
            files.push(ContextFile {
                path: entry.path.as_str().to_string(),
                bytes: text.len() as u64,
                hash: h,
                included: 0,
            });
            continue;
        }
        let room = cfg.max_file_bytes.min(cfg.max_context_bytes - total);
        let shown = cut(&text, room);
        total += shown.len();
        let when = entry
            .modified
            .map(|t| {
                DateTime::<Utc>::from(t)
                    .with_timezone(&tz)
                    .format("%Y-%m-%d %H:%M %Z")
                    .to_string()
            })
            .unwrap_or_else(|| "unknown".into());
        let _ = write!(
            context,
            "\n\n## {}\nmodified {when} · {} bytes\n\n",
            entry.path,
            thousands(text.len() as u64)
        );
        context.push_str(shown);
        if shown.len() < text.len() {
            truncated.push(entry.path.as_str().to_string());
            let _ = write!(
                context,
                "\n[… truncated: showing the first {} of {} bytes; use read_file {} with an offset for the rest]",
                thousands(shown.len() as u64),
                thousands(text.len() as u64),
                entry.path
            );
        }
        files.push(ContextFile {
            path: entry.path.as_str().to_string(),
            bytes: text.len() as u64,
            hash: h,
            included: shown.len(),
        });
    }
    if !omitted.is_empty() {
        context.push_str(&format!(
            "\n\n[context limit of {} bytes reached; not included (use read_file): {}]",
            thousands(cfg.max_context_bytes as u64),
            omitted.join(", ")
        ));
    }
    if found.is_empty() {
        context.push_str("\n\n(This role lists no context files that exist.)");
    }

    // 3. Now, why, what changed, the notes.
    let now_local = input.now.with_timezone(&tz);
    let mut trigger = format!(
        "# This run\nNow: {} ({})",
        now_local.format("%A %Y-%m-%d %H:%M"),
        tz.name()
    );
    let why = match input.trigger.kind {
        TriggerKind::Schedule => {
            let due = input.trigger.scheduled_for.map(|t| t.with_timezone(&tz));
            let mut s = format!(
                "your schedule (`{}`)",
                input.trigger.cron.as_deref().unwrap_or("")
            );
            if let Some(due) = due {
                let late = (input.now - due.with_timezone(&Utc)).num_minutes();
                if late >= 2 {
                    s.push_str(&format!(
                        "; this run was due at {} and runs {late} minutes late (tabd was not running or the computer was asleep)",
                        due.format("%Y-%m-%d %H:%M")
                    ));
                }
            }
            if input.trigger.missed > 1 {
                s.push_str(&format!(
                    "; it stands for {} missed scheduled runs",
                    input.trigger.missed
                ));
            }
            s
        }
        TriggerKind::Inbox => format!("{} new note(s) in your inbox", input.notes.len()),
        TriggerKind::Manual => "a person started it by hand (`tabd fire`)".into(),
        TriggerKind::Watch => format!("a watched file changed: {}", input.trigger.watched.join(", ")),
    };
    trigger.push_str(&format!("\nWhy this run: {why}"));

    trigger.push_str("\n\n## Changes since your last run\n");
    trigger.push_str(&changes_text(input.previous, &hashes, &missing));
    if !truncated.is_empty() {
        trigger.push_str(&format!(
            "\nTruncated above (read the rest with read_file): {}",
            truncated.join(", ")
        ));
    }

    if input.notes.is_empty() {
        trigger.push_str("\n\n## Trigger notes\nNone: no note is waiting in your inbox.");
    } else {
        trigger.push_str(&format!(
            "\n\n## Trigger notes ({})\nHandle each of these; tabd moves them to processed/ after this run.",
            input.notes.len()
        ));
        for note in input.notes {
            let received = DateTime::<Utc>::from(note.modified)
                .with_timezone(&tz)
                .format("%Y-%m-%d %H:%M");
            trigger.push_str(&format!(
                "\n\n### {}\nfrom: {} · priority: {} · hops: {} · received {received}\n",
                note.path,
                note.from.as_deref().unwrap_or("a person"),
                note.priority.as_str(),
                note.hops
            ));
            if let Some(e) = &note.frontmatter_error {
                trigger.push_str(&format!(
                    "(its frontmatter could not be read: {e}; the text is shown as written)\n"
                ));
            }
            let shown = cut(&note.text, cfg.max_file_bytes);
            trigger.push_str(&format!("\n{shown}"));
            if shown.len() < note.text.len() {
                trigger.push_str(&format!(
                    "\n[… note truncated at {} bytes; read_file {} for the rest]",
                    thousands(shown.len() as u64),
                    note.path
                ));
            }
        }
    }

    Prompt {
        system,
        context,
        trigger,
        tools: tools::specs_for(role),
        hashes,
        files,
        missing,
        truncated,
    }
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
            let new: Vec<&String> = now.keys().filter(|k| !prev.contains_key(*k)).collect();
            let changed: Vec<&String> = now
                .iter()
                .filter(|(k, h)| prev.get(*k).is_some_and(|p| p != *h))
                .map(|(k, _)| k)
                .collect();
            let vanished: Vec<&String> = prev.keys().filter(|k| !now.contains_key(*k)).collect();
            let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
            if !new.is_empty() {
                lines.push(format!("- New: {}", list(&new)));
            }
            if !changed.is_empty() {
                lines.push(format!("- Changed: {}", list(&changed)));
            }
            if !vanished.is_empty() {
                lines.push(format!("- Gone: {}", list(&vanished)));
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

/// Resolves context entries to existing files (deduplicated, in order) and the entries that
/// found nothing.
pub fn resolve_context(
    vault: &Vault,
    policy: &AccessPolicy,
    entries: &[ContextEntry],
) -> (Vec<Entry>, Vec<String>) {
    let mut out: Vec<Entry> = Vec::new();
    let mut seen: BTreeSet<VaultPath> = BTreeSet::new();
    let mut missing = Vec::new();
    let hidden = |p: &VaultPath| p.components().any(|c| c.starts_with('.'));
    // Globs and wikilinks need the vault's file list: walk it once, and only if one is used.
    let needs_listing = entries
        .iter()
        .any(|e| matches!(e, ContextEntry::Glob(_) | ContextEntry::Wikilink(_)));
    let all_files: Vec<Entry> = if needs_listing {
        vault
            .walk(&VaultPath::root(), true, &hidden)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| !e.is_dir)
            .collect()
    } else {
        Vec::new()
    };
    for entry in entries {
        let found: Vec<Entry> = match entry {
            ContextEntry::File(p) => {
                match VaultPath::parse(p, false).and_then(|vp| checked_file(vault, policy, &vp)) {
                    Ok(e) => vec![e],
                    Err(_) => Vec::new(),
                }
            }
            ContextEntry::Folder(p) => match VaultPath::parse(p, false) {
                Ok(dir) if policy.check_read(vault, &dir).is_ok() => vault
                    .walk(&dir, true, &hidden)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|e| !e.is_dir && e.path.as_str().to_lowercase().ends_with(".md"))
                    .collect(),
                _ => Vec::new(),
            },
            ContextEntry::Glob(g) => match tools::policy::glob(g) {
                Ok(glob) => {
                    let m = glob.compile_matcher();
                    all_files
                        .iter()
                        .filter(|e| m.is_match(e.path.as_str()))
                        .cloned()
                        .collect()
                }
                Err(_) => Vec::new(),
            },
            ContextEntry::Wikilink(name) => resolve_wikilink(&all_files, name).into_iter().collect(),
        };
        if found.is_empty() {
            missing.push(entry.to_string());
        }
        for e in found {
            if seen.insert(e.path.clone()) {
                out.push(e);
            }
        }
    }
    (out, missing)
}

/// A listed file the role may read. Whether it exists is found out when it is read (one
/// open per file); a missing one is reported then.
fn checked_file(vault: &Vault, policy: &AccessPolicy, path: &VaultPath) -> Result<Entry, VaultError> {
    policy.check_read(vault, path)?;
    Ok(Entry {
        path: path.clone(),
        is_dir: false,
        size: 0,
        modified: None,
    })
}

/// Obsidian's rule: the link names a note by file name (or a path suffix), `.md` implied; when
/// several match, the one with the shortest path wins.
fn resolve_wikilink(files: &[Entry], name: &str) -> Option<Entry> {
    let target = name.trim().trim_end_matches(".md").to_lowercase();
    let mut matches: Vec<&Entry> = files
        .iter()
        .filter(|e| {
            let p = e.path.as_str().to_lowercase();
            let Some(stem) = p.strip_suffix(".md") else {
                return false;
            };
            stem == target || stem.ends_with(&format!("/{target}"))
        })
        .collect();
    matches.sort_by_key(|e| (e.path.as_str().len(), e.path.clone()));
    matches.first().map(|e| (*e).clone())
}

impl Prompt {
    /// The first user message: context (a cache breakpoint) and this run's part.
    pub fn first_message(&self) -> Message {
        Message::user(vec![
            Block::Text {
                text: self.context.clone(),
                cache: true,
            },
            Block::Text {
                text: self.trigger.clone(),
                cache: false,
            },
        ])
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
                .map(|t| {
                    serde_json::json!({
                        "name": t.name, "description": t.description, "input_schema": t.input_schema
                    })
                })
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
        format!(
            "===== SYSTEM ({}) =====\n{}\n\n===== CONTEXT ({}; cached with the system prompt) =====\n{}\n\n===== THIS RUN ({}) =====\n{}\n\n===== TOOLS ({}) =====\n{}\n\n===== TOTAL: {} · cacheable prefix {:.0}% =====\n",
            est(self.system.len()),
            self.system,
            est(self.context.len()),
            self.context,
            est(self.trigger.len()),
            self.trigger,
            self.tools.iter().map(|t| t.name).collect::<Vec<_>>().join(", "),
            tools_json,
            est(self.bytes() + tools_json.len()),
            100.0 * stable as f64 / self.bytes().max(1) as f64
        )
    }
}
