//! The data-movement operations as values: broadcast, gather, allgather, scatter and
//! exchange, each routed to the team's one implementation of it.
//!
//! This module must never implement an algorithm.

use super::*;

// ----- broadcast -------------------------------------------------------------------------------

/// Copy member `root`'s data to every member. Its output is the data, `len` elements on
/// every member.
///
/// - `Broadcast::in_place(root, &mut data)`: the root's `data` into every member's.
/// - `Broadcast::new(root, &src, len)`: the root's `src` (read there only; others may pass
///   an empty slice), returned, or landed with `.to(&mut dst)` or `.to_symmetric(&dsts)`.
/// - `Broadcast::owned(root, data)`: a vector the call owns (a large nonblocking broadcast
///   moves it instead of copying it).
/// - `Broadcast::value(root, x)`: one value.
/// - `Broadcast::from_symmetric(root, src, &mut dst)`: every member *gets* the data from
///   `src` in the root's segment into its own `dst` (a rendezvous broadcast; nothing passes
///   through the mailboxes). Blocking only.
///
/// ```
/// use tessera::coll::Broadcast;
/// use tessera::{Blocking, Job, Nonblocking, Team};
/// Job::threads(3).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u32;
///     assert_eq!(world.run(Broadcast::value(2, 10 * me), Blocking)?, 20);
///     let mut data = if me == 1 { vec![1, 2, 3] } else { vec![0; 3] };
///     world.run(Broadcast::in_place(1, &mut data), Blocking)?;
///     assert_eq!(data, [1, 2, 3]);
///     let request = world.run(Broadcast::owned(0, vec![me + 5; 2]), Nonblocking)?;
///     assert_eq!(request.wait()?, [5, 5]);
///     // Single-address: the root puts straight into every member's buffer.
///     let buf = ctx.alloc_collective::<u32>(2)?;
///     world.run(Broadcast::new(0, &[8, 9], 2).to_symmetric(&world.symmetric(buf)), Blocking)?;
///     let mut got = [0u32; 2];
///     ctx.get(buf, &mut got, Blocking)?;
///     assert_eq!(got, [8, 9]);
///     // Rendezvous: every member reads the root's segment.
///     world.run(Barrier, Blocking)?;
///     let mut read = [0u32; 2];
///     world.run(Broadcast::from_symmetric(0, buf.on(0), &mut read), Blocking)?;
///     assert_eq!(read, [8, 9]);
///     Ok(())
/// }).unwrap();
/// # use tessera::coll::Barrier;
/// ```
pub struct Broadcast<'s, T> {
    root: usize,
    data: BroadcastData<'s, T>,
}

enum BroadcastData<'s, T> {
    Slice(&'s [T], usize),
    One(T),
    Owned(Vec<T>),
    InPlace(usize),
}

impl<'s, T: Pod> Broadcast<'s, T> {
    /// The root's `src` (read there only), `len` elements on every member.
    pub fn new(root: usize, src: &'s [T], len: usize) -> Self {
        Broadcast {
            root,
            data: BroadcastData::Slice(src, len),
        }
    }

    /// A vector the operation owns: the root's data in it, the others' as long.
    pub fn owned(root: usize, data: Vec<T>) -> Self {
        Broadcast {
            root,
            data: BroadcastData::Owned(data),
        }
    }

    /// One value: the root's, returned on every member.
    pub fn value(root: usize, value: T) -> Value<Self> {
        Value(Broadcast {
            root,
            data: BroadcastData::One(value),
        })
    }

    /// The root's `data` into every member's `data`.
    pub fn in_place(root: usize, data: &mut [T]) -> To<'_, Self, T> {
        let len = data.len();
        To {
            kernel: Broadcast {
                root,
                data: BroadcastData::InPlace(len),
            },
            dst: data,
        }
    }

    /// Every member gets the data from `src`, in the root's segment (every member passes
    /// the same pointer), into its own `dst` (every member passes the same length).
    pub fn from_symmetric(
        root: usize,
        src: GlobalPtr<T>,
        dst: &mut [T],
    ) -> FromSymmetric<'_, '_, T> {
        FromSymmetric {
            root,
            srcs: Sources::One(src),
            dst,
        }
    }

    fn len(&self) -> usize {
        match &self.data {
            BroadcastData::Slice(_, len) | BroadcastData::InPlace(len) => *len,
            BroadcastData::One(_) => 1,
            BroadcastData::Owned(v) => v.len(),
        }
    }

    /// The root's data where the operation holds it (empty for an in-place one).
    fn held(&self) -> &[T] {
        match &self.data {
            BroadcastData::Slice(src, _) => src,
            BroadcastData::One(v) => std::slice::from_ref(v),
            BroadcastData::Owned(v) => v,
            BroadcastData::InPlace(_) => &[],
        }
    }
}

