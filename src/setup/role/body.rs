//! A role file's body applied to its definition, section by section: text sections joined, list
//! sections read item by item (within their caps), `## Tools` and `## Schedule` checked, an
//! unknown heading kept for the model (or, a near miss of a known one, an error).

use std::path::Path;

use super::sections::{self, SectionKind};
use super::{caps, context, ContextEntry, McpAllow, RoleDef};
use crate::base::calls::VAULT_TOOLS;
use crate::base::diag::Diagnostic;
use crate::base::text::did_you_mean;
use crate::formats::schedule::ScheduleLine;

fn append_text(slot: &mut Option<String>, text: &str) {
    if text.is_empty() {
        return;
    }
    match slot {
        Some(existing) => {
            existing.push_str("\n\n");
            existing.push_str(text);
        }
        None => *slot = Some(text.to_string()),
    }
}

pub(super) fn apply_section(
    def: &mut RoleDef,
    section: &sections::Section,
    path: &Path,
    layout: &crate::base::vault::layout::Layout,
) {
    let items = section.lines();
    if !caps::section_fits(def, section, &items) {
        return;
    }
    match section.kind {
        SectionKind::Mission => append_text(&mut def.mission, &section.body),
        SectionKind::Preferences => append_text(&mut def.preferences, &section.body),
        SectionKind::Goals => def.goals.extend(items.into_iter().map(|i| i.text)),
        SectionKind::Rules => def.rules.extend(items.into_iter().map(|i| i.text)),
        SectionKind::Context => {
            for item in items {
                match ContextEntry::parse(&item.text) {
                    Ok(entry) => {
                        def.context_lines
                            .entry(entry.clone())
                            .or_insert_with(|| (path.to_path_buf(), item.line));
                        def.context.push(entry);
                    }
                    Err(e) => def.diagnostics.push(Diagnostic::error(
                        path,
                        item.line,
                        format!("context entry: {e}"),
                    )),
                }
            }
        }
        SectionKind::Tools => add_tools(def, &items, path),
        SectionKind::Skills => add_skills(def, &items, path),
        SectionKind::Schedule => add_schedule(def, &items, path),
        SectionKind::Inbox => {
            if let Some(item) = items.first() {
                let folder = item.text.trim().trim_matches('`').trim();
                let owned = crate::base::vault::protected::owned_by_tabd(
                    &crate::base::vault::protected::fold(folder),
                    layout,
                );
                match (context::check_relative(folder), owned) {
                    (Ok(_), Some((owned, why))) => def.diagnostics.push(Diagnostic::error(
                        path,
                        item.line,
                        format!(
                            "inbox: {folder} is in {owned}, tabd's own ({why}); choose a folder of its own"
                        ),
                    )),
                    (Ok(p), None) => def.inbox = Some(p),
                    (Err(e), _) => {
                        def.diagnostics
                            .push(Diagnostic::error(path, item.line, format!("inbox: {e}")))
                    }
                }
            }
        }
        SectionKind::Other => add_other(def, section, path),
    }
}

/// The section names tabd knows, as people write them.
const KNOWN_SECTIONS: &[&str] = &[
    "Mission",
    "Goals",
    "Context Files",
    "Context",
    "Tools",
    "Schedule",
    "Inbox",
    "User Preferences",
    "Preferences",
    "Rules",
    "Skills",
];

/// A heading tabd does not know: passed to the model as written, with a warning — or, when it is
/// a near miss of a known one (`## Schedules`), an error: as written, the role would silently
/// lose that section (no schedule at all).
fn add_other(def: &mut RoleDef, section: &sections::Section, path: &Path) {
    let heading = section.heading.trim();
    if let Some(meant) = did_you_mean(heading, KNOWN_SECTIONS.iter().copied()) {
        def.diagnostics.push(Diagnostic::error(
            path,
            section.line,
            format!(
                "`## {heading}` is not a section tabd knows — did you mean `## {meant}`? As written, tabd would not \
                 read it as the role's {}; rename the heading",
                meant.to_lowercase()
            ),
        ));
    } else {
        def.diagnostics.push(Diagnostic::warning(
            path,
            section.line,
            format!(
                "unknown section `## {heading}` is passed to the model as written; known sections: Mission, Goals, \
                 Context Files, Tools, Schedule, Inbox, User Preferences, Rules, Skills"
            ),
        ));
    }
    def.extra.push((section.heading.clone(), section.body.clone()));
}

