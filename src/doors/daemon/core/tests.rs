//! The daemon's scenarios as sequences of inputs to the core: what an end-to-end test would
//! drive with files, a fake model and real seconds, here in microseconds with an instant that
//! moves only when the test says so. The shell's part (listing, locks, spawning) is played by
//! `Sim`, through the same `drive` that carries the daemon's effects out.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::records::limits::RoleLimits;

pub(super) const S: fn(u64) -> Duration = Duration::from_secs;

/// The shell, played by the test: a clock it moves, the roles' limits and use, locks other
/// processes hold, the notes a run would be handed.
pub(super) struct Sim {
    pub(super) core: Core,
    pub(super) now: Instant,
    pub(super) wall: DateTime<Utc>,
    pub(super) limits: Limits,
    pub(super) role_limits: BTreeMap<String, RoleLimits>,
    pub(super) today: BTreeMap<String, DayUsage>,
    pub(super) all_today: DayUsage,
    /// Roles `tabd fire` is running (their run lock is held elsewhere).
    pub(super) held_elsewhere: BTreeSet<String>,
    /// Roles not meant for this host (or disabled).
    pub(super) not_here: BTreeSet<String>,
    /// Roles whose notes were moved away by someone before their run started.
    pub(super) notes_gone: BTreeSet<String>,
    /// Roles with complete notes in their inbox (what the last scan found): a run takes them.
    pub(super) inbox: BTreeSet<String>,
    /// Every effect, in the order it was carried out.
    pub(super) said: Vec<Effect>,
}

pub(super) fn limits() -> Limits {
    Limits {
        max_concurrent_runs: 2,
        min_interval: Duration::ZERO,
        ..Limits::default()
    }
}

impl Sim {
    pub(super) fn new(roles: &[&str], limits: Limits) -> Self {
        let now = Instant::now();
        let mut sim = Self {
            core: Core::new((Duration::from_millis(300), S(60)), &clocks(now)),
            now,
            wall: "2026-11-25T09:00:00Z".parse().unwrap(),
            role_limits: BTreeMap::new(),
            limits,
            today: BTreeMap::new(),
            all_today: DayUsage::default(),
            held_elsewhere: BTreeSet::new(),
            not_here: BTreeSet::new(),
            notes_gone: BTreeSet::new(),
            inbox: BTreeSet::new(),
            said: Vec::new(),
        };
        for r in roles {
            let l = sim.limits.clone();
            sim.role_limits.insert(r.to_string(), role_limits(&l));
        }
        let names = roles.iter().map(|r| r.to_string()).collect();
        sim.input(Input::Roles {
            names,
            rescheduled: vec![],
            broken_changed: false,
        });
        sim
    }

    pub(super) fn later(&mut self, d: Duration) {
        self.now += d;
        self.wall += chrono::Duration::from_std(d).unwrap();
    }

    /// Feeds `input` through `drive`; the effects carried out for it (and for what they gave
    /// back), in order.
    pub(super) fn input(&mut self, input: Input) -> Vec<Effect> {
        let from = self.said.len();
        drive(self, input);
        self.said[from..].to_vec()
    }

    /// A scan found complete notes in `role`'s inbox (`by_person`: one a person wrote).
    pub(super) fn notes_ready(&mut self, role: &str, by_person: bool) {
        self.inbox.insert(role.to_string());
        self.input(Input::Scanned {
            role: role.into(),
            ready: true,
            by_person,
            recheck_at: None,
        });
    }

    /// A scan found the inbox empty.
    pub(super) fn inbox_empty(&mut self, role: &str) {
        self.inbox.remove(role);
        self.input(Input::Scanned {
            role: role.into(),
            ready: false,
            by_person: false,
            recheck_at: None,
        });
    }

