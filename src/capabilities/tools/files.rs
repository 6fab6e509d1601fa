//! File tools: read_file, list_files, search_files, write_file, append_file, move_file.

use chrono::{DateTime, Local};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::pages::{self, PageAt};
use super::{args, schema_of, Tool, ToolContext, ToolError};
use crate::base::calls::{Change, ChangeKind, Risk, ToolResult};
use crate::base::text::thousands;
use crate::base::vault::{Entry, VaultPath};
use crate::setup::skills::{self, within};

pub use super::pages::READ_PAGE_BYTES;
/// Largest file `read_file`, `append_file` or `search_files` will open.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
// Every inbox note tabd hands a run can be read whole, in pages (docs/spec.md §5, §8).
const _: () = assert!(crate::records::inbox::MAX_NOTE_BYTES <= MAX_FILE_BYTES);
/// Largest `write_file` / `append_file` content.
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;
/// Entries `list_files` shows before "N more".
pub const LIST_CAP: usize = 200;
/// Matches `search_files` shows before "more not shown".
pub const SEARCH_CAP: usize = 100;

/// Said beside a note that is the person's own, where this role must ask to change it.
pub const PERSONS_NOTE: &str = "the person's own note: a change to it waits for their approval";

/// The files a call of `name` with `input` would change — real paths, after the write checks —
/// when `name` is a tool that changes the files it names (`calls::CHANGING_TOOLS`). None when the
/// checks refuse the call: the tool refuses it itself (a refused call is never asked for).
pub fn changed_paths(ctx: &ToolContext<'_>, name: &str, input: &Value) -> Vec<VaultPath> {
    let checked = match name {
        "write_file" => args::<WriteArgs>(input).ok().map(|a| write_target(ctx, &a.path)),
        "append_file" => args::<AppendArgs>(input).ok().map(|a| write_target(ctx, &a.path)),
        "move_file" => args::<MoveArgs>(input).ok().map(|a| {
            let (from, to) = (path_arg(&a.from)?, path_arg(&a.to)?);
            let (from, to) = ctx.policy.check_move(ctx.vault, &from, &to)?;
            Ok(vec![from, to])
        }),
        _ => None,
    };
    checked.and_then(Result::ok).unwrap_or_default()
}

/// A write's target after the write checks.
fn write_target(ctx: &ToolContext<'_>, raw: &str) -> Result<Vec<VaultPath>, ToolError> {
    let path = path_arg(raw)?;
    Ok(vec![ctx.policy.check_write(ctx.vault, &path)?])
}

fn path_arg(raw: &str) -> Result<VaultPath, ToolError> {
    Ok(VaultPath::parse(raw, false)?)
}

/// Folders listings and searches never enter: tabd's state, git, Obsidian's config and trash.
fn hidden(path: &VaultPath) -> bool {
    path.components().any(|c| c.starts_with('.'))
}

pub struct ReadFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// Vault-relative path of the file, e.g. project/timeline.md
    path: String,
    /// First line to return, counting from 1 (default 1).
    #[serde(default)]
    offset: Option<usize>,
    /// Most lines to return (default: as many as fit in 64 KiB).
    #[serde(default)]
    limit: Option<usize>,
    /// For a line longer than one page: the byte of line `offset` to go on from (a result that
    /// ends inside a line gives this number).
    #[serde(default)]
    line_byte: Option<usize>,
}

impl ReadArgs {
    /// Where the page starts and how many lines it may hold.
    fn at(&self) -> PageAt {
        PageAt {
            offset: self.offset.unwrap_or(1),
            line_byte: self.line_byte.unwrap_or(0),
            limit: self.limit.unwrap_or(usize::MAX),
        }
    }
}

