//! A child's sandbox as the person writes it in `[mcp.NAME]` or `[profiles.NAME]` (docs/spec.md §20):
//! typed data only. The type lives on the floor of the sandbox that enforces it, beside the grant
//! policy that reads it (`base::sandbox::grants`), and the config holds it as it holds any value.

pub use crate::base::sandbox::grants::{ChildSandbox, VaultAccess};
