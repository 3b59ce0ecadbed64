//! The campaign domain: the queue, qspecs, prerequisites, planning and cost.

pub mod qspec;
