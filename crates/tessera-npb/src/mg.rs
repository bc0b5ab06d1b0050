//! MG: V-cycle multigrid for the 3-D Poisson equation on a periodic grid (NPB's `mg3P`).
//!
//! Every level is a [`HaloGrid`]: the ranks' blocks of a periodic `2ᵏ × 2ᵏ × 2ᵏ` grid with
//! one ghost layer, decomposed over a power-of-two process grid ([`process_grid`]: x whole
//! up to 16 ranks, from 32 NPB's, which halves the slowest dimension first). Ghost updates
//! (NPB's `comm3`) are the halo grid's one-sided exchange of domain intersections, in 6
//! messages (`--variant 6msg`, three phases) or 26 (`--variant 26msg`, one phase).
//!
//! The operators are NPB's: `resid` (r = v − A u), `psinv` (u += S r), `rprj3` (restriction
//! of the residual to the coarser level) and `interp` (trilinear prolongation added to the
//! finer level). They work on the storage slices directly, with the row buffers of the
//! reference code, so each point costs what it costs there. `interp` also computes the
//! finer level's ghost layer from the coarser level's ghosts; that gives exactly the values
//! an exchange would bring (the same operands in the same order), so it needs none. The
//! top level's way up (interpolation, residual, smoothing, residual) is one sweep where x
//! is not split (module `top`), bit for bit the stage-by-stage result.
//!
//! Coarse levels are *gathered* (seed 000 §3.1.6): once a rank's block of a level would be
//! thinner than [`GATHER_BELOW`] points along some dimension, every rank holds the whole
//! level and works on it redundantly, so those levels need no ghost exchange at all. The
//! finest gathered level is where the two meet: going down, each rank restricts into its
//! own block of it and one allgather assembles the whole level; going up, each rank cuts
//! its block (with ghosts) out of the whole level and interpolates from that. This is also
//! what lets MG run on more ranks than the coarsest levels have points.
//!
//! Coordinates: point `[z, y, x]` (x fastest) is the reference's `(i1, i2, i3) = (x, y, z)`.

// Stencils read neighbours i − 1, i, i + 1 of several rows at once: index loops say that
// most plainly.
#![allow(clippy::needless_range_loop)]

use tessera::coll::{Allgather, Allreduce, Barrier};
use tessera::Blocking;

use crate::NpbError;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use tessera::{Context, CoreError, HaloGrid, HaloStats, HaloStrategy, Op, RectDomain, Team};

use crate::rng::{pow_mod, vranlc, A};
use crate::{Class, Outcome};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod stencil;
mod top;
#[cfg(target_arch = "x86_64")]
mod vector;

use stencil::*;

/// The problem of one class.
#[derive(Clone, Copy, Debug)]
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// Points along each dimension.
    pub n: usize,
    /// V-cycles timed.
    pub nit: usize,
    /// The official L2 norm of the final residual (`None` where this crate carries none).
    pub rnm2: Option<f64>,
}

/// Official values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        n: 32,
        nit: 4,
        rnm2: Some(0.530_770_700_573_4e-4),
    },
    ClassData {
        class: Class::W,
        n: 128,
        nit: 4,
        rnm2: Some(0.646_732_937_533_9e-5),
    },
    ClassData {
        class: Class::A,
        n: 256,
        nit: 4,
        rnm2: Some(0.243_336_530_906_9e-5),
    },
    ClassData {
        class: Class::B,
        n: 256,
        nit: 20,
        rnm2: Some(0.180_056_440_135_5e-5),
    },
    ClassData {
        class: Class::C,
        n: 512,
        nit: 20,
        rnm2: Some(5.70673228574e-07),
    },
    ClassData {
        class: Class::D,
        n: 1024,
        nit: 50,
        rnm2: None,
    },
];

/// Relative tolerance of the verification.
const EPSILON: f64 = 1e-8;

