//! Floor 2, formats: YAML frontmatter with true line numbers, JSON from outside bounded in depth,
//! and schedule phrases turned into cron and next fires.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod frontmatter;
pub mod json;
pub mod schedule;
