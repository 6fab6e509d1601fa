//! The person's pauses in the shell (docs/spec.md §28, the core's part is `core::pause`): the pause
//! book read at every tick — the daemon watches its folder, so `tabd pause` wakes the loop at
//! once, and the tick that follows reads it — and fed to the core when it changed; a `--for`
//! that is over ended here (its end written, its mark taken off); and the core's pause effects
//! carried out: one line in the daily note per pause that begins or ends, one push each (once,
//! across restarts: `told` in the book), the run going on stopped, paused slots recorded.
//!
//! Slots that fell in a pause never run late: before the slots are planned, the ones right after
//! the ledger that a pause held (one in force, or one that ended while tabd was not running) are
//! recorded as `paused` and the ledger moves past them (`paused_slots`), so no catch-up stands
//! for them.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::core::{Effect, Input, SlotRun};
use super::Daemon;
use crate::formats::schedule::Schedule;
use crate::records::state::pause::{Held, PauseStore, Paused, Read, Target};
use crate::running::run::{Stop, StopWhy};
use crate::setup::config::notify::EventKind;
use crate::setup::role::Role;

/// Most slots of one role looked at in one go (a week of `every 1 min` is plenty).
const SLOTS_CAP: usize = 20_000;

/// The book as the daemon last read it.
#[derive(Default)]
pub(super) struct PauseSeen {
    /// The file's bytes at the last read (`None`: not read yet; `Some(None)`: no file).
    bytes: Option<Option<Vec<u8>>>,
    read: Option<Read>,
    /// With `[cluster]`: the cluster's book as its follower reads it (`cluster_pause`).
    pub(super) cluster: Option<super::cluster_pause::ClusterPauses>,
}

/// Each running role's stop: a pause asks one run to end at its next step (tabd's own stop asks
/// every run, through these and `RunEnv::stop`).
#[derive(Default)]
pub(super) struct RunStops(HashMap<String, Stop>);

impl RunStops {
    /// A stop of its own for the run of `role` starting now.
    pub(super) fn for_run(&mut self, role: &str) -> Stop {
        let stop = Stop::default();
        self.0.insert(role.to_string(), stop.clone());
        stop
    }

    pub(super) fn ended(&mut self, role: &str) {
        self.0.remove(role);
    }

    /// Asks the run of `role` to stop for its pause; `false`: no run of it is going on.
    fn stop_paused(&self, role: &str) -> bool {
        self.0
            .get(role)
            .map(|stop| stop.request_for(StopWhy::Paused))
            .is_some()
    }

    fn is_running(&self, role: &str) -> bool {
        self.0.contains_key(role)
    }

    /// tabd is stopping: every run ends where it is.
    pub(super) fn stop_all(&self) {
        self.0.values().for_each(Stop::request);
    }
}

/// When a pause held: from (`None`: since ever — its record is gone) to (`None`: it still holds).
pub type Window = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// The slots of `schedule` after `last` up to `now` that fell in a pause (`windows`: from — `None`
/// since ever — to — `None` still), oldest first, up to the first that did not: the ledger moves
/// past them, so no catch-up stands for them. A slot after that is the catch-up's as before.
pub fn paused_slots(
    schedule: &Schedule,
    last: DateTime<Utc>,
    now: DateTime<Utc>,
    windows: &[Window],
) -> Vec<DateTime<Utc>> {
    if windows.is_empty() {
        return Vec::new();
    }
    let within = |t: DateTime<Utc>| {
        windows
            .iter()
            .any(|(from, to)| from.is_none_or(|f| f <= t) && to.is_none_or(|e| t < e))
    };
    schedule
        .fires_between(last, now, SLOTS_CAP)
        .into_iter()
        .take_while(|t| within(*t))
        .collect()
}

impl Daemon {
    pub(super) fn pause_store(&self) -> PauseStore {
        PauseStore::new(self.run_env.vault.clone(), Some(self.run_env.key.clone()))
    }

