//! `tabd run`: the long-running daemon (DESIGN §4–§6, §13).
//!
//! One task owns all scheduling state and reacts to four sources: file events (hints), timers
//! (capped at 60 s so the wall clock is re-read), finished runs, and signals. Runs execute as
//! separate tasks and report back; nothing else shares mutable state.

mod lock;
pub mod ready;
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
    /// `(mtime, size) → draft?` so unchanged notes are not re-read every scan.
    drafts: HashMap<PathBuf, (std::time::SystemTime, u64, bool)>,
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
        })
    }

    fn role_may_run_here(&self, role: &Role) -> bool {
        role.enabled() && !role.is_abstract && role.settings.runs_on.as_ref().is_none_or(|h| h == &self.host)
    }

    fn inbox_abs(&self, role: &Role) -> PathBuf {
        self.root.join(role.inbox.trim_end_matches('/'))
    }

    /// Creates inboxes, points the watcher at them, `roles/`, the config and `watch` files.
    fn refresh_watches(&mut self) {
        let mut dirs: Vec<PathBuf> = vec![self.root.join("roles"), self.root.join("agent/inbox")];
        for role in self.roles.runnable() {
            let dir = self.inbox_abs(role);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!("cannot create {}: {e}", dir.display());
            }
            dirs.push(dir);
            for w in &role.settings.watch {
                if let Some(parent) = self.root.join(w).parent() {
                    dirs.push(parent.to_path_buf());
                }
            }
            self.rt.entry(role.name.clone()).or_default();
        }
        if let Some(p) = &self.config.path {
            if let Some(parent) = p.parent() {
                dirs.push(parent.to_path_buf());
            }
        }
        dirs.sort();
        dirs.dedup();
        dirs.retain(|d| d.is_dir());
        if let Some(w) = self.watcher.as_mut() {
            for (dir, e) in w.set(&dirs) {
                tracing::warn!("{}", watch::explain(&dir, &e));
                self.polling = true;
            }
        }
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
                let mut matched = false;
                for role in self.roles.runnable() {
                    if self.inbox_abs(role) == parent {
                        if let Some(rt) = self.rt.get_mut(&role.name) {
                            rt.dirty = true;
                        }
                        matched = true;
                    }
                }
                if matched {
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

    fn init_watch_hashes(&mut self) {
        let watched: Vec<(String, Vec<String>)> = self
            .roles
            .runnable()
            .map(|r| (r.name.clone(), r.settings.watch.clone()))
            .collect();
        for (name, paths) in watched {
            let hashes: HashMap<String, String> = paths
                .iter()
                .filter_map(|p| self.hash_file(p).map(|h| (p.clone(), h)))
                .collect();
            self.rt.entry(name).or_default().watch_hashes = hashes;
        }
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
        // Files this run changed are not "changes" for watchers.
        let changed: Vec<String> = done
            .result
            .record
            .tool_calls
            .iter()
            .filter_map(|c| c.input.get("path").and_then(|p| p.as_str()).map(str::to_string))
            .collect();
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

    fn scan_inboxes(&mut self) {
        let all = std::mem::take(&mut self.rescan_all);
        let now = Instant::now();
        let names: Vec<String> = self.rt.keys().cloned().collect();
        for name in names {
            let Some(role) = self.roles.roles.get(&name).cloned() else {
                continue;
            };
            let rt = self.rt.get_mut(&name).map(|r| (r.dirty, r.recheck_at));
            let Some((dirty, recheck)) = rt else { continue };
            if !(all || dirty || recheck.is_some_and(|t| now >= t)) {
                continue;
            }
            let (ready, recheck_at) = self.inbox_state(&role);
            if let Some(rt) = self.rt.get_mut(&name) {
                rt.dirty = false;
                rt.inbox_ready = ready;
                rt.recheck_at = recheck_at;
            }
        }
    }

    /// Whether `role` has complete notes waiting, and when to look again if some are settling.
    fn inbox_state(&mut self, role: &Role) -> (bool, Option<Instant>) {
        let dir = self.inbox_abs(role);
        let Ok(inbox_path) = VaultPath::parse(&role.inbox, false) else {
            return (false, None);
        };
        let entries = self
            .vault
            .walk(&inbox_path, false, &|_| false)
            .unwrap_or_default();
        let now = Instant::now();
        let mut ready = false;
        let mut recheck: Option<Instant> = None;
        let mut existing = Vec::new();
        for e in entries {
            if e.is_dir || !inbox::is_trigger_name(e.path.file_name()) {
                continue;
            }
            let abs = self.root.join(e.path.as_path());
            existing.push(abs.clone());
            let modified = e.modified.unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            match self.readiness.check(&abs, e.size, modified, now) {
                Ok(()) => {
                    if !self.is_draft(&role.name, &abs, &e.path, modified, e.size) {
                        ready = true;
                    }
                }
                Err(Some(t)) => recheck = Some(recheck.map_or(t, |r: Instant| r.min(t))),
                Err(None) => {}
            }
        }
        self.readiness.retain_existing(&dir, &existing);
        if let Some(rt) = self.rt.get_mut(&role.name) {
            rt.drafts.retain(|p, _| existing.contains(p));
        }
        (ready, recheck)
    }

    fn is_draft(
        &mut self,
        role: &str,
        abs: &Path,
        path: &VaultPath,
        modified: std::time::SystemTime,
        size: u64,
    ) -> bool {
        if let Some(rt) = self.rt.get(role) {
            if let Some((m, s, draft)) = rt.drafts.get(abs) {
                if *m == modified && *s == size {
                    return *draft;
                }
            }
        }
        let draft = inbox::read_note(&self.vault, path)
            .map(|n| n.draft)
            .unwrap_or(false);
        if let Some(rt) = self.rt.get_mut(role) {
            rt.drafts.insert(abs.to_path_buf(), (modified, size, draft));
        }
        draft
    }

    /// Turns due scheduled slots into queued runs (or logged skips), recording them first.
    fn schedule_due(&mut self, wall: DateTime<Utc>) {
        let roles: Vec<Role> = self
            .roles
            .runnable()
            .filter(|r| self.role_may_run_here(r) && !r.schedule.is_empty())
            .cloned()
            .collect();
        // Decide every role first, record all ledger moves in one write, then queue the runs:
        // a slot is in the ledger before its run can start.
        let mut decisions = Vec::new();
        let mut ledger_moves = Vec::new();
        for role in roles {
            let stale = role.settings.stale_after.unwrap_or(Duration::from_secs(7200));
            let ledger = self.state.roles.get(&role.name).and_then(|r| r.last_slot);
            let (decision, new_ledger) = slots::decide(&role.schedule, ledger, wall, role.catch_up(), stale);
            if new_ledger != ledger {
                ledger_moves.push((role.name.clone(), new_ledger));
            }
            if decision != SlotDecision::Nothing {
                decisions.push((role, decision));
            }
        }
        if !ledger_moves.is_empty() {
            if let Ok(fresh) = self.store.update(move |s| {
                for (name, slot) in ledger_moves {
                    s.role(&name).last_slot = slot;
                }
                s.clone()
            }) {
                self.state = fresh;
            }
        }
        for (role, decision) in decisions {
            let tz = self.config.timezone;
            let fmt = |t: DateTime<Utc>| t.with_timezone(&tz).format("%H:%M").to_string();
            let rt = self.rt.entry(role.name.clone()).or_default();
            match decision {
                SlotDecision::Nothing => {}
                SlotDecision::Run { slot, missed, late } => {
                    if late {
                        let what = if missed > 1 {
                            format!("missed {missed} scheduled runs (the last due {})", fmt(slot))
                        } else {
                            format!("missed the {} run", fmt(slot))
                        };
                        let _ = self.log.write_line(wall, &role.display_name, &format!(
                            "{what} while tabd was not running or the computer slept; running once now (catch_up: once)"
                        ));
                    }
                    rt.slots.push_back(SlotRun { slot, missed });
                }
                SlotDecision::RunEach { slots, dropped } => {
                    let _ = self.log.write_line(
                        wall,
                        &role.display_name,
                        &format!(
                        "missed {} scheduled runs; running {} of them now, oldest first (catch_up: all){}",
                        slots.len() + dropped,
                        slots.len(),
                        if dropped > 0 { format!(", {dropped} older ones skipped") } else { String::new() }
                    ),
                    );
                    rt.slots
                        .extend(slots.into_iter().map(|slot| SlotRun { slot, missed: 1 }));
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
                    let _ = self.log.write_line(
                        wall,
                        &role.display_name,
                        &format!("skipped — missed {span}: {why}"),
                    );
                    self.status_dirty = true;
                }
            }
        }
    }

    /// Starts every run that is allowed now.
    fn dispatch(&mut self) {
        if self.paused_until.is_some() {
            return;
        }
        let max = self.config.limits.max_concurrent_runs as usize;
        let names: Vec<String> = self.rt.keys().cloned().collect();
        for name in names {
            if self.running >= max {
                break;
            }
            let Some(role) = self.roles.roles.get(&name).cloned() else {
                continue;
            };
            if !self.role_may_run_here(&role) {
                if let Some(rt) = self.rt.get_mut(&name) {
                    rt.slots.clear();
                }
                continue;
            }
            let Some(rt) = self.rt.get(&name) else { continue };
            let has_work = !rt.slots.is_empty() || rt.inbox_ready || !rt.watch_pending.is_empty();
            if rt.running || !has_work {
                continue;
            }
            if let Some(last) = rt.last_end {
                if Instant::now() < last + self.min_interval(&role) {
                    continue; // waits; next_wake includes this moment
                }
            }
            if let Some(cause) = self.over_limit(&role) {
                let first = self.note_once(&role.name, &cause);
                if first {
                    let _ =
                        self.log
                            .write_line(Utc::now(), &role.display_name, &format!("skipped — {cause}"));
                    self.write_run_record_skip(&role, &cause);
                }
                if let Some(rt) = self.rt.get_mut(&name) {
                    rt.slots.clear();
                    rt.watch_pending.clear();
                    rt.inbox_ready = false; // notes wait; the safety tick looks again
                }
                self.status_dirty = true;
                continue;
            }
            self.start_run(role);
        }
    }

    fn note_once(&self, role: &str, cause: &str) -> bool {
        let today = Utc::now().with_timezone(&self.config.timezone).date_naive();
        self.store
            .update(|s| {
                let r = s.role(role);
                r.roll_day(today);
                r.first_notice(cause)
            })
            .unwrap_or(true)
    }

    fn write_run_record_skip(&self, role: &Role, cause: &str) {
        let now = Utc::now();
        let rec = crate::runlog::RunRecord {
            run_id: format!("{}-{}-skip", now.format("%Y%m%dT%H%M%SZ"), role.name),
            role: role.name.clone(),
            trigger: crate::runlog::TriggerRecord {
                kind: "schedule".into(),
                notes: vec![],
                scheduled_for: None,
                cron: None,
            },
            started_at: now,
            ended_at: now,
            outcome: "skipped".into(),
            error: Some(cause.to_string()),
            model: String::new(),
            usage: Default::default(),
            tool_calls: vec![],
            moved: vec![],
        };
        let _ = self.log.write_record(&rec);
    }

    /// Budgets and run counts (DESIGN §6): the cause when the role may not run today.
    fn over_limit(&self, role: &Role) -> Option<String> {
        let today = Utc::now().with_timezone(&self.config.timezone).date_naive();
        let state = &self.state;
        let limits = &self.config.limits;
        let rs = state.roles.get(&role.name).cloned().unwrap_or_default();
        let (tokens, runs) = if rs.day == Some(today) {
            (rs.tokens_today, rs.runs_today)
        } else {
            (0, 0)
        };
        let global = if state.global.day == Some(today) {
            state.global.tokens_today
        } else {
            0
        };
        if tokens
            >= role
                .settings
                .daily_token_budget
                .unwrap_or(limits.daily_token_budget)
        {
            return Some("daily token budget spent".into());
        }
        if global >= limits.global_daily_token_budget {
            return Some("global daily token budget spent".into());
        }
        if runs >= role.settings.max_runs_per_day.unwrap_or(limits.max_runs_per_day) {
            return Some("max_runs_per_day reached".into());
        }
        None
    }

    fn start_run(&mut self, role: Role) {
        let notes = match run::ready_notes(&self.vault, &role, self.config.inbox.max_batch) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("cannot read the inbox of {}: {e}", role.name);
                Vec::new()
            }
        };
        // Only notes complete by the §5 rule go to this run.
        let now = Instant::now();
        let notes: Vec<inbox::Note> = notes
            .into_iter()
            .filter(|n| {
                self.readiness
                    .check(&self.root.join(n.path.as_path()), n.size, n.modified, now)
                    .is_ok()
            })
            .collect();
        let Some(rt) = self.rt.get_mut(&role.name) else {
            return;
        };
        let slot = rt.slots.pop_front();
        let watched = std::mem::take(&mut rt.watch_pending);
        rt.inbox_ready = false;
        let trigger = if let Some(s) = &slot {
            Trigger {
                kind: TriggerKind::Schedule,
                scheduled_for: Some(s.slot),
                cron: Some(
                    role.schedule
                        .lines
                        .iter()
                        .map(|l| l.cron_exprs().collect::<Vec<_>>().join(" | "))
                        .collect::<Vec<_>>()
                        .join(" | "),
                ),
                missed: s.missed,
                watched: Vec::new(),
            }
        } else if !notes.is_empty() {
            Trigger::inbox()
        } else if !watched.is_empty() {
            Trigger {
                kind: TriggerKind::Watch,
                watched,
                ..Trigger::manual()
            }
        } else {
            return; // the notes went away (moved by someone) before the run started
        };

        // skip_unchanged: a scheduled run with no notes and no context change costs nothing.
        if trigger.kind == TriggerKind::Schedule
            && notes.is_empty()
            && role.skip_unchanged()
            && !self.context_changed(&role)
        {
            let cause = "skipped — nothing changed since the last run (skip_unchanged)";
            if self.note_once(&role.name, "skip_unchanged") {
                let _ = self.log.write_line(Utc::now(), &role.display_name, cause);
            }
            self.status_dirty = true;
            return;
        }

        let Some(rt) = self.rt.get_mut(&role.name) else {
            return;
        };
        rt.running = true;
        self.running += 1;
        let note_paths: Vec<PathBuf> = notes.iter().map(|n| self.root.join(n.path.as_path())).collect();
        for p in &note_paths {
            self.readiness.forget(p);
        }
        let (vault, config, roles, provider, log, store, tx) = (
            self.vault.clone(),
            self.config.clone(),
            self.roles.clone(),
            self.provider.clone(),
            self.log.clone(),
            self.store.clone(),
            self.done_tx.clone(),
        );
        let run_lock = self.root.join(".tabd").join(format!("run-{}.lock", role.name));
        self.tasks.spawn(async move {
            // Holding the role's run lock keeps a concurrent `tabd fire` of the same role out.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&run_lock);
            let mut lock = file.ok().map(fd_lock::RwLock::new);
            let _guard = lock.as_mut().and_then(|l| l.try_write().ok());
            let env = RunEnv {
                vault: &vault,
                config: &config,
                roles: &roles,
                provider: provider.as_ref(),
                retry: RetryPolicy::from_config(&config.provider),
                store: &store,
                log: &log,
            };
            let result = run::run_role(&env, &role, trigger, notes).await;
            let _ = tx
                .send(Done {
                    role: role.name.clone(),
                    result,
                    notes: note_paths,
                })
                .await;
        });
    }

    /// True when a context file changed, appeared or vanished since the role's last success.
    fn context_changed(&self, role: &Role) -> bool {
        let Some(rs) = self
            .state
            .roles
            .get(&role.name)
            .filter(|r| r.last_success_at.is_some())
        else {
            return true;
        };
        let policy = AccessPolicy::for_role(role);
        let (found, _) = prompt::resolve_context(&self.vault, &policy, &role.context);
        let mut now: BTreeMap<String, String> = BTreeMap::new();
        for e in found {
            if let Ok(t) = self.vault.read_text(&e.path, 64 * 1024 * 1024) {
                now.insert(e.path.as_str().to_string(), prompt::hash(t.as_bytes()));
            }
        }
        now != rs.context_hashes
    }

    /// Reloads config and roles: broken edits keep the last good version running.
    fn reload(&mut self) {
        match config::load(self.cli_config.as_deref(), &self.env) {
            Ok(c) => {
                if c != *self.config {
                    tracing::info!("config changed; reloaded");
                    if c.provider != self.config.provider {
                        match provider::build(&c.provider, &self.env) {
                            Ok(p) => self.provider = p,
                            Err(e) => tracing::warn!("cannot rebuild the provider: {e}"),
                        }
                    }
                    self.readiness
                        .set_settle(Duration::from_millis(c.inbox.settle_ms));
                    self.config = Arc::new(c);
                    // A config change is worth another try of a paused provider.
                    self.unpause();
                }
            }
            Err(e) => {
                if self.note_once("_config", &e.to_string()) {
                    let _ = self.log.write_line(
                        Utc::now(),
                        "tabd",
                        &format!("config has errors; keeping the previous one — {e}"),
                    );
                }
                tracing::warn!("config has errors; keeping the previous one: {e}");
            }
        }
        let fresh = RoleSet::load(
            &self.root,
            &LoadContext {
                default_tz: self.config.timezone,
                env: self.env.clone(),
            },
        );
        let old = self.roles.clone();
        let mut effective = fresh.clone();
        self.kept_last_good.clear();
        for name in fresh.broken.keys() {
            if let Some(good) = old.roles.get(name) {
                effective.roles.insert(name.clone(), good.clone());
                self.kept_last_good.push(name.clone());
            }
        }
        // A changed schedule starts from now: no catch-up for slots the old one never had.
        let mut restarted = Vec::new();
        for (name, role) in &effective.roles {
            let changed = old.roles.get(name).is_none_or(|o| {
                o.schedule.cron_exprs() != role.schedule.cron_exprs() || o.schedule.tz != role.schedule.tz
            });
            if changed {
                restarted.push(name.clone());
                if let Some(rt) = self.rt.get_mut(name) {
                    rt.slots.clear();
                }
            }
        }
        if !restarted.is_empty() {
            let now = Utc::now();
            if let Ok(fresh) = self.store.update(move |s| {
                for n in restarted {
                    s.role(&n).last_slot = Some(now);
                }
                s.clone()
            }) {
                self.state = fresh;
            }
        }
        let removed: Vec<String> = self
            .rt
            .keys()
            .filter(|n| !effective.roles.contains_key(*n))
            .cloned()
            .collect();
        for n in removed {
            if self.rt.get(&n).is_some_and(|r| !r.running) {
                self.rt.remove(&n);
            }
        }
        let old_broken = old.broken.clone();
        self.roles = Arc::new(effective);
        self.log_role_errors(&old_broken);
        self.refresh_watches();
        self.init_watch_hashes();
        self.rescan_all = true;
        self.status_dirty = true;
        let status = format!(
            "{} roles; {}",
            self.roles.runnable().count(),
            self.next_fire_text()
        );
        notify_systemd(&[sd_notify::NotifyState::Status(&status)]);
    }

    /// Writes each new role-file error once into the daily log.
    fn log_role_errors(&mut self, before: &BTreeMap<String, Vec<crate::diag::Diagnostic>>) {
        let roles = self.roles.clone();
        for (name, diags) in &roles.broken {
            if before.get(name) == Some(diags) {
                continue;
            }
            let first = diags.first().map(ToString::to_string).unwrap_or_default();
            let more = if diags.len() > 1 {
                format!(" (+{} more; run `tabd validate`)", diags.len() - 1)
            } else {
                String::new()
            };
            let what = if self.kept_last_good.contains(name) {
                "role file has errors; still running the last good version"
            } else {
                "role file has errors; the role stays off until it is fixed"
            };
            let _ = self
                .log
                .write_line(Utc::now(), name, &format!("{what} — {first}{more}"));
            tracing::warn!("{name}: {what}: {first}{more}");
        }
        for name in before.keys() {
            if !roles.broken.contains_key(name) && roles.roles.contains_key(name) {
                let _ = self
                    .log
                    .write_line(Utc::now(), name, "role file fixed; running the new version");
            }
        }
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
