//! FT: a 3-D FFT PDE solver (NPB's spectral method for ∂u/∂t = α∇²u).
//!
//! The grid is split into slabs: in the *space layout* a rank owns whole z-planes,
//! `[z][y][x]` with x contiguous; in the *frequency layout* it owns whole y-planes,
//! `[y][x][z]` with z contiguous. A forward transform does the x and y FFTs in space
//! layout, moves every element to the frequency layout (the transpose), and does the z
//! FFTs there; the inverse goes back the same way. The transpose writes each element
//! straight into its place in the owner's array in the global address space, so no rank
//! ever unpacks what it receives:
//!
//! - `--variant slabs` (the default): as soon as a plane's FFTs are done, its piece for
//!   every owner goes out with one strided put, while the next plane is computed;
//! - `--variant packed`: all planes first, then one contiguous block per owner, written into
//!   the owner's receive area and unpacked there (the reference's bulk all-to-all).
//! - `--variant pencils`: every row goes out as soon as it is ready (a y-row once its
//!   plane is transformed, a z-row right after its own FFT), one small strided put each.
//!
//! The collective arrays are [`PhasedArray`]s, so FT holds no `unsafe`: each transpose is
//! an exchange of the receiving array, which opens once every owner has let go of its part
//! and ends when every sender has signalled every owner; between transposes a rank
//! borrows its own parts as plain slices. `packed` packs straight into its block of each
//! owner's receive area ([`tessera::Exchange::blocks`]), with no packing buffer.
//!
//! Slabs hold whole planes, so they stop at `min(nz, ny)` ranks. Beyond that, and on any
//! rank count with `--variant 2d`, the grid is split into pencils over a 2-D process grid
//! (module `grid2d`): two transposes per 3-D FFT, each within one row or column of the process
//! grid.
//!
//! The evolution multiplies by `exp(−4απ²(i² + j² + k²))` (folded wave numbers), which
//! factors into one table per dimension instead of the reference's full 3-D array.
//! 1-D FFTs are rustfft's, planned once per length; NPB's forward transform uses the
//! positive exponent, which is rustfft's `Inverse` (both unnormalised).

use crate::NpbError;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera::coll::{Allreduce, Barrier};
use tessera::Blocking;

use num_complex::Complex;
use rustfft::{Fft, FftDirection, FftPlanner, FftPlannerScalar};
use tessera::{Context, Op, PhasedArray, Team};

use crate::rng::{mul_mod, pow_mod, vranlc, A};
use crate::{Class, Outcome};

mod grid2d;

type C = Complex<f64>;

/// The axes, as [`Ffts::along`] takes them.
const X: usize = 0;
const Y: usize = 1;
const Z: usize = 2;

/// The problem of one class.
#[derive(Clone, Copy, Debug)]
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// Points along x.
    pub nx: usize,
    /// Points along y.
    pub ny: usize,
    /// Points along z.
    pub nz: usize,
    /// Time steps.
    pub niter: usize,
    /// The official checksum after each iteration (real, imaginary); empty where this
    /// crate carries none.
    pub checksums: &'static [(f64, f64)],
}

impl ClassData {
    /// The most ranks slabs hold: each needs whole z-planes (space) and whole y-planes
    /// (frequency).
    pub fn slab_limit(&self) -> usize {
        self.nz.min(self.ny)
    }
}

