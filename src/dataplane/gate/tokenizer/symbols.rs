//! The linked list of symbols both merge algorithms (`bpe`, `spm`) run over, as llama.cpp's
//! sessions keep it: one symbol per character at first; a merge joins a symbol with its right
//! neighbour, which is left empty and unlinked.

/// One symbol: `len` bytes of the text from `start` (0 once merged into its left neighbour).
pub(super) struct Sym {
    pub start: usize,
    pub len: usize,
    pub prev: Option<usize>,
    pub next: Option<usize>,
}

impl Sym {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// One symbol per character of `text`, linked left to right.
pub(super) fn chars(text: &str) -> Vec<Sym> {
    let mut syms: Vec<Sym> = text
        .char_indices()
        .enumerate()
        .map(|(i, (at, c))| Sym { start: at, len: c.len_utf8(), prev: i.checked_sub(1), next: Some(i + 1) })
        .collect();
    if let Some(last) = syms.last_mut() {
        last.next = None;
    }
    syms
}

/// Merge symbol `r` into its left neighbour `l`.
pub(super) fn join(syms: &mut [Sym], l: usize, r: usize) {
    syms[l].len += syms[r].len;
    syms[r].len = 0;
    syms[l].next = syms[r].next;
    if let Some(n) = syms[r].next {
        syms[n].prev = Some(l);
    }
}

/// The symbols still standing, left to right, as byte ranges of the text.
pub(super) fn live(syms: &[Sym]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    std::iter::successors((!syms.is_empty()).then_some(0), |&i| syms[i].next).map(|i| syms[i].range())
}
