//! Block-decomposed grids with ghost cells and periodic boundaries, and their ghost
//! exchange done with one-sided copies of domain intersections (Titanium's MG, seed 000
//! §3.1.4).
//!
//! A [`HaloGrid`] is one rank's block of a periodic N-d grid (the `whole` domain split
//! over a `procs[0] × … × procs[N−1]` process grid), stored with `width` layers of ghost
//! cells. [`HaloGrid::exchange`] fills the ghost cells from the neighbours' interiors. Each
//! message is worked out once, at construction, with the domain calculus: the neighbour's
//! storage reference is *translated* by the period where the block wraps around, restricted
//! to the ghost layer that faces us, and intersected with what we send; the exchange
//! itself is then a list of strided copies. Three strategies ([`HaloStrategy`]):
//!
//! - `6msg`: one dimension per phase, two messages each. A phase sends slabs that include
//!   the ghost layers filled by earlier phases, so edges and corners arrive through the
//!   later phases.
//! - `26msg` (3ᴺ − 1 in N dimensions): every face, edge and corner straight from its
//!   owner, in one phase.
//! - `packed`: the hand-written baseline (NPB MG's `comm3`): the phases of `6msg`, but
//!   each message is packed into a buffer, put in one piece into the neighbour's receive
//!   slot, and unpacked there.
//!
//! # Synchronisation
//! Data only ever moves by *push*: a rank writes into its neighbours' ghost layers (or
//! receive slots), never reads another rank's storage. Two kinds of semaphore order it:
//! - *permission*: on entering `exchange`, a rank posts one to the sender of every message
//!   it is about to receive, saying "my previous ghosts are consumed, write the new ones";
//!   a sender waits for as many permissions as it sends messages before its first write.
//!   A rank posts its permissions for exchange k+1 only after receiving everything of
//!   exchange k, so a permission can never be consumed by the wrong exchange.
//! - *arrival*, one per phase: each message is followed by a post (release) to the
//!   target's arrival semaphore of that phase; the target waits (acquire) for all of a
//!   phase's messages before it sends the next phase, whose slabs contain them.
//!
//! So between two calls of `exchange` no other rank touches this rank's storage, which is
//! why [`HaloGrid::view`] and [`HaloGrid::view_mut`] are safe. The storage's references
//! never leave the halo plans of the ranks that built this grid together.
//!
//! ```
//! use tessera::{HaloGrid, HaloStrategy, Point, RectDomain};
//! tessera::Job::threads(2).run(|ctx| {
//!     // An 8×8 periodic grid split into two 4×8 blocks, one ghost layer.
//!     let whole = RectDomain::with_shape([8, 8]);
//!     let mut g = HaloGrid::<f64, 2>::new(ctx, whole, [2, 1], 1, HaloStrategy::SixMessages)?;
//!     let interior = g.interior();
//!     g.view_mut().restrict(&interior).foreach_mut(|p, e| *e = (10 * p[0] + p[1]) as f64);
//!     g.exchange()?;
//!     // The ghost column left of column 0 holds column 7 (periodic), the corner too.
//!     let lo = interior.lo();
//!     assert_eq!(g.view()[lo - Point([0, 1])], (10 * lo[0] + 7) as f64);
//!     assert_eq!(g.view()[lo - Point([1, 1])], (10 * ((lo[0] + 7) % 8) + 7) as f64);
//!     Ok(())
//! }).unwrap();
//! ```

use crate::coll::Allgather;
use crate::error::CoreError;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use bytemuck::Pod;

use crate::core::Context;
use crate::model::domain::{Point, RectDomain};
use crate::model::global_grid::{GlobalGrid, GridRef};
use crate::model::grid::{GridView, GridViewMut, Layout};
use crate::model::team::Team;
use crate::{Blocking, GlobalPtr, Result, Semaphore};