/// The text a `read_file` call returns for `page` of `text`: which lines, the page, and the
/// exact call for the next page.
fn render_page(path: &VaultPath, text: &str, page: &pages::Page) -> String {
    let skipped = page.start - pages_line_start(text, page);
    let from = if skipped > 0 {
        format!(" (line {} from byte {skipped})", page.first)
    } else {
        String::new()
    };
    let shown = &text[page.start..page.end];
    let mut out = format!(
        "{path} — lines {}–{} of {}{from}\n\n{shown}",
        page.first, page.last, page.total
    );
    match page.next {
        Some((line, 0)) => out.push_str(&format!(
            "\n[more: lines {line}–{} not shown; call read_file with offset={line}]",
            page.total
        )),
        Some((line, byte)) => out.push_str(&format!(
            "\n[line {line} goes on past this page: call read_file with offset={line} and line_byte={byte} for the rest of it]"
        )),
        None => {}
    }
    out
}

/// Where the first line of `page` starts in `text` (its `start` may be inside that line).
fn pages_line_start(text: &str, page: &pages::Page) -> usize {
    text[..page.start].rfind('\n').map_or(0, |i| i + 1)
}

/// The bytes of `text` a `read_file` call with `input` returned (as `read_file` pages it now),
/// if `input` names `path` and asks for a page `text` has. How a run tells how much of a note
/// larger than one prompt the model read.
pub fn span_read(path: &VaultPath, text: &str, input: &Value) -> Option<std::ops::Range<usize>> {
    let a: ReadArgs = serde_json::from_value(input.clone()).ok()?;
    if VaultPath::parse(&a.path, false).ok()? != *path {
        return None;
    }
    let page = pages::page(text, a.at(), READ_PAGE_BYTES).ok()?;
    Some(page.start..page.end)
}

impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }
    fn description(&self) -> &'static str {
        "Read a text file of the vault. Long files come in pages of up to 64 KiB; the result says \
         which lines you got and the offset (and, inside a very long line, the line_byte) for the \
         next page."
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn schema(&self) -> Value {
        schema_of::<ReadArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: ReadArgs = args(input)?;
        let path = path_arg(&a.path)?;
        let real = ctx.policy.check_read(ctx.vault, &path)?;
        skills_only(ctx, &path, &real)?;
        let (text, _) = ctx.vault.read_for_model(&real, MAX_FILE_BYTES)?;
        if text.is_empty() {
            return Ok(ToolResult::ok(format!("{path} is empty"), 0, vec![]));
        }
        let page = pages::page(&text, a.at(), READ_PAGE_BYTES)
            .map_err(|e| ToolError::InvalidInput(format!("{path}: {e}")))?;
        let mut out = render_page(&path, &text, &page);
        if ctx.waits_for_person(&real) {
            out = format!("[{PERSONS_NOTE}]\n{out}");
        }
        Ok(ToolResult::ok(out, (page.end - page.start) as u64, vec![]))
    }
}

/// A role whose `read_file` comes from its skills alone reads inside their folders only: the
/// path it gives and the one it leads to (a link out of a skill's folder is refused).
fn skills_only(ctx: &ToolContext<'_>, path: &VaultPath, real: &VaultPath) -> Result<(), ToolError> {
    let skills = &ctx.role.skills;
    let layout = ctx.vault.layout();
    if !ctx.role.reads_only_skills() || (within(layout, skills, path) && within(layout, skills, real)) {
        return Ok(());
    }
    let folders: Vec<String> = skills
        .iter()
        .map(|s| format!("{}/", skills::folder(layout, s)))
        .collect();
    let leads = if real == path {
        String::new()
    } else {
        format!(" (it leads to {real})")
    };
    Err(ToolError::Refused(format!(
        "{path}{leads}: this role reads only the skills it lists, inside their folders ({}); a person can add \
         read_file under ## Tools in {} to let it read the vault",
        folders.join(", "),
        ctx.role.path.display()
    )))
}

