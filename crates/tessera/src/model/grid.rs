//! Titanium-style N-dimensional arrays over a [`RectDomain`], and views that share storage.
//!
//! A [`Grid<T, N>`] owns contiguous row-major storage for the points of its domain (any
//! lower bounds, any stride) and is indexed by [`Point`]. Views ([`GridView`],
//! [`GridViewMut`]) borrow that storage and re-map indices without copying: `restrict` to a
//! smaller domain, `translate` the index space, `shrink`, and `slice` away a dimension.
//! `copy_from` copies exactly the intersection of two domains, a contiguous run at a time.
//!
//! This module is local: it never communicates. Grids in the global address space and
//! copies between ranks build on it.
//!
//! ```
//! use tessera::{Grid, Point, RectDomain};
//! // A 4×4 block with one layer of ghost cells: storage over [-1, 4]².
//! let interior = RectDomain::new(Point([0, 0]), Point([3, 3]));
//! let mut a = Grid::from_fn(interior.grow(1), |p| (10 * p[0] + p[1]) as f64);
//! // Periodic ghost column: the interior's first column, seen through a translated view,
//! // lands in the ghost column past the last one.
//! let west_face = a.view().restrict(&interior.side_face(1, tessera::Side::Low, 1)).to_grid();
//! let moved = west_face.view().translate(Point([0, 4]));
//! let copied = a.view_mut().copy_from(&moved);
//! assert_eq!(copied, 4);
//! assert_eq!(a[Point([2, 4])], a[Point([2, 0])]);
//! ```

use std::ops::{Index, IndexMut};

use crate::model::domain::{drop_dim, Point, RectDomain};

/// How a view's points map to storage offsets. `repr(C)` and all 64-bit integers, so that a
/// [`GridRef`](crate::GridRef) holding one is plain old data and can travel between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Layout<const N: usize> {
    /// The points visible through the view.
    domain: RectDomain<N>,
    /// The point stored at `offset`.
    base: Point<N>,
    /// Coordinate distance between neighbouring stored elements, per dimension.
    stride: Point<N>,
    /// Storage distance between neighbouring stored elements, per dimension (positive).
    steps: [i64; N],
    /// Storage offset of `base`.
    offset: i64,
}

impl<const N: usize> Layout<N> {
    /// Row-major storage for `domain`.
    pub(crate) fn packed(domain: RectDomain<N>) -> Self {
        let shape = domain.shape();
        let mut steps = [0i64; N];
        let mut step = 1i64;
        for d in (0..N).rev() {
            steps[d] = step;
            step *= shape[d] as i64;
        }
        Layout {
            domain,
            base: domain.lo(),
            stride: domain.stride(),
            steps,
            offset: 0,
        }
    }

    /// Storage offset of `p`, which must be in the domain.
    pub(crate) fn offset_of(&self, p: Point<N>) -> usize {
        let mut at = self.offset;
        for d in 0..N {
            at += (p[d] - self.base[d]) / self.stride[d] * self.steps[d];
        }
        at as usize
    }

    /// The points visible through this layout.
    pub(crate) fn domain(&self) -> RectDomain<N> {
        self.domain
    }

    /// `region` (a subdomain of this layout's domain) as a strided box: the storage offset
    /// of its first point, the storage stride of each dimension, and the count of each.
    pub(crate) fn strided(&self, region: &RectDomain<N>) -> (usize, [usize; N], [usize; N]) {
        let strides =
            std::array::from_fn(|d| (region.stride()[d] / self.stride[d] * self.steps[d]) as usize);
        (self.offset_of(region.lo()), strides, region.shape())
    }

    fn checked_offset(&self, p: Point<N>) -> usize {
        assert!(
            self.domain.contains(p),
            "point {p} is outside the grid's domain {}",
            self.domain
        );
        self.offset_of(p)
    }

    pub(crate) fn restrict(&self, to: &RectDomain<N>) -> Self {
        Layout {
            domain: self.domain.intersect(to),
            ..*self
        }
    }

    pub(crate) fn translate(&self, by: Point<N>) -> Self {
        Layout {
            domain: self.domain.translate(by),
            base: self.base + by,
            ..*self
        }
    }

