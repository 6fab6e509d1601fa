//! Floor 3, what the person wrote, typed and checked: the config file, the role files and the
//! skills they list.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod config;
pub mod role;
pub mod skills;
