//! The campaign domain: the queue, the prerequisite probe (with each model's qspec classified
//! by [`crate::dataplane::gate::qspec`]), markers, the pure tick
//! decision, model states, gate parameters and the cost model.

pub mod cost;
pub mod gate_params;
pub mod inventory;
pub mod ladder;
pub mod markers;
pub mod queue;
pub mod state;
pub mod tick;
pub mod timeline;
pub mod zoo;
