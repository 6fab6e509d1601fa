//! Undo (docs/spec.md §19): what undoing a run would do, and doing it — through the same gate as a
//! tool write (issue 29): only from a journal this machine signed, only paths the run's role may
//! write (its access policy: never `roles/`, `.claude/` …), never through a link at any level,
//! and only bytes whose hash is the one the journal names. A run that crashed is undone from its
//! last record after each call, so the real undo does exactly what its dry run says.

use super::{
    blob, digest, fixed, kept_text, load, read_head, run_ids, state_of, RunChanges, RunJournal, Trust,
    UNDO_TRIGGER,
};
use crate::base::vault::{Vault, VaultError, VaultPath};
use crate::records::access::AccessPolicy;
use chrono::{DateTime, Utc};

/// What undo does with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Still as the run left it: back to its prior content (`Some(hash)`) or removed (`None`).
    /// `prefix`: the run only appended, and the prior content is the file's first this many
    /// bytes (no copy was kept).
    Restore {
        path: String,
        to: Option<String>,
        prefix: Option<u64>,
        /// With `--force`, the file changed since the run: whose changes the restore throws away.
        loses: Option<ChangedBy>,
    },
    /// Changed since the run: by whom, as far as the journal and the file can say.
    Skip { path: String, by: ChangedBy },
    /// Already as it was before the run: nothing to do.
    AlreadyBefore { path: String },
    /// The run ended before it recorded what it left of this file (a crash mid-call).
    Unknown { path: String },
    /// The gate refused it: a path the role may not write, a link, a copy whose bytes changed.
    Refused { path: String, why: String },
}

/// Who left a file as it is now, since a run changed it (issue 39, item 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangedBy {
    /// A later run left it so, and its change is still there (not undone).
    Run(crate::base::run_id::RunId),
    /// No journaled run left it so: the person, a sync tool or another program. `at`: when the
    /// file last changed, where that was their change (`None` where tabd wrote it last: an
    /// undo put back an edit made before a later run, or the file is gone).
    Other { at: Option<DateTime<Utc>> },
}

/// Who left `path` in the state `now`, since `entry` ran: the newest later run whose journal
/// left it so — an undo's journal names no one (it put back an earlier state: whoever left that
/// state did it, and the run it undid did not), so the search goes on before it. No journal left
/// it so: someone outside tabd did, at the file's modification time unless tabd touched it last.
pub fn changed_by(vault: &Vault, entry: &RunChanges, path: &str, now: &Option<String>) -> ChangedBy {
    let mut later: Vec<RunChanges> = run_ids(vault)
        .into_iter()
        .filter(|id| *id != entry.run_id)
        .filter_map(|id| load(vault, &id, None).ok())
        .filter(|e| e.started_at > entry.started_at && e.before.iter().any(|(p, _)| p == path))
        .collect();
    // By start time: two runs in one second have ids that do not sort by time.
    later.sort_by(|a, b| (a.started_at, &a.run_id).cmp(&(b.started_at, &b.run_id)));
    let mut restored_by_undo = false;
    for e in later.iter().rev() {
        if e.left_of(path) != Some(now) {
            continue;
        }
        if e.trigger != UNDO_TRIGGER {
            return ChangedBy::Run(e.run_id.clone());
        }
        restored_by_undo = true;
    }
    let at = (!restored_by_undo && now.is_some())
        .then(|| fixed(path).ok())
        .flatten()
        .and_then(|p| vault.metadata(&p).ok()?.modified)
        .map(DateTime::<Utc>::from);
    ChangedBy::Other { at }
}

/// What undoing `entry` would do, file by file (`force`: restore changed files too), each file
/// through the gate with `policy` (the run's role's); a prior copy over `max_kept` bytes (more
/// than tabd keeps of one file: `journal::max_kept`) is refused, never read. A journal this
/// machine did not sign, or that lost a line (`Trust`), is refused whole.
pub fn plan_undo(
    vault: &Vault,
    entry: &RunChanges,
    policy: &AccessPolicy,
    force: bool,
    max_kept: u64,
) -> Result<Vec<Step>, VaultError> {
    match &entry.trust {
        Trust::Whole | Trust::Unnumbered => {}
        Trust::Refused(why) => {
            return Err(VaultError::Refused(format!(
                "the journal of {} cannot be trusted: {why}. It was changed, cut or forged, or it comes from \
                 another machine or was signed with a key this machine no longer has; nothing was restored",
                entry.run_id
            )))
        }
        Trust::Unchecked => {
            return Err(VaultError::Refused(format!(
                "the journal of {} was read without checking its signatures; nothing was restored",
                entry.run_id
            )))
        }
    }
    let mut steps = Vec::new();
    for (path, before) in &entry.before {
        let p = fixed(path)?;
        let prefix = entry.prefix.get(path).copied();
        if let Err(why) = gate(vault, policy, &p, before.as_deref(), prefix, max_kept) {
            steps.push(Step::Refused {
                path: path.clone(),
                why: why.to_string(),
            });
            continue;
        }
        let now = state_of(vault, &p)?;
        let step = if now == *before {
            Step::AlreadyBefore { path: path.clone() }
        } else {
            match entry.left_of(path) {
                Some(left) if *left == now => Step::Restore {
                    path: path.clone(),
                    to: before.clone(),
                    prefix,
                    loses: None,
                },
                Some(_) | None if force => Step::Restore {
                    path: path.clone(),
                    to: before.clone(),
                    prefix,
                    loses: Some(changed_by(vault, entry, path, &now)),
                },
                None => Step::Unknown { path: path.clone() },
                Some(_) => Step::Skip {
                    path: path.clone(),
                    by: changed_by(vault, entry, path, &now),
                },
            }
        };
        steps.push(step);
    }
    Ok(steps)
}

