//! Hot reload of config and role files (a broken edit keeps the last good version), the set of
//! watched folders, and the `watch` files' hashes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::broken::{self, Broken};
use super::core::Input;
use super::role_changes::{self, RoleChange};
use super::{host_name, notify_systemd, watch, Daemon};
use crate::base::calls::Change;
use crate::base::vault::VaultPath;
use crate::records::context;
use crate::setup::config::{self, Config};
use crate::setup::role::{LoadContext, RoleSet};

impl Daemon {
    /// Creates inboxes, points the watcher at them, `roles/`, the config and `watch` files.
    pub(super) fn refresh_watches(&mut self) {
        let root = self.watching.paths.root.clone();
        let mut dirs: Vec<PathBuf> = vec![self.watching.paths.roles(), self.watching.paths.inboxes()];
        let mut owners: HashMap<PathBuf, Vec<String>> = HashMap::new();
        let mut watched: HashMap<String, Vec<String>> = HashMap::new();
        let roles = self.run_env.roles.clone();
        // One listing of agent/inbox says which inboxes exist: a thousand roles cost one read of
        // a folder, not a thousand mkdir and stat calls.
        let existing: HashSet<VaultPath> = VaultPath::parse(&self.run_env.vault.layout().inboxes(), false)
            .ok()
            .and_then(|d| self.run_env.vault.list(&d).ok())
            .map(|l| {
                l.entries
                    .into_iter()
                    .filter(|e| e.is_dir && !e.is_symlink)
                    .map(|e| e.path)
                    .collect()
            })
            .unwrap_or_default();
        let mut known: HashSet<PathBuf> = HashSet::new();
        // Folders no role reads are watched too: a note dropped into a typo (`deliverry/`) is
        // reported the moment it lands.
        let owned: HashSet<&VaultPath> = roles.runnable().map(|r| &r.inbox).collect();
        for dir in existing.iter().filter(|d| !owned.contains(d)) {
            let abs = root.join(dir.as_path());
            known.insert(abs.clone());
            dirs.push(abs);
        }
        for role in roles.runnable() {
            let dir = root.join(role.inbox.as_path());
            if existing.contains(&role.inbox) {
                known.insert(dir.clone());
            } else if let Err(e) = self.run_env.vault.create_dir_all(&role.inbox) {
                tracing::warn!("cannot create {}: {e}", role.inbox);
            }
            owners.entry(dir.clone()).or_default().push(role.name.clone());
            dirs.push(dir);
            for w in &role.settings.watch {
                watched.entry(w.clone()).or_default().push(role.name.clone());
                if let Some(parent) = root.join(w).parent() {
                    dirs.push(parent.to_path_buf());
                }
            }
        }
        // The config file — or where it would be: one made after start-up is read too. Its
        // folder, or (not made yet either) the nearest folder above it, at most two levels up.
        let config_path =
            self.config().path.clone().or_else(|| {
                config::locate(self.setup.cli_config.as_deref(), &self.setup.env).map(|(p, _)| p)
            });
        // The env file too (`~/.config/tabd/env`, often beside the config): a key saved there
        // is read at once.
        let env_file = self.setup.env_file.clone();
        for file in [&config_path, &env_file].into_iter().flatten() {
            if let Some(dir) = file.ancestors().skip(1).take(3).find(|d| d.is_dir()) {
                dirs.push(dir.to_path_buf());
            }
        }
        dirs.push(self.watching.paths.approvals());
        // `tabd pause` writes here: the loop wakes, and its tick reads the book.
        dirs.push(self.pause_store().folder());
        dirs.sort();
        dirs.dedup();
        dirs.retain(|d| known.contains(d) || d.is_dir());
        if let Some(w) = self.watching.watcher.as_mut() {
            let (errors, rebuilt) = w.set(&dirs);
            if rebuilt.0 {
                tracing::info!("a watched folder was replaced; watching it anew and rescanning");
                self.apply(Input::RescanAsked);
            }
            for (dir, e) in errors {
                tracing::warn!("{}", watch::explain(&dir, &e));
                self.watching.polling = true;
            }
        }
        self.watching.paths.config = config_path;
        self.watching.paths.env_file = env_file;
        self.watching.paths.inbox_owners = owners;
        self.watching.paths.watched = watched;
        self.watching.paths.watched_dirs = dirs;
    }

