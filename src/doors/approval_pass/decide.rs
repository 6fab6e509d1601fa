//! One decision, from wherever the person makes it (docs/spec.md §15, §27): `tabd approve`/`reject` on a
//! terminal and a tap on a push's button both come here, and both decide in the ledger, under its
//! lock, by one rule (`apply`): an open request is approved or rejected; the same decision twice
//! is no change; anything else is refused with what it was. So only the first decision counts,
//! however many channels the person has, and the daemon's pass runs what the ledger says.
//!
//! A tap (`tap`) is a decision token (`gate::approvals::token`) first checked for what only tabd
//! can know: that tabd signed it, that it has not run out and was not used before (a mark outside
//! the vault, made once the decision is in), that it names this request (its id and expiry), and
//! that the note's arguments are still the ones the push showed. Each refusal has its reason, for
//! the daily line; none quotes the token.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::base::vault::{VaultError, VaultPath};
use crate::gate::approvals::token::{self, Claim, NotAToken};
use crate::gate::approvals::{followup, note};
use crate::records::state::approval_ledger::{self, Approval, DecidedBy, Followup, NoteStatus};
use crate::running::run::RunEnv;

/// The kind of tabd's marks (outside the vault) of the decision tokens it took: a token taken
/// once is refused after, whatever a restored vault says.
pub const TOKENS_TAKEN: &str = "ntfy-tokens";

/// Longest note read to check its arguments (an approval note is a few KiB).
const MAX_NOTE_BYTES: u64 = 1024 * 1024;

/// What a decision came to.
#[derive(Debug)]
pub enum Decided {
    /// Recorded now.
    Now { id: String, a: Approval },
    /// It was already decided that way.
    Already { id: String, a: Approval },
}

/// Why a request cannot be decided, as `tabd approve`/`tabd reject` print it.
#[derive(Debug, thiserror::Error)]
pub enum NotDecided {
    #[error(transparent)]
    NotFound(#[from] approval_ledger::FindError),
    #[error("approval {0} is still being written into its note; try again in a moment")]
    BeingWritten(String),
    #[error("approval {id} expired{at}; nothing will run — ask the role again")]
    Expired { id: String, at: At },
    #[error("approval {id} was approved{at}: it runs once, and can no longer be rejected")]
    Approved { id: String, at: At },
    #[error(
        "approval {id} was rejected{at}: nothing ran, and a rejected call never runs — ask the role again"
    )]
    Rejected { id: String, at: At },
    #[error("approval {0} is running now: there is nothing to decide")]
    Running(String),
    #[error("approval {id} already ran ({phase}); an approval runs at most once — ask the role again")]
    Ran { id: String, phase: NoteStatus },
    #[error("approval {id} is {phase}: there is nothing to decide")]
    Closed { id: String, phase: NoteStatus },
}

/// ` at 2026-11-28 17:05` in the config's zone, or nothing when the time is not known.
#[derive(Debug)]
pub struct At(Option<DateTime<Tz>>);

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(t) => write!(f, " at {}", t.format("%Y-%m-%d %H:%M")),
            None => Ok(()),
        }
    }
}

/// Why `a` cannot be decided now (`None`: it is open to a decision).
fn refusal(id: &str, a: &Approval, (now, tz): (DateTime<Utc>, Tz)) -> Option<NotDecided> {
    let id = id.to_string();
    let at = |t: Option<DateTime<Utc>>| At(t.map(|t| t.with_timezone(&tz)));
    match a.phase {
        _ if a.followup.is_some() => Some(NotDecided::BeingWritten(id)),
        NoteStatus::Pending if a.expires <= now => Some(NotDecided::Expired {
            id,
            at: at(Some(a.expires)),
        }),
        p if p.is_open() => None,
        NoteStatus::Approved => Some(NotDecided::Approved {
            id,
            at: at(a.decided),
        }),
        NoteStatus::Rejected => Some(NotDecided::Rejected {
            id,
            at: at(a.decided),
        }),
        NoteStatus::Executing => Some(NotDecided::Running(id)),
        phase @ (NoteStatus::Done | NoteStatus::Failed) => Some(NotDecided::Ran { id, phase }),
        phase => Some(NotDecided::Closed { id, phase }),
    }
}

