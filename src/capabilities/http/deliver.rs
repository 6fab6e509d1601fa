//! Where a checked delivery becomes a note: the hook's role is looked up in the role files as
//! they are now (a role renamed, its inbox moved, its file broken since tabd started), the
//! delivery id is checked against those already written, and the note is created in the role's
//! inbox — under a temp name, then renamed into place without replacing anything (a note moved
//! in is complete at once, docs/spec.md §5) — and its id kept.
//!
//! One delivery at a time: the check, the write and the record of one id happen together, so a
//! redelivery racing the first delivery is written once. Blocking file work: the server calls
//! this off its tasks (`spawn_blocking`).

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use super::note::{self, Delivery};
use super::seen::DeliveryIds;
use crate::base::signing::Key;
use crate::base::vault::{protected, Vault, VaultError, VaultPath};
use crate::setup::role::{LoadContext, RoleSet};

/// What a delivery left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A new note, at this path.
    Note(VaultPath),
    /// Its id was written before: nothing now.
    Again,
}

/// Why a delivery whose signature held was not written.
#[derive(Debug, thiserror::Error)]
pub enum NotWritten {
    #[error("no role `{0}` in the vault's role files (or it is abstract): nothing written")]
    NoRole(String),
    #[error("role `{0}`'s file has errors: nothing written until a person fixes it (`tabd validate`)")]
    Broken(String),
    #[error("role `{role}`'s inbox {inbox} is in {owned}, which is tabd's own ({why}): nothing written")]
    TabdsFolder {
        role: String,
        inbox: String,
        owned: String,
        why: &'static str,
    },
    #[error("cannot write the note into {inbox}: {source}")]
    Write {
        inbox: String,
        #[source]
        source: VaultError,
    },
}

/// Writes deliveries into their roles' inboxes.
pub struct Desk {
    vault: Arc<Vault>,
    key: Arc<Key>,
    roles: LoadContext,
    seen: Mutex<DeliveryIds>,
}

impl Desk {
    /// `roles`: how the role files are read (the config's time zone and environment).
    pub fn new(vault: Arc<Vault>, key: Arc<Key>, roles: LoadContext, seen: DeliveryIds) -> Self {
        Self {
            vault,
            key,
            roles,
            seen: Mutex::new(seen),
        }
    }

    /// Whether `hook` wrote delivery `id` already (a quick look before the rate is counted).
    pub fn seen(&self, hook: &str, id: &str) -> bool {
        self.lock().contains(hook, id)
    }

    /// Writes `d` as a note received at `now`, unless its id was written before.
    pub fn deliver(&self, d: &Delivery, now: DateTime<Utc>) -> Result<Written, NotWritten> {
        let mut seen = self.lock();
        if let Some(id) = &d.id {
            if seen.contains(&d.hook, id) {
                return Ok(Written::Again);
            }
        }
        let inbox = self.inbox_of(&d.hook)?;
        let note = note::render(d, now);
        let path = self
            .vault
            .create_unique(&inbox, &note.name, note.text.as_bytes())
            .map_err(|source| NotWritten::Write {
                inbox: inbox.to_string(),
                source,
            })?;
        if let Some(id) = &d.id {
            if let Err(e) = seen.record(&self.vault, &self.key, &d.hook, id) {
                tracing::warn!(
                    "webhook `{}`: wrote {path}, but cannot keep its delivery id ({e}); after a restart a redelivery of it would be written again",
                    d.hook
                );
            }
        }
        Ok(Written::Note(path))
    }

    /// The inbox of role `name`, as its file says now.
    fn inbox_of(&self, name: &str) -> Result<VaultPath, NotWritten> {
        let roles = RoleSet::load(&self.vault, &self.roles);
        inbox_of(&self.vault, &roles, name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeliveryIds> {
        // A panic while holding it left the ids as they were before that delivery: still sound.
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Writes `note` into role `name`'s inbox as a person's note is: under a temp name, renamed in
/// without replacing anything. The note's path.
pub fn write_note(
    vault: &Vault,
    roles: &RoleSet,
    name: &str,
    note: &note::Note,
) -> Result<VaultPath, NotWritten> {
    let inbox = inbox_of(vault, roles, name)?;
    vault
        .create_unique(&inbox, &note.name, note.text.as_bytes())
        .map_err(|source| NotWritten::Write {
            inbox: inbox.to_string(),
            source,
        })
}

/// The inbox of role `name` in `roles`, unless it is in a folder that is tabd's own.
fn inbox_of(vault: &Vault, roles: &RoleSet, name: &str) -> Result<VaultPath, NotWritten> {
    {
        let role = match roles.roles.get(name) {
            Some(r) if !r.is_abstract => r,
            _ if roles.broken.contains_key(name) => return Err(NotWritten::Broken(name.to_string())),
            _ => return Err(NotWritten::NoRole(name.to_string())),
        };
        let inbox = &role.inbox;
        if let Some((owned, why)) = protected::owned_by_tabd(&protected::fold(inbox.as_str()), vault.layout())
        {
            return Err(NotWritten::TabdsFolder {
                role: name.to_string(),
                inbox: inbox.to_string(),
                owned,
                why,
            });
        }
        Ok(inbox.clone())
    }
}
