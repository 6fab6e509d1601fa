//! What belongs to one vault (docs/spec.md §26): where tabd's folders are in it (`folder`) and where
//! its run log goes (`log`). One config may serve several vaults (`--vault`), so these are kept
//! per vault — `tabd init` on a second vault never moves the first one's log:
//!
//! ```toml
//! vault = "~/Notes"            # the vault tabd uses when none is given
//!
//! [vaults."~/Notes"]           # settings of that vault only
//! folder = "tabd"              # tabd's folders under tabd/ (default: the vault's root)
//! log = "tabd/log"             # the run log (default: daily/ at the root, <folder>/log under one)
//! ```
//!
//! `[vault]` may also be a table naming its vault: `[vault] path = "~/Notes"`, `folder = …`,
//! `log = …` (the same as `vault = "~/Notes"` and `[vaults."~/Notes"]`). `[log] folder` stays the
//! run log of every vault that says nothing of its own.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::base::vault::layout::Layout;
use crate::base::vault::VaultPath;

/// `[vaults."PATH"]` (or `[vault]`'s settings) as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSettings {
    folder: Option<Spanned<String>>,
    log: Option<Spanned<String>>,
}

/// One vault's settings, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaultSettings {
    /// Where tabd's folders are in it.
    pub layout: Layout,
    /// Its run log's folder, if it names one.
    pub log: Option<String>,
}

/// Every vault's settings the config has, by path (`~` expanded, as written otherwise).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vaults {
    pub entries: Vec<(PathBuf, VaultSettings)>,
}

impl Vaults {
    /// The settings of the vault at `root` (canonical): the entry whose path leads there.
    pub fn of(&self, root: &Path) -> Option<&VaultSettings> {
        self.entries
            .iter()
            .find(|(p, _)| std::fs::canonicalize(p).is_ok_and(|c| c == root) || p == root)
            .map(|(_, s)| s)
    }
}

/// A problem, at the span of what it is about.
pub(super) type Problem = (Option<std::ops::Range<usize>>, String);

/// `${VAR}` and `~` expanded in a value at a span, or the problem.
pub(super) type Expand<'a> = &'a dyn Fn(&str, std::ops::Range<usize>) -> Result<String, Problem>;

/// `vault` as written: a path (a string), or a table naming its vault and its settings.
pub(super) fn read_vault(
    value: &Spanned<toml::Value>,
    expand: Expand<'_>,
) -> Result<(Option<String>, Option<VaultSettings>), Problem> {
    let span = value.span();
    match value.get_ref() {
        toml::Value::String(path) => Ok((Some(expand(path, span)?), None)),
        toml::Value::Table(t) => {
            let text = |k: &str| -> Result<Option<String>, Problem> {
                match t.get(k) {
                    None => Ok(None),
                    Some(toml::Value::String(s)) => expand(s, span.clone()).map(Some),
                    Some(_) => Err((Some(span.clone()), format!("[vault] {k} must be text"))),
                }
            };
            if let Some(k) = t
                .keys()
                .find(|k| !["path", "folder", "log"].contains(&k.as_str()))
            {
                return Err((
                    Some(span),
                    format!("[vault] has no key `{k}`; it takes path, folder and log"),
                ));
            }
            let path = text("path")?;
            let settings = settings(text("folder")?.as_deref(), text("log")?.as_deref())
                .map_err(|m| (Some(span.clone()), m))?;
            if path.is_none() {
                return Err((
                    Some(span),
                    "[vault] needs `path = \"…\"`: the vault its folder and log belong to".into(),
                ));
            }
            Ok((path, Some(settings)))
        }
        _ => Err((
            Some(span),
            "vault must be a folder (vault = \"~/Notes\") or a table ([vault] path = …)".into(),
        )),
    }
}