/// The decision rule on the fresh record, under the ledger's lock: approve or reject what is
/// open; the same decision twice is no change; any other is refused with the reason. `by`: where
/// the person decided (the note's line and the daily line say so).
pub fn apply(
    id: &str,
    a: &mut Approval,
    approved: bool,
    (now, tz): (DateTime<Utc>, Tz),
    (who, by): (String, DecidedBy),
) -> Result<Decided, NotDecided> {
    let target = if approved {
        NoteStatus::Approved
    } else {
        NoteStatus::Rejected
    };
    if a.phase == target {
        return Ok(Decided::Already {
            id: id.to_string(),
            a: a.clone(),
        });
    }
    if let Some(why) = refusal(id, a, (now, tz)) {
        return Err(why);
    }
    a.phase = target;
    a.decided = Some(now);
    a.decided_by = Some(by);
    let shown = crate::base::text::shown(now, tz);
    let whence = by.words(approved);
    a.followup = Some(if approved {
        // From the terminal the command's own output says it; from a phone the note and the day
        // say where the decision came from.
        let (line, daily) = match by {
            DecidedBy::Phone => (
                match a.is_checkpoint() {
                    true => format!("**Approved** ({shown}, {whence}): the run goes on."),
                    false => format!("**Approved** ({shown}, {whence}): tabd runs it once."),
                },
                format!("approval `{id}` ({}) approved {whence}", a.tool),
            ),
            DecidedBy::Note | DecidedBy::Terminal => (String::new(), String::new()),
        };
        Followup {
            status: NoteStatus::Approved,
            line,
            daily,
            who,
            at: now,
        }
    } else {
        a.reported = false;
        a.outcome = Some(crate::gate::approvals::checkpoint::rejected(a));
        Followup {
            status: NoteStatus::Rejected,
            line: match a.is_checkpoint() {
                true => format!("**Rejected** ({shown}, {whence}): the run stops here."),
                false => format!("**Rejected** ({shown}, {whence}): nothing was run."),
            },
            // The terminal's line as it always was (scripts read it); a phone's says so.
            daily: match by {
                _ if a.is_checkpoint() => {
                    format!("checkpoint `{id}` of run `{}`: stopped by you {whence}", a.run_id)
                }
                DecidedBy::Phone => format!("approval `{id}` ({}) rejected {whence} — nothing ran", a.tool),
                DecidedBy::Note | DecidedBy::Terminal => {
                    format!("approval `{id}` ({}) rejected — nothing ran", a.tool)
                }
            },
            who,
            at: now,
        }
    });
    Ok(Decided::Now {
        id: id.to_string(),
        a: a.clone(),
    })
}

/// How a request that can no longer be decided was decided, for a tap that came after:
/// `approved in its note at 2026-11-28 17:05`.
pub fn how_decided(a: &Approval, tz: Tz) -> String {
    let (what, then) = match a.phase {
        // A checkpoint runs nothing: the run went on, or stopped.
        NoteStatus::Rejected if a.is_checkpoint() => ("stopped", ""),
        _ if a.is_checkpoint() && a.phase != NoteStatus::Expired => ("continued", ""),
        NoteStatus::Rejected => ("rejected", ""),
        NoteStatus::Expired => ("expired unanswered", ""),
        NoteStatus::Executing => ("approved", "; it is running"),
        NoteStatus::Done => ("approved", "; it ran"),
        NoteStatus::Failed => ("approved", "; it ran and failed"),
        _ => ("approved", ""),
    };
    let whence = match a.decided_by {
        Some(by) if a.phase != NoteStatus::Expired => {
            format!(" {}", by.words(!matches!(what, "rejected" | "stopped")))
        }
        _ => String::new(),
    };
    let at = a
        .decided
        .map(|t| format!(" at {}", crate::base::text::shown(t, tz)))
        .unwrap_or_default();
    format!("{what}{whence}{at}{then}")
}

