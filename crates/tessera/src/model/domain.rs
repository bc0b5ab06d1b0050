//! Titanium's domain calculus: points, rectangular domains and general domains.
//!
//! - [`Point<N>`]: a point of the N-dimensional integer lattice.
//! - [`RectDomain<N>`]: the points `lo + k·stride` for `0 ≤ k` up to an inclusive upper
//!   bound `hi`, in every dimension. Bounds may be negative. Calculus: intersect
//!   ([`RectDomain::intersect`], Titanium's restrict), translate, shrink, grow, faces and
//!   halos (the layers inside and outside a face, edge or corner), slice (N → N−1),
//!   permute; emptiness, size, containment and row-major iteration.
//! - [`Domain<N>`]: a general domain, a union of disjoint unit-stride rectangles, closed
//!   under union (`|`), intersection (`&`) and difference (`-`).
//!
//! Domains are what distributed grids are built from: a ghost region is a halo, the data a
//! copy moves is an intersection, periodic neighbours are translates. This module is pure
//! arithmetic: it must never communicate, and no operation on a `RectDomain` may cost more
//! than O(N) (no per-point work except iteration).
//!
//! ```
//! use tessera::{Point, RectDomain};
//! let block = RectDomain::new(Point([0, 0]), Point([7, 7]));
//! let ghosts = block.grow(1);
//! assert_eq!(ghosts.len(), 100);
//! let east = block.halo(Point([0, 1]), 1); // the column just right of the block
//! assert_eq!((east.lo(), east.hi()), (Point([0, 8]), Point([7, 8])));
//! assert!(ghosts.intersect(&east) == east);
//! ```

use std::fmt;
use std::ops::{Add, BitAnd, BitOr, Index, IndexMut, Mul, Neg, Sub};

/// A point of the N-dimensional integer lattice.
///
/// ```
/// use tessera::Point;
/// let p = Point([1, -2, 3]) + Point::all(1);
/// assert_eq!(p, Point([2, -1, 4]));
/// assert_eq!(p[1], -1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Point<const N: usize>(pub [i64; N]);

impl<const N: usize> Point<N> {
    /// Every coordinate `v`.
    pub const fn all(v: i64) -> Self {
        Point([v; N])
    }

    /// The origin.
    pub const fn zero() -> Self {
        Point([0; N])
    }

    /// `v` in dimension `dim`, zero elsewhere (a direction).
    pub fn unit(dim: usize, v: i64) -> Self {
        let mut p = Self::zero();
        p.0[dim] = v;
        p
    }

    /// Coordinates reordered: dimension `d` of the result is dimension `perm[d]` of this.
    ///
    /// ```
    /// use tessera::Point;
    /// assert_eq!(Point([1, 2, 3]).permute([2, 0, 1]), Point([3, 1, 2]));
    /// ```
    pub fn permute(self, perm: [usize; N]) -> Self {
        assert_permutation(perm);
        Point(perm.map(|d| self.0[d]))
    }

    /// This point without dimension `dim` (`M` must be `N − 1`).
    ///
    /// ```
    /// use tessera::Point;
    /// assert_eq!(Point([1, 2, 3]).slice::<2>(1), Point([1, 3]));
    /// ```
    pub fn slice<const M: usize>(self, dim: usize) -> Point<M> {
        Point(drop_dim(self.0, dim))
    }

    /// Coordinate-wise minimum.
    pub fn min(self, other: Self) -> Self {
        Point(std::array::from_fn(|d| self.0[d].min(other.0[d])))
    }

    /// Coordinate-wise maximum.
    pub fn max(self, other: Self) -> Self {
        Point(std::array::from_fn(|d| self.0[d].max(other.0[d])))
    }

    fn zip(self, other: Self, f: impl Fn(i64, i64) -> i64) -> Self {
        Point(std::array::from_fn(|d| f(self.0[d], other.0[d])))
    }
}

/// `a` without element `dim` (`M` must be `N − 1`): the coordinates of a slice.
pub(crate) fn drop_dim<T: Copy + Default, const N: usize, const M: usize>(
    a: [T; N],
    dim: usize,
) -> [T; M] {
    assert!(
        M + 1 == N && dim < N,
        "slicing dimension {dim} of a {N}-d object gives {}-d, not {M}-d",
        N.max(1) - 1
    );
    let mut out = [T::default(); M];
    for (o, (_, &c)) in out
        .iter_mut()
        .zip(a.iter().enumerate().filter(|&(d, _)| d != dim))
    {
        *o = c;
    }
    out
}