pub struct ListFiles;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Folder to list (default: the vault root).
    #[serde(default)]
    path: Option<String>,
    /// Also list sub-folders' contents.
    #[serde(default)]
    recursive: bool,
    /// Only entries matching this glob, e.g. *.md or project/**/*.md
    #[serde(default)]
    pattern: Option<String>,
}

fn format_entry(e: &Entry) -> String {
    if e.is_dir {
        return format!("{}/", e.path);
    }
    let when = e
        .modified
        .map(|t| DateTime::<Local>::from(t).format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default();
    format!("{}  {} B  {when}", e.path, thousands(e.size))
}

impl Tool for ListFiles {
    fn name(&self) -> &'static str {
        "list_files"
    }
    fn description(&self) -> &'static str {
        "List files and folders of the vault with sizes and modification times. Folders end in /. \
         Hidden folders (.obsidian, .git, .tabd) are not listed."
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn schema(&self) -> Value {
        schema_of::<ListArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: ListArgs = args(input)?;
        let dir = VaultPath::parse(a.path.as_deref().unwrap_or(""), true)?;
        let real = ctx.policy.check_read(ctx.vault, &dir)?;
        let matcher = match &a.pattern {
            Some(p) => Some(
                crate::records::access::glob(p)
                    .map_err(|e| ToolError::InvalidInput(format!("pattern `{p}` is not a glob: {e}")))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let entries = ctx.vault.walk(&real, a.recursive, &hidden)?;
        let shown: Vec<&Entry> = entries
            .iter()
            .filter(|e| match (&matcher, &a.pattern) {
                (Some(m), Some(p)) if !p.contains('/') => m.is_match(e.path.file_name()),
                (Some(m), _) => m.is_match(e.path.as_str()),
                _ => true,
            })
            .collect();
        if shown.is_empty() {
            return Ok(ToolResult::ok(format!("{dir}: nothing found"), 0, vec![]));
        }
        let listed: Vec<&Entry> = shown.iter().take(LIST_CAP).copied().collect();
        let persons = persons_among(ctx, &listed);
        let mut out: Vec<String> = listed
            .iter()
            .zip(&persons)
            .map(|(e, theirs)| match theirs {
                true => format!("{}  · person's", format_entry(e)),
                false => format_entry(e),
            })
            .collect();
        if persons.contains(&true) {
            out.insert(0, format!("(· person's = {PERSONS_NOTE})"));
        }
        if shown.len() > LIST_CAP {
            out.push(format!(
                "… and {} more; narrow with path or pattern",
                shown.len() - LIST_CAP
            ));
        }
        let text = out.join("\n");
        Ok(ToolResult::ok(text.clone(), text.len() as u64, vec![]))
    }
}

/// For each entry, whether it is a file of the person's this role must ask to change. The
/// record is read once; a file it does not name is the person's without being read.
fn persons_among(ctx: &ToolContext<'_>, entries: &[&Entry]) -> Vec<bool> {
    use crate::records::authorship::Whose;
    let Some(authorship) = ctx.authorship else {
        return vec![false; entries.len()];
    };
    // Only files this role could change at all: tabd's own and protected ones are refused, not asked for.
    let asks = |e: &Entry| {
        !e.is_dir
            && ctx.policy.person_note_mode(&e.path) != crate::base::calls::Mode::Auto
            && ctx.policy.check_write(ctx.vault, &e.path).is_ok()
    };
    let paths: Vec<VaultPath> = entries.iter().map(|e| e.path.clone()).collect();
    // Unknown (the record cannot be read) counts as the person's.
    let whose = authorship
        .whose_each(&paths)
        .unwrap_or_else(|_| vec![Whose::Persons; paths.len()]);
    entries
        .iter()
        .zip(whose)
        .map(|(e, w)| asks(e) && w == Whose::Persons)
        .collect()
}

pub struct SearchFiles;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// A regular expression or plain text to find (case-insensitive).
    query: String,
    /// Folder or file to search (default: the whole vault).
    #[serde(default)]
    path: Option<String>,
}

impl Tool for SearchFiles {
    fn name(&self) -> &'static str {
        "search_files"
    }
    fn description(&self) -> &'static str {
        "Search the vault's text files for a regular expression or plain text (case-insensitive). \
         Returns matching lines as path:line: text."
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn schema(&self) -> Value {
        schema_of::<SearchArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: SearchArgs = args(input)?;
        if a.query.is_empty() {
            return Err(ToolError::InvalidInput("query is empty".into()));
        }
        let re = regex::RegexBuilder::new(&a.query)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .or_else(|_| {
                regex::RegexBuilder::new(&regex::escape(&a.query))
                    .case_insensitive(true)
                    .build()
            })
            .map_err(|e| ToolError::InvalidInput(format!("cannot search for that: {e}")))?;
        let start = VaultPath::parse(a.path.as_deref().unwrap_or(""), true)?;
        let real = ctx.policy.check_read(ctx.vault, &start)?;
        let files: Vec<Entry> = match ctx.vault.metadata(&real)? {
            e if !e.is_dir => vec![e],
            _ => ctx
                .vault
                .walk(&real, true, &hidden)?
                .into_iter()
                .filter(|e| !e.is_dir)
                .collect(),
        };
        let mut hits = Vec::new();
        let mut more = 0usize;
        let mut bytes = 0u64;
        for file in files {
            if file.size > MAX_FILE_BYTES {
                continue;
            }
            let Ok((text, _)) = ctx.vault.read_for_model(&file.path, MAX_FILE_BYTES) else {
                continue;
            };
            bytes += text.len() as u64;
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    if hits.len() < SEARCH_CAP {
                        let shown: String = line.trim().chars().take(200).collect();
                        hits.push(format!("{}:{}: {shown}", file.path, i + 1));
                    } else {
                        more += 1;
                    }
                }
            }
        }
        if hits.is_empty() {
            return Ok(ToolResult::ok(
                format!("no match for `{}` in {start}", a.query),
                bytes,
                vec![],
            ));
        }
        if more > 0 {
            hits.push(format!(
                "… {more} more matches not shown; narrow the query or path"
            ));
        }
        Ok(ToolResult::ok(hits.join("\n"), bytes, vec![]))
    }
}

