//! Floor 2, formats: YAML frontmatter with true line numbers, and schedule phrases turned into
//! cron and next fires.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod frontmatter;
pub mod schedule;