    pub(crate) fn slice<const M: usize>(&self, dim: usize, at: i64) -> Layout<M> {
        let d = &self.domain;
        let mut probe = d.lo();
        probe[dim] = at;
        assert!(
            !d.is_empty() && d.contains(probe),
            "cannot slice {d} at coordinate {at} of dimension {dim}: not in the domain"
        );
        Layout {
            domain: d.slice(dim),
            base: self.base.slice(dim),
            stride: self.stride.slice(dim),
            steps: drop_dim(self.steps, dim),
            offset: self.offset + (at - self.base[dim]) / self.stride[dim] * self.steps[dim],
        }
    }

    /// Storage distance between neighbours of `within` (a subdomain) along the last
    /// dimension.
    fn run_step(&self, within: &RectDomain<N>) -> isize {
        (within.stride()[N - 1] / self.stride[N - 1] * self.steps[N - 1]) as isize
    }
}

/// The rows of `domain` (its points with the lowest last coordinate), for copying run by run.
fn row_starts<const N: usize>(domain: &RectDomain<N>) -> impl Iterator<Item = Point<N>> {
    let mut hi = domain.hi();
    if N > 0 && !domain.is_empty() {
        hi[N - 1] = domain.lo()[N - 1];
    }
    let rows = if domain.is_empty() {
        RectDomain::EMPTY
    } else {
        RectDomain::strided(domain.lo(), hi, domain.stride())
    };
    rows.iter()
}

/// An N-dimensional array over a rectangular domain, stored contiguously in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid<T, const N: usize> {
    data: Vec<T>,
    layout: Layout<N>,
}

impl<T: Clone, const N: usize> Grid<T, N> {
    /// Every element `value`.
    pub fn filled(domain: RectDomain<N>, value: T) -> Self {
        Grid {
            data: vec![value; domain.len()],
            layout: Layout::packed(domain),
        }
    }
}

impl<T, const N: usize> Grid<T, N> {
    /// Element `p` is `f(p)`, evaluated in row-major order.
    pub fn from_fn(domain: RectDomain<N>, f: impl FnMut(Point<N>) -> T) -> Self {
        Grid {
            data: domain.iter().map(f).collect(),
            layout: Layout::packed(domain),
        }
    }

    /// The domain.
    pub fn domain(&self) -> RectDomain<N> {
        self.layout.domain
    }

    /// The elements in row-major order (for numeric crates that take slices).
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements in row-major order, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// A view of the whole grid.
    pub fn view(&self) -> GridView<'_, T, N> {
        GridView {
            data: &self.data,
            layout: self.layout,
        }
    }

    /// A mutable view of the whole grid.
    pub fn view_mut(&mut self) -> GridViewMut<'_, T, N> {
        GridViewMut {
            data: &mut self.data,
            layout: self.layout,
        }
    }
}

impl<T, const N: usize> Index<Point<N>> for Grid<T, N> {
    type Output = T;
    fn index(&self, p: Point<N>) -> &T {
        &self.data[self.layout.checked_offset(p)]
    }
}

impl<T, const N: usize> IndexMut<Point<N>> for Grid<T, N> {
    fn index_mut(&mut self, p: Point<N>) -> &mut T {
        let at = self.layout.checked_offset(p);
        &mut self.data[at]
    }
}

/// A read-only view of a grid's storage over some domain.
#[derive(Clone, Copy, Debug)]
pub struct GridView<'a, T, const N: usize> {
    data: &'a [T],
    layout: Layout<N>,
}

/// A mutable view of a grid's storage over some domain.
#[derive(Debug)]
pub struct GridViewMut<'a, T, const N: usize> {
    data: &'a mut [T],
    layout: Layout<N>,
}

