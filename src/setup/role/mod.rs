//! Role files: parsing, inheritance (`extends`) and validation (docs/spec.md §3).
//!
//! A role is one Markdown file in `roles/`. Loading never fails as a whole: each file yields a
//! role or its diagnostics, so one typo never stops the others.

mod body;
pub mod caps;
pub mod context;
mod lost_opening;
pub mod sections;
pub mod settings;
pub mod triage;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use chrono_tz::Tz;

use crate::base::diag::Diagnostic;
use crate::base::environment::Env;
use crate::base::text::did_you_mean;
use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::formats::frontmatter;
use crate::formats::schedule::{Schedule, ScheduleLine};

pub use context::ContextEntry;
pub use sections::SectionKind;
pub use settings::{CatchUp, RoleSettings};

/// The tool a role's skills are read with.
const READ_FILE: &str = "read_file";

/// The tools a role gets when its file has no `## Tools` section.
pub const DEFAULT_TOOLS: &[&str] = &["read_file", "list_files", "search_files", "remember"];

/// Largest role file read.
const MAX_ROLE_BYTES: u64 = 1024 * 1024;

/// Longest role name (it becomes folder and note names).
const MAX_ROLE_NAME: usize = 64;

/// Role names become inbox folders, memory files and frontmatter values: letters, digits, `-`
/// and `_` only (a leading `_` marks an abstract role).
fn check_role_name(name: &str) -> Result<(), BadRoleName> {
    let ok = !name.is_empty()
        && name.len() <= MAX_ROLE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && !name.starts_with('-');
    if ok {
        return Ok(());
    }
    let suggestion: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    Err(BadRoleName {
        name: name.to_string(),
        suggestion,
    })
}

/// A role name (its file name) that cannot become folder and note names, with a fixed one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the role name `{name}` (the file name) may use only letters, digits, `-` and `_`, at most \
     {MAX_ROLE_NAME} characters; rename the file{}",
    if suggestion.is_empty() { String::new() } else { format!(", e.g. to roles/{suggestion}.md") }
)]
pub struct BadRoleName {
    pub name: String,
    pub suggestion: String,
}

/// How deep `extends` chains may go (a role, its parent, grandparent and great-grandparent).
pub const MAX_EXTENDS_DEPTH: usize = 3;

/// A role as one file says it, before inheritance.
#[derive(Debug, Clone, Default)]
struct RoleDef {
    name: String,
    path: PathBuf,
    title: Option<String>,
    settings: RoleSettings,
    key_lines: HashMap<String, usize>,
    mission: Option<String>,
    goals: Vec<String>,
    context: Vec<ContextEntry>,
    /// Where each context entry is written: file and line.
    context_lines: HashMap<ContextEntry, (PathBuf, usize)>,
    tools: Option<Vec<String>>,
    mcp: Vec<McpAllow>,
    skills: Vec<String>,
    skill_lines: HashMap<String, (PathBuf, usize)>,
    schedule: Option<Vec<ScheduleLine>>,
    inbox: Option<VaultPath>,
    preferences: Option<String>,
    rules: Vec<String>,
    extra: Vec<(String, String)>,
    diagnostics: Vec<Diagnostic>,
}

/// A role ready to run: inheritance applied, everything checked.
#[derive(Debug, Clone)]
pub struct Role {
    /// File stem: `delivery`.
    pub name: String,
    /// Vault-relative path of the file: `roles/delivery.md`.
    pub path: PathBuf,
    /// The H1, else the name.
    pub display_name: String,
    /// `_name.md`: inherit-only, never fired.
    pub is_abstract: bool,
    pub settings: RoleSettings,
    pub mission: Option<String>,
    pub goals: Vec<String>,
    pub context: Vec<ContextEntry>,
    /// Where each context entry is written (this role's file or a parent's) and on which line,
    /// for what `tabd validate` says of it.
    pub context_lines: HashMap<ContextEntry, (PathBuf, usize)>,
    pub tools: Vec<String>,
    /// MCP tools allowed in `## Tools` (`server/*`, `server/tool`).
    pub mcp: Vec<McpAllow>,
    /// The skills `## Skills` lists (inherited like tools), and where each is written.
    pub skills: Vec<String>,
    pub skill_lines: HashMap<String, (PathBuf, usize)>,
    pub schedule: Schedule,
    /// The file whose `## Schedule` the role uses (its own, or the parent's it inherits), for
    /// what `tabd validate` says of a schedule line.
    pub schedule_path: PathBuf,
    /// The inbox folder.
    pub inbox: VaultPath,
    pub preferences: Option<String>,
    pub rules: Vec<String>,
    /// Unknown sections, passed to the model under their own headings.
    pub extra: Vec<(String, String)>,
}

