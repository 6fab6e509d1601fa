//! The process environment as a value, so config and roles can expand `${VAR}` and tests never
//! mutate the real environment.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What every child process gets from tabd's environment (never its API keys or other secrets):
/// what programs, `npx`, `uvx` and friends need to run. Anything else is passed by name.
pub const CHILD_BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    // Where this machine's certificate authorities are (a company proxy's own CA): without
    // them `npx` and `uvx` cannot fetch their packages. Paths, never secrets.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// Values shorter than this are never hidden: `1`, `on` or `en` would blank ordinary text and
/// hide nothing (and a secret that short is no secret).
const SHORTEST_HIDDEN: usize = 4;

/// Values this long or longer are hidden wherever they occur; shorter ones only where they stand
/// as a word of their own (not inside a longer run of letters and digits), so a `${PORT}` of
/// `8080` is hidden in `host:8080/` but not in `18080`.
const HIDDEN_ANYWHERE: usize = 8;

/// What names a variable whose value is a secret even where it was not used as `${NAME}`.
const SECRET_SIGNS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
];

/// Writes secret values back as the `${NAME}` they came from (docs/spec.md §24). The rule, one for
/// everything tabd prints or records:
/// - every value that was expanded from `${NAME}` (in the config, a role, an MCP server's table,
///   a webhook) is a secret, if it has at least 4 characters — under 8, only where it stands as a
///   word of its own — unless it is one tabd hands every child (`CHILD_BASE_ENV`: `HOME`,
///   `PATH`, the locale …), which is no secret;
/// - so is every value of 8 or more characters of a variable named like a secret (`*KEY*`,
///   `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*AUTH*`, `*CREDENTIAL*`, `*COOKIE*`), used or not.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (value, `${NAME}`), longest value first, so a value containing another is replaced whole.
    pairs: Vec<(String, String)>,
}

impl Redactor {
    fn new(mut pairs: Vec<(String, String)>) -> Self {
        pairs.retain(|(v, _)| v.chars().count() >= SHORTEST_HIDDEN);
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Self { pairs }
    }

    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, shown) in &self.pairs {
            if !out.contains(value.as_str()) {
                continue;
            }
            out = if value.chars().count() >= HIDDEN_ANYWHERE {
                out.replace(value.as_str(), shown)
            } else {
                replace_words(&out, value, shown)
            };
        }
        out
    }

    /// Every string in `value` (its keys stay), for JSON tabd prints or writes.
    pub fn apply_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => {
                let clean = self.apply(s);
                if clean != *s {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply_json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.apply_json(v)),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// `text` with each occurrence of `value` that is not part of a longer word replaced by `shown`.
fn replace_words(text: &str, value: &str, shown: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let (first, last) = (value.chars().next(), value.chars().next_back());
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (at, _) in text.match_indices(value) {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        let glued = (word(first) && word(before)) || (word(last) && word(after));
        if at < done || glued {
            continue;
        }
        out.push_str(&text[done..at]);
        out.push_str(shown);
        done = at + value.len();
    }
    out.push_str(&text[done..]);
    out
}

/// The variables expanded through an `Env` and all its clones, and the redactor made of them.
#[derive(Debug, Default)]
struct Expanded {
    names: BTreeSet<String>,
    /// Every (value, name) an env file has given any clone, kept when the file changes: a clone
    /// made before the change (the log's, a run's) still holds the old value, and a clone made
    /// after it must hide a value only the new file has.
    file_values: Vec<(String, String)>,
    redactor: Option<Arc<Redactor>>,
}

/// tabd's environment. Clones share what was expanded through any of them, so a value the
/// config expanded at start is hidden in what a run, the log or the status prints later.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
    /// The variables this environment took from the env file, each with what the process had
    /// (unset, or empty): a file read again puts those back first, so a variable removed from
    /// the file goes only when the file gave it.
    from_file: BTreeMap<String, Option<String>>,
    expanded: Arc<Mutex<Expanded>>,
}

/// How a variable differs between two environments (never its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarChange {
    Added,
    Changed,
    Removed,
}