fn assert_permutation<const N: usize>(perm: [usize; N]) {
    let mut seen = [false; N];
    for &d in &perm {
        assert!(
            d < N && !std::mem::replace(&mut seen[d], true),
            "{perm:?} is not a permutation of 0..{N}"
        );
    }
}

impl<const N: usize> Add for Point<N> {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        self.zip(o, |a, b| a + b)
    }
}

impl<const N: usize> Sub for Point<N> {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        self.zip(o, |a, b| a - b)
    }
}

impl<const N: usize> Neg for Point<N> {
    type Output = Self;
    fn neg(self) -> Self {
        Point(self.0.map(|c| -c))
    }
}

/// Coordinate-wise product.
impl<const N: usize> Mul for Point<N> {
    type Output = Self;
    fn mul(self, o: Self) -> Self {
        self.zip(o, |a, b| a * b)
    }
}

impl<const N: usize> Mul<i64> for Point<N> {
    type Output = Self;
    fn mul(self, k: i64) -> Self {
        Point(self.0.map(|c| c * k))
    }
}

impl<const N: usize> Index<usize> for Point<N> {
    type Output = i64;
    fn index(&self, d: usize) -> &i64 {
        &self.0[d]
    }
}

impl<const N: usize> IndexMut<usize> for Point<N> {
    fn index_mut(&mut self, d: usize) -> &mut i64 {
        &mut self.0[d]
    }
}

impl<const N: usize> fmt::Display for Point<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (d, c) in self.0.iter().enumerate() {
            if d > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{c}")?;
        }
        write!(f, "]")
    }
}

/// A rectangular domain: in every dimension `d`, the coordinates `lo[d] + k·stride[d]`
/// that do not exceed `hi[d]` (inclusive, as in Titanium).
///
/// Kept normalised: `hi` lies on the lattice, and every empty domain is the same value,
/// so `==` compares point sets.
///
/// ```
/// use tessera::{Point, RectDomain};
/// let evens = RectDomain::strided(Point([0]), Point([9]), Point([2]));
/// assert_eq!(evens.hi(), Point([8]));
/// assert_eq!(evens.len(), 5);
/// let thirds = RectDomain::strided(Point([0]), Point([9]), Point([3]));
/// assert_eq!(evens.intersect(&thirds), RectDomain::strided(Point([0]), Point([6]), Point([6])));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RectDomain<const N: usize> {
    lo: Point<N>,
    hi: Point<N>,
    stride: Point<N>,
}

/// Which side of a dimension.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    /// Towards lower coordinates.
    Low,
    /// Towards higher coordinates.
    High,
}

impl Side {
    /// −1 or +1.
    pub fn sign(self) -> i64 {
        match self {
            Side::Low => -1,
            Side::High => 1,
        }
    }
}

impl<const N: usize> RectDomain<N> {
    /// The empty domain.
    pub const EMPTY: Self = RectDomain {
        lo: Point([0; N]),
        hi: Point([-1; N]),
        stride: Point([1; N]),
    };

    /// Unit-stride domain from `lo` to `hi` inclusive (empty if `hi < lo` anywhere).
    pub fn new(lo: Point<N>, hi: Point<N>) -> Self {
        Self::strided(lo, hi, Point::all(1))
    }

    /// Domain from `lo` to at most `hi` in steps of `stride` (every component ≥ 1).
    pub fn strided(lo: Point<N>, hi: Point<N>, stride: Point<N>) -> Self {
        assert!(
            stride.0.iter().all(|&s| s >= 1),
            "strides must be at least 1, not {stride}"
        );
        if (0..N).any(|d| hi[d] < lo[d]) {
            return Self::EMPTY;
        }
        let hi = Point(std::array::from_fn(|d| {
            lo[d] + (hi[d] - lo[d]) / stride[d] * stride[d]
        }));
        RectDomain { lo, hi, stride }
    }