    /// One dispatch, with every `Start` answered as the shell answers it. Returns what started.
    pub(super) fn tick(&mut self) -> Vec<(String, Work)> {
        let roles = self
            .role_limits
            .iter()
            .map(|(name, limits)| RoleView {
                name: name.clone(),
                may_run: !self.not_here.contains(name),
                limits: limits.clone(),
                today: self.today.get(name).copied().unwrap_or_default(),
            })
            .collect();
        let dispatch = Input::Dispatch {
            roles,
            limits: self.limits.clone(),
            all_today: self.all_today,
        };
        self.input(dispatch)
            .into_iter()
            .filter_map(|e| match e {
                Effect::Spawn { role, work } => Some((role, work)),
                _ => None,
            })
            .collect()
    }

    pub(super) fn finish(&mut self, role: &str, failure: Option<FailureClass>, tokens: u64) -> Vec<Effect> {
        self.input(Input::Finished {
            role: role.into(),
            failure: failure.map(|f| (f, "why".to_string())),
            tokens,
            notes: vec![],
            day_spent: vec![],
        })
    }

    /// The shell wakes: the clocks as they are, events lost or not, polling or not.
    pub(super) fn wake(&mut self, events_lost: bool, polling: bool) -> Vec<Effect> {
        let seen = Observed {
            wall: self.wall,
            events_lost,
            polling,
        };
        self.input(Input::Tick(seen))
    }

    /// The tick's work is done; status counts `shown`.
    pub(super) fn ticked(&mut self, shown: Shown) -> Vec<Effect> {
        self.input(Input::Ticked(shown))
    }

    pub(super) fn running(&self, role: &str) -> bool {
        self.core.role(role).is_some_and(|r| r.running())
    }
}

/// The clocks a `Sim` starts with: no watchdog, ten seconds of quiet.
pub(super) fn clocks(now: Instant) -> Clocks {
    Clocks {
        wall: "2026-11-25T09:00:00Z".parse().unwrap(),
        now,
        watchdog: None,
        quiet: S(10),
    }
}

impl Shell for Sim {
    fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    fn instant(&self) -> Instant {
        self.now
    }

    /// Records each effect; answers a `Start` as the daemon does: the lock is held by `tabd
    /// fire`, or taken with the notes the inbox holds (none for a resumed run).
    fn carry_out(&mut self, effect: Effect) -> Vec<Input> {
        self.said.push(effect.clone());
        let Effect::Start(role) = effect else {
            return Vec::new();
        };
        if self.held_elsewhere.contains(&role) {
            return vec![Input::LockBusy { role }];
        }
        let resuming = self.core.role(&role).is_some_and(|r| r.resuming());
        let gone = self.notes_gone.contains(&role);
        let notes = if resuming || gone || !self.inbox.remove(&role) {
            vec![]
        } else {
            vec![PathBuf::from(format!("/v/agent/inbox/{role}/n.md"))]
        };
        vec![Input::LockTaken {
            role,
            notes,
            wall: self.wall,
        }]
    }
}

fn role_limits(l: &Limits) -> RoleLimits {
    RoleLimits {
        max_tool_calls: l.max_tool_calls,
        max_tokens_per_run: l.max_tokens_per_run,
        max_cost_usd: None,
        daily_token_budget: l.daily_token_budget,
        daily_cost_budget_usd: None,
        max_runs_per_day: l.max_runs_per_day,
        min_interval: l.min_interval,
        max_chain_depth: l.max_chain_depth,
        run_deadline: l.run_deadline,
    }
}

fn started(role: &str, work: Work) -> Vec<(String, Work)> {
    vec![(role.to_string(), work)]
}

#[test]
fn notes_arriving_during_a_run_get_exactly_one_follow_up_run() {
    let mut sim = Sim::new(&["delivery"], limits());
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
    // Three notes land while it runs: events mark the inbox, scans see them, nothing starts.
    for n in ["a", "b", "c"] {
        let event = FsEvent::Written(PathBuf::from(format!("/v/agent/inbox/delivery/{n}.md")));
        sim.input(Input::InboxEvent {
            event,
            owners: vec!["delivery".into()],
        });
        sim.notes_ready("delivery", true);
        assert!(sim.tick().is_empty(), "never two runs of one role at once");
    }
    sim.finish("delivery", None, 100);
    assert_eq!(
        sim.core.due_scans(false, sim.now),
        ["delivery"],
        "a finished run's inbox gets a look"
    );
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox), "one follow-up run");
    sim.finish("delivery", None, 100);
    sim.inbox_empty("delivery");
    assert!(sim.tick().is_empty(), "and no more");
    assert!(sim.core.due_scans(false, sim.now).is_empty());
}

