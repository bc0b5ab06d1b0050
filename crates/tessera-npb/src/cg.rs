//! CG: estimate the smallest eigenvalue of a sparse symmetric positive definite matrix by
//! inverse power iteration, each step solving `A z = x` with 25 conjugate-gradient
//! iterations.
//!
//! **Matrix.** The NPB generator (`makea`/`sprnvc`/`vecset`): `na` outer products of random
//! sparse vectors with geometrically shrinking weights, plus `rcond − shift` on the
//! diagonal. Every rank draws the whole random sequence (it is sequential) and keeps the
//! entries of its own block; duplicates are summed in generation order, so the matrix is
//! the same whatever the rank count.
//!
//! **Decomposition** (as NPB's MPI code): a `rows × cols` process grid with `cols = rows`
//! or `2·rows`. Rank (r, c) holds the block of matrix rows `R_r` × columns `C_c`, and the
//! vectors over `C_c`; each process row holds a whole copy of every vector. A product
//! `q = A·p` is
//! 1. the local block product `w = A_rc · p` (partial sums over `R_r`);
//! 2. a sum of `w` across the process row by a log₂(cols)-phase pairwise exchange (the
//!    first phase halves the data when the grid is not square);
//! 3. the transpose exchange: the rank sends its summed piece of `w` to the rank whose
//!    columns are those rows, which makes it that rank's `q`.
//!
//! Dot products sum over the process row with the same pairwise exchange.
//!
//! **Variants** differ only in how a receiver learns that data has arrived. `signal`
//! (default): each transfer is a signalling put into a prearranged inbox on the partner
//! and the partner waits on its semaphore, point to point. `barrier`: a plain put, then a
//! barrier of the process row (or of the world, for the transpose), as a one-sided code
//! without point-to-point synchronisation must do.
//!
//! Timed region (as NPB): the `niter` outer iterations after one untimed warm-up.

use crate::NpbError;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Instant;
use tessera::coll::{Allreduce, Barrier};
use tessera::Blocking;

use tessera::{Arrival, Context, Mailbox, Op, Team};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

use crate::report::Outcome;
use crate::rng::{randlc, A};
use crate::Class;
use tessera::HugePageArray;

/// CG iterations per outer iteration.
const CGITMAX: usize = 25;
/// The smallest eigenvalue of the generated matrix is bounded below by this.
const RCOND: f64 = 0.1;
const SEED: u64 = 314_159_265;
/// Verification tolerance (relative).
const EPSILON: f64 = 1e-10;

/// One class: order of the matrix, nonzeros per generated vector, outer iterations, the
/// eigenvalue shift and the official zeta.
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// Order of the matrix.
    pub na: usize,
    /// Nonzeros per random vector.
    pub nonzer: usize,
    /// Timed outer iterations.
    pub niter: usize,
    /// Eigenvalue shift.
    pub shift: f64,
    /// Official zeta after the last iteration (`None` where this crate carries none).
    pub zeta: Option<f64>,
}

/// Official parameters and verification values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        na: 1400,
        nonzer: 7,
        niter: 15,
        shift: 10.0,
        zeta: Some(8.597_177_507_864_8),
    },
    ClassData {
        class: Class::W,
        na: 7000,
        nonzer: 8,
        niter: 15,
        shift: 12.0,
        zeta: Some(10.362_595_087_124),
    },
    ClassData {
        class: Class::A,
        na: 14000,
        nonzer: 11,
        niter: 15,
        shift: 20.0,
        zeta: Some(17.130_235_054_029),
    },
    ClassData {
        class: Class::B,
        na: 75000,
        nonzer: 13,
        niter: 75,
        shift: 60.0,
        zeta: Some(22.712_745_482_631),
    },
    ClassData {
        class: Class::C,
        na: 150000,
        nonzer: 15,
        niter: 75,
        shift: 110.0,
        zeta: Some(28.973605592845),
    },
    ClassData {
        class: Class::D,
        na: 1500000,
        nonzer: 21,
        niter: 100,
        shift: 500.0,
        zeta: None,
    },
];

/// The `i`-th of `parts` nearly equal blocks of `0..n` (the first `n % parts` one longer).
fn block(n: usize, parts: usize, i: usize) -> Range<usize> {
    let (q, r) = (n / parts, n % parts);
    let start = i * q + i.min(r);
    start..start + q + usize::from(i < r)
}

/// One phase of the row sum: send `w[send]` to `partner` (a world rank), add what arrives
/// into `w[recv]` (ranges relative to the rank's first matrix row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// World rank of the partner.
    pub partner: usize,
    /// Rows sent.
    pub send: Range<usize>,
    /// Rows received and summed.
    pub recv: Range<usize>,
}

