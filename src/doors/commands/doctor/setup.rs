//! What the person wrote, as `tabd validate` finds it: the config, the roles, and the Daily
//! Notes that meet the run log.

use super::{count, Check, Status};
use crate::base::diag::{Diagnostic, Severity};
use crate::doors::commands::validate::Findings;
use crate::doors::commands::Workspace;

/// The findings of `severity` among `diags`.
fn of<'a>(diags: impl Iterator<Item = &'a Diagnostic>, severity: Severity) -> Vec<&'a Diagnostic> {
    diags.filter(|d| d.severity == severity).collect()
}

/// `errors` (a fix) or else `warnings` (a warning) said as their count, the first of them, and
/// where the rest are; `None` when there are neither.
fn said(errors: &[&Diagnostic], warnings: &[&Diagnostic]) -> Option<(Status, String)> {
    let (status, list, kind) = match (errors, warnings) {
        ([], []) => return None,
        ([], w) => (Status::Warning, w, "warning"),
        (e, _) => (Status::Fix, e, "error"),
    };
    let also = if status == Status::Fix && !warnings.is_empty() {
        format!(" and {}", count(warnings.len(), "warning"))
    } else {
        String::new()
    };
    Some((
        status,
        format!(
            "{}{also}; the first: {} — `tabd validate` lists each with its line",
            count(list.len(), kind),
            list[0]
        ),
    ))
}

/// The config was read (else the command stopped with its error, exit 2): what it names that
/// this machine lacks.
pub(super) fn config(ws: &Workspace, findings: &Findings) -> Check {
    let errors = of(findings.config.iter(), Severity::Error);
    let warnings = of(findings.config.iter(), Severity::Warning);
    let file = ws.config.path.as_ref().map_or_else(
        || "no config file (the defaults)".to_string(),
        |p| p.display().to_string(),
    );
    match said(&errors, &warnings) {
        Some((status, message)) => Check::new("config", status, format!("{file}: {message}")),
        None => Check::new(
            "config",
            Status::Ok,
            format!("{file} read; the vault is {}", ws.root.display()),
        ),
    }
}

/// Every role file, what the vault holds for the roles, and their plans, as `validate` says.
pub(super) fn roles(ws: &Workspace, findings: &Findings) -> Check {
    let errors = of(findings.about_roles(), Severity::Error);
    let warnings = of(findings.about_roles(), Severity::Warning);
    if let Some((status, message)) = said(&errors, &warnings) {
        return Check::new("roles", status, message);
    }
    let names: Vec<&str> = ws
        .roles
        .runnable()
        .filter(|r| r.enabled())
        .map(|r| r.name.as_str())
        .collect();
    if names.is_empty() {
        return Check::new(
            "roles",
            Status::Warning,
            format!(
                "no role to run in {}/: add a role file there (docs/roles.md)",
                ws.vault.layout().roles()
            ),
        );
    }
    Check::new(
        "roles",
        Status::Ok,
        format!(
            "{} without a problem ({})",
            count(names.len(), "role"),
            names.join(", ")
        ),
    )
}

/// Obsidian's Daily Notes and the run log: a log that shares its folder with the person's daily
/// notes is moved aside day by day, and the config line that keeps them apart is the fix.
pub(super) fn daily_notes(ws: &Workspace, findings: &Findings) -> Check {
    if findings.log_apart.is_empty() {
        return Check::new(
            "daily_notes",
            Status::Ok,
            format!(
                "the run log goes to {}/, apart from your own notes",
                ws.vault.log_folder()
            ),
        );
    }
    let said: Vec<String> = findings
        .log_apart
        .iter()
        .map(|(file, said)| format!("{file}: {said}"))
        .collect();
    Check::new("daily_notes", Status::Fix, said.join("; "))
}