#[test]
fn min_interval_holds_back_what_a_loop_causes_never_a_persons_note() {
    let mut sim = Sim::new(
        &["delivery"],
        Limits {
            min_interval: S(3600),
            ..limits()
        },
    );
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick().len(), 1);
    sim.finish("delivery", None, 100);
    sim.later(S(1));
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick().len(), 1, "a person's second note runs at once");
    sim.finish("delivery", None, 100);
    let last_end = sim.now;
    sim.later(S(1));
    sim.notes_ready("delivery", false); // another role's note (hops ≥ 1), or a retry
    assert!(sim.tick().is_empty(), "a chained note waits");
    let limits = sim.role_limits["delivery"].clone();
    let (until, why) = sim
        .core
        .role("delivery")
        .unwrap()
        .waiting(&limits, sim.now)
        .unwrap();
    assert_eq!(until, last_end + S(3600));
    assert!(why.contains("min_interval 1h"), "{why}");
    assert!(
        sim.core.wakes(sim.now, |_| Some(S(3600))).contains(&Some(until)),
        "the daemon wakes when it may run"
    );
    sim.later(S(3598));
    assert!(sim.tick().is_empty());
    sim.later(S(1));
    assert_eq!(sim.tick().len(), 1, "it runs once the interval has passed");
}

/// Issue 48, item 5: `every 1 min` with min_interval 2m runs every two minutes; what status
/// shows as the next fire is the later of the next slot and what min_interval allows, from the
/// end of the last run (at the earliest, while a run goes on), with nothing queued yet too.
#[test]
fn min_interval_holds_the_next_scheduled_run_and_says_until_when() {
    let mut sim = Sim::new(
        &["ticker"],
        Limits {
            min_interval: S(120),
            ..limits()
        },
    );
    let held = |sim: &Sim| sim.core.role("ticker").unwrap().schedule_held(S(120), sim.now);
    assert_eq!(held(&sim), None, "no run yet: nothing holds it");
    let slot = SlotRun {
        slot: sim.wall,
        missed: 1,
    };
    sim.input(Input::SlotsDue {
        role: "ticker".into(),
        slots: vec![slot],
    });
    assert_eq!(sim.tick().len(), 1);
    let (until, why) = held(&sim).unwrap();
    assert_eq!(until, sim.now + S(120));
    assert!(
        why.contains("at the earliest") && why.contains("min_interval 2m"),
        "{why}"
    );
    sim.later(S(30));
    sim.finish("ticker", None, 100);
    let ended = sim.now;
    sim.later(S(5));
    let (until, why) = held(&sim).unwrap();
    assert_eq!(until, ended + S(120), "from the end of the last run");
    assert_eq!(why, "held back by min_interval 2m since its last run");
    sim.later(S(115));
    assert_eq!(held(&sim), None, "the interval is over");
}

#[test]
fn an_outage_pauses_every_role_until_the_pause_ends_a_config_change_or_a_good_run() {
    let mut sim = Sim::new(&["delivery", "risk"], limits());
    sim.notes_ready("delivery", true);
    sim.tick();
    let effects = sim.finish("delivery", Some(FailureClass::Outage), 0);
    assert!(
        matches!(&effects[0], Effect::Paused { until, .. } if *until == sim.now + PAUSE),
        "{effects:?}"
    );
    assert_eq!(sim.core.paused(), Some("why"));
    sim.notes_ready("delivery", true);
    sim.notes_ready("risk", true);
    assert!(sim.tick().is_empty(), "no model call while paused");
    sim.later(PAUSE - S(1));
    assert!(sim.tick().is_empty());
    sim.later(S(1));
    assert_eq!(sim.tick().len(), 2, "both go on when the pause ends");
    assert!(sim.said.contains(&Effect::Unpaused));

    // A config change ends a pause at once.
    sim.finish("delivery", Some(FailureClass::Outage), 0);
    sim.finish("risk", Some(FailureClass::Outage), 0);
    sim.notes_ready("risk", true);
    assert!(sim.tick().is_empty());
    let effects = sim.input(Input::Config {
        settle: (Duration::from_millis(300), S(60)),
    });
    assert_eq!(effects[0], Effect::Unpaused);
    assert_eq!(sim.tick(), started("risk", Work::Inbox));
    // An outage's run spent nothing: min_interval does not hold the retry back.
    assert_eq!(sim.core.role("delivery").unwrap().interval_end(S(3600)), None);
    // A good run ends a pause another role's outage began.
    sim.finish("delivery", Some(FailureClass::Outage), 0);
    let effects = sim.finish("risk", None, 100);
    assert!(effects.contains(&Effect::Unpaused), "{effects:?}");
    assert_eq!(sim.core.paused(), None);
}