    /// The book's folder, made at start so the watch on it holds from the first `tabd pause`.
    pub(super) fn make_pause_folder(&self) {
        let dir = crate::records::state::pause::folder();
        if let Err(e) = self.run_env.vault.create_dir_all(&dir) {
            tracing::warn!(
                "cannot create {dir}/: {e}; a `tabd pause` is seen at the next tick instead of at once"
            );
        }
    }

    /// Reads the book (every tick: the folder's watch only wakes the loop) and feeds the core
    /// what holds at `wall` when the book changed or a `--for` is over; a pause whose time is
    /// over is ended in the book first.
    pub(super) fn read_pauses(&mut self, wall: DateTime<Utc>) {
        let store = self.pause_store();
        let bytes = store.bytes();
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => {
                // Not readable now: what it said holds, and so does every role (`Read`).
                let read = Read::Unreadable(e.to_string());
                self.feed_pauses(&store, read, None, wall);
                return;
            }
        };
        let over = self.core.pauses().next_end().is_some_and(|end| end <= wall);
        if self.seen.pauses.bytes.as_ref() == Some(&bytes) && !over {
            return;
        }
        let mut read = Read::parse(bytes.as_deref());
        let mut bytes = Some(bytes);
        if matches!(&read, Read::Book(book) if book.pauses.iter().any(|p| !p.holds(wall))) {
            // Its time is over: ended in the book (its mark taken off), then read as it is now.
            let r = store.update(|b| b.expire(wall));
            self.say_pause_warnings(r);
            read = store.read();
            bytes = store.bytes().ok();
        }
        self.feed_pauses(&store, read, bytes, wall);
    }

    fn feed_pauses(
        &mut self,
        store: &PauseStore,
        read: Read,
        bytes: Option<Option<Vec<u8>>>,
        wall: DateTime<Utc>,
    ) {
        let names: Vec<String> = self.roles().all_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let paused = store.paused_from(&read, wall, &names);
        self.seen.pauses.read = Some(read);
        if bytes.is_some() {
            self.seen.pauses.bytes = bytes;
        }
        self.apply(Input::Pauses(paused));
    }

    /// When the daemon must look again: the soonest `--for` to end.
    pub(super) fn pause_wake(
        &self,
        wall: DateTime<Utc>,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        self.core
            .pauses()
            .next_end()
            .map(|end| super::core::mono_of(end, wall, now))
    }

    fn say_pause_warnings<T>(&self, r: Result<(T, Vec<String>), crate::records::state::pause::PauseError>) {
        match r {
            Ok((_, warnings)) => warnings.iter().for_each(|w| tracing::warn!("{w}")),
            Err(e) => self.shown.writes.check("the pause book", Err::<(), _>(e)),
        }
    }

    /// The core's pause effects, carried out.
    pub(super) fn carry_pause(&mut self, effect: Effect) {
        match effect {
            Effect::PauseBegan(held) => self.pause_began(&held),
            Effect::PauseEnded(held) => self.pause_ended(&held),
            Effect::StopRun(role) => self.stop_paused_run(&role),
            Effect::SlotsPaused { role, slots } => {
                if let Some(role) = self.roles().roles.get(&role).cloned() {
                    let held = self.core.pauses().of(&role.name).cloned();
                    self.slots_paused(&role, &slots, held.as_ref());
                }
            }
            // The others are `effects::carry`'s.
            _ => {}
        }
    }

    fn pause_began(&mut self, held: &Held) {
        let tz = self.config().timezone;
        let (who, what) = self.whose(&held.target);
        let arg = held.target.resume_arg();
        // Until when, and how to end it: one phrase for the daily line and the push.
        let (until, ending) = match held.until {
            Some(u) => (
                format!("until {}", crate::base::text::shown(u, tz)),
                format!("`tabd resume {arg}` ends it sooner"),
            ),
            None => (
                "until you resume it".to_string(),
                format!("`tabd resume {arg}` ends it"),
            ),
        };
        let text = match &held.unrecorded {
            Some(why) => format!("paused — {what}: {why}"),
            None => format!(
                "paused — you paused {what} {until} ({ending}): nothing of it runs; notes wait in the inbox, no attempt counted"
            ),
        };
        tracing::warn!("{who}: {text}");
        let since = held
            .since
            .map_or_else(|| "unrecorded".to_string(), |s| s.to_rfc3339());
        let key = format!("pause:{}:{since}", held.target.resume_arg());
        // Once a day (a restart while paused says it again only in the log), and with
        // `[cluster]` from one device: the daily note is the vault's, not a device's.
        if self.pause_noted_today(held) && self.first_device(&format!("line:{key}:{}", self.today())) {
            self.pause_line(&who, &text);
        }
        let told = self.pause_told(held);
        if !told && self.first_device(&key) {
            let message = match &held.unrecorded {
                Some(why) => format!("{}.", sentence_of(why)),
                None => format!(
                    "Nothing of it runs {until} — no schedule, note or watch; notes wait in the inbox. {}.",
                    sentence_of(&ending)
                ),
            };
            let note = Some(self.run_env.vault.layout().status_note());
            self.tell(
                EventKind::Paused,
                held.target.role().unwrap_or(""),
                key,
                (format!("{who}: paused"), message),
                note,
            );
        }
        if !told {
            let target = held.target.clone();
            let since = held.since;
            let r = self.pause_store().update(|b| {
                if let Some(p) = b
                    .pauses
                    .iter_mut()
                    .find(|p| p.target == target && Some(p.since) == since)
                {
                    p.told = true;
                }
            });
            self.say_pause_warnings(r);
        }
    }

    fn pause_ended(&mut self, held: &Held) {
        let (who, what) = self.whose(&held.target);
        let how = self.ending_of(held);
        let text = format!(
            "runs again — {how}: {what} runs again; the slots that passed while paused were skipped, not caught up"
        );
        tracing::info!("{who}: {text}");
        let since = held
            .since
            .map_or_else(|| "unrecorded".to_string(), |s| s.to_rfc3339());
        let key = format!("resume:{}:{since}", held.target.resume_arg());
        if self.first_device(&format!("line:{key}")) {
            self.pause_line(&who, &text);
        }
        if self.first_device(&key) {
            let note = Some(self.run_env.vault.layout().status_note());
            let message = format!("{}. Its notes waiting in the inbox run now.", sentence_of(&how));
            self.tell(
                EventKind::Paused,
                held.target.role().unwrap_or(""),
                key,
                (format!("{who} runs again"), message),
                note,
            );
        }
        let target = held.target.clone();
        let since = held.since;
        let r = self.pause_store().update(|b| {
            for e in b
                .ended
                .iter_mut()
                .filter(|e| e.target == target && Some(e.since) == since)
            {
                e.told = true;
            }
        });
        self.say_pause_warnings(r);
    }

    /// How `held` ended, as the book says: resumed (where), or its time over.
    fn ending_of(&self, held: &Held) -> String {
        let Some(Read::Book(book)) = &self.seen.pauses.read else {
            return "your pause ended".into();
        };
        let ended = book
            .ended
            .iter()
            .rev()
            .find(|e| e.target == held.target && Some(e.since) == held.since);
        match ended.map(|e| (e.how, e.by.as_str())) {
            Some((crate::records::state::pause::How::Expired, _)) => "your pause's time is over".into(),
            Some((_, by)) if !by.is_empty() => format!("you resumed it (`tabd resume` on {by})"),
            _ => "you resumed it (`tabd resume`)".into(),
        }
    }

    /// Whether the push that `held` began went out already (the book's `told`).
    fn pause_told(&self, held: &Held) -> bool {
        let Some(Read::Book(book)) = &self.seen.pauses.read else {
            return false;
        };
        book.pauses
            .iter()
            .any(|p| p.target == held.target && Some(p.since) == held.since && p.told)
    }

    /// The daily note's `who` and the words for what a pause holds.
    fn whose(&self, target: &Target) -> (String, String) {
        match target {
            Target::All => ("tabd".into(), "every role".into()),
            Target::Role(r) => {
                let who = self
                    .roles()
                    .roles
                    .get(r)
                    .map_or_else(|| r.clone(), |role| role.display_name.clone());
                (who.clone(), who)
            }
        }
    }

    /// True the first time today that `held`'s beginning is said (the state's notices).
    fn pause_noted_today(&self, held: &Held) -> bool {
        let since = held
            .since
            .map_or_else(|| "unrecorded".to_string(), |s| s.to_rfc3339());
        let cause = format!("paused {since}");
        match held.target.role() {
            Some(role) => self.note_once(role, &cause),
            None => {
                let today = self.today();
                let first = self
                    .run_env
                    .store
                    .update(|s| s.global.first_notice(today, &cause));
                self.shown.writes.check("the state (a notice)", first.as_ref());
                first.unwrap_or(true)
            }
        }
    }

    fn pause_line(&self, who: &str, text: &str) {
        let now = self.run_env.clock.now();
        self.shown.writes.check(
            "the daily note (a pause)",
            self.run_env.log.write_line(now, who, text),
        );
    }

    /// The core's `StopRun`: the run of `role` going on ends at its next step, recorded as
    /// stopped (no attempt counted: its notes wait in the inbox for the resume).
    fn stop_paused_run(&mut self, role: &str) {
        if !self.work.stops.is_running(role) {
            return;
        }
        let (who, _) = self.whose(&Target::Role(role.to_string()));
        // Paused means skipped: the slot the stopped run was for is not owed to a later start.
        let forgotten = self.run_env.store.update(|s| s.role(role).started_slots.clear());
        self.shown
            .writes
            .check("the state (a paused run's slot)", forgotten);
        let text = "paused — its run going on stops at its next step (recorded as stopped); its notes wait in the inbox, no attempt counted";
        tracing::warn!("{who}: {text}");
        // Said before the stop is asked, so the line comes before the run's own end in the note.
        self.pause_line(&who, text);
        self.work.stops.stop_paused(role);
    }

    /// Slots of `role` that a pause held: one record for them (`skipped`, `ended: paused`), and
    /// one line in the daily note per pause and day.
    pub(super) fn slots_paused(&self, role: &Role, slots: &[SlotRun], held: Option<&Held>) {
        let Some(last) = slots.iter().map(|s| s.slot).max() else {
            return;
        };
        let count: usize = slots.iter().map(|s| s.missed).sum();
        let tz = self.config().timezone;
        let at = last.with_timezone(&tz).format("%H:%M");
        let cause = match count {
            1 => format!("paused (`tabd pause`): the {at} run is skipped, not caught up"),
            n => format!("paused (`tabd pause`): {n} scheduled runs up to {at} are skipped, not caught up"),
        };
        self.write_paused_record(role, last, &cause);
        // A slot owed from an interrupted run and skipped now is settled: not owed again.
        let settled = self.run_env.store.update(|s| {
            let r = s.role(&role.name);
            for slot in slots {
                r.slot_finished(slot.slot);
            }
        });
        self.shown.writes.check("the state (paused slots)", settled);
        let since = held
            .and_then(|h| h.since)
            .map_or_else(|| "unrecorded".into(), |s| s.to_rfc3339());
        let cause = format!("paused since {since}");
        let line = format!("line:slots:{}:{since}:{}", role.name, self.today());
        if self.note_once(&role.name, &cause) && self.first_device(&line) {
            let text = "skipped — paused (`tabd pause`): its scheduled runs are skipped while it is paused, and not caught up after";
            self.pause_line(&role.display_name, text);
        }
    }

    fn write_paused_record(&self, role: &Role, slot: DateTime<Utc>, cause: &str) {
        let now = self.run_env.clock.now();
        let trigger = super::inputs::trigger_of(super::core::Work::Slot(SlotRun { slot, missed: 1 }), role);
        let rec = crate::records::runlog::RunRecord {
            run_id: crate::base::run_id::RunId::new(&role.name, now).into(),
            role: role.name.clone(),
            trigger: crate::records::runlog::TriggerRecord::of(&trigger, vec![]),
            started_at: now,
            ended_at: now,
            outcome: crate::records::runlog::Outcome::Skipped,
            error: Some(cause.to_string()),
            model: String::new(),
            requests: 0,
            usage: Default::default(),
            tool_calls: vec![],
            moved: vec![],
            children: vec![],
            ended: Some("paused".into()),
            notes_truncated: Vec::new(),
            triage: None,
        };
        self.shown.writes.check(
            "a run record (a paused slot)",
            self.run_env.log.write_record(&rec),
        );
    }

    /// Before the slots are planned: the slots of each role right after its ledger that a pause
    /// held — one in force, or one that ended meanwhile — are recorded as paused and the ledger
    /// moves past them, so the plan never catches them up.
    pub(super) fn skip_paused_slots(&mut self, roles: &[&Role], wall: DateTime<Utc>) {
        let ended = match &self.seen.pauses.read {
            Some(Read::Book(b)) => b.ended.clone(),
            _ => Vec::new(),
        };
        let mut moves = Vec::new();
        for role in roles {
            let Some(last) = self.seen.state.roles.get(&role.name).and_then(|r| r.last_slot) else {
                continue;
            };
            let mut windows: Vec<_> = ended
                .iter()
                .filter(|e| e.target.covers(&role.name))
                .map(|e| (Some(e.since), Some(e.ended)))
                .collect();
            let held = self.core.pauses().of(&role.name).cloned();
            if let Some(h) = &held {
                windows.push((h.since, None));
            }
            let slots = paused_slots(&role.schedule, last, wall, &windows);
            if let Some(newest) = slots.last() {
                let runs: Vec<SlotRun> = vec![SlotRun {
                    slot: *newest,
                    missed: slots.len(),
                }];
                moves.push((role.name.clone(), *newest));
                self.slots_paused(role, &runs, held.as_ref());
            }
        }
        if moves.is_empty() {
            return;
        }
        let written = self.run_env.store.update(|s| {
            for (name, slot) in moves {
                s.role(&name).last_slot = Some(slot);
            }
            s.clone()
        });
        match written {
            Ok(state) => self.seen.state = state,
            Err(e) => self
                .shown
                .writes
                .check("the state (paused slots)", Err::<(), _>(e)),
        }
    }

    /// What holds now, for status.
    pub(super) fn paused_view(&self) -> Paused {
        self.core.pauses().clone()
    }
}