impl Role {
    pub fn enabled(&self) -> bool {
        self.settings.enabled()
    }

    /// `skip_unchanged` defaults on for interval schedules, off for clock-time ones (docs/spec.md §3).
    pub fn skip_unchanged(&self) -> bool {
        self.settings
            .skip_unchanged
            .unwrap_or_else(|| self.schedule.is_interval())
    }

    pub fn catch_up(&self) -> CatchUp {
        self.settings.catch_up()
    }

    /// A vault tool the role may call (listed, and not in `deny_tools`). A role that lists
    /// skills may read them even without `read_file` in `## Tools` (see `reads_only_skills`).
    pub fn has_tool(&self, name: &str) -> bool {
        let listed = self.tools.iter().any(|t| t == name) || (name == READ_FILE && !self.skills.is_empty());
        listed && !self.settings.deny_tools.iter().any(|d| d == name)
    }

    /// `read_file` is this role's only through its skills: it reads inside their folders and
    /// nowhere else.
    pub fn reads_only_skills(&self) -> bool {
        !self.skills.is_empty() && !self.tools.iter().any(|t| t == READ_FILE)
    }

    /// How deep delegation may go from a run of this role (default 1: children cannot delegate).
    pub fn delegation_depth(&self) -> u32 {
        if self.settings.can_delegate_to.is_empty() {
            return 0;
        }
        self.settings.max_delegation_depth()
    }

    /// How many levels a run of this role for `trigger` may still delegate: the role's own depth,
    /// lowered by what the runs above it allow. One rule for what the prompt offers and what the
    /// harness runs.
    pub fn delegation_left(&self, trigger: &crate::base::trigger::Trigger) -> u32 {
        if !self.may_delegate() {
            return 0;
        }
        let own = self.delegation_depth();
        trigger.delegation.as_ref().map_or(own, |d| d.depth_left.min(own))
    }

    /// Children one `delegate` call runs at once (default 3).
    pub fn parallel_delegates(&self) -> usize {
        self.settings.max_parallel_delegates().max(1) as usize
    }

    /// Whether a run of this role is offered `delegate`: it names roles it may delegate to, and
    /// does not deny the tool.
    pub fn may_delegate(&self) -> bool {
        !self.settings.can_delegate_to.is_empty() && !self.settings.deny_tools.iter().any(|d| d == "delegate")
    }

    /// The MCP servers whose tools this role lists (each once, in order).
    pub fn mcp_servers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for a in &self.mcp {
            if !out.contains(&a.server.as_str()) && !self.denies(&a.server, "*") {
                out.push(&a.server);
            }
        }
        out
    }

    /// Whether the role may call `tool` of MCP server `server`: listed, and not denied (deny
    /// wins over allow).
    pub fn allows_mcp(&self, server: &str, tool: &str) -> bool {
        let listed = self
            .mcp
            .iter()
            .any(|a| a.server == server && a.tool.as_deref().is_none_or(|t| t == tool));
        listed && !self.denies(server, tool)
    }

    /// `deny_tools` names `server/tool` or `server/*`.
    fn denies(&self, server: &str, tool: &str) -> bool {
        self.settings.deny_tools.iter().any(|d| {
            d.split_once('/')
                .is_some_and(|(s, t)| s == server && (t == "*" || t == tool))
        })
    }
}

/// One MCP entry of `## Tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpAllow {
    pub server: String,
    /// `None` for `server/*`.
    pub tool: Option<String>,
    /// Line in the role file (for "unknown server" errors).
    pub line: usize,
}

impl McpAllow {
    /// Reads `server/tool` or `server/*`.
    pub fn parse(text: &str, line: usize) -> Result<Self, BadMcpAllow> {
        let (server, tool) = text
            .split_once('/')
            .ok_or_else(|| BadMcpAllow::NotServerTool(text.to_string()))?;
        if !crate::setup::config::mcp::valid_name(server) {
            return Err(BadMcpAllow::Server {
                text: text.to_string(),
                server: server.to_string(),
            });
        }
        let ok_tool =
            |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        let tool = match tool {
            "*" => None,
            t if ok_tool(t) => Some(t.to_string()),
            t => {
                return Err(BadMcpAllow::Tool {
                    text: text.to_string(),
                    tool: t.to_string(),
                })
            }
        };
        Ok(Self {
            server: server.to_string(),
            tool,
            line,
        })
    }
}

