//! `tabd undo RUN_ID [--dry-run] [--force] [--requeue] [--with-approved]` (docs/spec.md §19): puts back
//! what a run changed, file by file, only where the file is still as the run left it. A call of
//! the run that the person approved ran later, on its own, with its own journal: undo names each
//! (`journal::approved`), and `--with-approved` undoes them too.

use super::{CliError, Workspace};
use crate::base::run_id::RunId;
use crate::base::vault::VaultPath;
use crate::records::access::AccessPolicy;
use crate::records::journal::approved::ApprovedCall;
use crate::records::journal::{self, ChangedBy, RunChanges, RunJournal, Step};

/// The options of one undo.
pub struct Options {
    pub dry_run: bool,
    pub force: bool,
    pub requeue: bool,
    /// Also undo the calls of the run that the person approved (each ran on its own).
    pub with_approved: bool,
}

/// The approved calls the journals hold, with the runs that asked for each (`journal::approved`).
fn approved_calls(ws: &Workspace, ids: &[RunId]) -> Vec<ApprovedCall> {
    let journals: Vec<RunChanges> = ids
        .iter()
        .filter_map(|id| journal::load(&ws.vault, id, None).ok())
        .collect();
    let ledger = crate::records::state::StateStore::new(ws.vault.clone())
        .load()
        .approvals;
    journal::approved::calls(&journals.iter().collect::<Vec<_>>(), &ledger)
}

