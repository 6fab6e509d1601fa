//! `tabd run`: the long-running daemon (DESIGN §4–§6, §13).
//!
//! One task owns all scheduling state and reacts to four sources: file events (hints), timers
//! (capped at 60 s so the wall clock is re-read), finished runs, and signals. Runs execute as
//! separate tasks and report back; nothing else shares mutable state.

mod dispatch;
mod lock;
pub mod ready;
mod reload;
mod scan;
pub mod slots;
pub mod status;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::{self, Config};
use crate::environment::Env;
use crate::inbox;
use crate::prompt::{self, Trigger, TriggerKind};
use crate::provider::{self, FailureClass, Provider, RetryPolicy};
use crate::role::{LoadContext, Role, RoleSet};
use crate::run::{self, RunEnv, RunResult};
use crate::runlog::RunLog;
use crate::state::StateStore;
use crate::tools::AccessPolicy;
use crate::vault::{Vault, VaultPath};

pub use lock::{acquire as acquire_lock, holder as lock_holder, LockError};
use ready::{FsEvent, Readiness};
use slots::SlotDecision;

/// Longest sleep before the wall clock is looked at again (tokio timers stop in suspend).
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Every inbox is rescanned this often even with no event (events can be lost).
const SAFETY_TICK: Duration = Duration::from_secs(60);
/// A wall-clock jump bigger than this against the monotonic clock means suspend or a clock step.
const JUMP: chrono::Duration = chrono::Duration::seconds(5);
/// How long model calls pause after the provider proved unusable.
const PAUSE: Duration = Duration::from_secs(300);
/// Quiet time after a role-file event before reloading (editors write in bursts).
const RELOAD_DEBOUNCE: Duration = Duration::from_millis(250);
/// Scan interval when no watcher could start.
const POLL: Duration = Duration::from_secs(2);

/// What the command line hands the daemon.
pub struct Init {
    pub env: Env,
    pub cli_config: Option<PathBuf>,
    pub config: Config,
    pub vault: PathBuf,
    pub roles: RoleSet,
}

/// A scheduled run waiting to start.
#[derive(Debug, Clone)]
struct SlotRun {
    slot: DateTime<Utc>,
    missed: usize,
}

#[derive(Default)]
struct RoleRt {
    running: bool,
    last_end: Option<Instant>,
    slots: std::collections::VecDeque<SlotRun>,
    watch_pending: Vec<String>,
    /// Ready notes were seen at the last scan.
    inbox_ready: bool,
    /// Look at the inbox again at this instant (a note settling).
    recheck_at: Option<Instant>,
    /// What each note's frontmatter says, so unchanged notes are not re-read every scan.
    notes: HashMap<PathBuf, scan::NoteMeta>,
    /// Content hashes of `watch` files as last seen.
    watch_hashes: HashMap<String, String>,
    dirty: bool,
}

struct Done {
    role: String,
    result: RunResult,
    notes: Vec<PathBuf>,
}

pub struct Daemon {
    env: Env,
    cli_config: Option<PathBuf>,
    config: Arc<Config>,
    root: PathBuf,
    vault: Arc<Vault>,
    store: StateStore,
    log: Arc<RunLog>,
    provider: Arc<dyn Provider>,
    /// The roles in effect: the good ones, and the last good version of ones now broken.
    roles: Arc<RoleSet>,
    kept_last_good: Vec<String>,
    rt: BTreeMap<String, RoleRt>,
    readiness: Readiness,
    running: usize,
    done_tx: mpsc::Sender<Done>,
    done_rx: mpsc::Receiver<Done>,
    tasks: tokio::task::JoinSet<()>,
    paused_until: Option<Instant>,
    paused_reason: Option<String>,
    events_rx: mpsc::Receiver<FsEvent>,
    overflow: Arc<AtomicBool>,
    watcher: Option<watch::FsWatcher>,
    polling: bool,
    host: String,
    last_wall: DateTime<Utc>,
    last_mono: Instant,
    next_safety: Instant,
    reload_at: Option<Instant>,
    watchdog: Option<Duration>,
    next_watchdog: Option<Instant>,
    rescan_all: bool,
    status_dirty: bool,
    /// Inbox folder → the roles reading it (one lookup per file event, not a scan of all roles).
    inbox_owners: HashMap<PathBuf, Vec<String>>,
    /// `state.json` as of this tick: read once per tick, not once per role.
    state: crate::state::State,
}

fn notify_systemd(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("sd_notify: {e}");
    }
}