/// A rank's place in the process grid and the parts of the matrix and vectors it holds.
///
/// ```
/// use tessera_npb::cg::Layout;
/// let l = Layout::new(14000, 4, 1); // 2 × 2 grid, row 0, column 1
/// assert_eq!((l.rows, l.cols), (2, 2));
/// assert_eq!((l.row_range, l.col_range), (0..7000, 7000..14000));
/// assert_eq!(l.transpose, 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Process rows.
    pub rows: usize,
    /// Process columns (`rows` or `2·rows`).
    pub cols: usize,
    /// This rank's process row.
    pub row: usize,
    /// This rank's process column.
    pub col: usize,
    /// Matrix rows held.
    pub row_range: Range<usize>,
    /// Matrix columns held, and the vector elements.
    pub col_range: Range<usize>,
    /// Rows (relative to `row_range`) that this rank holds summed after the row sum and
    /// sends in the transpose.
    pub owned: Range<usize>,
    /// World rank that receives `owned` in the transpose (and sends this rank's `q`).
    pub transpose: usize,
    /// The row sum's phases, in order.
    pub phases: Vec<Phase>,
}

impl Layout {
    /// The layout of rank `me` of `ranks` (a power of two) for a matrix of order `na`.
    pub fn new(na: usize, ranks: usize, me: usize) -> Layout {
        assert!(ranks.is_power_of_two() && me < ranks);
        let cols = 1usize << ranks.trailing_zeros().div_ceil(2);
        let rows = ranks / cols;
        let (row, col) = (me / cols, me % cols);
        let row_range = block(na, rows, row);
        let n = row_range.len();
        let square = rows == cols;
        let (col_range, owned, transpose) = if square {
            (block(na, cols, col), 0..n, col * rows + row)
        } else {
            // Columns in `rows` blocks like the rows, each halved between an even and an
            // odd process column; the row sum leaves each of them the matching half.
            let b = block(na, rows, col / 2);
            let (split, half) = (b.start + b.len().div_ceil(2), n.div_ceil(2));
            let transpose = 2 * ((col / 2) * rows + row) + col % 2;
            if col % 2 == 0 {
                (b.start..split, 0..half, transpose)
            } else {
                (split..b.end, half..n, transpose)
            }
        };
        let mut phases = Vec::new();
        let mut distance = 1;
        while distance < cols {
            let partner = row * cols + (col ^ distance);
            let send = if !square && distance == 1 {
                // What the partner owns: the other half.
                if col % 2 == 0 {
                    owned.end..n
                } else {
                    0..owned.start
                }
            } else {
                owned.clone()
            };
            phases.push(Phase {
                partner,
                send,
                recv: owned.clone(),
            });
            distance *= 2;
        }
        Layout {
            rows,
            cols,
            row,
            col,
            row_range,
            col_range,
            owned,
            transpose,
            phases,
        }
    }
}

/// A block of the matrix in compressed sparse rows, with local column indices.
///
/// Built only by [`make_matrix`], which guarantees every column index is below `ncols`;
/// [`Matrix::multiply`] relies on that to skip bounds checks in its gather. Column indices
/// take 16 bits: the product streams the whole matrix from memory each time, and 10 bytes
/// per entry instead of 12 is 17% less traffic. A block wider than 2¹⁴ columns
/// (`STRIPE`) is cut into equal stripes of at most that many columns, stored one after
/// another (every row's entries in stripe 0, then in stripe 1, …) with indices relative to
/// their stripe, where its parts are long enough to pay (`MIN_PART`; class C at 2 ranks:
/// 75 000 columns, five stripes, about 24 entries a part); otherwise the indices take 32
/// bits. The product then takes the stripes in turn, so the part of `x` it gathers from
/// stays in the core's L2 cache. For the same reason the arrays sit on huge pages
/// ([`HugePageArray`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// Rows of the block.
    rows: usize,
    /// Column stripes the indices are relative to (1: none).
    stripes: usize,
    /// Columns per stripe (the last may have fewer): stripe `s` starts at column
    /// `s·width`.
    width: usize,
    /// Part `s` of row `i` (its entries in stripe `s`) is `parts[p]..parts[p + 1]` with
    /// `p = s·rows + i`; with one stripe the parts are the rows.
    parts: HugePageArray<usize>,
    /// Column of each entry (relative to its stripe, which starts at the block's first
    /// column), ascending in a row.
    colidx: Columns,
    /// Value of each entry.
    values: HugePageArray<f64>,
    /// Columns in the block: every index in `colidx` is below it.
    ncols: usize,
    /// How [`Matrix::multiply`] computes the product (see [`ProductForm`]).
    form: ProductForm,
}

