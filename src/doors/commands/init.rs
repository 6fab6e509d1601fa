//! `tabd init [VAULT] [--example]` (and `tabd run --init`): tabd's folders in a vault.
//!
//! A new, empty folder gets the example vault; a vault a person already lives in gets only what
//! tabd needs, under one folder of its own (`base::template`). What belongs to that vault — where
//! tabd's folders are, where its log goes — is written into the config for that vault alone
//! (`[vaults."PATH"]`), and a config that names no vault is made to name this one, so `tabd
//! status` and the service find it. Every file made or kept is listed with its absolute path.

use std::path::{Path, PathBuf};

use crate::base::environment::Env;
use crate::base::template::{self, Found, Plan};
use crate::base::vault::layout::Layout;
use crate::doors::args::Cli;

use super::CliError;

pub fn run(cli: &Cli, path: Option<&Path>, example: bool, env: &Env) -> Result<u8, CliError> {
    let Some(target) = path.map(Path::to_path_buf).or_else(|| super::vault_arg(cli, env)) else {
        return Err(CliError::usage(
            "name the folder for the new vault: `tabd init ~/Obsidian/Work` (or pass --vault)",
        ));
    };
    let done = init(cli, &target, example, env)?;
    print(&done);
    let v = done.root.display();
    say!();
    say!("Next:");
    say!("  tabd validate --vault {v}     check the roles");
    say!("  tabd schedule --vault {v}     see when each role fires");
    match done.plan.layout.home() {
        Some(home) => say!(
            "  Open {v} in Obsidian: tabd's roles are in {home}/roles/, its log in {}/.",
            done.plan.log
        ),
        None => say!("  Open {v} in Obsidian and read README.md there."),
    }
    Ok(0)
}

/// What `init` did at one vault.
pub struct Done {
    /// The vault (absolute).
    pub root: PathBuf,
    pub found: Found,
    pub plan: Plan,
    pub report: template::InitReport,
    /// What was written into the config, and where (none: nothing needed to be).
    pub config: Vec<String>,
    /// Warnings (Obsidian settings that cannot be read, a config that cannot be changed).
    pub warnings: Vec<String>,
}

/// Puts tabd into the folder `target` (see the module's text).
pub fn init(cli: &Cli, target: &Path, example: bool, env: &Env) -> Result<Done, CliError> {
    std::fs::create_dir_all(target)
        .map_err(|e| CliError::failed(format!("cannot create the vault at {}: {e}", target.display())))?;
    let root = std::fs::canonicalize(target)
        .map_err(|e| CliError::failed(format!("cannot open {}: {e}", target.display())))?;
    // A config with an error is `tabd validate`'s to report: init goes on with the defaults and
    // does not write into it.
    let config = crate::setup::config::load(cli.config.as_deref(), env).ok();
    let known = config
        .as_ref()
        .and_then(|c| c.vaults.of(&root))
        .map(|s| s.layout.clone());
    let found = template::find(&root, known.as_ref());
    let mut warnings = Vec::new();
    let (layout, example) = match &found {
        Found::Empty => (Layout::default(), true),
        Found::Tabds(layout) => (layout.clone(), example),
        Found::Persons => (template::free_home(&root), example),
    };
    let mut log = match &config {
        Some(c) if known.is_some() || layout.home().is_none() => {
            c.for_vault(&root).log.unwrap_or_else(|| layout.daily())
        }
        _ => layout.daily(),
    };
    // Obsidian's Daily Notes where the log would go: the log goes beside them, for this vault.
    let apart = keep_apart(&root, &log, &mut warnings);
    if let Some(folder) = &apart {
        log.clone_from(folder);
    }
    let plan = Plan { layout, example, log };
    let report = template::init_vault(&root, &plan)
        .map_err(|e| CliError::failed(format!("cannot create the vault at {}: {e}", root.display())))?;
    // A config that has this vault's settings already (in any spelling: `~/Notes`, a link, a
    // `[vault]` table) gets no second table: it would win over the person's own.
    if known.is_some() {
        if let Some(folder) = &apart {
            warnings.push(format!(
                "the config's settings for this vault put the run log where Obsidian's Daily Notes keep your \
                 notes; set `log = \"{folder}\"` there to keep them apart"
            ));
        }
    }
    let own = known.is_none() && (plan.layout.home().is_some() || apart.is_some());
    let config_lines = write_config(cli, env, &root, &plan, (own, apart.is_some()), &mut warnings);
    Ok(Done {
        root,
        found,
        plan,
        report,
        config: config_lines,
        warnings,
    })
}

