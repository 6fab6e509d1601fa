//! The run's side of `checkpoint_every` (docs/spec.md §28): its turn asks here for a checkpoint's
//! request and note (`gate::approvals::checkpoint`); the run then waits as for an approval.

use std::sync::Arc;

use crate::base::clock::Clock;
use crate::gate::approvals::checkpoint::{self, At};
use crate::gate::approvals::request::AskContext;
use crate::records::state::StateStore;
use crate::running::turn::{AskCheckpoint, Checkpoints};
use crate::setup::role::Role;

/// Writes a run's checkpoints.
struct Asker {
    store: StateStore,
    ctx: AskContext,
    role: Role,
    hops: u32,
    clock: Arc<dyn Clock>,
}

impl AskCheckpoint for Asker {
    fn ask(&self, at: &At) -> Result<String, String> {
        let now = self.clock.now();
        crate::base::blocking::run(|| checkpoint::ask(&self.store, &self.ctx, &self.role, at, self.hops, now))
            .map(|q| q.note)
            .map_err(|e| e.to_string())
    }
}

/// The role's checkpoints for a turn of run `ctx.run_id`, `before` tool calls already made; none
/// when the role sets no `checkpoint_every`. A run that cannot wait (`waits` false: a delegated
/// child, `resume: false`) asks nothing: it ends at its checkpoint.
pub(super) fn of(
    role: &Role,
    ctx: AskContext,
    (store, clock): (StateStore, Arc<dyn Clock>),
    (hops, before): (u32, u32),
    waits: bool,
) -> Option<Checkpoints> {
    let every = role.settings.checkpoint_every?;
    let ask: Arc<dyn AskCheckpoint> = Arc::new(Asker {
        store,
        ctx,
        role: role.clone(),
        hops,
        clock,
    });
    Some(Checkpoints {
        every,
        before,
        ask: waits.then_some(ask),
    })
}
