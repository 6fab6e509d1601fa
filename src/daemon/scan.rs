//! Inbox scans: which notes are complete, which a run takes, notes tabd cannot read (reported
//! once), and attempt records of notes that are gone (dropped, so state holds only what exists).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tokio::time::Instant;

use super::core::Input;
use super::status::InboxView;
use super::Daemon;
use crate::inbox::{self, Candidate, Note};
use crate::role::Role;
use crate::vault::{Entry, OddEntry};

/// What the daemon keeps of a note between scans (valid while `modified` and `size` hold).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoteMeta {
    modified: SystemTime,
    size: u64,
    draft: bool,
    priority: inbox::Priority,
    /// Written by a person: no chain depth (roles' notes always carry `hops` ≥ 1).
    by_person: bool,
}

impl Daemon {
    pub(super) fn scan_inboxes(&mut self, now: Instant) {
        let all = std::mem::take(&mut self.rescan_all);
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
        let listed = crate::blocking::par_map(due, |(name, role)| {
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
            if self.inbox_view.get(&name) != Some(&view) {
                self.inbox_view.insert(name.clone(), view);
                self.status_dirty = true;
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
            self.unreadable.insert(name.clone(), names);
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
        // A set: the retains below look up every tracked path (a Vec made them quadratic).
        let mut existing = HashSet::new();
        for e in notes {
            let abs = root.join(e.path.as_path());
            existing.insert(abs.clone());
            view.notes += 1;
            let modified = e.modified.unwrap_or(SystemTime::UNIX_EPOCH);
            match self.core.note_complete(&abs, e.size, modified, now, wall) {
                Ok(()) => {
                    let meta = self.note_meta(&abs, e, modified);
                    if meta.draft {
                        view.drafts += 1;
                    } else {
                        view.ready += 1;
                        // A retry waits like anything else: only a person's new note is urgent.
                        let retried = self
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
        self.core.notes_left(&dir, &existing);
        self.notes
            .retain(|p, _| p.parent() != Some(dir.as_path()) || existing.contains(p));
        (view.ready > 0, recheck, view)
    }

    /// A note's draft status and priority, read once and kept while its mtime and size hold.
    fn note_meta(&mut self, abs: &Path, e: &Entry, modified: SystemTime) -> NoteMeta {
        if let Some(meta) = self.notes.get(abs) {
            if meta.modified == modified && meta.size == e.size {
                return *meta;
            }
        }
        let (draft, priority, by_person) = inbox::read_note(&self.run_env.vault, &e.path)
            .map(|n| (n.draft, n.priority, n.hops == 0 && !n.hops_unknown))
            .unwrap_or((false, inbox::Priority::Normal, false));
        let meta = NoteMeta {
            modified,
            size: e.size,
            draft,
            priority,
            by_person,
        };
        self.notes.insert(abs.to_path_buf(), meta);
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
            if !meta.draft {
                candidates.push(Candidate {
                    path: e.path.clone(),
                    priority: meta.priority,
                    modified,
                });
            }
        }
        inbox::select(candidates, self.config().inbox.max_batch)
            .into_iter()
            .filter_map(|p| inbox::read_note(&self.run_env.vault, &p).ok())
            .collect()
    }

    /// Says once in the daily log (and in status) which inbox entries tabd cannot read; forgets
    /// the ones that are gone, so a new one under the same name is reported again.
    fn report_unreadable(&mut self, found: Vec<(&Role, Vec<OddEntry>)>) {
        let mut new_lines = Vec::new();
        let mut updates = Vec::new();
        for (role, odd) in found {
            let names: BTreeSet<String> = odd.iter().map(|o| o.name.clone()).collect();
            let reported = self
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
            self.writes
                .check("the daily note", self.run_env.log.write_line(now, &who, &line));
        }
        self.writes.check(
            "the state",
            self.run_env.store.update(move |s| {
                for (role, names) in updates {
                    s.role(&role).unreadable_reported = names;
                }
            }),
        );
        self.status_dirty = true;
    }

    /// Drops attempt records of notes that no longer exist (deleted by a person, moved away):
    /// state holds only what exists, and a later note with the same name starts from zero.
    fn forget_gone_notes(&mut self, present: Vec<(String, BTreeSet<String>)>) {
        let stale: Vec<(String, Vec<String>)> = present
            .into_iter()
            .filter_map(|(role, notes)| {
                let gone: Vec<String> = self
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
        self.writes.check(
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