impl Daemon {
    pub fn new(init: Init) -> anyhow::Result<Self> {
        let root = std::fs::canonicalize(&init.vault)?;
        let vault = Arc::new(Vault::open(&root)?);
        let store = StateStore::new(&root);
        let log = Arc::new(RunLog::new(&root, init.config.timezone));
        let provider = provider::build(&init.config.provider, &init.env)?;
        let (done_tx, done_rx) = mpsc::channel(64);
        let (events_tx, events_rx) = mpsc::channel(watch::CHANNEL_CAPACITY);
        let overflow = Arc::new(AtomicBool::new(false));
        // TABD_WATCH=poll: for vaults on network filesystems, where inotify sees no remote changes.
        let force_poll = init
            .env
            .get("TABD_WATCH")
            .is_some_and(|v| v.eq_ignore_ascii_case("poll"));
        let (watcher, polling) = if force_poll {
            tracing::info!(
                "TABD_WATCH=poll: scanning inboxes every {}s instead of watching",
                POLL.as_secs()
            );
            (None, true)
        } else {
            match watch::FsWatcher::start(events_tx, overflow.clone()) {
                Ok(w) => (Some(w), false),
                Err(e) => {
                    tracing::warn!("{}", watch::explain(&root, &e));
                    (None, true)
                }
            }
        };
        let host = init
            .config
            .daemon
            .host
            .clone()
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
        let settle = Duration::from_millis(init.config.inbox.settle_ms);
        let now = Instant::now();
        Ok(Self {
            env: init.env,
            cli_config: init.cli_config,
            config: Arc::new(init.config),
            root,
            vault,
            store,
            log,
            provider,
            roles: Arc::new(init.roles),
            kept_last_good: Vec::new(),
            rt: BTreeMap::new(),
            readiness: Readiness::new(settle),
            running: 0,
            done_tx,
            done_rx,
            tasks: tokio::task::JoinSet::new(),
            paused_until: None,
            paused_reason: None,
            events_rx,
            overflow,
            watcher,
            polling,
            host,
            last_wall: Utc::now(),
            last_mono: now,
            next_safety: now + SAFETY_TICK,
            reload_at: None,
            watchdog: sd_notify::watchdog_enabled(),
            next_watchdog: None,
            rescan_all: true,
            status_dirty: true,
            state: crate::state::State::default(),
            inbox_owners: HashMap::new(),
        })
    }

    fn role_may_run_here(&self, role: &Role) -> bool {
        role.enabled() && !role.is_abstract && role.settings.runs_on.as_ref().is_none_or(|h| h == &self.host)
    }

    fn inbox_abs(&self, role: &Role) -> PathBuf {
        self.root.join(role.inbox.trim_end_matches('/'))
    }

    /// Runs until SIGTERM/SIGINT. Returns the exit code.
    pub async fn run(mut self) -> anyhow::Result<u8> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut sigterm = signal(SignalKind::terminate())?;
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sighup = signal(SignalKind::hangup())?;

