//! `tabd validate`: every problem at once, `path:line: error: …`, exit 1 on any error.
//! Beyond the role files: what the config names but this machine lacks — an MCP server's
//! program, a CLI agent, a `${VAR}` that is not set — so a typo shows today, not at 9am.

use std::path::{Path, PathBuf};

use super::{CliError, Workspace};
use crate::base::diag::Diagnostic;
use crate::base::process::find_program;
use crate::setup::config::mcp::Transport;
use crate::setup::role::{Role, RoleSet};

pub fn run(ws: &Workspace) -> Result<u8, CliError> {
    let roles = &ws.roles;
    let diags = findings(ws).all(&config_file(ws));
    // A value expanded from `${VAR}` (an MCP server's command, say) is printed as `${VAR}`.
    let secrets = ws.env.redactor();
    for d in &diags {
        say!("{}", secrets.apply(&d.to_string()));
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags
        .iter()
        .filter(|d| d.severity == crate::base::diag::Severity::Warning)
        .count();
    say!(
        "config: {}",
        ws.config.path.as_ref().map_or_else(
            || "defaults (no config file)".to_string(),
            |p| p.display().to_string()
        )
    );
    say!("vault: {}", ws.root.display());
    for line in Summary::of(roles, &diags, ws.vault.layout()).lines() {
        say!("{line}");
    }
    say!(
        "{errors} error{}, {warnings} warning{}",
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" }
    );
    Ok(if errors > 0 { 1 } else { 0 })
}

/// The roles as the lines above found them: a role is ok only when no error names one of its
/// files (its own, a parent's, a skill it lists); abstract roles are counted apart, never run.
#[derive(Debug, PartialEq)]
struct Summary<'a> {
    ok: Vec<&'a str>,
    /// Loaded and runnable, but an error above is about one of its files (a skill it lists is
    /// missing, say): it runs, not as written.
    with_errors: Vec<&'a str>,
    abstract_roles: Vec<&'a str>,
    broken: Vec<&'a str>,
}

impl<'a> Summary<'a> {
    fn of(roles: &'a RoleSet, diags: &[Diagnostic], layout: &crate::base::vault::layout::Layout) -> Self {
        let errors: Vec<&Path> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.path.as_path())
            .collect();
        let (with_errors, ok) = roles.runnable().partition(|role| {
            files_of(roles, role, layout)
                .iter()
                .any(|f| errors.iter().any(|e| e.starts_with(f)))
        });
        let names = |list: Vec<&'a Role>| list.into_iter().map(|r| r.name.as_str()).collect();
        Self {
            ok: names(ok),
            with_errors: names(with_errors),
            abstract_roles: roles
                .roles
                .values()
                .filter(|r| r.is_abstract)
                .map(|r| r.name.as_str())
                .collect(),
            broken: roles.broken.keys().map(String::as_str).collect(),
        }
    }

    fn lines(&self) -> Vec<String> {
        let list = |names: &[&str]| match names {
            [] => String::new(),
            names => format!(" ({})", names.join(", ")),
        };
        let mut out = vec![format!("roles: {} ok{}", self.ok.len(), list(&self.ok))];
        if !self.with_errors.is_empty() {
            out.push(format!(
                "with errors: {}{}: they run, but not as written — fix the errors above",
                self.with_errors.len(),
                list(&self.with_errors)
            ));
        }
        if !self.broken.is_empty() {
            out.push(format!(
                "broken: {}{}: they do not run until fixed",
                self.broken.len(),
                list(&self.broken)
            ));
        }
        if !self.abstract_roles.is_empty() {
            out.push(format!(
                "abstract: {}{}: inherited by other roles, never run by themselves",
                self.abstract_roles.len(),
                list(&self.abstract_roles)
            ));
        }
        out
    }
}

