//! With `[http]`: the webhook server (`capabilities::http`), a task of its own started with the
//! daemon and stopped before its runs are. Its notes reach the daemon as any note does, through
//! the inbox (a note renamed in from a temp name is ready at once): the core needs no input of
//! its own for them. `[http]` is read once, at start; a reload says a change waits for the next.

use crate::capabilities::http::{Server, Writes};
use crate::setup::role::LoadContext;

use super::Daemon;

impl Daemon {
    /// Starts the server when the config has `[http]`. One that cannot start (its port taken,
    /// the delivery ids unreadable) is said in the log and the daily note, and the daemon runs
    /// its roles without it.
    pub(super) fn start_webhooks(&self) -> Option<Server> {
        let config = self.config().http.as_ref()?;
        let writes = Writes {
            vault: self.run_env.vault.clone(),
            key: self.run_env.key.clone(),
            roles: LoadContext::for_config(self.config(), self.setup.env.clone()),
            clock: self.run_env.clock.clone(),
        };
        match Server::start(config, writes) {
            Ok(server) => {
                let hooks: Vec<&str> = config.hooks.keys().map(String::as_str).collect();
                tracing::info!(
                    "webhooks: listening on http://{}/hooks/ for {}",
                    server.addr(),
                    if hooks.is_empty() {
                        "no hook yet (add [http.hooks.ROLE])".to_string()
                    } else {
                        hooks.join(", ")
                    }
                );
                Some(server)
            }
            Err(e) => {
                let msg = format!("webhooks are off: {e}");
                tracing::warn!("{msg}");
                self.shown.writes.check(
                    "the daily note",
                    self.run_env
                        .log
                        .write_line(self.run_env.clock.now(), "tabd", &msg),
                );
                None
            }
        }
    }
}
