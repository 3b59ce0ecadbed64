//! Knot I/O: our own GGUF v3 reader (memory-mapped) and streaming writer, the ggml type
//! table and dequantization of the standard types. See docs/ARCHITECTURE.md and
//! shared design notes on formats for the byte-level facts.

pub mod dequant;
pub mod reader;
pub mod types;
pub mod value;
pub mod writer;

pub use reader::{Gguf, TensorInfo};
pub use types::TypeId;
pub use value::Value;
pub use writer::{GgufWriter, TensorPlan};

use std::path::PathBuf;

/// Errors of the knot I/O layer. Every variant names the file and, for parse errors, the
/// byte offset and the field that was being read.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: at byte {offset}: {field}: {msg}")]
    Malformed { path: PathBuf, offset: u64, field: String, msg: String },
    #[error("{path}: tensor {tensor}: {msg}")]
    Tensor { path: PathBuf, tensor: String, msg: String },
}

pub type Result<T> = std::result::Result<T, GgufError>;

/// The first four bytes of every GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// Default alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

pub fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}