/// Official values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        nx: 64,
        ny: 64,
        nz: 64,
        niter: 6,
        checksums: &[
            (5.546087004964e+02, 4.845363331978e+02),
            (5.546385409189e+02, 4.865304269511e+02),
            (5.546148406171e+02, 4.883910722336e+02),
            (5.545423607415e+02, 4.901273169046e+02),
            (5.544255039624e+02, 4.917475857993e+02),
            (5.542683411902e+02, 4.932597244941e+02),
        ],
    },
    ClassData {
        class: Class::W,
        nx: 128,
        ny: 128,
        nz: 32,
        niter: 6,
        checksums: &[
            (5.673612178944e+02, 5.293246849175e+02),
            (5.631436885271e+02, 5.282149986629e+02),
            (5.594024089970e+02, 5.270996558037e+02),
            (5.560698047020e+02, 5.260027904925e+02),
            (5.530898991250e+02, 5.249400845633e+02),
            (5.504159734538e+02, 5.239212247086e+02),
        ],
    },
    ClassData {
        class: Class::A,
        nx: 256,
        ny: 256,
        nz: 128,
        niter: 6,
        checksums: &[
            (5.046735008193e+02, 5.114047905510e+02),
            (5.059412319734e+02, 5.098809666433e+02),
            (5.069376896287e+02, 5.098144042213e+02),
            (5.077892868474e+02, 5.101336130759e+02),
            (5.085233095391e+02, 5.104914655194e+02),
            (5.091487099959e+02, 5.107917842803e+02),
        ],
    },
    ClassData {
        class: Class::B,
        nx: 512,
        ny: 256,
        nz: 256,
        niter: 20,
        checksums: &[
            (5.177643571579e+02, 5.077803458597e+02),
            (5.154521291263e+02, 5.088249431599e+02),
            (5.146409228649e+02, 5.096208912659e+02),
            (5.142378756213e+02, 5.101023387619e+02),
            (5.139626667737e+02, 5.103976610617e+02),
            (5.137423460082e+02, 5.105948019802e+02),
            (5.135547056878e+02, 5.107404165783e+02),
            (5.133910925466e+02, 5.108576573661e+02),
            (5.132470705390e+02, 5.109577278523e+02),
            (5.131197729984e+02, 5.110460304483e+02),
            (5.130070319283e+02, 5.111252433800e+02),
            (5.129070537032e+02, 5.111968077718e+02),
            (5.128182883502e+02, 5.112616233064e+02),
            (5.127393733383e+02, 5.113203605551e+02),
            (5.126691062020e+02, 5.113735928093e+02),
            (5.126064276004e+02, 5.114218460548e+02),
            (5.125504076570e+02, 5.114656139760e+02),
            (5.125002331720e+02, 5.115053595966e+02),
            (5.124551951846e+02, 5.115415130407e+02),
            (5.124146770029e+02, 5.115744692211e+02),
        ],
    },
    ClassData {
        class: Class::C,
        nx: 512,
        ny: 512,
        nz: 512,
        niter: 20,
        checksums: &[
            (519.5078707457, 514.9019699238),
            (515.5422171134, 512.7578201997),
            (514.4678022222, 512.2251847514),
            (514.0150594328, 512.1090289018),
            (513.755042681, 512.1143685824),
            (513.5811056728, 512.1496764568),
            (513.4569343165, 512.1870921893),
            (513.3651975661, 512.2193250322),
            (513.2955192805, 512.2454735794),
            (513.2410471738, 512.2663649603),
            (513.1971141679, 512.2830879827),
            (513.1605205716, 512.2965869718),
            (513.1290734194, 512.3075927445),
            (513.1012720314, 512.3166486553),
            (513.0760908195, 512.3241541685),
            (513.0528295923, 512.3304037599),
            (513.0310107773, 512.3356167976),
            (513.0103090133, 512.3399592211),
            (512.9905029333, 512.3435588985),
            (512.9714421109, 512.3465164008),
        ],
    },
    ClassData {
        class: Class::D,
        nx: 2048,
        ny: 1024,
        nz: 1024,
        niter: 25,
        checksums: &[],
    },
];

/// Relative tolerance of the verification (on the complex modulus).
const EPSILON: f64 = 1e-12;
const SEED: u64 = 314_159_265;
const ALPHA: f64 = 1e-6;

variants! {
    /// How the transposes move data, and `2d`, the pencil decomposition over a 2-D process
    /// grid (which `slabs` also becomes on more ranks than the slabs allow).
    pub enum Variant {
        /// A plane's pieces go out as soon as its FFTs are done.
        Slabs => "slabs",
        /// All planes first, then one contiguous buffer per owner.
        Packed => "packed",
        /// Every row goes out as soon as it is ready.
        Pencils => "pencils",
        /// Pencils over a 2-D process grid.
        TwoD => "2d",
    }
}

/// FT in the kernel registry.
pub struct Ft;

