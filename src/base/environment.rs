//! The process environment as a value, so config and roles can expand `${VAR}` and tests never
//! mutate the real environment.

use std::collections::HashMap;

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

/// Writes secret values back as the `${NAME}` they came from.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    pairs: Vec<(String, String)>,
}

impl Redactor {
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, shown) in &self.pairs {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), shown);
            }
        }
        out
    }
}

#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
}

impl Env {
    /// A snapshot of the current process environment.
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars().collect(),
        }
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self {
            vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
        }
    }

    /// Every variable, for a child process that gets tabd's whole environment (an agent CLI).
    pub fn vars(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.vars.iter().map(|(k, v)| (k.clone(), v.clone()))
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

    /// `text` with the value of each variable in `names` written back as `${NAME}`: a secret read
    /// from the environment never reaches a message, a log or a listing.
    pub fn redact(&self, text: &str, names: &[String]) -> String {
        self.redactor(names).apply(text)
    }

    /// A redactor for the values of `names` (set once, applied to many lines).
    pub fn redactor(&self, names: &[String]) -> Redactor {
        let mut pairs: Vec<(String, String)> = names
            .iter()
            .filter_map(|n| self.get(n).map(|v| (v.to_string(), format!("${{{n}}}"))))
            // Shorter values would match everywhere and hide nothing.
            .filter(|(v, _)| v.len() >= 4)
            .collect();
        // Longest first, so a value containing another is replaced whole.
        pairs.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        Redactor { pairs }
    }

    /// A redactor for logs: the values (8 characters or more) of every variable whose name says
    /// it holds a secret — `*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*AUTH*`, `*CREDENTIAL*`.
    pub fn secrets_redactor(&self) -> Redactor {
        const SIGNS: &[&str] = &[
            "KEY",
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "AUTH",
            "CREDENTIAL",
            "COOKIE",
        ];
        let names: Vec<String> = self
            .vars
            .iter()
            .filter(|(k, v)| {
                let upper = k.to_uppercase();
                v.len() >= 8 && SIGNS.iter().any(|s| upper.contains(s))
            })
            .map(|(k, _)| k.clone())
            .collect();
        self.redactor(&names)
    }

    /// Replaces every `${NAME}` in `s` with the variable's value. `$$` is not special; a `$`
    /// not followed by `{` is kept as is.
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
        let r = env.secrets_redactor();
        assert_eq!(
            r.apply("url http://h/?t=xoxb-123456789-long and xoxb-123456789, false, /home/ana"),
            "url http://h/?t=${API_KEY_2} and ${SLACK_TOKEN}, false, /home/ana"
        );
        assert_eq!(
            env.redact("/home/ana/x", &["HOME".to_string()]),
            "${HOME}/x",
            "named variables are redacted whatever their names"
        );
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