variants! {
    /// The ghost-exchange strategy.
    pub enum Variant {
        /// Every neighbour's face, edge and corner in one phase.
        TwentySix => "26msg",
        /// Three phases of face exchanges, edges and corners carried along.
        Six => "6msg",
    }
}

impl Variant {
    /// The halo layer's strategy for this variant.
    fn strategy(self) -> HaloStrategy {
        match self {
            Variant::TwentySix => HaloStrategy::TwentySixMessages,
            Variant::Six => HaloStrategy::SixMessages,
        }
    }
}

/// MG in the kernel registry.
pub struct Mg;

impl crate::Benchmark for Mg {
    fn name(&self) -> &'static str {
        "mg"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        // Coarse levels are gathered; the finest (S: 32³) needs two points per rank and
        // dimension, which 1024 ranks (16 × 8 × 8) still have.
        if ranks.is_power_of_two() && ranks <= 1024 {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "mg",
                ranks,
                format!("mg runs on a power-of-two number of ranks up to 1024, not {ranks}"),
            ))
        }
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("mg", variant)?)
    }
    /// MG is bound by memory: per iteration, on the finest grid, the residual twice and
    /// the smoother once (three arrays each), the restriction (one) and the interpolation
    /// (two): 96 bytes per point, and an eighth more for each coarser level (8/7 in all).
    fn demand(&self, class: Class, _outcome: &Outcome) -> crate::hardware::Demand {
        let data = crate::class_data(&CLASSES, |c| c.class, class);
        let points = (data.n as f64).powi(3);
        crate::hardware::Demand {
            resource: crate::hardware::Resource::MemoryBytes,
            amount: 96.0 * 8.0 / 7.0 * points * data.nit as f64,
            basis: "about 110 bytes per finest-grid point per iteration".into(),
        }
    }
}

/// The residual operator's coefficients (a₁ = 0 is skipped, as in the reference).
const RESIDUAL: [f64; 4] = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0];

/// The smoother's coefficients: classes S, W, A use one set, B and larger another.
fn smoother(class: Class) -> [f64; 4] {
    match class {
        Class::S | Class::W | Class::A => [-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0],
        Class::B | Class::C | Class::D => [-3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0.0],
    }
}

/// A level whose blocks would be thinner than this many points along some dimension is
/// gathered: every rank holds all of it (see the module documentation). Measured at 2, 4
/// and 8 ranks in docs/PERFORMANCE.md.
pub const GATHER_BELOW: usize = 2;

/// The variable that overrides [`fused_bytes`].
pub(crate) const FUSED_ENV: &str = "TESSERA_MG_FUSED";

/// Bytes of the planes the top level's one sweep up holds per rank (`mg::top`), above which
/// it goes in tiles of rows, so that what it holds stays near the core (a class C plane on
/// two ranks is 2.1 MB, and the sweep holds fourteen). On the Zen 2 host (512 KiB of L2
/// per core, 16 MiB of L3), with the grids a quarter page apart, class C on two ranks took
/// 12.53–12.84 s with 2 MiB against 13.11–13.41 with 1 MiB, 12.76–13.02 with 6 MiB and
/// 16.0–17.3 stage by stage, class B 1.64 s with 2 MiB (one round of two) against
/// 1.70–1.74 with 1 MiB and 1.81–1.91 with 6 MiB (docs/PERFORMANCE.md).
/// `TESSERA_MG_FUSED` (bytes) overrides it, for measurements and for the test that tiles
/// change no bit of the result;
/// `0` runs the way up stage by stage, each stage a sweep of its own.
pub(crate) fn fused_bytes() -> Result<usize, NpbError> {
    const DEFAULT: usize = 2 << 20;
    match tessera::config::text(FUSED_ENV) {
        None => Ok(DEFAULT),
        Some(v) => v.parse().map_err(|_| NpbError::Setting {
            variable: FUSED_ENV,
            message: format!(
                "TESSERA_MG_FUSED={v:?} is not a number of bytes (unset it for the default, {DEFAULT})"
            ),
        }),
    }
}

