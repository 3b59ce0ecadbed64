//! kaiju-tui: the control room and KAIJU1 encoder of a model-zoo quantization campaign.
//!
//! Modules by responsibility (see docs/ARCHITECTURE.md):
//! - [`gguf`], [`imatrix`]: knot / GGUF I/O and importance matrices
//! - [`codec`]: the KAIJU1 Leech-lattice codec
//! - [`encode`], [`convert`], [`inspect`]: the encoder core and file tools

// Numeric kernels (lattice decoding, dequantization, the forward pass) index fixed-size
// arrays by position on purpose.
#![allow(clippy::needless_range_loop)]

pub mod backend;
pub mod campaign;
pub mod cli;
pub mod codec;
pub mod commands;
pub mod config;
pub mod convert;
pub mod encode;
pub mod exit;
pub mod fsutil;
pub mod gate;
pub mod gguf;
pub mod imatrix;
pub mod inspect;
pub mod progress;
pub mod tui;
pub mod watcher;
