//! Storage and build backends behind traits ([`store::ObjectStore`], [`builds::BuildService`]).
//! The embedded local default ([`local`]) keeps both "buckets" as directories and runs builds
//! as local child processes; the cloud backends ([`cloud`]: GCS, R2, Cloud Build) implement the
//! same traits.

pub mod builds;
pub mod cloud;
pub mod local;
pub mod store;
