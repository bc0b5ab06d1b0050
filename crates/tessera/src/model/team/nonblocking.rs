//! Nonblocking collectives: the requests and handles a caller waits on, the mailbox
//! collectives written as schedules of rounds (`*_nb`), and the counters of the
//! single-address forms in flight.
//!
//! This module must never block in a start call: only `wait` (and `test`) progress.

use super::*;

/// Per member: "landed" messages still to send to it, expected from it, received from it.
/// Messages between a pair arrive in order and all look alike, so counts are enough: the
/// k-th expected message from a source is the k-th one it sent.
#[derive(Clone, Debug, Default)]
pub(super) struct NonblockingState {
    pub(super) unsent: Vec<u64>,
    pub(super) expected: Vec<u64>,
    pub(super) received: Vec<u64>,
}

/// The nonblocking mailbox collectives of a team: in flight in start order, and the
/// outputs of finished ones until their requests take them.
#[derive(Default)]
pub(super) struct Schedules {
    pub(super) reserved: Reserved,
    pub(super) pending: std::collections::VecDeque<(u64, Box<dyn Pending>)>,
    pub(super) finished: HashMap<u64, Box<dyn std::any::Any>>,
    pub(super) next: u64,
}

impl Schedules {
    /// Whether some collective in flight moves messages on the team's channel.
    pub(super) fn on_channel(&self) -> bool {
        self.pending.iter().any(|(_, p)| p.on_channel())
    }
}

/// A nonblocking collective in progress (what [`Team::run`] returns for an operation
/// value with [`Nonblocking`](crate::Nonblocking)). It owns copies of its buffers, so it borrows
/// nothing from the caller: several may be in flight on one team and waited for in any
/// order. Every `test` or `wait` on any of a team's requests advances all of them, in the
/// order they were started. Wait for all of them, on every member, before the team's
/// next blocking collective. Dropping a request waits for it.
///
/// A request runs the algorithm its blocking twin would run (forced, tuned or the
/// model's). Where that is [`Algorithm::NATIVE`] (by default, on a team that spans hosts
/// on the mpi conduit), the request is MPI's own nonblocking collective
/// (`MPI_Iallreduce`, ...), which also progresses inside MPI (with
/// `TESSERA_MPI_PROGRESS`, while the rank computes); otherwise it is a schedule of the
/// team's mailbox messages, the same rounds as the blocking call's, which moves when a
/// request of the team is tested.
///
/// ```
/// use tessera::{Job, Op, Team};
/// use tessera::coll::{Allgather, Allreduce};
/// use tessera::Nonblocking;
/// Job::threads(3).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u64;
///     let sum = world.run(Allreduce::new(&[me, 1], Op::Sum), Nonblocking)?;
///     let all = world.run(Allgather::new(&[me]), Nonblocking)?;
///     // ... compute while they progress (each test advances both) ...
///     assert_eq!(all.wait()?, vec![0, 1, 2]);
///     assert_eq!(sum.wait()?, vec![3, 3]);
///     Ok(())
/// }).unwrap();
/// ```
#[must_use = "a nonblocking collective's result is only there once its request is waited on"]
pub struct CollRequest<'a, T> {
    pub(super) team: Team<'a>,
    pub(super) ticket: u64,
    pub(super) taken: bool,
    pub(super) _output: std::marker::PhantomData<T>,
}

impl<T: Pod> CollRequest<'_, T> {
    /// Leave the operation to the team, which finishes it with the others; nobody waits
    /// for it and its output is not kept (checked mode's agreement checks).
    pub(super) fn detach(mut self) {
        self.taken = true;
    }

    /// Block until the operation is complete and return this member's output (empty where
    /// the operation has none: a barrier, or a rooted gather or reduce off the root).
    pub fn wait(mut self) -> Result<Vec<T>> {
        self.finish()?;
        self.taken = true;
        let output = self
            .team
            .schedules
            .borrow_mut()
            .finished
            .remove(&self.ticket)
            .expect("finished");
        Ok(*output
            .downcast::<Vec<T>>()
            .expect("a request's output has its element type"))
    }
}

impl<T> CollRequest<'_, T> {
    /// Whether the operation is complete, advancing every request of the team once.
    pub fn test(&mut self) -> Result<bool> {
        self.team.advance_schedules()?;
        Ok(self
            .team
            .schedules
            .borrow()
            .finished
            .contains_key(&self.ticket))
    }

    pub(super) fn finish(&mut self) -> Result<()> {
        let ctx = self.team.ctx;
        wait_done(ctx, || self.test())
    }
}

