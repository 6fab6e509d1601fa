//! `tabd run`: the long-running daemon (docs/spec.md §4–§6, §13).
//!
//! The decisions live in `core` — a state machine that owns every role's runtime, the notes'
//! readiness (`ready`) and the model-call pause, changed only by `Core::step(input, now)` — and
//! in `slots` (scheduled slots and catch-up) and `events` (what a file event means), all pure.
//! This module is the shell around them: one task that reads the clocks and the vault, turns
//! file events, timers, finished runs and signals into the core's inputs, and carries its
//! effects out (take a run lock and spawn a run, write a log line, set a watch, write status).
//!
//! - `inputs` — what comes in: inbox scans, due slots (recorded in the ledger before they run),
//!   decided resumes, the approvals pass; `expect` — `expect:` deadlines, checked off the loop;
//!   `owed` — slots whose run started and did not finish: run again once, or said;
//! - `effects` — what goes out: runs started and fed back, a day's stop, the pause recorded,
//!   `[notify]`, pages given back when quiet, the stop;
//! - `reload` — config and role files, watched folders; `env_file` — the env file read again
//!   when it is saved; `upkeep` — crash leftovers swept, the undo journal pruned; `report` +
//!   `status` — the status note and `tabd status`; `tasks` — run tasks, reaped as they finish;
//!   `webhooks` — with `[http]`, the webhook server's task; `replies` — taps from ntfy.

mod broken;
mod cluster;
mod cluster_pause;
pub mod core;
mod effects;
mod env_file;
pub mod events;
mod expect;
mod inputs;
mod lock;
mod owed;
mod pause;
pub mod ready;
mod reload;
mod replies;
mod report;
mod resumes;
mod role_changes;
mod shared_runs;
pub mod slots;
pub mod status;
mod tasks;
mod upkeep;
mod watch;
mod webhooks;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::base::blocking;
use crate::base::clock::{Clock, SystemClock};
use crate::base::environment::Env;
use crate::base::faults::Faults;
use crate::base::vault::Vault;
use crate::capabilities::provider;
use crate::records::runlog::RunLog;
use crate::records::state::{State, StateStore};
use crate::running::run::RunEnv;
use crate::setup::config::Config;
use crate::setup::role::{Role, RoleSet};

use self::core::{Core, Input};
use self::inputs::ApprovalWork;
pub use lock::{acquire as acquire_lock, holder as lock_holder, LockError};
pub use owed::{owed_said, Rule as OwedRule};
pub use pause::{paused_slots, Window as PauseWindow};
use ready::FsEvent;

/// What the command line hands the daemon.
pub struct Init {
    pub env: Env,
    pub cli_config: Option<PathBuf>,
    pub config: Config,
    pub root: PathBuf,
    pub vault: Arc<Vault>,
    pub roles: RoleSet,
    /// tabd's key (`base::signing`), read or made before the daemon starts.
    pub key: Arc<crate::base::signing::Key>,
}

/// The file watcher and what it is pointed at.
struct Watching {
    events_rx: mpsc::Receiver<FsEvent>,
    overflow: Arc<AtomicBool>,
    watcher: Option<watch::FsWatcher>,
    polling: bool,
    paths: events::Paths,
    /// Per role: content hashes of its `watch` files as last seen.
    hashes: HashMap<String, HashMap<String, String>>,
}

/// What the daemon was started with and what its config and role files say beyond `RunEnv`.
struct Setup {
    /// The process's environment with the env file under it, as last read.
    env: Env,
    /// The env file (`~/.config/tabd/env`; `None` without a home), and what was wrong with it
    /// when last read (said again only when that changes).
    env_file: Option<PathBuf>,
    env_file_warnings: Vec<String>,
    /// The env file's variables the process was started with otherwise (its value wins), as
    /// last said.
    env_file_overridden: Vec<String>,
    cli_config: Option<PathBuf>,
    host: String,
    /// Roles running their last good version while their file has errors.
    kept_last_good: Vec<String>,
    /// The config file's error since its last edit: the daemon runs with the previous config.
    config_error: Option<String>,
    /// Each role file at fault (and the roles broken with it) as the daily note last stated it.
    role_errors_logged: BTreeMap<String, broken::Broken>,
    /// Each role file at fault as the daemon's log last said it (at once, on each edit).
    role_errors_said: BTreeMap<String, broken::Broken>,
}

