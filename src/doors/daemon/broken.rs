//! Role files with errors, grouped by the file at fault (pure). One typo in `_base.md` breaks
//! every role that extends it; that is one event — one line in the daemon's log, one in the daily
//! note, one notification — naming the file, its line and the roles it takes with it, never one
//! per role; and an abstract role, which never runs, is never said to be "running". The shell
//! reads what each broken file extends; the words are made here.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::diag::Diagnostic;

/// One role file at fault and the roles broken with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// The role whose file is at fault: broken, and not because a role it extends is.
    pub root: String,
    /// Its errors.
    pub diags: Vec<Diagnostic>,
    /// The roles broken because they extend it, directly or through one another; sorted.
    pub extenders: Vec<String>,
}

/// `broken` (each broken role's errors) grouped by the file at fault, by root name;
/// `parent_of` says what a broken role's file extends.
pub fn group(
    broken: &BTreeMap<String, Vec<Diagnostic>>,
    parent_of: impl Fn(&str) -> Option<String>,
) -> Vec<Broken> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in broken.keys() {
        let root = root_of(name, broken, &parent_of);
        let extenders = groups.entry(root.clone()).or_default();
        if root != *name {
            extenders.push(name.clone());
        }
    }
    groups
        .into_iter()
        .map(|(root, extenders)| Broken {
            diags: broken.get(&root).cloned().unwrap_or_default(),
            root,
            extenders,
        })
        .collect()
}

/// The broken role at the top of `name`'s chain of broken parents. In a cycle of `extends`
/// (each of its files broken by it) the first of the cycle by name stands for all of them.
fn root_of(
    name: &str,
    broken: &BTreeMap<String, Vec<Diagnostic>>,
    parent_of: &impl Fn(&str) -> Option<String>,
) -> String {
    let mut chain = vec![name.to_string()];
    let mut seen = BTreeSet::from([name.to_string()]);
    while let Some(parent) = chain
        .last()
        .and_then(|last| parent_of(last))
        .filter(|p| broken.contains_key(p))
    {
        if !seen.insert(parent.clone()) {
            let start = chain.iter().position(|c| *c == parent).unwrap_or(0);
            return chain[start..].iter().min().cloned().unwrap_or(parent);
        }
        chain.push(parent);
    }
    chain.pop().unwrap_or_else(|| name.to_string())
}

/// What is said of a file at fault, in parts each place puts together its own way.
#[derive(Debug, Clone, PartialEq)]
pub struct Words {
    /// What tabd does about the role itself.
    pub what: &'static str,
    /// Its first error, with its file and line, cut short.
    pub first: String,
    /// `(+2 more; run `tabd validate`)`, or nothing.
    pub more: String,
    /// What happens to the roles that extend it, or nothing.
    pub extenders: String,
}

impl Broken {
    /// The words for this file: `kept_last_good` are the roles running their last good version
    /// (the others are off until it is fixed); a role named `_…` is abstract.
    pub fn words(&self, kept_last_good: &[String]) -> Words {
        let first = self
            .diags
            .first()
            .map(|d| crate::base::text::one_line(&d.to_string(), 300))
            .unwrap_or_default();
        let more = if self.diags.len() > 1 {
            format!(" (+{} more; run `tabd validate`)", self.diags.len() - 1)
        } else {
            String::new()
        };
        let kept = |n: &String| kept_last_good.contains(n);
        let what = if is_abstract(&self.root) {
            "role file has errors (an abstract role: it never runs by itself)"
        } else if kept(&self.root) {
            "role file has errors; still running the last good version"
        } else {
            "role file has errors; the role stays off until it is fixed"
        };
        let (running, off): (Vec<&String>, Vec<&String>) = self.extenders.iter().partition(|n| kept(n));
        let mut fates = Vec::new();
        if !running.is_empty() {
            let (verb, whose) = agree(running.len(), ("keeps", "its"), ("keep", "their"));
            let versions = if running.len() == 1 { "version" } else { "versions" };
            fates.push(format!(
                "{} {verb} running {whose} last good {versions}",
                join(&running)
            ));
        }
        if !off.is_empty() {
            let (verb, _) = agree(off.len(), ("stays", ""), ("stay", ""));
            fates.push(format!("{} {verb} off until it is fixed", join(&off)));
        }
        let extenders = match self.extenders.len() {
            0 => String::new(),
            n => format!(
                "{n} role{} that extend{} it: {}",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                fates.join("; ")
            ),
        };
        Words {
            what,
            first,
            more,
            extenders,
        }
    }

    /// What is said once the file is fixed (`fixed; running the new version`); `running_again`:
    /// the roles that extended it and run their new versions now.
    pub fn fixed(&self, running_again: &[String]) -> String {
        let others = match running_again {
            [] => String::new(),
            names => format!(
                "; the roles that extend it run their new versions too: {}",
                names.join(", ")
            ),
        };
        if is_abstract(&self.root) {
            format!("fixed{others}")
        } else {
            format!("fixed; running the new version{others}")
        }
    }
}