    fn hash_file(&self, rel: &str) -> Option<String> {
        let p = VaultPath::parse(rel, false).ok()?;
        context::load(&self.run_env.vault, &p).ok().map(|l| l.hash)
    }

    pub(super) fn init_watch_hashes(&mut self) {
        let watched: Vec<(String, Vec<String>)> = self
            .roles()
            .runnable()
            .map(|r| (r.name.clone(), r.settings.watch.clone()))
            .collect();
        let hashes: HashMap<String, HashMap<String, String>> = crate::base::blocking::run(|| {
            watched
                .into_iter()
                .map(|(name, paths)| {
                    let h = paths
                        .iter()
                        .filter_map(|p| self.hash_file(p).map(|h| (p.clone(), h)))
                        .collect();
                    (name, h)
                })
                .collect()
        });
        self.watching.hashes = hashes;
    }

    /// A watched file changed: each watching role whose last-seen hash differs gets it queued.
    pub(super) fn on_watched_change(&mut self, path: &str, roles: &[String]) {
        let hash = crate::base::blocking::run(|| self.hash_file(path));
        for name in roles {
            let seen = self.watching.hashes.entry(name.clone()).or_default();
            if seen.get(path) == hash.as_ref() {
                continue;
            }
            match &hash {
                Some(h) => seen.insert(path.to_string(), h.clone()),
                None => seen.remove(path),
            };
            self.apply(Input::WatchChanged {
                role: name.clone(),
                path: path.to_string(),
            });
        }
    }

    /// Files a run of `role` changed itself are not changes for its `watch` (else a role
    /// watching a file it writes would fire itself forever); the run's own change list covers
    /// moves too. Other roles watching them see the change as usual.
    pub(super) fn absorb_own_changes(&mut self, role: &str, changes: &[Change]) {
        let watch: Vec<String> = self
            .roles()
            .roles
            .get(role)
            .map(|r| r.settings.watch.clone())
            .unwrap_or_default();
        for w in watch.iter().filter(|w| changes.iter().any(|c| &c.path == *w)) {
            let h = crate::base::blocking::run(|| self.hash_file(w));
            self.apply(Input::OwnWrite {
                role: role.to_string(),
                path: w.clone(),
            });
            let seen = self.watching.hashes.entry(role.to_string()).or_default();
            match h {
                Some(h) => seen.insert(w.clone(), h),
                None => seen.remove(w),
            };
        }
    }

    /// Reloads the env file, config and roles: broken edits keep the last good version running.
    pub(super) fn reload(&mut self) {
        let env_changed = self.reread_env_file();
        self.reload_config(env_changed);
        let fresh = crate::base::blocking::run(|| {
            RoleSet::load(
                &self.run_env.vault,
                &LoadContext::for_config(self.config(), self.setup.env.clone()),
            )
        });
        let old = self.run_env.roles.clone();
        let mut effective = fresh.clone();
        self.setup.kept_last_good.clear();
        for name in fresh.broken.keys() {
            if let Some(good) = old.roles.get(name) {
                effective.roles.insert(name.clone(), good.clone());
                self.setup.kept_last_good.push(name.clone());
            }
        }
        let rescheduled = self.restart_changed_schedules(&old, &effective);
        let broken_changed = old.broken != effective.broken;
        let changes = role_changes::changes(&old, &effective);
        self.run_env.roles = Arc::new(effective);
        self.say_role_changes(&old, &changes);
        // Children started from now on (a keep-alive server's restart too) are kept from them.
        let inboxes = self.roles().runnable().map(|r| r.inbox.as_str());
        self.run_env.launcher.inboxes.set(inboxes);
        // Obsidian saves every few seconds while a person types: the daily note gets the state
        // the file is left in once they have stopped editing (the core says when), not one line
        // a save. The daemon's log says each new broken state at once.
        if broken_changed {
            self.say_role_errors();
        }
        self.apply(Input::Roles {
            names: self.roles().runnable().map(|r| r.name.clone()).collect(),
            rescheduled,
            broken_changed,
        });
        self.report_stranded();
        self.forget_deleted_roles();
        self.refresh_watches();
        self.init_watch_hashes();
        let status = format!(
            "{} roles; {}",
            self.roles().runnable().count(),
            self.next_fire_text()
        );
        notify_systemd(&[sd_notify::NotifyState::Status(&status)]);
    }