/// MG's process grid (ranks along z, y, x) for a power-of-two number of ranks: x whole
/// where that exchanges no more ghost area than NPB's grid, else NPB's grid.
///
/// NPB doubles the slowest dimension first, then the next, then x, round and round
/// (8 ranks: 2 × 2 × 2). Doubling only z and y (8 ranks: 4 × 2 × 1) exchanges the same
/// area of faces up to 16 ranks, since a whole x has no faces to exchange (its ghosts are
/// periodic copies), and keeps the top level's one sweep up (`mg::top`), which needs x
/// whole: on the 2-core Zen 2 host, 8 ranks took 1.43–1.49 s at class B with 4 × 2 × 1
/// against 1.69–1.80 with 2 × 2 × 2, and 10.4 s at C against 12.1–12.2
/// (docs/PERFORMANCE.md). From 32 ranks NPB's grid exchanges less (at 32 ranks 0.625 of
/// the whole grid's face against 0.75), and it is the one taken.
///
/// ```
/// use tessera_npb::mg::process_grid;
/// assert_eq!(process_grid(8), [4, 2, 1]);
/// assert_eq!(process_grid(64), [4, 4, 4]);
/// ```
pub fn process_grid(ranks: usize) -> [usize; 3] {
    let npb = doubling(ranks, 3);
    let x_whole = doubling(ranks, 2);
    if exchanged_area(x_whole) <= exchanged_area(npb) {
        x_whole
    } else {
        npb
    }
}

/// The variable that picks the process grid: `auto` ([`process_grid`], the default) or
/// `npb` (NPB's grid at every rank count, so that one binary measures both).
pub(crate) const GRID_ENV: &str = "TESSERA_MG_GRID";

/// The process grid a run of `ranks` takes: [`process_grid`], or NPB's where
/// `TESSERA_MG_GRID=npb`; an error names a value the variable does not take.
pub(crate) fn grid_in_force(ranks: usize) -> Result<[usize; 3], NpbError> {
    match tessera::config::choice(GRID_ENV, &["auto", "npb"]) {
        Ok(Some(word)) if word == "npb" => Ok(doubling(ranks, 3)),
        Ok(_) => Ok(process_grid(ranks)),
        Err(e) => Err(NpbError::Setting {
            variable: GRID_ENV,
            message: e.to_string(),
        }),
    }
}

/// The grid of `ranks` made by doubling the first `dims` dimensions in turn, the slowest
/// first.
fn doubling(ranks: usize, dims: usize) -> [usize; 3] {
    let mut procs = [1; 3];
    let mut d = 0;
    while procs.iter().product::<usize>() < ranks {
        procs[d] *= 2;
        d = (d + 1) % dims;
    }
    procs
}

/// The area of the faces one block exchanges with its neighbours, as a fraction of a
/// face of the whole (cubic) grid: two faces along every split dimension.
fn exchanged_area(procs: [usize; 3]) -> f64 {
    (0..3)
        .filter(|&d| procs[d] > 1)
        .map(|d| {
            let face: usize = (0..3).filter(|&e| e != d).map(|e| procs[e]).product();
            2.0 / face as f64
        })
        .sum()
}

/// Storage shape and index arithmetic of one block (ghosts included).
#[derive(Clone, Copy, Debug)]
struct Shape {
    m: [usize; 3],
}

impl Shape {
    /// Storage of `interior` points along each dimension plus one ghost layer each side.
    fn with_interior(interior: [usize; 3]) -> Shape {
        Shape {
            m: interior.map(|e| e + 2),
        }
    }

    /// Points in the storage.
    fn len(&self) -> usize {
        self.m.iter().product()
    }

    /// Start of row `(i0, i1)`.
    #[inline(always)]
    fn row(&self, i0: usize, i1: usize) -> usize {
        (i0 * self.m[1] + i1) * self.m[2]
    }
}