outputs!(impl['s, T: Pod] Broadcast<'s, T>, to_symmetric);

impl<T: Pod> Kernel for Broadcast<'_, T> {
    type Elem = T;

    fn out_len(&self, _: &Team<'_>) -> usize {
        self.len()
    }

    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.len() {
            return Err(length_error("broadcast", "dst", dst.len(), self.len()));
        }
        if team.rank() == self.root && !matches!(self.data, BroadcastData::InPlace(_)) {
            let held = self.held();
            if held.len() != dst.len() {
                return Err(length_error("broadcast", "src", held.len(), dst.len()));
            }
            crate::core::copy::copy_slice(dst, held);
        }
        team.broadcast(self.root, dst)
    }

    fn owned(self, team: &Team<'_>) -> Result<Vec<T>> {
        match self.data {
            BroadcastData::Owned(mut data) => {
                team.broadcast(self.root, &mut data)?;
                Ok(data)
            }
            _ => {
                let mut out = vec![T::zeroed(); self.len()];
                self.blocking(team, &mut out)?;
                Ok(out)
            }
        }
    }
}

impl<T: Pod> ValueKernel for Broadcast<'_, T> {
    type Value = T;

    #[inline]
    fn value(self, team: &Team<'_>) -> Result<T> {
        Ok(one_value(self, team)?.expect("every member gets one element"))
    }
}

impl<T: Pod> Start for Broadcast<'_, T> {
    fn start<'a>(self, team: &Team<'a>, dst: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        let len = self.len();
        match self.data {
            BroadcastData::Owned(data) => team.broadcast_nb_in_place(self.root, data),
            BroadcastData::InPlace(_) => team.broadcast_nb(self.root, dst.unwrap_or(&[]), len),
            _ => team.broadcast_nb(self.root, self.held(), len),
        }
    }
}

impl<T: Pod> SingleAddress for Broadcast<'_, T> {
    fn single_address<'a>(
        self,
        team: &Team<'a>,
        dsts: &[GlobalPtr<T>],
        nonblocking: bool,
    ) -> Result<Option<CollHandle<'a>>> {
        team.broadcast_to_op(nonblocking, self.root, self.held(), dsts, self.len())
    }
}

/// A rendezvous broadcast or gather: the receivers *get* the data from symmetric memory
/// (built by [`Broadcast::from_symmetric`] and [`Gather::from_symmetric`]); blocking only.
/// The team's synchronisation modes ([`Team::with_sync`]) apply with source and
/// destination swapped: entry `My` means a source is read only after its owner has
/// entered, exit `My` that a source's owner returns once it has been read.
pub struct FromSymmetric<'s, 'd, T> {
    root: usize,
    srcs: Sources<'s, T>,
    dst: &'d mut [T],
}

enum Sources<'s, T> {
    One(GlobalPtr<T>),
    Each(&'s [GlobalPtr<T>]),
}

impl<T> sealed::Sealed for FromSymmetric<'_, '_, T> {}

impl<'a, T: Pod> Operation<'a, Blocking> for FromSymmetric<'_, '_, T> {
    type Output = ();
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<()> {
        match self.srcs {
            Sources::One(src) => team.broadcast_from(self.root, src, self.dst),
            Sources::Each(srcs) => team.gather_from(self.root, srcs, self.dst),
        }
    }
}

// ----- gather, allgather, scatter --------------------------------------------------------------