pub struct WriteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// Vault-relative path of the file to create or replace, e.g. project/blockers/auth.md
    path: String,
    /// The whole new content of the file.
    content: String,
}

fn check_size(content: &str) -> Result<(), ToolError> {
    if content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::InvalidInput(format!(
            "content is {} bytes; the limit is {} bytes per call",
            thousands(content.len() as u64),
            thousands(MAX_WRITE_BYTES as u64)
        )));
    }
    Ok(())
}

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }
    fn description(&self) -> &'static str {
        "Create a file or replace its whole content (atomically; folders are created). At most 1 MiB. \
         To add to a note without replacing it, use append_file. A note the person wrote (list_files and \
         read_file mark it) is not changed at once: the change waits for their approval."
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn schema(&self) -> Value {
        schema_of::<WriteArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: WriteArgs = args(input)?;
        check_size(&a.content)?;
        let path = path_arg(&a.path)?;
        let real = ctx.policy.check_write(ctx.vault, &path)?;
        if ctx.vault.metadata(&real).is_ok_and(|e| e.is_dir) {
            return Err(ToolError::Failed(format!("{path} is a folder")));
        }
        let existed = ctx.vault.exists(&real);
        ctx.before_change(&real)?;
        ctx.vault.write_atomic(&real, a.content.as_bytes())?;
        let how = if existed { "replaced" } else { "new file" };
        Ok(ToolResult::ok(
            format!(
                "wrote {} bytes to {path} ({how})",
                thousands(a.content.len() as u64)
            ),
            a.content.len() as u64,
            vec![Change {
                path: real.as_str().to_string(),
                kind: ChangeKind::Written,
            }],
        ))
    }
}