/// What a tap came to.
#[derive(Debug)]
pub enum Tapped {
    /// Decided now, from the phone.
    Decided { id: String, a: Approval, approved: bool },
    /// Its request was decided before (anywhere): nothing changed. `how` says how
    /// (`how_decided`).
    Already { id: String, a: Approval, how: String },
    /// Not taken, and why.
    Refused(Refused),
}

/// Why a tap was not taken. The words never quote the token (it is a credential).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    NotAToken(#[from] NotAToken),
    #[error("it was used before (a replayed token): a token decides once")]
    Replayed,
    #[error("it ran out at {0} (the approval's own expiry)")]
    Expired(String),
    #[error("it is for approval {0}, of which tabd has no record here (another vault's, or long gone)")]
    Unknown(String),
    #[error("it is for another request that had the id {0} (not the one waiting now)")]
    Another(String),
    #[error("approval {id}'s arguments were edited after the push showed them; decide in its note ({note})")]
    OutOfDate { id: String, note: String },
    #[error("approval {id}'s note cannot be read to check its arguments: {why}")]
    NoNote { id: String, why: String },
    #[error("approval {0} is still being written into its note; tap again in a moment")]
    BeingWritten(String),
    #[error("tabd cannot record the decision: {0}")]
    NotRecorded(String),
}

/// A tap's decision token `text`, decided in the ledger if it holds (see the module's doc), then
/// written into the note and the daily log. Blocking: file writes under the approvals lock.
pub fn tap(env: &RunEnv, text: &str) -> Tapped {
    match tap_checked(env, text) {
        Ok(t) => t,
        Err(why) => Tapped::Refused(why),
    }
}

/// What a token says, once tabd made it, it was not used before and has not run out; and the
/// name it is remembered by once taken.
fn claim_of(env: &RunEnv, text: &str, (now, tz): (DateTime<Utc>, Tz)) -> Result<(Claim, String), Refused> {
    let claim = token::read(&env.key, text)?;
    let taken = token::digest(text);
    if env.key.is_marked(TOKENS_TAKEN, &taken) {
        return Err(Refused::Replayed);
    }
    if claim.expired(now) {
        let at = DateTime::from_timestamp(claim.exp, 0)
            .map_or_else(String::new, |t| crate::base::text::shown(t, tz));
        return Err(Refused::Expired(at));
    }
    Ok((claim, taken))
}

fn tap_checked(env: &RunEnv, text: &str) -> Result<Tapped, Refused> {
    let (now, tz) = (env.clock.now(), env.config.timezone);
    let (claim, taken) = claim_of(env, text, (now, tz))?;
    let recorded = |e: VaultError| Refused::NotRecorded(e.to_string());
    let held = followup::hold(&env.vault).map_err(recorded)?;
    // What an earlier decision still owes its note (a crash cut it short), before this one.
    held.finish(&env.store, &env.log, &env.faults).map_err(recorded)?;
    let ledger = env.store.try_load().map_err(recorded)?.approvals;
    let a = ledger
        .get(&claim.id)
        .ok_or_else(|| Refused::Unknown(claim.id.clone()))?;
    if a.expires.timestamp() != claim.exp {
        return Err(Refused::Another(claim.id.clone()));
    }
    let who = env
        .roles
        .roles
        .get(&a.role)
        .map_or(a.role.clone(), |r| r.display_name.clone());
    // Decided already: said so, whatever the note says since.
    if a.phase != NoteStatus::Pending || a.expires <= now {
        if let Some(tapped) = already(&claim, a, (now, tz)) {
            take(env, &taken);
            return Ok(tapped);
        }
    }
    check_arguments(env, &claim, a)?;
    let decided = env
        .store
        .update(|s| {
            let a = s
                .approvals
                .get_mut(&claim.id)
                .ok_or_else(|| Box::new(NotDecided::BeingWritten(claim.id.clone())))?;
            apply(
                &claim.id,
                a,
                claim.d.approves(),
                (now, tz),
                (who, DecidedBy::Phone),
            )
            .map_err(Box::new)
        })
        .map_err(recorded)?;
    let tapped = match decided {
        Ok(Decided::Now { id, a }) => Tapped::Decided {
            id,
            a,
            approved: claim.d.approves(),
        },
        Ok(Decided::Already { id, a }) => Tapped::Already {
            how: how_decided(&a, tz),
            id,
            a,
        },
        Err(why) => match *why {
            // Gone or still owing its note since the look above: tap again in a moment.
            NotDecided::BeingWritten(id) => return Err(Refused::BeingWritten(id)),
            _ => Tapped::Already {
                how: how_decided(a, tz),
                id: claim.id.clone(),
                a: a.clone(),
            },
        },
    };
    take(env, &taken);
    env.faults.abort_at("approval-tapped");
    if let Err(e) = held.finish(&env.store, &env.log, &env.faults) {
        tracing::warn!("approvals: the decision from a phone is recorded; its note waits: {e}");
    }
    Ok(tapped)
}

