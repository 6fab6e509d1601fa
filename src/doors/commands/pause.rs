//! `tabd pause ROLE | --all [--for DURATION]` and `tabd resume [ROLE | --all]` (docs/spec.md §28): the
//! kill switch. The pause is written to this device's pause book (`records::state::pause`) and,
//! with `[cluster]`, to the cluster's (`capabilities::cluster::pause`) so every device holds it.
//! The daemon watches the book's folder: it stops the role at once (a run going on ends at its
//! next step). Nothing here decides what a pause means for a run: that is the daemon's core.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{CliError, Workspace};
use crate::capabilities::cluster::pause::SharedPauses;
use crate::capabilities::cluster::Cluster;
use crate::records::state::pause::{Book, PauseStore, Target};

/// The longest `--for` (a year): anything longer is a pause until resumed.
const LONGEST: Duration = Duration::from_secs(366 * 24 * 3600);
/// How long the cluster's servers get to answer a pause or a resume.
const CLUSTER_WAIT: Duration = Duration::from_secs(20);

/// `--for`: `30m`, `2h`, `1d` (humantime's words), more than nothing, at most a year.
pub fn parse_for(text: &str) -> Result<Duration, CliError> {
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| CliError::usage(format!("--for {text}: {e}; write a duration like 30m, 2h or 1d")))?;
    if d.is_zero() || d > LONGEST {
        return Err(CliError::usage(format!(
            "--for {text}: give more than nothing and at most a year (without --for, the pause holds until `tabd resume`)"
        )));
    }
    Ok(d)
}

/// The pause's target: `--all`, or a role that exists (a role file with errors too: it may be
/// fixed while paused) and is not abstract.
fn target_of(ws: &Workspace, role: Option<&str>) -> Result<Target, CliError> {
    let Some(name) = role.map(|r| r.trim_end_matches(".md")) else {
        return Ok(Target::All);
    };
    let names: Vec<String> = ws
        .roles
        .all_names()
        .into_iter()
        .filter(|n| !n.starts_with('_'))
        .collect();
    if name.starts_with('_') || ws.roles.roles.get(name).is_some_and(|r| r.is_abstract) {
        return Err(CliError::usage(format!(
            "`{name}` is an abstract role (its name starts with `_`): other roles inherit from it, it never runs, so there is nothing to pause; roles: {}",
            names.join(", ")
        )));
    }
    if !names.iter().any(|n| n == name) {
        let hint = crate::base::text::did_you_mean(name, names.iter().map(String::as_str))
            .map(|k| format!(" — did you mean `{k}`?"))
            .unwrap_or_default();
        return Err(CliError::usage(format!(
            "there is no role `{name}`{hint} Roles: {}",
            names.join(", ")
        )));
    }
    Ok(Target::Role(name.to_string()))
}

/// The name the pause is asked under: this device's in a cluster, else the host's.
fn device(ws: &Workspace) -> String {
    ws.config
        .cluster
        .as_ref()
        .map_or_else(|| ws.config.daemon.host(), |c| c.device.clone())
}

fn store(ws: &Workspace) -> PauseStore {
    let key = match ws.key() {
        Ok(k) => Some(k),
        Err(e) => {
            eprintln!(
                "warning: {}; the pause is kept without its mark beside the key",
                e.message
            );
            None
        }
    };
    PauseStore::new(ws.vault.clone(), key)
}

/// Who a target is, in a sentence: the role's title, or `every role`.
fn who(ws: &Workspace, target: &Target) -> String {
    match target {
        Target::All => "every role".into(),
        Target::Role(r) => ws
            .roles
            .roles
            .get(r)
            .map_or_else(|| r.clone(), |role| format!("{} ({r})", role.display_name)),
    }
}

/// A door that would run `role` (`what`: `tabd fire`, `tabd mcp serve`) is refused while a
/// pause holds it, with what ends the pause (exit 1, as a day's spent budget is).
pub fn refuse_if_paused(ws: &Workspace, role: &crate::setup::role::Role, what: &str) -> Result<(), CliError> {
    match store(ws).refusal(&role.name, Utc::now(), ws.config.timezone) {
        Some(why) => Err(CliError::failed(format!("{what} refused: {why}"))),
        None => Ok(()),
    }
}

