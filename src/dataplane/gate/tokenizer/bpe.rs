//! BPE merges on one piece, as llama.cpp's `llm_tokenizer_bpe_session` runs them: the piece's
//! symbols (one per char) in a linked list, the candidate merges in a min-heap by (rank,
//! position), a popped merge applied only while both its symbols still hold the text it was
//! made from. O(n log n) in the piece's length (a 1 MB run of one letter is one piece).

use super::symbols::{self, Sym};
use std::collections::{BinaryHeap, HashMap};

/// The merged symbols of `text` (a piece, byte-level mapped or raw UTF-8), left to right, as
/// byte ranges of it. `ranks` holds each merge by its GGUF text ("a b": two symbols, one space).
pub fn merge(text: &str, ranks: &HashMap<String, usize>) -> Vec<std::ops::Range<usize>> {
    let mut syms = symbols::chars(text);
    let mut key = String::new();
    let mut heap = BinaryHeap::new();
    let mut push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: usize, r: usize| {
        let (a, b) = (&text[syms[l].range()], &text[syms[r].range()]);
        key.clear();
        key.push_str(a);
        key.push(' ');
        key.push_str(b);
        if let Some(&rank) = ranks.get(key.as_str()) {
            heap.push(std::cmp::Reverse((rank, l, r, a.len() + b.len())));
        }
    };
    for i in 1..syms.len() {
        push(&mut heap, &syms, i - 1, i);
    }
    while let Some(std::cmp::Reverse((_, l, r, len))) = heap.pop() {
        // stale: one side was merged away or grew since this candidate was made
        if syms[l].len == 0 || syms[r].len == 0 || syms[l].next != Some(r) || syms[l].len + syms[r].len != len {
            continue;
        }
        symbols::join(&mut syms, l, r);
        if let Some(p) = syms[l].prev {
            push(&mut heap, &syms, p, l);
        }
        if let Some(n) = syms[l].next {
            push(&mut heap, &syms, l, n);
        }
    }
    symbols::live(&syms).collect()
}
