//! Mailboxes: fixed pairs of ranks swapping short messages again and again (a row-sum
//! phase, a transpose partner), each received message lent out as a plain slice of the
//! receiver's own memory, safely and with no synchronisation beyond the message's own.
//!
//! A [`Mailbox`] has slots; in each slot every rank has one fixed partner, and the pairing
//! is symmetric (checked when the mailbox is made). Each rank's inbox for a slot has two
//! halves used alternately. One [`exchange`](Mailbox::exchange) sends this rank's data into
//! the partner's next half with a signalling put and returns the partner's data from this
//! rank's next half, borrowed from the mailbox.
//!
//! Why the lent slice is never written while it lives:
//! - Only the partner writes a rank's inbox for a slot (the pairing is fixed and was
//!   checked symmetric when the mailbox was made).
//! - Uses of a slot alternate between the two halves, and the partners' uses of a slot
//!   proceed in lockstep: each use returns only once the partner's message of that use has
//!   arrived. So the partner writes use `u + 2` (the half of use `u`) only after receiving
//!   this rank's use `u + 1`, which this rank sends in a later call than use `u`; every
//!   call takes `&mut self`, so by then the slice lent by use `u` is gone.
//! - The owner reads a half only after the partner's signal, which the signalling put
//!   delivers after the data, or after a barrier that the partner entered after its put.
//!
//! The protocol is checked under loom (`protocol::semaphore`'s model of two partners:
//! with one half per slot instead of two it fails).
//!
//! This module must never hand out an inbox half that a partner may still write, nor the
//! inbox's global address.
//!
//! ```
//! use tessera::{Arrival, Mailbox, Team};
//! tessera::Job::threads(2).run(|ctx| {
//!     let team = Team::world(ctx)?;
//!     let partner = 1 - team.rank();
//!     // One slot, up to 4 values per message, each rank paired with the other.
//!     let mut mail = Mailbox::<f64>::new(&team, 4, &[partner])?;
//!     for round in 0..3 {
//!         let mine = [team.rank() as f64, round as f64];
//!         let got = mail.exchange(0, &mine, 2, Arrival::Signal)?;
//!         assert_eq!(got, &[partner as f64, round as f64]);
//!     }
//!     Ok(())
//! }).unwrap();
//! ```

use crate::coll::{Allgather, Barrier};
use bytemuck::Pod;

use crate::core::gptr::GlobalPtr;
use crate::core::sync::Semaphore;
use crate::error::CoreError;
use crate::model::team::Team;
use crate::{Blocking, Result, Signal};

/// How a receiver learns that its partner's message has arrived.
#[derive(Clone, Copy)]
pub enum Arrival<'a> {
    /// The partner's signalling put posts this rank's slot semaphore (point to point).
    Signal,
    /// A plain put, then a barrier of this team, which must hold both partners (for
    /// measuring what a code without point-to-point synchronisation pays).
    Barrier(&'a Team<'a>),
}

/// Fixed pairs of ranks exchanging messages of up to `capacity` elements, per slot (see
/// the module documentation).
pub struct Mailbox<'t, T: Pod> {
    team: &'t Team<'t>,
    capacity: usize,
    /// This rank's partner (team rank) in each slot.
    partners: Vec<usize>,
    /// Per rank: for each slot, two halves of `capacity` elements.
    inbox: GlobalPtr<T>,
    /// Per slot: posted on the receiver by the sender's signalling put.
    arrived: Vec<Semaphore>,
    /// Per slot: exchanges so far (the half used next is `uses % 2`).
    uses: Vec<u64>,
}

impl<'t, T: Pod> Mailbox<'t, T> {
    /// A mailbox over `team` with one slot per entry of `partners` (this rank's partner,
    /// a team rank, in each slot; a rank may be its own partner), each message at most
    /// `capacity` elements. A collective call: every member passes the same number of
    /// slots, and the pairing must be symmetric (if rank a's partner in a slot is b, b's
    /// is a), else every rank gets an error naming the first slot that is not.
    pub fn new(team: &'t Team<'t>, capacity: usize, partners: &[usize]) -> Result<Self> {
        let (p, slots) = (team.size(), partners.len());
        if let Some(&bad) = partners.iter().find(|&&r| r >= p) {
            return Err(CoreError::BadArgument {
                call: "Mailbox::new",
                argument: "partners",
                why: format!("Mailbox::new: partner {bad} is not a rank of a team of {p}"),
            }
            .into());
        }
        let mine: Vec<u64> = partners.iter().map(|&r| r as u64).collect();
        let mut all = vec![0u64; p * slots];
        team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
        for k in 0..slots {
            for a in 0..p {
                let b = all[a * slots + k] as usize;
                if all[b * slots + k] as usize != a {
                    return Err(CoreError::BadArgument {
                        call: "Mailbox::new",
                        argument: "partners",
                        why: format!(
                        "Mailbox::new: slot {k} pairs rank {a} with {b}, but rank {b} with {}; \
                         every slot's pairing must be symmetric",
                        all[b * slots + k]
                    ),
                    }
                    .into());
                }
            }
        }
        let ctx = team.context();
        let inbox = ctx.alloc_collective::<T>(2 * slots * capacity)?;
        let arrived = (0..slots)
            .map(|_| ctx.semaphore_collective())
            .collect::<Result<_>>()?;
        Ok(Mailbox {
            team,
            capacity,
            partners: partners.to_vec(),
            inbox,
            arrived,
            uses: vec![0; slots],
        })
    }

