//! What a run needs from the daemon or the command line, and what it ends as.

use std::sync::Arc;

use crate::base::clock::Clock;
use crate::base::faults::Faults;
use crate::base::process::Launcher;
use crate::base::vault::{Vault, VaultPath};
use crate::capabilities::agent_cli::Probes;
use crate::capabilities::mcp::pool::Pool;
use crate::capabilities::provider::{FailureClass, Provider};
use crate::records::runlog::{RunLog, RunRecord};
use crate::records::state::StateStore;
use crate::setup::config::Config;
use crate::setup::role::RoleSet;

/// Everything a run needs; cheap to clone.
#[derive(Clone)]
pub struct RunEnv {
    pub vault: Arc<Vault>,
    pub config: Arc<Config>,
    pub roles: Arc<RoleSet>,
    pub provider: Arc<dyn Provider>,
    pub store: StateStore,
    pub log: Arc<RunLog>,
    pub clock: Arc<dyn Clock>,
    pub faults: Faults,
    /// How children (MCP servers, agent CLIs) are started: tabd's environment for `${VAR}` and
    /// what they may see of it, and where their process groups are written down.
    pub launcher: Launcher,
    /// The daemon's `keep_alive` MCP servers (none for `tabd fire`: they start for the run).
    pub mcp_pool: Option<Arc<Pool>>,
    /// Which agent CLIs were found lately (`kind = "command"`).
    pub probes: Arc<Probes>,
    /// Told what the run is doing (`tabd fire` on a terminal shows it).
    pub progress: crate::base::progress::Progress,
    /// Set when tabd is being stopped: runs end where they are, recorded as stopped.
    pub stop: Stop,
    /// tabd's key (outside the vault): signs the journal and the suspended runs, and keeps the
    /// marks a restored vault cannot undo (`base::signing`).
    pub key: Arc<crate::base::signing::Key>,
    /// What this run holds in the cluster (docs/spec.md §23): open unless the daemon claimed its slot
    /// or notes; its tool calls and its finish check it.
    pub fence: crate::base::fence::Fence,
    /// Where each run's spans go (`[telemetry]`, docs/spec.md §25); empty: none made.
    pub telemetry: crate::capabilities::telemetry::Telemetry,
    /// Where a failed side write (a daily-note line, a state update, a ledger phase) is reported:
    /// one sink the daemon shares with its runs, shown by `tabd status`.
    pub side: crate::base::sidewrites::SideWrites,
}

/// Why an edited config was not taken: a part of the runs' environment cannot be made from it.
#[derive(Debug, thiserror::Error)]
pub enum NotRebuilt {
    #[error("the provider cannot be made: {0}")]
    Provider(#[from] crate::capabilities::provider::BuildError),
}

impl RunEnv {
    /// The environment of the runs started from now on under the edited config `config`, made
    /// whole — its provider, its log's time zone, how its children start — or, when a part of
    /// it cannot be made, why not (then nothing of `config` is to be used). `self` is left as it
    /// is: a run holds the environment it started with to its end, whatever is reloaded.
    pub fn rebuilt(&self, config: Config, env: &crate::base::environment::Env) -> Result<RunEnv, NotRebuilt> {
        let provider = if config.provider == self.config.provider {
            self.provider.clone()
        } else {
            crate::capabilities::provider::build(&config.provider, env)?
        };
        let log = if config.timezone == self.config.timezone {
            self.log.clone()
        } else {
            Arc::new(self.log.in_tz(config.timezone))
        };
        let mut launcher = self.launcher.clone();
        // `[sandbox] require` holds from the next child on, like every other setting.
        launcher.require_sandbox = config.sandbox.require;
        launcher.config_file = config.path.clone();
        Ok(RunEnv {
            config: Arc::new(config),
            provider,
            log,
            launcher,
            ..self.clone()
        })
    }
}

/// Why a run was asked to stop: it decides what the record and the daily note say, and whether a
/// scheduled slot it ran is owed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopWhy {
    /// tabd itself is stopping: the run goes again when tabd next starts (a slot is owed).
    Shutdown,
    /// The person paused its role (`tabd pause`): the run waits for the resume, a slot it ran is
    /// skipped like any slot of a paused role, never owed.
    Paused,
}

/// "Stop": runs watching it end at their next wait (a model request, a tool call), are recorded
/// as stopped — no attempt counted, their notes run again — and never as crashed. The first
/// reason asked is the one kept.
#[derive(Clone, Debug)]
pub struct Stop(Arc<tokio::sync::watch::Sender<Option<StopWhy>>>);

impl Default for Stop {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(None)))
    }
}

impl Stop {
    /// Asks every run to stop now: tabd is stopping.
    pub fn request(&self) {
        self.request_for(StopWhy::Shutdown);
    }

    /// Asks the run to stop now, for `why` (kept unless a reason was asked before).
    pub fn request_for(&self, why: StopWhy) {
        self.0.send_if_modified(|now| {
            let first = now.is_none();
            if first {
                *now = Some(why);
            }
            first
        });
    }

    pub fn requested(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// Why a stop was asked, if one was.
    pub fn why(&self) -> Option<StopWhy> {
        *self.0.borrow()
    }

    /// Resolves once a stop is requested (at once if it was already).
    pub async fn requested_wait(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives as long as `self`: an error cannot happen while we hold it.
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the sender lives as long as `self`: an error cannot happen while we hold it"
        )]
        let _ = rx.wait_for(Option::is_some).await;
    }
}

/// What a run ended as.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub record: RunRecord,
    pub summary: String,
    /// Set when the run failed; `Outage` means "pause model calls", not "blame the notes".
    pub failure: Option<(FailureClass, String)>,
    pub daily_log: VaultPath,
    /// Every file the run's tools changed (written, appended, moved to, triggered, remembered).
    pub changes: Vec<crate::base::calls::Change>,
    /// The run was skipped at zero tokens (`skip_unchanged`): why.
    pub skipped: Option<String>,
    /// The final answer as JSON, when the role has an output schema and the answer satisfied it.
    pub output: Option<serde_json::Value>,
    /// A delegated run's `### Delegated` subsection, which its parent's daily section includes
    /// (a delegated run writes no section of its own).
    pub delegated_section: String,
    /// The roles whose day this run (or a run it delegated to) found spent as it ended — by
    /// which daily limit: the daemon stops them for today and tells the person, once.
    pub day_spent: Vec<(String, crate::records::limits::DailyStop)>,
}

impl RunResult {
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}