/// The files a role is made of: its own, its parents' (`extends`), and the folders of the
/// skills it lists.
fn files_of(roles: &RoleSet, role: &Role, layout: &crate::base::vault::layout::Layout) -> Vec<PathBuf> {
    let mut files = vec![role.path.clone()];
    let mut parent = role.settings.extends.as_deref();
    // A loaded role's chain is whole, without a cycle, at most this deep (loading checked it).
    while let Some(p) = parent
        .and_then(|name| roles.roles.get(name))
        .filter(|_| files.len() <= crate::setup::role::MAX_EXTENDS_DEPTH)
    {
        files.push(p.path.clone());
        parent = p.settings.extends.as_deref();
    }
    for skill in &role.skills {
        if let Some(folder) = Path::new(&crate::setup::skills::file(layout, skill)).parent() {
            files.push(folder.to_path_buf());
        }
    }
    files
}

/// Everything `validate` finds, in groups, so `tabd doctor` says each in a line of its own.
#[derive(Debug, Default)]
pub struct Findings {
    /// The role files' own (read, parsed, inherited).
    pub role_files: Vec<Diagnostic>,
    /// The provider needs a key that is not set: what to do.
    pub key: Option<String>,
    /// `[notify]` channels that cannot work here.
    pub notify: Vec<Diagnostic>,
    /// What else the config names that this machine lacks: an agent CLI, an MCP server's
    /// program or `${VAR}`, what a server's sandbox grants.
    pub config: Vec<Diagnostic>,
    /// What the vault holds that roles will not find: skills, write_paths, context entries.
    pub vault: Vec<Diagnostic>,
    /// Where the run log goes, when a person should know (Obsidian's Daily Notes): the file it
    /// is about and a sentence.
    pub log_apart: Vec<(String, String)>,
    /// Inboxes no role reads, forecasts over a cap, schedules held back by min_interval.
    pub plans: Vec<Diagnostic>,
}

impl Findings {
    /// Every finding as `validate` prints them, in its order; `config_file` is where the
    /// config's are.
    pub fn all(self, config_file: &Path) -> Vec<Diagnostic> {
        let mut out = self.role_files;
        out.extend(self.key.map(|k| Diagnostic::warning(config_file, 0, k)));
        out.extend(self.notify);
        out.extend(self.config);
        out.extend(self.vault);
        out.extend(
            self.log_apart
                .into_iter()
                .map(|(file, said)| Diagnostic::warning(Path::new(&file), 0, said)),
        );
        out.extend(self.plans);
        out
    }

    /// The findings about roles: their files, what the vault holds for them, their plans.
    pub fn about_roles(&self) -> impl Iterator<Item = &Diagnostic> {
        self.role_files.iter().chain(&self.vault).chain(&self.plans)
    }
}

/// What `validate` finds in the workspace.
pub fn findings(ws: &Workspace) -> Findings {
    let file = config_file(ws);
    let mut plans: Vec<Diagnostic> = crate::doors::daemon::status::stranded_inboxes(&ws.vault, &ws.roles)
        .into_iter()
        .map(|folder| {
            Diagnostic::warning(
                Path::new(&ws.vault.layout().inboxes()),
                0,
                format!("no role reads {folder}"),
            )
        })
        .collect();
    plans.extend(forecast_checks(ws));
    // Schedules faster than the role's min_interval (issue 48, item 5).
    plans.extend(
        ws.roles
            .runnable()
            .flat_map(|r| super::schedule::held_back(r, &ws.config.limits)),
    );
    Findings {
        role_files: ws.roles.diagnostics.clone(),
        key: ws.config.provider.missing_key(&ws.env),
        notify: notify_checks(ws, &file),
        config: config_checks(ws, &file),
        vault: vault_checks(ws),
        log_apart: super::run::log_apart_notes(ws),
        plans,
    }
}

/// The config file, as the config's findings name it.
fn config_file(ws: &Workspace) -> PathBuf {
    ws.config.path.clone().unwrap_or_else(|| PathBuf::from("config"))
}

