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
];

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

    /// Replaces every `${NAME}` in `s` with the variable's value. `$$` is not special; a `$`
    /// not followed by `{` is kept as is.
    pub fn expand(&self, s: &str) -> Result<String, String> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(end) = after.find('}') else {
                return Err(format!("`${{` without a closing `}}` in \"{s}\""));
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`${{{name}}}` is not a valid variable name"));
            }
            match self.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(format!(
                        "environment variable {name} (used as `${{{name}}}`) is not set"
                    ))
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_reports_missing() {
        let env = Env::from_pairs([("HOME", "/home/a"), ("EMPTY", "")]);
        assert_eq!(env.expand("${HOME}/vault").unwrap(), "/home/a/vault");
        assert_eq!(env.expand("cost $5").unwrap(), "cost $5");
        assert!(env.expand("${NOPE}").unwrap_err().contains("NOPE"));
        assert!(
            env.expand("${EMPTY}").is_err(),
            "an empty variable counts as unset"
        );
        assert!(env.expand("${HOME").is_err());
        assert!(env.expand("${bad-name}").is_err());
    }
}
