//! The timing rules (`timing.rs`) as the sequences a daemon lives through, with an instant that
//! moves only when the test says so. Each fails when its one rule is changed.

use super::tests::{clocks, limits, Sim, S};
use super::*;

const MS: fn(u64) -> Duration = Duration::from_millis;

fn has(effects: &[Effect], e: &Effect) -> bool {
    effects.contains(e)
}

fn quiet_sim() -> Sim {
    let mut sim = Sim::new(&["delivery"], limits());
    // Pages that never go back within these scenarios, so their effects are only the rule's.
    sim.core = Core::new(
        (MS(300), S(60)),
        &Clocks {
            quiet: S(24 * 3600),
            ..clocks(sim.now)
        },
    );
    sim
}

#[test]
fn an_edit_reloads_once_the_edits_pause_for_the_debounce() {
    let mut sim = quiet_sim();
    sim.input(Input::Edited);
    assert!(
        sim.core
            .wakes(sim.now, |_| None)
            .contains(&Some(sim.now + MS(250))),
        "the daemon wakes when the debounce ends"
    );
    sim.later(MS(100));
    assert!(!has(&sim.wake(false, false), &Effect::Reload), "still editing");
    sim.input(Input::Edited); // a second save, 100 ms after the first
    sim.later(MS(200));
    assert!(
        !has(&sim.wake(false, false), &Effect::Reload),
        "250 ms after the first save but not after the second: the wait starts again"
    );
    sim.later(MS(50));
    assert_eq!(sim.wake(false, false), [Effect::Reload]);
    sim.later(S(1));
    assert!(sim.wake(false, false).is_empty(), "one reload for the burst");
    // SIGHUP reloads at once.
    assert_eq!(sim.input(Input::ReloadAsked), [Effect::Reload]);
}

#[test]
fn the_approvals_pass_runs_when_asked_one_at_a_time_and_at_least_each_minute() {
    let mut sim = quiet_sim();
    let none = Shown::default;
    assert!(sim.ticked(none()).is_empty(), "nothing asked for yet");
    assert_eq!(sim.input(Input::ApprovalsAsked), [Effect::StatusChanged]);
    assert_eq!(sim.ticked(none()), [Effect::StartApprovals]);
    sim.input(Input::ApprovalsAsked); // a decision written while the pass goes on
    assert!(sim.ticked(none()).is_empty(), "one pass at a time");
    assert!(
        !sim.core.wakes(sim.now, |_| None).contains(&Some(sim.now)),
        "no waking again and again while it goes on: its end wakes the loop"
    );
    let passed = |phases, decided, next| Input::ApprovalsPassed {
        next,
        phases,
        decided,
    };
    assert_eq!(
        sim.input(passed(Some(7), false, None)),
        [Effect::StatusChanged, Effect::QueueResumes],
        "the ledger's phases seen for the first time"
    );
    assert_eq!(
        sim.ticked(none()),
        [Effect::StartApprovals],
        "the ask made meanwhile runs as soon as the pass ended"
    );
    assert!(
        sim.input(passed(Some(7), false, None)).is_empty(),
        "nothing decided, nothing changed in the ledger"
    );
    sim.later(S(59));
    assert!(sim.ticked(none()).is_empty());
    sim.later(S(1));
    assert_eq!(
        sim.ticked(none()),
        [Effect::StartApprovals],
        "each minute without events"
    );
    let soon = sim.now + S(10);
    assert_eq!(
        sim.input(passed(Some(8), false, Some(soon))),
        [Effect::StatusChanged, Effect::QueueResumes],
        "decided elsewhere (tabd approve): the phases changed"
    );
    sim.later(S(10));
    assert_eq!(
        sim.ticked(none()),
        [Effect::StartApprovals],
        "an expiry is looked at when due"
    );
    assert_eq!(
        sim.input(passed(Some(8), true, None)),
        [Effect::StatusChanged, Effect::QueueResumes],
        "decided by the pass itself"
    );
    sim.ticked(none());
    assert!(
        sim.input(passed(None, true, None)).is_empty(),
        "a pass that failed decided nothing"
    );
    sim.later(S(60));
    assert_eq!(
        sim.ticked(none()),
        [Effect::StartApprovals],
        "and the next comes anyway"
    );
}

#[test]
fn the_minutes_safety_rescan_lists_every_inbox_and_watches_the_folders_again() {
    let mut sim = quiet_sim();
    sim.later(S(59));
    assert!(sim.wake(false, false).is_empty());
    sim.later(S(1));
    let rescan = [Effect::Rescan(Rescan::Routine), Effect::RefreshWatches];
    assert_eq!(sim.wake(false, false), rescan, "a minute without events");
    sim.later(S(1));
    assert_eq!(
        sim.ticked(Shown::default()),
        [Effect::ReleasePages],
        "what the rescan touched goes back a second later"
    );
    sim.later(S(58));
    assert!(sim.wake(false, false).is_empty());
    sim.later(S(1));
    assert_eq!(sim.wake(false, false), rescan, "and again each minute");
}

#[test]
fn a_wall_clock_jump_rescans_once_and_says_by_how_much() {
    let mut sim = quiet_sim();
    sim.later(S(5));
    assert!(sim.wake(false, false).is_empty(), "both clocks moved alike");
    // A suspend: the wall clock moved an hour, the monotonic one did not.
    sim.wall += chrono::Duration::hours(1);
    assert_eq!(
        sim.wake(false, false),
        [Effect::Rescan(Rescan::ClockJumped(chrono::Duration::hours(1)))]
    );
    sim.later(S(1));
    assert!(sim.wake(false, false).is_empty(), "the jump is said once");
    sim.wall -= chrono::Duration::seconds(60);
    assert_eq!(
        sim.wake(false, false),
        [Effect::Rescan(Rescan::ClockJumped(chrono::Duration::seconds(
            -60
        )))],
        "a step back too"
    );
}