/// How [`HaloGrid::exchange`] moves the ghost cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HaloStrategy {
    /// One dimension per phase, a message to each side (6 messages in 3 phases in 3-D).
    SixMessages,
    /// Every face, edge and corner from its owner in one phase (26 messages in 3-D).
    TwentySixMessages,
    /// The phases of `SixMessages` with each message packed into a buffer, put whole,
    /// and unpacked by the receiver (the hand-written baseline).
    Packed,
}

impl HaloStrategy {
    /// Every strategy, in the order benchmarks report them.
    pub const ALL: [HaloStrategy; 3] = [
        HaloStrategy::SixMessages,
        HaloStrategy::TwentySixMessages,
        HaloStrategy::Packed,
    ];

    /// The command-line name: `6msg`, `26msg` or `packed`.
    pub fn name(self) -> &'static str {
        match self {
            HaloStrategy::SixMessages => "6msg",
            HaloStrategy::TwentySixMessages => "26msg",
            HaloStrategy::Packed => "packed",
        }
    }
}

impl fmt::Display for HaloStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HaloStrategy {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        HaloStrategy::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                CoreError::BadArgument {
                    call: "HaloStrategy::from_str",
                    argument: "strategy",
                    why: format!("unknown halo strategy {s:?}: use 6msg, 26msg or packed"),
                }
                .into()
            })
    }
}

/// Rank `coords` of a row-major process grid `procs`.
fn rank_of<const N: usize>(coords: [usize; N], procs: [usize; N]) -> usize {
    coords.iter().zip(procs).fold(0, |acc, (&c, p)| acc * p + c)
}

/// Process-grid coordinates of `rank`.
fn coords_of<const N: usize>(mut rank: usize, procs: [usize; N]) -> [usize; N] {
    let mut c = [0; N];
    for d in (0..N).rev() {
        c[d] = rank % procs[d];
        rank /= procs[d];
    }
    c
}

/// The block of `whole` owned by process-grid position `coords`: each dimension split into
/// `procs[d]` contiguous pieces, the first `extent mod procs` one point longer.
///
/// ```
/// use tessera::{model::halo::block_of, Point, RectDomain};
/// let whole = RectDomain::with_shape([10, 4]);
/// assert_eq!(block_of(&whole, [3, 1], [0, 0]), RectDomain::new(Point([0, 0]), Point([3, 3])));
/// assert_eq!(block_of(&whole, [3, 1], [2, 0]), RectDomain::new(Point([7, 0]), Point([9, 3])));
/// ```
pub fn block_of<const N: usize>(
    whole: &RectDomain<N>,
    procs: [usize; N],
    coords: [usize; N],
) -> RectDomain<N> {
    let (mut lo, mut hi) = (whole.lo(), whole.lo());
    for d in 0..N {
        let (n, p, c) = (whole.extent(d), procs[d], coords[d]);
        let (base, rem) = (n / p, n % p);
        let start = c * base + c.min(rem);
        let len = base + usize::from(c < rem);
        lo[d] += start as i64;
        hi[d] += (start + len) as i64 - 1;
    }
    RectDomain::new(lo, hi)
}

/// One message of an exchange, as seen from its sender.
#[derive(Clone, Copy, Debug)]
struct Route<const N: usize> {
    target: usize,
    /// Where the target's block sits in the sender's coordinates minus where it really is.
    shift: Point<N>,
    /// The points moved, in the sender's coordinates.
    region: RectDomain<N>,
}

/// The geometry shared by every rank's plan.
struct Geometry<const N: usize> {
    whole: RectDomain<N>,
    procs: [usize; N],
    width: i64,
    strategy: HaloStrategy,
}

impl<const N: usize> Geometry<N> {
    /// The (phase, direction) of every message a rank sends, in a fixed order (the receive
    /// slot numbering of `packed`).
    fn directions(&self) -> Vec<(usize, Point<N>)> {
        match self.strategy {
            HaloStrategy::TwentySixMessages => RectDomain::new(Point::all(-1), Point::all(1))
                .iter()
                .filter(|&d| d != Point::zero())
                .map(|d| (0, d))
                .collect(),
            HaloStrategy::SixMessages | HaloStrategy::Packed => (0..N)
                .flat_map(|d| [(d, Point::unit(d, -1)), (d, Point::unit(d, 1))])
                .collect(),
        }
    }

