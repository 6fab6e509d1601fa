//! Fault injection for the crash-safety tests: `TABD_FAULTS` lists points (comma-separated) at
//! which tabd aborts or fails on purpose, so a test can drive the real binary into the exact
//! state a crash leaves. Unset in normal use; nothing here runs unless a point is named.
//!
//! | point | what happens |
//! |---|---|
//! | `abort-after-commit` | a run aborts right after recording its outcome in state |
//! | `abort-after-log` | a run aborts after writing its logs, before moving notes |
//! | `panic-in-run` | a run panics (a bug in tabd while handling its notes) |
//! | `ledger-write` | recording scheduled slots in state fails |
//! | `undo-unsealed` | `tabd undo` cannot write its own journal's closing line |
//! | `keeper-misses-parent-death` | a child's keeper is not told when tabd dies (as one forked by a thread that has ended): it outlives a `kill -9`, for the test that the next start stops it |
//!
//! The durable steps of an approval (docs/spec.md §15), each an abort (`tests/crash_points.rs` kills
//! tabd at each and checks the call ran at most once and the note and `tabd approvals` are true):
//!
//! | point | tabd aborts when … | what the next start finds and does |
//! |---|---|---|
//! | `approval-marked` | the call's start is marked outside the vault, the ledger not yet `executing` | the mark is found over a request the ledger says never started (as after a restored ledger): `unknown`, not run again by itself |
//! | `approval-claimed` | the ledger says `executing`, the note still `approved` | nothing was sent; the note becomes `unknown` |
//! | `approval-note-executing` | the note says `executing`, before the call is sent | the same |
//! | `approval-call-returned` | the call came back, before its outcome is recorded | it ran; `unknown` (tabd cannot know) |
//! | `approval-recorded` | the ledger holds the outcome and what the note must say, the note still `executing` | the result is written into the note, the daily line once |
//! | `approval-daily-written` | a decision's daily line is written, before its note and the ledger's clear | the note is written; the daily line is not written again |
//! | `approval-unknown-recorded` | at start, the ledger says `unknown` for an interrupted call, before the note does | the note becomes `unknown`; never run again by itself |
//! | `approval-decided` | `tabd approve`/`tabd reject` recorded the decision, before the note and the output | the decision stands; the next command or pass writes the note |
//!
//! The durable steps of a run (same tests):
//!
//! | point | tabd aborts when … | what the next start finds and does |
//! |---|---|---|
//! | `journal-first-change` | a run's first change is in its undo journal, before the file is written | nothing changed, the note runs again (once); undo of the cut-off run restores nothing without `--force` |
//! | `run-note-moved` | a run with several notes is recorded and logged, one note moved to `processed/`, the others not | the others are moved; nothing runs or is logged twice |
//! | `suspend-unsaved` | a run that waits for the person is logged, its notes handled, before its record is saved | it cannot go on: the decision reaches the role's next run (never both) |
//! | `suspend-written` | a waiting run's record is saved | it goes on once the person decides: the call once, the second part once |
//! | `resume-marked` | a second part is marked as started (in the record and outside the vault), before anything is sent | it is not started again; the daily note says it was cut off |
//! | `day-crossed` | a run's response that crossed a daily budget is counted in the day (state), before the run ends or writes anything | its notes wait in the inbox, the day stays spent: nothing of that role runs until midnight, said once |
//! | `daily-splice-torn` | a run's section is half written over the daily note's `## Events` (their write recorded in `.tabd/splices/`) | the write is finished before anything reads the note: every section and event line there once |
//!
//! Two more test hooks, each its own variable: `TABD_TEST_CLOCK_OFFSET_FILE` (the daemon's wall
//! clock runs ahead by the seconds written in that file: a real clock jump) and
//! `TABD_TEST_EVENT_CAPACITY` (a tiny file-event queue, to make it overflow).

use crate::base::environment::Env;

#[derive(Debug, Clone, Default)]
pub struct Faults {
    points: Vec<String>,
}

impl Faults {
    pub fn from_env(env: &Env) -> Self {
        Self {
            points: env
                .get("TABD_FAULTS")
                .map(|v| v.split(',').map(|p| p.trim().to_string()).collect())
                .unwrap_or_default(),
        }
    }

    pub fn hit(&self, point: &str) -> bool {
        self.points.iter().any(|p| p == point)
    }

    /// Aborts the process (no unwinding, no cleanup: like `kill -9`) at `point` if asked.
    pub fn abort_at(&self, point: &str) {
        if self.hit(point) {
            eprintln!("TABD_FAULTS: aborting at {point}");
            std::process::abort();
        }
    }
}