/// What the last scans and reads of the vault found.
#[derive(Default)]
struct Scanned {
    /// `state.json` as of this tick: read once per tick, not once per role.
    state: State,
    /// Every inbox is listed at the next scan (the core said so: `Effect::Rescan`).
    rescan_all: bool,
    /// What the daemon keeps of each note between scans (valid while its mtime and size hold).
    notes: HashMap<PathBuf, inputs::NoteMeta>,
    /// Per role: its inbox and queue as the last scan saw them, for status.
    inbox_view: BTreeMap<String, status::InboxView>,
    /// Per role: inbox entries the last scan could not read, for status.
    unreadable: BTreeMap<String, Vec<String>>,
    /// Why scheduled slots cannot be recorded right now (shown in status until it works again).
    ledger_error: Option<String>,
    /// The person's pause book as last read (`pause`).
    pauses: pause::PauseSeen,
}

/// What the person is shown and told: the status, failed side writes, `[notify]` and its answers.
struct Showing {
    /// The core said the status changed (`Effect::StatusChanged`): written at the tick's end.
    dirty: bool,
    /// Grows with every write of the status.
    generation: u64,
    /// Side writes (log lines, state) that failed: counted and shown, never silent.
    writes: crate::base::sidewrites::SideWrites,
    /// Where the person is told what needs them (`[notify]`); `None`: no channel set.
    notifier: Option<crate::capabilities::notify::Notifier>,
    answers: replies::Answers,
}

/// The work going on off the loop, and the inputs waiting while effects are carried out.
#[derive(Default)]
struct OffLoop {
    tasks: tasks::Tasks,
    /// Runs the core said to start, their lock taken, until their `Spawn` or `Release`.
    starting: HashMap<String, effects::Starting>,
    approvals: ApprovalWork,
    expect: expect::ExpectWork,
    /// Each run's own stop: a pause ends one run at its next step.
    stops: pause::RunStops,
    /// Effects are being carried out (`core::drive`): an input fed now waits in `fed`.
    driving: bool,
    fed: Vec<Input>,
}

pub struct Daemon {
    /// Every decision: each role's runtime, the notes' readiness, the pause, the timers.
    core: Core,
    /// What every run is started with; replaced (not mutated) on reload.
    run_env: RunEnv,
    /// What the daemon was started with and what its config and role files say.
    setup: Setup,
    /// The file watcher and what it is pointed at.
    watching: Watching,
    /// What the last scans and reads of the vault found.
    seen: Scanned,
    /// What the person is shown and told: the status, failed writes, `[notify]`.
    shown: Showing,
    /// Runs, the approvals pass and the expectation check going on, and inputs waiting.
    work: OffLoop,
    /// With `[cluster]`: what this device may run (docs/spec.md §23).
    coordinator: Option<cluster::Coordinator>,
}

impl Setup {
    /// What the daemon starts with: the environment, the env file as read at start, the config's
    /// place and host; no file has errors yet.
    fn new(init: &Init) -> Self {
        let env_file = crate::base::environment::env_file_path(&init.env);
        // Said by the command line at start: said again only when they change. A variable the
        // process has otherwise at start is the person's own choice (an `export` on purpose):
        // said only once the file changes.
        let read = env_file
            .as_deref()
            .and_then(crate::base::environment::EnvFile::read)
            .unwrap_or_default();
        let env_file_overridden = init.env.overridden_by_process(&read);
        let env_file_warnings = read.warnings;
        Self {
            env: init.env.clone(),
            env_file,
            env_file_warnings,
            env_file_overridden,
            cli_config: init.cli_config.clone(),
            host: host_name(&init.config),
            kept_last_good: Vec::new(),
            config_error: None,
            role_errors_logged: BTreeMap::new(),
            role_errors_said: BTreeMap::new(),
        }
    }
}

impl Watching {
    /// Starts the watcher on a channel of its own (or polling, when it cannot start).
    fn start(env: &Env, root: PathBuf, layout: crate::base::vault::layout::Layout) -> Self {
        let capacity = env
            .get("TABD_TEST_EVENT_CAPACITY")
            .and_then(|c| c.parse().ok())
            .unwrap_or(watch::CHANNEL_CAPACITY);
        let (events_tx, events_rx) = mpsc::channel(capacity);
        let overflow = Arc::new(AtomicBool::new(false));
        let (watcher, polling) = watch::start(env, &root, events_tx, overflow.clone(), core::timing::POLL);
        Self {
            events_rx,
            overflow,
            watcher,
            polling,
            paths: events::Paths {
                root,
                layout,
                ..Default::default()
            },
            hashes: HashMap::new(),
        }
    }
}

