//! Run logs (docs/spec.md §9, contract): `daily/YYYY-MM-DD.md` for people, `.tabd/runs/YYYY-MM-DD.jsonl`
//! for programs.
//!
//! All writes go through the vault (so a symlinked `daily/` can never lead a write out of it)
//! with an exclusive `flock` on the file, so a `tabd fire` beside the daemon never interleaves
//! with it; each entry is one `write_all` on an append-mode handle.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::base::calls::{Change, ToolCallRecord};
use crate::base::cost::Usage;
use crate::base::text::one_line;
use crate::base::text::thousands;
use crate::base::trigger::TriggerKind;
use crate::base::vault::{SpliceGuard, Vault, VaultError, VaultPath};

pub mod daily;
mod notes_truncated;
pub mod obsidian;
pub mod read;

pub use notes_truncated::NoteTruncated;
use notes_truncated::{larger_than_prompt, larger_than_prompt_lines};

/// The record's `ended` of a run's first part that waits for the person's decision.
pub const WAITING: &str = "waiting";

/// What a run ended as (the JSONL `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    Failed,
    Limit,
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Limit => "limit",
            Self::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSONL `usage`: token counts and what they cost (docs/spec.md §17).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UsageRecord {
    #[serde(flatten)]
    pub tokens: Usage,
    pub cost_usd: f64,
}

/// The JSONL record of one finished run (contract shape; extra fields only added).
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub run_id: String,
    pub role: String,
    pub trigger: TriggerRecord,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub outcome: Outcome,
    pub error: Option<String>,
    pub model: String,
    pub usage: UsageRecord,
    /// Model requests the run made (a triage model's first look included; retries not
    /// counted). Absent when it made none.
    #[serde(skip_serializing_if = "is_zero")]
    pub requests: u32,
    pub tool_calls: Vec<ToolCallRecord>,
    pub moved: Vec<Moved>,
    /// Runs this run delegated to, by id (docs/spec.md §18).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<String>,
    /// Why a `failed` run was nobody's fault: `paused` (the model or a required server could
    /// not be used) or `stopped` (tabd was stopped); or, on an `ok` one, `waiting`: its first
    /// part, which goes on once the person decides. Its notes stay and count no
    /// attempt. Absent otherwise; `outcome` keeps the contract's four values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Trigger notes larger than one prompt: the prompt held their start, the model was told
    /// to read the rest in pages with `read_file`. Absent when every note fit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes_truncated: Vec<NoteTruncated>,
    /// The first look of the role's `triage_model` (docs/spec.md §25): when it found nothing to do,
    /// the run ended there (`ended: triaged`, `model` and `usage` are its own); otherwise `model`
    /// is the role's, and `usage` counts both (this holds the first look's part). Absent when
    /// the run asked no triage model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triage: Option<TriageRecord>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The record's `ended` of a run that the triage model found nothing to do in (docs/spec.md §25).
pub const TRIAGED: &str = "triaged";

/// What the triage model's first look came to, in a run's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriageRecord {
    /// The model that answered.
    pub model: String,
    /// `nothing` (the run ended `triaged`), `escalated` (it called a tool: the role's model took
    /// over, none of its calls run) or `failed` (it could not be used: the role's model took over).
    pub verdict: &'static str,
    /// The tools it wanted to call, by name (escalated).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wanted: Vec<String>,
    /// Why it could not be used (failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its tokens and their cost at its own price.
    pub usage: UsageRecord,
}

impl RunRecord {
    /// The record of a run that called no model (a skip, a slot not run again), at `at`:
    /// `outcome` and why, nothing used, nothing called or moved.
    pub fn without_model(
        run_id: String,
        role: &str,
        trigger: TriggerRecord,
        at: DateTime<Utc>,
        (outcome, error): (Outcome, String),
    ) -> Self {
        Self {
            run_id,
            role: role.to_string(),
            trigger,
            started_at: at,
            ended_at: at,
            outcome,
            error: Some(error),
            model: String::new(),
            requests: 0,
            usage: UsageRecord::default(),
            tool_calls: Vec::new(),
            moved: Vec::new(),
            children: Vec::new(),
            ended: None,
            notes_truncated: Vec::new(),
            triage: None,
        }
    }

