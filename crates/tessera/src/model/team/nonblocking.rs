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

/// A nonblocking collective in progress ([`Team::allreduce_nb`] and the other `*_nb`
/// forms of the blocking operations). It owns copies of its buffers, so it borrows
/// nothing from the caller: several may be in flight on one team and waited for in any
/// order. Every `test` or `wait` on any of a team's requests advances all of them, in the
/// order they were started. Wait for all of them, on every member, before the team's
/// next blocking collective. Dropping a request waits for it.
///
/// Where the blocking call would run [`Algorithm::Native`] (by default, on a team that
/// spans hosts on the mpi conduit), the request is MPI's own nonblocking collective
/// (`MPI_Iallreduce`, ...), which also progresses inside MPI (with
/// `TESSERA_MPI_PROGRESS`, while the rank computes); otherwise it is a schedule of the
/// team's mailbox messages, which moves when a request of the team is tested.
///
/// ```
/// use tessera::{Job, Op, Team};
/// Job::threads(3).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u64;
///     let sum = world.allreduce_nb(&[me, 1], Op::Sum)?;
///     let all = world.allgather_nb(&[me])?;
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

/// A nonblocking single-address collective in progress (see [`Team::broadcast_to_nb`]).
/// Several may be in flight on one team. Wait for all of them, on every member, before
/// the team's next blocking collective: their messages share the team's streams. A
/// member that starts one with its own handles still open gets an error instead (a
/// member that has already waited cannot tell, so the rule is the program's).
/// Dropping a handle waits for it.
///
/// ```
/// use tessera::{Job, SyncMode, Team};
/// Job::threads(2).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let loose = world.with_sync(SyncMode::No, SyncMode::My);
///     let buf = ctx.alloc_collective::<u64>(4)?;
///     let dsts = world.symmetric(buf);
///     // Two broadcasts in flight at once, into different halves.
///     let a = loose.broadcast_to_nb(0, &[1, 2], &dsts, 2)?;
///     let b = loose.broadcast_to_nb(1, &[3, 4], &[dsts[0].add(2), dsts[1].add(2)], 2)?;
///     // ... compute ...
///     b.wait()?;
///     a.wait()?;
///     let mut got = [0u64; 4];
///     ctx.get(buf, &mut got)?;
///     assert_eq!(got, [1, 2, 3, 4]);
///     world.barrier()?;
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

