//! The embedded local default: the two "buckets" as directories ([`store`]) and builds as
//! local child processes ([`builds`]) that run the build's steps ([`pipeline`]) in a build
//! directory laid out as [`build_dir`] says.

pub mod build_dir;
pub mod builds;
pub mod pipeline;
pub mod store;