impl crate::Benchmark for Ft {
    fn name(&self) -> &'static str {
        "ft"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        // Slabs up to min(nz, ny) ranks, pencils beyond (S holds 4096 of them).
        if ranks.is_power_of_two() && ranks <= 1024 {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "ft",
                ranks,
                format!("ft runs on a power-of-two number of ranks up to 1024, not {ranks}"),
            ))
        }
    }
    fn check_class(&self, class: Class, variant: &str, ranks: usize) -> Result<(), NpbError> {
        check_run(class, variant.parse()?, ranks)
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("ft", variant)?)
    }
    /// FT is bound by arithmetic: the specification's operation count (the one its Mop/s
    /// uses), nearly all of it in the FFTs.
    fn demand(&self, _class: Class, outcome: &Outcome) -> crate::hardware::Demand {
        crate::hardware::Demand {
            resource: crate::hardware::Resource::Flops,
            amount: outcome.mops * 1e6 * outcome.time_s,
            basis: "the specification's FFT operation count".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transpose {
    Slabs,
    Packed,
    Pencils,
}

/// exp(−4απ²k²) for the folded wave numbers k of each dimension of `n`.
fn decay_tables(n: [usize; 3]) -> [Vec<f64>; 3] {
    n.map(|len| {
        (0..len)
            .map(|i| {
                let k = ((i + len / 2) % len) as f64 - (len / 2) as f64;
                (-4.0 * ALPHA * std::f64::consts::PI.powi(2) * k * k).exp()
            })
            .collect()
    })
}

/// The largest in-place scratch any of `plans` needs.
fn scratch_len(plans: &[&Plans]) -> usize {
    plans
        .iter()
        .flat_map(|p| [&p.x, &p.y, &p.z])
        .map(|f| f.get_inplace_scratch_len())
        .max()
        .unwrap_or(0)
}

/// Element `(x, y, z)` of NPB's initial conditions is the pair of random numbers at
/// position `2·(x + nx·(y + ny·z))`: fill `row` with the `row.len()` elements from `(0, y,
/// z)` on.
fn initial_row(n: [usize; 3], y: usize, z: usize, randoms: &mut [f64], row: &mut [C]) {
    let first = 2 * (n[0] * (y + n[1] * z)) as u64;
    let mut x = mul_mod(pow_mod(A, first), SEED);
    let randoms = &mut randoms[..2 * row.len()];
    vranlc(&mut x, A, randoms);
    for (e, pair) in row.iter_mut().zip(randoms.chunks_exact(2)) {
        *e = C::new(pair[0], pair[1]);
    }
}

/// The checksum's points: `(x, y, z)` of point `j` in 1..=1024.
fn checksum_points(n: [usize; 3]) -> impl Iterator<Item = [usize; 3]> {
    (1..=1024).map(move |j| [j % n[0], (3 * j) % n[1], (5 * j) % n[2]])
}

/// `(comm, wait)`, zeroing both if `reset`.
fn read_timers(comm: &mut Duration, wait: &mut Duration, reset: bool) -> (Duration, Duration) {
    let times = (*comm, *wait);
    if reset {
        (*comm, *wait) = (Duration::ZERO, Duration::ZERO);
    }
    times
}

/// What the timed loop asks of a decomposition.
trait Steps {
    /// NPB's initial conditions in the space layout.
    fn initial_conditions(&mut self) -> tessera::Result<()>;
    /// Forward 3-D FFT: space layout → u0 in the frequency layout.
    fn forward_fft(&mut self) -> tessera::Result<()>;
    /// u0 ← u0·decay, u1 ← u0.
    fn evolve(&mut self) -> tessera::Result<()>;
    /// Inverse 3-D FFT of u1 into the space layout.
    fn inverse_fft(&mut self) -> tessera::Result<()>;
    /// NPB's checksum of the space layout, on every rank.
    fn checksum(&mut self) -> tessera::Result<C>;
    /// The world team.
    fn team(&self) -> &Team<'_>;
    /// Time in the transposes' data movement and in their synchronisation, since the
    /// last reset.
    fn comm_wait(&mut self, reset: bool) -> (Duration, Duration);
}

/// The four FFT plans.
struct Plans {
    x: Arc<dyn Fft<f64>>,
    y: Arc<dyn Fft<f64>>,
    z: Arc<dyn Fft<f64>>,
}

/// The FFT planner for the chosen instruction-set level: rustfft's AVX + FMA algorithms
/// at `avx2` and `avx512` (where the CPU has them; rustfft has none for AVX-512), its
/// scalar ones at `scalar`.
enum Planner {
    Simd(FftPlanner<f64>),
    Scalar(FftPlannerScalar<f64>),
}

impl Planner {
    fn new() -> Planner {
        match crate::simd::level() {
            crate::simd::Level::Scalar => Planner::Scalar(FftPlannerScalar::new()),
            _ => Planner::Simd(FftPlanner::new()),
        }
    }

    fn plan_fft(&mut self, len: usize, direction: FftDirection) -> Arc<dyn Fft<f64>> {
        match self {
            Planner::Simd(p) => p.plan_fft(len, direction),
            Planner::Scalar(p) => p.plan_fft(len, direction),
        }
    }
}

impl Plans {
    /// NPB's forward (`+1`) is rustfft's inverse direction, and vice versa.
    fn new(planner: &mut Planner, n: [usize; 3], npb_forward: bool) -> Plans {
        let direction = if npb_forward {
            FftDirection::Inverse
        } else {
            FftDirection::Forward
        };
        Plans {
            x: planner.plan_fft(n[0], direction),
            y: planner.plan_fft(n[1], direction),
            z: planner.plan_fft(n[2], direction),
        }
    }
}

/// The 1-D FFT plans both ways, with the scratch they share: apart from the arrays they
/// transform, so a solver can run them on one array while another is borrowed.
struct Ffts {
    n: [usize; 3],
    forward: Plans,
    inverse: Plans,
    scratch: Vec<C>,
    /// A batch of y-columns gathered from a plane.
    columns: Vec<C>,
}

impl Ffts {
    fn new(n: [usize; 3]) -> Ffts {
        let mut planner = Planner::new();
        let forward = Plans::new(&mut planner, n, true);
        let inverse = Plans::new(&mut planner, n, false);
        Ffts {
            n,
            scratch: vec![C::default(); scratch_len(&[&forward, &inverse])],
            columns: vec![C::default(); COLUMN_BATCH * n[1]],
            forward,
            inverse,
        }
    }

    /// The 1-D FFTs along `axis` (0 = x, 1 = y, 2 = z) of every row of `rows` (rows of
    /// `n[axis]`), forward or inverse.
    fn along(&mut self, axis: usize, forward: bool, rows: &mut [C]) {
        let plans = if forward {
            &self.forward
        } else {
            &self.inverse
        };
        let plan = [&plans.x, &plans.y, &plans.z][axis];
        plan.process_with_scratch(rows, &mut self.scratch);
    }

    /// The x and y FFTs of one space-layout plane, `[y][x]`.
    fn plane_xy(&mut self, forward: bool, plane: &mut [C]) {
        let [nx, ny, _] = self.n;
        self.along(X, forward, plane);
        let plans = if forward {
            &self.forward
        } else {
            &self.inverse
        };
        for x0 in (0..nx).step_by(COLUMN_BATCH) {
            let width = COLUMN_BATCH.min(nx - x0);
            let cols = &mut self.columns[..width * ny];
            for y in 0..ny {
                for b in 0..width {
                    cols[b * ny + y] = plane[y * nx + x0 + b];
                }
            }
            plans.y.process_with_scratch(cols, &mut self.scratch);
            for y in 0..ny {
                for b in 0..width {
                    plane[y * nx + x0 + b] = cols[b * ny + y];
                }
            }
        }
    }
}

/// One rank's state.
struct Solver<'c> {
    team: &'c Team<'c>,
    transpose: Transpose,
    n: [usize; 3],
    ranks: usize,
    me: usize,
    /// z-planes per rank (space layout) and y-planes per rank (frequency layout).
    zlen: usize,
    ylen: usize,
    /// Space-layout arrays, `[z][y][x]`; written by other ranks only in the inverse
    /// transpose (an exchange of the array).
    space: PhasedArray<'c, C>,
    /// Frequency-layout arrays, `[y][x][z]`; after the forward transform this is u0.
    /// Written by other ranks only in the forward transpose.
    freq: PhasedArray<'c, C>,
    /// `packed` only: receive areas, one block per sender, filled in both transposes.
    inbox: Option<PhasedArray<'c, C>>,
    /// u1 in frequency layout (private).
    work: Vec<C>,
    ffts: Ffts,
    /// exp(−4απ²k²) for the folded wave numbers of each dimension.
    decay: [Vec<f64>; 3],
    /// Time in the transposes' data movement (puts, packing, unpacking) and in their
    /// synchronisation (opening the exchange, waiting for the senders).
    comm: Duration,
    wait: Duration,
}

/// Planes transformed before their pieces are put (`slabs`, and `2d` between process-grid
/// row and column): 8 complex numbers, two cache lines, per write run.
const PLANE_BATCH: usize = 8;

/// Columns gathered per batch of y-FFTs.
const COLUMN_BATCH: usize = 16;

/// x-columns put per strided put in `slabs`' inverse transpose: 8 complex numbers, two
/// cache lines, per write run, as [`PLANE_BATCH`] gives the forward one. Their source
/// z-rows lie nz elements (4 KiB at class B) apart, so all of a whole x-row's fall in
/// one set of the first-level cache; eight of them stay. On the 2-core Zen 2 host
/// (AVX2), class B at 2 ranks spent 2.5–2.6 s of its 8.7–9.0 in the transposes with
/// whole rows and 1.2–1.3 with tiles of 8 or 16 (4: 2.7; 32 and 64: 1.5–1.6).
const COLUMN_TILE: usize = 8;

impl<'c> Solver<'c> {
    fn new(team: &'c Team<'c>, data: &ClassData, transpose: Transpose) -> tessera::Result<Self> {
        let (ranks, me) = (team.size(), team.rank());
        let n = [data.nx, data.ny, data.nz];
        let (zlen, ylen) = (data.nz / ranks, data.ny / ranks);
        let local = zlen * data.ny * data.nx;
        Ok(Solver {
            team,
            transpose,
            n,
            ranks,
            me,
            zlen,
            ylen,
            space: PhasedArray::new(team, local)?,
            freq: PhasedArray::new(team, local)?,
            inbox: match transpose {
                Transpose::Packed => Some(PhasedArray::new(team, local)?),
                Transpose::Slabs | Transpose::Pencils => None,
            },
            work: vec![C::default(); local],
            ffts: Ffts::new(n),
            decay: decay_tables(n),
            comm: Duration::ZERO,
            wait: Duration::ZERO,
        })
    }
}

/// Copy sender blocks of `inbox` (`ranks` blocks of `outer × run` elements, the sender's
/// pieces in order) into `dst`, where sender `s`'s run `i` starts at `i·stride + s·run`.
fn unpack(inbox: &[C], dst: &mut [C], ranks: usize, run: usize, stride: usize) {
    let block = inbox.len() / ranks;
    for (s, from) in inbox.chunks_exact(block).enumerate() {
        for (i, piece) in from.chunks_exact(run).enumerate() {
            let at = i * stride + s * run;
            dst[at..at + run].copy_from_slice(piece);
        }
    }
}

impl Steps for Solver<'_> {
    /// NPB's initial conditions: the random sequence in x-fastest order, two numbers per
    /// element, each z-plane starting at its own offset.
    fn initial_conditions(&mut self) -> tessera::Result<()> {
        let [nx, ny, _] = self.n;
        let z0 = self.me * self.zlen;
        let space = self.space.own()?;
        let mut randoms = vec![0.0; 2 * nx * ny];
        for (zl, plane) in space.chunks_exact_mut(nx * ny).enumerate() {
            // A whole plane is one run of the sequence.
            initial_row(self.n, 0, z0 + zl, &mut randoms, plane);
        }
        Ok(())
    }

    /// Forward 3-D FFT: space array → frequency array (u0).
    fn forward_fft(&mut self) -> tessera::Result<()> {
        let [nx, ny, nz] = self.n;
        let (zlen, ylen, ranks) = (self.zlen, self.ylen, self.ranks);
        let z0 = self.me * zlen;
        let plane = nx * ny;
        let block = ylen * nx * zlen;
        // Open the exchange into the owners' frequency arrays (or, for `packed`, into their
        // receive areas, a block per sender): every owner is done with them.
        let t = Instant::now();
        let mut exchange = match &mut self.inbox {
            Some(inbox) => inbox.exchange(&vec![block; ranks])?,
            None => self.freq.exchange(&vec![0; ranks])?,
        };
        self.wait += t.elapsed();
        let space = self.space.own()?;
        let batch = PLANE_BATCH.min(zlen);
        for zl in 0..zlen {
            self.ffts
                .plane_xy(true, &mut space[zl * plane..(zl + 1) * plane]);
            if self.transpose == Transpose::Pencils {
                // Every row (y) to its owner as soon as the plane is done: x lands nz apart.
                let t = Instant::now();
                for y in 0..ny {
                    let d = y / ylen;
                    exchange.put_strided(
                        d,
                        (y - d * ylen) * nx * nz + z0 + zl,
                        &[nz],
                        &space[zl * plane + y * nx..],
                        &[1],
                        &[nx],
                    )?;
                }
                self.comm += t.elapsed();
            }
            if self.transpose == Transpose::Slabs && ((zl + 1) % batch == 0 || zl + 1 == zlen) {
                // Element (z, y, x) goes to freq[y − y0][x][z] on the owner of y, a batch
                // of planes at a time so that each write fills a run of z.
                let first = zl / batch * batch;
                let batch = zl + 1 - first;
                let t = Instant::now();
                for d in 0..ranks {
                    exchange.put_strided(
                        d,
                        z0 + first,
                        &[nx * nz, nz, 1],
                        &space[first * plane + d * ylen * nx..],
                        &[nx, 1, plane],
                        &[ylen, nx, batch],
                    )?;
                }
                self.comm += t.elapsed();
            }
        }
        let t = Instant::now();
        if self.transpose == Transpose::Packed {
            // Our block in owner d's receive area, ordered [y][x][z] as it lands there.
            for (d, out) in exchange.blocks()?.into_iter().enumerate() {
                for yl in 0..ylen {
                    for x in 0..nx {
                        let from = (d * ylen + yl) * nx + x;
                        let run = &mut out[(yl * nx + x) * zlen..][..zlen];
                        for (zl, o) in run.iter_mut().enumerate() {
                            *o = space[zl * plane + from];
                        }
                    }
                }
            }
        }
        self.comm += t.elapsed();
        let t = Instant::now();
        exchange.finish()?;
        self.wait += t.elapsed();
        let freq = self.freq.own()?;
        let t = Instant::now();
        if let Some(inbox) = &mut self.inbox {
            unpack(inbox.own()?, freq, ranks, zlen, nz);
        }
        self.comm += t.elapsed();
        self.ffts.along(Z, true, freq);
        Ok(())
    }

    /// u0 ← u0·decay, work ← u0 (NPB's `evolve`, in frequency layout).
    fn evolve(&mut self) -> tessera::Result<()> {
        let [nx, _, nz] = self.n;
        let y0 = self.me * self.ylen;
        let freq = self.freq.own()?;
        let [dx, dy, dz] = &self.decay;
        for (yl, (u0, u1)) in freq
            .chunks_exact_mut(nx * nz)
            .zip(self.work.chunks_exact_mut(nx * nz))
            .enumerate()
        {
            let fy = dy[y0 + yl];
            for (x, (u0, u1)) in u0
                .chunks_exact_mut(nz)
                .zip(u1.chunks_exact_mut(nz))
                .enumerate()
            {
                let fxy = fy * dx[x];
                for ((a, b), &fz) in u0.iter_mut().zip(u1.iter_mut()).zip(dz) {
                    *a *= fxy * fz;
                    *b = *a;
                }
            }
        }
        Ok(())
    }

    /// Inverse 3-D FFT of `work` (frequency layout) into the space arrays.
    fn inverse_fft(&mut self) -> tessera::Result<()> {
        let [nx, ny, nz] = self.n;
        let (zlen, ylen, ranks) = (self.zlen, self.ylen, self.ranks);
        let y0 = self.me * ylen;
        let block = zlen * ylen * nx;
        let t = Instant::now();
        let mut exchange = match &mut self.inbox {
            Some(inbox) => inbox.exchange(&vec![block; ranks])?,
            None => self.space.exchange(&vec![0; ranks])?,
        };
        self.wait += t.elapsed();
        let yplane = nx * nz;
        for yl in 0..ylen {
            let p = &mut self.work[yl * yplane..(yl + 1) * yplane];
            if self.transpose == Transpose::Pencils {
                // Each z-row to the owners of its pieces as soon as its FFT is done.
                for x in 0..nx {
                    let row = &mut p[x * nz..(x + 1) * nz];
                    self.ffts.along(Z, false, row);
                    let t = Instant::now();
                    for d in 0..ranks {
                        exchange.put_strided(
                            d,
                            (y0 + yl) * nx + x,
                            &[ny * nx],
                            &row[d * zlen..],
                            &[1],
                            &[zlen],
                        )?;
                    }
                    self.comm += t.elapsed();
                }
                continue;
            }
            self.ffts.along(Z, false, p);
            if self.transpose == Transpose::Slabs {
                // Element (y, x, z) goes to space[z − z0][y][x] on the owner of z, x
                // innermost so that the writes run along x.
                // A tile of COLUMN_TILE x at a time: its z-rows are read a line each
                // across all z, where a whole row of x would read nx lines nz apart for
                // every z (more than the cache set they fall in holds).
                let t = Instant::now();
                for d in 0..ranks {
                    for x0 in (0..nx).step_by(COLUMN_TILE) {
                        exchange.put_strided(
                            d,
                            (y0 + yl) * nx + x0,
                            &[ny * nx, 1],
                            &p[x0 * nz + d * zlen..],
                            &[1, nz],
                            &[zlen, COLUMN_TILE.min(nx - x0)],
                        )?;
                    }
                }
                self.comm += t.elapsed();
            }
        }
        let t = Instant::now();
        if self.transpose == Transpose::Packed {
            // Our block in owner d's receive area, ordered [z][y][x] as it lands there.
            for (d, out) in exchange.blocks()?.into_iter().enumerate() {
                for zl in 0..zlen {
                    for yl in 0..ylen {
                        let run = &mut out[(zl * ylen + yl) * nx..][..nx];
                        for (x, o) in run.iter_mut().enumerate() {
                            *o = self.work[(yl * nx + x) * nz + d * zlen + zl];
                        }
                    }
                }
            }
        }
        self.comm += t.elapsed();
        let t = Instant::now();
        exchange.finish()?;
        self.wait += t.elapsed();
        let space = self.space.own()?;
        let t = Instant::now();
        if let Some(inbox) = &mut self.inbox {
            unpack(inbox.own()?, space, ranks, ylen * nx, ny * nx);
        }
        self.comm += t.elapsed();
        for plane in space.chunks_exact_mut(nx * ny) {
            self.ffts.plane_xy(false, plane);
        }
        Ok(())
    }

    /// NPB's checksum: 1024 points spread over the grid, summed over the ranks, divided
    /// by the number of points.
    fn checksum(&mut self) -> tessera::Result<C> {
        let [nx, ny, _] = self.n;
        let z0 = self.me * self.zlen;
        let space = self.space.own()?;
        let mut sum = C::default();
        for [x, y, z] in checksum_points(self.n) {
            if (z0..z0 + self.zlen).contains(&z) {
                sum += space[((z - z0) * ny + y) * nx + x];
            }
        }
        total_checksum(self.team, sum, self.n)
    }

    fn team(&self) -> &Team<'_> {
        self.team
    }

    fn comm_wait(&mut self, reset: bool) -> (Duration, Duration) {
        read_timers(&mut self.comm, &mut self.wait, reset)
    }
}