/// A way to compute the block product. All give the same bits; which is fastest depends
/// on the CPU and on whether the matrix fits in cache, so [`run`] times each once in the
/// untimed warm-up ([`choose_form`]) rather than deciding by instruction-set level. On an
/// AVX-512 Xeon the AVX-512 gathers win when the matrix streams from memory (class B at 2
/// ranks: 11.7–11.9 s against 16.1–16.2 s) and lose from cache (class A: 0.29–0.35 s
/// against 0.20–0.22 s); on a Zen 3 EPYC the AVX2 gathers lose at class B (18.9 s against
/// 15.7 s). docs/PERFORMANCE.md has the figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductForm {
    /// One scalar load of `x` per entry, four partial sums per row.
    Portable,
    /// Four entries at once with AVX2 gathers and software prefetch (`cg::avx2`).
    Avx2Gather,
    /// Four entries at once with masked AVX-512VL gathers and prefetch (`cg::avx512`).
    Avx512Gather,
}

impl ProductForm {
    /// The forms this CPU runs at the chosen [`crate::simd`] level, portable first.
    ///
    /// ```
    /// use tessera_npb::cg::ProductForm;
    /// assert_eq!(ProductForm::available()[0], ProductForm::Portable);
    /// ```
    pub fn available() -> Vec<ProductForm> {
        let mut forms = vec![ProductForm::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2::available() {
                forms.push(ProductForm::Avx2Gather);
            }
            if avx512::available() {
                forms.push(ProductForm::Avx512Gather);
            }
        }
        forms
    }

    /// The form's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ProductForm::Portable => "portable",
            ProductForm::Avx2Gather => "avx2-gather",
            ProductForm::Avx512Gather => "avx512-gather",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Columns {
    /// 16 bits, within a stripe.
    Narrow(HugePageArray<u16>),
    /// 32 bits, one stripe.
    Wide(HugePageArray<u32>),
}

/// The most columns in a stripe of a striped [`Matrix`] (a 16-bit index reaches 2¹⁶):
/// 128 KiB of `x`, a quarter of a Zen 3 core's L2 cache, so that the gathers of a stripe
/// hit there beside the streams. Measured on class B and C at 2 ranks (Zen 3, 2 rounds):
/// 2¹⁴ columns gave the best product, 2¹⁵ and 2¹⁶ less of the gain
/// (docs/PERFORMANCE.md).
const STRIPE: usize = 1 << 14;

/// The fewest entries a part of a striped [`Matrix`] must hold on average for the stripes
/// to pay. Shorter parts spend more on their bounds and sums than the cache saves (stripes
/// of 2¹³ columns at class C, about 12 entries a part, were slower than 2¹⁴ with 24), and
/// at 16 the two bytes per entry that 16-bit indices save exceed a part's 8-byte bound.
/// Blocks below it keep one stripe with 32-bit indices (class D at 2 ranks, about 5
/// entries a part).
const MIN_PART: usize = 16;

/// A stored column index: implemented for u16 and u32 only (the AVX-512 product tells
/// them apart by size).
trait ColumnIndex: Copy {
    fn at(self) -> usize;
}

impl ColumnIndex for u16 {
    fn at(self) -> usize {
        self as usize
    }
}

impl ColumnIndex for u32 {
    fn at(self) -> usize {
        self as usize
    }
}

impl Matrix {
    /// Stored entries.
    pub fn nonzeros(&self) -> usize {
        self.values.len()
    }

    /// Bytes the product streams: the values, the column indices and the row starts.
    pub fn bytes(&self) -> usize {
        let index = match &self.colidx {
            Columns::Narrow(_) => size_of::<u16>(),
            Columns::Wide(_) => size_of::<u32>(),
        };
        self.nonzeros() * (size_of::<f64>() + index) + self.parts.len() * size_of::<usize>()
    }

    /// Rows of the block.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The entry at (`row`, `col`) (local indices), zero where none is stored.
    pub fn get(&self, row: usize, col: usize) -> f64 {
        fn find<I: ColumnIndex>(cols: &[I], col: usize) -> Option<usize> {
            cols.binary_search_by(|c| c.at().cmp(&col)).ok()
        }
        let (stripe, col) = (col / self.width, col % self.width);
        if stripe >= self.stripes {
            return 0.0;
        }
        let part = stripe * self.rows + row;
        let entries = self.parts[part]..self.parts[part + 1];
        let found = match &self.colidx {
            Columns::Narrow(c) => find(&c[entries.clone()], col),
            Columns::Wide(c) => find(&c[entries.clone()], col),
        };
        found.map_or(0.0, |k| self.values[entries.start + k])
    }

    /// `out = self · x`, in the form chosen by [`Matrix::set_form`] (portable until then).
    pub fn multiply(&self, x: &[f64], out: &mut [f64]) {
        self.multiply_as(self.form, x, out);
    }

    /// Compute later products in `form`.
    ///
    /// # Panics
    /// If `form` is not among [`ProductForm::available`].
    pub fn set_form(&mut self, form: ProductForm) {
        assert!(
            ProductForm::available().contains(&form),
            "the {} product does not run at this SIMD level",
            form.name()
        );
        self.form = form;
    }