/// Member `root` gets every member's `src`, in team order: its output is `size × src.len()`
/// elements, the others' is empty.
///
/// - `Gather::new(root, &src)`: returned, or landed with `.to(&mut dst)` (the others may
///   pass an empty `dst`) or `.to_symmetric(&[dst])` (every member puts its block
///   straight into `dst`, in the root's segment).
/// - `Gather::value(root, x)`: `Some(all values)` on the root, `None` elsewhere.
/// - `Gather::from_symmetric(root, &srcs, &mut dst)`: the root *gets* member `i`'s block
///   from `srcs[i]` (see [`Team::symmetric`]). Blocking only.
///
/// ```
/// use tessera::coll::Gather;
/// use tessera::{Blocking, Job, Team};
/// Job::threads(3).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u64;
///     let all = world.run(Gather::value(0, me * me), Blocking)?;
///     assert_eq!(all, (me == 0).then(|| vec![0, 1, 4]));
///     let mine = ctx.alloc_collective::<u64>(2)?;
///     ctx.put(mine, &[me, 100], Blocking)?;
///     let mut read = vec![0u64; if me == 0 { 6 } else { 0 }];
///     world.run(Gather::from_symmetric(0, &world.symmetric(mine), &mut read), Blocking)?;
///     if me == 0 {
///         assert_eq!(read, [0, 100, 1, 100, 2, 100]);
///     }
///     Ok(())
/// }).unwrap();
/// ```
pub struct Gather<'s, T> {
    root: usize,
    src: Input<'s, T>,
}

impl<'s, T: Pod> Gather<'s, T> {
    /// This member's `src` to the root.
    pub fn new(root: usize, src: &'s [T]) -> Self {
        Gather {
            root,
            src: Input::Slice(src),
        }
    }

    /// One value from each member: `Some` of all on the root, `None` elsewhere.
    pub fn value(root: usize, value: T) -> Value<Self> {
        Value(Gather {
            root,
            src: Input::One([value]),
        })
    }

    /// The root gets block `i` of `dst` (`dst.len() / size` elements) from member `i`'s
    /// `srcs[i]`; `dst` is written on the root only (the others may pass an empty one).
    pub fn from_symmetric<'d>(
        root: usize,
        srcs: &'s [GlobalPtr<T>],
        dst: &'d mut [T],
    ) -> FromSymmetric<'s, 'd, T> {
        FromSymmetric {
            root,
            srcs: Sources::Each(srcs),
            dst,
        }
    }
}

outputs!(impl['s, T: Pod] Gather<'s, T>, to_symmetric);

impl<T: Pod> Kernel for Gather<'_, T> {
    type Elem = T;

    fn out_len(&self, team: &Team<'_>) -> usize {
        if team.rank() == self.root {
            team.size() * self.src.get().len()
        } else {
            0
        }
    }

    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        team.gather(self.root, self.src.get(), dst)
    }
}

impl<T: Pod> ValueKernel for Gather<'_, T> {
    type Value = Option<Vec<T>>;

    fn value(self, team: &Team<'_>) -> Result<Option<Vec<T>>> {
        let root = self.root;
        let all = self.owned(team)?;
        Ok((team.rank() == root).then_some(all))
    }
}

impl<T: Pod> Start for Gather<'_, T> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        team.gather_nb(self.root, self.src.get())
    }
}

impl<T: Pod> SingleAddress for Gather<'_, T> {
    fn single_address<'a>(
        self,
        team: &Team<'a>,
        dsts: &[GlobalPtr<T>],
        nonblocking: bool,
    ) -> Result<Option<CollHandle<'a>>> {
        // The root's destination: named alone, or as its entry of every member's.
        let dst = match dsts.len() {
            1 => dsts[0],
            n if n == team.size() && self.root < n => dsts[self.root],
            n => {
                return Err(length_error("gather (single-address)", "dsts", n, 1));
            }
        };
        team.gather_to_op(nonblocking, self.root, self.src.get(), dst)
    }
}