/// `tabd pause`.
pub fn pause(ws: &Workspace, role: Option<&str>, for_: Option<&str>) -> Result<u8, CliError> {
    let target = target_of(ws, role)?;
    let length = for_.map(parse_for).transpose()?;
    let now = Utc::now();
    let until = length
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .map(|d| now + d);
    let by = device(ws);
    let store = store(ws);
    let change = Change::Pause {
        target: target.clone(),
        now,
        until,
        by: by.clone(),
    };
    let shared = ws.config.cluster.as_ref().map(|_| in_cluster(ws, &change));
    let (code, cluster_said) = match &shared {
        None => (0, None),
        Some(Ok(_)) => (0, Some("every device of the cluster holds it".to_string())),
        Some(Err(why)) => (
            1,
            Some(format!(
                "only this device holds it: the cluster could not be told ({why}); the other devices go on — run it again when the servers answer"
            )),
        ),
    };
    let (held, warnings) = store
        .update(|b| match &shared {
            Some(Ok(book)) => {
                b.mirror(book, now);
                b.of(&target, now).cloned()
            }
            _ => Some(b.pause(target.clone(), now, until, &by, false)),
        })
        .map_err(|e| CliError::failed(e.to_string()))?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let since = held.as_ref().map_or(now, |p| p.since);
    say_paused(ws, &target, (since, now, until));
    if let Some(said) = cluster_said {
        println!("With [cluster]: {said}.");
    }
    Ok(code)
}

/// What `tabd pause` did: `target` paused (since, now, until), and what the daemon does about it.
fn say_paused(
    ws: &Workspace,
    target: &Target,
    (since, now, until): (DateTime<Utc>, DateTime<Utc>, Option<DateTime<Utc>>),
) {
    let tz = ws.config.timezone;
    let when = match until {
        Some(u) => format!(
            "until {} (`tabd resume {}` ends it sooner)",
            crate::base::text::shown(u, tz),
            target.resume_arg()
        ),
        None => format!("until you resume it (`tabd resume {}`)", target.resume_arg()),
    };
    let what = if since < now {
        format!(
            "{} stays paused (since {}), now",
            who(ws, target),
            crate::base::text::shown(since, tz)
        )
    } else {
        format!("Paused {}", who(ws, target))
    };
    println!(
        "{what} {when}: no scheduled run (each is skipped, not caught up), no inbox note (they wait, no attempt counted), no watch, no `tabd fire`, no `tabd mcp serve`."
    );
    println!(
        "{}",
        daemon_line(
            ws,
            "stops it now; a run going on ends at its next step",
            "it holds from when one starts"
        )
    );
}

/// `tabd resume`: `role`'s pause, or every pause.
pub fn resume(ws: &Workspace, role: Option<&str>) -> Result<u8, CliError> {
    let which = match role {
        Some(_) => Some(target_of(ws, role)?),
        None => None,
    };
    let now = Utc::now();
    let by = device(ws);
    let store = store(ws);
    let names = ws.roles.all_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let before = store.paused(now, &names);
    let change = Change::Resume {
        which: which.clone(),
        now,
        by: by.clone(),
    };
    let shared = ws.config.cluster.as_ref().map(|_| in_cluster(ws, &change));
    let cluster_failed = match &shared {
        Some(Err(why)) => Some(why.clone()),
        _ => None,
    };
    let (ended, warnings) = store
        .update(|b| {
            if let Some(Ok(book)) = &shared {
                b.mirror(book, now);
            }
            // This device's own pauses end here; shared ones end only through the cluster.
            let keep_shared = cluster_failed.is_some();
            let mine: Vec<Target> = b
                .pauses
                .iter()
                .filter(|p| which.as_ref().is_none_or(|t| &p.target == t) && !(keep_shared && p.shared))
                .map(|p| p.target.clone())
                .collect();
            let mut ended = Vec::new();
            for t in mine {
                ended.extend(b.resume(Some(&t), now, &by));
            }
            ended
        })
        .map_err(|e| CliError::failed(e.to_string()))?;
    if cluster_failed.is_none() {
        store.unmark_unrecorded(which.as_ref(), &names);
    }
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let after = store.paused(now, &names);
    report_resume(
        ws,
        which.as_ref(),
        &before,
        &after,
        ended.len(),
        cluster_failed.as_deref(),
    )
}

