//! Hot reload of config and role files (a broken edit keeps the last good version), and the
//! set of watched folders.

use super::*;

impl Daemon {
    /// Creates inboxes, points the watcher at them, `roles/`, the config and `watch` files.
    pub(super) fn refresh_watches(&mut self) {
        let mut dirs: Vec<PathBuf> = vec![self.root.join("roles"), self.root.join("agent/inbox")];
        self.inbox_owners.clear();
        for role in self.roles.runnable() {
            let dir = self.inbox_abs(role);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!("cannot create {}: {e}", dir.display());
            }
            self.inbox_owners
                .entry(dir.clone())
                .or_default()
                .push(role.name.clone());
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

    pub(super) fn init_watch_hashes(&mut self) {
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

    /// Reloads config and roles: broken edits keep the last good version running.
    pub(super) fn reload(&mut self) {
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
    pub(super) fn log_role_errors(&mut self, before: &BTreeMap<String, Vec<crate::diag::Diagnostic>>) {
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
}
