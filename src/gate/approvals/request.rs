//! The run's side of approvals: a call whose mode is `ask` becomes an approval note — or reuses the
//! pending one for the same role, tool and arguments — and the model is told it is queued.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use super::note::{self, NewNote};
use crate::base::calls::Risk;
use crate::base::vault::VaultPath;
use crate::records::state::approval_ledger::{args_hash, prune, Approval, NoteStatus};
use crate::records::state::StateStore;
use crate::setup::role::Role;

/// What a run knows that an approval note needs.
#[derive(Debug, Clone)]
pub struct AskContext {
    pub run_id: String,
    /// The run's daily log (a vault path), linked from the note.
    pub run_log: String,
    pub expire_after: std::time::Duration,
    pub tz: Tz,
    /// What counts as a secret in the call's arguments (DESIGN §24).
    pub secrets: std::sync::Arc<crate::base::environment::Redactor>,
}

/// One call to queue.
pub struct Call<'a> {
    /// A vault tool's name or `server/tool`.
    pub tool: &'a str,
    pub exposed: &'a str,
    pub risk: Risk,
    pub description: &'a str,
    /// The model's text before the call.
    pub reason: &'a str,
    pub args: &'a Value,
}

/// A queued call.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub id: String,
    pub note: String,
    /// An identical request was already pending: its note is reused.
    pub reused: bool,
}

/// Records the request durably, then writes its note. Identical pending requests share a note.
pub fn ask(
    store: &StateStore,
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    hops: u32,
    now: DateTime<Utc>,
) -> Result<Queued, String> {
    let vault = store.vault().clone();
    let hash = args_hash(call.tool, call.args);
    let (queued, new) = store
        .update(|s| {
            prune(&mut s.approvals, now);
            let existing = s.approvals.iter_mut().find(|(_, a)| {
                a.phase == NoteStatus::Pending
                    && a.role == role.name
                    && a.tool == call.tool
                    && a.args_hash == hash
                    && a.expires > now
                    && VaultPath::parse(&a.note, false).is_ok_and(|p| vault.exists(&p))
            });
            if let Some((id, a)) = existing {
                // This run waits for it too: its second part may go on with the result.
                if a.run_id != ctx.run_id && !a.also_for.contains(&ctx.run_id) {
                    a.also_for.push(ctx.run_id.clone());
                }
                let q = Queued {
                    id: id.clone(),
                    note: a.note.clone(),
                    reused: true,
                };
                return (q, None);
            }
            let id = loop {
                let id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
                if !s.approvals.contains_key(&id) {
                    break id;
                }
            };
            let approval = record(ctx, role, call, &id, hash.clone(), hops, now);
            s.approvals.insert(id.clone(), approval.clone());
            let q = Queued {
                id,
                note: approval.note.clone(),
                reused: false,
            };
            (q, Some(approval))
        })
        .map_err(|e| format!("the approval could not be recorded: {e}"))?;
    // Reused: its note is already there.
    let Some(approval) = new else {
        return Ok(queued);
    };
    if let Err(e) = write_note(store, ctx, role, call, &approval, &queued.id) {
        // No note, no request: a record nobody can see must not linger as "pending".
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a ledger write still dropped: its owner (issue 37 item 4) reports it to the side-write sink"
        )]
        let _ = store.update(|s| s.approvals.remove(&queued.id));
        return Err(format!("the approval note could not be written: {e}"));
    }
    Ok(queued)
}

/// The ledger record of a new request.
fn record(
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    id: &str,
    args_hash: String,
    hops: u32,
    now: DateTime<Utc>,
) -> Approval {
    let expires =
        now + chrono::Duration::from_std(ctx.expire_after).unwrap_or_else(|_| chrono::Duration::days(2));
    let name = note::file_name(now, ctx.tz, &role.name, call.tool, id);
    Approval {
        role: role.name.clone(),
        tool: call.tool.to_string(),
        exposed: call.exposed.to_string(),
        risk: call.risk,
        note: format!("{}/{name}", super::FOLDER),
        args_hash,
        run_id: ctx.run_id.clone(),
        created: now,
        expires,
        phase: NoteStatus::Pending,
        decided: None,
        outcome: None,
        reported: false,
        executions: 0,
        notified: false,
        also_for: Vec::new(),
        hops,
        followup: None,
        gist: Some(super::gist::of(call.tool, call.args, &ctx.secrets)),
    }
}

/// Writes the note of a new request (never over an existing file).
fn write_note(
    store: &StateStore,
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    approval: &Approval,
    id: &str,
) -> Result<(), String> {
    let text = note::render(&NewNote {
        approval,
        id,
        role_display: &role.display_name,
        description: call.description,
        reason: call.reason,
        args: call.args,
        run_log: &ctx.run_log,
        tz: ctx.tz,
    });
    let path = VaultPath::parse(&approval.note, false).map_err(|e| e.to_string())?;
    store
        .vault()
        .create_atomic(&path, text.as_bytes())
        .map_err(|e| e.to_string())
}

/// What the model is told about a queued call.
pub fn queued_text(q: &Queued) -> String {
    let link = crate::records::runlog::wikilink(&q.note);
    let again = if q.reused {
        " (the same call was already waiting there)"
    } else {
        ""
    };
    format!(
        "queued for approval: the call has NOT run. The person decides in {link}{again}; if they approve it, \
         tabd runs it once and a later run is told the result. Do not call this tool again for the same \
         thing; say in your summary that it is waiting for approval."
    )
}