    /// The message rank `from` sends in direction `dir` during `phase`.
    fn route(&self, from: usize, phase: usize, dir: Point<N>) -> Route<N> {
        let c = coords_of(from, self.procs);
        let mut to = [0; N];
        let mut shift = Point::zero();
        for d in 0..N {
            let p = self.procs[d] as i64;
            let moved = c[d] as i64 + dir[d];
            to[d] = moved.rem_euclid(p) as usize;
            shift[d] = moved.div_euclid(p) * self.whole.extent(d) as i64;
        }
        let mine = block_of(&self.whole, self.procs, c);
        let theirs = block_of(&self.whole, self.procs, to).translate(shift);
        let w = self.width;
        let region = match self.strategy {
            HaloStrategy::TwentySixMessages => theirs.halo(-dir, w).intersect(&mine),
            HaloStrategy::SixMessages | HaloStrategy::Packed => {
                // Their ghost slab across dimension `phase`, as wide as their storage in
                // every other dimension; our slab: ghosts included in the dimensions the
                // earlier phases filled, interior in the others.
                let ghost = theirs.halo(-dir, w);
                let grown = theirs.grow(w);
                let slab = RectDomain::new(
                    Point(std::array::from_fn(|d| {
                        if d == phase {
                            ghost.lo()[d]
                        } else {
                            grown.lo()[d]
                        }
                    })),
                    Point(std::array::from_fn(|d| {
                        if d == phase {
                            ghost.hi()[d]
                        } else {
                            grown.hi()[d]
                        }
                    })),
                );
                let filled = mine.grow(w);
                let ours = RectDomain::new(
                    Point(std::array::from_fn(|d| {
                        if d < phase {
                            filled.lo()[d]
                        } else {
                            mine.lo()[d]
                        }
                    })),
                    Point(std::array::from_fn(|d| {
                        if d < phase {
                            filled.hi()[d]
                        } else {
                            mine.hi()[d]
                        }
                    })),
                );
                slab.intersect(&ours)
            }
        };
        Route {
            target: rank_of(to, self.procs),
            shift,
            region,
        }
    }

    fn phases(&self) -> usize {
        match self.strategy {
            HaloStrategy::TwentySixMessages => 1,
            HaloStrategy::SixMessages | HaloStrategy::Packed => N,
        }
    }
}

/// An outgoing message, ready to go.
struct Send<T, const N: usize> {
    phase: usize,
    target: usize,
    /// The target's storage, translated into our coordinates and restricted to the region.
    dst: GridRef<T, N>,
    /// Our storage restricted to the region.
    src: GridRef<T, N>,
    /// `packed` only: the target's receive slot.
    slot: Option<GlobalPtr<T>>,
}

/// An incoming message, as its receiver sees it.
struct Receive<T, const N: usize> {
    phase: usize,
    /// `packed` only: our receive slot (seen as a packed grid over the region), and our
    /// storage restricted to the region.
    unpack: Option<(GridRef<T, N>, GridRef<T, N>)>,
}

/// One rank's block of a periodic, block-decomposed N-d grid with ghost cells; see the
/// [module documentation](self).
pub struct HaloGrid<'ctx, T: Pod, const N: usize> {
    ctx: &'ctx Context,
    grid: GlobalGrid<'ctx, T, N>,
    interior: RectDomain<N>,
    geometry: Geometry<N>,
    sends: Vec<Send<T, N>>,
    receives: Vec<Receive<T, N>>,
    /// Permissions to post on entry: (sender, count).
    permits: Vec<(usize, u64)>,
    permission: Semaphore,
    arrived: Vec<Semaphore>,
    /// `packed` only: the send buffer.
    buffer: Vec<T>,
    stats: HaloStats,
}

/// Where a halo grid's exchanges spent their time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HaloStats {
    /// Exchanges completed.
    pub exchanges: u64,
    /// Wall time inside `exchange`.
    pub total: Duration,
    /// Of which waiting: for permission to write, and for the neighbours' data.
    pub waiting: Duration,
}

