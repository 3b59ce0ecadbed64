//! The data plane: everything that reads, writes, encodes or scores a model file. It knows
//! nothing of the campaign, its queue or its backends.
//!
//! - [`gguf`], [`imatrix`]: knot / GGUF I/O and importance matrices
//! - [`codec`]: the KAIJU1 Leech-lattice codec
//! - [`encode`]: the encoder core (`--encode`), with [`progress`] for its terminal
//! - [`gate`]: the native forward pass and the gate over it
//! - [`convert`], [`inspect`]: the local feeder's f16 step and file summaries
//! - [`linalg`]: GEMM, second moments and their factor (faer) for the forward pass and feedback
//! - [`heap`]: the allocator's policy for the batch jobs' large buffers
//! - [`clock`]: wall and process CPU time of a stretch of work, for the telemetry

pub mod clock;
pub mod codec;
pub mod convert;
pub mod encode;
pub mod gate;
pub mod gguf;
pub mod heap;
pub mod imatrix;
pub mod inspect;
pub mod linalg;
pub mod progress;