/// A role named `_…` is abstract: it never runs by itself (docs/spec.md §3).
pub fn is_abstract(name: &str) -> bool {
    name.starts_with('_')
}

fn agree<'a>(n: usize, one: (&'a str, &'a str), many: (&'a str, &'a str)) -> (&'a str, &'a str) {
    if n == 1 {
        one
    } else {
        many
    }
}

fn join(names: &[&String]) -> String {
    names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn error(file: &str, line: usize, msg: &str) -> Diagnostic {
        Diagnostic::error(Path::new(file), line, msg)
    }

    /// The stock roles extend `_base`: a typo there breaks all of them.
    fn typo_in_base() -> BTreeMap<String, Vec<Diagnostic>> {
        let mut broken = BTreeMap::from([(
            "_base".to_string(),
            vec![error("roles/_base.md", 4, "`max_tool_calls` must be a number")],
        )]);
        for role in ["comms", "delivery", "product", "risk"] {
            broken.insert(
                role.into(),
                vec![error(
                    &format!("roles/{role}.md"),
                    2,
                    "inherits from `_base`, which has errors; fix roles/_base.md first",
                )],
            );
        }
        broken
    }

    fn stock_parent(name: &str) -> Option<String> {
        (!is_abstract(name)).then(|| "_base".to_string())
    }

    #[test]
    fn a_broken_parent_is_one_file_at_fault_with_the_roles_that_extend_it() {
        let groups = group(&typo_in_base(), stock_parent);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].root, "_base");
        assert_eq!(groups[0].extenders, ["comms", "delivery", "product", "risk"]);
        let all: Vec<String> = ["_base", "comms", "delivery", "product", "risk"]
            .map(String::from)
            .into();
        let w = groups[0].words(&all);
        assert_eq!(
            w.what, "role file has errors (an abstract role: it never runs by itself)",
            "never 'still running' for an abstract role"
        );
        assert_eq!(
            w.first,
            "roles/_base.md:4: error: `max_tool_calls` must be a number"
        );
        assert_eq!(
            w.extenders,
            "4 roles that extend it: comms, delivery, product, risk keep running their last good versions"
        );
        // At start there is no last good version: they are off.
        let w = groups[0].words(&[]);
        assert_eq!(
            w.extenders,
            "4 roles that extend it: comms, delivery, product, risk stay off until it is fixed"
        );
        let w = groups[0].words(&["risk".to_string()]);
        assert_eq!(
            w.extenders,
            "4 roles that extend it: risk keeps running its last good version; comms, delivery, product stay off until it is fixed"
        );
        assert_eq!(
            groups[0].fixed(&["comms".into(), "risk".into()]),
            "fixed; the roles that extend it run their new versions too: comms, risk"
        );
    }

    /// A role whose parent is fine is at fault itself; a chain of broken parents goes to the top;
    /// a cycle of `extends` is one group, named by its first role.
    #[test]
    fn each_broken_role_is_grouped_under_the_top_of_its_broken_chain() {
        let broken: BTreeMap<String, Vec<Diagnostic>> = ["a", "b", "child", "_team", "_top", "x", "y"]
            .into_iter()
            .map(|n| (n.to_string(), vec![error(&format!("roles/{n}.md"), 1, "bad")]))
            .collect();
        let parent = |n: &str| -> Option<String> {
            match n {
                "a" => Some("_fine".into()),
                "child" => Some("_team".into()),
                "_team" => Some("_top".into()),
                "x" => Some("y".into()),
                "y" => Some("x".into()),
                _ => None,
            }
        };
        let groups: Vec<(String, Vec<String>)> = group(&broken, parent)
            .into_iter()
            .map(|g| (g.root, g.extenders))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            groups,
            [
                ("_top".to_string(), s(&["_team", "child"])),
                ("a".to_string(), s(&[])),
                ("b".to_string(), s(&[])),
                ("x".to_string(), s(&["y"])),
            ]
        );
        let b = Broken {
            root: "b".into(),
            diags: vec![error("roles/b.md", 3, "one"), error("roles/b.md", 5, "two")],
            extenders: vec![],
        };
        let w = b.words(&["b".to_string()]);
        assert_eq!(
            (w.what, w.more.as_str(), w.extenders.as_str()),
            (
                "role file has errors; still running the last good version",
                " (+1 more; run `tabd validate`)",
                ""
            )
        );
        assert_eq!(
            b.words(&[]).what,
            "role file has errors; the role stays off until it is fixed"
        );
        assert_eq!(b.fixed(&[]), "fixed; running the new version");
    }
}
