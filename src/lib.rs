pub mod codec;
pub mod fsutil;
pub mod gguf;
pub mod imatrix;