/// The storage of one grid of a level: this rank's block, or (gathered) the whole level.
enum LevelGrid<'c> {
    Block(Box<HaloGrid<'c, f64, 3>>),
    Whole(Vec<f64>),
}

impl LevelGrid<'_> {
    fn as_slice(&self) -> &[f64] {
        match self {
            LevelGrid::Block(g) => g.as_slice(),
            LevelGrid::Whole(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [f64] {
        match self {
            LevelGrid::Block(g) => g.as_mut_slice(),
            LevelGrid::Whole(v) => v,
        }
    }

    /// Fill the ghost layer: from the neighbours for a block, locally for a whole level.
    fn exchange(&mut self, shape: Shape) -> tessera::Result<()> {
        match self {
            LevelGrid::Block(g) => g.exchange(),
            LevelGrid::Whole(v) => {
                fill_periodic(v, shape);
                Ok(())
            }
        }
    }

    fn stats(&self) -> HaloStats {
        match self {
            LevelGrid::Block(g) => g.stats(),
            LevelGrid::Whole(_) => HaloStats::default(),
        }
    }
}

/// How the finest gathered level meets the distributed level above it.
struct Seam {
    /// This rank's block of the gathered level, with its ghost layer.
    shape: Shape,
    /// Where the block's storage starts in the whole level's storage.
    at: [usize; 3],
    /// Every rank's `at`, in rank order.
    all_at: Vec<[usize; 3]>,
    /// The block's storage (restriction goes in here, interpolation reads from here).
    block: Vec<f64>,
    /// The block's interior, packed for the allgather.
    packed: Vec<f64>,
    /// Every rank's packed block interior, as the allgather delivers them.
    gathered: Vec<f64>,
}

impl Seam {
    /// The seam of a rank whose block interior starts at `at` (whole-level coordinates)
    /// and has `extent` points. Collective.
    fn new(team: &Team<'_>, at: [usize; 3], extent: [usize; 3]) -> tessera::Result<Seam> {
        let mine = at.map(|a| a as u64);
        let mut all = vec![0u64; 3 * team.size()];
        team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
        let shape = Shape::with_interior(extent);
        let interior: usize = extent.iter().product();
        Ok(Seam {
            shape,
            at,
            all_at: all
                .chunks_exact(3)
                .map(|c| [0, 1, 2].map(|d| c[d] as usize))
                .collect(),
            block: vec![0.0; shape.len()],
            packed: vec![0.0; interior],
            gathered: vec![0.0; interior * team.size()],
        })
    }

    /// Assemble the whole level in `whole` (ghosts included) from every rank's block.
    /// Collective.
    fn gather(&mut self, team: &Team<'_>, whole: &mut [f64], shape: Shape) -> tessera::Result<()> {
        let extent = self.shape.m.map(|m| m - 2);
        let inner = Shape { m: extent };
        copy_box(
            (&self.block, self.shape, [1; 3]),
            (&mut self.packed, inner, [0; 3]),
            extent,
        );
        team.run(
            Allgather::new(&self.packed).to(&mut self.gathered),
            Blocking,
        )?;
        for (packed, at) in self.gathered.chunks_exact(inner.len()).zip(&self.all_at) {
            let interior_at = at.map(|a| a + 1);
            copy_box((packed, inner, [0; 3]), (whole, shape, interior_at), extent);
        }
        fill_periodic(whole, shape);
        Ok(())
    }

    /// Cut our block, with its ghost layer, out of the whole level.
    fn scatter(&mut self, whole: &[f64], shape: Shape) {
        let extent = self.shape.m;
        copy_box(
            (whole, shape, self.at),
            (&mut self.block, self.shape, [0; 3]),
            extent,
        );
    }
}

/// One level of the hierarchy.
struct Level<'c> {
    u: LevelGrid<'c>,
    r: LevelGrid<'c>,
    shape: Shape,
    /// The finest gathered level only.
    seam: Option<Seam>,
}

/// The solver's state on one rank.
struct Multigrid<'c> {
    team: Team<'c>,
    /// Levels 1 (2³ points) to lt (the full grid), at index k − 1.
    levels: Vec<Level<'c>>,
    v: HaloGrid<'c, f64, 3>,
    smoother: [f64; 4],
    n: usize,
    /// Ranks along each dimension.
    procs: [usize; 3],
    bufs: RowBuffers,
    /// Time spent assembling the finest gathered level.
    gathering: Duration,
    /// The top level's residual is already restricted onto the level below (by
    /// [`Multigrid::up_top`]), so the next V-cycle starts one level down.
    top_restricted: bool,
    /// [`fused_bytes`], read once.
    fused_bytes: usize,
}