    /// The domain `0..shape[d]` (exclusive) in every dimension.
    ///
    /// ```
    /// use tessera::{Point, RectDomain};
    /// assert_eq!(RectDomain::with_shape([2, 3]).hi(), Point([1, 2]));
    /// ```
    pub fn with_shape(shape: [usize; N]) -> Self {
        Self::new(Point::zero(), Point(shape.map(|n| n as i64 - 1)))
    }

    /// Lowest corner.
    pub fn lo(&self) -> Point<N> {
        self.lo
    }

    /// Highest corner (inclusive, on the lattice).
    pub fn hi(&self) -> Point<N> {
        self.hi
    }

    /// Steps between points.
    pub fn stride(&self) -> Point<N> {
        self.stride
    }

    /// Whether every stride is 1.
    pub fn is_unit_stride(&self) -> bool {
        self.stride == Point::all(1)
    }

    /// No points.
    pub fn is_empty(&self) -> bool {
        (0..N).any(|d| self.hi[d] < self.lo[d])
    }

    /// Points along dimension `d`.
    pub fn extent(&self, d: usize) -> usize {
        if self.is_empty() {
            0
        } else {
            ((self.hi[d] - self.lo[d]) / self.stride[d] + 1) as usize
        }
    }

    /// Points along every dimension.
    pub fn shape(&self) -> [usize; N] {
        std::array::from_fn(|d| self.extent(d))
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        (0..N).map(|d| self.extent(d)).product()
    }

    /// Whether `p` is one of the points.
    pub fn contains(&self, p: Point<N>) -> bool {
        (0..N).all(|d| {
            self.lo[d] <= p[d] && p[d] <= self.hi[d] && (p[d] - self.lo[d]) % self.stride[d] == 0
        })
    }

