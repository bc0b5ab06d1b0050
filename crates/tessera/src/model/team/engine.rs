//! Running schedules: a blocking call builds its rounds over the caller's buffers and
//! advances them until done (start-and-wait); a nonblocking call builds the same rounds
//! over buffers of its own and hands the schedule to the team, which advances it with the
//! others whenever any request is tested.
//!
//! This module must never choose an algorithm: the caller has chosen, so both forms of a
//! call always run the same one.

use std::cell::RefCell;

use super::*;
use schedule::{Input, Output, Schedule};

impl<'a> Team<'a> {
    /// Run a blocking call's rounds (written by `rounds` on a builder over `src` and
    /// `dst`) until this member's part is done. Refused while nonblocking collectives are
    /// in flight on the team's streams (their messages share them).
    pub(super) fn run<'b, T: Pod>(
        &self,
        src: &'b [T],
        dst: &'b mut [T],
        reducer: Option<Reducer<'b, T>>,
        rounds: impl for<'r> FnOnce(Builder<'r, 'b, T>) -> Builder<'r, 'b, T>,
    ) -> Result<()> {
        self.channel.refuse_if_nonblocking()?;
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let call = self.channel.call();
        let mut schedule = Schedule::new(
            &mut st.reserved,
            Input::Borrowed(src),
            Output::Borrowed(dst),
            reducer,
            call,
        );
        rounds(Builder::new(
            &mut st.reserved,
            self.channel.chunk(),
            &mut schedule,
        ));
        drop(st);
        // A reference in the cell, so that nothing large moves.
        let schedule = RefCell::new(&mut schedule);
        let (ctx, channel) = (self.ctx, &*self.channel);
        let step = || schedule.borrow_mut().advance(ctx, channel);
        let outcome = match step() {
            Ok(true) => Ok(()),
            Ok(false) => {
                let describe = || {
                    let (from, to) = schedule.borrow().waiting_on();
                    let mut parts = Vec::new();
                    if let Some(from) = from {
                        let rank = channel.world_rank(from);
                        parts.push(format!("a message from world rank {rank}"));
                    }
                    if let Some(to) = to {
                        let rank = channel.world_rank(to);
                        parts.push(format!("world rank {rank} to consume a message"));
                    }
                    format!("in {call}, waiting for {}", parts.join(" and "))
                };
                ctx.wait_until("team messages", step, describe)
            }
            Err(e) => Err(e),
        };
        let schedule = schedule.into_inner();
        schedule.recycle(&mut self.schedules.borrow_mut().reserved);
        outcome
    }

    /// Start a nonblocking call's rounds (written by `rounds` on a builder over a copy of
    /// `src` and the output `dst`) and return its request.
    pub(super) fn start<T: Pod>(
        &self,
        src: &[T],
        dst: Vec<T>,
        reducer: Option<Reducer<'static, T>>,
        rounds: impl for<'r> FnOnce(Builder<'r, 'static, T>) -> Builder<'r, 'static, T>,
    ) -> Result<CollRequest<'a, T>> {
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let copy = st.reserved.buffer(src.len(), src);
        let mut schedule = Schedule::new(
            &mut st.reserved,
            Input::Owned(copy),
            Output::Owned(dst),
            reducer,
            self.channel.call(),
        );
        rounds(Builder::new(
            &mut st.reserved,
            self.channel.chunk(),
            &mut schedule,
        ));
        drop(st);
        self.enqueue(Box::new(schedule))
    }
}
