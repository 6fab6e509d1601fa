//! How much one role may ask for (docs/spec.md §24: one role's load never holds another's).
//!
//! Every list in a role file costs tabd something each time it is used: an expectation is a
//! deadline the daemon keeps all day, a context entry a walk at every run, a watched path a hash
//! at every change, a `## Tools` entry a check at every call. A role file may be 1 MiB, so
//! without a cap one file can ask for tens of thousands of each (a role with 15,000 expectations
//! held the daemon's loop 9–18 s a minute). The caps are far above what a person writes and low
//! enough that a role at every cap costs the daemon next to nothing. Over a cap the role is
//! broken — the message names the file, the line and the cap — like any other error in its file;
//! the items past the cap are not even read. docs/roles.md lists them.

use super::sections::{Item, Section, SectionKind};
use super::RoleDef;
use crate::base::diag::Diagnostic;

/// One cap: what it counts, as a person writes it, at most how many, and what to do instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// The key or section, as written: `` `expect` ``, `` `## Context Files` ``.
    pub what: &'static str,
    /// What one item is called: "expectations", "entries".
    pub items: &'static str,
    pub max: usize,
    /// What to do instead, for the message.
    pub instead: &'static str,
}

pub const EXPECT: Cap = Cap {
    what: "`expect`",
    items: "expectations",
    max: 50,
    instead: "one entry covers every day with `{date}` in its path; split the rest across roles",
};
pub const CONTEXT: Cap = Cap {
    what: "`## Context Files`",
    items: "entries",
    max: 200,
    instead: "name a folder (`project/`) or a glob (`project/risks/*.md`) instead of each file",
};
pub const WATCH: Cap = Cap {
    what: "`watch`",
    items: "paths",
    max: 100,
    instead: "watch the few files whose change should fire the role",
};
pub const WRITE_PATHS: Cap = Cap {
    what: "`write_paths`",
    items: "globs",
    max: 100,
    instead: "one glob covers a folder (`project/**`)",
};
pub const DENY_TOOLS: Cap = Cap {
    what: "`deny_tools`",
    items: "entries",
    max: 200,
    instead: "deny a whole server with `server/*`, or list fewer tools in `## Tools`",
};
pub const CAN_TRIGGER: Cap = Cap {
    what: "`can_trigger`",
    items: "roles",
    max: 50,
    instead: "name the roles this one hands work to",
};
pub const CAN_DELEGATE_TO: Cap = Cap {
    what: "`can_delegate_to`",
    items: "roles",
    max: 50,
    instead: "name the roles this one asks for help",
};
pub const HOOKS: Cap = Cap {
    what: "`hooks`",
    items: "hook sets",
    max: 20,
    instead: "put the checks one role needs into one set's program",
};
pub const APPROVE: Cap = Cap {
    what: "`approve`",
    items: "entries",
    max: 200,
    instead: "set a whole class (`network: ask`) or server (`slack/*: ask`) at once",
};
pub const TOOLS: Cap = Cap {
    what: "`## Tools`",
    items: "entries",
    max: 200,
    instead: "allow a whole server with `server/*`",
};
pub const SKILLS: Cap = Cap {
    what: "`## Skills`",
    items: "skills",
    max: 100,
    instead: "list the skills this role's work calls for; each is a line of its prompt at every run",
};
pub const SCHEDULE: Cap = Cap {
    what: "`## Schedule`",
    items: "schedules",
    max: 50,
    instead: "one phrase covers many times (`every 30 min, 9am-6pm weekdays`)",
};
pub const GOALS: Cap = Cap {
    what: "`## Goals`",
    items: "items",
    max: 200,
    instead: "group them; the model reads every one at every run",
};
pub const RULES: Cap = Cap {
    what: "`## Rules`",
    items: "items",
    max: 200,
    instead: "group them; the model reads every one at every run",
};
pub const SECTIONS: Cap = Cap {
    what: "the role file",
    items: "`##` sections",
    max: 50,
    instead: "merge them, or move the text into a context file",
};

/// Every cap, in the order docs/roles.md lists them.
pub const ALL: &[Cap] = &[
    EXPECT,
    CONTEXT,
    WATCH,
    WRITE_PATHS,
    DENY_TOOLS,
    CAN_TRIGGER,
    CAN_DELEGATE_TO,
    APPROVE,
    TOOLS,
    SKILLS,
    SCHEDULE,
    GOALS,
    RULES,
    SECTIONS,
];