/// The checksum from every rank's partial sum `mine`.
fn total_checksum(team: &Team<'_>, mine: C, n: [usize; 3]) -> tessera::Result<C> {
    let re = team.run(Allreduce::value(mine.re, Op::Sum), Blocking)?;
    let im = team.run(Allreduce::value(mine.im, Op::Sum), Blocking)?;
    Ok(C::new(re, im) / n.iter().product::<usize>() as f64)
}

/// Whether FT runs `variant` at `class` on `ranks` (a power of two): slabs hold whole z-
/// and y-planes, so `packed` and `pencils` stop at `min(nz, ny)` ranks, where `slabs`
/// turns into `2d`; `2d` needs a process grid that fits.
pub fn check_run(class: Class, variant: Variant, ranks: usize) -> Result<(), NpbError> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let slab_limit = data.slab_limit();
    let n = [data.nx, data.ny, data.nz];
    let pencils = variant == Variant::TwoD || ranks > slab_limit;
    let limit = |message| NpbError::ClassLimit {
        kernel: "ft",
        class,
        ranks,
        message,
    };
    if pencils && variant != Variant::Slabs && variant != Variant::TwoD {
        return Err(limit(format!(
            "ft --variant {variant} holds whole planes, so class {class} runs on at most {slab_limit} ranks that way; use --variant slabs or 2d for {ranks} ranks"
        )));
    }
    if pencils && grid2d::process_grid(ranks, n).is_none() {
        return Err(limit(format!(
            "ft class {class} ({}x{}x{}) does not split into pencils over {ranks} ranks; use fewer ranks",
            n[0], n[1], n[2]
        )));
    }
    Ok(())
}