impl<T> Drop for CollRequest<'_, T> {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let _ = self.finish();
        self.team
            .schedules
            .borrow_mut()
            .finished
            .remove(&self.ticket);
    }
}

/// Wait until `test` reports a nonblocking collective complete: one test, then the core's
/// wait (progress, watchdog).
pub(super) fn wait_done(ctx: &Context, mut test: impl FnMut() -> Result<bool>) -> Result<()> {
    if test()? {
        return Ok(());
    }
    ctx.wait_until("a nonblocking collective", test, || {
        "a team member has not started the same nonblocking collectives in the same order".into()
    })
}

/// A nonblocking single-address collective in progress (what [`Team::run`] returns for
/// an operation's `.to_symmetric(&dsts)` with [`Nonblocking`](crate::Nonblocking)).
/// Several may be in flight on one team. Wait for all of them, on every member, before
/// the team's next blocking collective: their messages share the team's streams. A
/// member that starts one with its own handles still open gets an error instead (a
/// member that has already waited cannot tell, so the rule is the program's).
/// Dropping a handle waits for it.
///
/// ```
/// use tessera::coll::{Barrier, Broadcast};
/// use tessera::{Blocking, Job, Nonblocking, SyncMode, Team};
/// Job::threads(2).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let loose = world.with_sync(SyncMode::No, SyncMode::My);
///     let buf = ctx.alloc_collective::<u64>(4)?;
///     let dsts = world.symmetric(buf);
///     // Two broadcasts in flight at once, into different halves.
///     let a = loose.run(Broadcast::new(0, &[1, 2], 2).to_symmetric(&dsts), Nonblocking)?;
///     let b = loose.run(Broadcast::new(1, &[3, 4], 2).to_symmetric(&[dsts[0].add(2), dsts[1].add(2)]), Nonblocking)?;
///     // ... compute ...
///     b.wait()?;
///     a.wait()?;
///     let mut got = [0u64; 4];
///     ctx.get(buf, &mut got, tessera::Blocking)?;
///     assert_eq!(got, [1, 2, 3, 4]);
///     world.run(Barrier, Blocking)?;
///     Ok(())
/// }).unwrap();
/// ```
#[must_use = "a nonblocking collective is only known complete once its handle is waited on"]
pub struct CollHandle<'a> {
    pub(super) team: Team<'a>,
    /// (source, count): complete once that many "landed" messages came from each source.
    pub(super) need: Vec<(usize, u64)>,
    pub(super) open: bool,
}

impl CollHandle<'_> {
    /// Whether the operation is complete (this member's destination holds its data and
    /// its own messages are sent), advancing every nonblocking collective of the team once.
    pub fn test(&mut self) -> Result<bool> {
        if !self.open {
            return Ok(true);
        }
        self.team.progress_nonblocking()?;
        let st = self.team.nb.borrow();
        let done = self.need.iter().all(|&(s, k)| st.received[s] >= k)
            && st.unsent.iter().all(|&u| u == 0);
        drop(st);
        if done {
            self.open = false;
            self.team.channel.end_nonblocking();
        }
        Ok(done)
    }

    /// Block until the operation is complete.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    pub(super) fn finish(&mut self) -> Result<()> {
        let ctx = self.team.ctx;
        wait_done(ctx, || self.test())
    }
}

impl Drop for CollHandle<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

// ----- nonblocking mailbox collectives ------------------------------------------------

/// Every `*_nb` call makes the same choice of algorithm as its blocking twin (forced,
/// tuned table, model) and runs the same rounds (module `algorithms`), over buffers of its
/// own; where the choice is [`Algorithm::NATIVE`], the conduit's own nonblocking collective.
impl<'a> Team<'a> {
    /// Before building a schedule: refuse if single-address nonblocking collectives are in
    /// flight, and if no schedule has reserved sequence numbers ahead, continue from where
    /// the channel's streams are.
    pub(super) fn reserve_from_channel(&self, st: &mut Schedules) -> Result<()> {
        // The channel counts every nonblocking collective in flight: those held here and
        // the single-address ones.
        if self.channel.nonblocking() > st.pending.len() {
            return Err(CoreError::OutOfOrder { call: "a nonblocking mailbox collective", why: "nonblocking single-address collectives are in flight on this team: wait for their handles before starting a nonblocking mailbox one".into() }
            .into());
        }
        if !st.on_channel() {
            st.reserved.refresh(&self.channel, self.size());
        }
        Ok(())
    }