/// `[vaults."PATH"]`, each checked.
pub(super) fn read_vaults(
    raw: std::collections::BTreeMap<Spanned<String>, RawSettings>,
    expand: Expand<'_>,
) -> Result<Vec<(String, VaultSettings)>, Problem> {
    raw.into_iter()
        .map(|(path, s)| {
            let span = path.span();
            let folder = s
                .folder
                .as_ref()
                .map(|f| expand(f.get_ref(), f.span()))
                .transpose()?;
            let log = s
                .log
                .as_ref()
                .map(|l| expand(l.get_ref(), l.span()))
                .transpose()?;
            let settings = settings(folder.as_deref(), log.as_deref()).map_err(|m| {
                let at = s
                    .folder
                    .as_ref()
                    .or(s.log.as_ref())
                    .map_or(span.clone(), Spanned::span);
                (Some(at), m)
            })?;
            Ok((expand(path.get_ref(), span)?, settings))
        })
        .collect()
}

/// A vault's settings from its `folder` and `log`, or why they cannot be.
fn settings(folder: Option<&str>, log: Option<&str>) -> Result<VaultSettings, String> {
    let layout = match folder {
        Some(f) => Layout::under(&check_home(f)?),
        None => Layout::default(),
    };
    let log = log
        .map(|l| super::log::check_folder(l, &layout).map_err(|e| e.to_string()))
        .transpose()?;
    Ok(VaultSettings { layout, log })
}

/// Why `written` cannot be where tabd's folders go: it must be a plain folder inside the vault,
/// not hidden (a hidden one Obsidian does not show, and `.tabd/` is tabd's state).
pub fn check_home(written: &str) -> Result<String, String> {
    let folder = written.trim().trim_start_matches("./").trim_end_matches('/');
    let bad = |why: &str| {
        Err(format!(
            "folder = \"{written}\": {why}; write a folder of the vault for tabd's roles and notes, like \"tabd\""
        ))
    };
    if folder.is_empty() {
        // The root: the default, written out.
        return Ok(String::new());
    }
    match VaultPath::parse(folder, false) {
        Ok(p) if p.components().any(|c| c.starts_with('.')) => bad("a hidden folder"),
        Ok(p) => Ok(p.as_str().to_string()),
        Err(e) => bad(&format!("not a folder inside the vault ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_expand(s: &str, _: std::ops::Range<usize>) -> Result<String, Problem> {
        Ok(s.to_string())
    }

    #[test]
    fn a_home_is_a_plain_folder_inside_the_vault() {
        assert_eq!(check_home("tabd").unwrap(), "tabd");
        assert_eq!(check_home("./Tools/tabd/").unwrap(), "Tools/tabd");
        assert_eq!(check_home("").unwrap(), "");
        for (bad, says) in [
            (".tabd", "hidden"),
            ("notes/.x", "hidden"),
            ("../out", "not a folder inside the vault"),
            ("/abs", "not a folder inside the vault"),
        ] {
            let e = check_home(bad).unwrap_err();
            assert!(e.contains(says) && e.contains("like \"tabd\""), "{bad}: {e}");
        }
    }

    #[test]
    fn a_vault_table_names_its_vault_and_settings() {
        let v: toml::Table = toml::from_str("[vault]\npath = \"/v\"\nfolder = \"tabd\"\n").unwrap();
        let value: Spanned<toml::Value> = toml::from_str::<
            std::collections::BTreeMap<String, Spanned<toml::Value>>,
        >(&toml::to_string(&v).unwrap())
        .unwrap()
        .remove("vault")
        .unwrap();
        let (path, settings) = read_vault(&value, &no_expand).unwrap();
        assert_eq!(path.as_deref(), Some("/v"));
        let settings = settings.unwrap();
        assert_eq!(settings.layout.roles(), "tabd/roles");
        assert_eq!(settings.log, None);
    }

    #[test]
    fn a_log_that_meets_tabds_folders_under_the_home_is_refused() {
        let e = settings(Some("tabd"), Some("tabd/roles")).unwrap_err();
        assert!(e.contains("tabd/roles"), "{e}");
        assert!(
            settings(Some("tabd"), Some("roles")).is_ok(),
            "roles/ at the root is the person's"
        );
    }
}