/// Why a `## Tools` line with a `/` is not an MCP entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadMcpAllow {
    #[error("`{0}` is not server/tool")]
    NotServerTool(String),
    #[error(
        "`{text}`: `{server}` is not an MCP server name (a-z, 0-9, `-`, `_`); write server/* or server/tool"
    )]
    Server { text: String, server: String },
    #[error("`{text}`: `{tool}` is not a tool name; write server/* or server/tool")]
    Tool { text: String, tool: String },
}

/// What loading needs from outside: the default time zone, the environment for `${VAR}`, and
/// the MCP servers the config declares (to check roles' `server/…` tools; `None`: not checked).
#[derive(Debug, Clone)]
pub struct LoadContext {
    pub default_tz: Tz,
    pub env: Env,
    pub mcp_servers: Option<std::collections::BTreeSet<String>>,
    /// The config's hook sets (`[hooks.sets.NAME]`) a role's `hooks:` may name (`None`: not
    /// checked).
    pub hook_sets: Option<std::collections::BTreeSet<String>>,
    /// The config's provider and prices, to check `triage_model` (`None`: not checked).
    pub models: Option<triage::ModelsKnown>,
    /// Where tabd's folders are (a role's inbox when its file names none): the vault's when the
    /// roles are loaded from one.
    pub layout: crate::base::vault::layout::Layout,
}

impl LoadContext {
    pub fn new(default_tz: Tz, env: Env) -> Self {
        Self {
            default_tz,
            env,
            mcp_servers: None,
            hook_sets: None,
            models: None,
            layout: Default::default(),
        }
    }

    /// Roles checked against the config: its time zone and MCP servers.
    pub fn for_config(config: &crate::setup::config::Config, env: Env) -> Self {
        Self {
            default_tz: config.timezone,
            env,
            mcp_servers: Some(config.mcp.keys().cloned().collect()),
            hook_sets: Some(config.hooks.sets.keys().cloned().collect()),
            models: Some(triage::ModelsKnown {
                provider: config.provider.clone(),
                prices: config.prices.clone(),
            }),
            layout: Default::default(),
        }
    }
}

/// Every role of a vault: the good ones, the broken ones, and all diagnostics.
#[derive(Debug, Clone, Default)]
pub struct RoleSet {
    pub roles: BTreeMap<String, Role>,
    /// Broken roles by name, with their errors.
    pub broken: BTreeMap<String, Vec<Diagnostic>>,
    /// Every error and warning, sorted by file and line.
    pub diagnostics: Vec<Diagnostic>,
    /// Each role file's H1, broken ones included (status shows a person's names).
    pub titles: BTreeMap<String, String>,
}