/// Index-mapping operations shared by the local views and [`GridRef`](crate::GridRef):
/// they change which points are visible and how they are numbered, never the storage.
/// `$storage` is the field that says where the storage is.
macro_rules! layout_methods {
    ($view:ident, $storage:ident, [$($life:lifetime)?]) => {
        impl<$($life,)? T, const N: usize> $view<$($life,)? T, N> {
            /// The points visible through this view.
            pub fn domain(&self) -> RectDomain<N> {
                self.layout.domain()
            }

            /// Only the points also in `to` (Titanium's restrict).
            pub fn restrict(self, to: &RectDomain<N>) -> Self {
                $view {
                    layout: self.layout.restrict(to),
                    ..self
                }
            }

            /// The same elements, indexed by points moved by `by`.
            pub fn translate(self, by: Point<N>) -> Self {
                $view {
                    layout: self.layout.translate(by),
                    ..self
                }
            }

            /// Without `k` layers on every face.
            pub fn shrink(self, k: i64) -> Self {
                let to = self.layout.domain().shrink(k);
                self.restrict(&to)
            }

            /// The (N−1)-dimensional slice at coordinate `at` of dimension `dim` (`M` must
            /// be `N − 1`).
            pub fn slice<const M: usize>(self, dim: usize, at: i64) -> $view<$($life,)? T, M> {
                $view {
                    $storage: self.$storage,
                    layout: self.layout.slice(dim, at),
                }
            }
        }
    };
}
pub(crate) use layout_methods;

layout_methods!(GridView, data, ['a]);

impl<'a, T, const N: usize> GridView<'a, T, N> {
    pub(crate) fn from_parts(data: &'a [T], layout: Layout<N>) -> Self {
        GridView { data, layout }
    }

    pub(crate) fn layout(&self) -> Layout<N> {
        self.layout
    }

    pub(crate) fn data(&self) -> &'a [T] {
        self.data
    }
}

impl<'a, T, const N: usize> GridViewMut<'a, T, N> {
    pub(crate) fn from_parts(data: &'a mut [T], layout: Layout<N>) -> Self {
        GridViewMut { data, layout }
    }

    pub(crate) fn layout(&self) -> Layout<N> {
        self.layout
    }

    pub(crate) fn data_mut(&mut self) -> &mut [T] {
        self.data
    }

    pub(crate) fn into_data(self) -> &'a mut [T] {
        self.data
    }
}
layout_methods!(GridViewMut, data, ['a]);

/// Element access shared by both local view types.
macro_rules! view_methods {
    ($view:ident) => {
        impl<'a, T, const N: usize> $view<'a, T, N> {
            /// The element at `p`, or `None` outside the domain.
            pub fn get(&self, p: Point<N>) -> Option<&T> {
                self.layout
                    .domain
                    .contains(p)
                    .then(|| &self.data[self.layout.offset_of(p)])
            }

            /// Call `f` on every point and element, in row-major order (Titanium's
            /// `foreach`).
            pub fn foreach(&self, mut f: impl FnMut(Point<N>, &T)) {
                for p in self.layout.domain.iter() {
                    f(p, &self.data[self.layout.offset_of(p)]);
                }
            }

            /// A new grid holding a copy of the visible elements.
            pub fn to_grid(&self) -> Grid<T, N>
            where
                T: Clone,
            {
                Grid::from_fn(self.layout.domain, |p| {
                    self.data[self.layout.offset_of(p)].clone()
                })
            }
        }

        impl<T, const N: usize> Index<Point<N>> for $view<'_, T, N> {
            type Output = T;
            fn index(&self, p: Point<N>) -> &T {
                &self.data[self.layout.checked_offset(p)]
            }
        }
    };
}

view_methods!(GridView);
view_methods!(GridViewMut);

impl<T, const N: usize> IndexMut<Point<N>> for GridViewMut<'_, T, N> {
    fn index_mut(&mut self, p: Point<N>) -> &mut T {
        let at = self.layout.checked_offset(p);
        &mut self.data[at]
    }
}

