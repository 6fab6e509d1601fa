//! What comes in: the shell reads the vault and turns what it finds into the core's inputs —
//! inbox scans (which notes are complete, which a run takes; entries tabd cannot read, reported
//! once; attempt records of notes that are gone), scheduled slots come due (recorded in the ledger
//! first), the approvals pass. (`expect:` deadlines: `expect`; suspended runs whose calls the
//! person decided: `resumes`.)

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::core::{self, Input, SlotRun, Work};
use super::slots::{self, SlotDecision};
use super::status::InboxView;
use super::Daemon;
use crate::base::blocking;
use crate::base::trigger::Trigger;
use crate::base::vault::{Entry, OddEntry, VaultPath};
use crate::records::inbox::{self, Candidate, Note};
use crate::setup::config::notify::EventKind;
use crate::setup::role::Role;

// Inbox scans: which notes are complete, which a run takes, notes tabd cannot read (reported
// once), and attempt records of notes that are gone (dropped, so state holds only what exists).

/// What the daemon keeps of a note between scans (valid while `modified` and `size` hold).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoteMeta {
    modified: SystemTime,
    size: u64,
    draft: bool,
    priority: inbox::Priority,
    /// Written by a person: no chain depth (roles' notes always carry `hops` ≥ 1).
    by_person: bool,
    /// Its frontmatter cannot be read: never run, refused to `failed/` (`run::refuse`).
    unreadable: bool,
}