impl VarChange {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Changed => "changed",
            Self::Removed => "removed",
        }
    }
}

impl Env {
    /// A snapshot of the current process environment.
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars().collect(),
            from_file: BTreeMap::new(),
            expanded: Arc::default(),
        }
    }

    /// This environment with `file`'s variables under it: a variable set in the process (and
    /// not empty) wins, as a shell's `export` or the unit's `Environment=` wins over what the
    /// service reads. Called again with the file as it is now (the daemon does, when it is
    /// saved), what the last file gave is taken back first: a variable the file no longer has
    /// goes, one the process set stays. Every name a file sets is a secret from now on, in
    /// every clone (its value is written back as `${NAME}` wherever tabd prints it).
    pub fn with_env_file(mut self, file: &EnvFile) -> Self {
        for (k, had) in std::mem::take(&mut self.from_file) {
            match had {
                Some(v) => self.vars.insert(k, v),
                None => self.vars.remove(&k),
            };
        }
        for (k, v) in &file.vars {
            if self.get(k).is_none() {
                self.from_file.insert(k.clone(), self.vars.get(k).cloned());
                self.vars.insert(k.clone(), v.clone());
            }
        }
        {
            let mut expanded = self.expanded();
            for (k, v) in &file.vars {
                expanded.names.insert(k.clone());
                let pair = (v.clone(), k.clone());
                if !CHILD_BASE_ENV.contains(&k.as_str()) && !expanded.file_values.contains(&pair) {
                    expanded.file_values.push(pair);
                }
            }
            expanded.redactor = None;
        }
        self
    }

    /// The names `file` sets that the process set otherwise (another value, not empty): the
    /// process's value wins, so the file's is not used. Under systemd that is a value changed in
    /// the file after the unit read it (`EnvironmentFile=`, once, at the service's start).
    /// Called on the environment `file` was put under (`with_env_file(file)`).
    pub fn overridden_by_process(&self, file: &EnvFile) -> Vec<String> {
        let names: BTreeSet<&String> = file
            .vars
            .iter()
            .filter(|(k, v)| !self.from_file.contains_key(k) && self.get(k).is_some_and(|had| had != v))
            .map(|(k, _)| k)
            .collect();
        names.into_iter().cloned().collect()
    }

    /// The variables whose value differs from `before`'s, by name, sorted (never a value).
    pub fn changes_from(&self, before: &Env) -> Vec<(String, VarChange)> {
        let names: BTreeSet<&String> = self.vars.keys().chain(before.vars.keys()).collect();
        names
            .into_iter()
            .filter_map(|n| {
                let change = match (before.get(n), self.get(n)) {
                    (None, Some(_)) => VarChange::Added,
                    (Some(_), None) => VarChange::Removed,
                    (Some(a), Some(b)) if a != b => VarChange::Changed,
                    _ => return None,
                };
                Some((n.clone(), change))
            })
            .collect()
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self {
            vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            from_file: BTreeMap::new(),
            expanded: Arc::default(),
        }
    }

    /// Every variable, for a child process that gets tabd's whole environment (an agent CLI).
    pub fn vars(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.vars.iter().map(|(k, v)| (k.clone(), v.clone()))
    }

    /// tabd's environment without a secret, for the person's own programs (hooks, docs/spec.md §28):
    /// every variable but those the env file set, those expanded as `${NAME}` (but what every
    /// child gets, `CHILD_BASE_ENV`), those named like secrets (whatever their length), those in
    /// `also` (a provider's key variable), and any whose value holds a secret under another name.
    pub fn without_secrets(&self, also: &[&str]) -> Vec<(String, String)> {
        let (used, file): (BTreeSet<String>, BTreeSet<String>) = {
            let e = self.expanded();
            (
                e.names.clone(),
                e.file_values.iter().map(|(_, k)| k.clone()).collect(),
            )
        };
        let redactor = self.redactor();
        self.vars
            .iter()
            .filter(|(k, v)| {
                let upper = k.to_uppercase();
                let named_secret = SECRET_SIGNS.iter().any(|s| upper.contains(s));
                let expanded = used.contains(*k) && !CHILD_BASE_ENV.contains(&k.as_str());
                !(named_secret
                    || expanded
                    || file.contains(*k)
                    || self.from_file.contains_key(*k)
                    || also.contains(&k.as_str())
                    || redactor.apply(v) != **v)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The variables of `names` that are set, for a child's environment.
    pub fn subset(&self, names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .filter_map(|k| self.get(k).map(|v| (k.to_string(), v.to_string())))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    fn expanded(&self) -> std::sync::MutexGuard<'_, Expanded> {
        self.expanded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The secrets as `Redactor` says: every value expanded so far through this environment (or
    /// a clone), and the values of variables named like secrets. Made again only when a new
    /// variable was expanded.
    pub fn redactor(&self) -> Arc<Redactor> {
        let mut expanded = self.expanded();
        if let Some(r) = &expanded.redactor {
            return r.clone();
        }
        let r = Arc::new(self.redactor_for(expanded.names.iter().map(String::as_str), &expanded.file_values));
        expanded.redactor = Some(r.clone());
        r
    }

    /// `text` with every secret (`redactor`) and the value of each variable in `names` written
    /// back as `${NAME}`: a secret read from the environment never reaches a message, a log or a
    /// listing.
    pub fn redact(&self, text: &str, names: &[String]) -> String {
        let (expanded, file_values) = {
            let e = self.expanded();
            (e.names.iter().cloned().collect::<Vec<_>>(), e.file_values.clone())
        };
        self.redactor_for(expanded.iter().chain(names).map(String::as_str), &file_values)
            .apply(text)
    }

    /// `file_values`: every (value, name) an env file gave (`Expanded::file_values`), passed in
    /// by the caller that holds the lock.
    fn redactor_for<'a>(
        &self,
        used: impl Iterator<Item = &'a str>,
        file_values: &[(String, String)],
    ) -> Redactor {
        let shown = |n: &str| format!("${{{n}}}");
        let mut pairs: Vec<(String, String)> = used
            // What tabd hands every child (HOME, PATH, the locale) is no secret: hiding the home
            // folder would rewrite every path tabd prints.
            .filter(|n| !CHILD_BASE_ENV.contains(n))
            .filter_map(|n| self.get(n).map(|v| (v.to_string(), shown(n))))
            .collect();
        pairs.extend(
            self.vars
                .iter()
                .filter(|(k, v)| {
                    let upper = k.to_uppercase();
                    v.chars().count() >= HIDDEN_ANYWHERE && SECRET_SIGNS.iter().any(|s| upper.contains(s))
                })
                .map(|(k, v)| (v.clone(), shown(k))),
        );
        pairs.extend(file_values.iter().map(|(v, k)| (v.clone(), shown(k))));
        Redactor::new(pairs)
    }

    /// Replaces every `${NAME}` in `s` with the variable's value, and remembers the name: from
    /// now on its value is a secret (`redactor`). `$$` is not special; a `$` not followed by `{`
    /// is kept as is.
    pub fn expand(&self, s: &str) -> Result<String, ExpandError> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(end) = after.find('}') else {
                return Err(ExpandError::Unclosed { text: s.into() });
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ExpandError::BadName { name: name.into() });
            }
            match self.get(name) {
                Some(v) => out.push_str(v),
                None => return Err(ExpandError::Unset { name: name.into() }),
            }
            let mut expanded = self.expanded();
            if !expanded.names.contains(name) {
                expanded.names.insert(name.to_string());
                expanded.redactor = None;
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Why a `${NAME}` in a setting could not be filled in. The text names the variable, never a
/// value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("`${{` without a closing `}}` in \"{text}\"")]
    Unclosed { text: String },
    #[error("`${{{name}}}` is not a valid variable name")]
    BadName { name: String },
    #[error("environment variable {name} (used as `${{{name}}}`) is not set")]
    Unset { name: String },
}

/// The folder of the person's settings: `$XDG_CONFIG_HOME`, else `~/.config` — where tabd's
/// config, its env file and the user unit live.
pub fn config_home(env: &Env) -> Option<PathBuf> {
    match env.get("XDG_CONFIG_HOME") {
        Some(x) if Path::new(x).is_absolute() => Some(PathBuf::from(x)),
        _ => env.get("HOME").map(|h| Path::new(h).join(".config")),
    }
}

/// The env file the user unit reads (`EnvironmentFile=`) and every command reads too:
/// `~/.config/tabd/env`.
pub fn env_file_path(env: &Env) -> Option<PathBuf> {
    config_home(env).map(|c| c.join("tabd").join("env"))
}

/// The largest env file read: KEY=VALUE lines for a few keys fit in far less.
const ENV_FILE_CAP: u64 = 1024 * 1024;

/// An env file, read: its variables and what is wrong with it (never a value).
#[derive(Debug, Default)]
pub struct EnvFile {
    pub vars: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

impl EnvFile {
    /// Reads `path`: `None` when there is none. A file others may read or that another user
    /// owns is read, with a warning (the unit reads it as well); one that cannot be read is a
    /// warning.
    pub fn read(path: &Path) -> Option<Self> {
        let Inspected { exposed, mut file } = inspect(path)?;
        let mut warnings: Vec<String> = exposed.iter().map(ToString::to_string).collect();
        warnings.append(&mut file.warnings);
        file.warnings = warnings;
        Some(file)
    }
}

/// What lets someone other than the person read or decide an env file's secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exposure {
    #[error("{path} can be read by other users (mode {mode:o}); its values are secrets: `chmod 600 {path}`")]
    OpenMode { path: String, mode: u32 },
    #[error(
        "{path} belongs to another user (uid {owner}), so that user decides tabd's environment: \
         `chown {me} {path}` if it is yours"
    )]
    NotYours { path: String, owner: u32, me: u32 },
}

/// An env file, looked at: who else may read or change it (as types, for `tabd doctor` to judge),
/// and its variables with what else is wrong with it.
#[derive(Debug, Default)]
pub struct Inspected {
    pub exposed: Vec<Exposure>,
    /// Its variables, and its other warnings (lines skipped, a read that failed).
    pub file: EnvFile,
}

/// Looks at the env file at `path`: `None` when there is none.
pub fn inspect(path: &Path) -> Option<Inspected> {
    use std::os::unix::fs::MetadataExt as _;
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(Inspected {
                exposed: Vec::new(),
                file: EnvFile {
                    warnings: vec![format!("cannot read {shown}: {e}")],
                    ..EnvFile::default()
                },
            })
        }
    };
    let mut out = Inspected::default();
    if meta.mode() & 0o077 != 0 {
        out.exposed.push(Exposure::OpenMode {
            path: shown.to_string(),
            mode: meta.mode() & 0o777,
        });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        out.exposed.push(Exposure::NotYours {
            path: shown.to_string(),
            owner: meta.uid(),
            me,
        });
    }
    match crate::base::vault::read_regular_path(path, ENV_FILE_CAP) {
        Ok(text) => {
            let (vars, bad) = parse_env_file(&text);
            out.file.vars = vars;
            out.file.warnings.extend(
                bad.into_iter()
                    .map(|(line, why)| format!("{shown}:{line}: {why}; skipped")),
            );
        }
        Err(e) => out.file.warnings.push(format!("cannot read {shown}: {e}")),
    }
    Some(out)
}