    /// `out = self · x` in `form`, which must be among [`ProductForm::available`].
    fn multiply_as(&self, form: ProductForm, x: &[f64], out: &mut [f64]) {
        assert!(x.len() >= self.ncols && out.len() == self.rows);
        match &self.colidx {
            Columns::Narrow(c) => self.multiply_with(form, &c[..], x, out),
            Columns::Wide(c) => self.multiply_with(form, &c[..], x, out),
        }
    }

    /// The product over one index width in `form`. The caller has checked the lengths.
    fn multiply_with<I: ColumnIndex>(
        &self,
        form: ProductForm,
        colidx: &[I],
        x: &[f64],
        out: &mut [f64],
    ) {
        match form {
            #[cfg(target_arch = "x86_64")]
            ProductForm::Avx512Gather if avx512::available() => {
                // SAFETY: `available` checked that this CPU has the features it enables.
                unsafe { avx512::multiply(self, colidx, x, out) }
            }
            #[cfg(target_arch = "x86_64")]
            ProductForm::Avx2Gather if avx2::available() => {
                // SAFETY: `available` checked that this CPU has AVX2.
                unsafe { avx2::multiply(self, colidx, x, out) }
            }
            ProductForm::Portable => self.multiply_portable(colidx, x, out),
            _ => panic!("the {} product does not run here", form.name()),
        }
    }

    /// `out[i] = Σₛ row(part (i, s), x from stripe s's first column)`, stripe by stripe
    /// (the sum for each `i` taken from 0 in stripe order): the loop every product form
    /// runs, each with its own dot product `row` of one part (inlined into the form's
    /// instruction-set context). With one stripe `out[i]` is `row` of the whole row, so
    /// every form gives the bits its `row` gives. The caller has checked the lengths.
    #[inline(always)]
    fn each_row<I: ColumnIndex>(
        &self,
        colidx: &[I],
        x: &[f64],
        out: &mut [f64],
        row: impl Fn(&[I], &[f64], &[f64]) -> f64,
    ) {
        let (parts, values) = (&self.parts[..], &self.values[..]);
        if self.stripes == 1 {
            for (o, ends) in out.iter_mut().zip(parts.windows(2)) {
                let entries = ends[0]..ends[1];
                *o = row(&colidx[entries.clone()], &values[entries], x);
            }
            return;
        }
        out.fill(0.0);
        for s in 0..self.stripes {
            let (bounds, xs) = (
                &parts[s * self.rows..=(s + 1) * self.rows],
                &x[s * self.width..],
            );
            for (o, ends) in out.iter_mut().zip(bounds.windows(2)) {
                let entries = ends[0]..ends[1];
                *o += row(&colidx[entries.clone()], &values[entries], xs);
            }
        }
    }