#[test]
fn lost_events_and_polling_list_every_inbox_and_polling_wakes_every_two_seconds() {
    let mut sim = quiet_sim();
    assert_eq!(sim.wake(true, false), [Effect::Rescan(Rescan::EventsLost)]);
    assert!(sim.wake(false, false).is_empty());
    let poll = Some(sim.now + timing::POLL);
    assert!(!sim.core.wakes(sim.now, |_| None).contains(&poll));
    assert_eq!(sim.wake(false, true), [Effect::Rescan(Rescan::Routine)]);
    assert!(
        sim.core.wakes(sim.now, |_| None).contains(&poll),
        "polling: the next look in two seconds"
    );
    assert_eq!(
        sim.wake(false, true),
        [Effect::Rescan(Rescan::Routine)],
        "each tick"
    );
}

#[test]
fn role_file_errors_reach_the_daily_note_once_the_person_stops_editing() {
    let mut sim = quiet_sim();
    let broken = |sim: &mut Sim, changed: bool| {
        sim.input(Input::Roles {
            names: vec!["delivery".into()],
            rescheduled: vec![],
            broken_changed: changed,
        })
    };
    broken(&mut sim, true);
    sim.later(S(30));
    assert!(!has(&sim.wake(false, false), &Effect::LogRoleErrors));
    broken(&mut sim, true); // saved again, still broken differently
    sim.later(S(59));
    assert!(
        !has(&sim.wake(false, false), &Effect::LogRoleErrors),
        "a minute after the first save, not after the last"
    );
    sim.later(S(1));
    assert!(has(&sim.wake(false, false), &Effect::LogRoleErrors));
    sim.later(S(60));
    assert!(!has(&sim.wake(false, false), &Effect::LogRoleErrors), "once");
    broken(&mut sim, false);
    sim.later(S(120));
    assert!(
        !has(&sim.wake(false, false), &Effect::LogRoleErrors),
        "a reload that changed no error writes nothing"
    );
}

#[test]
fn the_watchdog_is_fed_every_half_period_and_never_without_one() {
    let mut sim = quiet_sim();
    sim.core = Core::new(
        (MS(300), S(60)),
        &Clocks {
            watchdog: Some(S(20)),
            quiet: S(24 * 3600),
            ..clocks(sim.now)
        },
    );
    sim.later(S(9));
    assert!(sim.wake(false, false).is_empty());
    sim.later(S(1));
    assert_eq!(sim.wake(false, false), [Effect::Watchdog]);
    sim.later(S(9));
    assert!(sim.wake(false, false).is_empty(), "not at every tick");
    sim.later(S(1));
    assert_eq!(sim.wake(false, false), [Effect::Watchdog]);
    let mut without = quiet_sim();
    without.later(S(30));
    assert!(without.wake(false, false).is_empty());
}

#[test]
fn program_pages_go_back_once_quiet_and_never_while_a_run_or_the_approvals_pass_goes_on() {
    let mut sim = Sim::new(&["delivery"], limits()); // ten seconds of quiet
    let none = Shown::default;
    sim.later(S(9));
    assert!(sim.ticked(none()).is_empty());
    sim.later(S(1));
    assert_eq!(sim.ticked(none()), [Effect::ReleasePages]);
    sim.later(S(20));
    assert!(sim.ticked(none()).is_empty(), "once, until something runs");
    // A run starts (the roles' reload made the daemon busy too) and goes on past the quiet time.
    sim.input(Input::Roles {
        names: vec!["delivery".into()],
        rescheduled: vec![],
        broken_changed: false,
    });
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick().len(), 1);
    sim.later(S(10));
    assert!(sim.ticked(none()).is_empty(), "not while a run goes on");
    sim.finish("delivery", None, 100);
    sim.later(S(9));
    assert!(sim.ticked(none()).is_empty(), "quiet counts from the run's end");
    sim.later(S(1));
    assert_eq!(sim.ticked(none()), [Effect::ReleasePages]);
    // The approvals pass holds them too.
    sim.finish("delivery", None, 100);
    sim.input(Input::ApprovalsAsked);
    assert_eq!(sim.ticked(none()), [Effect::StartApprovals]);
    sim.later(S(10));
    assert!(sim.ticked(none()).is_empty(), "not while the pass goes on");
    sim.input(Input::ApprovalsPassed {
        next: None,
        phases: None,
        decided: false,
    });
    sim.later(S(10));
    assert_eq!(sim.ticked(none()), [Effect::ReleasePages]);
}

#[test]
fn a_failing_write_or_an_mcp_servers_change_is_shown_once() {
    let mut sim = quiet_sim();
    let shown = |failed_writes, down: Option<&str>| Shown {
        failed_writes,
        mcp_servers: vec![("git".into(), down.is_none(), down.map(str::to_string))],
    };
    assert_eq!(
        sim.ticked(shown(0, None)),
        [Effect::StatusChanged],
        "the first look"
    );
    assert!(sim.ticked(shown(0, None)).is_empty());
    assert_eq!(
        sim.ticked(shown(1, None)),
        [Effect::StatusChanged],
        "a write failed"
    );
    assert!(sim.ticked(shown(1, None)).is_empty(), "shown once");
    assert_eq!(
        sim.ticked(shown(1, Some("exited 1"))),
        [Effect::StatusChanged],
        "a server went down"
    );
    assert!(sim.ticked(shown(1, Some("exited 1"))).is_empty());
}
