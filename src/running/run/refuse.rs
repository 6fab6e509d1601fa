//! A note tabd cannot read is refused, not run (docs/spec.md §24): it goes to its inbox's `failed/`,
//! and the daily note and a run record say why. The daemon's scan and `tabd fire` both refuse
//! through here, so a note that cannot be read never reaches a model, never stays to be read
//! again at every start, and is never lost.

use crate::base::trigger::Trigger;
use crate::base::vault::{VaultError, VaultPath};
use crate::records::inbox::{self, Note};
use crate::records::runlog::{wikilink, Moved, Outcome, RunRecord, TriggerRecord, UsageRecord};
use crate::setup::role::Role;

use super::RunEnv;

/// A note moved to `failed/` because it cannot be read.
#[derive(Debug, Clone)]
pub struct Refused {
    pub from: VaultPath,
    pub to: VaultPath,
    /// Why, as the person reads it (`line 4: …`).
    pub why: String,
    /// The daily line or the record that could not be written (the note was moved).
    pub log_errors: Vec<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot be read ({}); moved to {} — fix it and move it back into the inbox",
            self.from, self.why, self.to
        )
    }
}

/// Why `note` cannot be read, if it cannot: its text is not UTF-8 or too big for a run to read,
/// or its frontmatter is not YAML tabd can load.
pub fn unreadable(note: &Note) -> Option<&str> {
    note.unreadable()
}

/// Moves `note`, which cannot be read (`why`), to its inbox's `failed/`; then writes a daily line
/// and a `failed` run record with the move (no model was asked, nothing was spent). The move
/// comes first: a record never names a move that did not happen.
pub fn refuse(
    env: &RunEnv,
    role: &Role,
    trigger: &Trigger,
    note: &Note,
    why: &str,
) -> Result<Refused, VaultError> {
    let dest = inbox::destination(&env.vault, &note.path, crate::base::vault::layout::FAILED, &[])?;
    let to = inbox::move_note(&env.vault, &note.path, &dest)?;
    let mut refused = Refused {
        from: note.path.clone(),
        to,
        why: why.to_string(),
        log_errors: Vec::new(),
    };
    let now = env.clock.now();
    let line = format!(
        "{} cannot be read — {why}; moved to failed/ (fix it and move it back into the inbox)",
        wikilink(refused.to.as_str())
    );
    if let Err(e) = env.log.write_line(now, &role.display_name, &line) {
        refused
            .log_errors
            .push(format!("the daily line of the refused note {}: {e}", refused.to));
    }
    let record = RunRecord {
        run_id: crate::base::run_id::RunId::new(&role.name, now).into(),
        role: role.name.clone(),
        trigger: TriggerRecord::of(trigger, vec![note.path.as_str().to_string()]),
        started_at: now,
        ended_at: now,
        outcome: Outcome::Failed,
        error: Some(format!("{} cannot be read: {why}", note.path)),
        model: String::new(),
        requests: 0,
        usage: UsageRecord::default(),
        tool_calls: Vec::new(),
        moved: vec![Moved {
            from: refused.from.as_str().to_string(),
            to: refused.to.as_str().to_string(),
        }],
        children: Vec::new(),
        ended: None,
        notes_truncated: Vec::new(),
        triage: None,
    };
    if let Err(e) = env.log.write_record(&record) {
        refused
            .log_errors
            .push(format!("the record of the refused note {}: {e}", refused.to));
    }
    Ok(refused)
}