/// Says what `init` did, every path absolute.
pub fn print(done: &Done) {
    let at = |p: &PathBuf| done.root.join(p).display().to_string();
    say!("Vault: {}", done.root.display());
    match (&done.found, done.plan.layout.home()) {
        (Found::Persons, Some(home)) => say!(
            "It has notes of yours: tabd keeps everything of its own under {}/ and changes none of \
             your notes without asking (--example adds a made-up project there to try it on).",
            done.root.join(home).display()
        ),
        (Found::Tabds(_), _) => say!("tabd is set up here already: only what is missing is added."),
        _ => {}
    }
    if done.report.created.is_empty() {
        say!("Created no file: every file tabd would write is there already.");
    } else {
        say!("Created {} files:", done.report.created.len());
        for f in &done.report.created {
            say!("  {}", at(f));
        }
    }
    if !done.report.folders.is_empty() {
        say!("Created {} folders:", done.report.folders.len());
        for f in &done.report.folders {
            say!("  {}/", at(f));
        }
    }
    if !done.report.kept.is_empty() {
        say!("Kept {} files as they are:", done.report.kept.len());
        for f in &done.report.kept {
            say!("  {}", at(f));
        }
    }
    for line in &done.config {
        say!("{line}");
    }
    for w in &done.warnings {
        say!("warning: {w}");
    }
}

/// Where the log goes when Obsidian's Daily Notes keep the person's notes where `log` is: the
/// first free folder beside (`None`: they do not meet, or cannot be read — said).
fn keep_apart(root: &Path, log: &str, warnings: &mut Vec<String>) -> Option<String> {
    use crate::records::runlog::obsidian;
    let vault = crate::base::vault::Vault::open(root).ok()?;
    match obsidian::read(&vault) {
        obsidian::Reading::Absent => None,
        obsidian::Reading::Unreadable(why) => {
            warnings.push(format!(
                "Obsidian's Daily Notes settings ({}) cannot be used: {why}; tabd reads them as if no folder \
                 were set",
                obsidian::SETTINGS
            ));
            None
        }
        obsidian::Reading::Read(notes) => notes.meets(log).then(|| notes.apart().to_string()),
    }
}

/// The config for this vault: a new one naming it, or the existing one told of it — `vault =` when
/// it names none, and `[vaults."PATH"]` when `own` (the vault's layout or log is not the default,
/// and the config has no settings of this vault yet); `apart`: the log was moved beside Obsidian's
/// Daily Notes. Never another vault's settings. The lines that say what was written.
fn write_config(
    cli: &Cli,
    env: &Env,
    root: &Path,
    plan: &Plan,
    (own, apart): (bool, bool),
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let Some((path, _)) = crate::setup::config::locate(cli.config.as_deref(), env) else {
        warnings.push("no config folder is known (no HOME): tabd needs --vault on every command".into());
        return Vec::new();
    };
    // A config linked into place (a dotfiles repository) is written where the link leads; the
    // link stays.
    let path = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(&path).unwrap_or(path),
        _ => path,
    };
    let existing = std::fs::read_to_string(&path).ok();
    let edited = match config_text(existing.as_deref(), root, plan, own) {
        Ok(Some(text)) => text,
        Ok(None) => return Vec::new(),
        Err(why) => {
            warnings.push(format!(
                "{} cannot be changed ({why}); add to it:\n{}",
                path.display(),
                vault_table(root, plan)
            ));
            return Vec::new();
        }
    };
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| match existing {
            // Never over a config made meanwhile.
            None => {
                use std::io::Write;
                std::fs::File::create_new(&path)?.write_all(edited.as_bytes())
            }
            Some(_) => atomic_write(&path, edited.as_bytes()),
        });
    match written {
        Ok(()) => {
            let mut lines = vec![format!("Config: {} now names this vault.", path.display())];
            if let Some(home) = plan.layout.home() {
                lines.push(format!(
                    "  tabd's folders are under {home}/ and its log in {}/ for this vault only ([vaults.\"{}\"]).",
                    plan.log,
                    root.display()
                ));
            } else if apart {
                lines.push(format!(
                    "  Obsidian's Daily Notes keep your notes there: tabd's run log goes to {}/ in this vault \
                     ([vaults.\"{}\"] log).",
                    plan.log,
                    root.display()
                ));
            }
            lines
        }
        Err(e) => {
            warnings.push(format!(
                "cannot write {} ({e}); add to it:\n{}",
                path.display(),
                vault_table(root, plan)
            ));
            Vec::new()
        }
    }
}