impl Daemon {
    pub(super) fn scan_inboxes(&mut self, now: Instant) {
        let all = std::mem::take(&mut self.seen.rescan_all);
        let core = &self.core;
        self.seen.inbox_view.retain(|name, _| core.role(name).is_some());
        let names = self.core.due_scans(all, now);
        let roles = self.run_env.roles.clone();
        let mut unreadable: Vec<(&Role, Vec<OddEntry>)> = Vec::new();
        let mut present: Vec<(String, BTreeSet<String>)> = Vec::new();
        let due: Vec<(String, &Role)> = names
            .into_iter()
            .filter_map(|name| roles.roles.get(&name).map(|role| (name, role)))
            .collect();
        // Listing is the slow part (a folder read per inbox); at start-up, a thousand of them
        // use every core.
        let vault = &self.run_env.vault;
        let listed = crate::base::blocking::par_map(due, |(name, role)| {
            let listing = inbox::list(vault, &role.inbox);
            (name, role, listing)
        });
        for (name, role, listing) in listed {
            let listing = match listing {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!("cannot read the inbox {} of {name}: {e}", role.inbox);
                    continue;
                }
            };
            let (ready, recheck_at, view) = self.judge(role, &listing.notes, now);
            self.apply(Input::Scanned {
                role: name.clone(),
                ready,
                by_person: view.by_person > 0,
                recheck_at,
            });
            let view = InboxView {
                unreadable: listing.unreadable.len(),
                has_failed: listing.has_failed,
                ..view
            };
            if self.seen.inbox_view.get(&name) != Some(&view) {
                self.seen.inbox_view.insert(name.clone(), view);
                self.apply(Input::ShownChanged);
            }
            if all {
                present.push((
                    name.clone(),
                    listing
                        .notes
                        .iter()
                        .map(|e| e.path.as_str().to_string())
                        .collect(),
                ));
            }
            let names: Vec<String> = listing
                .unreadable
                .iter()
                .map(|o| format!("{} ({})", o.name, o.why))
                .collect();
            self.seen.unreadable.insert(name.clone(), names);
            unreadable.push((role, listing.unreadable));
        }
        self.report_unreadable(unreadable);
        if all {
            self.forget_gone_notes(present);
        }
    }

    /// Whether `role` has complete notes waiting, when to look again if some are settling, and
    /// the counts for status.
    fn judge(&mut self, role: &Role, notes: &[Entry], now: Instant) -> (bool, Option<Instant>, InboxView) {
        let root = self.watching.paths.root.clone();
        let dir = root.join(role.inbox.as_path());
        let wall = SystemTime::from(self.run_env.clock.now());
        let mut view = InboxView::default();
        let mut recheck: Option<Instant> = None;
        self.apply(Input::Listed {
            dir: dir.clone(),
            notes: notes
                .iter()
                .map(|e| {
                    let modified = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
                    (root.join(e.path.as_path()), e.size, modified)
                })
                .collect(),
            wall,
        });
        // A set: the retains below look up every tracked path (a Vec made them quadratic).
        let mut existing = HashSet::new();
        for e in notes {
            let abs = root.join(e.path.as_path());
            existing.insert(abs.clone());
            view.notes += 1;
            let modified = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
            match self.core.note_complete(&abs, e.size, modified, now, wall) {
                // Another device's (docs/spec.md §23): counted, not ready here.
                Ok(()) if self.held_elsewhere(&abs, (modified, e.size), now, &mut recheck) => {}
                Ok(()) => {
                    let meta = self.note_meta(&abs, e, modified);
                    if meta.unreadable && self.refuse(role, &e.path) {
                        existing.remove(&abs);
                        view.notes -= 1;
                    } else if meta.unreadable {
                        // It stays (the move failed, said in the log): counted, never run.
                    } else if meta.draft {
                        view.drafts += 1;
                    } else {
                        view.ready += 1;
                        // A retry waits like anything else: only a person's new note is urgent.
                        let retried = self
                            .seen
                            .state
                            .roles
                            .get(&role.name)
                            .is_some_and(|r| r.attempts.contains_key(e.path.as_str()));
                        view.by_person += usize::from(meta.by_person && !retried);
                    }
                }
                Err(not_yet) => {
                    view.settling += 1;
                    view.typing |= not_yet.typing;
                    if let Some(t) = not_yet.until {
                        recheck = Some(recheck.map_or(t, |r: Instant| r.min(t)));
                    }
                }
            }
        }
        view.settle_until = recheck.map(|t| {
            let wall = self.run_env.clock.now();
            wall + chrono::Duration::from_std(t.saturating_duration_since(now)).unwrap_or_default()
        });
        self.seen
            .notes
            .retain(|p, _| p.parent() != Some(dir.as_path()) || existing.contains(p));
        (view.ready > 0, recheck, view)
    }

    /// A note's draft status and priority, read once and kept while its mtime and size hold.
    fn note_meta(&mut self, abs: &Path, e: &Entry, modified: SystemTime) -> NoteMeta {
        if let Some(meta) = self.seen.notes.get(abs) {
            if meta.modified == modified && meta.size == e.size {
                return *meta;
            }
        }
        let (draft, priority, by_person, unreadable) = inbox::read_note(&self.run_env.vault, &e.path)
            .map(|n| {
                let by_person = n.hops == 0 && !n.hops_unknown;
                (n.draft, n.priority, by_person, n.unreadable().is_some())
            })
            .unwrap_or((false, inbox::Priority::Normal, false, false));
        let meta = NoteMeta {
            modified,
            size: e.size,
            draft,
            priority,
            by_person,
            unreadable,
        };
        self.seen.notes.insert(abs.to_path_buf(), meta);
        meta
    }

    /// The notes for a run of `role`: complete (§5), not drafts, in `inbox::select` order, at
    /// most `max_batch`. Only the chosen notes are read in full.
    pub(super) fn pick_notes(&mut self, role: &Role, now: Instant) -> Vec<Note> {
        let Ok(listing) = inbox::list(&self.run_env.vault, &role.inbox) else {
            return Vec::new();
        };
        let root = self.watching.paths.root.clone();
        let wall = SystemTime::from(self.run_env.clock.now());
        let mut candidates = Vec::new();
        for e in &listing.notes {
            let abs: PathBuf = root.join(e.path.as_path());
            let modified = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
            if self
                .core
                .note_complete(&abs, e.size, modified, now, wall)
                .is_err()
            {
                continue;
            }
            let meta = self.note_meta(&abs, e, modified);
            let mut later = None;
            if !meta.draft
                && !meta.unreadable
                && !self.held_elsewhere(&abs, (modified, e.size), now, &mut later)
            {
                candidates.push(Candidate {
                    path: e.path.clone(),
                    priority: meta.priority,
                    modified,
                });
            }
        }
        // A note changed since it was judged and now unreadable waits for the next scan's refusal.
        let notes = inbox::select(candidates, self.config().inbox.max_batch)
            .into_iter()
            .filter_map(|p| inbox::read_note(&self.run_env.vault, &p).ok())
            .filter(|n| n.unreadable().is_none())
            .collect();
        self.claim_notes(role, notes)
    }

    /// Refuses the complete note at `path`, which cannot be read: to `failed/`, with a daily line
    /// and a record (`run::refuse`). True when it was moved.
    fn refuse(&mut self, role: &Role, path: &VaultPath) -> bool {
        let env = &self.run_env;
        let Ok(note) = inbox::read_note(&env.vault, path) else {
            return false;
        };
        let Some(why) = crate::running::run::refuse::unreadable(&note) else {
            return false; // changed since: readable now, judged again at the next scan
        };
        match crate::running::run::refuse::refuse(env, role, &Trigger::inbox(), &note, why) {
            Ok(refused) => {
                tracing::warn!("{}: {refused}", role.display_name);
                self.tell(
                    EventKind::FailedNote,
                    &role.name,
                    format!("failed:{}", refused.to),
                    (
                        format!("{} cannot read a note", role.display_name),
                        crate::base::text::one_line(&refused.to_string(), 300),
                    ),
                    Some(refused.to.as_str().to_string()),
                );
                for e in refused.log_errors {
                    self.shown.writes.check::<(), _>("a refused note's line", Err(e));
                }
                self.apply(Input::ShownChanged);
                true
            }
            Err(e) => {
                self.shown.writes.check::<(), _>(
                    "the move to failed/ of a note that cannot be read",
                    Err(format!("{path} ({why}): {e}")),
                );
                false
            }
        }
    }

    /// Says once in the daily log (and in status) which inbox entries tabd cannot read; forgets
    /// the ones that are gone, so a new one under the same name is reported again.
    fn report_unreadable(&mut self, found: Vec<(&Role, Vec<OddEntry>)>) {
        let mut new_lines = Vec::new();
        let mut updates = Vec::new();
        for (role, odd) in found {
            let names: BTreeSet<String> = odd.iter().map(|o| o.name.clone()).collect();
            let reported = self
                .seen
                .state
                .roles
                .get(&role.name)
                .map(|r| r.unreadable_reported.clone())
                .unwrap_or_default();
            if reported == names {
                continue;
            }
            for o in odd.iter().filter(|o| !reported.contains(&o.name)) {
                new_lines.push((
                    role.display_name.clone(),
                    format!("{}{}", role.inbox, "/"),
                    o.clone(),
                ));
            }
            updates.push((role.name.clone(), names));
        }
        if updates.is_empty() {
            return;
        }
        let now = self.run_env.clock.now();
        for (who, inbox, o) in new_lines {
            let line = format!(
                "tabd does not read {inbox}{} — {}; it stays where it is",
                o.name, o.why
            );
            tracing::warn!("{who}: {line}");
            self.shown
                .writes
                .check("the daily note", self.run_env.log.write_line(now, &who, &line));
        }
        self.shown.writes.check(
            "the state",
            self.run_env.store.update(move |s| {
                for (role, names) in updates {
                    s.role(&role).unreadable_reported = names;
                }
            }),
        );
        self.apply(Input::ShownChanged);
    }

    /// Drops attempt records of notes that no longer exist (deleted by a person, moved away):
    /// state holds only what exists, and a later note with the same name starts from zero.
    fn forget_gone_notes(&mut self, present: Vec<(String, BTreeSet<String>)>) {
        let stale: Vec<(String, Vec<String>)> = present
            .into_iter()
            .filter_map(|(role, notes)| {
                let gone: Vec<String> = self
                    .seen
                    .state
                    .roles
                    .get(&role)?
                    .attempts
                    .keys()
                    .filter(|k| !notes.contains(*k))
                    .cloned()
                    .collect();
                (!gone.is_empty()).then_some((role, gone))
            })
            .collect();
        if stale.is_empty() {
            return;
        }
        self.shown.writes.check(
            "the state",
            self.run_env.store.update(move |s| {
                for (role, gone) in stale {
                    let r = s.role(&role);
                    for k in gone {
                        r.attempts.remove(&k);
                    }
                }
            }),
        );
    }
}