#[test]
fn a_role_tabd_fire_holds_waits_and_runs_once_the_lock_is_free() {
    let mut sim = Sim::new(&["delivery"], limits());
    sim.held_elsewhere.insert("delivery".into());
    sim.notes_ready("delivery", true);
    assert!(sim.tick().is_empty(), "the lock is held: nothing starts");
    assert!(sim.said.contains(&Effect::StatusChanged), "status says it waits");
    let r = sim.core.role("delivery").unwrap();
    assert!(r.busy_elsewhere() && !r.running());
    let limits = sim.role_limits["delivery"].clone();
    let (until, why) = r.waiting(&limits, sim.now).unwrap();
    assert_eq!(until, sim.now + BUSY_RETRY);
    assert!(why.contains("tabd fire"), "{why}");
    sim.said.clear();
    assert!(sim.tick().is_empty(), "no retry before the retry time");
    assert!(sim.said.is_empty(), "and no lock taken either");
    sim.held_elsewhere.clear();
    sim.later(BUSY_RETRY);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
    assert!(!sim.core.role("delivery").unwrap().busy_elsewhere());
}

#[test]
fn daily_limits_stop_a_role_once_and_say_what_it_stopped() {
    let mut sim = Sim::new(
        &["delivery", "risk"],
        Limits {
            max_runs_per_day: 1,
            ..limits()
        },
    );
    sim.today.insert(
        "delivery".into(),
        DayUsage {
            runs: 1,
            ..DayUsage::default()
        },
    );
    sim.notes_ready("delivery", true);
    sim.input(Input::WatchChanged {
        role: "delivery".into(),
        path: "plan.md".into(),
    });
    sim.notes_ready("risk", true);
    assert_eq!(sim.tick(), started("risk", Work::Inbox), "the other role runs");
    let stop = Effect::StopForToday {
        role: "delivery".into(),
        stop: DailyStop::RunsPerDay,
        skipped: Some(TriggerKind::Inbox),
    };
    assert!(sim.said.contains(&stop), "{:?}", sim.said);
    assert!(
        !sim.core.role("delivery").unwrap().has_work(),
        "its work is dropped"
    );
    sim.said.clear();
    assert!(sim.tick().is_empty());
    assert!(
        !sim.said.iter().any(|e| matches!(e, Effect::StopForToday { .. })),
        "said once, not every tick"
    );
    // Everyone's budget stops every role.
    sim.finish("risk", None, 100);
    sim.all_today.tokens = sim.limits.global_daily_token_budget;
    sim.notes_ready("risk", true);
    assert!(sim.tick().is_empty());
    assert!(sim.said.contains(&Effect::StopForToday {
        role: "risk".into(),
        stop: DailyStop::GlobalTokenBudget,
        skipped: Some(TriggerKind::Inbox),
    }));
}

