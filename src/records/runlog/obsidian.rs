//! Obsidian's Daily Notes settings (`.obsidian/daily-notes.json`, docs/spec.md §26), read to keep the
//! person's daily notes and tabd's run log apart.
//!
//! The file is input like any other in the vault: one that is too large, not JSON, not an object,
//! or holds a `folder` or `format` that is not text is a warning with its reason, never an error
//! and never a crash; tabd then reads it as absent. When the Daily Notes folder meets the log
//! folder (the same folder, in any spelling, or one inside the other), a person's note and tabd's
//! log would share it — Obsidian opens a note tabd made as the person's journal, and a role that
//! reads the person's notes reads tabd's log — so tabd logs in `agent/log/` instead
//! (`RunLog::may_write`) and `init`, `validate` and `run` say which config line keeps them apart.

use serde_json::Value;

use crate::base::vault::protected::fold;
use crate::base::vault::{Vault, VaultError, VaultPath};

/// Where Obsidian keeps the Daily Notes settings.
pub const SETTINGS: &str = ".obsidian/daily-notes.json";

/// Far more than the settings ever take (a few short strings).
const MAX_BYTES: u64 = 64 * 1024;

/// Obsidian's default note name format (moment.js).
const DEFAULT_FORMAT: &str = "YYYY-MM-DD";

/// The log folders `init` offers when Daily Notes has `daily/`, in order.
const APART: [&str; 2] = ["tabd-log", "agent/log"];

/// The Daily Notes settings that matter here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DailyNotes {
    /// Vault-relative, no `/` at either end; empty: the vault's top.
    pub folder: String,
    /// The note name format (moment.js), `YYYY-MM-DD` when unset.
    pub format: String,
}

/// What reading the settings found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// No settings file: Daily Notes keeps its notes at the vault's top (or is not used).
    Absent,
    Read(DailyNotes),
    /// The file is there but could not be read: why, a sentence.
    Unreadable(String),
}

/// Reads `.obsidian/daily-notes.json` of `vault`.
pub fn read(vault: &Vault) -> Reading {
    let Ok(path) = VaultPath::parse(SETTINGS, false) else {
        return Reading::Absent;
    };
    let bytes = match vault.read_bytes(&path, MAX_BYTES) {
        Ok((bytes, _)) => bytes,
        Err(VaultError::NotFound(_)) => return Reading::Absent,
        Err(VaultError::TooLarge { size, .. }) => {
            return Reading::Unreadable(format!(
                "it is {size} bytes, more than Daily Notes' settings ever take ({MAX_BYTES}); not read"
            ))
        }
        Err(e) => return Reading::Unreadable(format!("cannot be read: {e}")),
    };
    parse(&bytes)
}

/// The settings in `bytes`.
pub fn parse(bytes: &[u8]) -> Reading {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Reading::Unreadable(format!("not JSON ({e})")),
    };
    let Some(object) = value.as_object() else {
        return Reading::Unreadable("not a JSON object of settings".into());
    };
    let text = |key: &str, default: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(default.to_string()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(default.to_string()),
        // It is shown in messages and compared with paths: no line ends, escapes or the like.
        Some(Value::String(s)) if s.chars().any(char::is_control) || s.len() > 1024 => {
            Err(format!("its `{key}` holds control characters or is over 1 KiB"))
        }
        Some(Value::String(s)) => Ok(s.trim().to_string()),
        Some(other) => Err(format!("its `{key}` is {}, not text", kind(other))),
    };
    let folder = match text("folder", "") {
        Ok(f) => f.trim_start_matches("./").trim_matches('/').to_string(),
        Err(why) => return Reading::Unreadable(why),
    };
    match text("format", DEFAULT_FORMAT) {
        Ok(format) => Reading::Read(DailyNotes { folder, format }),
        Err(why) => Reading::Unreadable(why),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl DailyNotes {
    /// Whether notes Obsidian makes and tabd's log in `log` would share a folder: the same one,
    /// in any spelling, or one inside the other (never the vault's top, which holds everything).
    pub fn meets(&self, log: &str) -> bool {
        if self.folder.is_empty() {
            return false;
        }
        let (mine, theirs) = (fold(log), fold(&self.folder));
        mine.within(&theirs) || theirs.within(&mine)
    }

    /// A log folder that does not meet these Daily Notes.
    pub fn apart(&self) -> &'static str {
        APART.into_iter().find(|f| !self.meets(f)).unwrap_or(APART[1])
    }

    /// What `init`, `validate` and `run` say when the two meet, with the config lines that keep
    /// them apart (`config`: the config file, shown).
    pub fn warning(&self, log: &str, config: &str) -> String {
        format!(
            "Obsidian's Daily Notes keep your notes in {}/ ({SETTINGS}), the folder of tabd's run \
             log ({log}/); tabd never writes into your notes and logs in agent/log/ instead. To keep \
             them apart, add to {config}:\n  [log]\n  folder = \"{}\"",
            self.folder,
            self.apart()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Reading {
        parse(json.as_bytes())
    }

    fn notes(folder: &str) -> DailyNotes {
        DailyNotes {
            folder: folder.into(),
            format: DEFAULT_FORMAT.into(),
        }
    }

    #[test]
    fn settings_are_read_and_odd_ones_are_reasons_not_crashes() {
        assert_eq!(
            read(r#"{"folder": "/Daily/", "format": "YYYY-MM-DD dddd", "template": "t"}"#),
            Reading::Read(DailyNotes {
                folder: "Daily".into(),
                format: "YYYY-MM-DD dddd".into()
            })
        );
        assert_eq!(read("{}"), Reading::Read(notes("")));
        assert_eq!(
            read(r#"{"folder": null, "format": ""}"#),
            Reading::Read(notes(""))
        );
        for (bad, says) in [
            ("", "not JSON"),
            ("{\"folder\": \"daily\"", "not JSON"),
            ("\u{feff}garbage", "not JSON"),
            ("[1, 2]", "not a JSON object"),
            ("\"daily\"", "not a JSON object"),
            (r#"{"folder": 7}"#, "`folder` is a number"),
            (r#"{"folder": ["daily"]}"#, "`folder` is a list"),
            (r#"{"format": {"a": 1}}"#, "`format` is an object"),
            (r#"{"folder": "daily\n[log]"}"#, "control characters"),
        ] {
            match read(bad) {
                Reading::Unreadable(why) => assert!(why.contains(says), "{bad}: {why}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(read(&deep), Reading::Unreadable(_)));
    }

    #[test]
    fn they_meet_in_one_folder_in_any_spelling_or_one_inside_the_other() {
        assert!(notes("daily").meets("daily"));
        assert!(notes("Daily").meets("daily"));
        assert!(notes("daily/journal").meets("daily"));
        assert!(notes("journal").meets("journal/tabd"));
        assert!(!notes("").meets("daily"));
        assert!(!notes("journal").meets("daily"));
        assert!(!notes("daily-notes").meets("daily"));
        assert_eq!(notes("daily").apart(), "tabd-log");
        assert_eq!(notes("tabd-log").apart(), "agent/log");
        let said = notes("daily").warning("daily", "~/.config/tabd/config.toml");
        assert!(
            said.ends_with("add to ~/.config/tabd/config.toml:\n  [log]\n  folder = \"tabd-log\""),
            "{said}"
        );
    }
}
