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
    for line in keep_apart(cli, &target, env) {
        println!("{line}");
    }
    let v = target.display();
    println!();
    println!("Next:");
    println!("  tabd validate --vault {v}     check the roles");
    println!("  tabd schedule --vault {v}     see when each role fires");
    println!("  Open {v} in Obsidian and read README.md there.");
    Ok(0)
}

/// Obsidian's Daily Notes and tabd's run log kept apart (DESIGN §26): when the vault's Daily
/// Notes folder meets the log folder, a config that does not exist yet is written with a log
/// folder that does not (`[log] folder`); an existing one is never changed — what to add to it is
/// said. Settings that cannot be read are said too. The lines to print.
fn keep_apart(cli: &Cli, target: &Path, env: &Env) -> Vec<String> {
    use crate::records::runlog::obsidian;
    let Ok(vault) = crate::base::vault::Vault::open(target) else {
        return Vec::new();
    };
    let notes = match obsidian::read(&vault) {
        obsidian::Reading::Absent => return Vec::new(),
        obsidian::Reading::Unreadable(why) => {
            return vec![format!(
                "warning: Obsidian's Daily Notes settings ({}) cannot be used: {why}; tabd reads them as if \
                 no folder were set",
                obsidian::SETTINGS
            )]
        }
        obsidian::Reading::Read(notes) => notes,
    };
    // A config with an error is `tabd validate`'s to report; its log folder is the default's.
    let folder = crate::setup::config::load(cli.config.as_deref(), env)
        .map(|c| c.log.folder)
        .unwrap_or_else(|_| crate::base::vault::layout::DAILY.to_string());
    if !notes.meets(&folder) {
        return Vec::new();
    }
    let Some((config, _)) = crate::setup::config::locate(cli.config.as_deref(), env) else {
        return vec![format!("warning: {}", notes.warning(&folder, "the config file"))];
    };
    let apart = notes.apart();
    if config.exists() {
        return vec![format!(
            "warning: {}",
            notes.warning(&folder, &config.display().to_string())
        )];
    }
    let text = format!("[log]\nfolder = \"{apart}\"   # apart from Obsidian's Daily Notes\n");
    let written = config
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            use std::io::Write;
            // Never over a config made meanwhile.
            std::fs::File::create_new(&config)?.write_all(text.as_bytes())
        });
    match written {
        Ok(()) => vec![format!(
            "Obsidian's Daily Notes keep your notes in {}/: tabd's run log goes to {apart}/ instead \
             (`[log] folder = \"{apart}\"`, written to {}).",
            notes.folder,
            config.display()
        )],
        Err(e) => vec![format!(
            "warning: cannot write {} ({e}); {}",
            config.display(),
            notes.warning(&folder, &config.display().to_string())
        )],
    }
}