/// One algorithm each, written as schedules (module `schedule`): dissemination barrier,
/// binomial broadcast and reduce, reduce-then-broadcast allreduce, flat gather and
/// scatter, ring allgather, pairwise exchange, linear scan.
impl<'a> Team<'a> {
    /// Build a schedule with this team's reservations and start it.
    pub(super) fn start_schedule<T: Pod>(
        &self,
        build: impl FnOnce(&mut Reserved, usize) -> Schedule<T>,
    ) -> Result<CollRequest<'a, T>> {
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let schedule = build(&mut st.reserved, self.channel.chunk()).carrying(self.channel.call());
        drop(st);
        self.enqueue(Box::new(schedule))
    }

    /// Before building a schedule: refuse if single-address nonblocking collectives are in
    /// flight, and if no schedule has reserved sequence numbers ahead, continue from where
    /// the channel's streams are.
    pub(super) fn reserve_from_channel(&self, st: &mut Schedules) -> Result<()> {
        // The channel counts every nonblocking collective in flight: those held here and
        // the single-address ones.
        if self.channel.nonblocking() > st.pending.len() {
            return Err(CoreError::Invalid(
                "nonblocking single-address collectives are in flight on this team: wait for their handles before starting a nonblocking mailbox one".into(),
            )
            .into());
        }
        if !st.on_channel() {
            st.reserved.send = (0..self.size()).map(|p| self.channel.sent_to(p)).collect();
            st.reserved.recv = (0..self.size())
                .map(|p| self.channel.received_from(p))
                .collect();
        }
        Ok(())
    }

    /// Start `op` as the conduit's own nonblocking collective if the blocking call of
    /// `coll` at `bytes` would run natively (the same choice, so every member makes it
    /// alike); `None` (nothing started) otherwise, or when `op` is `None` (no native
    /// form for this call). `src` and `dst_len` are as [`NativeOp`] describes them.
    pub(super) fn start_native<T: Pod>(
        &self,
        coll: Collective,
        bytes: usize,
        op: Option<NativeOp>,
        src: &[T],
        dst_len: usize,
    ) -> Result<Option<CollRequest<'a, T>>> {
        let (Some(op), Some(group)) = (op, &self.native) else {
            return Ok(None);
        };
        if self.choose(coll, bytes, true) != Algorithm::Native {
            return Ok(None);
        }
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
        self.enqueue(Box::new(pending)).map(Some)
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
        let mut st = self.schedules.borrow_mut();
        let (mut i, mut gated) = (0, false);
        while i < st.pending.len() {
            let done = st.pending[i].1.advance(self.ctx, &self.channel)?;
            gated |= !done && st.pending[i].1.gates();
            if done && !gated {
                let (ticket, done) = st.pending.remove(i).expect("in range");
                self.channel.end_nonblocking();
                let (output, spare) = done.output();
                if let Some(output) = output {
                    st.finished.insert(ticket, output);
                }
                st.reserved.keep(spare);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Nonblocking [`Team::barrier`] (dissemination); its request's output is empty.
    pub fn barrier_nb(&self) -> Result<CollRequest<'a, u8>> {
        self.check_nb::<()>(Collective::Barrier, None, 0, None)?;
        let op = Some(NativeOp::Barrier);
        if let Some(r) = self.start_native(Collective::Barrier, 0, op, &[], 0)? {
            return Ok(r);
        }
        let (n, me) = (self.size(), self.me);
        self.start_schedule(|reserved, chunk| {
            let mut b = Builder::new(reserved, chunk, &[], 0, 0, vec![]);
            let mut dist = 1;
            while dist < n {
                b = b.round(
                    vec![((me + dist) % n, (Buf::Dst, 0..0))],
                    vec![((me + n - dist) % n, (Buf::Dst, 0..0))],
                    vec![],
                );
                dist *= 2;
            }
            b.build()
        })
    }

    /// Nonblocking [`Team::broadcast`]: every member passes `data` of the same length
    /// (read on `root` only); the request's output is the root's data.
    pub fn broadcast_nb<T: Pod>(&self, root: usize, data: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Broadcast, Some(root), data.len(), None)?;
        self.check_root(root)?;
        let (n, len) = (self.size(), data.len());
        let rel = (self.me + n - root) % n;
        let mine = if rel == 0 { data } else { &[] };
        let op = Some(NativeOp::Broadcast { root });
        let bytes = std::mem::size_of_val(data);
        if let Some(r) = self.start_native(Collective::Broadcast, bytes, op, mine, len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            let first = if rel == 0 {
                vec![Local::Copy {
                    from: (Buf::Src, 0..len),
                    to: (Buf::Dst, 0..len),
                }]
            } else {
                vec![]
            };
            // Only the root's data travels.
            let data = if rel == 0 { data } else { &[] };
            let b = Builder::new(reserved, chunk, data, len, 0, first);
            let b = broadcast_rounds(b, n, root, rel, len);
            b.build()
        })
    }

    /// Nonblocking [`Team::reduce`] with a built-in operation; the output is the result on
    /// `root` and empty elsewhere.
    pub fn reduce_nb<T: Reducible>(
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
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(3).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     // (sum, largest) over pairs.
    ///     let pair = [ctx.rank() as u32 + 1, 10 * ctx.rank() as u32];
    ///     let req = world.reduce_nb_with(0, &[pair], |acc: &mut [[u32; 2]], x: &[[u32; 2]]| {
    ///         for (a, b) in acc.iter_mut().zip(x) {
    ///             *a = [a[0] + b[0], a[1].max(b[1])];
    ///         }
    ///         Ok(())
    ///     })?;
    ///     let got = req.wait()?;
    ///     if ctx.rank() == 0 {
    ///         assert_eq!(got, vec![[6, 20]]);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn reduce_nb_with<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Reduce, Some(root), src.len(), None)?;
        self.reduce_nb_impl(root, src, Box::new(combine), None)
    }

    pub(super) fn reduce_nb_impl<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_root(root)?;
        let (n, len) = (self.size(), src.len());
        let rel = (self.me + n - root) % n;
        let dst_len = if rel == 0 { len } else { 0 };
        let native = native.map(|reduction| NativeOp::Reduce { root, reduction });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Reduce, bytes, native, src, dst_len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            reduce_rounds(reserved, chunk, src, reducer, n, root, rel, dst_len).build()
        })
    }

    /// Nonblocking [`Team::allreduce`] with a built-in operation (a reduction to member 0,
    /// then a broadcast).
    pub fn allreduce_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.allreduce_nb_impl(src, builtin::<T>(op), native_reduction::<T>(op))
    }

    /// [`Team::allreduce_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub fn allreduce_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), None)?;
        self.allreduce_nb_impl(src, Box::new(combine), None)
    }

    pub(super) fn allreduce_nb_impl<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        let (n, len) = (self.size(), src.len());
        let me = self.me;
        let native = native.map(|reduction| NativeOp::Allreduce { reduction });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Allreduce, bytes, native, src, len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            let b = reduce_rounds(reserved, chunk, src, reducer, n, 0, me, len);
            broadcast_rounds(b, n, 0, me, len).build()
        })
    }

    /// Nonblocking [`Team::gather`]: the output on `root` is every member's `src` in rank
    /// order; empty elsewhere.
    pub fn gather_nb<T: Pod>(&self, root: usize, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Gather, Some(root), src.len(), None)?;
        self.check_root(root)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let (op, bytes) = (Some(NativeOp::Gather { root }), std::mem::size_of_val(src));
        let dst_len = if me == root { n * len } else { 0 };
        if let Some(r) = self.start_native(Collective::Gather, bytes, op, src, dst_len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            if me == root {
                let first = vec![Local::Copy {
                    from: (Buf::Src, 0..len),
                    to: (Buf::Dst, me * len..(me + 1) * len),
                }];
                let recvs = (0..n)
                    .filter(|&i| i != root)
                    .map(|i| (i, (Buf::Dst, i * len..(i + 1) * len)))
                    .collect();
                Builder::new(reserved, chunk, src, n * len, 0, first)
                    .round(vec![], recvs, vec![])
                    .build()
            } else {
                Builder::new(reserved, chunk, src, 0, 0, vec![])
                    .round(vec![(root, (Buf::Src, 0..len))], vec![], vec![])
                    .build()
            }
        })
    }

    /// Nonblocking [`Team::allgather`] (ring): the output is every member's `src` in rank
    /// order.
    pub fn allgather_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allgather, None, src.len(), None)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let (op, bytes) = (Some(NativeOp::Allgather), std::mem::size_of_val(src));
        if let Some(r) = self.start_native(Collective::Allgather, bytes, op, src, n * len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| allgather_rounds(reserved, chunk, src, n, me))
    }

    /// Nonblocking [`Team::scatter`]: `root` passes `size · count` elements (others may
    /// pass an empty `src`); each member's output is its block of `count`.
    pub fn scatter_nb<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        count: usize,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scatter, Some(root), count, None)?;
        self.check_root(root)?;
        let (n, me) = (self.size(), self.me);
        if me == root && src.len() != n * count {
            return Err(length_error("scatter_nb", "src", src.len(), n * count));
        }
        let mine = if me == root { src } else { &[] };
        let (op, bytes) = (
            Some(NativeOp::Scatter { root }),
            count * std::mem::size_of::<T>(),
        );
        if let Some(r) = self.start_native(Collective::Scatter, bytes, op, mine, count)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            if me == root {
                let first = vec![Local::Copy {
                    from: (Buf::Src, me * count..(me + 1) * count),
                    to: (Buf::Dst, 0..count),
                }];
                let sends = (0..n)
                    .filter(|&i| i != root)
                    .map(|i| (i, (Buf::Src, i * count..(i + 1) * count)))
                    .collect();
                Builder::new(reserved, chunk, src, count, 0, first)
                    .round(sends, vec![], vec![])
                    .build()
            } else {
                Builder::new(reserved, chunk, &[], count, 0, vec![])
                    .round(vec![], vec![(root, (Buf::Dst, 0..count))], vec![])
                    .build()
            }
        })
    }

    /// Nonblocking [`Team::exchange`] (pairwise): block `j` of `src` goes to member `j`;
    /// block `i` of the output came from member `i`.
    pub fn exchange_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Exchange, None, src.len(), None)?;
        let (n, me) = (self.size(), self.me);
        let b = self.block_of("exchange_nb", src.len())?;
        let (op, bytes) = (Some(NativeOp::Exchange), b * std::mem::size_of::<T>());
        if let Some(r) = self.start_native(Collective::Exchange, bytes, op, src, src.len())? {
            return Ok(r);
        }
        let block = move |buf: Buf, j: usize| (buf, j * b..(j + 1) * b);
        self.start_schedule(|reserved, chunk| {
            let first = vec![Local::Copy {
                from: block(Buf::Src, me),
                to: block(Buf::Dst, me),
            }];
            let mut builder = Builder::new(reserved, chunk, src, src.len(), 0, first);
            for s in 1..n {
                let (to, from) = ((me + s) % n, (me + n - s) % n);
                builder = builder.round(
                    vec![(to, block(Buf::Src, to))],
                    vec![(from, block(Buf::Dst, from))],
                    vec![],
                );
            }
            builder.build()
        })
    }

    /// Nonblocking [`Team::exchange_v`] (pairwise): `send_counts[j]` elements of `src` go
    /// to member `j`; the output holds `recv_counts[i]` elements from each member `i`, in
    /// member order.
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     // Member 0 keeps one element and sends two; member 1 keeps two and sends none.
    ///     let (src, send, recv) = if ctx.rank() == 0 {
    ///         (vec![1u8, 2, 3], [1, 2], [1, 0])
    ///     } else {
    ///         (vec![4u8, 5], [0, 2], [2, 2])
    ///     };
    ///     let got = world.exchange_v_nb(&src, &send, &recv)?.wait()?;
    ///     assert_eq!(got, if ctx.rank() == 0 { vec![1] } else { vec![2, 3, 4, 5] });
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn exchange_v_nb<T: Pod>(
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
        let out = |j: usize| (Buf::Src, so[j]..so[j] + send_counts[j]);
        let into = |i: usize| (Buf::Dst, ro[i]..ro[i] + recv_counts[i]);
        self.start_schedule(|reserved, chunk| {
            let first = vec![Local::Copy {
                from: out(me),
                to: into(me),
            }];
            let mut builder = Builder::new(reserved, chunk, src, recv_total, 0, first);
            for s in 1..n {
                let (to, from) = ((me + s) % n, (me + n - s) % n);
                builder = builder.round(vec![(to, out(to))], vec![(from, into(from))], vec![]);
            }
            builder.build()
        })
    }

    /// Nonblocking [`Team::scan`] (inclusive) with a built-in operation.
    pub fn scan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), false)
    }

    /// Nonblocking [`Team::exscan`]; member 0's output is zeros.
    pub fn exscan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), true)
    }

    /// [`Team::scan_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub fn scan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Box::new(combine), None, false)
    }

    /// [`Team::exscan_nb`] with a user operation, as [`Team::reduce_nb_with`]; member 0's
    /// output is zeros.
    pub fn exscan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Box::new(combine), None, true)
    }

    /// The linear chain: the prefix arrives from the left in `Tmp`, is combined with `src`
    /// and passed right.
    pub(super) fn scan_schedule<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
        exclusive: bool,
    ) -> Result<CollRequest<'a, T>> {
        let (n, len, me) = (self.size(), src.len(), self.me);
        let native = native.map(|reduction| NativeOp::Scan {
            reduction,
            exclusive,
        });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Scan, bytes, native, src, len)? {
            return Ok(r);
        }
        let all = |b: Buf| (b, 0..len);
        self.start_schedule(|reserved, chunk| {
            let mut first = Vec::new();
            if me == 0 {
                first.push(Local::Copy {
                    from: all(Buf::Src),
                    to: all(Buf::Tmp),
                });
                first.push(if exclusive {
                    Local::Zero(all(Buf::Dst))
                } else {
                    Local::Copy {
                        from: all(Buf::Src),
                        to: all(Buf::Dst),
                    }
                });
            }
            let mut b = Builder::new(reserved, chunk, src, len, len, first).reducer(reducer);
            if me > 0 {
                let mut after = Vec::new();
                if exclusive {
                    after.push(Local::Copy {
                        from: all(Buf::Tmp),
                        to: all(Buf::Dst),
                    });
                }
                after.push(Local::Combine {
                    from: all(Buf::Src),
                    into: all(Buf::Tmp),
                });
                if !exclusive {
                    after.push(Local::Copy {
                        from: all(Buf::Tmp),
                        to: all(Buf::Dst),
                    });
                }
                b = b.round(vec![], vec![(me - 1, all(Buf::Tmp))], after);
            }
            if me + 1 < n {
                b = b.round(vec![(me + 1, all(Buf::Tmp))], vec![], vec![]);
            }
            b.build()
        })
    }
}