/// What the config asks of this machine, beyond the key and `[notify]`.
fn config_checks(ws: &Workspace, file: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let provider = &ws.config.provider;
    if let Some(profile) = &provider.profile {
        if find_program(&profile.command, &ws.env).is_none() {
            out.push(Diagnostic::warning(
                file,
                0,
                format!(
                    "[provider] profile {}: `{}` is not installed or not on PATH, so every run will pause; install it \
                     or set [profiles.{}] command",
                    profile.name, profile.command, profile.name
                ),
            ));
        }
    }
    for server in ws.config.mcp.values() {
        for var in server.vars() {
            if ws.env.get(&var).is_none() {
                out.push(Diagnostic::warning(
                    file,
                    0,
                    format!(
                        "[mcp.{}] uses ${{{var}}}, which is not set here: the server will not start until it is",
                        server.name
                    ),
                ));
            }
        }
        // What its sandbox grants beyond its own folders, and what it will not grant.
        if let Some(grants) = crate::capabilities::mcp::client::planned_grants(server, &ws.launcher(None)) {
            for g in grants.granted {
                out.push(Diagnostic::note(
                    file,
                    0,
                    format!("[mcp.{}] grants {g}", server.name),
                ));
            }
            for r in grants.refused {
                out.push(Diagnostic::warning(file, 0, format!("[mcp.{}] {r}", server.name)));
            }
        }
        if let Transport::Stdio { command, .. } = &server.transport {
            let Ok(command) = ws.env.expand(command) else {
                continue;
            };
            if find_program(&command, &ws.env).is_none() {
                let msg = format!(
                    "[mcp.{}] command `{command}` is not installed or not on PATH: the server cannot start",
                    server.name
                );
                out.push(if server.required {
                    Diagnostic::error(file, 0, format!("{msg} (and the server is required)"))
                } else {
                    Diagnostic::warning(file, 0, msg)
                });
            }
        }
    }
    out
}

