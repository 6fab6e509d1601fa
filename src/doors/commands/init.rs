//! `tabd init [VAULT]`

use std::path::Path;

use crate::base::environment::Env;
use crate::base::template;
use crate::doors::args::Cli;

use super::CliError;

pub fn run(cli: &Cli, path: Option<&Path>, env: &Env) -> Result<u8, CliError> {
    let Some(target) = path.map(Path::to_path_buf).or_else(|| super::vault_arg(cli, env)) else {
        return Err(CliError::usage(
            "name the folder for the new vault: `tabd init ~/Obsidian/Work` (or pass --vault)",
        ));
    };
    let report = template::init_vault(&target)
        .map_err(|e| CliError::failed(format!("cannot create the vault at {}: {e}", target.display())))?;
    println!("Vault: {}", target.display());
    if report.created.is_empty() {
        println!(
            "Nothing to create: every template file already exists (kept {}).",
            report.kept.len()
        );
    } else {
        println!("Created {} files:", report.created.len());
        for f in &report.created {
            println!("  {}", f.display());
        }
    }
    if !report.kept.is_empty() && !report.created.is_empty() {
        println!("Kept {} existing files unchanged.", report.kept.len());
    }
    for f in &report.folders {
        println!("  {}/", f.display());
    }
    let v = target.display();
    println!();
    println!("Next:");
    println!("  tabd validate --vault {v}     check the roles");
    println!("  tabd schedule --vault {v}     see when each role fires");
    println!("  Open {v} in Obsidian and read README.md there.");
    Ok(0)
}