/// Issue 49, item 2: a run that found a day spent as it ended (its own, crossed between two of
/// its steps, or a role it delegated to) stops that role for today at once: the work queued
/// while it ran — a note, a slot — is dropped (the notes wait for midnight), and the shell is
/// told (`skipped: None`: the run's own record says so; no skip is logged for it). The next
/// dispatch finds the day spent too and says which work it held back; telling the person once
/// across both is the shell's, in state (`effects::tell_stopped`).
#[test]
fn a_run_that_crossed_a_daily_budget_stops_its_roles_at_once() {
    let mut sim = Sim::new(&["delivery", "risk"], limits());
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
    sim.notes_ready("delivery", true);
    sim.input(Input::SlotsDue {
        role: "delivery".into(),
        slots: vec![SlotRun {
            slot: sim.wall,
            missed: 1,
        }],
    });
    sim.input(Input::SlotsDue {
        role: "risk".into(),
        slots: vec![SlotRun {
            slot: sim.wall,
            missed: 1,
        }],
    });
    let said = sim.input(Input::Finished {
        role: "delivery".into(),
        failure: None,
        tokens: 25_000,
        notes: vec![],
        day_spent: vec![
            ("delivery".into(), DailyStop::TokenBudget),
            ("risk".into(), DailyStop::CostBudget),
        ],
    });
    for (role, stop) in [
        ("delivery", DailyStop::TokenBudget),
        ("risk", DailyStop::CostBudget),
    ] {
        assert!(
            said.contains(&Effect::StopForToday {
                role: role.into(),
                stop,
                skipped: None,
            }),
            "{said:?}"
        );
        assert!(
            !sim.core.role(role).unwrap().has_work(),
            "{role}'s queued work is dropped"
        );
    }
    assert!(sim.tick().is_empty(), "nothing queued runs today");
    // The state the next dispatch reads has the day spent: a note that comes later is held back,
    // and the shell is told what it would have started.
    sim.today.insert(
        "delivery".into(),
        DayUsage {
            tokens: sim.limits.daily_token_budget,
            ..DayUsage::default()
        },
    );
    sim.notes_ready("delivery", true);
    sim.said.clear();
    assert!(sim.tick().is_empty());
    assert_eq!(
        sim.said,
        [
            Effect::StopForToday {
                role: "delivery".into(),
                stop: DailyStop::TokenBudget,
                skipped: Some(TriggerKind::Inbox),
            },
            Effect::StatusChanged,
        ]
    );
    // After midnight the day is empty again: the waiting note runs.
    sim.today.clear();
    sim.notes_ready("delivery", true);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
}

#[test]
fn at_most_max_concurrent_runs_and_the_next_starts_when_one_ends() {
    let mut sim = Sim::new(&["a", "b", "c"], limits());
    for r in ["a", "b", "c"] {
        sim.notes_ready(r, true);
    }
    let first: Vec<String> = sim.tick().into_iter().map(|s| s.0).collect();
    assert_eq!(first, ["a", "b"]);
    assert!(sim.tick().is_empty(), "two run, the third waits");
    sim.finish("b", None, 100);
    assert_eq!(sim.tick(), started("c", Work::Inbox));
    assert!(sim.running("a") && sim.running("c") && !sim.running("b"));
}

#[test]
fn work_goes_first_to_a_decided_resume_then_slots_then_notes_then_watched_files() {
    let mut sim = Sim::new(
        &["delivery"],
        Limits {
            min_interval: S(3600),
            ..limits()
        },
    );
    sim.notes_ready("delivery", true);
    sim.tick();
    sim.finish("delivery", None, 100);
    let slot = SlotRun {
        slot: sim.wall,
        missed: 1,
    };
    sim.input(Input::SlotsDue {
        role: "delivery".into(),
        slots: vec![slot.clone()],
    });
    sim.input(Input::WatchChanged {
        role: "delivery".into(),
        path: "plan.md".into(),
    });
    sim.input(Input::WatchChanged {
        role: "delivery".into(),
        path: "plan.md".into(),
    });
    let effects = sim.input(Input::Resumable {
        role: "delivery".into(),
        run_id: "run-1".into(),
    });
    assert_eq!(effects, [Effect::StatusChanged]);
    assert!(
        sim.input(Input::Resumable {
            role: "delivery".into(),
            run_id: "run-1".into()
        })
        .is_empty(),
        "queued once"
    );
    assert_eq!(
        sim.tick(),
        started("delivery", Work::Resume("run-1".into())),
        "the person's decision is never held back by min_interval"
    );
    assert!(
        sim.input(Input::Resumable {
            role: "delivery".into(),
            run_id: "run-1".into()
        })
        .is_empty(),
        "not queued again while it runs (the approvals pass sees the decision again)"
    );
    sim.finish("delivery", None, 100);
    sim.later(S(3600));
    assert_eq!(
        sim.tick(),
        started("delivery", Work::Slot(slot)),
        "the slot takes the waiting notes and watch along"
    );
    sim.finish("delivery", None, 100);
    sim.later(S(3600));
    assert!(
        sim.tick().is_empty(),
        "nothing left: the watched file went with the slot's run"
    );
}