impl RoleSet {
    /// Loads `<vault>/roles/*.md` (or the roles folder the vault's layout names). Files that are
    /// not regular files (a FIFO, a socket) and names that are not UTF-8 become errors of their
    /// own; they never block or stop the rest.
    pub fn load(vault: &Vault, ctx: &LoadContext) -> Self {
        let ctx = &LoadContext {
            layout: vault.layout().clone(),
            ..ctx.clone()
        };
        let roles = vault.layout().roles();
        let dir = VaultPath::parse(&roles, false).unwrap_or_else(|_| VaultPath::root());
        let listing = match vault.list(&dir) {
            Ok(l) => l,
            Err(e) => {
                let mut set = RoleSet::default();
                set.diagnostics.push(Diagnostic::error(
                    Path::new(&roles),
                    0,
                    format!(
                        "cannot read the roles folder in {} ({e}); run `tabd init` to create a vault",
                        vault.root().display()
                    ),
                ));
                return set;
            }
        };
        let role_files: Vec<&VaultPath> = listing
            .entries
            .iter()
            .filter(|e| {
                let file_name = e.path.file_name();
                file_name.ends_with(".md") && !file_name.starts_with('.') && !e.is_dir
            })
            .map(|e| &e.path)
            .collect();
        let mut files = crate::base::blocking::par_map(role_files, |path| {
            let name = path.file_name().trim_end_matches(".md").to_string();
            let text = vault.read_text(path, MAX_ROLE_BYTES);
            (name, PathBuf::from(path.as_str()), text)
        });
        let mut set_odd = Vec::new();
        for odd in &listing.odd {
            if odd.name.ends_with(".md") {
                set_odd.push(Diagnostic::error(
                    &Path::new(&roles).join(&odd.name),
                    0,
                    format!("this role file is skipped: {}", odd.why),
                ));
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        // A note of the person's in the roles folder (their own `roles/` in a vault tabd shares)
        // is not a role: left alone, and named once.
        let (files, not_roles): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(_, _, text)| text.as_deref().map_or(true, could_be_a_role));
        let mut set = Self::build(files, ctx, Some(vault));
        set.diagnostics.extend(set_odd);
        set.diagnostics.extend(not_roles.into_iter().map(|(_, path, _)| {
            Diagnostic::warning(
                &path,
                0,
                format!(
                    "this note is not a role (no `# Title` and no `## Mission`): tabd leaves it alone. A role \
                     file needs both; move other notes out of {roles}/"
                ),
            )
        }));
        set.diagnostics
            .sort_by(|a, b| (&a.path, a.line, &a.message).cmp(&(&b.path, b.line, &b.message)));
        set
    }

    /// Builds the set from `(name, vault-relative path, text or read error)` triples.
    pub fn from_texts(
        files: impl IntoIterator<Item = (String, PathBuf, Result<String, VaultError>)>,
        ctx: &LoadContext,
    ) -> Self {
        Self::build(files, ctx, None)
    }

    /// `from_texts`, with the vault to check files the roles name (output schemas) when given.
    fn build(
        files: impl IntoIterator<Item = (String, PathBuf, Result<String, VaultError>)>,
        ctx: &LoadContext,
        vault: Option<&Vault>,
    ) -> Self {
        // Each file parses on its own: a thousand roles use every core.
        let parsed = crate::base::blocking::par_map(files.into_iter().collect(), |(name, path, text)| {
            let def = match text {
                Ok(text) => parse_def(&name, &path, &text, ctx),
                Err(e) => RoleDef {
                    name: name.clone(),
                    diagnostics: vec![Diagnostic::error(
                        &path,
                        0,
                        format!("cannot read the role file: {e}"),
                    )],
                    path,
                    ..RoleDef::default()
                },
            };
            (name, def)
        });
        let mut defs: BTreeMap<String, RoleDef> = parsed.into_iter().collect();
        if let Some(servers) = &ctx.mcp_servers {
            for def in defs.values_mut() {
                check_mcp_servers(def, servers);
            }
        }
        if let Some(known) = &ctx.models {
            for def in defs.values_mut() {
                triage::check(def, known);
            }
        }
        if let Some(sets) = &ctx.hook_sets {
            for def in defs.values_mut() {
                check_hook_sets(def, sets);
            }
        }
        let mut set = RoleSet::default();
        for name in defs.keys() {
            match resolve(name, &defs, ctx) {
                Ok(role) => {
                    set.roles.insert(name.clone(), role);
                }
                Err(diags) => {
                    set.broken.insert(name.clone(), diags);
                }
            }
        }
        set.break_bad_targets(vault, &defs);
        set.collect_diagnostics(&defs);
        // A setting's value expanded from `${VAR}` that a message quotes is written back as
        // `${VAR}`: diagnostics reach the daily note, the status and `validate` (docs/spec.md §24).
        let secrets = ctx.env.redactor();
        for d in set
            .diagnostics
            .iter_mut()
            .chain(set.broken.values_mut().flatten())
        {
            d.message = secrets.apply(&d.message);
        }
        set.titles = defs
            .iter()
            .filter_map(|(n, d)| d.title.clone().map(|t| (n.clone(), t)))
            .collect();
        set
    }

    /// Cross-role checks, which need the whole set: every role a role names (`can_trigger`,
    /// `can_delegate_to`) must exist and be able to run; delegation must not come back to a role
    /// within the depth allowed; an output schema must be a JSON Schema file. A role failing one
    /// is broken.
    fn break_bad_targets(&mut self, vault: Option<&Vault>, defs: &BTreeMap<String, RoleDef>) {
        let names: Vec<String> = defs.keys().cloned().collect();
        let mut newly_broken = Vec::new();
        for (name, role) in &self.roles {
            let def = &defs[name];
            let line_of = |key: &str| def.key_lines.get(key).copied().unwrap_or(0);
            for (key, targets) in [
                ("can_trigger", &role.settings.can_trigger),
                ("can_delegate_to", &role.settings.can_delegate_to),
            ] {
                for target in targets {
                    let problem = match defs.get(target) {
                        None => Some(format!(
                            "`{key}` names `{target}`, but there is no roles/{target}.md{}",
                            did_you_mean(target, names.iter().map(String::as_str))
                                .map(|n| format!(" — did you mean `{n}`?"))
                                .unwrap_or_default()
                        )),
                        Some(t) if t.name.starts_with('_') => Some(format!(
                            "`{key}` names `{target}`, an abstract role that never runs"
                        )),
                        _ => None,
                    };
                    if let Some(msg) = problem {
                        newly_broken.push((name.clone(), Diagnostic::error(&role.path, line_of(key), msg)));
                    }
                }
            }
            if let Some(cycle) = self.delegation_cycle(role) {
                newly_broken.push((
                    name.clone(),
                    Diagnostic::error(
                        &role.path,
                        line_of("can_delegate_to"),
                        format!(
                            "delegation comes back round within max_delegation_depth {}: {}; a role \
                             cannot wait for an answer from itself — remove one of the links",
                            role.delegation_depth(),
                            cycle.join(" → ")
                        ),
                    ),
                ));
            }
            let schema = role.settings.output.as_ref().and_then(|o| o.schema.as_ref());
            if let (Some(vault), Some(schema)) = (vault, schema) {
                if let Err(e) = output_schema(vault, schema) {
                    newly_broken.push((
                        name.clone(),
                        Diagnostic::error(&role.path, line_of("output"), e.to_string()),
                    ));
                }
            }
        }
        for (name, diag) in newly_broken {
            self.roles.remove(&name);
            self.broken.entry(name).or_default().push(diag);
        }
    }

    /// A chain of delegations from `role` that reaches a role already in it, within the depth
    /// a run of `role` allows.
    fn delegation_cycle(&self, role: &Role) -> Option<Vec<String>> {
        fn walk(set: &RoleSet, path: &mut Vec<String>, left: u32) -> Option<Vec<String>> {
            if left == 0 {
                return None;
            }
            let current = set.roles.get(path.last()?)?;
            for target in &current.settings.can_delegate_to {
                if path.contains(target) {
                    let mut cycle = path.clone();
                    cycle.push(target.clone());
                    return Some(cycle);
                }
                let Some(child) = set.roles.get(target) else {
                    continue;
                };
                path.push(target.clone());
                let found = walk(set, path, (left - 1).min(child.delegation_depth()));
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        walk(self, &mut vec![role.name.clone()], role.delegation_depth())
    }

    /// Every file's diagnostics and every broken role's, once each, by file and line.
    fn collect_diagnostics(&mut self, defs: &BTreeMap<String, RoleDef>) {
        for def in defs.values() {
            self.diagnostics.extend(def.diagnostics.iter().cloned());
        }
        for diags in self.broken.values() {
            for d in diags {
                if !self.diagnostics.contains(d) {
                    self.diagnostics.push(d.clone());
                }
            }
        }
        self.diagnostics
            .sort_by(|a, b| (&a.path, a.line, &a.message).cmp(&(&b.path, b.line, &b.message)));
        self.diagnostics.dedup();
    }

    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    /// Roles that may fire: not abstract.
    pub fn runnable(&self) -> impl Iterator<Item = &Role> {
        self.roles.values().filter(|r| !r.is_abstract)
    }

    /// Every role name the vault has (good or broken, abstract included), sorted.
    pub fn all_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.roles.keys().chain(self.broken.keys()).cloned().collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Whether a file of the roles folder may be a role: it has a `# Title`, a `## Mission` or
/// frontmatter — or nothing yet (an empty file is a role being written, or emptied by mistake:
/// its errors say so, and its last good version keeps running).
fn could_be_a_role(text: &str) -> bool {
    let body = text.trim_start_matches('\u{feff}');
    body.trim().is_empty()
        || body.trim_start().starts_with("---")
        || body.lines().any(|l| {
            let l = l.trim();
            l.starts_with("# ") || l.trim_end_matches(':').eq_ignore_ascii_case("## mission")
        })
}

fn parse_def(name: &str, path: &Path, text: &str, ctx: &LoadContext) -> RoleDef {
    let env = &ctx.env;
    let mut def = RoleDef {
        name: name.to_string(),
        path: path.to_path_buf(),
        ..RoleDef::default()
    };
    if let Err(msg) = check_role_name(name) {
        def.diagnostics.push(Diagnostic::error(path, 0, msg.to_string()));
    }
    match frontmatter::split(text) {
        Ok(split) => {
            if let Some(fm) = split.frontmatter {
                let (settings, errors) = settings::parse(&fm, env);
                def.settings = settings;
                def.key_lines = fm.entries.iter().map(|e| (e.key.clone(), e.line)).collect();
                for e in errors {
                    def.diagnostics.push(Diagnostic::error(path, e.line, e.message));
                }
                check_setting_paths(&mut def, path);
            }
        }
        Err(e) => def.diagnostics.push(Diagnostic::error(path, e.line, e.message)),
    }
    // Settings whose opening `---` was deleted would read as a heading (the `---` underlines
    // them): an error of their own, and the body is read without them.
    let body_text = match lost_opening::block(text) {
        Some(block) => {
            def.diagnostics.push(Diagnostic::error(
                path,
                block.first_line(),
                lost_opening::message(&block),
            ));
            lost_opening::without(text, &block)
        }
        None => text.to_string(),
    };

    let body = sections::parse(&body_text);
    def.title = body.title.filter(|t| !t.is_empty());
    let mut seen: HashMap<SectionKind, usize> = HashMap::new();
    // The sections past the cap are not read (each one would be a warning, an entry to merge).
    if let (Err(e), Some(first_over)) = (
        caps::SECTIONS.check(body.sections.len()),
        body.sections.get(caps::SECTIONS.max),
    ) {
        def.diagnostics
            .push(Diagnostic::error(path, first_over.line, e.to_string()));
    }
    for section in body.sections.iter().take(caps::SECTIONS.max) {
        if section.kind != SectionKind::Other {
            if let Some(first) = seen.insert(section.kind, section.line) {
                def.diagnostics.push(Diagnostic::warning(
                    path,
                    section.line,
                    format!(
                        "`## {}` repeats the section at line {first}; both are used — merge them into one",
                        section.heading
                    ),
                ));
            }
        }
        body::apply_section(&mut def, section, path, &ctx.layout);
    }
    def
}

/// Every hook set a role's `hooks:` names must be one the config declares: a misspelt one would
/// leave the role's calls unchecked by the program the person meant.
fn check_hook_sets(def: &mut RoleDef, sets: &std::collections::BTreeSet<String>) {
    let line = def.key_lines.get("hooks").copied().unwrap_or(0);
    for name in def.settings.hooks.iter().filter(|n| !sets.contains(*n)) {
        let hint = did_you_mean(name, sets.iter().map(String::as_str))
            .map(|n| format!(" — did you mean `{n}`?"))
            .unwrap_or_default();
        def.diagnostics.push(Diagnostic::error(
            &def.path,
            line,
            format!(
                "`hooks`: `{name}` is no hook set of the config{hint}; declare [hooks.sets.{name}] in the config (see docs/hooks.md)"
            ),
        ));
    }
}

/// Every `server/…` entry — in `## Tools`, `approve` and `deny_tools` — must name a server the
/// config declares: a misspelt one in `deny_tools` would leave the real tool allowed.
fn check_mcp_servers(def: &mut RoleDef, servers: &std::collections::BTreeSet<String>) {
    let known: Vec<&str> = servers.iter().map(String::as_str).collect();
    let settings: Vec<(&str, String)> = def
        .settings
        .approve
        .keys()
        .map(|k| ("approve", k.clone()))
        .chain(def.settings.deny_tools.iter().map(|d| ("deny_tools", d.clone())))
        .collect();
    for (key, entry) in settings {
        let Some((server, _)) = entry.split_once('/') else {
            continue;
        };
        if servers.contains(server) {
            continue;
        }
        let hint = did_you_mean(server, known.iter().copied())
            .map(|n| format!(" — did you mean `{n}`?"))
            .unwrap_or_default();
        let line = def.key_lines.get(key).copied().unwrap_or(0);
        def.diagnostics.push(Diagnostic::error(
            &def.path,
            line,
            format!(
                "`{key}`: `{entry}` names MCP server `{server}`, which the config does not declare{hint}"
            ),
        ));
    }
    for a in def.mcp.iter().filter(|a| !servers.contains(&a.server)) {
        let declared = if known.is_empty() {
            " (it declares none)".to_string()
        } else {
            format!(" (it declares: {})", known.join(", "))
        };
        let hint = did_you_mean(&a.server, known.iter().copied())
            .map(|n| format!(" — did you mean `{n}`?"))
            .unwrap_or_default();
        let msg = format!(
            "`{}/{}` names MCP server `{}`, which the config does not declare{declared}{hint}; add [mcp.{}] to the config (see docs/mcp.md)",
            a.server,
            a.tool.as_deref().unwrap_or("*"),
            a.server,
            a.server
        );
        def.diagnostics.push(Diagnostic::error(&def.path, a.line, msg));
    }
}

/// `watch` and `write_paths` name vault paths: checked here, once, with the tools' rules.
fn check_setting_paths(def: &mut RoleDef, path: &Path) {
    let mut problems = Vec::new();
    for (key, items) in [
        ("watch", &mut def.settings.watch),
        ("write_paths", &mut def.settings.write_paths),
    ] {
        let line = def.key_lines.get(key).copied().unwrap_or(0);
        for item in items.iter_mut() {
            match context::check_relative(item.trim()) {
                // Watched files are compared by path: keep the normal form (`./a//b` → `a/b`).
                Ok(p) if key == "watch" => *item = p.as_str().to_string(),
                Ok(_) => {}
                Err(why) => problems.push(Diagnostic::error(path, line, format!("`{key}`: {why}"))),
            }
        }
    }
    def.diagnostics.extend(problems);
}

/// Resolves `name` through its `extends` chain into a `Role`, or the errors that stop it.
fn resolve(name: &str, defs: &BTreeMap<String, RoleDef>, ctx: &LoadContext) -> Result<Role, Vec<Diagnostic>> {
    let def = &defs[name];
    let (chain, mut errors) = extends_chain(def, defs);
    errors.extend(def.diagnostics.iter().filter(|d| d.is_error()).cloned());
    for ancestor in &chain[1..] {
        if ancestor.diagnostics.iter().any(Diagnostic::is_error) {
            errors.push(Diagnostic::error(
                &def.path,
                def.key_lines.get("extends").copied().unwrap_or(0),
                format!(
                    "inherits from `{}`, which has errors; fix {} first",
                    ancestor.name,
                    ancestor.path.display()
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Merge from the root ancestor down to the role itself.
    let mut merged = RoleDef::default();
    for d in chain.iter().rev() {
        merge_into(&mut merged, d);
    }
    let over = caps::inherited(def, &merged);
    if !over.is_empty() {
        return Err(over);
    }
    let tz = merged.settings.timezone(ctx);
    Ok(Role {
        name: def.name.clone(),
        path: def.path.clone(),
        display_name: def.title.clone().unwrap_or_else(|| def.name.clone()),
        is_abstract: def.name.starts_with('_'),
        mission: merged.mission,
        goals: merged.goals,
        context: merged.context,
        context_lines: merged.context_lines,
        tools: merged.tools.unwrap_or_else(|| {
            // A `## Tools` with only MCP entries still lists what the role may use.
            if merged.mcp.is_empty() {
                DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect()
            } else {
                Vec::new()
            }
        }),
        mcp: merged.mcp,
        skills: merged.skills,
        skill_lines: merged.skill_lines,
        schedule: Schedule {
            lines: merged.schedule.unwrap_or_default(),
            tz,
        },
        // The nearest file of the chain with a `## Schedule` is the one that wins (`merge_into`).
        schedule_path: chain
            .iter()
            .find(|d| d.schedule.is_some())
            .map_or_else(|| def.path.clone(), |d| d.path.clone()),
        inbox: match &def.inbox {
            Some(p) => p.clone(),
            None => VaultPath::parse(&ctx.layout.default_inbox(&def.name), false)
                .map_err(|e| vec![Diagnostic::error(&def.path, 0, e.to_string())])?,
        },
        preferences: merged.preferences,
        rules: merged.rules,
        extra: merged.extra,
        settings: RoleSettings {
            extends: def.settings.extends.clone(),
            ..merged.settings
        },
    })
}

/// The role and its ancestors, child first, and what stops the chain (a cycle, a missing
/// parent, too deep).
fn extends_chain<'a>(
    def: &'a RoleDef,
    defs: &'a BTreeMap<String, RoleDef>,
) -> (Vec<&'a RoleDef>, Vec<Diagnostic>) {
    let mut chain: Vec<&RoleDef> = vec![def];
    let mut errors: Vec<Diagnostic> = Vec::new();
    let mut current = def;
    while let Some(parent_name) = &current.settings.extends {
        let line = current.key_lines.get("extends").copied().unwrap_or(0);
        if chain.iter().any(|d| &d.name == parent_name) {
            let cycle: Vec<&str> = chain
                .iter()
                .map(|d| d.name.as_str())
                .chain([parent_name.as_str()])
                .collect();
            errors.push(Diagnostic::error(
                &current.path,
                line,
                format!(
                    "`extends` forms a cycle ({}); remove one of the `extends` lines",
                    cycle.join(" → ")
                ),
            ));
            break;
        }
        let Some(parent) = defs.get(parent_name) else {
            let hint = did_you_mean(parent_name, defs.keys().map(String::as_str))
                .map(|n| format!(" — did you mean `{n}`?"))
                .unwrap_or_default();
            errors.push(Diagnostic::error(
                &current.path,
                line,
                format!("`extends: {parent_name}` names no role: there is no roles/{parent_name}.md{hint}"),
            ));
            break;
        };
        if chain.len() > MAX_EXTENDS_DEPTH {
            errors.push(Diagnostic::error(
                &def.path,
                def.key_lines.get("extends").copied().unwrap_or(0),
                format!("`extends` goes deeper than {MAX_EXTENDS_DEPTH} levels; flatten the chain"),
            ));
            break;
        }
        chain.push(parent);
        current = parent;
    }
    (chain, errors)
}

fn union(into: &mut Vec<String>, from: &[String]) {
    for item in from {
        if !into.contains(item) {
            into.push(item.clone());
        }
    }
}

/// Applies `child` over `acc` (which holds the merged ancestors): scalars and text sections from
/// the child win; lists are unions, parent first, so a child never loses a parent's guardrail.
fn merge_into(acc: &mut RoleDef, child: &RoleDef) {
    acc.settings.inherit(&child.settings);

    if child.mission.is_some() {
        acc.mission = child.mission.clone();
    }
    if child.preferences.is_some() {
        acc.preferences = child.preferences.clone();
    }
    if child.schedule.is_some() {
        acc.schedule = child.schedule.clone();
    }
    union(&mut acc.goals, &child.goals);
    union(&mut acc.rules, &child.rules);
    for entry in &child.context {
        if !acc.context.contains(entry) {
            acc.context.push(entry.clone());
        }
        if let Some(at) = child.context_lines.get(entry) {
            acc.context_lines
                .entry(entry.clone())
                .or_insert_with(|| at.clone());
        }
    }
    if let Some(tools) = &child.tools {
        union(acc.tools.get_or_insert_with(Vec::new), tools);
    }
    union(&mut acc.skills, &child.skills);
    for (name, at) in &child.skill_lines {
        acc.skill_lines.entry(name.clone()).or_insert_with(|| at.clone());
    }
    for a in &child.mcp {
        if !acc.mcp.iter().any(|x| x.server == a.server && x.tool == a.tool) {
            acc.mcp.push(a.clone());
        }
    }
    for (heading, body) in &child.extra {
        match acc
            .extra
            .iter_mut()
            .find(|(h, _)| h.eq_ignore_ascii_case(heading))
        {
            Some(existing) => existing.1 = body.clone(),
            None => acc.extra.push((heading.clone(), body.clone())),
        }
    }
}

/// Reads and compiles a role's output schema: `Err` says what is wrong, for the role's file.
pub fn output_schema(vault: &Vault, path: &str) -> Result<jsonschema::Validator, SchemaFileError> {
    let path_ = || path.to_string();
    let vp = VaultPath::parse(path, false).map_err(|source| SchemaFileError::NotAVaultPath {
        path: path_(),
        source,
    })?;
    let text = vault
        .read_text(&vp, 1024 * 1024)
        .map_err(|source| SchemaFileError::Unreadable {
            path: path_(),
            source,
        })?;
    let schema = crate::formats::json::parse(&text).map_err(|source| SchemaFileError::NotJson {
        path: path_(),
        source,
    })?;
    jsonschema::validator_for(&schema).map_err(|e| SchemaFileError::NotASchema {
        path: path_(),
        why: e.to_string(),
    })
}

/// A role's `output.schema` file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaFileError {
    #[error("`output.schema`: `{path}` is not a vault path: {source}")]
    NotAVaultPath {
        path: String,
        source: crate::base::vault::VaultError,
    },
    #[error("`output.schema`: cannot read {path}: {source}")]
    Unreadable {
        path: String,
        source: crate::base::vault::VaultError,
    },
    #[error("`output.schema`: {path} cannot be read as JSON: {source}")]
    NotJson {
        path: String,
        source: crate::formats::json::JsonError,
    },
    #[error("`output.schema`: {path} is not a valid JSON Schema: {why}")]
    NotASchema { path: String, why: String },
}

#[cfg(test)]
mod tests;
