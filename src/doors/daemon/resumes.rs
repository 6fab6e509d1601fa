//! Runs that waited for the person go on (docs/spec.md §22): once every call a suspended run waits for
//! is decided (and run), its second part is queued for its role — ahead of its other work, never
//! held back by `min_interval`. One whose second part was cut off by a crash does not start again.
//!
//! And only a record tabd can trust goes on (issue 36, finding 8): signed by this machine's key,
//! waiting for its own approvals, its second part not started already (a mark outside the vault
//! says so, whatever an old copy of the record restored into `.tabd/` says). Any other record is
//! set aside under `.tabd/suspended/refused/`, with a line in tabd's log and the daily note.

use super::core::Input;
use super::Daemon;
use crate::base::vault::VaultPath;
use crate::running::run::suspend::{self, Found, Suspended};

impl Daemon {
    /// Queues the second part of every suspended run whose calls are all decided; sets aside the
    /// records that are not to be resumed.
    pub(super) fn queue_resumes(&mut self) {
        let mut state = self.run_env.store.load();
        for found in suspend::all(&self.run_env.vault, &self.run_env.key) {
            let s = match found {
                Found::Signed(s) => s,
                Found::Refused { path, why } => {
                    self.refuse_suspended(&path, None, &why);
                    continue;
                }
            };
            // Resuming: its second part runs now (or was cut off: said at the next start). Gone
            // on on another device (with [cluster]): nothing more here.
            if s.resuming || self.went_on_elsewhere(&s) {
                continue;
            }
            // Read just before its second part (a task of ours) marked it: the mark is that
            // part's, not a sign of an old copy.
            let started = suspend::second_part_started(&self.run_env.key, &s);
            if started && suspend::moved_on_since(&self.run_env.vault, &self.run_env.key, &s) {
                continue;
            }
            if let Some(why) = self.not_to_resume(&state, &s, started) {
                if let Ok(path) = suspend::path_of(&s.run_id) {
                    self.refuse_suspended(&path, Some(&s), &why);
                }
                continue;
            }
            // With [cluster]: a call another device ran is decided here too.
            if self.take_outcomes(&state, &s) {
                state = self.run_env.store.load();
            }
            if suspend::decisions(&state, &s).is_none() || !self.goes_on_here(&s) {
                continue;
            }
            let known = self.core.role(&s.role).is_none_or(|r| r.resumes(&s.run_id));
            if !known {
                tracing::info!(
                    "{}: the calls run {} waited for are decided; it goes on",
                    s.role,
                    s.run_id
                );
            }
            self.apply(Input::Resumable {
                role: s.role.clone(),
                run_id: s.run_id.to_string(),
            });
        }
    }

    /// Why a signed record is not to be resumed: its second part started already (an old copy),
    /// it is too old, or it waits for another run's approval. `started`: the mark of its second
    /// part is there (and the record is still as read).
    fn not_to_resume(
        &self,
        state: &crate::records::state::State,
        s: &Suspended,
        started: bool,
    ) -> Option<String> {
        if started {
            return Some(
                "its second part started already: this record is an old copy that came back (a backup restored, \
                 a sync tool)"
                    .into(),
            );
        }
        suspend::refusal(state, s, self.run_env.clock.now())
    }

    /// Sets a record aside (`.tabd/suspended/refused/`) and says so in tabd's log and the daily
    /// note: it is never resumed.
    fn refuse_suspended(&mut self, path: &VaultPath, s: Option<&Suspended>, why: &str) {
        let name = path.file_name().trim_end_matches(".json").to_string();
        let who = s
            .and_then(|s| self.roles().roles.get(&s.role))
            .map_or_else(|| "tabd".to_string(), |r| r.display_name.clone());
        let line = format!(
            "the suspended run `{name}` does not go on: {why}; it is set aside in .tabd/suspended/refused/ \
             (the decision still reaches the role's next run)"
        );
        tracing::warn!("{who}: {line}");
        self.shown.writes.check(
            "the daily note",
            self.run_env.log.write_line(self.run_env.clock.now(), &who, &line),
        );
        suspend::set_aside(&self.run_env.vault, path);
        self.apply(Input::ShownChanged);
    }

    /// At start-up: a second part that was starting or running when tabd stopped hard is not
    /// started again (its calls may have run); the daily note says so. Marks of second parts
    /// older than any record tabd would resume are forgotten.
    pub(super) fn drop_interrupted_resumes(&mut self) {
        let forgotten = suspend::forget_old_marks(&self.run_env.key);
        if forgotten > 0 {
            tracing::info!("forgot {forgotten} mark(s) of second parts older than any run that can go on");
        }
        // Signed records only: the others are set aside by `queue_resumes`, right after.
        let signed = suspend::all(&self.run_env.vault, &self.run_env.key)
            .into_iter()
            .filter_map(|f| match f {
                Found::Signed(s) => Some(s),
                Found::Refused { .. } => None,
            });
        for s in signed.filter(|s| s.resuming) {
            let who = self
                .roles()
                .roles
                .get(&s.role)
                .map_or_else(|| s.role.clone(), |r| r.display_name.clone());
            let line = format!(
                "the second part of run `{}` was cut off when tabd stopped; it does not start twice — see the run's log and `tabd undo {}`",
                s.run_id, s.run_id
            );
            tracing::warn!("{who}: {line}");
            self.shown.writes.check(
                "the daily note",
                self.run_env.log.write_line(self.run_env.clock.now(), &who, &line),
            );
            suspend::remove(&self.run_env.vault, &s.run_id);
        }
    }
}