fn notify_systemd(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("sd_notify: {e}");
    }
}

/// Resolves when `[notify]`'s channels start or stop failing; never without a notifier.
async fn notify_changed(notifier: Option<&crate::capabilities::notify::Notifier>) {
    match notifier {
        Some(n) => n.problems_changed().await,
        None => std::future::pending().await,
    }
}

fn host_name(config: &Config) -> String {
    config.daemon.host()
}

/// How the daemon starts children: its keepers written down, signed with tabd's key.
fn launcher_of(init: &Init) -> crate::base::process::Launcher {
    crate::base::process::Launcher {
        env: init.env.clone(),
        registry: Some(crate::base::process::Registry::new(
            init.vault.clone(),
            init.key.clone(),
        )),
        vault: Some(init.vault.clone()),
        config_file: init.config.path.clone(),
        require_sandbox: init.config.sandbox.require,
        sandbox_probe: Default::default(),
        inboxes: crate::base::vault::protected::RoleInboxes::new(
            init.roles.runnable().map(|r| r.inbox.as_str()),
        ),
    }
}

impl Daemon {
    pub fn new(init: Init) -> anyhow::Result<Self> {
        let clock: Arc<dyn Clock> = match init.env.get("TABD_TEST_CLOCK_OFFSET_FILE") {
            Some(f) => Arc::new(crate::base::clock::OffsetClock::new(PathBuf::from(f))),
            None => Arc::new(SystemClock),
        };
        let provider = provider::build(&init.config.provider, &init.env)?;
        let faults = Faults::from_env(&init.env);
        let guard = crate::base::vault::SpliceGuard::new(init.key.clone(), faults.clone());
        let log = Arc::new(RunLog::writer(init.vault.clone(), init.config.timezone, guard));
        let watching = Watching::start(&init.env, init.root.clone(), init.vault.layout().clone());
        let now = clock.instant();
        let launcher = launcher_of(&init);
        let quiet = effects::quiet(&init.env);
        let telemetry =
            crate::capabilities::telemetry::Telemetry::start(init.config.telemetry.as_ref(), &init.env);
        let side = crate::base::sidewrites::SideWrites::default();
        let setup = Setup::new(&init);
        Ok(Self {
            core: Core::new(
                init.config.inbox.settle(),
                &core::Clocks {
                    wall: clock.now(),
                    now,
                    watchdog: sd_notify::watchdog_enabled(),
                    quiet,
                },
            ),
            run_env: RunEnv {
                store: StateStore::new(init.vault.clone()),
                vault: init.vault.clone(),
                config: Arc::new(init.config),
                roles: Arc::new(init.roles),
                provider,
                log,
                clock: clock.clone(),
                faults,
                launcher,
                mcp_pool: None,
                probes: Default::default(),
                progress: Default::default(),
                stop: Default::default(),
                key: init.key.clone(),
                fence: Default::default(),
                telemetry,
                side: side.clone(),
            },
            setup,
            watching,
            seen: Scanned {
                rescan_all: true,
                ..Scanned::default()
            },
            shown: Showing {
                dirty: false,
                generation: 0,
                writes: side,
                notifier: None,
                answers: Default::default(),
            },
            work: OffLoop::default(),
            coordinator: None,
        })
    }

    /// (Re)starts the supervisors of the config's `keep_alive` MCP servers.
    fn start_mcp_pool(&mut self) {
        let keep_alive = self.config().mcp.values().any(|s| s.keep_alive);
        if let Some(old) = self.run_env.mcp_pool.take() {
            tokio::spawn(async move { old.shutdown().await });
        }
        if keep_alive {
            self.run_env.mcp_pool = Some(crate::capabilities::mcp::pool::Pool::start(
                &self.config().mcp,
                &self.run_env.launcher,
            ));
        }
    }

    fn config(&self) -> &Config {
        &self.run_env.config
    }

    fn roles(&self) -> &RoleSet {
        &self.run_env.roles
    }

