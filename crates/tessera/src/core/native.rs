//! The conduit's own collectives (MPI's on the `mpi` conduit), as the model's teams reach
//! them: a group per team, and each call waited for by the core's wait, so the rank keeps
//! serving active messages and the watchdog applies while the library works.
//!
//! Creating a group is a blocking call of the library (`MPI_Comm_dup`, `MPI_Comm_split`;
//! MPI has no nonblocking split), during which the rank serves nobody. Teams call it right
//! after a barrier or a collective of the parent team, whose messages never need their
//! sender again once it has finished its part (see the `channel` module), so no member
//! can be waiting for one that is inside the call.
//!
//! This module must never choose algorithms or look at element types: the model decides
//! what to ask for; this only forwards it and waits.

use super::Context;
use crate::conduit::NativeCollectives;
pub(crate) use crate::conduit::{NativeCall, NativeOp};
use crate::Result;

/// The conduit's own collectives; only called where a group or ticket exists, which only
/// such a conduit hands out.
fn library(ctx: &Context) -> &dyn NativeCollectives {
    ctx.conduit()
        .native_collectives()
        .expect("groups and tickets exist only on a conduit with native collectives")
}

/// A group of the conduit's own collectives, held by a team and the copies of it; freed
/// when the last of them goes.
pub(crate) struct NativeGroup<'a> {
    ctx: &'a Context,
    id: u64,
}

impl Drop for NativeGroup<'_> {
    fn drop(&mut self) {
        if let Some(native) = self.ctx.conduit().native_collectives() {
            native.group_free(self.id);
        }
    }
}

impl<'a> NativeGroup<'a> {
    /// A group of every rank, or `None` when the conduit has no collectives of its own.
    /// Collective over the job.
    pub(crate) fn world(ctx: &'a Context) -> Result<Option<NativeGroup<'a>>> {
        let Some(native) = ctx.conduit().native_collectives() else {
            return Ok(None);
        };
        let id = native.group_world()?;
        Ok(Some(NativeGroup { ctx, id }))
    }

    /// Split this group: members with the same `colour` form a group, ordered by `key`.
    /// Collective over this group's members.
    pub(crate) fn split(&self, colour: Option<u32>, key: u32) -> Result<Option<NativeGroup<'a>>> {
        let id = library(self.ctx).group_split(self.id, colour, key)?;
        Ok(id.map(|id| NativeGroup { ctx: self.ctx, id }))
    }

    /// Perform `call` on the group, waiting with the core's wait (progress, watchdog).
    pub(crate) fn run(&self, call: NativeCall<'_>) -> Result<()> {
        let ctx = self.ctx;
        library(ctx).run(self.id, call, &mut |test| {
            ctx.wait_until(
                "a native (MPI) collective",
                || Ok(test()?),
                || "a team member has not entered the same collective".into(),
            )
        })
    }

    /// Start `op` on the group without waiting (see
    /// [`NativeCollectives::start`](crate::conduit::NativeCollectives::start)); test the
    /// returned ticket with [`test_native`].
    pub(crate) fn start(&self, op: NativeOp, src: &[u8], dst_len: usize) -> Result<u64> {
        Ok(library(self.ctx).start(self.id, op, src, dst_len)?)
    }
}

/// Whether the native collective `ticket` has completed; once it has, its output goes to
/// `take`. Never blocks.
pub(crate) fn test_native(ctx: &Context, ticket: u64, take: &mut dyn FnMut(&[u8])) -> Result<bool> {
    Ok(library(ctx).test(ticket, take)?)
}