/// Each role whose forecast (`tabd cost`) crosses one of its caps: a warning on its file.
fn forecast_checks(ws: &Workspace) -> Vec<Diagnostic> {
    let now = chrono::Utc::now();
    let history = crate::records::forecast::history(&ws.vault, now);
    ws.roles
        .runnable()
        .flat_map(|role| {
            let past = history.get(&role.name).map_or(&[][..], Vec::as_slice);
            let f = crate::records::forecast::forecast(role, &ws.config, past, now);
            f.over
                .into_iter()
                .map(|o| Diagnostic::warning(&role.path, 0, format!("{o} (tabd cost)")))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What the vault holds that a role will not find: context entries that match nothing, notes in
/// an inbox no role reads.
fn vault_checks(ws: &Workspace) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    out.extend(skill_checks(ws));
    // Who may write where: an entry not written yet, in a place some role writes, is said as such.
    let writers: Vec<(&str, crate::records::access::AccessPolicy)> = ws
        .roles
        .runnable()
        .map(|r| (r.name.as_str(), crate::records::access::AccessPolicy::for_role(r)))
        .collect();
    for role in ws.roles.runnable() {
        out.extend(owned_write_paths(role, &ws.vault));
        let policy = crate::records::access::AccessPolicy::for_role(role);
        let resolved = crate::records::context::resolve(&ws.vault, &policy, &role.context);
        for entry in role
            .context
            .iter()
            .filter(|e| resolved.missing.contains(&e.to_string()) || names_a_folder(&ws.vault, e))
        {
            let (file, line) = role
                .context_lines
                .get(entry)
                .cloned()
                .unwrap_or_else(|| (role.path.clone(), 0));
            out.push(match finds_nothing(&ws.vault, &writers, entry) {
                Nothing::EmptyFolder(why) => Diagnostic::note(
                    &file,
                    line,
                    format!("context entry `{entry}` is empty for now ({why}); the role sees its notes once there are some"),
                ),
                Nothing::NotWrittenYet(why) => Diagnostic::note(
                    &file,
                    line,
                    format!("context entry `{entry}` is not there yet ({why}); the role sees it once it is"),
                ),
                Nothing::Missing(hint) => Diagnostic::warning(
                    &file,
                    line,
                    format!("context entry `{entry}` matches no file in the vault; the role will not see it{hint}"),
                ),
            });
        }
    }
    // A parent's entry is found missing once for each role that extends it: said once.
    out.sort_by(|a, b| (&a.path, a.line, &a.message).cmp(&(&b.path, b.line, &b.message)));
    out.dedup();
    out
}

/// Why a context entry finds nothing: a folder that is empty for now (it exists, or tabd makes
/// it), or nothing there at all (with a did-you-mean, if one is near).
enum Nothing {
    EmptyFolder(&'static str),
    /// Not there, but written in time: tabd's memory, or a place a role's `write_paths` name.
    NotWrittenYet(String),
    Missing(String),
}

/// Folders tabd makes and fills itself: a role may read them before the first note is there
/// (the inboxes, memories and approvals, the log folder, and `agent/log/`).
fn tabds_folders(vault: &crate::base::vault::Vault) -> [String; 5] {
    let layout = vault.layout();
    [
        layout.inboxes(),
        layout.role_memories(),
        layout.approvals(),
        vault.log_folder().into_owned(),
        layout.log_elsewhere(),
    ]
}

fn finds_nothing(
    vault: &crate::base::vault::Vault,
    writers: &[(&str, crate::records::access::AccessPolicy)],
    entry: &crate::setup::role::ContextEntry,
) -> Nothing {
    use crate::base::vault::VaultPath;
    use crate::setup::role::ContextEntry;
    let path = |p: &str| VaultPath::parse(p.trim_end_matches('/'), false).ok();
    let layout = vault.layout();
    if let ContextEntry::File(p) | ContextEntry::Folder(p) = entry {
        let p = p.trim_end_matches('/');
        if p == layout.memory()
            || p == layout.role_memories()
            || p.starts_with(&format!("{}/", layout.role_memories()))
        {
            return Nothing::NotWrittenYet("tabd writes it when a role remembers something".into());
        }
    }
    let found = missing(vault, entry);
    // Nothing near it (no typo to point at), in a place a role writes: a note to be written.
    if let (Nothing::Missing(hint), ContextEntry::File(p) | ContextEntry::Folder(p)) = (&found, entry) {
        let writer = path(p)
            .filter(|v| hint.is_empty() && !vault.exists(v))
            .and_then(|v| writers.iter().find(|(_, policy)| policy.names_in_write_paths(&v)));
        if let Some((name, _)) = writer {
            return Nothing::NotWrittenYet(format!(
                "the role {name} may write it: its write_paths name the place"
            ));
        }
    }
    found
}

/// Why `entry` finds nothing, as far as the vault says: a folder empty for now, or nothing there
/// (with the note or folder near it that was likely meant).
fn missing(vault: &crate::base::vault::Vault, entry: &crate::setup::role::ContextEntry) -> Nothing {
    use crate::base::vault::VaultPath;
    use crate::setup::role::ContextEntry;
    let path = |p: &str| VaultPath::parse(p.trim_end_matches('/'), false).ok();
    let is_dir = |p: &VaultPath| vault.metadata(p).is_ok_and(|m| m.is_dir);
    match entry {
        ContextEntry::Folder(p) => {
            let own = tabds_folders(vault)
                .iter()
                .any(|t| p.trim_end_matches('/') == *t || p.starts_with(&format!("{t}/")));
            if own {
                return Nothing::EmptyFolder("tabd makes this folder and writes into it");
            }
            let dir = path(p);
            if dir.as_ref().is_some_and(is_dir) {
                return Nothing::EmptyFolder("the folder has no notes yet");
            }
            Nothing::Missing(near(vault, dir.as_ref(), true, "/"))
        }
        ContextEntry::File(p) => {
            let Some(file) = path(p) else {
                return Nothing::Missing(String::new());
            };
            if is_dir(&file) {
                return Nothing::Missing(format!(
                    " — it is a folder: write `{p}/` to give the role its notes"
                ));
            }
            let with_md = format!("{p}.md");
            if path(&with_md).is_some_and(|m| vault.metadata(&m).is_ok_and(|m| m.is_file)) {
                return Nothing::Missing(format!(" — did you mean `{with_md}`?"));
            }
            Nothing::Missing(near(vault, Some(&file), false, ""))
        }
        ContextEntry::Glob(_) | ContextEntry::Wikilink(_) => Nothing::Missing(String::new()),
    }
}

/// A file entry that names a folder (`project/blockers`, no `/`): the role gets no note of it.
fn names_a_folder(vault: &crate::base::vault::Vault, entry: &crate::setup::role::ContextEntry) -> bool {
    match entry {
        crate::setup::role::ContextEntry::File(p) => crate::base::vault::VaultPath::parse(p, false)
            .is_ok_and(|p| vault.metadata(&p).is_ok_and(|m| m.is_dir)),
        _ => false,
    }
}

/// ` — did you mean `project/scope.md`?` when a file (or folder, `dirs`) beside `path` has a
/// name close to its own.
fn near(
    vault: &crate::base::vault::Vault,
    path: Option<&crate::base::vault::VaultPath>,
    dirs: bool,
    tail: &str,
) -> String {
    let Some(path) = path else {
        return String::new();
    };
    let parent = path.parent();
    let Ok(listing) = vault.list(&parent) else {
        return String::new();
    };
    let names: Vec<String> = listing
        .entries
        .iter()
        .filter(|e| if dirs { e.is_dir } else { e.is_file })
        .map(|e| e.path.file_name().to_string())
        .collect();
    let name = path.file_name();
    crate::base::text::did_you_mean(name, names.iter().map(String::as_str))
        .or_else(|| {
            // `scope` for `scope.md`: the name without its extension.
            names.iter().map(String::as_str).find(|n| {
                n.strip_suffix(".md")
                    .is_some_and(|stem| stem.eq_ignore_ascii_case(name))
            })
        })
        .map(|n| match parent.as_str() {
            "" => format!(" — did you mean `{n}{tail}`?"),
            dir => format!(" — did you mean `{dir}/{n}{tail}`?"),
        })
        .unwrap_or_default()
}

/// `write_paths` entries inside tabd's own files (docs/spec.md §24): they grant nothing, say so. The
/// log folder is tabd's wherever `[log] folder` puts it, and the layout's only while it is it.
fn owned_write_paths(role: &crate::setup::role::Role, vault: &crate::base::vault::Vault) -> Vec<Diagnostic> {
    use crate::base::vault::protected::{fold, owned_by_tabd};
    let log = vault.log_folder();
    let moved = !vault.log_in_place();
    let layout_log = vault.layout().daily();
    let folder = fold(&log);
    role.settings
        .write_paths
        .iter()
        .filter_map(|p| {
            let (owned, why) = match owned_by_tabd(&fold(p), vault.layout()) {
                Some((owned, _)) if owned == layout_log && moved => None,
                Some((owned, why)) => Some((owned, why)),
                None if moved && fold(p).within(&folder) => Some((log.to_string(), "the daily run log")),
                None => None,
            }?;
            Some(Diagnostic::warning(
                &role.path,
                0,
                format!("write_paths `{p}` is in {owned}, tabd's own ({why}): no role writes there, so it grants nothing"),
            ))
        })
        .collect()
}

/// `[notify]`: a channel that cannot work here is found today, not when tabd needs the person.
fn notify_checks(ws: &Workspace, file: &Path) -> Vec<Diagnostic> {
    let n = &ws.config.notify;
    let mut out = Vec::new();
    if let Some(program) = n.command.first() {
        if find_program(program, &ws.env).is_none() {
            out.push(Diagnostic::warning(
                file,
                0,
                format!("[notify] command: `{program}` is not installed or not on PATH, so nothing reaches you through it"),
            ));
        }
    }
    if let Some(Err(e)) = n.webhook.as_ref().map(|w| ws.env.expand(w)) {
        out.push(Diagnostic::warning(
            file,
            0,
            format!("[notify] webhook: {e}; set it where tabd runs (~/.config/tabd/env)"),
        ));
    }
    if n.desktop && find_program("notify-send", &ws.env).is_none() {
        out.push(Diagnostic::warning(
            file,
            0,
            "[notify] desktop: `notify-send` is not installed (Debian/Ubuntu: libnotify-bin), so no desktop notification can be shown",
        ));
    }
    if !n.any() && n.events.is_some() {
        out.push(Diagnostic::note(
            file,
            0,
            "[notify] lists events but no channel (command, webhook or desktop): nothing is sent",
        ));
    }
    out
}

/// Every skill a role lists (abstract ones included: their children inherit the list), checked
/// once each: there, named as the format asks and as its folder, described, its links leading
/// to its own files (docs/spec.md §25).
fn skill_checks(ws: &Workspace) -> Vec<Diagnostic> {
    let mut listed: Vec<(String, PathBuf, usize)> = Vec::new();
    for role in ws.roles.roles.values() {
        for name in &role.skills {
            let (file, line) = role
                .skill_lines
                .get(name)
                .cloned()
                .unwrap_or_else(|| (role.path.clone(), 0));
            if !listed
                .iter()
                .any(|(n, f, l)| n == name && *f == file && *l == line)
            {
                listed.push((name.clone(), file, line));
            }
        }
    }
    crate::setup::skills::diagnostics(&ws.vault, &listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::role::LoadContext;

    fn roles(files: &[(&str, &str)]) -> RoleSet {
        let ctx = LoadContext::new(
            chrono_tz::UTC,
            crate::base::environment::Env::from_pairs([("X", "x")]),
        );
        RoleSet::from_texts(
            files.iter().map(|(name, text)| {
                (
                    name.to_string(),
                    PathBuf::from(format!("roles/{name}.md")),
                    Ok(text.to_string()),
                )
            }),
            &ctx,
        )
    }

    /// Issue 48: a role an error line names is not counted ok — nor the roles that inherit the
    /// file, or list the skill, it names; an abstract role is counted apart.
    #[test]
    fn a_role_an_error_names_is_not_ok_and_abstract_roles_are_apart() {
        let set = roles(&[
            ("_base", "# Base\n## Rules\n- be brief\n"),
            ("risk", "---\nextends: _base\n---\n# Risk\n## Skills\n- triage\n"),
            ("delivery", "---\nextends: _base\n---\n# Delivery\n"),
            ("comms", "# Comms\n"),
            ("broken", "---\nmax_tool_calls: many\n---\n# Broken\n"),
        ]);
        let mut diags = set.diagnostics.clone();
        let summary = |diags: &[Diagnostic]| {
            let s = Summary::of(&set, diags, &Default::default());
            (
                s.ok.join(" "),
                s.with_errors.join(" "),
                s.abstract_roles.join(" "),
                s.broken.join(" "),
            )
        };
        assert_eq!(
            summary(&diags),
            (
                "comms delivery risk".into(),
                "".into(),
                "_base".into(),
                "broken".into()
            )
        );
        // What validate's own checks add: a skill the role lists is missing (on the role's file).
        diags.push(Diagnostic::error(
            Path::new("roles/risk.md"),
            6,
            "skill `triage`: there is no skills/triage/SKILL.md",
        ));
        assert_eq!(summary(&diags).1, "risk");
        assert_eq!(
            Summary::of(&set, &diags, &Default::default()).lines(),
            [
                "roles: 2 ok (comms, delivery)",
                "with errors: 1 (risk): they run, but not as written — fix the errors above",
                "broken: 1 (broken): they do not run until fixed",
                "abstract: 1 (_base): inherited by other roles, never run by themselves",
            ]
        );
        // An error in a parent's file is every child's; one in a skill's file, its roles'.
        let parent = [Diagnostic::error(Path::new("roles/_base.md"), 3, "x")];
        assert_eq!(summary(&parent).1, "delivery risk");
        let skill = [Diagnostic::error(Path::new("skills/triage/SKILL.md"), 2, "x")];
        assert_eq!(summary(&skill).1, "risk");
        let warning = [Diagnostic::warning(Path::new("roles/comms.md"), 1, "x")];
        assert_eq!(summary(&warning).1, "", "a warning leaves a role ok");
    }
}
