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
//! Buffers arrive as bytes; reductions reinterpret them as the element type they hold,
//! so MPI applies its own operation to typed elements.
//!
//! This module must never touch global pointers, teams or the model's algorithms: it
//! runs one MPI collective on buffers it is given.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use mpi::collective::SystemOperation;
use mpi::request::{scope, Request, Scope};
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::raw::serial;
use super::MpiConduit;
use crate::conduit::{
    Conduit, NativeCall, NativeCollectives, NativeType, NativeWait, Op, Reduction,
};
use crate::error::ConduitError;

/// The communicators of the model's teams, by group number.
#[derive(Default)]
pub(super) struct Groups {
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

/// MPI's operation for `op`; MPI has no min/max-with-index on our `Loc` layout.
fn system_op(op: Op) -> Result<SystemOperation, ConduitError> {
    Ok(match op {
        Op::Sum => SystemOperation::sum(),
        Op::Prod => SystemOperation::product(),
        Op::Min => SystemOperation::min(),
        Op::Max => SystemOperation::max(),
        Op::BitAnd => SystemOperation::bitwise_and(),
        Op::BitOr => SystemOperation::bitwise_or(),
        Op::BitXor => SystemOperation::bitwise_xor(),
        Op::LogicalAnd => SystemOperation::logical_and(),
        Op::LogicalOr => SystemOperation::logical_or(),
        Op::MinLoc | Op::MaxLoc => {
            return Err(ConduitError::Unsupported {
                conduit: "mpi",
                what: "reduce with MinLoc or MaxLoc natively",
            })
        }
    })
}

/// Run `$body` with `$src`/`$dst` reinterpreted as slices of the element type `$elem`
/// names (the model passes whole, aligned elements, so the casts cannot fail).
macro_rules! typed {
    ($elem:expr, $src:ident, $dst:ident, $body:expr) => {
        match $elem {
            NativeType::I8 => typed!(@as i8, $src, $dst, $body),
            NativeType::I16 => typed!(@as i16, $src, $dst, $body),
            NativeType::I32 => typed!(@as i32, $src, $dst, $body),
            NativeType::I64 => typed!(@as i64, $src, $dst, $body),
            NativeType::U8 => typed!(@as u8, $src, $dst, $body),
            NativeType::U16 => typed!(@as u16, $src, $dst, $body),
            NativeType::U32 => typed!(@as u32, $src, $dst, $body),
            NativeType::U64 => typed!(@as u64, $src, $dst, $body),
            NativeType::F32 => typed!(@as f32, $src, $dst, $body),
            NativeType::F64 => typed!(@as f64, $src, $dst, $body),
        }
    };
    (@as $t:ty, $src:ident, $dst:ident, $body:expr) => {{
        let $src: &[$t] = bytemuck::cast_slice($src);
        let $dst: &mut [$t] = bytemuck::cast_slice_mut($dst);
        $body
    }};
}

impl MpiConduit {
    /// Start a request with `start` and test it inside `wait` until it completes. If the
    /// wait fails first, MPI still owns the buffers, so the job ends here.
    fn complete<'a, D: ?Sized + 'a, S: Scope<'a>>(
        &self,
        start: impl FnOnce() -> Request<'a, D, S>,
        wait: &mut NativeWait<'_>,
    ) -> crate::Result<()> {
        let mut pending = Some(serial(start));
        let outcome = wait(&mut || {
            let request = pending.take().expect("not tested after completion");
            match serial(|| request.test()) {
                Ok(_) => Ok(true),
                Err(request) => {
                    pending = Some(request);
                    Ok(false)
                }
            }
        });
        if let Err(e) = &outcome {
            if pending.is_some() {
                self.abort(&format!("an MPI collective could not complete: {e}"));
            }
        }
        outcome
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
        let parent = comms.get(&parent).ok_or(ConduitError::Unsupported {
            conduit: "mpi",
            what: "split a group it does not know",
        })?;
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
        let comm = comms.get(&group).ok_or(ConduitError::Unsupported {
            conduit: "mpi",
            what: "run a collective on a group it does not know",
        })?;
        let me = comm.rank() as usize;
        let at = |root: usize| comm.process_at_rank(root as i32);
        scope(|sc| match call {
            NativeCall::Barrier => self.complete(|| comm.immediate_barrier(), wait),
            NativeCall::Broadcast { root, data } => {
                self.complete(|| at(root).immediate_broadcast_into(sc, data), wait)
            }
            NativeCall::Reduce {
                root,
                src,
                dst,
                reduction: Reduction { elem, op },
            } => typed!(elem, src, dst, {
                let op = system_op(op)?;
                if me == root {
                    self.complete(
                        || at(root).immediate_reduce_into_root(sc, src, dst, op),
                        wait,
                    )
                } else {
                    self.complete(|| at(root).immediate_reduce_into(sc, src, op), wait)
                }
            }),
            NativeCall::Allreduce {
                src,
                dst,
                reduction: Reduction { elem, op },
            } => typed!(elem, src, dst, {
                let op = system_op(op)?;
                self.complete(|| comm.immediate_all_reduce_into(sc, src, dst, op), wait)
            }),
            NativeCall::Scan {
                src,
                dst,
                reduction: Reduction { elem, op },
                exclusive,
            } => typed!(elem, src, dst, {
                let op = system_op(op)?;
                if exclusive {
                    self.complete(
                        || comm.immediate_exclusive_scan_into(sc, src, dst, op),
                        wait,
                    )
                } else {
                    self.complete(|| comm.immediate_scan_into(sc, src, dst, op), wait)
                }
            }),
            NativeCall::Gather { root, src, dst } => {
                if me == root {
                    self.complete(|| at(root).immediate_gather_into_root(sc, src, dst), wait)
                } else {
                    self.complete(|| at(root).immediate_gather_into(sc, src), wait)
                }
            }
            NativeCall::Allgather { src, dst } => {
                self.complete(|| comm.immediate_all_gather_into(sc, src, dst), wait)
            }
            NativeCall::Scatter { root, src, dst } => {
                if me == root {
                    self.complete(|| at(root).immediate_scatter_into_root(sc, src, dst), wait)
                } else {
                    self.complete(|| at(root).immediate_scatter_into(sc, dst), wait)
                }
            }
            NativeCall::Exchange { src, dst } => {
                self.complete(|| comm.immediate_all_to_all_into(sc, src, dst), wait)
            }
        })
    }
}