/// A second part that waits again (an approval, a checkpoint) and is decided at once: the
/// decision comes while that part still runs, when it cannot queue it. When the part ends the
/// decisions are looked at again (`QueueResumes`), so it goes on; a run that was no second part
/// asks for no such look.
#[test]
fn a_second_part_decided_again_while_it_ran_is_looked_at_when_it_ends() {
    let mut sim = Sim::new(&["ops"], limits());
    let run = |id: &str| Input::Resumable {
        role: "ops".into(),
        run_id: id.into(),
    };
    sim.input(run("run-1"));
    assert_eq!(sim.tick(), started("ops", Work::Resume("run-1".into())));
    assert!(
        sim.input(run("run-1")).is_empty(),
        "decided while it runs: not queued now"
    );
    assert!(
        sim.finish("ops", None, 100).contains(&Effect::QueueResumes),
        "its decisions are looked at again"
    );
    assert_eq!(sim.input(run("run-1")), [Effect::StatusChanged], "queued now");
    assert_eq!(
        sim.tick(),
        started("ops", Work::Resume("run-1".into())),
        "and it goes on"
    );
    sim.finish("ops", None, 100);
    sim.later(S(3600));
    assert!(sim.tick().is_empty(), "nothing decided again: nothing starts");
    sim.notes_ready("ops", true);
    sim.later(S(3600));
    sim.tick();
    assert!(
        !sim.finish("ops", None, 100).contains(&Effect::QueueResumes),
        "an inbox run was no second part"
    );
}

#[test]
fn notes_moved_away_before_the_start_start_nothing_and_the_lock_goes() {
    let mut sim = Sim::new(&["delivery"], limits());
    sim.notes_gone.insert("delivery".into());
    sim.notes_ready("delivery", true);
    assert!(sim.tick().is_empty());
    assert!(sim.said.contains(&Effect::Release("delivery".into())));
    assert!(!sim.running("delivery"));
    assert!(!sim.core.role("delivery").unwrap().has_work());
}

#[test]
fn failures_are_counted_and_never_wedge_a_role() {
    let mut sim = Sim::new(&["delivery"], limits());
    for n in 1..=3 {
        sim.notes_ready("delivery", true);
        assert_eq!(sim.tick().len(), 1, "run {n} starts after a failed one");
        sim.finish("delivery", Some(FailureClass::RunFailure), 100);
        assert_eq!(sim.core.role("delivery").unwrap().failed_in_a_row(), n);
    }
    // A stop by tabd is nobody's failure; a good run resets the count.
    sim.notes_ready("delivery", true);
    sim.tick();
    sim.finish("delivery", Some(FailureClass::Stopped), 0);
    assert_eq!(sim.core.role("delivery").unwrap().failed_in_a_row(), 3);
    sim.notes_ready("delivery", true);
    sim.tick();
    sim.finish("delivery", None, 100);
    assert_eq!(sim.core.role("delivery").unwrap().failed_in_a_row(), 0);
}

