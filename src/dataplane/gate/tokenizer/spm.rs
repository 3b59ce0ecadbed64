//! SentencePiece BPE (`tokenizer.ggml.model = "llama"`) as llama.cpp's
//! `llm_tokenizer_spm_session` runs it: the text (spaces already `▁`) split into UTF-8
//! characters, then the adjacent pair whose concatenation is the best-scoring vocabulary token
//! merged first (ties: the leftmost), until no pair is a token. Every merge makes a token, so a
//! final symbol that is not one is a single character outside the vocabulary: it goes out as its
//! bytes (`<0xXX>`; llama.cpp's re-split along earlier merges never applies to one).

use super::symbols::{self, Sym};
use std::collections::{BinaryHeap, HashMap};

/// A candidate merge: higher score first, then the leftmost.
#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// What the SPM session needs of the vocabulary.
pub struct Vocab<'v> {
    pub ids: &'v HashMap<String, u32>,
    pub scores: &'v [f32],
    /// each byte's token (`<0xXX>`, else the byte itself as text)
    pub byte_tokens: &'v [Option<u32>; 256],
}

/// Append the ids of `text` (whitespace already escaped) to `out`.
pub fn tokenize(text: &str, v: &Vocab, out: &mut Vec<u32>) {
    let mut syms = symbols::chars(text);
    let mut heap = BinaryHeap::new();
    let try_add = |heap: &mut BinaryHeap<Bigram>, syms: &[Sym], l: Option<usize>, r: Option<usize>| {
        let (Some(l), Some(r)) = (l, r) else { return };
        let s = &text[syms[l].start..syms[r].start + syms[r].len];
        let Some(&id) = v.ids.get(s) else { return };
        let Some(&score) = v.scores.get(id as usize) else { return };
        heap.push(Bigram { score, left: l, right: r, size: s.len() });
    };
    for i in 1..syms.len() {
        try_add(&mut heap, &syms, Some(i - 1), Some(i));
    }
    while let Some(b) = heap.pop() {
        let (l, r) = (b.left, b.right);
        if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != b.size {
            continue;
        }
        symbols::join(&mut syms, l, r);
        try_add(&mut heap, &syms, syms[l].prev, Some(l));
        try_add(&mut heap, &syms, Some(l), syms[l].next);
    }
    for r in symbols::live(&syms) {
        let s = &text[r];
        match v.ids.get(s) {
            Some(&id) => out.push(id),
            None => out.extend(s.bytes().filter_map(|b| v.byte_tokens[b as usize])),
        }
    }
}