// Scheduled slots: due ones become queued runs (or logged skips), and only after the ledger
// records them durably (docs/spec.md §4: one occurrence runs at most once).

/// The trigger for a run of `role` started for `work` (the core took it off the queue).
pub(super) fn trigger_of(work: Work, role: &Role) -> Trigger {
    match work {
        Work::Resume(id) => Trigger::resume(&id),
        Work::Slot(s) => Trigger::schedule(s.slot, cron_of(role), s.missed, role.skip_unchanged()),
        Work::Inbox => Trigger::inbox(),
        Work::Watch(paths) => Trigger::watch(paths),
    }
}

/// The role's cron lines, as a scheduled run's trigger and record name them.
pub(super) fn cron_of(role: &Role) -> String {
    role.schedule
        .lines
        .iter()
        .map(|l| l.cron_exprs().collect::<Vec<_>>().join(" | "))
        .collect::<Vec<_>>()
        .join(" | ")
}

impl Daemon {
    /// Turns due scheduled slots into queued runs (or logged skips), recording them first.
    pub(super) fn schedule_due(&mut self, wall: DateTime<Utc>) {
        let set = self.run_env.roles.clone();
        let roles: Vec<&Role> = set
            .runnable()
            .filter(|r| self.role_may_run_here(r) && !r.schedule.is_empty())
            .collect();
        self.skip_paused_slots(&roles, wall);
        let plan = slots::plan(
            roles.iter().map(|role| {
                (
                    role.name.as_str(),
                    &role.schedule,
                    self.seen.state.roles.get(&role.name).and_then(|r| r.last_slot),
                    role.catch_up(),
                    role.settings.stale_after(),
                )
            }),
            wall,
        );
        let store = self.run_env.store.clone();
        let fail = self.run_env.faults.hit("ledger-write");
        let committed = plan.commit(|moves| {
            if fail {
                return Err(crate::base::vault::VaultError::Io(
                    "TABD_FAULTS: ledger-write".into(),
                ));
            }
            let moves = moves.to_vec();
            let fresh = store.update(move |s| {
                for (name, slot) in moves {
                    s.role(&name).last_slot = slot;
                }
                s.clone()
            })?;
            self.seen.state = fresh;
            Ok(())
        });
        let decisions = match committed {
            Ok(d) => d,
            Err(e) => {
                self.ledger_failed(&e.to_string());
                return;
            }
        };
        if self.seen.ledger_error.take().is_some() {
            tracing::info!("scheduled slots can be recorded again");
            self.apply(Input::ShownChanged);
        }
        for (name, decision) in decisions {
            if let Some(role) = roles.iter().find(|r| r.name == name) {
                self.queue_or_log(role, decision, wall);
            }
        }
    }