    /// The product, portably (see [`row_portable`]). The caller has checked
    /// `x.len() >= self.ncols`.
    fn multiply_portable<I: ColumnIndex>(&self, colidx: &[I], x: &[f64], out: &mut [f64]) {
        self.each_row(colidx, x, out, row_portable);
    }
}

/// One part's dot product with `x`, portably. Four partial sums break the chain of
/// dependent additions: sum `j` takes entries `j, j + 4, …` of the part, in order. Every
/// index is below `x.len()` (the matrix's invariant: each index is below its stripe's
/// width, and `x` starts at the stripe).
#[inline(always)]
fn row_portable<I: ColumnIndex>(cols: &[I], vals: &[f64], x: &[f64]) -> f64 {
    let gather = |c: I| {
        // SAFETY: every column index is below `x.len()`, as this function requires of
        // its caller (`Matrix::each_row`, which `Matrix::multiply_as` checked).
        unsafe { *x.get_unchecked(c.at()) }
    };
    let mut acc = [0.0; 4];
    let mut quads = cols.chunks_exact(4).zip(vals.chunks_exact(4));
    for (c, v) in quads.by_ref() {
        acc[0] += v[0] * gather(c[0]);
        acc[1] += v[1] * gather(c[1]);
        acc[2] += v[2] * gather(c[2]);
        acc[3] += v[3] * gather(c[3]);
    }
    let tail = cols.len() / 4 * 4;
    for ((a, &c), &v) in acc.iter_mut().zip(&cols[tail..]).zip(&vals[tail..]) {
        *a += v * gather(c);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// NPB `sprnvc`: `nonzer` distinct random positions in `0..n` with random values.
fn sprnvc(n: usize, nonzer: usize, tran: &mut u64, v: &mut Vec<(usize, f64)>) {
    let nn1 = n.next_power_of_two() as f64;
    v.clear();
    while v.len() < nonzer {
        let value = randlc(tran, A);
        let i = (nn1 * randlc(tran, A)) as usize;
        if i < n && v.iter().all(|&(j, _)| j != i) {
            v.push((i, value));
        }
    }
}

/// Call `entry(local row, local column, value)` for every entry of the block
/// `layout.row_range × layout.col_range` of the class's matrix, duplicates included, in the
/// reference's generation order.
fn each_entry(data: &ClassData, layout: &Layout, mut entry: impl FnMut(u32, u32, f64)) {
    let n = data.na;
    let (rows, cols) = (&layout.row_range, &layout.col_range);
    let mut tran = SEED;
    randlc(&mut tran, A); // the reference draws once before generating the matrix
    let ratio = RCOND.powf(1.0 / n as f64);
    let mut size = 1.0;
    let mut v = Vec::with_capacity(data.nonzer + 1);
    for outer in 0..n {
        sprnvc(n, data.nonzer, &mut tran, &mut v);
        // NPB `vecset`: element `outer` is 0.5.
        match v.iter_mut().find(|e| e.0 == outer) {
            Some(e) => e.1 = 0.5,
            None => v.push((outer, 0.5)),
        }
        for &(col, vcol) in v.iter().filter(|e| cols.contains(&e.0)) {
            let scale = size * vcol;
            for &(row, vrow) in v.iter().filter(|e| rows.contains(&e.0)) {
                entry(
                    (row - rows.start) as u32,
                    (col - cols.start) as u32,
                    vrow * scale,
                );
            }
        }
        size *= ratio;
    }
    for i in rows.start.max(cols.start)..rows.end.min(cols.end) {
        entry(
            (i - rows.start) as u32,
            (i - cols.start) as u32,
            RCOND - data.shift,
        );
    }
}

/// The block `layout.row_range × layout.col_range` of the class's matrix.
///
/// Built in two passes over the generator (count per part, then place), so the only large
/// arrays are the final ones: 12 bytes per generated entry at the peak, as the reference's
/// `a` and `colidx`, instead of a list of triples beside the compressed rows.
pub fn make_matrix(data: &ClassData, layout: &Layout) -> Matrix {
    let (nrows, ncols) = (layout.row_range.len(), layout.col_range.len());
    assemble(nrows, ncols, |entry| each_entry(data, layout, entry))
}

/// A block of `nrows × ncols` from `generate`, which calls its argument with every
/// (local row, local column, value), duplicates included, the same way each of the two
/// times it is called: once to count the entries of each part, once to place them.
fn assemble(
    nrows: usize,
    ncols: usize,
    mut generate: impl FnMut(&mut dyn FnMut(u32, u32, f64)),
) -> Matrix {
    let stripes = ncols.div_ceil(STRIPE).max(1);
    let width = ncols.div_ceil(stripes).max(1);
    let part =
        |stripes: usize, r: u32, c: u32| (c as usize / width).min(stripes - 1) * nrows + r as usize;
    let mut start = vec![0usize; stripes * nrows + 1];
    generate(&mut |r, c, _| start[part(stripes, r, c) + 1] += 1);
    let total: usize = start.iter().sum();
    let (stripes, width) = if stripes == 1 || total >= MIN_PART * stripes * nrows {
        (stripes, width)
    } else {
        let mut rows = vec![0usize; nrows + 1];
        for (p, &n) in start[1..].iter().enumerate() {
            rows[p % nrows + 1] += n;
        }
        start = rows;
        (1, ncols.max(1))
    };
    for p in 0..start.len() - 1 {
        start[p + 1] += start[p];
    }
    let mut colidx = HugePageArray::<u32>::zeroed(total);
    let mut values = HugePageArray::<f64>::zeroed(total);
    {
        let (cs, vs) = (colidx.as_mut_slice(), values.as_mut_slice());
        let mut next = start.clone();
        generate(&mut |r, c, v| {
            let at = &mut next[part(stripes, r, c)];
            cs[*at] = c;
            vs[*at] = v;
            *at += 1;
        });
    }
    compress(&start, colidx, values, nrows, ncols, (stripes, width))
}

/// Rounds of [`choose_form`]'s trial: each round times one product in every form, and a
/// form's best round counts. Taking the forms in turns, rather than one after another,
/// keeps a burst of noise on a shared host from falling on one form alone.
const TRIAL_ROUNDS: usize = 4;

/// Time every [`ProductForm`] this CPU runs on `matrix` (the best of `TRIAL_ROUNDS` (4)
/// products each, taken in turns, the slowest rank's time counting), set the fastest, and
/// return each form's time in seconds. Collective over `world`: every rank picks the same
/// form.
pub fn choose_form(matrix: &mut Matrix, world: &Team) -> tessera::Result<Vec<(ProductForm, f64)>> {
    let x: Vec<f64> = (0..matrix.ncols).map(|i| 1.0 + i as f64 * 1e-6).collect();
    let mut out = vec![0.0; matrix.rows];
    let forms = ProductForm::available();
    let mut best = vec![f64::INFINITY; forms.len()];
    for _ in 0..TRIAL_ROUNDS {
        for (&form, best) in forms.iter().zip(&mut best) {
            let start = Instant::now();
            matrix.multiply_as(form, &x, &mut out);
            *best = best.min(start.elapsed().as_secs_f64());
        }
    }
    let mut times = Vec::new();
    for (form, best) in forms.into_iter().zip(best) {
        times.push((form, world.run(Allreduce::value(best, Op::Max), Blocking)?));
    }
    let fastest = times
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("the portable form always runs")
        .0;
    matrix.set_form(fastest);
    Ok(times)
}

/// Compressed parts from entries placed part by part in generation order (part `p` at
/// `start[p]..start[p + 1]`, stripe-major as [`Matrix::parts`]): each part stably sorted
/// by column and its duplicates summed in their original order, compacted in place.
fn compress(
    start: &[usize],
    mut colidx: HugePageArray<u32>,
    mut values: HugePageArray<f64>,
    nrows: usize,
    ncols: usize,
    (stripes, width): (usize, usize),
) -> Matrix {
    let mut parts = vec![0usize; start.len()];
    let mut part: Vec<(u32, f64)> = Vec::new();
    let mut written = 0;
    {
        let (cs, vs) = (colidx.as_mut_slice(), values.as_mut_slice());
        for p in 0..start.len() - 1 {
            // Part p is copied out before anything is written over it: `written` never
            // passes `start[p]`.
            part.clear();
            part.extend((start[p]..start[p + 1]).map(|k| (cs[k], vs[k])));
            part.sort_by_key(|e| e.0);
            let first = written;
            for &(c, v) in &part {
                assert!(
                    (c as usize) < ncols,
                    "column {c} outside a block of {ncols}"
                );
                if written > first && cs[written - 1] == c {
                    vs[written - 1] += v;
                } else {
                    cs[written] = c;
                    vs[written] = v;
                    written += 1;
                }
            }
            parts[p + 1] = written;
        }
    }
    colidx.truncate(written);
    values.truncate(written);
    let colidx = if width <= 1 << 16 {
        let narrow: Vec<u16> = colidx
            .iter()
            .map(|&c| (c as usize % width) as u16)
            .collect();
        drop(colidx);
        Columns::Narrow(HugePageArray::from_slice(&narrow))
    } else {
        Columns::Wide(colidx)
    };
    Matrix {
        rows: nrows,
        stripes,
        width,
        parts: HugePageArray::from_slice(&parts),
        colidx,
        values,
        ncols,
        form: ProductForm::Portable,
    }
}

variants! {
    /// How a receiver learns that its partner's data has arrived.
    pub enum Variant {
        /// Signalling put; the receiver waits on its semaphore (point to point).
        Signal => "signal",
        /// Plain put, then a barrier of the process row (or the world, for the transpose).
        Barrier => "barrier",
    }
}

/// CG in the kernel registry.
pub struct Cg;

impl crate::Benchmark for Cg {
    fn name(&self) -> &'static str {
        "cg"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        if ranks.is_power_of_two() {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "cg",
                ranks,
                format!("cg runs on a power-of-two number of ranks, not {ranks}"),
            ))
        }
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("cg", variant)?)
    }
    /// CG is bound by memory: each of the 26 sparse products of a step reads every
    /// nonzero (8-byte value and 4-byte column index, the reference's layout), and each of
    /// its 25 iterations streams about fourteen vectors of length `na` (the product's
    /// input and output, two dot products, three updates).
    fn demand(&self, class: Class, outcome: &Outcome) -> crate::hardware::Demand {
        let data = crate::class_data(&CLASSES, |c| c.class, class);
        let nonzeros = outcome
            .values
            .get("matrix_nonzeros")
            .copied()
            .unwrap_or(0.0);
        let per_step = 26.0 * 12.0 * nonzeros + 25.0 * 14.0 * 8.0 * data.na as f64;
        crate::hardware::Demand {
            resource: crate::hardware::Resource::MemoryBytes,
            amount: per_step * data.niter as f64,
            basis: "12 bytes per nonzero per product, 14 vectors per iteration".into(),
        }
    }
}