/// The checks a restore passes, as a tool write would: no link anywhere on the path, the role
/// may write it, and the prior bytes — the journal's copy, or for a file the run only appended
/// to, its first `prefix` bytes — are the ones the journal names.
fn gate(
    vault: &Vault,
    policy: &AccessPolicy,
    p: &VaultPath,
    to: Option<&str>,
    prefix: Option<u64>,
    max_kept: u64,
) -> Result<(), NotRestorable> {
    no_link(vault, p)?;
    policy.check_restore(vault, p).map_err(NotRestorable::Refused)?;
    if let Some(hash) = to {
        prior_bytes(vault, p, hash, prefix, max_kept)?;
    }
    Ok(())
}

/// The content `p` had before the run: the journal's copy, or (the run only appended, and the
/// file was not changed otherwise since) the file's first `prefix` bytes — checked against `hash`,
/// never more than `max_kept` bytes read.
fn prior_bytes(
    vault: &Vault,
    p: &VaultPath,
    hash: &str,
    prefix: Option<u64>,
    max_kept: u64,
) -> Result<Vec<u8>, NotRestorable> {
    let bytes = match (blob(vault, hash, max_kept), prefix) {
        (Ok(bytes), _) => bytes,
        (Err(VaultError::TooLarge { size, cap, .. }), None) => {
            return Err(NotRestorable::CopyTooLarge {
                path: p.clone(),
                size: crate::base::text::thousands(size),
                kept: kept_text(cap),
            });
        }
        (Err(_), Some(len)) => {
            let head = read_head(vault, p, len.min(max_kept)).map_err(|e| NotRestorable::Unreadable {
                path: p.clone(),
                source: e,
            })?;
            let Some(head) = Some(head).filter(|b| b.len() as u64 == len && digest(b) == hash) else {
                return Err(NotRestorable::NoLongerBegins(p.clone()));
            };
            head.to_vec()
        }
        (Err(e), None) => {
            return Err(NotRestorable::CopyGone {
                path: p.clone(),
                source: e,
            })
        }
    };
    if digest(&bytes) != hash {
        return Err(NotRestorable::CopyChanged(p.clone()));
    }
    Ok(bytes)
}

/// Refuses a path that leads through a link at any level (a folder replaced by a link to
/// `roles/` after the run).
fn no_link(vault: &Vault, p: &VaultPath) -> Result<(), NotRestorable> {
    match vault.canonical(p) {
        Ok(real) if real == *p => Ok(()),
        Ok(real) => Err(NotRestorable::Link {
            path: p.clone(),
            real,
        }),
        Err(e) => Err(NotRestorable::Unreadable {
            path: p.clone(),
            source: e,
        }),
    }
}

/// Why a file is not put back (the sentence is the refused step's, in the plan and the output).
#[derive(Debug, thiserror::Error)]
pub enum NotRestorable {
    #[error("{path} now leads through a link (to {real})")]
    Link { path: VaultPath, real: VaultPath },
    #[error("{path}: {source}")]
    Unreadable { path: VaultPath, source: VaultError },
    #[error("{0}")]
    Refused(VaultError),
    #[error(
        "{path} cannot be restored: the journal's copy of it is {size} bytes, more than the {kept} tabd \
         keeps of one file, so tabd did not write it"
    )]
    CopyTooLarge {
        path: VaultPath,
        size: String,
        kept: String,
    },
    #[error(
        "{0} no longer begins with what it held before the run (the run only appended to it, so no copy \
         was kept): it cannot be restored"
    )]
    NoLongerBegins(VaultPath),
    #[error("the journal's copy of {path} is gone: {source}")]
    CopyGone { path: VaultPath, source: VaultError },
    #[error("the journal's copy of {0} is not what it recorded (its bytes were changed)")]
    CopyChanged(VaultPath),
}

/// Carries out the `Restore` steps, each journaled in `undo` (so the undo can be undone), each
/// path checked for links once more just before it is written.
pub fn apply(vault: &Vault, steps: &[Step], undo: &RunJournal) -> Result<usize, VaultError> {
    let mut done = 0;
    for step in steps {
        let Step::Restore { path, to, prefix, .. } = step else {
            continue;
        };
        let p = fixed(path)?;
        no_link(vault, &p).map_err(|e| VaultError::Refused(e.to_string()))?;
        // Read before the undo's own journal keeps the file: the prefix is in the file itself.
        let prior = match to {
            Some(hash) => Some(
                prior_bytes(vault, &p, hash, *prefix, undo.max_kept())
                    .map_err(|e| VaultError::Refused(e.to_string()))?,
            ),
            None => None,
        };
        undo.before_change(&p)?;
        match prior {
            Some(bytes) => vault.write_atomic(&p, &bytes)?,
            None => match vault.remove_file(&p) {
                Ok(()) | Err(VaultError::NotFound(_)) => {}
                Err(e) => return Err(e),
            },
        }
        undo.settle()?;
        done += 1;
    }
    Ok(done)
}