    /// The ledger could not be written: no slot runs (each would run again and again from the
    /// old ledger); said once, shown in status, tried again every tick.
    fn ledger_failed(&mut self, why: &str) {
        if self.seen.ledger_error.is_none() {
            let msg = format!(
                "cannot record scheduled runs in .tabd/state.json ({why}); scheduled runs wait until it can"
            );
            tracing::error!("{msg}");
            self.shown.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(self.run_env.clock.now(), "tabd", &msg),
            );
            self.apply(Input::ShownChanged);
        }
        self.seen.ledger_error = Some(why.to_string());
    }

    fn queue_or_log(&mut self, role: &Role, decision: SlotDecision, wall: DateTime<Utc>) {
        let tz = self.config().timezone;
        let fmt = |t: DateTime<Utc>| t.with_timezone(&tz).format("%H:%M").to_string();
        let log = self.run_env.log.clone();
        let writes = &self.shown.writes;
        let line =
            |text: String| writes.check("the daily note", log.write_line(wall, &role.display_name, &text));
        let mut due = Vec::new();
        match decision {
            SlotDecision::Nothing => {}
            SlotDecision::Run { slot, missed, late } => {
                if late {
                    let what = if missed > 1 {
                        format!("missed {missed} scheduled runs (the last due {})", fmt(slot))
                    } else {
                        format!("missed the {} run", fmt(slot))
                    };
                    line(format!(
                        "{what} while tabd was not running or the computer slept; running once now (catch_up: once)"
                    ));
                }
                due.push(SlotRun { slot, missed });
            }
            SlotDecision::RunEach { slots, dropped } => {
                line(format!(
                    "missed {} scheduled runs; running {} of them now, oldest first (catch_up: all){}",
                    slots.len() + dropped,
                    slots.len(),
                    if dropped > 0 {
                        format!(", {dropped} older ones skipped")
                    } else {
                        String::new()
                    }
                ));
                due.extend(slots.into_iter().map(|slot| SlotRun { slot, missed: 1 }));
            }
            SlotDecision::Skip {
                count,
                first,
                last,
                why,
            } => {
                let span = if count > 1 {
                    format!("{count} scheduled runs ({}–{})", fmt(first), fmt(last))
                } else {
                    format!("the {} run", fmt(last))
                };
                line(format!("skipped — missed {span}: {why}"));
                self.apply(Input::ShownChanged);
            }
        }
        let due = self.claim_slots(role, due);
        if !due.is_empty() {
            self.apply(Input::SlotsDue {
                role: role.name.clone(),
                slots: due,
            });
        }
    }
}