/// Pairwise exchanges through a [`Mailbox`]: one slot per row-sum phase, one for the
/// transpose and one per dot-product phase, each with this rank's fixed partner in it.
struct Exchanger<'a> {
    sync: Variant,
    row_team: Team<'a>,
    world: &'a Team<'a>,
    mail: Mailbox<'a, f64>,
}

impl Exchanger<'_> {
    /// Send `data` to this rank's partner in `slot`, and return the `incoming` values that
    /// the partner sent to this rank; with the `barrier` variant the arrival is a barrier
    /// of the process row, or of the world for the transpose (`across_rows`).
    fn exchange(
        &mut self,
        slot: usize,
        data: &[f64],
        incoming: usize,
        across_rows: bool,
    ) -> tessera::Result<&[f64]> {
        let arrival = match (self.sync, across_rows) {
            (Variant::Signal, _) => Arrival::Signal,
            (Variant::Barrier, true) => Arrival::Barrier(self.world),
            (Variant::Barrier, false) => Arrival::Barrier(&self.row_team),
        };
        self.mail.exchange(slot, data, incoming, arrival)
    }

    fn barrier(&self, across_rows: bool) -> tessera::Result<()> {
        if across_rows {
            self.world.run(Barrier, Blocking)
        } else {
            self.row_team.run(Barrier, Blocking)
        }
    }
}

