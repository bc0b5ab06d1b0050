//! The model layer: what PGAS programs are written in, built on the core.
//!
//! - [`team`]: teams (world, split, process grids) and collective operations with several
//!   algorithms each, in a folder of its own: the algorithm registry, data movement,
//!   reductions, single-address forms, nonblocking schedules, checked mode, and beside
//!   them the channel (team messages from signalling puts), the schedules' rounds, the
//!   call signatures and [`tuning`] (tables from `tessera tune`, re-exported here);
//! - [`ops`]: reduction operations and the types they apply to;
//! - [`domain`]: Titanium's domain calculus (points, rectangular and general domains);
//! - [`grid`]: N-d arrays over rectangular domains, with views that share storage;
//! - [`global_grid`]: grids in the global address space and one-sided copies of
//!   intersections between them;
//! - [`halo`]: block-decomposed periodic grids with ghost cells and their exchange;
//! - [`shared_array`]: UPC shared arrays with block-cyclic distributions;
//! - [`dense`]: dense matrices 2-D block-cyclic over a process grid (ScaLAPACK's layout);
//! - [`phased`]: collective arrays borrowed as plain slices by phase (own, shared,
//!   exchange);
//! - [`mailbox`]: fixed, symmetric pairs of ranks swapping messages, each lent out as a
//!   slice of the receiver's inbox;
//!
//! This layer must never reach around the core to the conduit: everything it does works
//! on any conduit.

pub mod dense;
pub mod domain;
pub mod global_grid;
pub mod grid;
pub mod halo;
pub mod mailbox;
pub mod ops;
pub mod phased;
pub mod shared_array;
pub mod team;
pub use team::tuning;
