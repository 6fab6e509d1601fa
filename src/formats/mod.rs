//! Floor 2: formats.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod frontmatter;
pub mod schedule;