    /// Whether every point of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.intersect(other) == *self
    }

    /// The points in both (Titanium's restrict, `*`). Strided domains intersect by the
    /// Chinese remainder theorem, dimension by dimension.
    pub fn intersect(&self, other: &Self) -> Self {
        let mut out = Self::EMPTY;
        for d in 0..N {
            match intersect_1d(
                (self.lo[d], self.hi[d], self.stride[d]),
                (other.lo[d], other.hi[d], other.stride[d]),
            ) {
                Some((lo, hi, stride)) => {
                    out.lo[d] = lo;
                    out.hi[d] = hi;
                    out.stride[d] = stride;
                }
                None => return Self::EMPTY,
            }
        }
        out
    }

    /// Every point moved by `by`.
    pub fn translate(&self, by: Point<N>) -> Self {
        if self.is_empty() {
            return *self;
        }
        RectDomain {
            lo: self.lo + by,
            hi: self.hi + by,
            stride: self.stride,
        }
    }

    /// `k` lattice steps removed from every face (`k` may be negative: see [`grow`]).
    ///
    /// [`grow`]: RectDomain::grow
    pub fn shrink(&self, k: i64) -> Self {
        if self.is_empty() {
            return *self;
        }
        Self::strided(
            self.lo + self.stride * k,
            self.hi - self.stride * k,
            self.stride,
        )
    }

    /// `k` lattice steps added to every face.
    pub fn grow(&self, k: i64) -> Self {
        self.shrink(-k)
    }

    /// The part of this domain within `width` steps of the face, edge or corner named by
    /// `direction` (each component −1, 0 or +1; 0 keeps the whole extent).
    ///
    /// ```
    /// use tessera::{Point, RectDomain};
    /// let d = RectDomain::new(Point([0, 0]), Point([3, 3]));
    /// assert_eq!(d.face(Point([-1, 0]), 1), RectDomain::new(Point([0, 0]), Point([0, 3])));
    /// assert_eq!(d.face(Point([1, 1]), 2).len(), 4); // a corner
    /// ```
    pub fn face(&self, direction: Point<N>, width: i64) -> Self {
        self.layer(direction, width, false)
    }

    /// The points within `width` steps outside the face, edge or corner named by
    /// `direction`: the ghost region a block receives from that neighbour.
    pub fn halo(&self, direction: Point<N>, width: i64) -> Self {
        self.layer(direction, width, true)
    }

    /// The face `side` of dimension `dim`, `width` thick (inside).
    pub fn side_face(&self, dim: usize, side: Side, width: i64) -> Self {
        self.face(Point::unit(dim, side.sign()), width)
    }

    fn layer(&self, direction: Point<N>, width: i64, outside: bool) -> Self {
        assert!(
            direction.0.iter().all(|c| (-1..=1).contains(c)),
            "a direction has components −1, 0 or +1, not {direction}"
        );
        assert!(width >= 0, "a layer width is at least 0, not {width}");
        if self.is_empty() || width == 0 {
            return Self::EMPTY;
        }
        let (mut lo, mut hi) = (self.lo, self.hi);
        for d in 0..N {
            let s = self.stride[d];
            match (direction[d], outside) {
                (0, _) => {}
                (-1, false) => hi[d] = (lo[d] + (width - 1) * s).min(self.hi[d]),
                (1, false) => lo[d] = (hi[d] - (width - 1) * s).max(self.lo[d]),
                (-1, true) => (lo[d], hi[d]) = (self.lo[d] - width * s, self.lo[d] - s),
                _ => (lo[d], hi[d]) = (self.hi[d] + s, self.hi[d] + width * s),
            }
        }
        Self::strided(lo, hi, self.stride)
    }

    /// This domain without dimension `dim` (`M` must be `N − 1`): the domain of a slice
    /// through it.
    ///
    /// ```
    /// use tessera::{Point, RectDomain};
    /// let d = RectDomain::new(Point([0, 1, 2]), Point([3, 4, 5]));
    /// assert_eq!(d.slice::<2>(1), RectDomain::new(Point([0, 2]), Point([3, 5])));
    /// ```
    pub fn slice<const M: usize>(&self, dim: usize) -> RectDomain<M> {
        if self.is_empty() {
            return RectDomain::EMPTY;
        }
        RectDomain {
            lo: self.lo.slice(dim),
            hi: self.hi.slice(dim),
            stride: self.stride.slice(dim),
        }
    }

    /// Dimensions reordered as [`Point::permute`] does.
    pub fn permute(&self, perm: [usize; N]) -> Self {
        if self.is_empty() {
            assert_permutation(perm);
            return *self;
        }
        RectDomain {
            lo: self.lo.permute(perm),
            hi: self.hi.permute(perm),
            stride: self.stride.permute(perm),
        }
    }

    /// The points in row-major order (the last dimension fastest).
    ///
    /// ```
    /// use tessera::{Point, RectDomain};
    /// let d = RectDomain::new(Point([0, 0]), Point([1, 1]));
    /// let order: Vec<_> = d.iter().collect();
    /// assert_eq!(order, [Point([0, 0]), Point([0, 1]), Point([1, 0]), Point([1, 1])]);
    /// ```
    pub fn iter(&self) -> RectIter<N> {
        RectIter {
            domain: *self,
            next: (!self.is_empty()).then_some(self.lo),
        }
    }
}

impl<const N: usize> fmt::Display for RectDomain<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return write!(f, "[empty]");
        }
        if self.is_unit_stride() {
            write!(f, "[{} : {}]", self.lo, self.hi)
        } else {
            write!(f, "[{} : {} : {}]", self.lo, self.hi, self.stride)
        }
    }
}

impl<const N: usize> IntoIterator for &RectDomain<N> {
    type Item = Point<N>;
    type IntoIter = RectIter<N>;
    fn into_iter(self) -> RectIter<N> {
        self.iter()
    }
}

/// Row-major iterator over a [`RectDomain`].
#[derive(Clone, Debug)]
pub struct RectIter<const N: usize> {
    domain: RectDomain<N>,
    next: Option<Point<N>>,
}

impl<const N: usize> Iterator for RectIter<N> {
    type Item = Point<N>;
    fn next(&mut self) -> Option<Point<N>> {
        let current = self.next?;
        let mut p = current;
        let d = &self.domain;
        self.next = None;
        for k in (0..N).rev() {
            if p[k] + d.stride[k] <= d.hi[k] {
                p[k] += d.stride[k];
                self.next = Some(p);
                break;
            }
            p[k] = d.lo[k];
        }
        Some(current)
    }
}

