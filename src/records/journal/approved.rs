//! Which approved calls a run asked for (issue 48). A call the person approves runs later than
//! the run that asked for it, in a session of its own whose journal (trigger `approved`) names
//! neither the approval nor that run. The approval ledger does: each request knows the run that
//! asked (`run_id`) and the runs that asked for the same call meanwhile (`also_for`), its role, and
//! when its outcome was recorded (`decided`), which the pass writes right after the call returns,
//! one call at a time. So an approved call's journal belongs to the request of its role that was
//! asked before the call started and decided first after it — read from tabd's own records (the
//! signed journal, the ledger), never from a note a person can edit.

use std::collections::BTreeMap;

use super::RunChanges;
use crate::base::run_id::RunId;
use crate::records::state::approval_ledger::Approval;

/// The trigger an approved call's journal carries (`running::run::session`'s label).
pub const APPROVED_TRIGGER: &str = "approved";

/// One approved call that changed files: the session that ran it, and the runs that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedCall {
    /// Its journal: `tabd undo` of it puts back what the call changed.
    pub run_id: RunId,
    /// The approval's id (`tabd approvals`).
    pub approval: String,
    /// The tool it called (`write_file`, `server/tool`).
    pub tool: String,
    /// The run that asked for it, then the others that asked for the same call while it waited.
    pub asked_by: Vec<String>,
}

impl ApprovedCall {
    /// Whether `run` asked for this call.
    pub fn asked_by(&self, run: &str) -> bool {
        self.asked_by.iter().any(|r| r == run)
    }
}

/// The approved calls among `journals`, each with the runs that asked for it (`ledger`: the
/// approval requests by id), oldest first. A journal no request accounts for (its request pruned
/// from the ledger) is left out.
pub fn calls(journals: &[&RunChanges], ledger: &BTreeMap<String, Approval>) -> Vec<ApprovedCall> {
    let mut out: Vec<(chrono::DateTime<chrono::Utc>, ApprovedCall)> = journals
        .iter()
        .filter(|j| j.trigger == APPROVED_TRIGGER)
        .filter_map(|j| {
            let (id, a) = request_of(j, ledger)?;
            let mut asked_by = vec![a.run_id.clone()];
            asked_by.extend(a.also_for.iter().filter(|r| **r != a.run_id).cloned());
            Some((
                j.started_at,
                ApprovedCall {
                    run_id: j.run_id.clone(),
                    approval: id.clone(),
                    tool: a.tool.clone(),
                    asked_by,
                },
            ))
        })
        .collect();
    out.sort_by(|a, b| (a.0, &a.1.run_id).cmp(&(b.0, &b.1.run_id)));
    out.into_iter().map(|(_, call)| call).collect()
}

/// The request an approved call's journal ran: of its role, started (`executions`), asked for
/// before the call began and decided at or after it — the first so decided.
fn request_of<'a>(
    journal: &RunChanges,
    ledger: &'a BTreeMap<String, Approval>,
) -> Option<(&'a String, &'a Approval)> {
    ledger
        .iter()
        .filter(|(_, a)| a.role == journal.role && a.executions > 0 && a.created <= journal.started_at)
        .filter_map(|(id, a)| Some((a.decided.filter(|d| *d >= journal.started_at)?, id, a)))
        .min_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)))
        .map(|(_, id, a)| (id, a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Duration, Utc};

    fn journal(id: &str, role: &str, trigger: &str, started_at: DateTime<Utc>) -> RunChanges {
        RunChanges {
            run_id: RunId::parse(id).unwrap(),
            role: role.into(),
            started_at,
            trigger: trigger.into(),
            before: Vec::new(),
            prefix: BTreeMap::new(),
            left: None,
            after: BTreeMap::new(),
            moved: Vec::new(),
            trust: super::super::Trust::Unchecked,
        }
    }

    fn request(
        role: &str,
        run: &str,
        created: DateTime<Utc>,
        decided: Option<DateTime<Utc>>,
        runs: u32,
    ) -> Approval {
        serde_json::from_value(serde_json::json!({
            "role": role, "tool": "write_file", "exposed": "write_file", "risk": "write",
            "note": "agent/approvals/x.md", "args_hash": "h", "run_id": run,
            "created": created, "expires": created + Duration::days(7), "phase": "done",
            "decided": decided, "executions": runs,
        }))
        .unwrap()
    }

    /// Two calls of one role approved and run in one pass, a third of another role, one the
    /// person rejected (never run), and a plain run: each call is its own request's.
    #[test]
    fn each_approved_journal_belongs_to_the_first_request_decided_after_it_started() {
        let t = |s: i64| {
            DateTime::parse_from_rfc3339("2026-11-24T09:00:00Z")
                .unwrap()
                .to_utc()
                + Duration::seconds(s)
        };
        let ledger = BTreeMap::from([
            ("a1".to_string(), request("ops", "run-1", t(0), Some(t(101)), 1)),
            ("a2".to_string(), {
                let mut a = request("ops", "run-2", t(10), Some(t(103)), 1);
                a.also_for = vec!["run-3".into()];
                a
            }),
            ("a3".to_string(), request("ops", "run-1", t(5), Some(t(102)), 0)),
            ("b1".to_string(), request("risk", "run-9", t(0), Some(t(101)), 1)),
        ]);
        let journals = [
            journal("call-ops-2", "ops", APPROVED_TRIGGER, t(102)),
            journal("call-ops-1", "ops", APPROVED_TRIGGER, t(100)),
            journal("call-risk", "risk", APPROVED_TRIGGER, t(100)),
            journal("run-1", "ops", "inbox", t(1)),
            journal("call-stray", "ops", APPROVED_TRIGGER, t(200)),
        ];
        let found = calls(&journals.iter().collect::<Vec<_>>(), &ledger);
        let seen: Vec<(&str, &str, Vec<&str>)> = found
            .iter()
            .map(|c| {
                (
                    c.run_id.as_str(),
                    c.approval.as_str(),
                    c.asked_by.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("call-ops-1", "a1", vec!["run-1"]),
                ("call-risk", "b1", vec!["run-9"]),
                ("call-ops-2", "a2", vec!["run-2", "run-3"]),
            ],
            "the rejected a3 (decided between) never ran; a call after every decision has no request"
        );
        assert!(found[2].asked_by("run-3") && !found[2].asked_by("run-1"));
    }
}
