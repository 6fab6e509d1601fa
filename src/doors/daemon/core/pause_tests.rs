//! The person's pauses (`tabd pause`, docs/spec.md §28) as sequences of inputs to the core: what
//! holds stops, skips and waits; what ends runs again; each begin and end said once.

use chrono::{DateTime, Utc};

use super::tests::{limits, Sim};
use super::*;
use crate::records::state::pause::Target;

fn held(target: Target, since: &str) -> Held {
    Held {
        target,
        since: Some(since.parse::<DateTime<Utc>>().unwrap()),
        until: None,
        by: "laptop".into(),
        shared: false,
        unrecorded: None,
    }
}

fn paused(list: &[Held]) -> Paused {
    Paused(list.iter().map(|h| (h.target.clone(), h.clone())).collect())
}

fn role(r: &str) -> Target {
    Target::Role(r.into())
}

fn slot(sim: &Sim) -> SlotRun {
    SlotRun {
        slot: sim.wall,
        missed: 1,
    }
}

/// A paused role's slot is skipped as paused (never queued, so never caught up); another role's
/// slot runs; once the pause ends, the next slot runs again.
#[test]
fn a_paused_roles_slots_are_skipped_and_others_run() {
    let mut sim = Sim::new(&["risk", "ops"], limits());
    let risk = held(role("risk"), "2026-11-25T09:00:00Z");
    let said = sim.input(Input::Pauses(paused(std::slice::from_ref(&risk))));
    assert!(said.contains(&Effect::PauseBegan(risk.clone())), "{said:?}");
    let s = slot(&sim);
    let said = sim.input(Input::SlotsDue {
        role: "risk".into(),
        slots: vec![s.clone()],
    });
    assert_eq!(
        said,
        [Effect::SlotsPaused {
            role: "risk".into(),
            slots: vec![s.clone()]
        }]
    );
    sim.input(Input::SlotsDue {
        role: "ops".into(),
        slots: vec![s.clone()],
    });
    assert_eq!(
        sim.tick(),
        [("ops".to_string(), Work::Slot(s.clone()))],
        "only ops runs"
    );
    assert_eq!(
        sim.core.role("risk").unwrap().queued_slots(),
        0,
        "nothing kept to catch up"
    );
    let said = sim.input(Input::Pauses(Paused::default()));
    assert!(said.contains(&Effect::PauseEnded(risk)), "{said:?}");
    sim.input(Input::SlotsDue {
        role: "risk".into(),
        slots: vec![s.clone()],
    });
    assert_eq!(sim.tick(), [("risk".to_string(), Work::Slot(s))]);
}

/// A paused role's notes wait (no run, nothing taken); after the resume its inbox is looked at
/// again and the notes run.
#[test]
fn a_paused_roles_notes_wait_and_run_after_the_resume() {
    let mut sim = Sim::new(&["risk"], limits());
    sim.input(Input::Pauses(paused(&[held(
        role("risk"),
        "2026-11-25T09:00:00Z",
    )])));
    sim.notes_ready("risk", true);
    assert!(sim.tick().is_empty(), "held: nothing starts");
    assert!(sim.inbox.contains("risk"), "the notes were not taken");
    sim.input(Input::Pauses(Paused::default()));
    assert_eq!(
        sim.core.due_scans(false, sim.now),
        ["risk"],
        "its inbox gets a look"
    );
    sim.notes_ready("risk", true);
    assert_eq!(sim.tick(), [("risk".to_string(), Work::Inbox)]);
}

/// A pause that lands on a run going on stops it at its next step; its queued slot is skipped
/// and its watched change dropped; when the stopped run ends, nothing follows while it holds.
#[test]
fn a_pause_stops_the_run_going_on_and_drops_what_was_queued() {
    let mut sim = Sim::new(&["risk"], limits());
    sim.notes_ready("risk", true);
    assert_eq!(sim.tick().len(), 1);
    let s = slot(&sim);
    sim.input(Input::SlotsDue {
        role: "risk".into(),
        slots: vec![s.clone()],
    });
    sim.input(Input::WatchChanged {
        role: "risk".into(),
        path: "project/plan.md".into(),
    });
    let said = sim.input(Input::Pauses(paused(&[held(
        Target::All,
        "2026-11-25T09:00:00Z",
    )])));
    assert!(said.contains(&Effect::StopRun("risk".into())), "{said:?}");
    assert!(said.contains(&Effect::SlotsPaused {
        role: "risk".into(),
        slots: vec![s]
    }));
    assert_eq!(sim.core.role("risk").unwrap().watch_pending(), 0);
    sim.input(Input::WatchChanged {
        role: "risk".into(),
        path: "project/plan.md".into(),
    });
    assert_eq!(
        sim.core.role("risk").unwrap().watch_pending(),
        0,
        "dropped while held"
    );
    sim.finish("risk", Some(FailureClass::Stopped), 10);
    sim.notes_ready("risk", true);
    assert!(sim.tick().is_empty(), "nothing follows while held");
}

/// The same pauses read again say nothing; a pause ended and asked again (a new start) is an
/// end and a beginning; a decided run's second part waits for the resume like the rest.
#[test]
fn each_pause_is_said_once_and_a_decided_run_waits_for_the_resume() {
    let mut sim = Sim::new(&["risk"], limits());
    let first = held(Target::All, "2026-11-25T09:00:00Z");
    assert!(!sim
        .input(Input::Pauses(paused(std::slice::from_ref(&first))))
        .is_empty());
    assert!(sim
        .input(Input::Pauses(paused(std::slice::from_ref(&first))))
        .is_empty());
    let second = held(Target::All, "2026-11-25T10:00:00Z");
    let said = sim.input(Input::Pauses(paused(std::slice::from_ref(&second))));
    assert!(said.contains(&Effect::PauseEnded(first)) && said.contains(&Effect::PauseBegan(second)));
    sim.input(Input::Resumable {
        role: "risk".into(),
        run_id: "r1".into(),
    });
    assert!(sim.tick().is_empty(), "the second part waits");
    sim.input(Input::Pauses(Paused::default()));
    assert_eq!(sim.tick(), [("risk".to_string(), Work::Resume("r1".into()))]);
}