/// The intersection of two arithmetic progressions `(lo, hi, stride)`, or `None`.
fn intersect_1d(a: (i64, i64, i64), b: (i64, i64, i64)) -> Option<(i64, i64, i64)> {
    let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
    if lo > hi {
        return None;
    }
    let (s1, s2) = (a.2 as i128, b.2 as i128);
    let g = gcd(s1, s2);
    // inv·(s1/g) ≡ 1 (mod s2/g): s1/g and s2/g are coprime.
    let (_, inv, _) = extended_gcd(s1 / g, s2 / g);
    let diff = b.0 as i128 - a.0 as i128;
    if diff % g != 0 {
        return None;
    }
    // x = a.lo + s1·k with s1·k ≡ diff (mod s2), i.e. k ≡ (diff/g)·inv (mod s2/g).
    let m = s2 / g;
    let k = ((diff / g) % m * (inv % m)).rem_euclid(m);
    let step = s1 / g * s2;
    let x0 = a.0 as i128 + s1 * k;
    let first = x0 + (lo as i128 - x0).div_euclid(step) * step;
    let first = if first < lo as i128 {
        first + step
    } else {
        first
    };
    if first > hi as i128 {
        return None;
    }
    let last = first + (hi as i128 - first) / step * step;
    Some((first as i64, last as i64, step as i64))
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// `(g, x, y)` with `a·x + b·y = g = gcd(a, b)`.
fn extended_gcd(a: i128, b: i128) -> (i128, i128, i128) {
    if b == 0 {
        (a, 1, 0)
    } else {
        let (g, x, y) = extended_gcd(b, a % b);
        (g, y, x - a / b * y)
    }
}

/// A general domain: a union of disjoint, non-empty, unit-stride rectangles.
///
/// ```
/// use tessera::{Domain, Point, RectDomain};
/// let block = RectDomain::new(Point([0, 0]), Point([3, 3]));
/// let ghosts = Domain::from(block.grow(1)) - Domain::from(block);
/// assert_eq!(ghosts.len(), 36 - 16);
/// assert!(!ghosts.contains(Point([1, 1])) && ghosts.contains(Point([-1, 2])));
/// let again = ghosts.clone() | Domain::from(block);
/// assert_eq!(again, Domain::from(block.grow(1)));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Domain<const N: usize> {
    rects: Vec<RectDomain<N>>,
}

impl<const N: usize> Domain<N> {
    /// No points.
    pub fn empty() -> Self {
        Domain { rects: Vec::new() }
    }

    /// The disjoint rectangles that make up the domain.
    pub fn rects(&self) -> &[RectDomain<N>] {
        &self.rects
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.rects.iter().map(RectDomain::len).sum()
    }

    /// No points.
    pub fn is_empty(&self) -> bool {
        self.rects.is_empty()
    }

    /// Whether `p` is one of the points.
    pub fn contains(&self, p: Point<N>) -> bool {
        self.rects.iter().any(|r| r.contains(p))
    }

    /// The smallest rectangle holding every point (empty for the empty domain).
    pub fn bounding_box(&self) -> RectDomain<N> {
        let mut it = self.rects.iter();
        let Some(first) = it.next() else {
            return RectDomain::EMPTY;
        };
        let (lo, hi) = it.fold((first.lo, first.hi), |(lo, hi), r| {
            (lo.min(r.lo), hi.max(r.hi))
        });
        RectDomain::new(lo, hi)
    }

    /// Points in either.
    pub fn union(&self, other: &Self) -> Self {
        let mut rects = self.rects.clone();
        rects.extend(other.difference(self).rects);
        Domain { rects }
    }

    /// Points in both.
    pub fn intersect(&self, other: &Self) -> Self {
        let rects = self
            .rects
            .iter()
            .flat_map(|a| other.rects.iter().map(move |b| a.intersect(b)))
            .filter(|r| !r.is_empty())
            .collect();
        Domain { rects }
    }

    /// Points in `self` but not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let mut rects = self.rects.clone();
        for b in &other.rects {
            rects = rects.iter().flat_map(|a| subtract(a, b)).collect();
        }
        Domain { rects }
    }

    /// Every point moved by `by`.
    pub fn translate(&self, by: Point<N>) -> Self {
        Domain {
            rects: self.rects.iter().map(|r| r.translate(by)).collect(),
        }
    }

    /// The points in row-major order.
    pub fn points(&self) -> Vec<Point<N>> {
        let mut all: Vec<Point<N>> = self.rects.iter().flat_map(|r| r.iter()).collect();
        all.sort_unstable();
        all
    }
}

