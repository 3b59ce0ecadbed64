//! The control plane: the campaign over a fleet of models and the machinery that drives it.
//!
//! - [`campaign`]: the domain (queue, qspecs, inventory, markers, the pure tick, zoo, cost)
//! - [`backend`]: object stores and build services, local and cloud
//! - [`watcher`]: snapshot → tick → the one executor, under the campaign's lock
//! - [`one_model`]: `check` and `submit` of a single model, on the watcher's executor
//! - [`rollout`]: the append-only record of everything that happened (`state/rollout.jsonl`)
//! - [`tui`]: the control room

pub mod backend;
pub mod campaign;
pub mod one_model;
pub mod rollout;
pub mod tui;
pub mod watcher;
