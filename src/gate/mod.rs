//! Floor 6: the one door every tool call goes through; approval notes.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod approvals;
pub mod harness;