/// Every member gets every member's `src`, in team order (`size × src.len()` elements).
///
/// - `Allgather::new(&src)`: returned, or landed with `.to(&mut dst)` or
///   `.to_symmetric(&dsts)` (each member puts its block straight into every member's).
/// - `Allgather::value(x)`: all members' values.
///
/// ```
/// use tessera::coll::Allgather;
/// use tessera::{Blocking, Job, Team};
/// Job::threads(3).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u32;
///     assert_eq!(world.run(Allgather::value(me), Blocking)?, [0, 1, 2]);
///     let mut all = [0u32; 6];
///     world.run(Allgather::new(&[me, 10]).to(&mut all), Blocking)?;
///     assert_eq!(all, [0, 10, 1, 10, 2, 10]);
///     Ok(())
/// }).unwrap();
/// ```
pub struct Allgather<'s, T> {
    src: Input<'s, T>,
}

impl<'s, T: Pod> Allgather<'s, T> {
    /// This member's `src` to every member.
    pub fn new(src: &'s [T]) -> Self {
        Allgather {
            src: Input::Slice(src),
        }
    }

    /// One value from each member, all of them to every member.
    pub fn value(value: T) -> Value<Self> {
        Value(Allgather {
            src: Input::One([value]),
        })
    }
}

outputs!(impl['s, T: Pod] Allgather<'s, T>, to_symmetric);

impl<T: Pod> Kernel for Allgather<'_, T> {
    type Elem = T;

    fn out_len(&self, team: &Team<'_>) -> usize {
        team.size() * self.src.get().len()
    }

    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        team.allgather(self.src.get(), dst)
    }
}

impl<T: Pod> ValueKernel for Allgather<'_, T> {
    type Value = Vec<T>;

    fn value(self, team: &Team<'_>) -> Result<Vec<T>> {
        self.owned(team)
    }
}

impl<T: Pod> Start for Allgather<'_, T> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        team.allgather_nb(self.src.get())
    }
}

impl<T: Pod> SingleAddress for Allgather<'_, T> {
    fn single_address<'a>(
        self,
        team: &Team<'a>,
        dsts: &[GlobalPtr<T>],
        nonblocking: bool,
    ) -> Result<Option<CollHandle<'a>>> {
        team.allgather_to_op(nonblocking, self.src.get(), dsts)
    }
}

/// Member `root` sends block `i` of its `src` (`count` elements each) to member `i`:
/// every member's output is `count` elements.
///
/// - `Scatter::new(root, &src, count)`: `src` is read on the root only (the others may
///   pass an empty slice); returned, or landed with `.to(&mut dst)` or
///   `.to_symmetric(&dsts)` (the root puts each block straight into its member's).
/// - `Scatter::value(root, &values)`: one value per member.
///
/// ```
/// use tessera::coll::Scatter;
/// use tessera::{Blocking, Job, Team};
/// Job::threads(3).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank();
///     let values: &[u64] = if me == 1 { &[10, 11, 12] } else { &[] };
///     assert_eq!(world.run(Scatter::value(1, values), Blocking)?, 10 + me as u64);
///     let pairs: Vec<u64> = if me == 0 { (0..6).collect() } else { Vec::new() };
///     assert_eq!(world.run(Scatter::new(0, &pairs, 2), Blocking)?, [2 * me as u64, 2 * me as u64 + 1]);
///     Ok(())
/// }).unwrap();
/// ```
pub struct Scatter<'s, T> {
    root: usize,
    src: &'s [T],
    count: usize,
}

impl<'s, T: Pod> Scatter<'s, T> {
    /// Block `i` of the root's `src` to member `i`, `count` elements each.
    pub fn new(root: usize, src: &'s [T], count: usize) -> Self {
        Scatter { root, src, count }
    }

    /// Value `i` of the root's `values` to member `i`.
    pub fn value(root: usize, values: &'s [T]) -> Value<Self> {
        Value(Scatter {
            root,
            src: values,
            count: 1,
        })
    }
}

outputs!(impl['s, T: Pod] Scatter<'s, T>, to_symmetric);

impl<T: Pod> Kernel for Scatter<'_, T> {
    type Elem = T;

    fn out_len(&self, _: &Team<'_>) -> usize {
        self.count
    }

    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.count {
            return Err(length_error("scatter", "dst", dst.len(), self.count));
        }
        let src = if team.rank() == self.root {
            self.src
        } else {
            &[]
        };
        team.scatter(self.root, src, dst)
    }
}

