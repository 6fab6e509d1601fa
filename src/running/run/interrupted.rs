//! A scheduled slot whose run did not finish and is not run again (docs/spec.md §22): said once — a
//! `skipped` record with `"ended": "interrupted"` and one line in the daily note — whatever crash
//! comes between. The slot's start (`StartedSlot`) is cleared in the same state update that
//! commits the record and the line as a pending run, and they are published the way crash
//! recovery publishes one: a crash before they are written is finished at the next start, one
//! after writes nothing twice.

use super::env::RunEnv;
use super::finish::publish_pending_once;
use crate::base::trigger::TriggerKind;
use crate::base::vault::VaultError;
use crate::records::runlog::{Outcome, RunRecord, TriggerRecord};
use crate::records::state::started::StartedSlot;
use crate::records::state::PendingRun;
use crate::setup::role::Role;

/// The record's `ended` of a slot whose run did not finish and is not run again.
pub const INTERRUPTED: &str = "interrupted";

/// Records that `slot` of `role` (whose schedule reads `cron`) was interrupted and is not run
/// again; `text` says what happened and why not, as the daily line and the record's `error`.
pub fn record_interrupted(
    env: &RunEnv,
    role: &Role,
    cron: String,
    slot: &StartedSlot,
    text: &str,
) -> Result<RunRecord, VaultError> {
    let now = env.clock.now();
    let trigger = TriggerRecord {
        kind: TriggerKind::Schedule,
        notes: Vec::new(),
        scheduled_for: Some(slot.slot),
        cron: Some(cron),
        parent_run_id: None,
        task: None,
        rerun: None,
    };
    let id = crate::base::run_id::RunId::new(&role.name, now).into();
    let mut record = RunRecord::without_model(id, &role.name, trigger, now, (Outcome::Skipped, text.into()));
    record.ended = Some(INTERRUPTED.into());
    let pending = PendingRun {
        run_id: record.run_id.clone(),
        record: serde_json::to_value(&record).map_err(|e| VaultError::Io(e.to_string()))?,
        jsonl: env.log.jsonl_path(now).as_str().to_string(),
        daily: env.log.daily_path(now).as_str().to_string(),
        daily_text: env
            .log
            .render_line(now, &role.display_name, &format!("interrupted — {text}")),
        moves: Vec::new(),
    };
    let committed = pending.clone();
    let at = slot.slot;
    env.store.update(move |s| {
        let r = s.role(&role.name);
        r.slot_finished(at);
        r.pending.push(committed);
    })?;
    publish_pending_once(env, &role.name, &pending);
    Ok(record)
}