    /// The first part of a run that waits for the person (`ended: waiting`): not done yet.
    pub fn waits(&self) -> bool {
        self.ended.as_deref() == Some(WAITING)
    }

    /// What it ended as, in one word: `waiting`, `paused` and `stopped` where the record says
    /// so, else its `outcome`.
    pub fn shown_outcome(&self) -> &str {
        self.ended.as_deref().unwrap_or(self.outcome.as_str())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TriggerRecord {
    pub kind: TriggerKind,
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled_for: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A delegated run: the run that asked (docs/spec.md §18).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// A scheduled run that runs its slot again after the run of it that started earlier was
    /// interrupted (docs/spec.md §22): the slot, and when that run started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<crate::base::trigger::Rerun>,
}

impl TriggerRecord {
    /// The record of `trigger`, with the notes it handled.
    pub fn of(trigger: &crate::base::trigger::Trigger, notes: Vec<String>) -> Self {
        let delegation = trigger.delegation.as_ref();
        Self {
            kind: trigger.kind,
            notes,
            scheduled_for: trigger.scheduled_for,
            cron: trigger.cron.clone(),
            parent_run_id: delegation.map(|d| d.parent_run_id.clone()),
            task: delegation.map(|d| d.task.clone()),
            rerun: trigger.rerun,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub from: String,
    pub to: String,
}

/// What the daily section shows beyond the record.
#[derive(Debug, Clone, Default)]
pub struct HumanRun {
    pub display_name: String,
    pub thinking: String,
    pub summary: String,
    pub changes: Vec<Change>,
    /// Notes moved to failed/ by this run, with the attempt count.
    pub failed_notes: Vec<(String, u32)>,
    /// Notes left in the inbox for another attempt.
    pub retry_notes: Vec<(String, u32)>,
    /// Extra lines for the section's list (e.g. an MCP server that was down).
    pub notes: Vec<String>,
    /// The runs this run delegated to: each one's `### Delegated` subsection.
    pub children: Vec<String>,
    /// What those runs spent together: tokens and dollars.
    pub children_spent: (u64, f64),
}

pub struct RunLog {
    vault: std::sync::Arc<Vault>,
    /// Fixed for the log's life: a config with another time zone makes another log (`in_tz`),
    /// so a run's section and record stay in the time zone the run started in.
    tz: Tz,
    /// The notes not tabd's that the daemon's log has named (once each; shared by its `in_tz`
    /// copies, so a reload does not name them again).
    told: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// Seals the record of a write that replaces a note's end, so a crash in it is finished;
    /// `None`: a log opened to read (`status`, `logs`), which writes nothing.
    guard: Option<SpliceGuard>,
}

fn fixed_path(s: &str) -> Result<VaultPath, VaultError> {
    VaultPath::parse(s, false)
}

/// `project/timeline.md` → `[[project/timeline]]`.
pub fn wikilink(path: &str) -> String {
    let target = path.strip_suffix(".md").unwrap_or(path);
    // A wikilink cannot hold these (Obsidian reads them as heading, block, alias or link
    // syntax): such a note gets a Markdown link, its path percent-encoded, which still resolves.
    if target.contains(['[', ']', '#', '|', '^']) {
        let name = target.rsplit('/').next().unwrap_or(target);
        let shown: String = name
            .chars()
            .flat_map(|c| {
                let escape = matches!(c, '[' | ']' | '\\');
                escape.then_some('\\').into_iter().chain([c])
            })
            .collect();
        return format!("[{shown}]({})", percent_encode(path));
    }
    format!("[[{target}]]")
}

/// A vault path as a Markdown link destination.
fn percent_encode(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A link to a note that will move (a triggered note goes to `processed/` when its role runs):
/// by name alone, which Obsidian resolves wherever the note is (tabd's note names are unique).
pub fn wikilink_by_name(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.contains(['[', ']', '#', '|', '^']) {
        return wikilink(path);
    }
    format!("[[{}]]", name.strip_suffix(".md").unwrap_or(name))
}

/// Links to the run's trigger notes where they are now: in `processed/` or `failed/` when this
/// run moved them; one it left in the inbox (a run tabd's stop cut short, an attempt to retry)
/// moves when a later run handles it, so it is linked by its name, which Obsidian finds wherever
/// it is then (issue 39).
fn note_links(rec: &RunRecord) -> Vec<String> {
    rec.trigger
        .notes
        .iter()
        .map(|n| match rec.moved.iter().find(|m| &m.from == n) {
            Some(m) => wikilink(&m.to),
            None => wikilink_by_name(n),
        })
        .collect()
}

/// Model text inside a section: the one renderer (`text::for_note`), so it cannot break the
/// log's own structure of `##` runs and `###` parts.
fn tame(text: &str) -> String {
    crate::base::text::for_note(text)
}

/// What a tool call was about, for the Actions list.
fn call_subject(input: &Value) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    if let (Some(from), Some(to)) = (s("from"), s("to")) {
        return format!("{from} → {to}");
    }
    // `trigger_role` (`note`) and `delegate` (`task`, or several `tasks`): whom, and what.
    let asked = |one: &Value| {
        let text = |k: &str| one.get(k).and_then(Value::as_str);
        text("role").map(|role| {
            let what = text("task").or_else(|| text("note")).unwrap_or("");
            format!("→ {role}: {}", one_line(what, 80))
        })
    };
    if let Some(line) = asked(input) {
        return line;
    }
    if let Some(tasks) = input.get("tasks").and_then(Value::as_array) {
        let each: Vec<String> = tasks.iter().filter_map(asked).collect();
        if !each.is_empty() {
            return each.join("; ");
        }
    }
    if let Some(q) = s("query") {
        return format!(
            "\"{}\"{}",
            one_line(q, 60),
            s("path").map(|p| format!(" in {p}")).unwrap_or_default()
        );
    }
    if let Some(p) = s("path") {
        return p.to_string();
    }
    if let Some(n) = s("note") {
        return one_line(n, 80);
    }
    if input.is_object() {
        String::new()
    } else {
        one_line(&input.to_string(), 80)
    }
}

impl RunLog {
    /// The run log of `vault`, its days in `tz`, to read: where the day's log is, what it holds.
    /// It writes nothing (`writer`).
    pub fn new(vault: std::sync::Arc<Vault>, tz: Tz) -> Self {
        Self {
            tz,
            told: Default::default(),
            vault,
            guard: None,
        }
    }

    /// The run log of `vault` to write; `guard` (tabd's key) makes a section's write before the
    /// day's events safe from a crash.
    pub fn writer(vault: std::sync::Arc<Vault>, tz: Tz, guard: SpliceGuard) -> Self {
        Self {
            guard: Some(guard),
            ..Self::new(vault, tz)
        }
    }

    /// The guard of a log opened to write.
    fn guard(&self) -> Result<&SpliceGuard, VaultError> {
        self.guard.as_ref().ok_or_else(|| {
            VaultError::Refused("the run log was opened to read; it writes nothing (a bug in tabd)".into())
        })
    }

    /// Finishes every write into a daily note that a crash cut short (at start, before a run's
    /// recovery asks whether its section is in the note). Returns what could not be done.
    pub fn finish_interrupted(&self) -> Vec<String> {
        match self.guard() {
            Ok(guard) => self.vault.finish_splices(guard),
            Err(e) => vec![e.to_string()],
        }
    }

    /// The same log in time zone `tz` (an edited config's), for the runs started from now on.
    pub fn in_tz(&self, tz: Tz) -> Self {
        Self {
            vault: self.vault.clone(),
            tz,
            told: self.told.clone(),
            guard: self.guard.clone(),
        }
    }

    /// The time zone of file names and times (the config's when this log was made).
    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// The folder of the daily notes (`[log] folder`, the vault's).
    pub fn folder(&self) -> std::borrow::Cow<'_, str> {
        self.vault.log_folder()
    }

    /// The day's note at its place in the log folder, whoever's it is (`daily_path` is where
    /// the day's log really is).
    pub fn daily_place(&self, at: DateTime<Utc>) -> VaultPath {
        let day = at.with_timezone(&self.tz()).date_naive();
        let name = crate::base::vault::layout::daily_note(&self.folder(), day);
        fixed_path(&name).unwrap_or_else(|_| VaultPath::root())
    }

    /// Where the day's log of `at` is: its note in the log folder, or in `agent/log/` when the
    /// note there is not tabd's (`daily`).
    pub fn daily_path(&self, at: DateTime<Utc>) -> VaultPath {
        self.resolve(self.daily_place(at))
    }

    pub fn jsonl_path(&self, at: DateTime<Utc>) -> VaultPath {
        let name = crate::base::vault::layout::run_records(at.with_timezone(&self.tz()).date_naive());
        fixed_path(&name).unwrap_or_else(|_| VaultPath::root())
    }

    /// Appends a run's section `text` to the daily note `path` — before its closing `## Events`
    /// section, if it has one — or to the day's note in `agent/log/` when the one at `path` is
    /// not tabd's (`daily`). A new note gets tabd's header first.
    pub fn append_daily(&self, path: &VaultPath, text: &str) -> Result<(), VaultError> {
        self.write_day(path, |end| daily::run_entry(text, end)).map(drop)
    }

    /// Appends one JSON line to `path`.
    pub fn append_jsonl(&self, path: &VaultPath, record: &Value) -> Result<(), VaultError> {
        let mut line = record.to_string();
        line.push('\n');
        self.vault.append(path, &line, None, false)
    }

    /// Appends the JSONL record.
    pub fn write_record(&self, rec: &RunRecord) -> Result<(), VaultError> {
        let value = serde_json::to_value(rec).map_err(|e| VaultError::Io(e.to_string()))?;
        self.append_jsonl(&self.jsonl_path(rec.started_at), &value)
    }

    /// A one-line entry: `- 09:00 · Risk Manager · skipped — daily token budget spent`.
    pub fn write_line(&self, at: DateTime<Utc>, who: &str, text: &str) -> Result<(), VaultError> {
        self.append_event(&self.daily_path(at), &self.render_line(at, who, text))
    }

    /// Appends one-line entries under the note's one `## Events` heading, its last section (a
    /// run's section goes in before it), never under a run's section (Obsidian's outline would
    /// put them inside that run). Where that heading is is read from the note's last
    /// `EVENTS_TAIL` bytes, under the writer's lock: an append costs the same in a note of any
    /// size.
    pub fn append_event(&self, path: &VaultPath, line: &str) -> Result<(), VaultError> {
        self.write_day(path, |end| daily::event_entry(line, end))
            .map(drop)
    }

    pub fn render_line(&self, at: DateTime<Utc>, who: &str, text: &str) -> String {
        // One line, whatever it quotes (an error, a path a model chose): no line end of any kind.
        let text = text.replace(['\r', '\n'], " ");
        format!(
            "- {} · {who} · {text}\n",
            at.with_timezone(&self.tz()).format("%H:%M")
        )
    }

    /// Whether the JSONL file `path` holds the record of `run_id` (crash recovery), read a line
    /// at a time (`read::has_line_with`): a file of any size, or with lines that are not UTF-8,
    /// is still looked through.
    pub fn has_record(&self, path: &VaultPath, run_id: &str) -> bool {
        let needle = format!("\"run_id\":{}", Value::String(run_id.to_string()));
        read::has_line_with(&self.vault, path, &needle)
    }

    /// Whether the daily note `path` already has `text` (crash recovery), read in pieces
    /// (`read::holds`), once a write into it that a crash cut short is finished: half a section
    /// is not the section, and written again beside it, it would be there twice.
    pub fn daily_has(&self, path: &VaultPath, text: &str) -> bool {
        if let Err(e) = self.guard().and_then(|g| self.vault.finish_splice(path, g)) {
            tracing::warn!("{path}: cannot finish the write a crash cut short: {e}");
        }
        read::holds(&self.vault, path, text.trim_end())
    }

    /// One run's section of the daily note (docs/spec.md §9).
    pub fn render_run(&self, rec: &RunRecord, human: &HumanRun) -> String {
        let start = rec.started_at.with_timezone(&self.tz());
        let mut s = format!(
            "## {} · {} · {}\n",
            start.format("%H:%M"),
            human.display_name,
            rec.trigger.kind
        );
        s.push_str(&format!("- **Outcome:** {}\n", outcome_line(rec)));
        s.push_str(&triage_line(rec));
        if let Some(device) = self.vault.device() {
            s.push_str(&format!("- **Device:** {device}\n"));
        }
        if !human.children.is_empty() {
            let (tokens, usd) = human.children_spent;
            s.push_str(&format!(
                "- **With delegated runs:** {} run{} · {} tokens · {} — in all {} tokens · {}\n",
                human.children.len(),
                if human.children.len() == 1 { "" } else { "s" },
                thousands(tokens),
                crate::base::cost::dollars(usd),
                thousands(tokens + rec.usage.tokens.total()),
                crate::base::cost::dollars(usd + rec.usage.cost_usd)
            ));
        }
        s.push_str(&format!("- **Trigger:** {}\n", self.trigger_line(rec)));
        if rec.trigger.kind == TriggerKind::Schedule && !rec.trigger.notes.is_empty() {
            s.push_str(&format!("- **Notes:** {}\n", note_links(rec).join(", ")));
        }
        s.push_str(&larger_than_prompt_lines(rec));
        s.push_str(&facts(human));
        if !human.thinking.trim().is_empty() {
            s.push_str(&format!("\n### Thinking\n{}\n", tame(&human.thinking)));
        }
        if !rec.tool_calls.is_empty() {
            s.push_str("\n### Actions\n");
            for (i, call) in rec.tool_calls.iter().enumerate() {
                s.push_str(&action_line(i + 1, call));
            }
        }
        for child in &human.children {
            s.push('\n');
            s.push_str(child);
        }
        if !human.summary.trim().is_empty() {
            s.push_str(&format!("\n### Summary\n{}\n", tame(&human.summary)));
        }
        // Only a run that changed something has something to undo (issue 30).
        if human.changes.is_empty() {
            s.push('\n');
        } else {
            s.push_str(&format!("\nUndo: `tabd undo {}`\n\n", rec.run_id));
        }
        s
    }

    /// A delegated run, as a `### Delegated · Role` subsection of its parent's section (docs/spec.md
    /// §18): the task, how it ended, what it changed, its answer, and how to find its record.
    pub fn render_delegated(&self, rec: &RunRecord, human: &HumanRun) -> String {
        let mut s = format!("### Delegated · {}\n", human.display_name);
        if let Some(task) = &rec.trigger.task {
            s.push_str(&format!("- **Task:** {}\n", one_line(task, 300)));
        }
        s.push_str(&format!("- **Outcome:** {}\n", outcome_line(rec)));
        s.push_str(&format!(
            "- **Run:** `{}` · {}\n",
            rec.run_id,
            wikilink(&self.vault.layout().role_file(&rec.role))
        ));
        s.push_str(&facts(human));
        if !rec.tool_calls.is_empty() {
            let names: Vec<String> = rec.tool_calls.iter().map(|c| format!("`{}`", c.name)).collect();
            s.push_str(&format!("- **Actions:** {}\n", names.join(", ")));
        }
        if !human.summary.trim().is_empty() {
            s.push_str("- **Answer:**\n");
            for line in tame(&human.summary).lines() {
                s.push_str(&format!("  > {line}\n"));
            }
        }
        s
    }

    /// `schedule `0 9 * * *` (due 09:00, ran late)`, or `inbox [[note]], …`.
    fn trigger_line(&self, rec: &RunRecord) -> String {
        match rec.trigger.kind {
            TriggerKind::Schedule => {
                let mut t = format!("schedule `{}`", rec.trigger.cron.as_deref().unwrap_or(""));
                if let Some(r) = rec.trigger.rerun {
                    let tz = self.tz();
                    t.push_str(&format!(
                        " (due {}, run again: its run that started {} did not finish)",
                        r.slot.with_timezone(&tz).format("%H:%M"),
                        r.interrupted_run_started_at.with_timezone(&tz).format("%H:%M:%S")
                    ));
                } else if let Some(due) = rec.trigger.scheduled_for {
                    if (rec.started_at - due).num_minutes() >= 2 {
                        let due = due.with_timezone(&self.tz()).format("%H:%M");
                        t.push_str(&format!(" (due {due}, ran late)"));
                    }
                }
                t
            }
            kind => {
                let moved = note_links(rec);
                if moved.is_empty() {
                    kind.to_string()
                } else {
                    format!("{kind} {}", moved.join(", "))
                }
            }
        }
    }
}

/// `ok · 14.2 s · 6 tool calls · 12,480 in (10,112 cached) / 611 out · $0.031`
fn outcome_line(rec: &RunRecord) -> String {
    let secs = (rec.ended_at - rec.started_at).num_milliseconds() as f64 / 1000.0;
    let u = &rec.usage.tokens;
    let input_all = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    let cached = if u.cache_read_tokens > 0 {
        format!(" ({} cached)", thousands(u.cache_read_tokens))
    } else {
        String::new()
    };
    // Always shown, `$0` included: a run with no known price (a local model) is not hidden.
    let cost = format!(" · {}", crate::base::cost::dollars(rec.usage.cost_usd));
    let calls = rec.tool_calls.len();
    let stats = format!(
        "{secs:.1} s · {calls} tool call{} · {} in{cached} / {} out{cost}",
        if calls == 1 { "" } else { "s" },
        thousands(input_all),
        thousands(u.output_tokens)
    );
    let big = match larger_than_prompt(rec) {
        Some(q) => format!(" — {q}"),
        None => String::new(),
    };
    match (rec.outcome, &rec.error) {
        (Outcome::Failed, Some(e)) if rec.ended.is_some() => format!(
            "{} — {} · {stats}",
            rec.ended.as_deref().unwrap_or_default(),
            one_line(e, 300)
        ),
        (Outcome::Failed, Some(e)) => format!("failed — {} · {stats}", one_line(e, 300)),
        (Outcome::Limit, Some(e)) => format!("limit — {}{big} · {stats}", one_line(e, 200)),
        // The first part of a run that waits for the person: not done, so never `ok` (docs/spec.md §9).
        (Outcome::Ok, _) if rec.waits() => {
            format!("{WAITING} — for your approval{big} · {stats}")
        }
        (Outcome::Ok, _) if rec.ended.as_deref() == Some(TRIAGED) => {
            format!(
                "{TRIAGED} — {} found nothing that needs doing · {stats}",
                rec.model
            )
        }
        (o, _) => format!("{o}{big} · {stats}"),
    }
}

/// `- **Models:** …`: which model answered and what each cost, for a run that asked its
/// triage model first and went on with the role's (a triaged run's Outcome line says it).
fn triage_line(rec: &RunRecord) -> String {
    let Some(t) = rec.triage.as_ref().filter(|t| t.verdict != "nothing") else {
        return String::new();
    };
    let first = match (&t.error, t.wanted.is_empty()) {
        (Some(e), _) => format!("could not be used: {}", one_line(e, 200)),
        (None, false) => format!("wanted {}, not run", t.wanted.join(", ")),
        (None, true) => "handed over".into(),
    };
    let main = crate::base::cost::round_usd(rec.usage.cost_usd - t.usage.cost_usd).max(0.0);
    format!(
        "- **Models:** triage {} ({first}) {} → {} {}\n",
        t.model,
        crate::base::cost::dollars(t.usage.cost_usd),
        rec.model,
        crate::base::cost::dollars(main)
    )
}

/// The section's list lines after Trigger: what changed, notes given up on or to be retried.
fn facts(human: &HumanRun) -> String {
    let mut s = String::new();
    let mut changed: Vec<String> = Vec::new();
    for c in &human.changes {
        let link = match c.kind {
            crate::base::calls::ChangeKind::Triggered => wikilink_by_name(&c.path),
            _ => wikilink(&c.path),
        };
        let item = format!("{link} ({})", c.kind.as_str());
        if !changed.contains(&item) {
            changed.push(item);
        }
    }
    if !changed.is_empty() {
        s.push_str(&format!("- **Changed:** {}\n", changed.join(", ")));
    }
    for (note, attempts) in &human.failed_notes {
        s.push_str(&format!(
            "- **Moved to failed/:** {} after {attempts} failed runs\n",
            wikilink(note)
        ));
    }
    for line in &human.notes {
        s.push_str(&format!("- {line}\n"));
    }
    for (note, attempts) in &human.retry_notes {
        s.push_str(&format!(
            "- **Will retry:** {} (attempt {attempts} failed)\n",
            wikilink(note)
        ));
    }
    s
}

/// `3. `read_file` project/timeline.md — error text`
fn action_line(n: usize, call: &ToolCallRecord) -> String {
    let mut line = match &call.server {
        Some(server) => format!("{n}. `{}` ({server})", call.name),
        None => format!("{n}. `{}`", call.name),
    };
    let subject = call_subject(&call.input);
    if !subject.is_empty() {
        line.push(' ');
        line.push_str(&subject);
    }
    if let Some(err) = &call.error {
        line.push_str(&format!(" — {}", one_line(err, 160)));
    }
    if let Some(note) = &call.approval {
        line.push_str(&format!(" — waiting for approval in {}", wikilink(note)));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::calls::ChangeKind;
    use serde_json::json;

    fn test_vault() -> std::sync::Arc<Vault> {
        std::sync::Arc::new(Vault::open(std::path::Path::new("/")).unwrap())
    }

    #[test]
    fn a_delegation_shows_whom_it_asked_and_what_not_json() {
        let call = |input: Value| ToolCallRecord {
            name: "delegate".into(),
            input,
            ok: true,
            error: None,
            bytes: 0,
            server: None,
            approval: None,
        };
        let one = action_line(1, &call(json!({"role": "risk", "task": "Rate the auth delay."})));
        assert_eq!(one, "1. `delegate` → risk: Rate the auth delay.\n");
        let many = action_line(
            2,
            &call(
                json!({"tasks": [{"role": "risk", "task": "Rate it."}, {"role": "comms", "task": "Draft a note."}]}),
            ),
        );
        assert_eq!(many, "2. `delegate` → risk: Rate it.; → comms: Draft a note.\n");
        assert!(!many.contains('{'));
    }

    #[test]
    fn records_serialize_to_the_contract_shape_with_cost() {
        let mut rec = record();
        rec.usage.cost_usd = 0.0312;
        let v = serde_json::to_value(&rec).unwrap();
        assert_eq!(v["outcome"], "ok");
        assert_eq!(v["trigger"]["kind"], "schedule");
        assert_eq!(
            v["usage"],
            json!({"input_tokens": 2368, "output_tokens": 611, "cache_read_tokens": 10112,
                   "cache_write_tokens": 0, "cost_usd": 0.0312})
        );
        assert!(
            v["tool_calls"][0].get("server").is_none(),
            "vault tools have no server"
        );
        let text = RunLog::new(test_vault(), chrono_tz::UTC).render_run(&rec, &HumanRun::default());
        assert!(text.contains("/ 611 out · $0.031\n"), "{text}");
    }

    pub(super) fn record() -> RunRecord {
        let start = DateTime::parse_from_rfc3339("2026-11-23T09:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        RunRecord {
            run_id: "r1".into(),
            role: "delivery".into(),
            trigger: TriggerRecord {
                kind: TriggerKind::Schedule,
                notes: vec![],
                scheduled_for: Some(start),
                cron: Some("0 9,17 * * 1-5".into()),
                parent_run_id: None,
                task: None,
                rerun: None,
            },
            started_at: start,
            ended_at: start + chrono::Duration::milliseconds(14_200),
            outcome: Outcome::Ok,
            error: None,
            model: "m".into(),
            requests: 0,
            usage: UsageRecord {
                tokens: Usage {
                    input_tokens: 2368,
                    output_tokens: 611,
                    cache_read_tokens: 10_112,
                    cache_write_tokens: 0,
                },
                cost_usd: 0.0,
            },
            tool_calls: vec![
                ToolCallRecord {
                    name: "read_file".into(),
                    input: json!({"path": "project/timeline.md"}),
                    ok: true,
                    error: None,
                    bytes: 1,
                    server: None,
                    approval: None,
                },
                ToolCallRecord {
                    name: "write_file".into(),
                    input: json!({"path": "project/blockers/auth-delay.md", "content": "x"}),
                    ok: true,
                    error: None,
                    bytes: 1,
                    server: None,
                    approval: None,
                },
            ],
            moved: vec![],
            children: vec![],
            ended: None,
            notes_truncated: Vec::new(),
            triage: None,
        }
    }

    #[test]
    fn section_matches_the_contract_shape() {
        let log = RunLog::new(test_vault(), chrono_tz::UTC);
        let human = HumanRun {
            display_name: "Delivery Manager".into(),
            thinking: "The auth delay threatens the date.".into(),
            summary: "Recorded the blocker.\n## Next\nWatch it.".into(),
            changes: vec![
                Change {
                    path: "project/blockers/auth-delay.md".into(),
                    kind: ChangeKind::Written,
                },
                Change {
                    path: "project/timeline.md".into(),
                    kind: ChangeKind::Appended,
                },
            ],
            ..HumanRun::default()
        };
        let text = log.render_run(&record(), &human);
        assert_eq!(
            text,
            "## 09:00 · Delivery Manager · schedule\n\
             - **Outcome:** ok · 14.2 s · 2 tool calls · 12,480 in (10,112 cached) / 611 out · $0\n\
             - **Trigger:** schedule `0 9,17 * * 1-5`\n\
             - **Changed:** [[project/blockers/auth-delay]] (written), [[project/timeline]] (appended)\n\
             \n### Thinking\nThe auth delay threatens the date.\n\
             \n### Actions\n1. `read_file` project/timeline.md\n2. `write_file` project/blockers/auth-delay.md\n\
             \n### Summary\nRecorded the blocker.\n**Next**\nWatch it.\n\
             \nUndo: `tabd undo r1`\n\n"
        );
    }

    #[test]
    fn failed_and_inbox_sections() {
        let log = RunLog::new(test_vault(), chrono_tz::UTC);
        let mut rec = record();
        rec.outcome = Outcome::Failed;
        rec.error = Some("anthropic: HTTP 400: bad".into());
        rec.trigger = TriggerRecord {
            kind: TriggerKind::Inbox,
            notes: vec!["agent/inbox/delivery/a.md".into()],
            scheduled_for: None,
            cron: None,
            parent_run_id: None,
            task: None,
            rerun: None,
        };
        rec.moved = vec![Moved {
            from: "agent/inbox/delivery/a.md".into(),
            to: "agent/inbox/delivery/failed/a.md".into(),
        }];
        let human = HumanRun {
            display_name: "D".into(),
            failed_notes: vec![("agent/inbox/delivery/failed/a.md".into(), 3)],
            ..HumanRun::default()
        };
        let text = log.render_run(&rec, &human);
        assert!(
            text.contains("- **Outcome:** failed — anthropic: HTTP 400: bad · "),
            "{text}"
        );
        assert!(
            text.contains("- **Trigger:** inbox [[agent/inbox/delivery/failed/a]]"),
            "{text}"
        );
        assert!(
            text.contains("- **Moved to failed/:** [[agent/inbox/delivery/failed/a]] after 3 failed runs"),
            "{text}"
        );
    }

    #[test]
    fn concurrent_writers_never_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let log = std::sync::Arc::new(RunLog::writer(
            std::sync::Arc::new(Vault::open(dir.path()).unwrap()),
            chrono_tz::UTC,
            SpliceGuard::for_tests(),
        ));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..20 {
                        let mut rec = record();
                        rec.run_id = format!("{t}-{i}");
                        let human = HumanRun {
                            display_name: format!("Role {t}"),
                            summary: format!("run {t}-{i}\n").repeat(50),
                            ..HumanRun::default()
                        };
                        let day = log.daily_path(rec.started_at);
                        log.append_daily(&day, &log.render_run(&rec, &human)).unwrap();
                        log.write_record(&rec).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let daily =
            std::fs::read_to_string(dir.path().join(log.daily_path(record().started_at).as_path())).unwrap();
        assert!(daily.starts_with("---\ntabd: run-log\n---\n# 2026-11-23\n\n## 09:00"));
        let sections: Vec<&str> = daily.split("\n## ").skip(1).collect();
        assert_eq!(sections.len(), 160);
        for s in sections {
            let role = s.split(" · ").nth(1).unwrap();
            let t = role.trim_start_matches("Role ");
            assert!(
                s.lines()
                    .filter(|l| l.starts_with("run "))
                    .all(|l| l.starts_with(&format!("run {t}-"))),
                "interleaved section:\n{s}"
            );
        }
        let jsonl =
            std::fs::read_to_string(dir.path().join(log.jsonl_path(record().started_at).as_path())).unwrap();
        assert_eq!(jsonl.lines().count(), 160);
        assert!(jsonl.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));
    }
}