    /// Says each role added, removed or switched on or off, with when it runs next: in the
    /// daemon's log and one line each in the daily note. `old`: the roles before the reload.
    fn say_role_changes(&mut self, old: &RoleSet, changes: &[RoleChange]) {
        let now = self.run_env.clock.now();
        for change in changes {
            let name = change.role();
            let (who, fire) = match self.roles().roles.get(name) {
                Some(role) => (role.display_name.clone(), self.fire_words(role, now)),
                None => (
                    old.roles
                        .get(name)
                        .map_or_else(|| name.to_string(), |r| r.display_name.clone()),
                    String::new(),
                ),
            };
            let file = self.run_env.vault.layout().role_file(name);
            let sentence = change.sentence(&fire, &file);
            tracing::info!("{file}: {sentence}");
            self.shown.writes.check(
                "the daily note",
                self.run_env.log.write_line(now, &who, &sentence),
            );
        }
    }

    /// Applies an edited config (or env file, `env_changed`): the runs started from now on get
    /// a new environment made whole from it (provider, time zone of the logs, limits;
    /// `rebuilt_run_env`), the shell its host name and settle time, and the log says what
    /// changed. A config that cannot be read, or whose environment cannot be made, is refused
    /// with the reason and the old one kept whole.
    fn reload_config(&mut self, env_changed: bool) {
        let loaded =
            crate::base::blocking::run(|| config::load(self.setup.cli_config.as_deref(), &self.setup.env));
        let c = match loaded {
            Ok(c) => self.keep_cluster(c),
            Err(e) => return self.refuse_config(&e),
        };
        let config_changed = c != *self.run_env.config;
        let fresh = if config_changed || env_changed {
            match self.rebuilt_run_env(c, env_changed) {
                Ok(fresh) => Some(fresh),
                Err(e) => return self.refuse_config(&e),
            }
        } else {
            None
        };
        if let Some(was) = self.setup.config_error.take() {
            let now_used = fresh.as_ref().map_or(&self.run_env.config, |f| &f.config);
            let path = (now_used.path.as_ref())
                .map_or_else(|| "the config".to_string(), |p| p.display().to_string());
            self.apply(Input::ShownChanged);
            tracing::info!("{path} fixed; using it now (it had: {was})");
            let msg = "config fixed; using it now";
            self.shown.writes.check(
                "the daily note",
                self.run_env.log.write_line(self.run_env.clock.now(), "tabd", msg),
            );
        }
        let Some(fresh) = fresh else { return };
        if config_changed {
            let changed = changed_parts(&self.run_env.config, &fresh.config);
            tracing::info!("config changed; reloaded ({})", changed.join(", "));
        }
        self.setup.host = host_name(&fresh.config);
        let settle = fresh.config.inbox.settle();
        let notify_changed = fresh.config.notify != self.run_env.config.notify;
        self.run_env = fresh;
        if notify_changed {
            self.start_notifier();
        }
        // A config change (or a key saved in the env file) is worth another try, at once: of a
        // paused provider, of a role whose required server was down.
        self.apply(Input::Config { settle });
    }

