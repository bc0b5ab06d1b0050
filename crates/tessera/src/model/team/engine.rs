//! Running schedules: a blocking call builds its rounds over the caller's buffers and
//! advances them until done (start-and-wait); a nonblocking call builds the same rounds
//! over buffers of its own and hands the schedule to the team, which advances it with the
//! others whenever any request is tested.
//!
//! Both forms choose in one place ([`Team::blocking`], [`Team::nonblocking`]): MPI's own
//! collective where the call has one and that is the choice, else the chosen algorithm's
//! rounds, so the two forms of a call always run the same algorithm. While a team tunes
//! online, a blocking call may be a trial of another candidate instead (the `online`
//! module); a nonblocking call never is.

use std::cell::RefCell;

use super::*;
use reserved::CACHE_UP_TO;
use schedule::{Input, Output, Schedule};

const _: () = assert!(CACHE_UP_TO < DIRECT_FROM, "kept plans go the team's way");

impl<'a> Team<'a> {
    /// A blocking call of `op` with `bytes` per member: the conduit's own collective
    /// (`native`, where the call has one) if the choice is [`Algorithm::NATIVE`], else
    /// `small(alg, src, dst)` where the call is small and the chosen algorithm has a form
    /// straight on the channel (`small.rs`; `None` otherwise), else the chosen algorithm's
    /// rounds (written by `rounds`) over `src` and `dst`. Calls whose
    /// `shape` ([`CallShape`]) says all that decides their rounds (`None` where more does, as in an
    /// all-to-all of varying counts) and of at most [`CACHE_UP_TO`] bytes reuse the plan
    /// of an earlier call of the same shape and algorithm instead of writing the rounds.
    // What the choice needs (operation, size, MPI's form) and what the rounds need
    // (buffers, reducer, the rounds): grouping them would only rename the arguments.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn blocking<'b, T: Pod>(
        &self,
        op: Collective,
        bytes: usize,
        shape: Option<CallShape>,
        native: Option<NativeOp>,
        src: &'b [T],
        dst: &'b mut [T],
        reducer: Option<Reducer<'b, T>>,
        small: impl FnOnce(Algorithm, &[T], &mut [T]) -> Option<Result<()>>,
        rounds: impl for<'r> FnOnce(Builder<'r>, Algorithm) -> Builder<'r>,
    ) -> Result<()> {
        self.chosen(op, bytes, native.is_some(), true, |alg| {
            match (alg, native) {
                (Algorithm::NATIVE, Some(call)) => self.native_of(call, src, dst),
                // `Ok(())` rebuilt, not moved: a result returned through memory and copied
                // whole reads the callee's narrower stores back, which waits for them.
                (alg, _) => match small(alg, src, dst) {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(e),
                    None => self.planned(op, alg, bytes, shape, src, dst, reducer, rounds),
                },
            }
        })
    }

    /// The rounds of `alg` for a blocking call of `op` ([`Team::blocking`] once `alg` is
    /// chosen): a kept plan where the call is small and its shape decides its rounds.
    #[allow(clippy::too_many_arguments)] // as `blocking`
    pub(super) fn planned<'b, T: Pod>(
        &self,
        op: Collective,
        alg: Algorithm,
        bytes: usize,
        shape: Option<CallShape>,
        src: &'b [T],
        dst: &'b mut [T],
        reducer: Option<Reducer<'b, T>>,
        rounds: impl for<'r> FnOnce(Builder<'r>, Algorithm) -> Builder<'r>,
    ) -> Result<()> {
        let key = shape.filter(|_| bytes <= CACHE_UP_TO).map(|shape| PlanKey {
            op,
            alg,
            shape,
            elem: std::mem::size_of::<T>(),
        });
        self.run_rounds(src, dst, reducer, key, |b| rounds(b, alg))
    }

    /// Run a blocking call (`call` with its algorithm) of `op` with `bytes` per member
    /// with the algorithm chosen for it; while the team tunes online and the call may be
    /// a trial (`may_trial`), as a trial: one of its untimed calls (the first opened by a
    /// barrier), or the timed one that follows them, recorded.
    pub(super) fn chosen(
        &self,
        op: Collective,
        bytes: usize,
        native_ok: bool,
        may_trial: bool,
        call: impl FnOnce(Algorithm) -> Result<()>,
    ) -> Result<()> {
        let (alg, trial) = self.choose_or_trial(op, bytes, native_ok, may_trial);
        let Some(trial) = trial else {
            if bytes > DIRECT_FROM && self.long.tried {
                let via_mailbox = self.decided_via_mailbox(op, bytes, native_ok);
                return self.with_long_messages(via_mailbox, || call(alg));
            }
            return call(alg);
        };
        if !trial.timed {
            if trial.opens {
                self.start_trial()?;
            }
            self.with_long_messages(Some(trial.via_mailbox), || call(alg))?;
            self.warmed_trial(trial);
            return Ok(());
        }
        let entered = crate::board::now_seconds();
        self.with_long_messages(Some(trial.via_mailbox), || call(alg))?;
        self.end_trial(trial, entered, crate::board::now_seconds())
    }

    /// Run `call` with its long messages through the mailbox or not (`via_mailbox`; `None`:
    /// the team's way), then restore the way of the call around it. Out of line: only
    /// calls above `DIRECT_FROM` bytes and trials come here, and inlined it copied the
    /// call's body into [`Team::chosen`] twice more.
    #[inline(never)]
    fn with_long_messages(
        &self,
        via_mailbox: Option<bool>,
        call: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let Some(via_mailbox) = via_mailbox else {
            return call();
        };
        let around = self.call_via_mailbox.replace(via_mailbox);
        let outcome = call();
        self.call_via_mailbox.set(around);
        outcome
    }

    /// The nonblocking twin of [`Team::blocking`]: the same choice, then the conduit's own
    /// nonblocking collective on `src` with an output of `dst_len`, or the same rounds over
    /// a copy of `src` and an output of `dst_len` zeros.
    #[allow(clippy::too_many_arguments)] // as `blocking`
    pub(super) fn nonblocking<T: Pod>(
        &self,
        op: Collective,
        bytes: usize,
        native: Option<NativeOp>,
        src: &[T],
        dst_len: usize,
        reducer: Option<Reducer<'static, T>>,
        rounds: impl for<'r> FnOnce(Builder<'r>, Algorithm) -> Builder<'r>,
    ) -> Result<CollRequest<'a, T>> {
        match (self.choose(op, bytes, native.is_some()), native) {
            (Algorithm::NATIVE, Some(call)) => self.start_native(call, src, dst_len),
            (alg, _) => self.start(src, vec![T::zeroed(); dst_len], reducer, |b| rounds(b, alg)),
        }
    }

    /// Run a blocking call's rounds (written by `rounds` on a builder over `src` and
    /// `dst`, or the plan kept under `key` by an earlier call) until this member's part is
    /// done. Refused while nonblocking collectives are in flight on the team's streams
    /// (their messages share them).
    pub(super) fn run_rounds<'b, T: Pod>(
        &self,
        src: &'b [T],
        dst: &'b mut [T],
        reducer: Option<Reducer<'b, T>>,
        key: Option<PlanKey>,
        rounds: impl for<'r> FnOnce(Builder<'r>) -> Builder<'r>,
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
        match key.and_then(|key| Some((key, st.reserved.take_cached(&key)?))) {
            Some((key, plan)) => schedule.reuse(&mut st.reserved, key, plan),
            None => {
                // Every kept plan went the team's way for long messages: it is of a call
                // of at most `CACHE_UP_TO` bytes per member, which online tuning never
                // sends the other way (it tries both only above `DIRECT_FROM`).
                let via_mailbox = self.call_via_mailbox.get();
                schedule.build(&mut st.reserved, self.channel.chunk(), via_mailbox, rounds);
                if let Some(key) = key {
                    schedule.keep_as(key);
                }
            }
        }
        drop(st);
        // A reference in the cell, so that nothing large moves.
        let cell = RefCell::new(&mut schedule);
        let (ctx, channel) = (self.ctx, &*self.channel);
        let step = || cell.borrow_mut().advance(ctx, channel);
        let outcome = match step() {
            Ok(true) => Ok(()),
            Ok(false) => {
                let describe = || {
                    let (from, to) = cell.borrow().waiting_on();
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
        rounds: impl for<'r> FnOnce(Builder<'r>) -> Builder<'r>,
    ) -> Result<CollRequest<'a, T>> {
        let copy = self.schedules.borrow_mut().reserved.buffer(src.len(), src);
        self.start_owned(copy, dst, reducer, rounds)
    }

    /// [`Team::start`] with an input the schedule takes as it is (no copy).
    pub(super) fn start_owned<T: Pod>(
        &self,
        src: Vec<T>,
        dst: Vec<T>,
        reducer: Option<Reducer<'static, T>>,
        rounds: impl for<'r> FnOnce(Builder<'r>) -> Builder<'r>,
    ) -> Result<CollRequest<'a, T>> {
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let mut schedule = Schedule::new(
            &mut st.reserved,
            Input::Owned(src),
            Output::Owned(dst),
            reducer,
            self.channel.call(),
        );
        // A nonblocking call is never a trial: its long messages go the team's way.
        let via_mailbox = self.long.via_mailbox;
        schedule.build(&mut st.reserved, self.channel.chunk(), via_mailbox, rounds);
        drop(st);
        self.enqueue(Box::new(schedule))
    }
}