/// `why` as a sentence's start: its first letter capital, no closing stop.
fn sentence_of(why: &str) -> String {
    let line = why.trim_end_matches(['.', ' ']);
    let mut chars = line.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every_minute() -> Schedule {
        let line = crate::formats::schedule::ScheduleLine::compile("every 1 min", 1)
            .unwrap()
            .unwrap();
        Schedule {
            lines: vec![line],
            tz: chrono_tz::UTC,
        }
    }

    /// The slots in a pause right after the ledger are skipped; one after it ends is left to the
    /// catch-up; none when no pause held them.
    #[test]
    fn the_slots_a_pause_held_after_the_ledger_are_skipped_and_no_others() {
        let s = every_minute();
        let last = at("2026-11-25T09:00:00Z");
        let now = at("2026-11-25T09:10:30Z");
        assert!(paused_slots(&s, last, now, &[]).is_empty());
        let still = paused_slots(&s, last, now, &[(Some(at("2026-11-25T08:00:00Z")), None)]);
        assert_eq!(still.len(), 10, "every slot since the ledger, while it holds");
        let ended = [(Some(at("2026-11-25T08:00:00Z")), Some(at("2026-11-25T09:05:30Z")))];
        let skipped = paused_slots(&s, last, now, &ended);
        assert_eq!(skipped.first(), Some(&at("2026-11-25T09:01:00Z")));
        assert_eq!(skipped.last(), Some(&at("2026-11-25T09:05:00Z")), "up to its end");
        let later = [(Some(at("2026-11-25T09:03:30Z")), Some(at("2026-11-25T09:05:30Z")))];
        assert!(
            paused_slots(&s, last, now, &later).is_empty(),
            "a slot missed before the pause began stops the skipping: the catch-up decides"
        );
        let unknown_start = [(None, None)];
        assert_eq!(paused_slots(&s, last, now, &unknown_start).len(), 10);
    }
}