fn report_resume(
    ws: &Workspace,
    which: Option<&Target>,
    before: &crate::records::state::pause::Paused,
    after: &crate::records::state::pause::Paused,
    ended: usize,
    cluster_failed: Option<&str>,
) -> Result<u8, CliError> {
    let held_now = match which {
        Some(Target::Role(r)) => after.of(r).cloned(),
        Some(Target::All) | None => after.iter().next().cloned(),
    };
    if let Some(h) = held_now {
        let why = match (&h.target, cluster_failed) {
            (_, Some(e)) => format!(
                "it holds on every device, and the cluster could not be told ({e}); try again when the servers answer"
            ),
            (Target::All, None) if which != Some(&Target::All) => {
                "every role is paused (`tabd pause --all`): `tabd resume --all` ends that".into()
            }
            _ => h.unrecorded.clone().unwrap_or_else(|| "it could not be ended".into()),
        };
        return Err(CliError::failed(format!(
            "{} stays paused: {why}",
            who(ws, &h.target)
        )));
    }
    let was = match which {
        Some(Target::Role(r)) => before.of(r).is_some(),
        _ => !before.is_empty(),
    };
    if !was && ended == 0 {
        match which {
            Some(t) => println!("{} was not paused: nothing to resume.", who(ws, t)),
            None => println!("Nothing was paused: nothing to resume."),
        }
        return Ok(0);
    }
    let (what, its) = match which {
        Some(t) => (who(ws, t), "its"),
        None => ("every role".to_string(), "their"),
    };
    println!(
        "Resumed {what}: {its} notes waiting in the inbox run now; the scheduled runs that passed while paused were skipped and are not caught up."
    );
    println!(
        "{}",
        daemon_line(ws, "goes on with it now", "they run when one starts")
    );
    Ok(0)
}

/// What the running daemon does (`doing`), or that none runs and what then (`without`).
fn daemon_line(ws: &Workspace, doing: &str, without: &str) -> String {
    match crate::doors::daemon::lock_holder(&ws.vault) {
        Some(pid) => format!("The daemon (pid {pid}) {doing}."),
        None => format!("No daemon runs on this vault now; {without}."),
    }
}

/// What `tabd pause` or `tabd resume` does to a book.
enum Change {
    Pause {
        target: Target,
        now: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
        by: String,
    },
    Resume {
        which: Option<Target>,
        now: DateTime<Utc>,
        by: String,
    },
}

impl Change {
    /// Made to the cluster's book: its pauses are every device's (`shared`).
    fn apply(&self, b: &mut Book) {
        match self {
            Change::Pause {
                target,
                now,
                until,
                by,
            } => {
                b.pause(target.clone(), *now, *until, by, true);
            }
            Change::Resume { which, now, by } => {
                b.resume(which.as_ref(), *now, by);
            }
        }
    }
}

/// Makes `change` to the cluster's pause book (connecting first), within `CLUSTER_WAIT`; the
/// book as written, or why not.
fn in_cluster(ws: &Workspace, change: &Change) -> Result<Book, String> {
    let Some(config) = ws.config.cluster.as_ref() else {
        return Err("no [cluster]".into());
    };
    let vault = ws
        .root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // What this device mirrored last: the new book's generation comes after it.
    let after = match PauseStore::new(ws.vault.clone(), None).read() {
        crate::records::state::pause::Read::Book(b) => b.generation,
        _ => 0,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let cluster = Cluster::connect(config, &vault)
            .await
            .map_err(|e| e.to_string())?;
        let shared = SharedPauses::new(cluster, config.key.as_deref());
        let deadline = tokio::time::Instant::now() + CLUSTER_WAIT;
        // The connection is made in the background: the first tries may find no server yet.
        let mut last = String::from("the servers did not answer");
        while tokio::time::Instant::now() < deadline {
            match shared.change(after, |b| change.apply(b)).await {
                Ok((book, _)) => return Ok(book),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(last)
    })
}

/// `--for`'s end as a person reads it, for tests of the words.
#[cfg(test)]
fn ends(now: DateTime<Utc>, text: &str) -> DateTime<Utc> {
    now + chrono::Duration::from_std(parse_for(text).unwrap()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them_and_nonsense_is_a_usage_error() {
        let now: DateTime<Utc> = "2026-11-25T09:00:00Z".parse().unwrap();
        assert_eq!(
            ends(now, "2h"),
            "2026-11-25T11:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            ends(now, "30m"),
            "2026-11-25T09:30:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            ends(now, "1d"),
            "2026-11-26T09:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        for bad in ["soon", "0s", "2 years", ""] {
            let e = parse_for(bad).unwrap_err();
            assert_eq!(e.code, 2, "{bad}: {}", e.message);
        }
    }
}
