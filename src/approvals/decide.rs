//! The daemon's side of approvals. Filled in below.