/// What a rank of FT holds, for the variants that hold most (`packed`, and `2d`): three
/// collective arrays (space, frequency and receive areas, or the three layouts) and a
/// private work array; `slabs` holds three of these four (`packed` packs straight into the
/// owners' receive areas). The reference holds three complex arrays and a real one.
pub fn footprint(class: Class, ranks: usize) -> crate::Footprint {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let local = data.nx * data.ny * data.nz / ranks * size_of::<C>();
    crate::Footprint {
        segment: 3 * local,
        private: local,
    }
}

/// Run FT at `class`; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    crate::Benchmark::check_ranks(&Ft, ctx.ranks())
        .and_then(|()| check_run(class, variant, ctx.ranks()))?;
    let slabs_fit = ctx.ranks() <= data.slab_limit();
    let world = Team::world(ctx)?;
    let (mut solver, ran): (Box<dyn Steps + '_>, Variant) = match variant {
        Variant::Slabs if slabs_fit => (
            Box::new(Solver::new(&world, data, Transpose::Slabs)?),
            variant,
        ),
        Variant::Packed => (
            Box::new(Solver::new(&world, data, Transpose::Packed)?),
            variant,
        ),
        Variant::Pencils => (
            Box::new(Solver::new(&world, data, Transpose::Pencils)?),
            variant,
        ),
        Variant::Slabs | Variant::TwoD => {
            (Box::new(grid2d::Solver::new(&world, data)?), Variant::TwoD)
        }
    };
    // Untimed pass, as the reference does: initial conditions and one forward FFT.
    solver.initial_conditions()?;
    solver.forward_fft()?;
    solver.team().run(Barrier, Blocking)?;

    solver.comm_wait(true);
    let start = Instant::now();
    solver.initial_conditions()?;
    solver.forward_fft()?;
    let mut sums = Vec::new();
    let mut progress = crate::Progress::new("ft", data.niter, ctx.rank())?;
    for done in 1..=data.niter {
        solver.evolve()?;
        solver.inverse_fft()?;
        sums.push(solver.checksum()?);
        progress.done(done);
    }
    let mine = start.elapsed().as_secs_f64();
    crate::note_resident_share(); // every array is still held here
    let elapsed = solver
        .team()
        .run(Allreduce::value(mine, Op::Max), Blocking)?;
    let (comm, wait) = solver.comm_wait(false);
    let (comm, wait) = (comm.as_secs_f64(), wait.as_secs_f64());
    let mut profile = BTreeMap::new();
    for (name, seconds) in [
        ("compute_s", mine - comm - wait),
        ("communication_s", comm),
        ("wait_s", wait),
    ] {
        let mean = solver
            .team()
            .run(Allreduce::value(seconds, Op::Sum), Blocking)?
            / ctx.ranks() as f64;
        profile.insert(name.to_string(), mean);
    }
    if ctx.rank() != 0 {
        return Ok(None);
    }
    let verified = (!data.checksums.is_empty()).then(|| {
        sums.iter().zip(data.checksums).all(|(s, &(re, im))| {
            let reference = C::new(re, im);
            (s - reference).norm() / reference.norm() <= EPSILON
        })
    });
    let points = (data.nx * data.ny * data.nz) as f64;
    let niter = data.niter as f64;
    let ops =
        points * (14.8157 + 7.19641 * points.ln() + (5.23518 + 7.21113 * points.ln()) * niter);
    let last = sums.last().copied().unwrap_or_default();
    let reference = data
        .checksums
        .last()
        .map(|&(re, im)| {
            BTreeMap::from([
                ("checksum_re".to_string(), re),
                ("checksum_im".to_string(), im),
            ])
        })
        .unwrap_or_default();
    Ok(Some(Outcome {
        kernel: "FT".into(),
        class: class.to_string(),
        ranks: ctx.ranks(),
        variant: ran.to_string(),
        time_s: elapsed,
        mops: ops / elapsed / 1e6,
        verified,
        values: BTreeMap::from([
            ("checksum_re".to_string(), last.re),
            ("checksum_im".to_string(), last.im),
        ]),
        reference,
        size: format!("{}x{}x{}", data.nx, data.ny, data.nz),
        iterations: data.niter as u64,
        operation: "floating point".into(),
        profile,
        ..Outcome::default()
    }))
}
