//! Floor 4, records and rules a run reads: state, the inbox, what a role may touch, whose each file is, its limits,
//! its context files, the run logs, the undo journal and what a role is expected to spend.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod access;
pub mod authorship;
pub(crate) mod context;
pub mod forecast;
pub mod inbox;
pub mod journal;
pub(crate) mod limits;
pub mod runlog;
pub mod spent;
pub mod state;