    /// An edited config is refused, `why`: said once a day in the daily note, at each edit in
    /// the daemon's log, and in `tabd status` and agent/status.md until it is fixed.
    fn refuse_config(&mut self, why: &dyn std::fmt::Display) {
        let today = self.today();
        let first = self
            .run_env
            .store
            .update(|s| s.global.first_notice(today, &format!("config: {why}")));
        self.shown.writes.check("the state (a notice)", first.as_ref());
        if first.unwrap_or(true) {
            let msg = format!("config has errors; keeping the previous one — {why}");
            self.shown.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(self.run_env.clock.now(), "tabd", &msg),
            );
        }
        tracing::warn!("config has errors; keeping the previous one: {why}");
        self.setup.config_error = Some(why.to_string());
        self.apply(Input::ShownChanged);
    }

    /// `[cluster]` is fixed while tabd runs (its connection, its device's `.tabd/` folder, how
    /// approvals of other devices are read): a change is said — log and daily note, "restart
    /// tabd to apply" — and the rest of the new config is used with the `[cluster]` it started with.
    fn keep_cluster(&mut self, mut c: Config) -> Config {
        if c.cluster == self.run_env.config.cluster {
            return c;
        }
        let what = match (&self.run_env.config.cluster, &c.cluster) {
            (None, Some(_)) => "[cluster] was added to the config",
            (Some(_), None) => "[cluster] was removed from the config",
            _ => "[cluster] changed in the config",
        };
        let msg = format!("{what}: restart tabd to apply it (until then this device goes on as it started)");
        tracing::warn!("{msg}");
        self.shown.writes.check(
            "the daily note",
            self.run_env
                .log
                .write_line(self.run_env.clock.now(), "tabd", &msg),
        );
        c.cluster = self.run_env.config.cluster.clone();
        c
    }

    /// A changed schedule starts from now: no catch-up for slots the old one never had.
    fn restart_changed_schedules(&mut self, old: &RoleSet, new: &RoleSet) -> Vec<String> {
        let mut restarted = Vec::new();
        for (name, role) in &new.roles {
            let changed = old.roles.get(name).is_none_or(|o| {
                o.schedule.cron_exprs() != role.schedule.cron_exprs() || o.schedule.tz != role.schedule.tz
            });
            if changed {
                restarted.push(name.clone());
            }
        }
        if restarted.is_empty() {
            return restarted;
        }
        let now = self.run_env.clock.now();
        let names = restarted.clone();
        if let Ok(fresh) = self.run_env.store.update(move |s| {
            for n in names {
                s.role(&n).last_slot = Some(now);
            }
            s.clone()
        }) {
            self.seen.state = fresh;
        }
        restarted
    }

    /// Drops the state of roles whose file is gone (a broken file keeps its role's state).
    pub(super) fn forget_deleted_roles(&mut self) {
        let existing: BTreeSet<String> = self.roles().all_names().into_iter().collect();
        let stale = self
            .run_env
            .store
            .load()
            .roles
            .keys()
            .any(|n| !existing.contains(n));
        if stale {
            self.shown.writes.check(
                "the state",
                self.run_env.store.update(|s| s.retain_roles(&existing)),
            );
        }
    }

    /// The role files with errors, grouped by the file at fault (`broken::group`): what each
    /// broken role's file extends is read from the file as it is now.
    fn broken_files(&self) -> Vec<Broken> {
        let roles = self.run_env.roles.clone();
        crate::base::blocking::run(|| broken::group(&roles.broken, |name| self.extends_of(name)))
    }

    /// The role `name`'s file extends, as the file says now (`None`: it extends none, or its
    /// frontmatter cannot be read — then it is at fault itself).
    fn extends_of(&self, name: &str) -> Option<String> {
        /// Larger than any role file tabd reads.
        const MAX_ROLE_FILE: u64 = 1024 * 1024;
        let path = VaultPath::parse(&self.run_env.vault.layout().role_file(name), false).ok()?;
        let text = self.run_env.vault.read_text(&path, MAX_ROLE_FILE).ok()?;
        let fm = crate::formats::frontmatter::split(&text).ok()?.frontmatter?;
        crate::setup::role::settings::parse(&fm, &self.setup.env)
            .0
            .extends
    }

    /// Says in the daemon's log each broken state of a role file it has not said yet (each
    /// edit that breaks it anew, at once) — one line for a file and the roles that extend it —
    /// and each file fixed since.
    fn say_role_errors(&mut self) {
        let files = self.broken_files();
        for file in &files {
            if self.setup.role_errors_said.get(&file.root) == Some(file) {
                continue;
            }
            let w = file.words(&self.setup.kept_last_good);
            let extenders = with_dash(&w.extenders, "; ");
            tracing::warn!(
                "{}: {}: {}{}{extenders}",
                self.run_env.vault.layout().role_file(&file.root),
                w.what,
                w.first,
                w.more
            );
        }
        let said = std::mem::take(&mut self.setup.role_errors_said);
        for (root, file) in self.fixed_since(said, &files) {
            let running_again = self.running_again(&file);
            tracing::info!(
                "{}: {}",
                self.run_env.vault.layout().role_file(&root),
                file.fixed(&running_again)
            );
        }
        self.setup.role_errors_said = by_root(files);
    }

    /// The files at fault in `before` that are fixed now: their role loads again (a file gone,
    /// or one now broken by another's fault, is not fixed).
    fn fixed_since(&self, before: BTreeMap<String, Broken>, now: &[Broken]) -> Vec<(String, Broken)> {
        let roles = &self.run_env.roles;
        before
            .into_iter()
            .filter(|(root, _)| !now.iter().any(|f| f.root == *root))
            .filter(|(root, _)| roles.roles.contains_key(root) && !roles.broken.contains_key(root))
            .collect()
    }

    /// The roles that extended `file` while it was at fault and load again now.
    fn running_again(&self, file: &Broken) -> Vec<String> {
        let roles = &self.run_env.roles;
        file.extenders
            .iter()
            .filter(|n| roles.roles.contains_key(*n) && !roles.broken.contains_key(*n))
            .cloned()
            .collect()
    }

    /// Writes into the daily note what changed in the role files' errors since it last did: one
    /// line per file at fault (its first error, cut short, and the roles that extend it), one
    /// when a logged one is fixed; and tells the person of each (`role_broken`), once.
    pub(super) fn log_role_errors(&mut self) {
        self.say_role_errors();
        let files = self.broken_files();
        let now = self.run_env.clock.now();
        for file in &files {
            if self.setup.role_errors_logged.get(&file.root) == Some(file) {
                continue;
            }
            let w = file.words(&self.setup.kept_last_good);
            // A person knows the role by its title, not its file name.
            let who = self.title_of(&file.root);
            let extenders = with_dash(&w.extenders, " — ");
            self.shown.writes.check(
                "the daily note",
                self.run_env.log.write_line(
                    now,
                    &who,
                    &format!("{} — {}{}{extenders}", w.what, w.first, w.more),
                ),
            );
            let told: String = file
                .diags
                .iter()
                .map(ToString::to_string)
                .chain(file.extenders.iter().cloned())
                .collect();
            self.tell(
                crate::setup::config::notify::EventKind::RoleBroken,
                &file.root,
                format!("role_broken:{}:{}", file.root, context::hash(told.as_bytes())),
                (
                    format!("{who}: the role file has an error"),
                    format!("{}{} — {}{extenders}.", w.first, w.more, w.what),
                ),
                Some(self.run_env.vault.layout().role_file(&file.root)),
            );
        }
        let logged = std::mem::take(&mut self.setup.role_errors_logged);
        for (root, file) in self.fixed_since(logged, &files) {
            let running_again = self.running_again(&file);
            let who = self.title_of(&root);
            self.shown.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(now, &who, &format!("role file {}", file.fixed(&running_again))),
            );
        }
        self.setup.role_errors_logged = by_root(files);
    }

    /// The role's title (its H1, broken files included), else its name.
    fn title_of(&self, name: &str) -> String {
        let roles = &self.run_env.roles;
        roles
            .roles
            .get(name)
            .map(|r| r.display_name.clone())
            .or_else(|| roles.titles.get(name).cloned())
            .unwrap_or_else(|| name.to_string())
    }
}