impl<'c> Multigrid<'c> {
    fn new(
        ctx: &'c Context,
        data: &ClassData,
        strategy: HaloStrategy,
        gather_below: usize,
    ) -> tessera::Result<Self> {
        let procs = grid_in_force(ctx.ranks())?;
        let lt = data.n.trailing_zeros() as usize;
        let team = Team::world(ctx)?;
        // Levels 1..=gathered are whole on every rank; the top level never is.
        let gathered = (1..lt)
            .rev()
            .find(|&k| procs.iter().any(|&p| (1 << k) < p * gather_below))
            .unwrap_or(0);
        let mut levels = Vec::new();
        for k in 1..=lt {
            let whole = RectDomain::with_shape([1 << k; 3]);
            let level = if k <= gathered {
                let shape = Shape::with_interior(whole.shape());
                Level {
                    u: LevelGrid::Whole(vec![0.0; shape.len()]),
                    r: LevelGrid::Whole(vec![0.0; shape.len()]),
                    shape,
                    seam: None,
                }
            } else {
                let u = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
                let r = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
                let shape = Shape {
                    m: u.storage_shape(),
                };
                Level {
                    u: LevelGrid::Block(Box::new(u)),
                    r: LevelGrid::Block(Box::new(r)),
                    shape,
                    seam: None,
                }
            };
            levels.push(level);
        }
        if gathered > 0 {
            // Our block of the finest gathered level is half our block of the level above.
            let LevelGrid::Block(finer) = &levels[gathered].u else {
                unreachable!("the level above the gathered ones is distributed")
            };
            let interior = finer.interior();
            let at = [0, 1, 2].map(|d| interior.lo()[d] as usize / 2);
            let extent = [0, 1, 2].map(|d| interior.extent(d) / 2);
            levels[gathered - 1].seam = Some(Seam::new(&team, at, extent)?);
        }
        let whole = RectDomain::with_shape([data.n; 3]);
        let v = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
        let longest = data.n + 2;
        Ok(Multigrid {
            team,
            levels,
            v,
            smoother: smoother(data.class),
            n: data.n,
            procs,
            bufs: std::array::from_fn(|_| vec![0.0; longest]),
            gathering: Duration::ZERO,
            top_restricted: false,
            fused_bytes: fused_bytes()?,
        })
    }

    /// Exchange time of every grid so far, the gathers included.
    fn exchange_stats(&self) -> HaloStats {
        let gathers = HaloStats {
            total: self.gathering,
            ..HaloStats::default()
        };
        self.levels
            .iter()
            .flat_map(|l| [l.u.stats(), l.r.stats()])
            .fold(self.v.stats() + gathers, |a, b| a + b)
    }