/// `a − b` for unit-stride rectangles: at most 2N disjoint slabs, cut dimension by
/// dimension around the intersection.
fn subtract<const N: usize>(a: &RectDomain<N>, b: &RectDomain<N>) -> Vec<RectDomain<N>> {
    let c = a.intersect(b);
    if c.is_empty() {
        return vec![*a];
    }
    let mut out = Vec::new();
    let mut rest = *a;
    for d in 0..N {
        if rest.lo[d] < c.lo[d] {
            let mut below = rest;
            below.hi[d] = c.lo[d] - 1;
            out.push(below);
        }
        if rest.hi[d] > c.hi[d] {
            let mut above = rest;
            above.lo[d] = c.hi[d] + 1;
            out.push(above);
        }
        rest.lo[d] = c.lo[d];
        rest.hi[d] = c.hi[d];
    }
    out
}

impl<const N: usize> From<RectDomain<N>> for Domain<N> {
    /// # Panics
    /// If the rectangle is strided: general domains hold unit-stride rectangles.
    fn from(r: RectDomain<N>) -> Self {
        assert!(
            r.is_unit_stride(),
            "a general Domain holds unit-stride rectangles; {r} is strided"
        );
        Domain {
            rects: if r.is_empty() { Vec::new() } else { vec![r] },
        }
    }
}

/// Equal as point sets.
impl<const N: usize> PartialEq for Domain<N> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.difference(other).is_empty()
    }
}

impl<const N: usize> Eq for Domain<N> {}

impl<const N: usize> BitOr for Domain<N> {
    type Output = Self;
    fn bitor(self, o: Self) -> Self {
        self.union(&o)
    }
}

impl<const N: usize> BitAnd for Domain<N> {
    type Output = Self;
    fn bitand(self, o: Self) -> Self {
        self.intersect(&o)
    }
}