/// A tap on a request that is decided (or expired) already: `None` when it is still open to a
/// decision (a request that became `invalid` or `unknown` may be approved again).
fn already(claim: &Claim, a: &Approval, (now, tz): (DateTime<Utc>, Tz)) -> Option<Tapped> {
    let open = a.phase.is_open() && !(a.phase == NoteStatus::Pending && a.expires <= now);
    if open {
        return None;
    }
    Some(Tapped::Already {
        id: claim.id.clone(),
        a: a.clone(),
        how: how_decided(a, tz),
    })
}

/// The note's arguments as they stand must be those the push showed (the token's hash): a note
/// edited since was not what the person saw on the lock screen.
fn check_arguments(env: &RunEnv, claim: &Claim, a: &Approval) -> Result<(), Refused> {
    // A checkpoint has no arguments and runs nothing: the token's id and expiry bind it.
    if a.is_checkpoint() {
        return Ok(());
    }
    let no_note = |why: String| Refused::NoNote {
        id: claim.id.clone(),
        why,
    };
    let path = VaultPath::parse(&a.note, false).map_err(|e| no_note(e.to_string()))?;
    let text = env
        .vault
        .read_text(&path, MAX_NOTE_BYTES)
        .map_err(|e| no_note(e.to_string()))?;
    let read = note::read(&text).map_err(|e| no_note(e.to_string()))?;
    let args = read.args.map_err(|e| no_note(e.to_string()))?;
    let tool = read.tool.unwrap_or_default();
    if approval_ledger::args_hash(&tool, &args) != claim.args {
        return Err(Refused::OutOfDate {
            id: claim.id.clone(),
            note: a.note.clone(),
        });
    }
    Ok(())
}

/// Forgets the marks of tokens taken longer ago than any token lives (`expire_after`, the
/// longest an approval waits, and a day for clocks that differ): an older token runs out first.
pub fn forget_old_tokens(env: &RunEnv) -> usize {
    let day = std::time::Duration::from_secs(86_400);
    env.key
        .forget_marks_older_than(TOKENS_TAKEN, env.config.approvals.expire_after + day)
}