// The approvals pass in the daemon (docs/spec.md §15): one at a time, off the loop (a call may take a
// while), again at least every minute (expiry; polling mode) and at once on a file event.

/// The approvals pass going on (when the next is due is the core's: `timing`).
#[derive(Default)]
pub(super) struct ApprovalWork {
    pub(super) task: Option<tokio::task::JoinHandle<crate::doors::approval_pass::Pass>>,
}

impl Daemon {
    /// A call that was running when tabd stopped becomes `unknown`; then the first pass.
    pub(super) fn start_approvals(&mut self) {
        if let Ok(dir) = crate::base::vault::VaultPath::parse(&self.run_env.vault.layout().approvals(), false)
        {
            if let Err(e) = self.run_env.vault.create_dir_all(&dir) {
                tracing::warn!("cannot create {dir}/: {e}");
            }
        }
        let recovered = blocking::run(|| crate::doors::approval_pass::recover(&self.run_env));
        if recovered > 0 {
            tracing::warn!(
                "{recovered} approved call(s) were running when tabd stopped: marked unknown in their notes"
            );
        }
        self.refresh_watches();
        self.apply(Input::ApprovalsAsked);
    }

    /// Starts an approvals pass off the loop (the core said one is due and none is running).
    pub(super) fn start_approvals_pass(&mut self) {
        let env = self.run_env.clone();
        let shared = self.coordinator.as_ref().and_then(|c| c.shared.clone());
        self.work.approvals.task = Some(tokio::spawn(async move {
            crate::doors::approval_pass::pass(&env, shared.as_ref()).await
        }));
    }

    pub(super) fn on_approvals_pass(
        &mut self,
        pass: Result<crate::doors::approval_pass::Pass, tokio::task::JoinError>,
    ) {
        let (wall, now) = self.now();
        let passed = match pass {
            Ok(p) => Input::ApprovalsPassed {
                next: p.next.map(|at| core::mono_of(at, wall, now)),
                phases: Some(p.phases),
                // A decision of this pass (the core also sees one made elsewhere — `tabd
                // approve`/`reject`, a crash's leftovers finished — in the ledger's phases).
                decided: !p.ran.is_empty()
                    || !p.rejected.is_empty()
                    || !p.expired.is_empty()
                    || !p.finished.is_empty(),
            },
            Err(e) => {
                tracing::error!("approvals: the pass failed: {e}");
                Input::ApprovalsPassed {
                    next: None,
                    phases: None,
                    decided: false,
                }
            }
        };
        self.apply(passed);
        // With [cluster] key: what could not be handed over yet (the servers did not answer in
        // time) is tried again; what was is not sent twice.
        self.share_waiting();
    }
}