/// A list over its cap: `n` items where `cap` allows fewer, perhaps with what the role inherits
/// through `extends` (the parent's name). Its `Display` is the sentence for the role's file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{inherited}{what} has {n} {items}; a role may have at most {max} (tabd's cap, so one role cannot hold the others; \
     docs/roles.md): {instead}",
    inherited = inherited_from.as_ref().map(|p| format!("with what it inherits through `extends: {p}`, ")).unwrap_or_default(),
    what = cap.what, items = cap.items, max = cap.max, instead = cap.instead
)]
pub struct OverCap {
    pub cap: Cap,
    pub n: usize,
    pub inherited_from: Option<String>,
}

impl Cap {
    /// `Err` when `n` is over the cap.
    pub fn check(&self, n: usize) -> Result<(), OverCap> {
        if n <= self.max {
            return Ok(());
        }
        Err(OverCap {
            cap: *self,
            n,
            inherited_from: None,
        })
    }

    /// Like `check`, for a list that grew over the cap with what the role inherits.
    pub fn check_inherited(&self, n: usize, parent: &str) -> Result<(), OverCap> {
        self.check(n).map_err(|e| OverCap {
            inherited_from: Some(parent.to_string()),
            ..e
        })
    }
}

/// Whether a section's items fit its cap beside what the file's earlier sections of the same
/// kind gave; if not, the error at the section's heading (and its items are not read).
pub(super) fn section_fits(def: &mut RoleDef, section: &Section, items: &[Item]) -> bool {
    let (cap, have) = match section.kind {
        SectionKind::Goals => (GOALS, def.goals.len()),
        SectionKind::Rules => (RULES, def.rules.len()),
        SectionKind::Context => (CONTEXT, def.context.len()),
        SectionKind::Tools => (TOOLS, def.tools.as_ref().map_or(0, Vec::len) + def.mcp.len()),
        SectionKind::Schedule => (SCHEDULE, def.schedule.as_ref().map_or(0, Vec::len)),
        SectionKind::Skills => (SKILLS, def.skills.len()),
        _ => return true,
    };
    // A schedule line may hold several phrases joined by `;`: each is a schedule.
    let more = match section.kind {
        SectionKind::Schedule => items.iter().map(|i| i.text.split(';').count()).sum(),
        _ => items.len(),
    };
    match cap.check(have + more) {
        Ok(()) => true,
        Err(e) => {
            def.diagnostics
                .push(Diagnostic::error(&def.path, section.line, e.to_string()));
            false
        }
    }
}

/// The lists that grew over a cap once joined with what `def` inherits (each file was within
/// them): errors at its `extends` line.
pub(super) fn inherited(def: &RoleDef, merged: &RoleDef) -> Vec<Diagnostic> {
    let Some(parent) = &def.settings.extends else {
        return Vec::new();
    };
    let s = &merged.settings;
    let counts = [
        (CONTEXT, merged.context.len()),
        (GOALS, merged.goals.len()),
        (RULES, merged.rules.len()),
        (
            TOOLS,
            merged.tools.as_ref().map_or(0, Vec::len) + merged.mcp.len(),
        ),
        (SKILLS, merged.skills.len()),
        (SECTIONS, merged.extra.len()),
        (WATCH, s.watch.len()),
        (WRITE_PATHS, s.write_paths.len()),
        (DENY_TOOLS, s.deny_tools.len()),
        (CAN_TRIGGER, s.can_trigger.len()),
        (CAN_DELEGATE_TO, s.can_delegate_to.len()),
        (APPROVE, s.approve.len()),
    ];
    let line = def.key_lines.get("extends").copied().unwrap_or(0);
    counts
        .into_iter()
        .filter_map(|(cap, n)| cap.check_inherited(n, parent).err())
        .map(|e| Diagnostic::error(&def.path, line, e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_allows_its_number_and_names_itself_past_it() {
        assert!(EXPECT.check(50).is_ok());
        let e = EXPECT.check(15_000).unwrap_err().to_string();
        assert!(
            e.starts_with("`expect` has 15000 expectations; a role may have at most 50"),
            "{e}"
        );
        assert!(e.contains("{date}"), "says what to do instead: {e}");
        let e = WATCH.check_inherited(101, "_base").unwrap_err().to_string();
        assert!(
            e.starts_with("with what it inherits through `extends: _base`, `watch` has 101"),
            "{e}"
        );
    }

    /// The docs list every cap with its number: a cap changed here and not there fails.
    #[test]
    fn docs_roles_lists_every_cap() {
        let doc = include_str!("../../../docs/roles.md");
        let table = doc
            .split("## Caps")
            .nth(1)
            .expect("docs/roles.md has a `## Caps` section");
        for cap in ALL {
            let row = format!("| {} | {} |", cap.what, cap.max);
            assert!(table.contains(&row), "docs/roles.md's caps table lacks `{row}`");
        }
    }
}