#[test]
fn a_role_whose_required_server_is_down_waits_and_a_config_change_retries_it() {
    let mut sim = Sim::new(&["delivery", "risk"], limits());
    sim.notes_ready("delivery", true);
    sim.tick();
    let effects = sim.finish("delivery", Some(FailureClass::Unavailable), 0);
    assert_eq!(
        effects[0],
        Effect::RoleWaits {
            role: "delivery".into(),
            until: sim.now + PAUSE
        }
    );
    sim.notes_ready("delivery", true);
    sim.notes_ready("risk", true);
    assert_eq!(sim.tick(), started("risk", Work::Inbox), "only that role waits");
    let limits = sim.role_limits["delivery"].clone();
    let why = sim
        .core
        .role("delivery")
        .unwrap()
        .waiting(&limits, sim.now)
        .unwrap()
        .1;
    assert!(why.contains("server"), "{why}");
    sim.input(Input::Config {
        settle: (Duration::from_millis(300), S(60)),
    });
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
}

#[test]
fn a_changed_schedule_drops_queued_slots_and_a_deleted_role_goes_once_idle() {
    let mut sim = Sim::new(&["delivery", "risk"], limits());
    sim.held_elsewhere.insert("delivery".into());
    let slot = SlotRun {
        slot: sim.wall,
        missed: 1,
    };
    sim.input(Input::SlotsDue {
        role: "delivery".into(),
        slots: vec![slot],
    });
    sim.input(Input::Roles {
        names: vec!["delivery".into(), "risk".into()],
        rescheduled: vec!["delivery".into()],
        broken_changed: false,
    });
    assert_eq!(sim.core.role("delivery").unwrap().queued_slots(), 0);
    // risk runs; its file is deleted meanwhile: it stays until its run ends.
    sim.notes_ready("risk", true);
    sim.tick();
    sim.input(Input::Roles {
        names: vec!["delivery".into()],
        rescheduled: vec![],
        broken_changed: false,
    });
    assert!(sim.running("risk"), "a running role is never forgotten mid-run");
    sim.finish("risk", None, 100);
    sim.input(Input::Roles {
        names: vec!["delivery".into()],
        rescheduled: vec![],
        broken_changed: false,
    });
    assert!(sim.core.role("risk").is_none());
}

#[test]
fn a_role_not_meant_for_this_host_drops_its_slots_and_never_starts() {
    let mut sim = Sim::new(&["delivery"], limits());
    sim.not_here.insert("delivery".into());
    sim.input(Input::SlotsDue {
        role: "delivery".into(),
        slots: vec![SlotRun {
            slot: sim.wall,
            missed: 1,
        }],
    });
    sim.notes_ready("delivery", true);
    assert!(sim.tick().is_empty());
    assert_eq!(sim.core.role("delivery").unwrap().queued_slots(), 0);
}

#[test]
fn a_note_written_in_place_settles_in_the_core_and_its_run_forgets_it() {
    let mut sim = Sim::new(&["delivery"], limits());
    let note = PathBuf::from("/v/agent/inbox/delivery/n.md");
    let wall = std::time::SystemTime::now();
    sim.input(Input::InboxEvent {
        event: FsEvent::Written(note.clone()),
        owners: vec!["delivery".into()],
    });
    assert_eq!(sim.core.due_scans(false, sim.now), ["delivery"]);
    let not_yet = sim
        .core
        .note_complete(&note, 10, wall, sim.now, wall)
        .unwrap_err();
    assert_eq!(not_yet.until, Some(sim.now + Duration::from_millis(300)));
    sim.input(Input::Scanned {
        role: "delivery".into(),
        ready: false,
        by_person: false,
        recheck_at: not_yet.until,
    });
    assert!(
        sim.core.due_scans(false, sim.now).is_empty(),
        "nothing to look at yet"
    );
    sim.later(Duration::from_millis(300));
    assert_eq!(
        sim.core.due_scans(false, sim.now),
        ["delivery"],
        "looked at once settled"
    );
    assert!(sim.core.note_complete(&note, 10, wall, sim.now, wall).is_ok());
    sim.notes_ready("delivery", false);
    assert_eq!(sim.tick(), started("delivery", Work::Inbox));
    assert!(
        sim.core.note_complete(&note, 10, wall, sim.now, wall).is_err(),
        "handed to a run, it is forgotten: a new note of that name settles afresh"
    );
}

