//! The model layer: what PGAS programs are written in, built on the core.
//!
//! - [`team`]: teams (world, split, process grids) and collective operations with several
//!   algorithms each;
//! - [`ops`]: reduction operations and the types they apply to;
//! - [`tuning`]: tuning tables (measured algorithm choices) from `tessera tune`;
//! - [`domain`]: Titanium's domain calculus (points, rectangular and general domains);
//! - [`grid`]: N-d arrays over rectangular domains, with views that share storage;
//! - [`global_grid`]: grids in the global address space and one-sided copies of
//!   intersections between them;
//! - [`halo`]: block-decomposed periodic grids with ghost cells and their exchange;
//! - [`shared_array`]: UPC shared arrays with block-cyclic distributions;
//! - [`phased`]: collective arrays borrowed as plain slices by phase (own, shared,
//!   exchange);
//! - [`mailbox`]: fixed, symmetric pairs of ranks swapping messages, each lent out as a
//!   slice of the receiver's inbox;
//! - `channel`: point-to-point team messages from signalling puts (internal);
//! - `schedule`: nonblocking mailbox collectives as schedules of rounds (internal);
//! - `signature`: the call signature every team message carries, so that members in
//!   different collective calls are caught at the first message (internal).
//!
//! This layer must never reach around the core to the conduit: everything it does works
//! on any conduit.

mod channel;
pub mod domain;
pub mod global_grid;
pub mod grid;
pub mod halo;
pub mod mailbox;
pub mod ops;
pub mod phased;
mod schedule;
pub mod shared_array;
mod signature;
pub mod team;
pub mod tuning;
