//! Approvals (docs/spec.md §15): a risky call waits for the person, then runs exactly once.
//!
//! - `policy` — a call's mode (auto, ask, deny) from the role's `approve` map and the risk class;
//! - `note` — the approval note a person reads and decides in Obsidian: writing, reading, updating;
//! - `request` — the run's side: an `ask` call becomes a note (or reuses a pending one);
//! - `gist` — what a call is about in one line: its target and the first lines of its change;
//! - `person` — a change to the person's own note: the diff the note shows, and the note's state
//!   when asked (an edit made since is never written over);
//! - `followup` — what a decision still owes its note and the daily log, finished after a crash;
//! - `checkpoint` — a run's checkpoint every N tool calls: a request for the pseudo-call
//!   `checkpoint`, approved to go on (with the person's instruction) or rejected to stop;
//! - `token` — the decision token a push's button carries: signed by tabd, bound to one request.
//!
//! Elsewhere: the ledger, tabd's durable record of each request that makes "at most once" hold
//! across crashes, restarts and duplicate events, is `state::approval_ledger`; the daemon's side —
//! approved notes run, rejected ones closed, old ones expired, a crash mid-call left `unknown` —
//! is the `approval_pass` door.

pub mod checkpoint;
pub mod followup;
pub mod gist;
pub mod note;
pub mod person;
pub mod policy;
pub mod request;
pub mod token;

pub use crate::records::state::approval_ledger::{Approval, NoteStatus};
pub use policy::mode_for;
