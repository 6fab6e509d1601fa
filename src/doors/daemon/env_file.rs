//! The env file (`~/.config/tabd/env`), read again when it is saved, as the config is: tabd's
//! own "no API key" warning tells the person to put the key there, so a key added while tabd
//! runs must be used without a restart. The variables it changed are said by name (never a
//! value); the runs started from then on get a provider and a launcher made with it. What the
//! process was started with (the unit's `Environment=`, a shell's `export`) keeps priority, and
//! a variable removed from the file goes only when the file gave it (`Env::with_env_file`).

use super::Daemon;
use crate::base::environment::EnvFile;
use crate::running::run::{NotRebuilt, RunEnv};
use crate::setup::config::Config;

impl Daemon {
    /// Reads the env file again. True when a variable tabd uses now differs from what it used;
    /// what is wrong with the file (a line skipped, others may read it) is said when it changes.
    pub(super) fn reread_env_file(&mut self) -> bool {
        let Some(path) = self.setup.env_file.clone() else {
            return false;
        };
        let file = crate::base::blocking::run(|| EnvFile::read(&path)).unwrap_or_default();
        if file.warnings != self.setup.env_file_warnings {
            for w in &file.warnings {
                tracing::warn!("{w}");
            }
            self.setup.env_file_warnings = file.warnings.clone();
        }
        let fresh = self.setup.env.clone().with_env_file(&file);
        let overridden = fresh.overridden_by_process(&file);
        if overridden != self.setup.env_file_overridden {
            self.say_overridden(&path, &overridden);
            self.setup.env_file_overridden = overridden;
        }
        let changes = fresh.changes_from(&self.setup.env);
        self.setup.env = fresh;
        if changes.is_empty() {
            return false;
        }
        let said: Vec<String> = changes
            .iter()
            .map(|(name, change)| format!("{name} {}", change.as_str()))
            .collect();
        let msg = format!(
            "{} changed ({}); the runs started from now on use it",
            path.display(),
            said.join(", ")
        );
        tracing::info!("{msg}");
        self.shown.writes.check(
            "the daily note",
            self.run_env
                .log
                .write_line(self.run_env.clock.now(), "tabd", &msg),
        );
        true
    }

    /// Variables of the env file whose value the process was started with otherwise, which
    /// wins: said, with what to do (names only), so a key changed there is not silently unused.
    fn say_overridden(&self, path: &std::path::Path, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let msg = format!(
            "{} sets {} otherwise than tabd was started with (systemd reads this file into tabd's environment once, when the service starts, or your shell exported it), and that value wins: restart tabd (`systemctl --user restart tabd`) to use the file's",
            path.display(),
            names.join(", ")
        );
        tracing::warn!("{msg}");
        self.shown.writes.check(
            "the daily note",
            self.run_env
                .log
                .write_line(self.run_env.clock.now(), "tabd", &msg),
        );
    }

    /// The environment of the runs started from now on under `config` (`RunEnv::rebuilt`); when
    /// the env file changed, with a provider built anew (it reads its key when it is built) and
    /// children started with the new variables.
    pub(super) fn rebuilt_run_env(&self, config: Config, env_changed: bool) -> Result<RunEnv, NotRebuilt> {
        let mut fresh = self.run_env.rebuilt(config, &self.setup.env)?;
        if env_changed {
            fresh.provider = crate::capabilities::provider::build(&fresh.config.provider, &self.setup.env)?;
            fresh.launcher.env = self.setup.env.clone();
        }
        Ok(fresh)
    }
}