    fn top(&mut self) -> &mut Level<'c> {
        self.levels.last_mut().expect("at least one level")
    }

    /// NPB's `zran3`: v is zero but for +1 at the ten largest and −1 at the ten smallest
    /// of n³ random numbers (the sequence taken in x-fastest order), then a ghost exchange.
    fn zran3(&mut self) -> tessera::Result<()> {
        const SEED: u64 = 314_159_265;
        const KEEP: usize = 10;
        let n = self.n as u64;
        let interior = self.v.interior();
        let (lo, len) = (interior.lo(), interior.extent(2));
        let mut row = vec![0.0; len];
        // (value, linear index): the largest and the smallest seen here.
        let mut high: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
        let mut low: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
        for z in lo[0]..=interior.hi()[0] {
            for y in lo[1]..=interior.hi()[1] {
                let first = lo[2] as u64 + n * (y as u64 + n * z as u64);
                let mut x = crate::rng::mul_mod(pow_mod(A, first), SEED);
                vranlc(&mut x, A, &mut row);
                for (i, &value) in row.iter().enumerate() {
                    let at = first + i as u64;
                    keep(&mut high, KEEP, (value, at), |a, b| a > b);
                    keep(&mut low, KEEP, (value, at), |a, b| a < b);
                }
            }
        }
        let ranks = self.team.size();
        let mut places = Vec::new();
        for (mine, better, mark) in [
            (&low, (|a, b| a < b) as fn(f64, f64) -> bool, -1.0),
            (&high, |a, b| a > b, 1.0),
        ] {
            let mut values = [f64::NAN; KEEP];
            let mut indices = [u64::MAX; KEEP];
            for (k, &(value, at)) in mine.iter().enumerate() {
                (values[k], indices[k]) = (value, at);
            }
            let mut all_values = vec![0.0; KEEP * ranks];
            let mut all_indices = vec![0u64; KEEP * ranks];
            self.team
                .run(Allgather::new(&values).to(&mut all_values), Blocking)?;
            self.team
                .run(Allgather::new(&indices).to(&mut all_indices), Blocking)?;
            let mut best: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
            for (&value, &at) in all_values.iter().zip(&all_indices) {
                if at != u64::MAX {
                    keep(&mut best, KEEP, (value, at), better);
                }
            }
            places.extend(best.into_iter().map(|(_, at)| (at, mark)));
        }
        let shape = self.top().shape;
        let v = self.v.as_mut_slice();
        v.fill(0.0);
        for (at, mark) in places {
            let (x, y, z) = (at % n, at / n % n, at / (n * n));
            let p = tessera::Point([z as i64, y as i64, x as i64]);
            if interior.contains(p) {
                let local = p - interior.lo() + tessera::Point::all(1);
                v[shape.row(local[0] as usize, local[1] as usize) + local[2] as usize] = mark;
            }
        }
        self.v.exchange()
    }

    /// `r = v − A u` at the top level, then a ghost exchange of r.
    fn resid_top(&mut self) -> tessera::Result<()> {
        self.top_restricted = false;
        let bufs = &mut self.bufs;
        let top = self.levels.last_mut().expect("at least one level");
        let all = Part::all(top.shape);
        resid(
            top.u.as_slice(),
            Some(self.v.as_slice()),
            top.r.as_mut_slice(),
            top.shape,
            all,
            bufs,
        );
        top.r.exchange(top.shape)
    }

    /// The L2 norm of the top-level residual (NPB's rnm2) and its largest magnitude.
    fn norm(&mut self) -> tessera::Result<(f64, f64)> {
        let top = self.levels.last().expect("at least one level");
        let (sum, max) = norm_parts(top.r.as_slice(), top.shape);
        let sum = self.team.run(Allreduce::value(sum, Op::Sum), Blocking)?;
        let max = self.team.run(Allreduce::value(max, Op::Max), Blocking)?;
        Ok(((sum / (self.n as f64).powi(3)).sqrt(), max))
    }

    /// One iteration: a V-cycle (NPB's `mg3P`) and the top level's residual after it.
    fn iteration(&mut self) -> tessera::Result<()> {
        let lt = self.levels.len();
        let c = self.smoother;
        let bufs = &mut self.bufs;
        // Down: restrict the residual level by level (the top level's restriction may
        // have gone with the last residual).
        let restricted = std::mem::take(&mut self.top_restricted);
        for k in (1..lt).rev() {
            if restricted && k == lt - 1 {
                continue;
            }
            let (coarse, fine) = self.levels.split_at_mut(k);
            let (coarse, fine) = (&mut coarse[k - 1], &fine[0]);
            match &mut coarse.seam {
                None => {
                    rprj3(
                        fine.r.as_slice(),
                        fine.shape,
                        coarse.r.as_mut_slice(),
                        coarse.shape,
                        Part::all(coarse.shape),
                        bufs,
                    );
                    coarse.r.exchange(coarse.shape)?;
                }
                Some(seam) => {
                    rprj3(
                        fine.r.as_slice(),
                        fine.shape,
                        &mut seam.block,
                        seam.shape,
                        Part::all(seam.shape),
                        bufs,
                    );
                    let start = Instant::now();
                    seam.gather(&self.team, coarse.r.as_mut_slice(), coarse.shape)?;
                    self.gathering += start.elapsed();
                }
            }
        }
        // Bottom: smooth from zero.
        let bottom = &mut self.levels[0];
        bottom.u.as_mut_slice().fill(0.0);
        psinv(
            bottom.r.as_slice(),
            bottom.u.as_mut_slice(),
            bottom.shape,
            Part::all(bottom.shape),
            c,
            bufs,
        );
        bottom.u.exchange(bottom.shape)?;
        // Up: interpolate, take the residual, smooth; the top level's way up is one sweep
        // with the residual after it (`up_top`).
        for k in 1..lt - 1 {
            let (coarse, fine) = self.levels.split_at_mut(k);
            let (coarse, fine) = (&mut coarse[k - 1], &mut fine[0]);
            // Interpolate from our block of the coarse level.
            let (z, z_shape) = match &mut coarse.seam {
                None => (coarse.u.as_slice(), coarse.shape),
                Some(seam) => {
                    seam.scatter(coarse.u.as_slice(), coarse.shape);
                    (&seam.block[..], seam.shape)
                }
            };
            // Below the top, the correction starts from zero: the interpolation writes it.
            interp_resid(
                z,
                z_shape,
                fine.u.as_mut_slice(),
                None,
                fine.r.as_mut_slice(),
                fine.shape,
                bufs,
            );
            fine.r.exchange(fine.shape)?;
            psinv(
                fine.r.as_slice(),
                fine.u.as_mut_slice(),
                fine.shape,
                Part::all(fine.shape),
                c,
                bufs,
            );
            fine.u.exchange(fine.shape)?;
        }
        self.up_top()
    }
}