/// The distributed operator `x ↦ A·x`: this rank's block, its place in the grid, and the
/// exchanges that sum and transpose the partial products.
struct Operator<'a> {
    layout: Layout,
    matrix: Matrix,
    comm: Exchanger<'a>,
    me: usize,
    /// Partial then summed products over the rank's matrix rows.
    w: Vec<f64>,
}

/// One rank's CG state: the operator and the vectors over the rank's columns.
struct Solver<'a> {
    op: Operator<'a>,
    x: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    r: Vec<f64>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Operator<'_> {
    /// Exchange slot of the transpose; row-sum phases use `0..phases`, dot products after.
    fn transpose_slot(&self) -> usize {
        self.layout.phases.len()
    }

    /// Sum `values` over the process row.
    fn row_sum<const N: usize>(&mut self, mut values: [f64; N]) -> tessera::Result<[f64; N]> {
        let base = self.transpose_slot() + 1;
        for k in 0..self.layout.phases.len() {
            let got = self.comm.exchange(base + k, &values, N, false)?;
            for (v, g) in values.iter_mut().zip(got) {
                *v += g;
            }
        }
        Ok(values)
    }

    /// `dst = A · src`, both over this rank's columns.
    fn multiply(&mut self, src: &[f64], dst: &mut [f64]) -> tessera::Result<()> {
        self.matrix.multiply(src, &mut self.w);
        for (k, phase) in self.layout.phases.iter().enumerate() {
            let send = &self.w[phase.send.clone()];
            let got = self.comm.exchange(k, send, phase.recv.len(), false)?;
            for (w, g) in self.w[phase.recv.clone()].iter_mut().zip(got) {
                *w += g;
            }
        }
        let slot = self.transpose_slot();
        let owned = &self.w[self.layout.owned.clone()];
        if self.layout.transpose == self.me {
            dst.copy_from_slice(owned);
            if self.comm.sync == Variant::Barrier && self.layout.rows > 1 {
                self.comm.barrier(true)?; // the others' transposes cross ranks
            }
        } else {
            let got = self.comm.exchange(slot, owned, dst.len(), true)?;
            dst.copy_from_slice(got);
        }
        Ok(())
    }
}

impl Solver<'_> {
    /// Solve `A z = x` approximately by 25 CG iterations; returns ‖x − A z‖.
    fn conj_grad(&mut self) -> tessera::Result<f64> {
        self.q.fill(0.0);
        self.z.fill(0.0);
        self.r.copy_from_slice(&self.x);
        self.p.copy_from_slice(&self.x);
        let [mut rho] = self.op.row_sum([dot(&self.r, &self.r)])?;
        for _ in 0..CGITMAX {
            self.op.multiply(&self.p, &mut self.q)?;
            let [d] = self.op.row_sum([dot(&self.p, &self.q)])?;
            let alpha = rho / d;
            let rho0 = rho;
            let mut local = 0.0;
            for (((z, r), p), q) in self.z.iter_mut().zip(&mut self.r).zip(&self.p).zip(&self.q) {
                *z += alpha * p;
                *r -= alpha * q;
                local += *r * *r;
            }
            [rho] = self.op.row_sum([local])?;
            let beta = rho / rho0;
            for (p, r) in self.p.iter_mut().zip(&self.r) {
                *p = r + beta * *p;
            }
        }
        // ‖x − A z‖, with r = A z.
        self.op.multiply(&self.z, &mut self.r)?;
        let local: f64 = self
            .x
            .iter()
            .zip(&self.r)
            .map(|(x, r)| (x - r) * (x - r))
            .sum();
        let [sum] = self.op.row_sum([local])?;
        Ok(sum.sqrt())
    }

    /// One outer iteration: solve, then `zeta = shift + 1/(x·z)` and `x = z/‖z‖`.
    fn step(&mut self, shift: f64) -> tessera::Result<f64> {
        self.conj_grad()?;
        let [xz, zz] = self
            .op
            .row_sum([dot(&self.x, &self.z), dot(&self.z, &self.z)])?;
        let scale = 1.0 / zz.sqrt();
        for (x, z) in self.x.iter_mut().zip(&self.z) {
            *x = scale * z;
        }
        Ok(shift + 1.0 / xz)
    }
}