/// Remembers token `taken` (its digest) outside the vault, durably: the same token is refused
/// from now on. A mark that cannot be made is said; the ledger still holds the first decision.
fn take(env: &RunEnv, taken: &str) {
    if let Err(e) = env.key.mark(TOKENS_TAKEN, taken, true) {
        tracing::warn!("approvals: cannot remember a decision token as used: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Approval {
        serde_json::from_value(serde_json::json!({
            "role": "ops", "tool": "write_file", "exposed": "write_file", "risk": "write",
            "note": "agent/approvals/n.md", "args_hash": "h", "run_id": "r",
            "created": "2026-11-22T09:00:00Z", "expires": "2026-11-24T09:00:00Z", "phase": "pending"
        }))
        .unwrap()
    }

    const NOW: &str = "2026-11-23T09:00:00Z";

    fn at(s: &str) -> (DateTime<Utc>, Tz) {
        (s.parse().unwrap(), chrono_tz::UTC)
    }

    /// Only the first decision counts: a second, other decision is refused with the first.
    #[test]
    fn the_first_decision_counts_and_says_where_it_came_from() {
        let mut a = pending();
        let first = apply("abc123", &mut a, true, at(NOW), ("Ops".into(), DecidedBy::Phone));
        assert!(matches!(first, Ok(Decided::Now { .. })), "{first:?}");
        let f = a.followup.clone().unwrap();
        assert!(f.line.contains("from your phone") && f.daily.contains("approved from your phone"));
        a.followup = None;
        let again = apply("abc123", &mut a, true, at(NOW), ("Ops".into(), DecidedBy::Note));
        assert!(matches!(again, Ok(Decided::Already { .. })), "{again:?}");
        let other = apply(
            "abc123",
            &mut a,
            false,
            at(NOW),
            ("Ops".into(), DecidedBy::Terminal),
        );
        assert!(matches!(other, Err(NotDecided::Approved { .. })), "{other:?}");
        assert_eq!(a.decided_by, Some(DecidedBy::Phone));
        assert_eq!(
            how_decided(&a, chrono_tz::UTC),
            "approved from your phone at 2026-11-23 09:00"
        );
    }

    #[test]
    fn a_rejection_says_where_it_came_from_in_the_note_and_the_day() {
        let mut a = pending();
        apply(
            "abc123",
            &mut a,
            false,
            at(NOW),
            ("Ops".into(), DecidedBy::Terminal),
        )
        .unwrap();
        let f = a.followup.clone().unwrap();
        assert_eq!(
            f.line,
            "**Rejected** (2026-11-23 09:00, with `tabd reject`): nothing was run."
        );
        assert_eq!(f.daily, "approval `abc123` (write_file) rejected — nothing ran");
        let mut a = pending();
        apply("abc123", &mut a, false, at(NOW), ("Ops".into(), DecidedBy::Phone)).unwrap();
        assert!(a.followup.unwrap().daily.contains("rejected from your phone"));
    }

    #[test]
    fn how_a_request_was_decided_reads_as_words() {
        let mut a = pending();
        a.phase = NoteStatus::Done;
        a.decided_by = Some(DecidedBy::Note);
        a.decided = Some("2026-11-23T17:05:00Z".parse().unwrap());
        assert_eq!(
            how_decided(&a, chrono_tz::UTC),
            "approved in its note at 2026-11-23 17:05; it ran"
        );
        a.phase = NoteStatus::Expired;
        assert_eq!(
            how_decided(&a, chrono_tz::UTC),
            "expired unanswered at 2026-11-23 17:05"
        );
    }

    /// A checkpoint ran nothing: it was continued or stopped, and a tap on Stop is told so
    /// with the words of a rejection ("with `tabd reject`").
    #[test]
    fn a_checkpoint_reads_as_continued_or_stopped() {
        let mut a = pending();
        a.kind = approval_ledger::Kind::Checkpoint { calls: 3, every: 3 };
        a.decided = Some("2026-11-23T17:05:00Z".parse().unwrap());
        a.phase = NoteStatus::Done;
        a.decided_by = Some(DecidedBy::Phone);
        assert_eq!(
            how_decided(&a, chrono_tz::UTC),
            "continued from your phone at 2026-11-23 17:05"
        );
        a.phase = NoteStatus::Rejected;
        a.decided_by = Some(DecidedBy::Terminal);
        assert_eq!(
            how_decided(&a, chrono_tz::UTC),
            "stopped with `tabd reject` at 2026-11-23 17:05"
        );
        let mut b = pending();
        b.kind = approval_ledger::Kind::Checkpoint { calls: 3, every: 3 };
        apply("abc123", &mut b, false, at(NOW), ("Ops".into(), DecidedBy::Phone)).unwrap();
        assert_eq!(b.outcome.as_deref(), Some("stopped by you"));
        let f = b.followup.unwrap();
        assert!(f.line.contains("the run stops here"), "{}", f.line);
        assert!(f.daily.starts_with("checkpoint `abc123` of run"), "{}", f.daily);
    }
}