pub struct AppendFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    /// Vault-relative path of the file (created if missing).
    path: String,
    /// Text to add at the end; a line break is put before it if the file does not end with one.
    content: String,
}

/// Appends `content` to `path` atomically (read, join, replace), adding a newline between.
pub(crate) fn append(ctx: &ToolContext<'_>, real: &VaultPath, content: &str) -> Result<(), ToolError> {
    let (mut text, existed) = match ctx.vault.read_text(real, MAX_FILE_BYTES) {
        Ok(t) => (t, true),
        Err(crate::base::vault::VaultError::NotFound(_)) => (String::new(), false),
        Err(e) => return Err(e.into()),
    };
    // What is there stays the file's first bytes: the journal keeps their length, not a copy.
    ctx.before_append(real, existed.then_some(text.as_bytes()))?;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(content);
    ctx.vault.write_atomic(real, text.as_bytes())?;
    Ok(())
}

impl Tool for AppendFile {
    fn name(&self) -> &'static str {
        "append_file"
    }
    fn description(&self) -> &'static str {
        "Add text at the end of a file, creating it if missing; what is there stays. An addition to a \
         note the person wrote (list_files and read_file mark it) waits for their approval."
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn schema(&self) -> Value {
        schema_of::<AppendArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: AppendArgs = args(input)?;
        check_size(&a.content)?;
        let path = path_arg(&a.path)?;
        let real = ctx.policy.check_write(ctx.vault, &path)?;
        append(ctx, &real, &a.content)?;
        Ok(ToolResult::ok(
            format!("appended {} bytes to {path}", thousands(a.content.len() as u64)),
            a.content.len() as u64,
            vec![Change {
                path: real.as_str().to_string(),
                kind: ChangeKind::Appended,
            }],
        ))
    }
}

/// Journals both ends of a move: each file under `from` (a folder moves whole) and where it lands.
fn journal_move(ctx: &ToolContext<'_>, from: &VaultPath, to: &VaultPath) -> Result<(), ToolError> {
    if ctx.journal.is_none() {
        return Ok(());
    }
    if !ctx.vault.metadata(from).is_ok_and(|m| m.is_dir) {
        ctx.before_change(from)?;
        return ctx.before_change(to);
    }
    for entry in ctx.vault.walk(from, true, &|_| false)? {
        if entry.is_dir {
            continue;
        }
        let rest = entry.path.as_str()[from.as_str().len()..].trim_start_matches('/');
        ctx.before_change(&entry.path)?;
        ctx.before_change(&to.join(rest)?)?;
    }
    Ok(())
}

pub struct MoveFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MoveArgs {
    /// Vault-relative path of the file to move.
    from: String,
    /// Its new vault-relative path; must not exist yet.
    to: String,
}

impl Tool for MoveFile {
    fn name(&self) -> &'static str {
        "move_file"
    }
    fn description(&self) -> &'static str {
        "Move or rename a file within the vault. Never replaces an existing file. Moves files, not \
         folders. Moving a note the person wrote waits for their approval."
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn schema(&self) -> Value {
        schema_of::<MoveArgs>()
    }
    fn call(&self, ctx: &ToolContext<'_>, input: &Value) -> Result<ToolResult, ToolError> {
        let a: MoveArgs = args(input)?;
        let from = path_arg(&a.from)?;
        let to = path_arg(&a.to)?;
        let (real_from, real_to) = ctx.policy.check_move(ctx.vault, &from, &to)?;
        journal_move(ctx, &real_from, &real_to)?;
        ctx.vault.rename_noreplace(&real_from, &real_to)?;
        Ok(ToolResult::ok(
            format!("moved {from} to {to}"),
            0,
            vec![Change {
                path: real_to.as_str().to_string(),
                kind: ChangeKind::Moved,
            }],
        ))
    }
}