/// Insert `item` into `kept` (at most `limit`, best first by `better`).
fn keep(kept: &mut Vec<(f64, u64)>, limit: usize, item: (f64, u64), better: fn(f64, f64) -> bool) {
    if kept.len() == limit && !better(item.0, kept[limit - 1].0) {
        return;
    }
    let at = kept
        .iter()
        .position(|k| better(item.0, k.0))
        .unwrap_or(kept.len());
    kept.insert(at, item);
    kept.truncate(limit);
}

/// What a rank of MG holds: `u` and `r` on every level and `v` on the finest, each its
/// block with one ghost layer, in the segment (the reference holds the same three).
pub fn footprint(class: Class, ranks: usize) -> crate::Footprint {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    // The settings are checked before a footprint is asked for.
    let procs = grid_in_force(ranks).unwrap_or_else(|_| process_grid(ranks));
    let block = |n: usize| procs.iter().map(|&p| n.div_ceil(p) + 2).product::<usize>();
    let levels: usize = (1..=data.n.trailing_zeros()).map(|k| block(1 << k)).sum();
    crate::Footprint {
        segment: (2 * levels + block(data.n)) * size_of::<f64>(),
        private: 0,
    }
}

/// Run MG at `class`; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    run_gathering(ctx, class, variant, GATHER_BELOW)
}

