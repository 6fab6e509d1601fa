//! The run's side of approvals: a call whose mode is `ask` becomes an approval note — or reuses the
//! pending one for the same role, tool and arguments — and the model is told it is queued.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use super::note::{self, NewNote};
use crate::base::calls::Risk;
use crate::base::sidewrites::SideWrites;
use crate::base::vault::{VaultError, VaultPath};
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
    /// What counts as a secret in the call's arguments (docs/spec.md §24).
    pub secrets: std::sync::Arc<crate::base::environment::Redactor>,
    /// Where a ledger write that fails without failing the call is counted (status shows it).
    pub side: SideWrites,
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
    /// What it changes of the person's own notes (empty: none of them).
    pub theirs: &'a super::person::Asked,
}

/// A queued call.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub id: String,
    pub note: String,
    /// An identical request was already pending: its note is reused.
    pub reused: bool,
}

/// Why a call that needs approval was not queued (the model is told it did not run, and this).
#[derive(Debug, thiserror::Error)]
pub enum NotQueued {
    #[error("the approval could not be recorded: {0}")]
    NotRecorded(VaultError),
    #[error("the approval note could not be written: {0}")]
    NoteNotWritten(VaultError),
}

/// Records the request durably, then writes its note. Identical pending requests share a note.
pub fn ask(
    store: &StateStore,
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    hops: u32,
    now: DateTime<Utc>,
) -> Result<Queued, NotQueued> {
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
            let folder = vault.layout().approvals();
            let approval = record(ctx, role, call, (&id, &folder), hash.clone(), hops, now);
            s.approvals.insert(id.clone(), approval.clone());
            let q = Queued {
                id,
                note: approval.note.clone(),
                reused: false,
            };
            (q, Some(approval))
        })
        .map_err(NotQueued::NotRecorded)?;
    // Reused: its note is already there.
    let Some(approval) = new else {
        return Ok(queued);
    };
    if let Err(e) = write_note(store, ctx, role, call, &approval, &queued.id) {
        withdraw(store, &queued.id, &ctx.side);
        return Err(NotQueued::NoteNotWritten(e));
    }
    Ok(queued)
}

/// Takes back request `id`, whose note could not be written: no note, no request (a record
/// nobody can see must not linger as "pending"). One that cannot be taken back expires
/// unanswered; the sink says so meanwhile.
fn withdraw(store: &StateStore, id: &str, side: &SideWrites) {
    side.check(
        "the approval ledger (a request whose note was not written)",
        store.update(|s| s.approvals.remove(id)),
    );
}

/// The ledger record of a new request.
fn record(
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    (id, folder): (&str, &str),
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
        note: format!("{folder}/{name}"),
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
        outcome_told: None,
        also_for: Vec::new(),
        hops,
        followup: None,
        gist: Some(gist_of(ctx, call)),
        bases: call.theirs.bases.clone(),
        decided_by: None,
        kind: Default::default(),
        instruction: None,
    }
}

/// The call's gist; a change to the person's own note says so, on the lock screen too.
fn gist_of(ctx: &AskContext, call: &Call) -> crate::records::state::approval_ledger::Gist {
    let mut gist = super::gist::of(call.tool, call.args, &ctx.secrets);
    if !call.theirs.bases.is_empty() {
        gist.action.push_str(" (your note)");
    }
    gist
}

/// Writes the note of a new request (never over an existing file).
fn write_note(
    store: &StateStore,
    ctx: &AskContext,
    role: &Role,
    call: &Call,
    approval: &Approval,
    id: &str,
) -> Result<(), VaultError> {
    let text = note::render(&NewNote {
        approval,
        id,
        role_display: &role.display_name,
        description: call.description,
        reason: call.reason,
        args: call.args,
        run_log: &ctx.run_log,
        tz: ctx.tz,
        theirs: &call.theirs.section,
    });
    let path = VaultPath::parse(&approval.note, false)?;
    store.vault().create_atomic(&path, text.as_bytes())
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn asking(dir: &std::path::Path) -> (StateStore, Role, AskContext) {
        let vault = Arc::new(crate::base::vault::Vault::open(dir).unwrap());
        let env = crate::base::environment::Env::from_pairs([("HOME", "/nonexistent")]);
        let file = (
            "ops".to_string(),
            std::path::PathBuf::from("roles/ops.md"),
            Ok("# Ops\n## Tools\n- write_file\n".to_string()),
        );
        let ctx = crate::setup::role::LoadContext::new(chrono_tz::UTC, env.clone());
        let role = crate::setup::role::RoleSet::from_texts([file], &ctx).roles["ops"].clone();
        let ask = AskContext {
            run_id: "20261128T180000Z-ops-0a1b2c3d".into(),
            run_log: "daily/2026-11-28.md".into(),
            expire_after: std::time::Duration::from_secs(3600),
            tz: chrono_tz::UTC,
            secrets: env.redactor(),
            side: SideWrites::default(),
        };
        (StateStore::new(vault), role, ask)
    }

    /// A request whose note cannot be written is not queued and not left in the ledger.
    #[test]
    fn a_request_without_its_note_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, role, ctx) = asking(dir.path());
        // A file where the notes' folder should be: the note cannot be created.
        std::fs::create_dir_all(dir.path().join("agent")).unwrap();
        std::fs::write(dir.path().join("agent/approvals"), "not a folder").unwrap();
        let args = serde_json::json!({"path": "a.md", "content": "x"});
        let call = Call {
            tool: "write_file",
            exposed: "write_file",
            risk: Risk::Write,
            description: "",
            reason: "",
            args: &args,
            theirs: &Default::default(),
        };
        let why = ask(&store, &ctx, &role, &call, 0, Utc::now())
            .map(|_| ())
            .map_err(|e| e.to_string());
        let why = why.err().unwrap_or_default();
        assert!(
            why.starts_with("the approval note could not be written: "),
            "{why}"
        );
        assert!(store.try_load().unwrap().approvals.is_empty());
        assert_eq!(ctx.side.problem(), None);
    }

    /// A request that cannot be taken back (the state cannot be written) is not dropped in
    /// silence: the side-write sink, which status shows, names it.
    #[test]
    fn a_request_that_cannot_be_taken_back_is_shown() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, ctx) = asking(dir.path());
        // A folder where the state file should be: no update can be written.
        std::fs::create_dir_all(dir.path().join(".tabd/state.json")).unwrap();
        withdraw(&store, "0a1b2c", &ctx.side);
        let problem = ctx.side.problem().unwrap_or_default();
        assert!(
            problem.contains("cannot write the approval ledger (a request whose note was not written): "),
            "{problem}"
        );
    }
}