impl<T: Pod> ValueKernel for Scatter<'_, T> {
    type Value = T;

    #[inline]
    fn value(self, team: &Team<'_>) -> Result<T> {
        Ok(one_value(self, team)?.expect("every member gets one element"))
    }
}

impl<T: Pod> Start for Scatter<'_, T> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        team.scatter_nb(self.root, self.src, self.count)
    }
}

impl<T: Pod> SingleAddress for Scatter<'_, T> {
    fn single_address<'a>(
        self,
        team: &Team<'a>,
        dsts: &[GlobalPtr<T>],
        nonblocking: bool,
    ) -> Result<Option<CollHandle<'a>>> {
        team.scatter_to_op(nonblocking, self.root, self.src, dsts, self.count)
    }
}

// ----- exchange ---------------------------------------------------------------------------------

/// All-to-all: block `j` of every member's `src` goes to member `j`, which gets them in
/// team order.
///
/// - `Exchange::new(&src)`: equal blocks (`src.len() / size` elements); returned, or
///   landed with `.to(&mut dst)` or `.to_symmetric(&dsts)` (each block put straight into
///   its member's destination, at position `me`).
/// - `Exchange::varying(&src, &send_counts, &recv_counts)`: `send_counts[j]` elements to
///   member `j`, `recv_counts[i]` from member `i` (MPI's `alltoallv`); no single-address
///   form.
///
/// ```
/// use tessera::coll::Exchange;
/// use tessera::{Blocking, Job, Team};
/// Job::threads(2).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u32;
///     let got = world.run(Exchange::new(&[10 * me, 10 * me + 1]), Blocking)?;
///     assert_eq!(got, [me, 10 + me]);
///     // Member 0 sends one element to each; member 1 sends two to 0 and none to itself.
///     let (src, send, recv): (&[u32], [usize; 2], [usize; 2]) =
///         if me == 0 { (&[1, 2], [1, 1], [1, 2]) } else { (&[3, 4], [2, 0], [1, 0]) };
///     let got = world.run(Exchange::varying(src, &send, &recv), Blocking)?;
///     assert_eq!(got, if me == 0 { vec![1, 3, 4] } else { vec![2] });
///     Ok(())
/// }).unwrap();
/// ```
pub struct Exchange<'s, T> {
    src: &'s [T],
    counts: Option<(&'s [usize], &'s [usize])>,
}

impl<'s, T: Pod> Exchange<'s, T> {
    /// Equal blocks of `src` to every member.
    pub fn new(src: &'s [T]) -> Self {
        Exchange { src, counts: None }
    }

    /// `send_counts[j]` elements of `src` (in order) to member `j`; `recv_counts[i]`
    /// elements from member `i`.
    pub fn varying(src: &'s [T], send_counts: &'s [usize], recv_counts: &'s [usize]) -> Self {
        Exchange {
            src,
            counts: Some((send_counts, recv_counts)),
        }
    }
}

outputs!(impl['s, T: Pod] Exchange<'s, T>, to_symmetric);

impl<T: Pod> Kernel for Exchange<'_, T> {
    type Elem = T;

    fn out_len(&self, _: &Team<'_>) -> usize {
        match self.counts {
            Some((_, recv)) => recv.iter().sum(),
            None => self.src.len(),
        }
    }

    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        match self.counts {
            Some((send, recv)) => team.exchange_v(self.src, send, dst, recv),
            None => team.exchange(self.src, dst),
        }
    }
}

impl<T: Pod> Start for Exchange<'_, T> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        match self.counts {
            Some((send, recv)) => team.exchange_v_nb(self.src, send, recv),
            None => team.exchange_nb(self.src),
        }
    }
}

impl<T: Pod> SingleAddress for Exchange<'_, T> {
    fn single_address<'a>(
        self,
        team: &Team<'a>,
        dsts: &[GlobalPtr<T>],
        nonblocking: bool,
    ) -> Result<Option<CollHandle<'a>>> {
        if self.counts.is_some() {
            return Err(CoreError::BadArgument {
                call: "exchange",
                argument: "counts",
                why: "an exchange of varying counts has no single-address form: land it with .to(&mut dst)".into(),
            }
            .into());
        }
        team.exchange_to_op(nonblocking, self.src, dsts)
    }
}
