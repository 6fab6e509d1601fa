//! Floor 6, the gate: the harness, the one door every tool call goes through, the person's hooks
//! around its calls, and approval notes.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod approvals;
pub mod harness;
pub mod hooks;