/// [`run`], gathering every level whose blocks would be thinner than `gather_below`
/// points (at least 2) along some dimension, for experiments and tests.
///
/// ```no_run
/// # fn main() -> tessera::Result<()> {
/// tessera::Job::threads(4).run(|ctx| {
///     // Every level below the finest is gathered onto every rank.
///     let outcome = tessera_npb::mg::run_gathering(ctx, tessera_npb::Class::S, tessera_npb::mg::Variant::TwentySix, 64)?;
///     assert!(outcome.map_or(true, |o| o.verified == Some(true)));
///     Ok(())
/// })?;
/// # Ok(())
/// # }
/// ```
pub fn run_gathering(
    ctx: &Context,
    class: Class,
    variant: Variant,
    gather_below: usize,
) -> tessera::Result<Option<Outcome>> {
    if gather_below < 2 {
        return Err(CoreError::BadArgument { call: "mg", argument: "gather_below", why: format!(
            "mg: gather_below must be at least 2 (the finest gathered level needs a point per rank), not {gather_below}"
        ) }
        .into());
    }
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let strategy = variant.strategy();
    crate::Benchmark::check_ranks(&Mg, ctx.ranks())?;
    let mut mg = Multigrid::new(ctx, data, strategy, gather_below)?;
    // Untimed: set up, one V-cycle, set up again (as the reference does).
    mg.zran3()?;
    mg.resid_top()?;
    mg.iteration()?;
    mg.top().u.as_mut_slice().fill(0.0);
    mg.zran3()?;
    mg.team.run(Barrier, Blocking)?;

    let before = mg.exchange_stats();
    let start = Instant::now();
    mg.resid_top()?;
    mg.norm()?;
    let mut progress = crate::Progress::new("mg", data.nit, ctx.rank())?;
    for done in 1..=data.nit {
        mg.iteration()?;
        progress.done(done);
    }
    let (rnm2, rnmu) = mg.norm()?;
    let mine = start.elapsed().as_secs_f64();
    crate::note_resident_share(); // every array is still held here
    let exchanges = mg.exchange_stats();
    let (in_exchange, waiting) = (
        (exchanges.total - before.total).as_secs_f64(),
        (exchanges.waiting - before.waiting).as_secs_f64(),
    );
    let elapsed = mg.team.run(Allreduce::value(mine, Op::Max), Blocking)?;
    let mut profile = BTreeMap::new();
    for (name, seconds) in [
        ("compute_s", mine - in_exchange),
        ("communication_s", in_exchange - waiting),
        ("wait_s", waiting),
    ] {
        let mean = mg.team.run(Allreduce::value(seconds, Op::Sum), Blocking)? / ctx.ranks() as f64;
        profile.insert(name.to_string(), mean);
    }
    if ctx.rank() != 0 {
        return Ok(None);
    }
    let points = (data.n as f64).powi(3);
    Ok(Some(Outcome {
        kernel: "MG".into(),
        class: class.to_string(),
        ranks: ctx.ranks(),
        variant: variant.to_string(),
        time_s: elapsed,
        mops: 58.0 * data.nit as f64 * points / elapsed / 1e6,
        verified: data.rnm2.map(|r| ((rnm2 - r) / r).abs() <= EPSILON),
        values: BTreeMap::from([("rnm2".to_string(), rnm2), ("rnmu".to_string(), rnmu)]),
        reference: data
            .rnm2
            .map(|r| BTreeMap::from([("rnm2".to_string(), r)]))
            .unwrap_or_default(),
        size: format!("{0}x{0}x{0}", data.n),
        iterations: data.nit as u64,
        operation: "floating point".into(),
        profile,
        choices: BTreeMap::from([(
            "process grid".to_string(),
            format!(
                "{} x {} x {} (z, y, x)",
                mg.procs[0], mg.procs[1], mg.procs[2]
            ),
        )]),
        ..Outcome::default()
    }))
}

#[cfg(test)]
mod tests;