/// The files at fault by the name of their role.
fn by_root(files: Vec<Broken>) -> BTreeMap<String, Broken> {
    files.into_iter().map(|f| (f.root.clone(), f)).collect()
}

/// `text` after `dash`, or nothing when there is no text.
fn with_dash(text: &str, dash: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("{dash}{text}")
    }
}

/// Which parts of the config differ, for the reload log line.
fn changed_parts(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    if old.timezone != new.timezone {
        out.push("timezone");
    }
    if old.provider != new.provider {
        out.push("provider");
    }
    if old.limits != new.limits {
        out.push("limits");
    }
    if old.notify != new.notify {
        out.push("notify");
    }
    if old.inbox != new.inbox {
        out.push("inbox");
    }
    if old.context != new.context {
        out.push("context");
    }
    if old.daemon != new.daemon {
        out.push("daemon (host, shutdown grace)");
    }
    if old.prices != new.prices {
        out.push("prices");
    }
    if old.mcp != new.mcp {
        out.push("mcp servers");
    }
    if old.log != new.log {
        // The vault's log folder, and what is protected with it, are fixed while it runs.
        out.push("log folder (takes effect at the next start of tabd)");
    }
    if old.vaults != new.vaults {
        // Where tabd's folders are in the vault is fixed while it runs, as the log folder is.
        out.push("vaults' folders and logs (take effect at the next start of tabd)");
    }
    if old.telemetry != new.telemetry {
        // The exporter and its thread are made once, at start.
        out.push("telemetry (takes effect at the next start of tabd)");
    }
    if old.http != new.http {
        // The listener, its hooks and their secrets are taken once, at start.
        out.push("webhooks [http] (take effect at the next start of tabd)");
    }
    if out.is_empty() {
        out.push("other settings");
    }
    out
}
