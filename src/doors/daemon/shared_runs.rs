//! With `[cluster]` and its key (docs/spec.md §23; the records: `approval_pass::shared`): this device
//! hands its approval requests and waiting runs to the others (`share_waiting`, at start and
//! after each run), takes the outcomes other devices recorded for the calls its runs wait for
//! (`take_outcomes`), and lets a waiting run go on only where the cluster says (`goes_on_here`):
//! the device that ran its call, else the first to ask. A device that comes back after another
//! let its run go on drops its copy and does nothing more for it (a debug line).

use super::core::Input;
use super::Daemon;
use crate::doors::approval_pass::shared::{self, SharedError};
use crate::records::state::approval_ledger::NoteStatus;
use crate::records::state::State;
use crate::running::run::suspend::{self, Found, Suspended};

impl Daemon {
    fn shared(&self) -> Option<crate::doors::approval_pass::shared::Shared> {
        self.coordinator.as_ref().and_then(|c| c.shared.clone())
    }

    fn block_on<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        self.coordinator.as_ref().map(|c| c.block(work))
    }

    /// Hands this device's pending requests and waiting runs to the other devices (each once).
    pub(super) fn share_waiting(&mut self) {
        let Some(sh) = self.shared() else {
            return;
        };
        let state = self.run_env.store.load();
        for (id, a) in state
            .approvals
            .iter()
            .filter(|(_, a)| a.phase == NoteStatus::Pending)
        {
            let tag = format!("shared request {id}");
            if sh.seen(&tag) {
                continue;
            }
            match self.block_on(sh.put_request(id, a)) {
                Some(Ok(())) => {
                    sh.first_time(&tag);
                    tracing::debug!("approval {id} handed to the cluster");
                }
                Some(Err(e)) => self.cannot_share(&sh, &format!("approval {id}"), e),
                None => {}
            }
        }
        for found in suspend::all(&self.run_env.vault, &self.run_env.key) {
            let Found::Signed(s) = found else { continue };
            let tag = format!("shared run {}.{}", s.run_id, s.wait);
            if s.resuming || sh.seen(&tag) {
                continue;
            }
            let ids: Vec<String> = s
                .turn
                .waiting
                .iter()
                .filter_map(|(_, note)| suspend::approval_of(&state, note).map(|(id, _)| id.clone()))
                .collect();
            match self.block_on(sh.put_run(&s, ids)) {
                Some(Ok(())) => {
                    sh.first_time(&tag);
                    tracing::debug!(
                        "run {} handed to the cluster: it may go on on any device",
                        s.run_id
                    );
                }
                Some(Err(e)) => self.cannot_share(&sh, &format!("run {}", s.run_id), e),
                None => {}
            }
        }
    }

    fn cannot_share(&self, sh: &shared::Shared, what: &str, e: SharedError) {
        if sh.first_time(&format!("cannot share {what}")) {
            tracing::warn!(
                "cluster: cannot hand {what} to the other devices ({e}); until it is, only this device runs it"
            );
        }
    }

    /// Takes the outcomes other devices recorded for the calls `s` waits for; true when one was.
    pub(super) fn take_outcomes(&self, state: &State, s: &Suspended) -> bool {
        let Some(sh) = self.shared() else {
            return false;
        };
        let mut took = false;
        for (_, note) in &s.turn.waiting {
            let Some((id, a)) = suspend::approval_of(state, note) else {
                continue;
            };
            if a.phase.is_decided() && a.phase != NoteStatus::Unknown {
                continue;
            }
            if let Some(Ok(Some((e, _)))) = self.block_on(sh.execution(id)) {
                if e.device != sh.device() && e.phase.is_decided() && e.phase != a.phase {
                    shared::take_outcome(&self.run_env.store, id, &e);
                    tracing::debug!(
                        "approval {id}: device {} ran its call ({}); nothing more for it here",
                        e.device,
                        e.phase.as_str()
                    );
                    took = true;
                }
            }
        }
        took
    }

    /// Whether another device let `s` go on (the cluster names it): then this device's copy is
    /// dropped, and nothing more is done for it here.
    pub(super) fn went_on_elsewhere(&mut self, s: &Suspended) -> bool {
        let Some(sh) = self.shared() else {
            return false;
        };
        match self.block_on(sh.resumer_of(&s.run_id, s.wait)) {
            Some(Ok(Some(d))) if d != sh.device() => self.drop_copy(s, &d),
            _ => false,
        }
    }

    fn drop_copy(&mut self, s: &Suspended, device: &str) -> bool {
        tracing::debug!(
            "run {} went on on device {device}; nothing more for it here",
            s.run_id
        );
        suspend::remove(&self.run_env.vault, &s.run_id);
        self.apply(Input::ShownChanged);
        true
    }

    /// Whether `s`, its calls all decided, goes on here: the cluster names the device (this one
    /// when none was named). One another device let go on is dropped here.
    pub(super) fn goes_on_here(&mut self, s: &Suspended) -> bool {
        let Some(sh) = self.shared() else {
            return true;
        };
        match self.block_on(sh.resumer(&s.run_id, s.wait)) {
            Some(Ok(d)) if d == sh.device() => true,
            Some(Ok(d)) => !self.drop_copy(s, &d),
            Some(Err(e)) => {
                sh.report(
                    &self.run_env.log,
                    self.run_env.clock.as_ref(),
                    &format!("run {} waits", s.run_id),
                    e,
                );
                false
            }
            None => true,
        }
    }
}
