//! MPI's own collectives, offered to the model layer as the `native` algorithm
//! ([`NativeCollectives`]).
//!
//! Every team of the model gets a communicator of its own: the world team a duplicate of
//! `MPI_COMM_WORLD`, a split team `MPI_Comm_split` of its parent's. Each operation is
//! MPI's nonblocking form (`MPI_Ibarrier`, `MPI_Iallreduce`, ...), completed by `MPI_Test`
//! inside the core's wait. So a rank inside an MPI collective keeps serving active
//! messages, atomics and RPCs aimed at it (a blocking `MPI_Allreduce` would not, and a
//! rank whose RPC precedes its own allreduce would then wait forever), and the watchdog
//! still applies. If a wait fails while MPI still owns the buffers, the job is aborted:
//! returning would let MPI write into freed memory.
//!
//! Buffers arrive as bytes; reductions pass MPI the element type they hold, so MPI
//! applies its own operation to typed elements. The nonblocking form
//! ([`NativeCollectives::start`]) copies its input into buffers it owns and keeps them,
//! with the request, until `MPI_Test` reports completion.
//!
//! This module must never touch global pointers, teams or the model's algorithms: it
//! runs one MPI collective on buffers it is given.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::Communicator;

use super::raw::{self, serial, OwnedCollective};
use super::MpiConduit;
use crate::conduit::{Conduit, NativeCall, NativeCollectives, NativeOp, NativeWait};
use crate::error::ConduitError;

/// Spare buffers kept for nonblocking collectives.
const SPARE: usize = 8;

/// The communicators of the model's teams, by group number.
#[derive(Default)]
pub(super) struct Groups {
    /// Nonblocking collectives in flight, by ticket (dropped before the communicators).
    started: RefCell<HashMap<u64, OwnedCollective>>,
    next_ticket: Cell<u64>,
    /// Buffers of finished ones, the largest few, for the next.
    spare: RefCell<Vec<Vec<u64>>>,
    comms: RefCell<HashMap<u64, SimpleCommunicator>>,
    next: Cell<u64>,
}

impl Groups {
    fn add(&self, comm: SimpleCommunicator) -> u64 {
        let id = self.next.get();
        self.next.set(id + 1);
        self.comms.borrow_mut().insert(id, comm);
        id
    }
}

impl NativeCollectives for MpiConduit {
    fn group_world(&self) -> Result<u64, ConduitError> {
        Ok(self.groups.add(serial(|| self.world.duplicate())))
    }

    fn group_split(
        &self,
        parent: u64,
        colour: Option<u32>,
        key: u32,
    ) -> Result<Option<u64>, ConduitError> {
        let comms = self.groups.comms.borrow();
        let parent = known(&comms, parent)?;
        let colour = match colour {
            Some(c) => Color::with_value(i32::try_from(c).unwrap_or(i32::MAX)),
            None => Color::undefined(),
        };
        let key = i32::try_from(key).unwrap_or(i32::MAX);
        let new = serial(|| parent.split_by_color_with_key(colour, key));
        drop(comms);
        Ok(new.map(|comm| self.groups.add(comm)))
    }

    fn group_free(&self, group: u64) {
        // Dropping the communicator frees it (MPI_Comm_free, local in practice).
        let comm = self.groups.comms.borrow_mut().remove(&group);
        serial(|| drop(comm));
    }

    fn run(
        &self,
        group: u64,
        call: NativeCall<'_>,
        wait: &mut NativeWait<'_>,
    ) -> crate::Result<()> {
        let comms = self.groups.comms.borrow();
        let comm = known(&comms, group)?;
        let NativeCall { op, src, dst } = call;
        // SAFETY: `src` and `dst` are borrowed for this whole call, and the call does not
        // return while MPI may still use them: either the request completes inside the
        // wait, or the job is aborted below.
        let mut request = unsafe { raw::start_collective(comm, op, src, dst) }?;
        let mut done = false;
        let outcome = wait(&mut || {
            // SAFETY: the request is live or null, and its buffers are borrowed (above).
            done = unsafe { raw::test_request(&mut request) }?;
            Ok(done)
        });
        if outcome.is_err() && !done {
            self.abort(&format!(
                "an MPI collective could not complete: {}",
                outcome.as_ref().expect_err("an error")
            ));
        }
        outcome
    }

    fn start(
        &self,
        group: u64,
        op: NativeOp,
        src: &[u8],
        dst_len: usize,
    ) -> Result<u64, ConduitError> {
        let comms = self.groups.comms.borrow();
        let comm = known(&comms, group)?;
        let mut spare = self.groups.spare.borrow_mut();
        let started = OwnedCollective::start(comm, op, src, dst_len, &mut spare)?;
        let ticket = self.groups.next_ticket.get();
        self.groups.next_ticket.set(ticket + 1);
        self.groups.started.borrow_mut().insert(ticket, started);
        Ok(ticket)
    }

    fn test(&self, ticket: u64, take: &mut dyn FnMut(&[u8])) -> Result<bool, ConduitError> {
        let mut started = self.groups.started.borrow_mut();
        let pending = started.get_mut(&ticket).ok_or(ConduitError::Unsupported {
            conduit: "mpi",
            what: "test a nonblocking collective it did not start",
        })?;
        if !pending.test()? {
            return Ok(false);
        }
        take(pending.output());
        let done = started.remove(&ticket).expect("found above");
        let mut spare = self.groups.spare.borrow_mut();
        spare.extend(done.into_buffers());
        // Keep the largest few: small buffers are cheap to make afresh.
        spare.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        spare.truncate(SPARE);
        Ok(true)
    }
}

/// The communicator of `group`, or an error.
fn known(
    comms: &HashMap<u64, SimpleCommunicator>,
    group: u64,
) -> Result<&SimpleCommunicator, ConduitError> {
    comms.get(&group).ok_or(ConduitError::Unsupported {
        conduit: "mpi",
        what: "use a group it does not know",
    })
}