impl<const N: usize> Sub for Domain<N> {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        self.difference(&o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn rect2() -> impl Strategy<Value = RectDomain<2>> {
        (-6i64..6, -6i64..6, -1i64..8, -1i64..8, 1i64..4, 1i64..4).prop_map(
            |(x, y, w, h, sx, sy)| {
                RectDomain::strided(Point([x, y]), Point([x + w, y + h]), Point([sx, sy]))
            },
        )
    }

    fn unit2() -> impl Strategy<Value = RectDomain<2>> {
        (-6i64..6, -6i64..6, -1i64..8, -1i64..8)
            .prop_map(|(x, y, w, h)| RectDomain::new(Point([x, y]), Point([x + w, y + h])))
    }

    fn domain2() -> impl Strategy<Value = Domain<2>> {
        proptest::collection::vec(unit2(), 0..4).prop_map(|rs| {
            rs.into_iter()
                .fold(Domain::empty(), |d, r| d | Domain::from(r))
        })
    }

    /// Brute force: the points of `r` found by scanning a box around the test range.
    fn scan(r: &RectDomain<2>) -> BTreeSet<Point<2>> {
        let mut s = BTreeSet::new();
        for x in -20..30 {
            for y in -20..30 {
                if r.contains(Point([x, y])) {
                    s.insert(Point([x, y]));
                }
            }
        }
        s
    }

    fn set(d: &Domain<2>) -> BTreeSet<Point<2>> {
        d.points().into_iter().collect()
    }

    proptest! {
        #[test]
        fn iteration_is_row_major_and_matches_membership(r in rect2()) {
            let points: Vec<_> = r.iter().collect();
            prop_assert_eq!(points.len(), r.len());
            prop_assert!(points.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(points.into_iter().collect::<BTreeSet<_>>(), scan(&r));
        }

        #[test]
        fn strided_intersection_is_the_set_intersection(a in rect2(), b in rect2()) {
            let c = a.intersect(&b);
            let want: BTreeSet<_> = scan(&a).intersection(&scan(&b)).copied().collect();
            prop_assert_eq!(c.iter().collect::<BTreeSet<_>>(), want);
            prop_assert_eq!(c, b.intersect(&a));
        }

        #[test]
        fn translation_commutes_with_intersection(a in rect2(), b in rect2(), x in -9i64..9, y in -9i64..9) {
            let p = Point([x, y]);
            prop_assert_eq!(a.intersect(&b).translate(p), a.translate(p).intersect(&b.translate(p)));
        }

        #[test]
        fn shrink_undoes_grow_and_grow_undoes_shrink(r in rect2(), k in 0i64..3) {
            prop_assert_eq!(r.grow(k).shrink(k), r);
            let s = r.shrink(k);
            if !s.is_empty() {
                prop_assert_eq!(s.grow(k), r);
            }
        }

        #[test]
        fn halos_and_faces_tile_the_grown_domain(r in unit2(), w in 1i64..3) {
            // The 3^N − 1 halos plus the domain are exactly grow(w), disjointly.
            let mut total = r.len();
            let mut union = Domain::from(r);
            for dx in -1..=1 {
                for dy in -1..=1 {
                    if (dx, dy) == (0, 0) { continue; }
                    let h = r.halo(Point([dx, dy]), w);
                    prop_assert!(r.is_empty() || !h.is_empty());
                    prop_assert!(h.intersect(&r).is_empty());
                    total += h.len();
                    union = union | Domain::from(h);
                    // A face is the halo of the opposite side, moved inside.
                    let f = r.face(Point([dx, dy]), w);
                    prop_assert!(f.is_subset(&r));
                }
            }
            prop_assert_eq!(total, r.grow(w).len());
            prop_assert_eq!(union, Domain::from(r.grow(w)));
        }

        #[test]
        fn slicing_projects_the_points(r in rect2(), dim in 0usize..2) {
            let s = r.slice::<1>(dim);
            let want: BTreeSet<_> = r.iter().map(|p| p.slice::<1>(dim)).collect();
            prop_assert_eq!(s.iter().collect::<BTreeSet<_>>(), want);
        }

        #[test]
        fn permuting_permutes_every_point(r in rect2()) {
            let t = r.permute([1, 0]);
            let want: BTreeSet<_> = r.iter().map(|p| p.permute([1, 0])).collect();
            prop_assert_eq!(t.iter().collect::<BTreeSet<_>>(), want);
            prop_assert_eq!(t.permute([1, 0]), r);
        }

        #[test]
        fn domain_algebra_is_set_algebra(a in domain2(), b in domain2()) {
            let (sa, sb) = (set(&a), set(&b));
            prop_assert_eq!(set(&(a.clone() | b.clone())), sa.union(&sb).copied().collect::<BTreeSet<_>>());
            prop_assert_eq!(set(&(a.clone() & b.clone())), sa.intersection(&sb).copied().collect::<BTreeSet<_>>());
            prop_assert_eq!(set(&(a.clone() - b.clone())), sa.difference(&sb).copied().collect::<BTreeSet<_>>());
            // Rectangles stay disjoint: sizes add up.
            for d in [a.clone() | b.clone(), a.clone() - b.clone(), a.clone() & b.clone()] {
                prop_assert_eq!(d.len(), set(&d).len());
            }
            // Laws.
            prop_assert_eq!((a.clone() - b.clone()) | (a.clone() & b.clone()), a.clone());
            prop_assert!(((a.clone() - b.clone()) & b.clone()).is_empty());
            prop_assert_eq!(a.clone() | b.clone(), b.clone() | a.clone());
        }
    }

    #[test]
    fn empty_domains_are_one_value() {
        let a = RectDomain::new(Point([3, 3]), Point([2, 9]));
        let b = RectDomain::strided(Point([0, 0]), Point([-1, -1]), Point([2, 2]));
        assert_eq!(a, b);
        assert_eq!(a, RectDomain::EMPTY);
        assert_eq!(a.len(), 0);
        assert_eq!(a.iter().count(), 0);
        assert_eq!(a.to_string(), "[empty]");
    }

    #[test]
    fn bad_arguments_are_named() {
        let r =
            std::panic::catch_unwind(|| RectDomain::strided(Point([0]), Point([3]), Point([0])));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("strides must be at least 1"), "{msg}");
        let r = std::panic::catch_unwind(|| Point([1, 2]).permute([0, 0]));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("not a permutation"), "{msg}");
    }
}
