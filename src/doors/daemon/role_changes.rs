//! What changed in the set of roles at a reload (pure): a role file added or removed, a role
//! switched on or off (`enabled`). The daemon says each — in its log and one line in the daily
//! note — with when the role runs next, so a person sees the daemon took their edit. A new role
//! file with errors is said by the role-file errors (`broken`); an abstract role never runs, so
//! it has no line here.

use std::collections::BTreeSet;

use crate::setup::role::RoleSet;

/// One change of the roles, by role name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleChange {
    /// A role file appeared, and the role loads.
    Added(String),
    /// A role file is gone.
    Removed(String),
    /// `enabled` went from false to true.
    SwitchedOn(String),
    /// `enabled` went from true to false.
    SwitchedOff(String),
}

/// What changed from `old` to `new` (the roles each runs), sorted by role.
pub fn changes(old: &RoleSet, new: &RoleSet) -> Vec<RoleChange> {
    let runnable = |set: &RoleSet| -> BTreeSet<String> {
        set.all_names()
            .into_iter()
            .filter(|n| !super::broken::is_abstract(n))
            .collect()
    };
    let (before, now) = (runnable(old), runnable(new));
    let mut out: Vec<RoleChange> = now
        .difference(&before)
        .filter(|n| new.roles.contains_key(*n))
        .map(|n| RoleChange::Added(n.clone()))
        .chain(before.difference(&now).map(|n| RoleChange::Removed(n.clone())))
        .collect();
    for (name, role) in new.roles.iter().filter(|(n, _)| now.contains(*n)) {
        match old.roles.get(name).map(|o| (o.enabled(), role.enabled())) {
            Some((false, true)) => out.push(RoleChange::SwitchedOn(name.clone())),
            Some((true, false)) => out.push(RoleChange::SwitchedOff(name.clone())),
            _ => {}
        }
    }
    out.sort_by(|a, b| a.role().cmp(b.role()));
    out
}

impl RoleChange {
    pub fn role(&self) -> &str {
        match self {
            Self::Added(n) | Self::Removed(n) | Self::SwitchedOn(n) | Self::SwitchedOff(n) => n,
        }
    }

    /// What is said of it; `fire`: when the role runs next (`next fire …`, `inbox only …`);
    /// `file`: its role file.
    pub fn sentence(&self, fire: &str, file: &str) -> String {
        match self {
            Self::Added(_) => format!("role added; {fire}"),
            Self::Removed(_) => format!("role removed ({file} is gone); it runs no more"),
            Self::SwitchedOn(_) => format!("switched on (enabled: true); {fire}"),
            Self::SwitchedOff(_) => {
                "switched off (enabled: false); it runs no more, and notes in its inbox wait until it is switched on"
                    .to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::base::environment::Env;
    use crate::setup::role::LoadContext;

    fn set(files: &[(&str, &str)]) -> RoleSet {
        RoleSet::from_texts(
            files.iter().map(|(name, text)| {
                (
                    name.to_string(),
                    PathBuf::from(format!("roles/{name}.md")),
                    Ok(text.to_string()),
                )
            }),
            &LoadContext::new(chrono_tz::UTC, Env::default()),
        )
    }

    const ON: &str = "# Scout\n## Mission\nLook.\n## Schedule\ndaily at 9:00\n";
    const OFF: &str = "---\nenabled: false\n---\n# Scout\n## Mission\nLook.\n## Schedule\ndaily at 9:00\n";
    const BROKEN: &str = "---\nmax_tool_calls: lots\n---\n# Broken\n## Mission\nx\n";
    const BASE: &str = "# Base\n## Rules\n- Be kind\n";

    #[test]
    fn roles_added_removed_and_switched_are_each_one_change() {
        let old = set(&[("scout", ON), ("gone", ON), ("quiet", OFF)]);
        let new = set(&[
            ("scout", OFF),
            ("quiet", ON),
            ("fresh", ON),
            ("typo", BROKEN),
            ("_base", BASE),
        ]);
        assert_eq!(
            changes(&old, &new),
            [
                RoleChange::Added("fresh".into()),
                RoleChange::Removed("gone".into()),
                RoleChange::SwitchedOn("quiet".into()),
                RoleChange::SwitchedOff("scout".into()),
            ],
            "a new file with errors is the errors' to say; an abstract role never runs"
        );
        assert!(changes(&new, &new).is_empty());
        assert_eq!(
            RoleChange::Added("fresh".into())
                .sentence("next fire Mon 2026-11-30 09:00 UTC", "roles/fresh.md"),
            "role added; next fire Mon 2026-11-30 09:00 UTC"
        );
        assert_eq!(
            RoleChange::SwitchedOff("scout".into()).sentence("unused", "roles/scout.md"),
            "switched off (enabled: false); it runs no more, and notes in its inbox wait until it is switched on"
        );
        assert_eq!(
            RoleChange::Removed("gone".into()).sentence("unused", "roles/gone.md"),
            "role removed (roles/gone.md is gone); it runs no more"
        );
    }
}