    fn now(&self) -> (DateTime<Utc>, Instant) {
        (self.run_env.clock.now(), self.run_env.clock.instant())
    }

    fn role_may_run_here(&self, role: &Role) -> bool {
        role.enabled()
            && !role.is_abstract
            && role
                .settings
                .runs_on
                .as_ref()
                .is_none_or(|h| h == &self.setup.host)
    }

    /// Runs until SIGTERM/SIGINT. Returns the exit code.
    #[allow(
        clippy::expect_used,
        reason = "a task's branch in select! is polled only when its `if` found the task there"
    )]
    pub async fn run(mut self) -> anyhow::Result<u8> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sighup = signal(SignalKind::hangup())?;
        self.start_up()?;
        let webhooks = self.start_webhooks();
        self.tick();
        let runnable = self.roles().runnable().count();
        let status = format!("{runnable} roles; {}", self.next_fire_text());
        notify_systemd(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&status),
        ]);
        tracing::info!(
            "tabd running on {} with {runnable} roles ({}); {}",
            self.watching.paths.root.display(),
            if self.watching.polling {
                "polling"
            } else {
                "watching"
            },
            self.next_fire_text()
        );
        for line in self.next_fires() {
            tracing::info!("{line}");
        }
        self.sweep_stale_temps();
        loop {
            let wake = self.next_wake();
            let notifier = self.shown.notifier.clone();
            tokio::select! {
                () = notify_changed(notifier.as_ref()) => self.apply(Input::ShownChanged),
                _ = tokio::time::sleep_until(wake) => {}
                Some(ev) = self.watching.events_rx.recv() => {
                    self.on_event(ev);
                    while let Ok(ev) = self.watching.events_rx.try_recv() {
                        self.on_event(ev);
                    }
                }
                Some(done) = self.work.tasks.next(), if !self.work.tasks.is_empty() => self.on_done(done),
                reply = replies::next(self.shown.answers.sub()) => self.on_reply(reply),
                pass = async { self.work.approvals.task.as_mut().expect("guarded").await }, if self.work.approvals.task.is_some() => {
                    self.work.approvals.task = None;
                    self.on_approvals_pass(pass);
                }
                checked = async { self.work.expect.task.as_mut().expect("guarded").await }, if self.work.expect.task.is_some() => {
                    self.work.expect.task = None;
                    self.on_expect_checked(checked);
                }
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
                _ = sighup.recv() => {
                    tracing::info!("SIGHUP: reloading config and roles");
                    self.apply(Input::ReloadAsked);
                }
            }
            self.tick();
        }
        // No new notes while the runs wind down; a delivery under way is written or refused.
        if let Some(server) = webhooks {
            server.stop().await;
        }
        self.shutdown(&mut sigterm, &mut sigint).await;
        Ok(0)
    }

    /// Everything before the first tick: finish interrupted runs, forget deleted roles, owe the
    /// slots whose run did not finish, clean crash leftovers, point the watcher.
    fn start_up(&mut self) -> anyhow::Result<()> {
        self.start_notifier();
        let key = self.run_env.key.clone();
        self.coordinator = cluster::Coordinator::start(self.config(), &self.watching.paths.root, key)
            .map_err(|e| anyhow::anyhow!("{e}; tabd does not start: {}", cluster::WITHOUT_IT))?;
        self.start_pause_follower();
        if let Some(warning) = self.config().provider.missing_key(&self.setup.env) {
            tracing::warn!("{warning}");
        }
        let orphans = crate::base::process::reap_orphans(&self.run_env.vault, &self.run_env.key);
        if !orphans.stopped.is_empty() {
            tracing::warn!(
                "stopped {} child process group(s) a tabd that was killed left running: {}",
                orphans.stopped.len(),
                orphans.stopped.join(", ")
            );
        }
        for refused in &orphans.refused {
            tracing::warn!("a process-group file tabd did not write: {refused}");
        }
        self.start_mcp_pool();
        let recovered = blocking::run(|| crate::running::run::recover(&self.run_env, None));
        if recovered > 0 {
            tracing::info!(
                "finished {recovered} run(s) left unfinished (by the last stop, or a log file another process held)"
            );
        }
        // Today's spend as the run records tell it: state may have lost runs (set aside, a held lock).
        let tz = self.run_env.config.timezone;
        let now = self.run_env.clock.now();
        match blocking::run(|| crate::records::spent::count_again(&self.run_env.store, tz, now)) {
            Ok(true) => tracing::info!("today's spend and runs were counted again from the run records"),
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot count today's spend from the run records: {e}"),
        }
        self.forget_deleted_roles();
        self.make_pause_folder();
        self.apply(Input::Roles {
            names: self.roles().runnable().map(|r| r.name.clone()).collect(),
            rescheduled: Vec::new(),
            broken_changed: false,
        });
        self.owe_interrupted();
        self.refresh_watches();
        self.log_role_errors();
        self.report_stranded();
        self.init_watch_hashes();
        // A pause lasts for one daemon's life; clearing it costs a state write, so only when set.
        if self.run_env.store.load().global.paused.is_some() {
            let r = self.run_env.store.update(|s| s.global.paused = None);
            self.shown.writes.check("the state (paused)", r);
        }
        self.start_approvals();
        self.drop_interrupted_resumes();
        self.queue_resumes();
        self.share_waiting();
        Ok(())
    }

    fn next_wake(&self) -> Instant {
        let (wall, now) = self.now();
        let mut timers = vec![
            self.next_deadline(wall, now),
            self.cluster_wake(),
            self.pause_wake(wall, now),
        ];
        let limits = &self.config().limits;
        let roles = &self.roles().roles;
        timers.extend(self.core.wakes(now, |name| {
            roles
                .get(name)
                .map(|role| crate::records::limits::RoleLimits::resolve(role, limits).min_interval)
        }));
        for (name, _) in self.core.roles() {
            let Some(role) = self.roles().roles.get(name) else {
                continue;
            };
            if self.role_may_run_here(role) {
                let ledger = self.seen.state.roles.get(name).and_then(|r| r.last_slot);
                let after = ledger.map_or(wall, |l| l.max(wall));
                timers.push(
                    role.schedule
                        .next_after(after)
                        .map(|t| core::mono_of(t, wall, now)),
                );
            }
        }
        core::next_wake(now, timers)
    }

    fn on_event(&mut self, ev: FsEvent) {
        match events::classify(&ev, &self.watching.paths) {
            events::EventClass::Rescan => self.apply(Input::RescanAsked),
            events::EventClass::Roles | events::EventClass::Config => self.apply(Input::Edited),
            events::EventClass::Folders => {
                if let (FsEvent::Gone(dir), Some(w)) = (&ev, self.watching.watcher.as_mut()) {
                    w.lost(dir);
                }
                self.apply(Input::RescanAsked);
                self.refresh_watches();
                self.report_stranded();
            }
            events::EventClass::Stranded => self.report_stranded(),
            events::EventClass::Inbox(owners) => self.apply(Input::InboxEvent { event: ev, owners }),
            events::EventClass::Watched { path, roles } => self.on_watched_change(&path, &roles),
            // `tabd fire` may have asked for one: the status shows it now, not after a run.
            events::EventClass::Approvals => self.apply(Input::ApprovalsAsked),
            events::EventClass::Other => {}
        }
    }

    /// Everything that can happen at "now": clock checks, reloads, scans, due slots, runs.
    fn tick(&mut self) {
        let (wall, now) = self.now();
        // The tick's own file work (state, inbox listings, the status note) is small and bounded:
        // it runs right here. Long work (runs, tools, hashing big files) is `blocking::run`.
        self.seen.state = self.run_env.store.load();
        self.follow_cluster_pauses(wall);
        self.read_pauses(wall);
        self.apply(Input::Tick(core::Observed {
            wall,
            events_lost: self.watching.overflow.swap(false, Ordering::Relaxed),
            polling: self.watching.polling,
        }));
        self.scan_inboxes(now);
        self.schedule_due(wall);
        self.cluster_tick(wall);
        self.dispatch();
        // After the runs are started: a role's deadlines never wait behind another's note.
        self.check_expectations(wall);
        self.notify_approvals();
        let mcp_servers = self
            .run_env
            .mcp_pool
            .as_ref()
            .map(|pool| pool.status())
            .unwrap_or_default();
        self.apply(Input::Ticked(core::Shown {
            failed_writes: self.shown.writes.count(),
            mcp_servers,
        }));
        if self.shown.dirty {
            self.write_status(true);
        }
    }
}
