//! Floor 1, foundations: the only way to touch the vault, children as tenants and their sandbox,
//! clocks, costs, the tool-call vocabulary, text; what every floor above stands on.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub(crate) mod blocking;
pub mod calls;
pub mod clock;
pub mod cost;
pub mod diag;
pub mod environment;
pub mod faults;
pub mod fence;
pub mod memory;
pub mod process;
pub mod progress;
pub mod run_id;
pub mod sandbox;
pub mod sidewrites;
pub mod signing;
pub(crate) mod template;
pub mod text;
pub mod trigger;
pub mod vault;
