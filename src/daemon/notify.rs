//! What the daemon tells the person through `[notify]` (DESIGN §22): calls waiting for approval,
//! model calls paused, roles stopped for the day, notes moved to `failed/`, a role failing again
//! and again, expectations missed — each once.

use crate::config::notify::EventKind;
use crate::notify::{Event, Notifier};
use crate::provider::FailureClass;

use super::{tasks, Daemon};

impl Daemon {
    /// (Re)starts the notifier from the config: at start-up and when `[notify]` changed.
    pub(super) fn start_notifier(&mut self) {
        let name = self
            .watching
            .paths
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.notifier = Notifier::start(
            &self.config().notify,
            self.env.clone(),
            &name,
            self.config().timezone,
        );
    }

    /// Queues one event (nothing when no channel is set).
    pub(super) fn tell(
        &self,
        kind: EventKind,
        role: &str,
        key: String,
        (title, message): (String, String),
        note: Option<String>,
    ) {
        if let Some(n) = &self.notifier {
            n.send(Event {
                kind,
                role: role.to_string(),
                title,
                message,
                note,
                at: self.run_env.clock.now(),
                key,
            });
        }
    }

    /// Calls waiting for approval that the person has not been told about (whichever door asked:
    /// a run, `tabd fire`, `tabd mcp serve`): each once, across restarts.
    pub(super) fn notify_approvals(&mut self) {
        if self.notifier.is_none() {
            return;
        }
        let now = self.run_env.clock.now();
        let fresh: Vec<(String, crate::state::approvals::Approval)> = self
            .state
            .approvals
            .iter()
            .filter(|(_, a)| a.phase == crate::approvals::Phase::Pending && !a.notified && a.expires > now)
            // The ledger is written before the note: tell the person once there is a note to open.
            .filter(|(_, a)| {
                crate::vault::VaultPath::parse(&a.note, false).is_ok_and(|p| self.run_env.vault.exists(&p))
            })
            .map(|(id, a)| (id.clone(), a.clone()))
            .collect();
        if fresh.is_empty() {
            return;
        }
        for (id, a) in &fresh {
            let who = self.display_name(&a.role);
            self.tell(
                EventKind::Approval,
                &a.role,
                format!("approval:{id}"),
                (
                    format!("{who} asks to run {}", a.tool),
                    format!(
                        "A {} call waits for your approval (until {}): set `status: approved` or `rejected` in the note, or `tabd approve {id}`.",
                        a.risk.as_str(),
                        crate::text::shown(a.expires, self.config().timezone)
                    ),
                ),
                Some(a.note.clone()),
            );
        }
        let ids: Vec<String> = fresh.into_iter().map(|(id, _)| id).collect();
        let marked = self.run_env.store.update(|s| {
            for id in &ids {
                if let Some(a) = s.approvals.get_mut(id) {
                    a.notified = true;
                }
            }
        });
        if let Err(e) = marked {
            tracing::warn!("notify: cannot record that approvals were sent: {e}");
        }
    }

    /// What a finished run may need to tell: paused model calls, notes given up on, a role
    /// failing again and again — or, when asked for, that it is done.
    pub(super) fn notify_run(&mut self, done: &tasks::Done) {
        let Some(notifier) = self.notifier.clone() else {
            return;
        };
        let who = self.display_name(&done.role);
        let rec = &done.result.record;
        let failed_in_a_row = self.core.role(&done.role).map_or(0, |r| r.failed_in_a_row());
        match &done.result.failure {
            Some((FailureClass::Outage, why)) => self.tell(
                EventKind::Paused,
                &done.role,
                format!("paused:{}:{why}", self.today()),
                (
                    "tabd paused model calls".into(),
                    format!("{why}. Notes wait in their inboxes; no attempt is counted."),
                ),
                None,
            ),
            Some((FailureClass::RunFailure, why)) if failed_in_a_row == notifier.after_failures() => self
                .tell(
                    EventKind::Failing,
                    &done.role,
                    format!("failing:{}:{}", done.role, rec.run_id),
                    (
                        format!("{who} failed {failed_in_a_row} times in a row"),
                        crate::text::one_line(why, 300),
                    ),
                    Some(done.result.daily_log.as_str().to_string()),
                ),
            // A first part that waits for the person is not done (its approval is the event).
            None if rec.ended.is_none() => self.tell(
                EventKind::Done,
                &done.role,
                format!("done:{}", rec.run_id),
                (
                    format!("{who} finished"),
                    crate::text::one_line(&done.result.summary, 300),
                ),
                Some(done.result.daily_log.as_str().to_string()),
            ),
            _ => {}
        }
        for m in rec.moved.iter().filter(|m| m.to.contains("/failed/")) {
            self.tell(
                EventKind::FailedNote,
                &done.role,
                format!("failed:{}", m.to),
                (
                    format!("{who} gave up on a note"),
                    format!("{} moved to failed/ after repeated failures; move it back to the inbox to try again.", m.from),
                ),
                Some(m.to.clone()),
            );
        }
    }

    /// A role stopped for the rest of the day (a budget spent).
    pub(super) fn notify_stopped(&self, role: &str, cause: &str) {
        let who = self.display_name(role);
        self.tell(
            EventKind::Paused,
            role,
            format!("stopped:{}:{role}:{cause}", self.today()),
            (
                format!("{who} stopped for today"),
                format!("{cause}; its work waits until midnight."),
            ),
            None,
        );
    }

    fn display_name(&self, role: &str) -> String {
        self.roles()
            .roles
            .get(role)
            .map_or_else(|| role.to_string(), |r| r.display_name.clone())
    }
}
