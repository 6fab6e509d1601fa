//! `tabd validate`: every problem at once, `path:line: error: …`, exit 1 on any error.

use super::{CliError, Workspace};

pub fn run(ws: &Workspace) -> Result<u8, CliError> {
    let roles = &ws.roles;
    for d in &roles.diagnostics {
        println!("{d}");
    }
    let key_env = &ws.config.provider.api_key_env;
    let needs_key = ws.config.provider.kind == crate::config::ProviderKind::Anthropic;
    if needs_key && ws.env.get(key_env).is_none() {
        println!(
            "config: warning: {key_env} is not set, so model calls will pause until it is; \
             export it where tabd runs (see docs/providers.md)"
        );
    }
    let ok: Vec<&str> = roles.runnable().map(|r| r.name.as_str()).collect();
    let abstract_roles: Vec<&str> = roles
        .roles
        .values()
        .filter(|r| r.is_abstract)
        .map(|r| r.name.as_str())
        .collect();
    let broken: Vec<&str> = roles.broken.keys().map(String::as_str).collect();
    let errors = roles.errors().count();
    let warnings = roles.diagnostics.len() - errors;
    println!(
        "config: {}",
        ws.config.path.as_ref().map_or_else(
            || "defaults (no config file)".to_string(),
            |p| p.display().to_string()
        )
    );
    println!("vault: {}", ws.root.display());
    println!("roles: {} ok ({})", ok.len(), ok.join(", "));
    if !abstract_roles.is_empty() {
        println!("abstract: {}", abstract_roles.join(", "));
    }
    if !broken.is_empty() {
        println!("broken: {} ({})", broken.len(), broken.join(", "));
    }
    println!("{errors} errors, {warnings} warnings");
    Ok(if errors > 0 { 1 } else { 0 })
}
