//! Floor 4: records and rules the run reads.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod access;
pub(crate) mod context;
pub mod inbox;
pub mod journal;
pub(crate) mod limits;
pub mod runlog;
pub mod state;