impl std::ops::Add for HaloStats {
    type Output = HaloStats;
    fn add(self, o: HaloStats) -> HaloStats {
        HaloStats {
            exchanges: self.exchanges + o.exchanges,
            total: self.total + o.total,
            waiting: self.waiting + o.waiting,
        }
    }
}

impl<'ctx, T: Pod + 'static, const N: usize> HaloGrid<'ctx, T, N> {
    /// This rank's block of `whole` split over the process grid `procs` (row-major rank
    /// order, product = number of ranks), with `width` ghost layers, zero-filled.
    /// Collective over every rank.
    pub fn new(
        ctx: &'ctx Context,
        whole: RectDomain<N>,
        procs: [usize; N],
        width: i64,
        strategy: HaloStrategy,
    ) -> Result<Self> {
        let ranks: usize = procs.iter().product();
        if ranks != ctx.ranks() {
            return Err(CoreError::BadArgument { call: "HaloGrid::new", argument: "procs", why: format!(
                "halo grid: process grid {procs:?} has {ranks} positions but the job has {} ranks; make the product equal the rank count",
                ctx.ranks()
            ) }.into());
        }
        if !whole.is_unit_stride() || whole.is_empty() || width < 1 {
            return Err(CoreError::BadArgument { call: "HaloGrid::new", argument: "domain", why: format!(
                "halo grid: needs a non-empty unit-stride domain and width ≥ 1, not {whole} with width {width}"
            ) }.into());
        }
        for (d, &p) in procs.iter().enumerate() {
            if whole.extent(d) < p * width as usize {
                return Err(CoreError::BadArgument { call: "HaloGrid::new", argument: "procs", why: format!(
                    "halo grid: dimension {d} has {} points, too few for {p} blocks of at least {width} (the ghost width); use fewer ranks along it",
                    whole.extent(d),
                ) }.into());
            }
        }
        let geometry = Geometry {
            whole,
            procs,
            width,
            strategy,
        };
        let me = ctx.rank();
        let interior = block_of(&whole, procs, coords_of(me, procs));
        let grid = GlobalGrid::filled(ctx, interior.grow(width), T::zeroed())?;
        let team = Team::world(ctx)?;
        let storage = grid.exchange(&team)?;
        let directions = geometry.directions();

        // Receive side: message k of the canonical list arrives from the rank that sends
        // it in direction `dir`, which sits at −dir from us.
        let mut receives = Vec::new();
        let mut slots = vec![GlobalPtr::<T>::new(me, 0); directions.len()];
        let mut permits = BTreeMap::new();
        for (k, &(phase, dir)) in directions.iter().enumerate() {
            let sender = geometry.route(me, phase, -dir).target;
            let route = geometry.route(sender, phase, dir);
            debug_assert_eq!(route.target, me);
            *permits.entry(sender).or_insert(0u64) += 1;
            let unpack = if strategy == HaloStrategy::Packed {
                let here = route.region.translate(-route.shift);
                slots[k] = ctx.alloc_local::<T>(here.len())?;
                Some((
                    GridRef::packed(slots[k], here),
                    grid.reference().restrict(&here),
                ))
            } else {
                None
            };
            receives.push(Receive { phase, unpack });
        }
        let mut all_slots = vec![GlobalPtr::<T>::new(0, 0); directions.len() * ranks];
        if strategy == HaloStrategy::Packed {
            team.run(Allgather::new(&slots).to(&mut all_slots), Blocking)?;
        }

        let sends = directions
            .iter()
            .enumerate()
            .map(|(k, &(phase, dir))| {
                let r = geometry.route(me, phase, dir);
                Send {
                    phase,
                    target: r.target,
                    dst: storage[r.target].translate(r.shift).restrict(&r.region),
                    src: grid.reference().restrict(&r.region),
                    slot: (strategy == HaloStrategy::Packed)
                        .then(|| all_slots[r.target * directions.len() + k]),
                }
            })
            .collect::<Vec<_>>();
        let largest = sends
            .iter()
            .map(|s| s.src.domain().len())
            .max()
            .unwrap_or(0);
        let permission = ctx.semaphore_collective()?;
        let arrived = (0..geometry.phases())
            .map(|_| ctx.semaphore_collective())
            .collect::<Result<Vec<_>>>()?;
        Ok(HaloGrid {
            ctx,
            grid,
            interior,
            sends,
            receives,
            permits: permits.into_iter().collect(),
            permission,
            arrived,
            buffer: if strategy == HaloStrategy::Packed {
                vec![T::zeroed(); largest]
            } else {
                Vec::new()
            },
            geometry,
            stats: HaloStats::default(),
        })
    }

    /// The points this rank owns.
    pub fn interior(&self) -> RectDomain<N> {
        self.interior
    }

    /// The periodic domain the blocks tile.
    pub fn whole(&self) -> RectDomain<N> {
        self.geometry.whole
    }

    /// The exchange strategy.
    pub fn strategy(&self) -> HaloStrategy {
        self.geometry.strategy
    }

    /// Messages this rank sends per exchange.
    pub fn messages(&self) -> usize {
        self.sends.len()
    }

    /// The block with its ghost layers.
    pub fn view(&self) -> GridView<'_, T, N> {
        // SAFETY: other ranks write this storage only inside their exchange, between our
        // permission (posted only inside our exchange, which takes &mut self) and our
        // arrival waits, which complete before our exchange returns; no rank reads it.
        unsafe { self.grid.view() }
    }

    /// The block with its ghost layers, mutable.
    pub fn view_mut(&mut self) -> GridViewMut<'_, T, N> {
        // SAFETY: as in view(); no rank reads our storage, and `&mut self` excludes the
        // exchange and every other view.
        unsafe { self.grid.view_mut() }
    }

    /// The block with its ghost layers as one row-major slice over
    /// `interior().grow(width)`, for loops that index storage directly.
    pub fn as_slice(&self) -> &[T] {
        self.view().data()
    }

    /// The block with its ghost layers as one mutable row-major slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.view_mut().into_data()
    }

    /// Points along each dimension of the storage (interior plus ghost layers).
    pub fn storage_shape(&self) -> [usize; N] {
        self.interior.grow(self.geometry.width).shape()
    }

    /// Fill every ghost cell from the neighbours (periodic at the boundary of the whole
    /// domain). Collective over every rank.
    pub fn exchange(&mut self) -> Result<()> {
        let ctx = self.ctx;
        let start = Instant::now();
        for &(sender, n) in &self.permits {
            self.permission.on(sender).post(ctx, n)?;
        }
        self.permission.wait(ctx, self.sends.len() as u64)?;
        let mut waited = start.elapsed();
        for (phase, arrived) in self.arrived.iter().enumerate() {
            for send in self.sends.iter().filter(|s| s.phase == phase) {
                match send.slot {
                    None => {
                        send.dst.copy_from(ctx, &send.src)?;
                    }
                    Some(slot) => {
                        let region = send.src.domain();
                        let packed = &mut self.buffer[..region.len()];
                        GridViewMut::from_parts(packed, Layout::packed(region))
                            .copy_from_ref(ctx, &send.src)?;
                        ctx.put(slot, &*packed, Blocking)?;
                    }
                }
                arrived.on(send.target).post(ctx, 1)?;
            }
            let incoming = self.receives.iter().filter(|r| r.phase == phase);
            let before = Instant::now();
            arrived.wait(ctx, incoming.clone().count() as u64)?;
            waited += before.elapsed();
            for receive in incoming {
                if let Some((slot, into)) = &receive.unpack {
                    into.copy_from(ctx, slot)?;
                }
            }
        }
        self.stats.exchanges += 1;
        self.stats.waiting += waited;
        self.stats.total += start.elapsed();
        Ok(())
    }

    /// Time spent in [`HaloGrid::exchange`] so far.
    pub fn stats(&self) -> HaloStats {
        self.stats
    }
}