/// `## Schedule`: each line, each phrase of a line joined by `;`.
fn add_schedule(def: &mut RoleDef, items: &[sections::Item], path: &Path) {
    let lines = def.schedule.get_or_insert_with(Vec::new);
    for item in items {
        for phrase in item.text.split(';') {
            match ScheduleLine::compile(phrase, item.line) {
                Ok(Some(line)) if !line.ever_fires() => {
                    def.diagnostics.push(Diagnostic::warning(
                        path,
                        item.line,
                        format!(
                            "schedule \"{}\" never fires (`{}`: no such date comes); the role runs only from its inbox",
                            line.source,
                            line.cron_exprs().collect::<Vec<_>>().join("`, `")
                        ),
                    ));
                    lines.push(line);
                }
                Ok(Some(line)) => {
                    for note in &line.notes {
                        def.diagnostics
                            .push(Diagnostic::note(path, item.line, note.clone()));
                    }
                    lines.push(line);
                }
                Ok(None) => {}
                Err(e) => def
                    .diagnostics
                    .push(Diagnostic::error(path, item.line, e.to_string())),
            }
        }
    }
}

/// `## Tools`: vault tools by name, MCP tools as `server/*` or `server/tool`.
fn add_tools(def: &mut RoleDef, items: &[sections::Item], path: &Path) {
    let tools = def.tools.get_or_insert_with(Vec::new);
    for item in items {
        let tool = item.text.trim().trim_matches('`').trim();
        // `- read_file — read notes`: the name is the first word.
        let tool = tool.split([' ', '\t', ':']).next().unwrap_or("");
        if tool.contains('/') {
            match McpAllow::parse(tool, item.line) {
                Ok(a) => {
                    if !def.mcp.contains(&a) {
                        def.mcp.push(a)
                    }
                }
                Err(e) => def
                    .diagnostics
                    .push(Diagnostic::error(path, item.line, e.to_string())),
            }
            continue;
        }
        if tool == crate::base::calls::DELEGATE {
            // Listed by a person who read "a role calls only the tools its ## Tools lists": fine.
            // What gives the tool is `can_delegate_to`; say so when this file has none.
            if def.settings.can_delegate_to.is_empty() && def.settings.extends.is_none() {
                def.diagnostics.push(Diagnostic::warning(
                    path,
                    item.line,
                    "`delegate` comes from the frontmatter, not from ## Tools: name the roles this role may ask, \
                     `can_delegate_to: [risk]`, and it gets the tool (until then it has none)",
                ));
            }
            continue;
        }
        if VAULT_TOOLS.contains(&tool) {
            if !tools.iter().any(|t| t == tool) {
                tools.push(tool.to_string());
            }
        } else {
            let hint = did_you_mean(tool, VAULT_TOOLS.iter().copied())
                .map(|t| format!(" — did you mean `{t}`?"))
                .unwrap_or_default();
            def.diagnostics.push(Diagnostic::error(
                path,
                item.line,
                format!(
                    "unknown tool `{tool}`{hint} Known tools: {}; MCP tools are written server/* or server/tool",
                    VAULT_TOOLS.join(", ")
                ),
            ));
        }
    }
}

/// `## Skills`: one skill name an item (`- weekly-report — what it is for`: the first word).
/// Whether each is there and well formed is `tabd validate`'s to say: a run goes on without a
/// skill it cannot use.
fn add_skills(def: &mut RoleDef, items: &[sections::Item], path: &Path) {
    for item in items {
        let name = item.text.trim().trim_matches('`').trim();
        let name = name
            .split([' ', '\t', ':'])
            .next()
            .unwrap_or("")
            .trim_matches('`');
        if name.is_empty() || def.skills.iter().any(|s| s == name) {
            continue;
        }
        def.skills.push(name.to_string());
        def.skill_lines
            .entry(name.to_string())
            .or_insert_with(|| (path.to_path_buf(), item.line));
    }
}