/// The config's new text: `existing` (or a new config) with `vault = ROOT` when it names no vault,
/// and this vault's table when `own`. `None`: nothing to change.
fn config_text(
    existing: Option<&str>,
    root: &Path,
    plan: &Plan,
    own: bool,
) -> Result<Option<String>, String> {
    let mut doc: toml_edit::DocumentMut = existing
        .unwrap_or("")
        .parse()
        .map_err(|e: toml_edit::TomlError| e.message().to_string())?;
    let root_text = root.to_string_lossy().into_owned();
    let mut changed = existing.is_none();
    if !doc.contains_key("vault") {
        doc.insert("vault", toml_edit::value(root_text.clone()));
        changed = true;
    }
    if own {
        let vaults = doc
            .entry("vaults")
            .or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            })
            .as_table_mut()
            .ok_or("its `vaults` is not a table")?;
        if !vaults.contains_key(&root_text) {
            let mut table = toml_edit::Table::new();
            if let Some(home) = plan.layout.home() {
                table.insert("folder", toml_edit::value(home));
            }
            table.insert("log", toml_edit::value(plan.log.clone()));
            vaults.insert(&root_text, toml_edit::Item::Table(table));
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    let mut text = doc.to_string();
    if existing.is_none() {
        text = format!("# Written by `tabd init`; every key is optional (docs/config.md).\n{text}");
    }
    Ok(Some(text))
}

/// This vault's table, as a person would add it.
fn vault_table(root: &Path, plan: &Plan) -> String {
    let folder = plan
        .layout
        .home()
        .map(|h| format!("folder = \"{h}\"\n"))
        .unwrap_or_default();
    format!("[vaults.\"{}\"]\n{folder}log = \"{}\"", root.display(), plan.log)
}

/// Replaces `path` with `bytes` through a temp file beside it (a crash leaves the old or the new).
fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    // The person's config keeps its mode (it may hold secrets as ${VAR} names only, but still).
    if let Ok(meta) = std::fs::metadata(path) {
        let _kept = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(home: Option<&str>, log: &str) -> Plan {
        Plan {
            layout: home.map_or_else(Layout::default, Layout::under),
            example: false,
            log: log.into(),
        }
    }

    /// Issue 48: a second vault's init adds its own table and leaves the first vault's settings
    /// and the config's comments as they were.
    #[test]
    fn a_second_vault_gets_its_own_table_and_the_first_keeps_its_own() {
        let first = "# mine\nvault = \"/v1\"\n\n[log]\nfolder = \"daily\"\n";
        let text = config_text(
            Some(first),
            Path::new("/v2"),
            &plan(Some("tabd"), "tabd/log"),
            true,
        )
        .unwrap()
        .unwrap();
        assert!(text.starts_with("# mine\nvault = \"/v1\"\n"), "{text}");
        assert!(text.contains("[log]\nfolder = \"daily\""), "{text}");
        assert!(
            text.contains("[vaults.\"/v2\"]\nfolder = \"tabd\"\nlog = \"tabd/log\""),
            "{text}"
        );
        let c = crate::setup::config::parse(&text, Path::new("c.toml"), &Env::default(), None).unwrap();
        assert_eq!(c.vault.as_deref(), Some(Path::new("/v1")));
        assert_eq!(c.for_vault(Path::new("/v1")).log.as_deref(), Some("daily"));
        assert_eq!(c.for_vault(Path::new("/v2")).layout.roles(), "tabd/roles");
        // Run again: nothing to change.
        assert_eq!(
            config_text(
                Some(&text),
                Path::new("/v2"),
                &plan(Some("tabd"), "tabd/log"),
                true
            ),
            Ok(None)
        );
    }

    #[test]
    fn a_new_config_names_the_vault() {
        let text = config_text(None, Path::new("/v"), &plan(None, "daily"), false)
            .unwrap()
            .unwrap();
        let c = crate::setup::config::parse(&text, Path::new("c.toml"), &Env::default(), None).unwrap();
        assert_eq!(c.vault.as_deref(), Some(Path::new("/v")));
        assert!(c.vaults.entries.is_empty(), "{text}");
    }
}