    /// Start `op` as the conduit's own nonblocking collective (after `choose` said
    /// `Native`). `src` and `dst_len` are as [`NativeOp`] describes them.
    pub(super) fn start_native<T: Pod>(
        &self,
        op: NativeOp,
        src: &[T],
        dst_len: usize,
    ) -> Result<CollRequest<'a, T>> {
        let group = self
            .native
            .as_ref()
            .expect("choose returns Native only where the team has a group");
        let size = std::mem::size_of::<T>();
        let ticket = group.start(op, bytemuck::cast_slice(src), dst_len * size)?;
        let zero = matches!(
            op,
            NativeOp::Scan {
                exclusive: true,
                ..
            }
        ) && self.me == 0;
        let pending = NativePending::<T>::new(ticket, zero);
        self.enqueue(Box::new(pending))
    }

    /// Hold `pending` with the team's other nonblocking collectives and return its
    /// request. Counted on the channel, so that blocking mailbox collectives are refused
    /// until it is done (the rule is the same whichever library runs it).
    pub(super) fn enqueue<T: Pod>(&self, pending: Box<dyn Pending>) -> Result<CollRequest<'a, T>> {
        self.channel.begin_nonblocking();
        let mut st = self.schedules.borrow_mut();
        let ticket = st.next;
        st.next += 1;
        st.pending.push_back((ticket, pending));
        drop(st);
        let request = CollRequest {
            team: self.clone(),
            ticket,
            taken: false,
            _output: std::marker::PhantomData,
        };
        self.advance_schedules()?;
        Ok(request)
    }

    /// Advance every nonblocking collective in flight, oldest first. One that is done
    /// behind an unfinished agreement check (checked mode) stays until the check is done.
    pub(super) fn advance_schedules(&self) -> Result<()> {
        let _counted_as_collective = self.ctx.stats_scope(true);
        let mut st = self.schedules.borrow_mut();
        let (mut i, mut gated) = (0, false);
        while i < st.pending.len() {
            let done = st.pending[i].1.advance(self.ctx, &self.channel)?;
            gated |= !done && st.pending[i].1.gates();
            if done && !gated {
                let (ticket, done) = st.pending.remove(i).expect("in range");
                self.channel.end_nonblocking();
                if let Some(output) = done.output(&mut st.reserved) {
                    st.finished.insert(ticket, output);
                }
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Nonblocking [`Team::barrier`]; its request's output is empty.
    pub(super) fn barrier_nb(&self) -> Result<CollRequest<'a, u8>> {
        self.check_nb::<()>(Collective::Barrier, None, 0, None)?;
        let (n, me) = (self.size(), self.me);
        let native = Some(NativeOp::Barrier);
        self.nonblocking(Collective::Barrier, 0, native, &[], 0, None, |b, alg| {
            algorithms::rounds(Collective::Barrier, b, Call::new(alg, n, me, 0))
        })
    }

    /// Nonblocking [`Team::broadcast`]: every member passes `data` of the same length
    /// (read on `root` only); the request's output is the root's data.
    pub(super) fn broadcast_nb<T: Pod>(
        &self,
        root: usize,
        data: &[T],
        len: usize,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Broadcast, Some(root), len, None)?;
        self.check_root(root)?;
        if self.me == root && data.len() != len {
            return Err(length_error("broadcast", "src", data.len(), len));
        }
        // The root's output is its input: the request's vector starts as a copy of it and
        // the rounds read it there, as in place (one copy, where a copy of the input and
        // another into the output would be two).
        let mut own = vec![T::zeroed(); len];
        if self.me == root {
            crate::core::copy::copy_slice(&mut own, data);
        }
        self.start_broadcast_owned(root, own)
    }

    /// [`Team::broadcast_nb`] in place: the request takes `data` itself as its buffer (read
    /// on `root`, overwritten elsewhere) and `wait` hands it back holding the root's data.
    /// Nothing is copied or allocated on the way, so a loop that passes the same buffers
    /// round (as SUMMA's prefetch of the next panel does) moves each byte once. Members
    /// may mix this form and [`Team::broadcast_nb`] in one call.
    pub(super) fn broadcast_nb_in_place<T: Pod>(
        &self,
        root: usize,
        data: Vec<T>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Broadcast, Some(root), data.len(), None)?;
        self.check_root(root)?;
        self.start_broadcast_owned(root, data)
    }

    /// Start a nonblocking broadcast whose request owns `data` (the root's data on `root`,
    /// as long elsewhere), after the checks.
    fn start_broadcast_owned<T: Pod>(
        &self,
        root: usize,
        data: Vec<T>,
    ) -> Result<CollRequest<'a, T>> {
        let (n, me, len) = (self.size(), self.me, data.len());
        let bytes = std::mem::size_of_val(data.as_slice());
        match self.choose(Collective::Broadcast, bytes, true) {
            Algorithm::NATIVE => {
                let mine = if me == root { data.as_slice() } else { &[] };
                self.start_native(NativeOp::Broadcast { root }, mine, len)
            }
            // The root's data is already where the output goes: the rounds of the
            // blocking broadcast, which reads it there.
            alg => self.start_owned(Vec::new(), data, None, |b| {
                algorithms::rounds(
                    Collective::Broadcast,
                    b,
                    Call::new(alg, n, me, len).rooted(root),
                )
            }),
        }
    }

    /// Nonblocking [`Team::reduce`] with a built-in operation; the output is the result on
    /// `root` and empty elsewhere.
    pub(super) fn reduce_nb<T: Reducible>(
        &self,
        root: usize,
        src: &[T],
        op: Op,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Reduce, Some(root), src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.reduce_nb_impl(root, src, builtin::<T>(op), native_reduction::<T>(op))
    }

    /// [`Team::reduce_nb`] with a user operation `combine(acc, other)` (associative and
    /// commutative) over any plain-old-data type. The request owns the operation, so it
    /// may not borrow.
    pub(super) fn reduce_nb_with<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        combine: Box<Combine<'static, T>>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Reduce, Some(root), src.len(), None)?;
        self.reduce_nb_impl(root, src, Reducer::Owned(combine), None)
    }

    pub(super) fn reduce_nb_impl<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        reducer: Reducer<'static, T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_root(root)?;
        let (n, me, len) = (self.size(), self.me, src.len());
        let dst_len = if me == root { len } else { 0 };
        let bytes = std::mem::size_of_val(src);
        let native = native.map(|reduction| NativeOp::Reduce { root, reduction });
        let reducer = Some(reducer);
        self.nonblocking(
            Collective::Reduce,
            bytes,
            native,
            src,
            dst_len,
            reducer,
            |b, alg| {
                algorithms::rounds(
                    Collective::Reduce,
                    b,
                    Call::new(alg, n, me, len).rooted(root),
                )
            },
        )
    }

    /// Nonblocking [`Team::allreduce`] with a built-in operation.
    pub(super) fn allreduce_nb<T: Reducible>(
        &self,
        src: &[T],
        op: Op,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.allreduce_nb_impl(src, builtin::<T>(op), native_reduction::<T>(op))
    }

    /// [`Team::allreduce_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub(super) fn allreduce_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: Box<Combine<'static, T>>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), None)?;
        self.allreduce_nb_impl(src, Reducer::Owned(combine), None)
    }

    pub(super) fn allreduce_nb_impl<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<'static, T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        let (n, me, len) = (self.size(), self.me, src.len());
        let bytes = std::mem::size_of_val(src);
        let native = native.map(|reduction| NativeOp::Allreduce { reduction });
        let reducer = Some(reducer);
        self.nonblocking(
            Collective::Allreduce,
            bytes,
            native,
            src,
            len,
            reducer,
            |b, alg| algorithms::rounds(Collective::Allreduce, b, Call::new(alg, n, me, len)),
        )
    }

    /// Nonblocking [`Team::gather`]: the output on `root` is every member's `src` in rank
    /// order; empty elsewhere.
    pub(super) fn gather_nb<T: Pod>(&self, root: usize, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Gather, Some(root), src.len(), None)?;
        self.check_root(root)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let dst_len = if me == root { n * len } else { 0 };
        let native = Some(NativeOp::Gather { root });
        let bytes = std::mem::size_of_val(src);
        self.nonblocking(
            Collective::Gather,
            bytes,
            native,
            src,
            dst_len,
            None,
            |b, alg| {
                algorithms::rounds(
                    Collective::Gather,
                    b,
                    Call::new(alg, n, me, len).rooted(root),
                )
            },
        )
    }

    /// Nonblocking [`Team::allgather`]: the output is every member's `src` in rank order.
    pub(super) fn allgather_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allgather, None, src.len(), None)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let native = Some(NativeOp::Allgather);
        let bytes = std::mem::size_of_val(src);
        self.nonblocking(
            Collective::Allgather,
            bytes,
            native,
            src,
            n * len,
            None,
            |b, alg| algorithms::rounds(Collective::Allgather, b, Call::new(alg, n, me, len)),
        )
    }

    /// Nonblocking [`Team::scatter`]: `root` passes `size · count` elements (others may
    /// pass an empty `src`); each member's output is its block of `count`.
    pub(super) fn scatter_nb<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        count: usize,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scatter, Some(root), count, None)?;
        self.check_root(root)?;
        let (n, me) = (self.size(), self.me);
        if me == root && src.len() != n * count {
            return Err(length_error("scatter", "src", src.len(), n * count));
        }
        let mine = if me == root { src } else { &[] };
        let bytes = count * std::mem::size_of::<T>();
        let native = Some(NativeOp::Scatter { root });
        self.nonblocking(
            Collective::Scatter,
            bytes,
            native,
            mine,
            count,
            None,
            |b, alg| {
                algorithms::rounds(
                    Collective::Scatter,
                    b,
                    Call::new(alg, n, me, count).rooted(root),
                )
            },
        )
    }

    /// Nonblocking [`Team::exchange`]: block `j` of `src` goes to member `j`; block `i`
    /// of the output came from member `i`.
    pub(super) fn exchange_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Exchange, None, src.len(), None)?;
        let (n, me) = (self.size(), self.me);
        let b = self.block_of("exchange", src.len())?;
        let native = Some(NativeOp::Exchange);
        let (bytes, len) = (b * std::mem::size_of::<T>(), src.len());
        let block = move |j: usize| j * b..(j + 1) * b;
        self.nonblocking(
            Collective::Exchange,
            bytes,
            native,
            src,
            len,
            None,
            |bd, alg| {
                let call = Call::new(alg, n, me, b).blocks(&block, &block, Some(b));
                algorithms::rounds(Collective::Exchange, bd, call)
            },
        )
    }

    /// Nonblocking [`Team::exchange_v`]: `send_counts[j]` elements of `src` go to member
    /// `j`; the output holds `recv_counts[i]` elements from each member `i`, in member
    /// order.
    pub(super) fn exchange_v_nb<T: Pod>(
        &self,
        src: &[T],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<CollRequest<'a, T>> {
        // Counts differ between members, so the signature leaves them out.
        self.channel.set_call(Signature::new(
            Collective::Exchange,
            Form::Nonblocking,
            None,
            0,
            std::mem::size_of::<T>(),
            None,
        ));
        let recv_total = recv_counts.iter().sum();
        let (so, ro) = self.exchange_v_layout(src.len(), send_counts, recv_total, recv_counts)?;
        let (n, me) = (self.size(), self.me);
        let out = |j: usize| so[j]..so[j] + send_counts[j];
        let into = |i: usize| ro[i]..ro[i] + recv_counts[i];
        // As the blocking form: a choice that does not depend on the counts, and no MPI
        // (its all-to-all needs equal blocks).
        self.nonblocking(
            Collective::Exchange,
            0,
            None,
            src,
            recv_total,
            None,
            |b, alg| {
                let call = Call::new(alg, n, me, 0).blocks(&out, &into, None);
                algorithms::rounds(Collective::Exchange, b, call)
            },
        )
    }

    /// Nonblocking [`Team::scan`] (inclusive) with a built-in operation.
    pub(super) fn scan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), false)
    }

    /// Nonblocking [`Team::exscan`]; member 0's output is zeros.
    pub(super) fn exscan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), true)
    }

    /// [`Team::scan_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub(super) fn scan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: Box<Combine<'static, T>>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Reducer::Owned(combine), None, false)
    }

    /// [`Team::exscan_nb`] with a user operation, as [`Team::reduce_nb_with`]; member 0's
    /// output is zeros.
    pub(super) fn exscan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: Box<Combine<'static, T>>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Reducer::Owned(combine), None, true)
    }

    pub(super) fn scan_schedule<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<'static, T>,
        native: Option<Reduction>,
        exclusive: bool,
    ) -> Result<CollRequest<'a, T>> {
        let (n, len, me) = (self.size(), src.len(), self.me);
        let bytes = std::mem::size_of_val(src);
        let native = native.map(|reduction| NativeOp::Scan {
            reduction,
            exclusive,
        });
        let reducer = Some(reducer);
        self.nonblocking(
            Collective::Scan,
            bytes,
            native,
            src,
            len,
            reducer,
            |b, alg| {
                let call = Call::new(alg, n, me, len).exclusive(exclusive);
                algorithms::rounds(Collective::Scan, b, call)
            },
        )
    }
}

/// The combining function of the built-in operation `op` on `T`, for a schedule.
pub(super) fn builtin<T: Reducible>(op: Op) -> Reducer<'static, T> {
    Reducer::Owned(Box::new(move |a: &mut [T], x: &[T]| T::reduce(op, a, x)))
}
