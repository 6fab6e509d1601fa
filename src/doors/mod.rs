//! Floor 8, the doors: `tabd run` (the daemon), the approvals pass, the subcommands and their
//! arguments.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod approval_pass;
pub mod args;
pub mod commands;
pub(crate) mod daemon;