    /// Largest message, in elements.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Send `data` to this rank's partner in `slot` and return the `incoming` elements the
    /// partner sent this rank in the same exchange (both partners call it, in the same
    /// order of slots). The slice borrows the mailbox until the next call.
    pub fn exchange(
        &mut self,
        slot: usize,
        data: &[T],
        incoming: usize,
        arrival: Arrival<'_>,
    ) -> Result<&[T]> {
        let slots = self.partners.len();
        if slot >= slots || data.len() > self.capacity || incoming > self.capacity {
            return Err(CoreError::BadArgument {
                call: "Mailbox::exchange",
                argument: "data",
                why: format!(
                "Mailbox::exchange: slot {slot} of {slots}, sending {} and receiving {incoming} \
                 elements, but messages hold at most {}",
                data.len(),
                self.capacity
            ),
            }
            .into());
        }
        let ctx = self.team.context();
        let partner = self.team.world_rank(self.partners[slot]);
        if let Arrival::Barrier(team) = arrival {
            let me = self.team.world_rank(self.team.rank());
            if team.team_rank(partner).is_none() || team.team_rank(me).is_none() {
                return Err(CoreError::BadArgument {
                    call: "Mailbox::exchange",
                    argument: "arrival",
                    why: format!(
                        "Mailbox::exchange: Arrival::Barrier with a team that does not hold both \
                     world ranks {me} and {partner}; pass a team of both partners"
                    ),
                }
                .into());
            }
        }
        let half = (2 * slot + (self.uses[slot] % 2) as usize) * self.capacity;
        self.uses[slot] += 1;
        let sem = self.arrived[slot];
        match arrival {
            Arrival::Signal => {
                ctx.put(
                    self.inbox.add(half).on(partner),
                    data,
                    Signal::Post(sem.on(partner)),
                )?;
                sem.wait(ctx, 1)?;
            }
            Arrival::Barrier(team) => {
                ctx.put(self.inbox.add(half).on(partner), data, Blocking)?;
                team.run(Barrier, Blocking)?;
            }
        }
        // SAFETY: only this slot's partner writes this half (the pairing is fixed and was
        // checked symmetric in `new`); it has finished (its signal, or the barrier it
        // entered after its put, came after the data); and it writes the half again only
        // after this rank's next use of the slot, when this borrow of `self` has ended
        // (module documentation).
        let got = unsafe { ctx.local_slice(self.inbox.add(half), incoming)? };
        Ok(got.expect("a rank's own segment is always mapped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Job;

    #[test]
    fn pairs_swap_messages_of_every_length_round_after_round() {
        // Slot 0 pairs 0-1 and 2-3, slot 1 pairs 0-2 and 1-3, slot 2 pairs every rank with
        // itself. Messages vary in length and carry sender, round and index.
        Job::threads(4)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let me = team.rank();
                let partners = [me ^ 1, me ^ 2, me];
                let mut mail = Mailbox::<u64>::new(&team, 6, &partners)?;
                let tag = |s: usize, round: usize, i: usize| (s * 10_000 + round * 10 + i) as u64;
                for round in 0..40 {
                    for (slot, &partner) in partners.iter().enumerate() {
                        let len = |r: usize| (r + round + slot) % 7;
                        let mine: Vec<u64> = (0..len(me)).map(|i| tag(me, round, i)).collect();
                        let arrival = if round % 3 == 0 {
                            Arrival::Barrier(&team)
                        } else {
                            Arrival::Signal
                        };
                        let got = mail.exchange(slot, &mine, len(partner), arrival)?;
                        let want: Vec<u64> =
                            (0..len(partner)).map(|i| tag(partner, round, i)).collect();
                        assert_eq!(got, &want[..], "rank {me}, slot {slot}, round {round}");
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn asymmetric_pairings_and_oversized_messages_are_refused() {
        Job::threads(3)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let me = team.rank();
                // 0 → 1, 1 → 2, 2 → 0: nobody's partner names them back.
                let err = Mailbox::<u8>::new(&team, 2, &[(me + 1) % 3])
                    .err()
                    .unwrap()
                    .to_string();
                assert!(err.contains("slot 0 pairs rank 0 with 1"), "{err}");
                let err = Mailbox::<u8>::new(&team, 2, &[7])
                    .err()
                    .unwrap()
                    .to_string();
                assert!(err.contains("partner 7"), "{err}");
                let mut mail = Mailbox::<u8>::new(&team, 2, &[me])?;
                let err = mail
                    .exchange(0, &[1, 2, 3], 1, Arrival::Signal)
                    .unwrap_err();
                assert!(err.to_string().contains("at most 2"), "{err}");
                assert!(mail.exchange(1, &[1], 1, Arrival::Signal).is_err());
                let alone = team.split(Some(me as u32), 0)?.expect("in its own team");
                // Rank 0 is its own partner, so a team of itself holds both.
                assert_eq!(mail.exchange(0, &[9], 1, Arrival::Barrier(&alone))?, &[9]);
                Ok(())
            })
            .unwrap();
    }
}