        let t0 = Instant::now();
        let finished = run::finish_pending_moves(&self.vault, &self.store);
        if finished > 0 {
            tracing::info!("finished {finished} note move(s) interrupted by the last stop");
        }
        self.refresh_watches();
        tracing::debug!("start-up: watches set in {:?}", t0.elapsed());
        self.log_role_errors(&BTreeMap::new());
        self.init_watch_hashes();
        let _ = self.store.update(|s| s.global.paused = None);
        tracing::debug!("start-up: state ready in {:?}", t0.elapsed());
        self.tick().await;
        tracing::debug!("start-up: first tick done in {:?}", t0.elapsed());
        let runnable = self.roles.runnable().count();
        let status = format!("{runnable} roles; {}", self.next_fire_text());
        notify_systemd(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&status),
        ]);
        tracing::info!(
            "tabd running on {} with {runnable} roles ({}); {}",
            self.root.display(),
            if self.polling { "polling" } else { "watching" },
            self.next_fire_text()
        );
        if let Some(wd) = self.watchdog {
            self.next_watchdog = Some(Instant::now() + wd / 2);
        }

        loop {
            let wake = self.next_wake();
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                Some(ev) = self.events_rx.recv() => {
                    self.on_event(ev);
                    while let Ok(ev) = self.events_rx.try_recv() {
                        self.on_event(ev);
                    }
                }
                Some(done) = self.done_rx.recv() => self.on_done(done),
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
                _ = sighup.recv() => {
                    tracing::info!("SIGHUP: reloading config and roles");
                    self.reload();
                }
            }
            self.tick().await;
        }
        self.shutdown().await;
        Ok(0)
    }

    async fn shutdown(&mut self) {
        notify_systemd(&[sd_notify::NotifyState::Stopping]);
        let grace = self.config.daemon.shutdown_grace;
        if self.running > 0 {
            tracing::info!(
                "stopping: waiting up to {}s for {} running turn(s)",
                grace.as_secs(),
                self.running
            );
        }
        let deadline = Instant::now() + grace;
        while self.running > 0 {
            tokio::select! {
                Some(done) = self.done_rx.recv() => self.on_done(done),
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!("stopping: cancelling {} turn(s); their notes stay in the inbox", self.running);
                    self.tasks.abort_all();
                    break;
                }
            }
        }
        while self.tasks.join_next().await.is_some() {}
        self.write_status(false);
        tracing::info!("stopped");
    }

    fn next_wake(&self) -> Instant {
        let now = Instant::now();
        let mut wake = now + MAX_SLEEP;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                wake = wake.min(t.max(now));
            }
        };
        consider(Some(self.next_safety));
        consider(self.reload_at);
        consider(self.next_watchdog);
        consider(self.paused_until);
        if self.polling {
            consider(Some(now + POLL));
        }
        let wall = Utc::now();
        for (name, rt) in &self.rt {
            consider(rt.recheck_at);
            if let Some(role) = self.roles.roles.get(name) {
                if let Some(last) = rt.last_end {
                    if (!rt.slots.is_empty() || rt.inbox_ready || !rt.watch_pending.is_empty()) && !rt.running
                    {
                        consider(Some(last + self.min_interval(role)));
                    }
                }
                if self.role_may_run_here(role) {
                    let ledger = self.state.roles.get(name).and_then(|r| r.last_slot);
                    let after = ledger.map_or(wall, |l| l.max(wall));
                    if let Some(next) = role.schedule.next_after(after) {
                        let delta = (next - wall).to_std().unwrap_or(Duration::ZERO);
                        consider(Some(now + delta));
                    }
                }
            }
        }
        wake
    }

    fn min_interval(&self, role: &Role) -> Duration {
        role.settings
            .min_interval
            .unwrap_or(self.config.limits.min_interval)
    }

    fn on_event(&mut self, ev: FsEvent) {
        let now = Instant::now();
        match &ev {
            FsEvent::Rescan => self.rescan_all = true,
            FsEvent::Written(p) | FsEvent::RenamedTo { to: p, .. } | FsEvent::Gone(p) => {
                let parent = p.parent().map(Path::to_path_buf).unwrap_or_default();
                if parent == self.root.join("roles") {
                    self.reload_at = Some(now + RELOAD_DEBOUNCE);
                    return;
                }
                if self.config.path.as_deref() == Some(p.as_path()) {
                    self.reload_at = Some(now + RELOAD_DEBOUNCE);
                    return;
                }
                if parent == self.root.join("agent/inbox") {
                    // An inbox folder was created, removed or moved in.
                    self.rescan_all = true;
                    self.refresh_watches();
                    return;
                }
                let owners = self.inbox_owners.get(&parent).cloned().unwrap_or_default();
                for name in &owners {
                    if let Some(rt) = self.rt.get_mut(name) {
                        rt.dirty = true;
                    }
                }
                if !owners.is_empty() {
                    self.readiness.on_event(&ev, now);
                    return;
                }
                // A watched context file?
                let rel = p
                    .strip_prefix(&self.root)
                    .ok()
                    .and_then(|r| r.to_str())
                    .map(str::to_string);
                if let Some(rel) = rel {
                    let roles: Vec<String> = self
                        .roles
                        .runnable()
                        .filter(|r| r.settings.watch.iter().any(|w| w == &rel))
                        .map(|r| r.name.clone())
                        .collect();
                    for name in roles {
                        let hash = self.hash_file(&rel);
                        if let Some(rt) = self.rt.get_mut(&name) {
                            if rt.watch_hashes.get(&rel) != hash.as_ref() {
                                if let Some(h) = hash {
                                    rt.watch_hashes.insert(rel.clone(), h);
                                }
                                if !rt.watch_pending.contains(&rel) {
                                    rt.watch_pending.push(rel.clone());
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn hash_file(&self, rel: &str) -> Option<String> {
        let p = VaultPath::parse(rel, false).ok()?;
        self.vault
            .read_text(&p, 64 * 1024 * 1024)
            .ok()
            .map(|t| prompt::hash(t.as_bytes()))
    }

    fn on_done(&mut self, done: Done) {
        self.running = self.running.saturating_sub(1);
        let now = Instant::now();
        for p in &done.notes {
            self.readiness.forget(p);
        }
        if let Some(rt) = self.rt.get_mut(&done.role) {
            rt.running = false;
            rt.last_end = Some(now);
            rt.dirty = true; // notes that arrived meanwhile fire a follow-up run
        }
        // Files this run changed are not "changes" for watchers (else a role watching a file it
        // writes would fire itself forever). The run's own change list covers moves too.
        let changed: Vec<String> = done.result.changes.iter().map(|c| c.path.clone()).collect();
        let names: Vec<String> = self.rt.keys().cloned().collect();
        for name in names {
            let watch: Vec<String> = self
                .roles
                .roles
                .get(&name)
                .map(|r| r.settings.watch.clone())
                .unwrap_or_default();
            for w in watch.iter().filter(|w| changed.contains(w)) {
                let h = self.hash_file(w);
                if let Some(rt) = self.rt.get_mut(&name) {
                    rt.watch_pending.retain(|p| p != w);
                    if let Some(h) = h {
                        rt.watch_hashes.insert(w.clone(), h);
                    }
                }
            }
        }
        match &done.result.failure {
            Some((FailureClass::Outage, why)) => {
                tracing::warn!("model calls paused for {} min: {why}", PAUSE.as_secs() / 60);
                self.paused_until = Some(now + PAUSE);
                self.paused_reason = Some(why.clone());
                let why = why.clone();
                let _ = self.store.update(|s| s.global.paused = Some(why));
            }
            Some((FailureClass::RunFailure, why)) => tracing::warn!("run of {} failed: {why}", done.role),
            None => {
                if self.paused_reason.is_some() {
                    self.unpause();
                }
                tracing::info!("run of {} finished: {}", done.role, done.result.record.outcome);
            }
        }
        self.status_dirty = true;
    }

    fn unpause(&mut self) {
        self.paused_until = None;
        self.paused_reason = None;
        let _ = self.store.update(|s| s.global.paused = None);
    }

    /// Everything that can happen at "now": clock checks, reloads, scans, due slots, runs.
    async fn tick(&mut self) {
        self.state = self.store.load();
        let now = Instant::now();
        let wall = Utc::now();
        // Suspend or a clock step: the wall clock moved differently from the monotonic one.
        let expected = self.last_wall + chrono::Duration::from_std(now - self.last_mono).unwrap_or_default();
        let drift = wall - expected;
        if drift > JUMP || drift < -JUMP {
            tracing::info!("the wall clock jumped by {}s (suspend or clock change): recomputing schedules, rescanning inboxes", drift.num_seconds());
            self.rescan_all = true;
        }
        self.last_wall = wall;
        self.last_mono = now;

        if self.overflow.swap(false, Ordering::Relaxed) {
            tracing::warn!("file events overflowed; rescanning every inbox");
            self.rescan_all = true;
        }
        if now >= self.next_safety {
            self.next_safety = now + SAFETY_TICK;
            self.rescan_all = true;
        }
        if self.polling {
            self.rescan_all = true;
        }
        if self.reload_at.is_some_and(|t| now >= t) {
            self.reload_at = None;
            self.reload();
        }
        if let Some(next) = self.next_watchdog {
            if now >= next {
                notify_systemd(&[sd_notify::NotifyState::Watchdog]);
                self.next_watchdog = self.watchdog.map(|wd| now + wd / 2);
            }
        }
        if self.paused_until.is_some_and(|t| now >= t) {
            tracing::info!("retrying model calls after the pause");
            self.unpause();
        }
        let t = Instant::now();
        self.scan_inboxes();
        let t_scan = t.elapsed();
        self.schedule_due(wall);
        let t_sched = t.elapsed();
        self.dispatch();
        let t_dispatch = t.elapsed();
        if self.status_dirty {
            self.write_status(true);
        }
        tracing::trace!(
            "tick: scan {t_scan:?}, schedule {t_sched:?}, dispatch {t_dispatch:?}, status {:?}",
            t.elapsed()
        );
    }

    fn next_fire_text(&self) -> String {
        let wall = Utc::now();
        let next = self
            .roles
            .runnable()
            .filter(|r| self.role_may_run_here(r))
            .filter_map(|r| r.schedule.next_after(wall).map(|t| (t, r.name.clone())))
            .min();
        match next {
            Some((t, name)) => format!(
                "next fire {name} at {}",
                t.with_timezone(&self.config.timezone).format("%Y-%m-%d %H:%M %Z")
            ),
            None => "no scheduled fires".into(),
        }
    }

    fn write_status(&mut self, running: bool) {
        self.status_dirty = false;
        let live = status::Live {
            pid: running.then(|| std::process::id().to_string()),
            paused: self.paused_reason.clone(),
            watching: Some(if self.polling {
                "polling for changes (file watching unavailable)".into()
            } else {
                "watching for changes".into()
            }),
            kept_last_good: self.kept_last_good.clone(),
            host: self.host.clone(),
        };
        let report = status::collect(
            &self.vault,
            &self.config,
            &self.roles,
            &self.state,
            &live,
            Utc::now(),
        );
        let text = status::render_note(&report, self.config.timezone);
        if let Ok(p) = VaultPath::parse("agent/status.md", false) {
            if let Err(e) = self.vault.write_atomic(&p, text.as_bytes()) {
                tracing::warn!("cannot write agent/status.md: {e}");
            }
        }
    }
}