/// The rounds of a binomial broadcast of `Dst[0..len]` from `root` (this member at
/// relative rank `rel`): receive from the parent, then send to every child.
pub(super) fn broadcast_rounds<T: Pod>(
    b: Builder<'_, T>,
    n: usize,
    root: usize,
    rel: usize,
    len: usize,
) -> Builder<'_, T> {
    let tree = Knomial::new(2, n, rel);
    let b = match tree.parent {
        Some(p) => b.round(vec![], vec![((p + root) % n, (Buf::Dst, 0..len))], vec![]),
        None => b,
    };
    let sends: Vec<_> = tree
        .children
        .iter()
        .map(|&c| ((c + root) % n, (Buf::Dst, 0..len)))
        .collect();
    if sends.is_empty() {
        b
    } else {
        b.round(sends, vec![], vec![])
    }
}

/// A binomial reduction of `src` to `root` (this member at relative rank `rel`),
/// pipelined in segments of one chunk like the blocking [`Team::reduce`]: the accumulator
/// is `Tmp[0..len]`; segment k from child `i` lands in the `i`-th slot after it, is
/// combined, and the segment goes up before the next one comes in. The root copies the
/// result into `Dst` (of `dst_len` elements here).
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_rounds<'r, T: Pod>(
    reserved: &'r mut Reserved,
    chunk: usize,
    src: &[T],
    reducer: Reducer<T>,
    n: usize,
    root: usize,
    rel: usize,
    dst_len: usize,
) -> Builder<'r, T> {
    let len = src.len();
    let tree = Knomial::new(2, n, rel);
    let seg = (chunk / std::mem::size_of::<T>().max(1)).max(1);
    let width = seg.min(len);
    let first = vec![Local::Copy {
        from: (Buf::Src, 0..len),
        to: (Buf::Tmp, 0..len),
    }];
    let tmp_len = len + tree.children.len() * width;
    let mut b = Builder::new(reserved, chunk, src, dst_len, tmp_len, first).reducer(reducer);
    for k in 0..len.div_ceil(seg).max(1) {
        let range = k * seg..((k + 1) * seg).min(len);
        let slot = |i: usize| (Buf::Tmp, len + i * width..len + i * width + range.len());
        if !tree.children.is_empty() {
            let recvs = tree
                .children
                .iter()
                .enumerate()
                .map(|(i, &c)| ((c + root) % n, slot(i)))
                .collect();
            let after = (0..tree.children.len())
                .map(|i| Local::Combine {
                    from: slot(i),
                    into: (Buf::Tmp, range.clone()),
                })
                .collect();
            b = b.round(vec![], recvs, after);
        }
        if let Some(p) = tree.parent {
            b = b.round(vec![((p + root) % n, (Buf::Tmp, range))], vec![], vec![]);
        }
    }
    if tree.parent.is_none() {
        b = b.round(
            vec![],
            vec![],
            vec![Local::Copy {
                from: (Buf::Tmp, 0..len),
                to: (Buf::Dst, 0..len),
            }],
        );
    }
    b
}

/// The rounds of a ring allgather of `src` (`len` elements per member) into `Dst`.
pub(super) fn allgather_rounds<T: Pod>(
    reserved: &mut Reserved,
    chunk: usize,
    src: &[T],
    n: usize,
    me: usize,
) -> Schedule<T> {
    let len = src.len();
    let block = move |b: usize| (Buf::Dst, (b % n) * len..(b % n + 1) * len);
    let first = vec![Local::Copy {
        from: (Buf::Src, 0..len),
        to: block(me),
    }];
    let mut b = Builder::new(reserved, chunk, src, n * len, 0, first);
    for s in 0..n.saturating_sub(1) {
        b = b.round(
            vec![((me + 1) % n, block(me + n - s))],
            vec![((me + n - 1) % n, block(me + 2 * n - s - 1))],
            vec![],
        );
    }
    b.build()
}

/// The combining function of the built-in operation `op` on `T`, for a schedule.
pub(super) fn builtin<T: Reducible>(op: Op) -> Reducer<T> {
    Box::new(move |a: &mut [T], x: &[T]| T::reduce(op, a, x))
}