#[test]
fn a_watched_change_runs_the_role_once_and_its_own_write_is_no_change_for_it() {
    let mut sim = Sim::new(&["risk", "comms"], limits());
    let changed = |sim: &mut Sim, role: &str| {
        sim.input(Input::WatchChanged {
            role: role.into(),
            path: "project/plan.md".into(),
        });
    };
    // Two saves of the file before the tick: one run, handed the file once.
    changed(&mut sim, "risk");
    changed(&mut sim, "risk");
    assert_eq!(
        sim.tick(),
        started("risk", Work::Watch(vec!["project/plan.md".into()]))
    );
    // The run rewrites the file: its event arrives while it runs, for both roles watching it.
    changed(&mut sim, "risk");
    changed(&mut sim, "comms");
    assert_eq!(
        sim.tick(),
        started("comms", Work::Watch(vec!["project/plan.md".into()])),
        "another role watching the file sees the change"
    );
    // As the run ends, the shell finds the file in its own changes.
    sim.input(Input::OwnWrite {
        role: "risk".into(),
        path: "project/plan.md".into(),
    });
    sim.finish("risk", None, 100);
    sim.finish("comms", None, 100);
    sim.inbox_empty("risk");
    sim.inbox_empty("comms");
    assert!(
        sim.tick().is_empty(),
        "a role never fires itself by writing what it watches"
    );
    // A person's edit afterwards is a change again.
    changed(&mut sim, "risk");
    assert_eq!(
        sim.tick(),
        started("risk", Work::Watch(vec!["project/plan.md".into()]))
    );
}

#[test]
fn a_lock_taken_is_fed_back_after_the_steps_other_effects_are_carried_out() {
    let mut sim = Sim::new(
        &["a", "b", "c"],
        Limits {
            max_runs_per_day: 1,
            ..limits()
        },
    );
    let spent = DayUsage {
        runs: 1,
        ..DayUsage::default()
    };
    sim.today.insert("c".into(), spent);
    for r in ["a", "b", "c"] {
        sim.notes_ready(r, true);
    }
    sim.said.clear();
    assert_eq!(
        sim.tick(),
        [("a".to_string(), Work::Inbox), ("b".to_string(), Work::Inbox)]
    );
    let spawn = |r: &str| Effect::Spawn {
        role: r.into(),
        work: Work::Inbox,
    };
    let stop = Effect::StopForToday {
        role: "c".into(),
        stop: DailyStop::RunsPerDay,
        skipped: Some(TriggerKind::Inbox),
    };
    assert_eq!(
        sim.said,
        [
            Effect::Start("a".into()),
            Effect::Start("b".into()),
            stop,
            Effect::StatusChanged,
            spawn("a"),
            Effect::StatusChanged,
            spawn("b"),
            Effect::StatusChanged,
        ],
        "every effect of the dispatch first, then each lock taken, in the order they were taken"
    );
}

#[test]
fn a_listing_takes_in_an_empty_note_as_a_persons_and_forgets_a_note_gone() {
    let mut sim = Sim::new(&["delivery"], limits());
    let dir = PathBuf::from("/v/agent/inbox/delivery");
    let note = dir.join("Untitled.md");
    let wall = std::time::SystemTime::now();
    let listed = |notes| Input::Listed {
        dir: dir.clone(),
        notes,
        wall,
    };
    // Found empty by a scan (no event seen), and still empty at the next scan a second later:
    // a person is about to type in it.
    sim.input(listed(vec![(note.clone(), 0, wall)]));
    sim.later(S(1));
    sim.input(listed(vec![(note.clone(), 0, wall)]));
    sim.input(Input::InboxEvent {
        event: FsEvent::Written(note.clone()),
        owners: vec!["delivery".into()],
    });
    assert_eq!(
        sim.core.note_complete(&note, 5, wall, sim.now, wall),
        Err(NotYet {
            until: Some(sim.now + S(60)),
            typing: true
        }),
        "the first words wait for the person, not for a program's settle"
    );
    // Gone from the next listing: forgotten, so a note of that name is judged afresh.
    sim.input(listed(vec![]));
    let an_hour_ago = wall - S(3600);
    assert_eq!(
        sim.core.note_complete(&note, 5, an_hour_ago, sim.now, wall),
        Ok(())
    );
}
