//! The campaign domain: the queue, qspecs, the prerequisite probe, markers, the pure tick
//! decision, model states, gate parameters and the cost model.

pub mod cost;
pub mod gate_params;
pub mod inventory;
pub mod markers;
pub mod qspec;
pub mod queue;
pub mod state;
pub mod tick;
pub mod zoo;