/// A line of an env file that is not `KEY=VALUE`: its number and why (never its text).
pub type SkippedLine = (usize, String);

/// `KEY=VALUE` lines as systemd's `EnvironmentFile=` reads them: blank lines and lines starting
/// with `#` or `;` are comments; space around the key and before the value is dropped; a value
/// in double or single quotes is the text between them (in double quotes, `\"` and `\\` stand for
/// `"` and `\`); an unquoted value ends at the line's end, trailing space dropped. What is not
/// such a line is returned with its line number and why (never its text: it may hold a secret).
pub fn parse_env_file(text: &str) -> (Vec<(String, String)>, Vec<SkippedLine>) {
    let mut vars = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            bad.push((i + 1, "not a KEY=VALUE line".to_string()));
            continue;
        };
        let key = key.trim();
        if key.starts_with("export ") {
            bad.push((
                i + 1,
                "systemd does not read `export`: write KEY=VALUE".to_string(),
            ));
            continue;
        }
        let valid = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            bad.push((
                i + 1,
                "the name before `=` is not a variable name (letters, digits, _)".to_string(),
            ));
            continue;
        }
        match unquote(value.trim_start()) {
            Some(v) => vars.push((key.to_string(), v)),
            None => bad.push((
                i + 1,
                format!("the value of {key} opens a quote it does not close"),
            )),
        }
    }
    (vars, bad)
}