/// The run an id or unique id prefix names: a journaled run, or one whose only changes are calls
/// the person approved (`approved`). What is typed is checked first: it names a file (`RunId`),
/// and never a path.
pub fn find(ws: &Workspace, id: &str, approved: &[ApprovedCall]) -> Result<RunId, CliError> {
    let id = RunId::parse(id).map_err(|e| CliError::usage(format!("`{}`: {e}", id.escape_debug())))?;
    let mut ids = journal::run_ids(&ws.vault);
    ids.extend(
        approved
            .iter()
            .flat_map(|c| &c.asked_by)
            .filter_map(|r| RunId::parse(r).ok()),
    );
    ids.sort();
    ids.dedup();
    if ids.contains(&id) {
        return Ok(id);
    }
    let matches: Vec<&RunId> = ids.iter().filter(|i| i.starts_with(id.as_str())).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(CliError::usage(format!(
            "no journaled run `{id}`: it changed no file, or it is older than the journal keeps ([journal] keep_days, \
             max_mib); `tabd runs` lists what can be undone"
        ))),
        many => Err(CliError::usage(format!(
            "`{id}` could be any of {} runs ({} …); give more of the id",
            many.len(),
            many.iter().take(3).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

pub fn run(ws: &Workspace, id: &str, opts: &Options) -> Result<u8, CliError> {
    let journaled = journal::run_ids(&ws.vault);
    let calls = approved_calls(ws, &journaled);
    let run_id = find(ws, id, &calls)?;
    let approved: Vec<&ApprovedCall> = calls.iter().filter(|c| c.asked_by(&run_id)).collect();
    let mut code = 0;
    if opts.with_approved {
        // Newest first, then the run: a file the run's second part changed after a call is put
        // back by the run's undo, which goes back furthest.
        for call in approved.iter().rev() {
            say!(
                "approved call {} (approval {}, {}), asked for by {run_id}:",
                call.run_id,
                call.approval,
                call.tool
            );
            code = code.max(undo_one(ws, &call.run_id, opts)?);
        }
        if !approved.is_empty() {
            say!("run {run_id}:");
        }
    }
    if journaled.contains(&run_id) {
        code = code.max(undo_one(ws, &run_id, opts)?);
    } else {
        say!("run {run_id} changed no file itself; only the calls you approved did");
    }
    if !opts.with_approved && !approved.is_empty() {
        say_approved(&run_id, &approved);
    }
    Ok(code)
}

/// The calls of `run_id` the person approved, each with the undo of it: they ran later, on their
/// own, so undoing the run leaves them.
fn say_approved(run_id: &RunId, approved: &[&ApprovedCall]) {
    say!(
        "{} call{} of this run ran later, approved by you, and {} not undone with it:",
        approved.len(),
        if approved.len() == 1 { "" } else { "s" },
        if approved.len() == 1 { "is" } else { "are" }
    );
    for call in approved {
        say!(
            "  approval {} ({}) ran as {}: undo it with `tabd undo {}`",
            call.approval,
            call.tool,
            call.run_id,
            call.run_id
        );
    }
    say!("  or undo the run and all of them: `tabd undo {run_id} --with-approved`");
}

/// Undoes one journaled run (a run, or an approved call's session): plan, print, put back.
fn undo_one(ws: &Workspace, run_id: &RunId, opts: &Options) -> Result<u8, CliError> {
    let run_id = run_id.clone();
    let key = ws.key()?;
    let entry = journal::load(&ws.vault, &run_id, Some(&key))
        .map_err(|e| CliError::failed(format!("cannot read the journal: {e}")))?;
    // The role's run lock: no run of it changes files while they are put back.
    let _guard = lock(ws, &entry)?;
    // The same gate as the role's own writes (its write_paths, protected paths, no links).
    let policy = ws
        .roles
        .roles
        .get(&entry.role)
        .map_or_else(|| AccessPolicy::new(&[]), AccessPolicy::for_role);
    // A crashed run is planned from its last record after each call: the dry run and the real
    // undo see the same thing.
    let kept = journal::max_kept(&ws.config.journal);
    let steps = journal::plan_undo(&ws.vault, &entry, &policy, opts.force, kept).map_err(|e| match e {
        crate::base::vault::VaultError::Refused(why) => CliError::failed(why),
        other => CliError::failed(format!("cannot read the vault: {other}")),
    })?;
    let requeue = if opts.requeue {
        requeue_moves(ws, &entry)
    } else {
        Vec::new()
    };
    print_plan(&steps, &requeue, opts.dry_run, ws.config.timezone);
    // An older tabd's journal: what it says is signed, but a line removed from it would not show.
    let unnumbered = entry.trust == journal::Trust::Unnumbered;
    if unnumbered {
        say!(
            "  note: this journal was written by an older tabd: its lines are signed but not numbered, so a \
             line removed from it could not be seen; check that every file the run changed is listed above"
        );
    }
    let skipped = steps
        .iter()
        .filter(|s| matches!(s, Step::Skip { .. } | Step::Unknown { .. } | Step::Refused { .. }))
        .count();
    let code = if skipped > 0 || unnumbered { 1 } else { 0 };
    if opts.dry_run {
        return Ok(code);
    }
    let plan = Plan {
        run_id,
        entry,
        steps,
        requeue,
        skipped,
    };
    let wrote_all = carry_out(ws, plan, key, kept, opts)?;
    Ok(if wrote_all { code } else { 1 })
}

/// What a real undo puts back, as planned and printed.
struct Plan {
    run_id: RunId,
    entry: RunChanges,
    steps: Vec<Step>,
    requeue: Vec<(VaultPath, VaultPath)>,
    skipped: usize,
}

/// Puts back what `plan` says, in a journal of the undo's own (so it can be undone), and says what
/// it did. `Ok(false)`: the files are back, but the undo's own record (its daily line, its
/// journal's closing line) could not all be written; a warning on stderr says which.
fn carry_out(
    ws: &Workspace,
    plan: Plan,
    key: std::sync::Arc<journal::Key>,
    kept: u64,
    opts: &Options,
) -> Result<bool, CliError> {
    let Plan {
        run_id,
        entry,
        steps,
        requeue,
        skipped,
    } = plan;
    let now = chrono::Utc::now();
    // One id format for every door; the undone run is named in the log line and the output.
    let undo_id = RunId::new(
        if entry.role.is_empty() {
            "undo"
        } else {
            &entry.role
        },
        now,
    );
    let key_for_authorship = key.clone();
    let journal = RunJournal::new(
        ws.vault.clone(),
        key,
        &undo_id,
        &entry.role,
        now,
        journal::UNDO_TRIGGER,
    )
    .with_max_kept(kept);
    let authorship = crate::records::authorship::Authorship::new(ws.vault.clone(), key_for_authorship);
    let befores = states_before(ws, &steps);
    let restored = journal::apply(&ws.vault, &steps, &journal).map_err(|e| {
        CliError::failed(format!(
            "undo stopped: {e}; run it again to finish (files already put back stay so)"
        ))
    })?;
    follow_authorship(&authorship, &befores, &steps);
    let requeued = requeue_apply(ws, &requeue, &journal);
    let sealed = if crate::base::faults::Faults::from_env(&ws.env).hit("undo-unsealed") {
        Err(crate::base::vault::VaultError::Io(
            "a fault asked for (undo-unsealed)".into(),
        ))
    } else {
        journal.seal(&[], chrono::Utc::now())
    };
    // An undo that changed nothing has no journal: there is no undo of it to offer.
    let undo_of_undo = (restored + requeued > 0).then_some(undo_id.as_str());
    let logged = log_line(ws, &run_id, &entry, restored, skipped, requeued, undo_of_undo);
    say_done(
        &run_id,
        restored,
        skipped,
        opts.requeue.then_some(requeued),
        undo_of_undo,
    );
    if let Err(e) = &logged {
        say_err!("warning: the daily note has no line of this undo: {e}");
    }
    // Its files are back, but its own undo would read the journal as a run cut off.
    if let Err(e) = &sealed {
        say_err!("warning: the journal of this undo could not be closed: {e}");
    }
    Ok(logged.is_ok() && sealed.is_ok())
}

/// What the undo did, and the undo of it where it changed something (`requeued`: with
/// `--requeue`, the notes moved back).
fn say_done(
    run_id: &str,
    restored: usize,
    skipped: usize,
    requeued: Option<usize>,
    undo_of_undo: Option<&str>,
) {
    let counts = format!(
        "{restored} file{} restored, {skipped} skipped{}",
        if restored == 1 { "" } else { "s" },
        requeued.map_or(String::new(), |n| format!(", {n} note(s) back in the inbox"))
    );
    match undo_of_undo {
        Some(id) => say!("undid {run_id}: {counts}; undo this undo with `tabd undo {id}`"),
        None => say!("undid nothing of {run_id}: {counts}; nothing changed, so there is no undo of it"),
    }
}

fn lock(ws: &Workspace, entry: &RunChanges) -> Result<Option<crate::base::vault::FileLock>, CliError> {
    if entry.role.is_empty() {
        return Ok(None);
    }
    let path = crate::running::run::run_lock_path(&entry.role);
    let guard = ws
        .vault
        .lock(&path, false)
        .map_err(|e| CliError::failed(format!("cannot take the run lock: {e}")))?
        .ok_or_else(|| {
            CliError::failed(format!(
                "{} is running right now; undo when it finishes (its files may be changing)",
                entry.role
            ))
        })?;
    Ok(Some(guard))
}

/// Notes the run moved out of the inbox that can go back: still where the run put them, and
/// nothing in their old place.
fn requeue_moves(ws: &Workspace, entry: &RunChanges) -> Vec<(VaultPath, VaultPath)> {
    entry
        .moved
        .iter()
        .filter_map(|(from, to)| {
            Some((
                VaultPath::parse(to, false).ok()?,
                VaultPath::parse(from, false).ok()?,
            ))
        })
        .filter(|(now, back)| ws.vault.exists(now) && !ws.vault.exists(back))
        .collect()
}

/// What each file an undo puts back holds before it does (digests; `None`: absent).
fn states_before(ws: &Workspace, steps: &[journal::Step]) -> Vec<(VaultPath, Option<String>)> {
    steps
        .iter()
        .filter_map(|s| match s {
            journal::Step::Restore { path, .. } => VaultPath::parse(path, false).ok(),
            _ => None,
        })
        .map(|p| {
            let state = journal::state_of(&ws.vault, &p).ok().flatten();
            (p, state)
        })
        .collect()
}

/// The authorship record follows what the undo put back: a file tabd made stays tabd's with its
/// earlier bytes, or is dropped when the undo removed it (docs/spec.md §26). A record that cannot be
/// written only makes those files ask before their next change: said, not fatal.
fn follow_authorship(
    authorship: &crate::records::authorship::Authorship,
    befores: &[(VaultPath, Option<String>)],
    steps: &[journal::Step],
) {
    for step in steps {
        let journal::Step::Restore { path, to, .. } = step else {
            continue;
        };
        let Some((p, before)) = befores.iter().find(|(p, _)| p.as_str() == path) else {
            continue;
        };
        if let Err(e) = authorship.restored(p, before.as_deref(), to.as_deref()) {
            tracing::warn!(
                "cannot record whose {p} is after the undo ({e}); its next change asks the person"
            );
            return;
        }
    }
}

fn requeue_apply(ws: &Workspace, moves: &[(VaultPath, VaultPath)], journal: &RunJournal) -> usize {
    let mut n = 0;
    for (now, back) in moves {
        let ok = journal.before_change(now).is_ok()
            && journal.before_change(back).is_ok()
            && ws.vault.rename_noreplace(now, back).is_ok();
        if ok {
            n += 1;
        } else {
            say_err!("could not move {now} back to {back}");
        }
    }
    n
}

fn print_plan(steps: &[Step], requeue: &[(VaultPath, VaultPath)], dry_run: bool, tz: chrono_tz::Tz) {
    let will = if dry_run { "would " } else { "" };
    for step in steps {
        match step {
            Step::Restore { path, to, loses, .. } => {
                let what = match to {
                    Some(_) => format!("{will}restore  {path}"),
                    None => format!("{will}remove   {path} (the run created it)"),
                };
                // --force: say whose changes go with it, before they go.
                let lost = match loses {
                    None => String::new(),
                    Some(ChangedBy::Run(run)) => format!(" — {will}overwrite what run {run} changed in it since"),
                    Some(ChangedBy::Other { at: Some(t) }) => format!(
                        " — {will}overwrite the change made to it at {} (by you or another program)",
                        crate::base::text::shown(*t, tz)
                    ),
                    Some(ChangedBy::Other { at: None }) => format!(
                        " — {will}overwrite changes made to it since the run (by you or another program)"
                    ),
                };
                say!("  {what}{lost}");
            }
            Step::AlreadyBefore { path } => say!("  unchanged {path} (already as before the run)"),
            Step::Unknown { path } => say!(
                "  skip     {path}: the run ended before it recorded what it left (a crash); --force restores it"
            ),
            Step::Refused { path, why } => say!("  refuse   {path}: {why}"),
            Step::Skip { path, by } => match by {
                ChangedBy::Run(id) => {
                    say!("  skip     {path}: changed since by run {id} (undo that first, or --force)")
                }
                ChangedBy::Other { at: Some(t) } => say!(
                    "  skip     {path}: changed since by you (or another program) at {} (--force overwrites)",
                    crate::base::text::shown(*t, tz)
                ),
                ChangedBy::Other { at: None } => say!(
                    "  skip     {path}: changed since the run by you (or another program; --force overwrites)"
                ),
            },
        }
    }
    for (now, back) in requeue {
        say!("  {will}requeue  {now} → {back}");
    }
}

fn log_line(
    ws: &Workspace,
    run_id: &str,
    entry: &RunChanges,
    restored: usize,
    skipped: usize,
    requeued: usize,
    undo_id: Option<&str>,
) -> Result<(), CliError> {
    // tabd's key was read when the undo began; gone since, the line cannot be written: said as
    // a line the vault refuses is.
    let log = ws.run_log()?;
    let now = chrono::Utc::now();
    let who = ws
        .roles
        .roles
        .get(&entry.role)
        .map_or(entry.role.clone(), |r| r.display_name.clone());
    let mut text = format!("undid run `{run_id}`: {restored} restored, {skipped} skipped");
    if requeued > 0 {
        text.push_str(&format!(", {requeued} note(s) back in the inbox"));
    }
    if let Some(id) = undo_id {
        text.push_str(&format!(" (undo it: `tabd undo {id}`)"));
    }
    log.write_line(now, &who, &text)
        .map_err(|e| CliError::failed(e.to_string()))
}