impl<T, const N: usize> GridViewMut<'_, T, N> {
    /// A shorter-lived mutable view of the same elements (to take sub-views and keep this
    /// one).
    pub fn reborrow(&mut self) -> GridViewMut<'_, T, N> {
        GridViewMut {
            data: self.data,
            layout: self.layout,
        }
    }

    /// A read-only view of the same elements.
    pub fn as_view(&self) -> GridView<'_, T, N> {
        GridView {
            data: self.data,
            layout: self.layout,
        }
    }

    /// Call `f` on every point and element, mutably, in row-major order.
    pub fn foreach_mut(&mut self, mut f: impl FnMut(Point<N>, &mut T)) {
        for p in self.layout.domain.iter() {
            f(p, &mut self.data[self.layout.offset_of(p)]);
        }
    }

    /// Set every visible element to `value`.
    pub fn fill(&mut self, value: T)
    where
        T: Clone,
    {
        self.foreach_mut(|_, e| *e = value.clone());
    }

    /// Copy the elements of `src` at the points both domains share; returns how many. Runs
    /// that are contiguous in both move as one slice copy.
    pub fn copy_from(&mut self, src: &GridView<'_, T, N>) -> usize
    where
        T: Copy,
    {
        let common = self.layout.domain.intersect(&src.layout.domain);
        if common.is_empty() {
            return 0;
        }
        let run = common.extent(N - 1);
        let (dst_step, src_step) = (self.layout.run_step(&common), src.layout.run_step(&common));
        for start in row_starts(&common) {
            let (d, s) = (self.layout.offset_of(start), src.layout.offset_of(start));
            if dst_step == 1 && src_step == 1 {
                self.data[d..d + run].copy_from_slice(&src.data[s..s + run]);
            } else {
                for k in 0..run as isize {
                    self.data[(d as isize + k * dst_step) as usize] =
                        src.data[(s as isize + k * src_step) as usize];
                }
            }
        }
        common.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn label(p: Point<3>) -> i64 {
        1_000_000 * p[0] + 1000 * p[1] + p[2]
    }

    fn rect3() -> impl Strategy<Value = RectDomain<3>> {
        (
            proptest::array::uniform3(-4i64..4),
            proptest::array::uniform3(0i64..6),
            proptest::array::uniform3(1i64..3),
        )
            .prop_map(|(lo, ext, st)| {
                RectDomain::strided(Point(lo), Point(lo) + Point(ext), Point(st))
            })
    }

    proptest! {
        #[test]
        fn copy_moves_exactly_the_intersection(a in rect3(), b in rect3(), shift in proptest::array::uniform3(-3i64..3)) {
            let src = Grid::from_fn(a, label);
            let mut dst = Grid::filled(b, -1i64);
            let moved = src.view().translate(Point(shift));
            let n = dst.view_mut().copy_from(&moved);
            let common = b.intersect(&a.translate(Point(shift)));
            prop_assert_eq!(n, common.len());
            for p in b.iter() {
                let want = if common.contains(p) { label(p - Point(shift)) } else { -1 };
                prop_assert_eq!(dst[p], want, "at {}", p);
            }
        }

        #[test]
        fn views_index_the_same_storage(a in rect3(), r in rect3(), dim in 0usize..3) {
            let g = Grid::from_fn(a, label);
            let v = g.view().restrict(&r);
            prop_assert_eq!(v.domain(), a.intersect(&r));
            v.foreach(|p, &e| assert_eq!(e, label(p)));
            if !a.is_empty() {
                let at = a.lo()[dim] + a.stride()[dim] * (a.extent(dim) as i64 / 2);
                let s = g.view().slice::<2>(dim, at);
                prop_assert_eq!(s.domain(), a.slice::<2>(dim));
                s.foreach(|q, &e| {
                    let mut p = [0; 3];
                    let mut rest = q.0.iter();
                    for (k, c) in p.iter_mut().enumerate() {
                        *c = if k == dim { at } else { *rest.next().unwrap() };
                    }
                    assert_eq!(e, label(Point(p)));
                });
            }
        }
    }

    #[test]
    fn writes_through_a_view_land_in_the_grid() {
        let d = RectDomain::new(Point([0, 0]), Point([3, 3]));
        let mut g = Grid::filled(d, 0);
        let mut v = g.view_mut();
        v.reborrow().shrink(1).fill(7);
        v.reborrow().slice::<1>(0, 3).fill(9);
        assert_eq!(
            g.as_slice(),
            &[0, 0, 0, 0, 0, 7, 7, 0, 0, 7, 7, 0, 9, 9, 9, 9]
        );
    }

    #[test]
    fn outside_points_are_named() {
        let g = Grid::filled(RectDomain::new(Point([0, 0]), Point([1, 1])), 0u8);
        let r = std::panic::catch_unwind(|| g[Point([2, 0])]);
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(
            msg.contains("point [2, 0] is outside the grid's domain [[0, 0] : [1, 1]]"),
            "{msg}"
        );
        assert_eq!(g.view().get(Point([2, 0])), None);
    }
}
