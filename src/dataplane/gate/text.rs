//! A scoring text as token ids, chunked the way llama.cpp's `llama-perplexity` chunks it, so
//! our perplexity and KL figures are computed over the very tokens the peer's are.
//!
//! The whole text is tokenized once (BOS first when the model adds one); chunk `c` is
//! tokens `c·ctx .. (c+1)·ctx`, its first token replaced by BOS when the model adds one; the
//! last partial chunk is dropped. Within a chunk the second half is scored: the logits at
//! positions `ctx/2 .. ctx−2` predict tokens `ctx/2+1 .. ctx−1`.

use super::tokenizer::Tokenizer;
use super::GateError;
use std::path::{Path, PathBuf};

/// A tokenized text.
#[derive(Debug, Clone)]
pub struct Text {
    pub path: PathBuf,
    pub ids: Vec<u32>,
    /// Replaces each chunk's first token (when the model adds a BOS).
    pub bos: Option<u32>,
}

impl Text {
    /// Read and tokenize `path` with `tok`; empty, non-UTF-8 and unreadable files are errors
    /// that name the file. Any other text is tokenized as llama.cpp tokenizes it, whitespace
    /// alone included (a text too short for the gate is refused by [`Text::chunks`]).
    pub fn load(tok: &Tokenizer, path: &Path) -> Result<Text, GateError> {
        let bytes = std::fs::read(path).map_err(|source| GateError::Io { path: path.into(), source })?;
        let body = String::from_utf8(bytes)
            .map_err(|e| GateError::TextNotUtf8 { path: path.into(), offset: e.utf8_error().valid_up_to() })?;
        if body.is_empty() {
            return Err(GateError::EmptyText(path.into()));
        }
        let bos = if tok.add_bos { tok.bos } else { None };
        let mut ids = Vec::with_capacity(body.len() / 3);
        ids.extend(bos);
        ids.extend(tok.encode(&body));
        Ok(Text { path: path.into(), ids, bos })
    }

    /// How many whole chunks of `ctx` tokens, at most `max` (0: all); an error naming the
    /// file when not even one fits.
    pub fn chunks(&self, ctx: usize, max: usize) -> Result<usize, GateError> {
        if ctx < 4 {
            return Err(GateError::Ctx(ctx));
        }
        let n = self.ids.len() / ctx;
        if n == 0 {
            return Err(GateError::ShortText { path: self.path.clone(), ctx, tokens: self.ids.len() });
        }
        Ok(if max == 0 { n } else { n.min(max) })
    }

    /// Chunk `c` of `ctx` tokens, its first token BOS where the model adds one.
    pub fn chunk(&self, c: usize, ctx: usize) -> Vec<u32> {
        let mut v = self.ids[c * ctx..(c + 1) * ctx].to_vec();
        if let Some(b) = self.bos {
            v[0] = b;
        }
        v
    }
}

/// The first scored position of a chunk of `ctx` tokens.
pub fn first_scored(ctx: usize) -> usize {
    ctx / 2
}