/// What a rank of CG holds: its block of the matrix (12 bytes per generated entry while it
/// is built; about `na·(nonzer + 1)²` entries in all) and five vectors (private), and the
/// exchange slots (segment).
pub fn footprint(class: Class, ranks: usize) -> crate::Footprint {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let layout = Layout::new(data.na, ranks, 0);
    let entries = data.na * (data.nonzer + 1).pow(2) / ranks;
    let slots = 2 * layout.phases.len() + 1;
    let capacity = data.na.div_ceil(layout.rows);
    crate::Footprint {
        segment: 2 * slots * capacity * size_of::<f64>(),
        private: entries * (size_of::<u32>() + size_of::<f64>())
            + 6 * layout.col_range.len() * size_of::<f64>(),
    }
}

/// The chosen product form and what each form took, e.g.
/// `avx2-gather (portable 9.81 ms, avx2-gather 7.02 ms)`.
fn describe_trials(matrix: &Matrix, trials: &[(ProductForm, f64)]) -> String {
    let each: Vec<String> = trials
        .iter()
        .map(|(form, s)| format!("{} {:.2} ms", form.name(), s * 1e3))
        .collect();
    format!("{} ({})", matrix.form.name(), each.join(", "))
}

/// Run CG at `class`; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let sync = variant;
    let world = Team::world(ctx)?;
    let (ranks, me) = (world.size(), world.rank());
    crate::Benchmark::check_ranks(&Cg, ranks)?;
    let layout = Layout::new(data.na, ranks, me);
    let row_team = world
        .split(Some(layout.row as u32), layout.col as u64)?
        .expect("every rank is in its process row");
    let mut matrix = make_matrix(data, &layout);
    let trials = choose_form(&mut matrix, &world)?;
    let slots = 2 * layout.phases.len() + 1;
    let capacity = data.na.div_ceil(layout.rows);
    // Slots: the row-sum phases, the transpose, the dot-product phases (see
    // `Operator::transpose_slot`).
    let phase_partners = layout.phases.iter().map(|phase| phase.partner);
    let partners: Vec<usize> = phase_partners
        .clone()
        .chain([layout.transpose])
        .chain(phase_partners)
        .collect();
    debug_assert_eq!(partners.len(), slots);
    let comm = Exchanger {
        sync,
        row_team,
        world: &world,
        mail: Mailbox::new(&world, capacity, &partners)?,
    };
    let (nrows, ncols) = (layout.row_range.len(), layout.col_range.len());
    let mut solver = Solver {
        op: Operator {
            layout,
            matrix,
            comm,
            me,
            w: vec![0.0; nrows],
        },
        x: vec![1.0; ncols],
        z: vec![0.0; ncols],
        p: vec![0.0; ncols],
        q: vec![0.0; ncols],
        r: vec![0.0; ncols],
    };
    solver.step(data.shift)?; // untimed warm-up
    solver.x.fill(1.0);
    world.run(Barrier, Blocking)?;
    let start = Instant::now();
    let mut zeta = 0.0;
    let mut progress = crate::Progress::new("cg", data.niter, me)?;
    for done in 1..=data.niter {
        zeta = solver.step(data.shift)?;
        progress.done(done);
    }
    let elapsed = world.run(
        Allreduce::value(start.elapsed().as_secs_f64(), Op::Max),
        Blocking,
    )?;
    crate::note_resident_share(); // every array is still held here
    let nonzeros = world.run(
        Allreduce::value(solver.op.matrix.nonzeros() as u64, Op::Sum),
        Blocking,
    )?;
    if me != 0 {
        return Ok(None);
    }
    let k = (data.nonzer * (data.nonzer + 1)) as f64;
    let flops = 2.0 * (data.niter * data.na) as f64 * (3.0 + k + 25.0 * (5.0 + k) + 3.0);
    Ok(Some(Outcome {
        kernel: "CG".into(),
        class: class.to_string(),
        ranks,
        variant: variant.to_string(),
        time_s: elapsed,
        mops: flops / elapsed / 1e6,
        verified: data.zeta.map(|z| ((zeta - z) / z).abs() <= EPSILON),
        values: BTreeMap::from([
            ("zeta".to_string(), zeta),
            ("matrix_nonzeros".to_string(), nonzeros as f64),
        ]),
        reference: data
            .zeta
            .map(|z| BTreeMap::from([("zeta".to_string(), z)]))
            .unwrap_or_default(),
        size: data.na.to_string(),
        iterations: data.niter as u64,
        operation: "floating point".into(),
        profile: BTreeMap::new(),
        choices: BTreeMap::from([(
            "product".to_string(),
            describe_trials(&solver.op.matrix, &trials),
        )]),
        ..Outcome::default()
    }))
}

#[cfg(test)]
mod tests;