/// A value as written after `=`: quoted (the text inside) or not (trailing space dropped).
fn unquote(value: &str) -> Option<String> {
    let mut chars = value.chars();
    match chars.next() {
        Some(q @ ('"' | '\'')) => {
            let mut out = String::new();
            let mut escaped = false;
            for c in chars {
                match c {
                    '\\' if q == '"' && !escaped => escaped = true,
                    c if c == q && !escaped => return Some(out),
                    c => {
                        out.push(c);
                        escaped = false;
                    }
                }
            }
            None
        }
        _ => Some(value.trim_end().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_written_back_as_their_names() {
        let env = Env::from_pairs([
            ("SLACK_TOKEN", "xoxb-123456789"),
            ("TOKENIZERS_PARALLELISM", "false"),
            ("HOME", "/home/ana"),
            ("API_KEY_2", "xoxb-123456789-long"),
        ]);
        let r = env.redactor();
        assert_eq!(
            r.apply("url http://h/?t=xoxb-123456789-long and xoxb-123456789, false, /home/ana"),
            "url http://h/?t=${API_KEY_2} and ${SLACK_TOKEN}, false, /home/ana"
        );
        assert_eq!(
            env.redact("/home/ana/x and xoxb-123456789", &["HOME".to_string()]),
            "/home/ana/x and ${SLACK_TOKEN}",
            "what every child gets (HOME) is no secret, even used as ${{HOME}}"
        );
        env.expand("${HOME}/vault").unwrap();
        assert_eq!(env.redactor().apply("/home/ana/vault"), "/home/ana/vault");
    }

    /// Issue 36, finding 12: a value expanded through one clone of the environment (the config
    /// read at start) is hidden by every other (the log, a run, the status), whatever its name.
    #[test]
    fn every_expanded_value_is_a_secret_for_every_clone() {
        let env = Env::from_pairs([("HOOK_PATH", "hook-5f3a9c"), ("UNUSED", "nobody-used-this")]);
        let text = "POST http://h/hook-5f3a9c/x failed; nobody-used-this";
        assert_eq!(env.redactor().apply(text), text, "nothing expanded yet");
        let config = env.clone();
        assert_eq!(
            config.expand("http://h/${HOOK_PATH}/x").unwrap(),
            "http://h/hook-5f3a9c/x"
        );
        assert_eq!(
            env.redactor().apply(text),
            "POST http://h/${HOOK_PATH}/x failed; nobody-used-this"
        );
        let mut json = serde_json::json!({"error": text, "hook-5f3a9c": [1, "hook-5f3a9c"]});
        env.redactor().apply_json(&mut json);
        assert_eq!(json["hook-5f3a9c"][1], "${HOOK_PATH}", "values, not keys: {json}");
    }

    /// Short values would blank ordinary text: under 4 characters never, under 8 only as a word.
    #[test]
    fn short_values_are_hidden_only_as_words_and_tiny_ones_never() {
        let env = Env::from_pairs([
            ("PORT", "8080"),
            ("RETRIES", "1"),
            ("TEAM", "ops"),
            ("REGION", "eu-west-1b"),
            ("AUTH_MODE", "none"),
        ]);
        for name in ["PORT", "RETRIES", "TEAM", "REGION", "AUTH_MODE"] {
            env.expand(&format!("${{{name}}}")).unwrap();
        }
        let r = env.redactor();
        assert_eq!(
            r.apply("host:8080/v1 port 18080, 1 retry, ops team, zone eu-west-1b2"),
            "host:${PORT}/v1 port 18080, 1 retry, ops team, zone ${REGION}2"
        );
        assert_eq!(
            r.apply("none left, nonexistent"),
            "${AUTH_MODE} left, nonexistent"
        );
        let unused = Env::from_pairs([("AUTH_MODE", "none")]);
        assert_eq!(
            unused.redactor().apply("none left"),
            "none left",
            "a short value of a secret-looking name is hidden only once used as ${{NAME}}"
        );
    }

    #[test]
    fn env_file_lines_as_systemd_reads_them() {
        let text = "# a comment\n; another\n\nANTHROPIC_API_KEY=sk-ant-1234\n  SPACED = \"a \\\"b\\\" c\"  \nSINGLE='x y'\nPLAIN=v w   \nexport NO=1\nnot a line\n1BAD=x\nOPEN=\"never closed\n";
        let (vars, bad) = parse_env_file(text);
        assert_eq!(
            vars,
            [
                ("ANTHROPIC_API_KEY".to_string(), "sk-ant-1234".to_string()),
                ("SPACED".to_string(), "a \"b\" c".to_string()),
                ("SINGLE".to_string(), "x y".to_string()),
                ("PLAIN".to_string(), "v w".to_string()),
            ]
        );
        let lines: Vec<usize> = bad.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [8, 9, 10, 11], "{bad:?}");
        assert!(
            bad.iter().all(|(_, why)| !why.contains("never closed")),
            "a skipped line's text is never quoted: {bad:?}"
        );
    }

    /// Issue 52, item 2: what a hook gets of tabd's environment keeps no secret — not a value the
    /// env file set, nor one expanded as `${NAME}`, nor a variable named like a secret however
    /// short, nor a named key variable, nor a copy of a secret under a plain name — and keeps
    /// the rest (`HOME` stays though it was used as `${HOME}`).
    #[test]
    fn without_secrets_keeps_what_is_no_secret() {
        let file = EnvFile {
            vars: vec![("FROM_FILE".into(), "file-value".into())],
            warnings: Vec::new(),
        };
        let env = Env::from_pairs([
            ("HOME", "/home/me"),
            ("PATH", "/usr/bin"),
            ("USED", "expanded-value"),
            ("MY_TOKEN", "ab"),
            ("PROVIDER_VAR", "k"),
            ("COPY", "expanded-value"),
            ("PLAIN", "visible"),
        ])
        .with_env_file(&file);
        env.expand("${USED} ${HOME}").unwrap();
        let mut kept: Vec<String> = env
            .without_secrets(&["PROVIDER_VAR"])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        kept.sort();
        assert_eq!(kept, ["HOME", "PATH", "PLAIN"]);
    }

    /// The env file is under the process environment (a variable set there wins, an empty one
    /// does not), and every value it sets is a secret.
    #[test]
    fn the_env_file_is_under_the_process_and_its_values_are_secrets() {
        let file = EnvFile {
            vars: vec![
                ("ANTHROPIC_API_KEY".into(), "sk-from-the-file-1".into()),
                ("HOOK".into(), "https://hooks.example/abc123".into()),
                ("MINE".into(), "from-the-file".into()),
            ],
            warnings: Vec::new(),
        };
        let env = Env::from_pairs([("ANTHROPIC_API_KEY", ""), ("MINE", "exported")]).with_env_file(&file);
        assert_eq!(env.get("ANTHROPIC_API_KEY"), Some("sk-from-the-file-1"));
        assert_eq!(env.get("MINE"), Some("exported"));
        assert_eq!(
            env.redactor()
                .apply("posting to https://hooks.example/abc123 with sk-from-the-file-1"),
            "posting to ${HOOK} with ${ANTHROPIC_API_KEY}"
        );
    }

    fn file(vars: &[(&str, &str)]) -> EnvFile {
        EnvFile {
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            warnings: Vec::new(),
        }
    }

    /// Issue 48, item 4: the env file read again (saved while the daemon runs) takes back only
    /// what the last file gave; what the process set wins before and after.
    #[test]
    fn the_env_file_read_again_takes_back_only_what_it_gave() {
        let process = Env::from_pairs([("MINE", "exported"), ("EMPTY", ""), ("PATH", "/bin")]);
        let first = process.with_env_file(&file(&[
            ("KEY", "sk-first-value-1"),
            ("MINE", "from-the-file"),
            ("EMPTY", "filled-by-the-file"),
            ("GONE", "only-in-the-first"),
        ]));
        assert_eq!(first.get("EMPTY"), Some("filled-by-the-file"));
        assert_eq!(first.get("MINE"), Some("exported"));
        let second = first.clone().with_env_file(&file(&[
            ("KEY", "sk-second-value-2"),
            ("NEW", "only-in-the-second"),
        ]));
        assert_eq!(second.get("KEY"), Some("sk-second-value-2"));
        assert_eq!(second.get("MINE"), Some("exported"), "the process's own stays");
        assert_eq!(second.get("PATH"), Some("/bin"));
        assert_eq!(second.get("GONE"), None, "gone from the file, gone");
        assert_eq!(second.get("EMPTY"), None, "back to what the process had");
        assert_eq!(
            second.changes_from(&first),
            [
                ("EMPTY".to_string(), VarChange::Removed),
                ("GONE".to_string(), VarChange::Removed),
                ("KEY".to_string(), VarChange::Changed),
                ("NEW".to_string(), VarChange::Added),
            ]
        );
        let rotated = file(&[("MINE", "changed-in-the-file"), ("KEY", "sk-second-value-2")]);
        assert_eq!(
            second
                .clone()
                .with_env_file(&rotated)
                .overridden_by_process(&rotated),
            ["MINE"],
            "the process's MINE wins over the file's; KEY is the file's own"
        );
        let same = file(&[("MINE", "exported")]);
        assert!(second
            .clone()
            .with_env_file(&same)
            .overridden_by_process(&same)
            .is_empty());
        let gone = second.clone().with_env_file(&EnvFile::default());
        assert_eq!(gone.get("KEY"), None, "a file deleted gives nothing");
        assert_eq!(gone.get("MINE"), Some("exported"));
    }

    /// A value an env file gives later is hidden by every clone, those made before it too (the
    /// log's writer holds the environment tabd started with), and an old value stays hidden.
    #[test]
    fn a_value_from_a_file_read_later_is_hidden_by_every_clone() {
        let started =
            Env::from_pairs([("HOME", "/home/ana")]).with_env_file(&file(&[("TOKEN_A", "first-1234567")]));
        let log = started.clone();
        assert_eq!(log.redactor().apply("first-1234567"), "${TOKEN_A}");
        let later = started.with_env_file(&file(&[
            ("TOKEN_A", "second-7654321"),
            ("PLAIN", "plain-value-42"),
        ]));
        let text = "first-1234567 second-7654321 plain-value-42";
        let want = "${TOKEN_A} ${TOKEN_A} ${PLAIN}";
        assert_eq!(log.redactor().apply(text), want, "the clone made before");
        assert_eq!(later.redactor().apply(text), want);
        assert_eq!(later.redact(text, &[]), want);
    }

    #[test]
    fn expands_and_reports_missing() {
        let env = Env::from_pairs([("HOME", "/home/a"), ("EMPTY", "")]);
        assert_eq!(env.expand("${HOME}/vault").unwrap(), "/home/a/vault");
        assert_eq!(env.expand("cost $5").unwrap(), "cost $5");
        assert_eq!(
            env.expand("${NOPE}").unwrap_err().to_string(),
            "environment variable NOPE (used as `${NOPE}`) is not set"
        );
        assert_eq!(
            env.expand("a ${HOME").unwrap_err().to_string(),
            "`${` without a closing `}` in \"a ${HOME\""
        );
        assert_eq!(
            env.expand("${bad-name}").unwrap_err(),
            ExpandError::BadName {
                name: "bad-name".into()
            }
        );
        assert!(
            env.expand("${EMPTY}").is_err(),
            "an empty variable counts as unset"
        );
        assert!(env.expand("${HOME").is_err());
        assert!(env.expand("${bad-name}").is_err());
    }
}
