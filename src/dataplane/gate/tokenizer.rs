//! The GGUF-embedded gpt2-style byte-level BPE tokenizer (tokens + merges), with the
//! pre-tokenizer the GGUF names in `tokenizer.ggml.pre`, split as llama.cpp splits it.
//! The argmax gate takes token ids directly; perplexity and the distributional gate need the
//! text's ids to be exactly llama.cpp's, or figures are not comparable with the peer's
//! (`tests/golden/tokens-*.txt` pin both fixtures' first 512 tokens of a text).
//!
//! Pre-tokenizers (the regexes are the Hugging Face tokenizers' own):
//! - `gpt2`: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - `smollm` (and starcoder-style): every digit isolated first, then `gpt2` within each piece
//! - `qwen2`: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - `llama3`: as `qwen2` with digits in runs of up to three, and whole pieces found in the
//!   vocabulary taken as they are (llama.cpp's `ignore_merges`)

use crate::dataplane::gguf::{Gguf, Value};
use std::collections::HashMap;

/// How a text is split into pieces before BPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    Gpt2,
    /// digits isolated, then gpt2
    DigitsGpt2,
    /// qwen2 (`max_digits` 1) and llama3 (`max_digits` 3)
    Qwen2 {
        max_digits: usize,
    },
}

impl PreTokenizer {
    /// The pre-tokenizer of a `tokenizer.ggml.pre` value (llama.cpp's names), None when unknown.
    pub fn from_name(pre: &str) -> Option<PreTokenizer> {
        Some(match pre {
            "default" | "gpt2" | "gpt-2" | "mpt" | "olmo" | "jais" | "roberta-bpe" | "jina-v1-en" | "jina-v2-code" => {
                PreTokenizer::Gpt2
            }
            "smollm" | "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => PreTokenizer::DigitsGpt2,
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "hunyuan" => PreTokenizer::Qwen2 { max_digits: 1 },
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => PreTokenizer::Qwen2 { max_digits: 3 },
            _ => return None,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("{0}: tokenizer.ggml.model is {1:?}; the gate tokenizes text with gpt2-style BPE only")]
    Model(String, String),
    #[error("{0}: tokenizer.ggml.{1} is missing")]
    Missing(String, &'static str),
    #[error(
        "{0}: tokenizer.ggml.pre = {1:?} is not a pre-tokenizer the gate knows (gpt2, smollm, qwen2, llama-bpe and their aliases)"
    )]
    Pre(String, String),
}

pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    /// merge rank by its GGUF text ("a b": two symbols, one space); the first of a repeated one
    ranks: HashMap<String, usize>,
    byte_char: [char; 256],
    /// each token's text, by id (byte-level: one char per byte)
    tokens: Vec<String>,
    pre: PreTokenizer,
    ignore_merges: bool,
    pub bos: Option<u32>,
    pub add_bos: bool,
}

fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        out[b as usize] = if printable {
            char::from_u32(b).expect("latin-1")
        } else {
            let c = char::from_u32(256 + n).expect("valid");
            n += 1;
            c
        };
    }
    out
}

impl Tokenizer {
    /// From a GGUF's embedded tokenizer; an error names what is missing or unsupported.
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer, TokenizerError> {
        let path = g.path.display().to_string();
        match g.get_str("tokenizer.ggml.model") {
            Some("gpt2") => {}
            other => return Err(TokenizerError::Model(path, other.unwrap_or("(none)").to_string())),
        }
        let Some(Value::Array(_, toks)) = g.get("tokenizer.ggml.tokens") else {
            return Err(TokenizerError::Missing(path, "tokens"));
        };
        let Some(Value::Array(_, merges)) = g.get("tokenizer.ggml.merges") else {
            return Err(TokenizerError::Missing(path, "merges"));
        };
        let pre_name = g.get_str("tokenizer.ggml.pre").unwrap_or("default");
        let pre = PreTokenizer::from_name(pre_name).ok_or_else(|| TokenizerError::Pre(path, pre_name.to_string()))?;
        let tokens: Vec<String> = toks.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect();
        let vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let mut ranks = HashMap::with_capacity(merges.len());
        for (i, m) in merges.iter().enumerate().filter_map(|(i, v)| Some((i, v.as_str()?))) {
            if m.contains(' ') {
                ranks.entry(m.to_string()).or_insert(i);
            }
        }
        let add_bos = matches!(g.get("tokenizer.ggml.add_bos_token"), Some(Value::Bool(1)));
        let bos = g.get_u64("tokenizer.ggml.bos_token_id").map(|v| v as u32);
        let ignore_merges = matches!(pre, PreTokenizer::Qwen2 { max_digits: 3 });
        Ok(Tokenizer { vocab, ranks, byte_char: byte_chars(), tokens, pre, ignore_merges, bos, add_bos })
    }

    /// The text of a run of ids (llama.cpp's detokenizer for byte-level BPE without special
    /// tokens): each token's chars mapped back to their bytes; invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let byte_of: HashMap<char, u8> = self.byte_char.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
        let bytes: Vec<u8> = ids
            .iter()
            .filter_map(|&i| self.tokens.get(i as usize))
            .flat_map(|t| t.chars().filter_map(|c| byte_of.get(&c).copied()))
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub fn pre(&self) -> PreTokenizer {
        self.pre
    }

    /// The text's token ids (no BOS; callers add it where the model wants one).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cache: HashMap<&str, Vec<u32>> = HashMap::new();
        for piece in pre_tokenize(self.pre, text) {
            let ids = cache.entry(piece).or_insert_with(|| self.bpe(piece));
            out.extend_from_slice(ids);
        }
        out
    }

    /// Byte-level BPE on one piece, as llama.cpp's `llm_tokenizer_bpe_session` runs it: the
    /// piece's symbols in a linked list, the candidate merges in a min-heap by (rank, position),
    /// a popped merge applied only while both its symbols still hold the text it was made from.
    /// O(n log n) in the piece's length (a 1 MB run of one letter is one piece).
    fn bpe(&self, piece: &str) -> Vec<u32> {
        let text: String = piece.bytes().map(|b| self.byte_char[b as usize]).collect();
        if self.ignore_merges {
            if let Some(&id) = self.vocab.get(&text) {
                return vec![id];
            }
        }
        // symbols: byte ranges of `text` (one per mapped char), linked left and right
        let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
        for (i, (at, c)) in text.char_indices().enumerate() {
            syms.push(Sym { start: at, len: c.len_utf8(), prev: i.checked_sub(1), next: Some(i + 1) });
        }
        if let Some(last) = syms.last_mut() {
            last.next = None;
        }
        let mut key = String::new();
        let mut heap = std::collections::BinaryHeap::new();
        let mut push = |heap: &mut std::collections::BinaryHeap<_>, syms: &[Sym], l: usize, r: usize| {
            let (a, b) = (&text[syms[l].range()], &text[syms[r].range()]);
            key.clear();
            key.push_str(a);
            key.push(' ');
            key.push_str(b);
            if let Some(&rank) = self.ranks.get(key.as_str()) {
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
            syms[l].len += syms[r].len;
            syms[r].len = 0;
            syms[l].next = syms[r].next;
            if let Some(n) = syms[r].next {
                syms[n].prev = Some(l);
            }
            if let Some(p) = syms[l].prev {
                push(&mut heap, &syms, p, l);
            }
            if let Some(n) = syms[l].next {
                push(&mut heap, &syms, l, n);
            }
        }
        let mut out = Vec::with_capacity(syms.len());
        let mut at = (!syms.is_empty()).then_some(0);
        while let Some(i) = at {
            let s = &text[syms[i].range()];
            if let Some(&id) = self.vocab.get(s) {
                out.push(id);
            } else {
                // a merge result missing from the vocabulary: its bytes one by one
                let mut buf = [0u8; 4];
                out.extend(s.chars().filter_map(|ch| self.vocab.get(&*ch.encode_utf8(&mut buf)).copied()));
            }
            at = syms[i].next;
        }
        out
    }
}

/// One symbol of a piece under BPE: `len` bytes of the mapped text from `start` (0 once merged
/// into its left neighbour).
struct Sym {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Sym {
    fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// `\p{L}`: a letter (Rust's Alphabetic less the letter-like numbers).
fn is_letter(c: char) -> bool {
    c.is_alphabetic() && !c.is_numeric()
}

/// `\p{N}`
fn is_number(c: char) -> bool {
    c.is_numeric()
}

fn is_crlf(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// `[^\s\p{L}\p{N}]`
fn is_other(c: char) -> bool {
    !c.is_whitespace() && !is_letter(c) && !is_number(c)
}

/// Split `text` into the pieces BPE runs on.
pub fn pre_tokenize(pre: PreTokenizer, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    match pre {
        PreTokenizer::Gpt2 => split_gpt2(text, &mut out),
        PreTokenizer::DigitsGpt2 => {
            // `\p{N}` first: each digit a piece, the stretches between them split by gpt2
            let mut start = 0;
            for (i, c) in text.char_indices() {
                if is_number(c) {
                    split_gpt2(&text[start..i], &mut out);
                    out.push(&text[i..i + c.len_utf8()]);
                    start = i + c.len_utf8();
                }
            }
            split_gpt2(&text[start..], &mut out);
        }
        PreTokenizer::Qwen2 { max_digits } => split_qwen2(text, max_digits, &mut out),
    }
    out
}

/// The length in chars of a whitespace run starting at `i`.
fn ws_run(cs: &[char], i: usize) -> usize {
    cs[i..].iter().take_while(|c| c.is_whitespace()).count()
}

/// Pieces as (start, end) char indices → string slices.
struct Pieces<'t, 'o> {
    text: &'t str,
    at: Vec<usize>,
    out: &'o mut Vec<&'t str>,
}

impl<'t> Pieces<'t, '_> {
    fn new<'o>(text: &'t str, out: &'o mut Vec<&'t str>) -> (Pieces<'t, 'o>, Vec<char>) {
        let mut at: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
        at.push(text.len());
        (Pieces { text, at, out }, text.chars().collect())
    }
    fn push(&mut self, from: usize, to: usize) {
        if to > from {
            self.out.push(&self.text[self.at[from]..self.at[to]]);
        }
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d` at `i` (case-insensitive when asked): the match's length.
fn contraction(cs: &[char], i: usize, fold: bool) -> Option<usize> {
    if cs[i] != '\'' {
        return None;
    }
    let low = |k: usize| cs.get(k).map(|&c| if fold { c.to_ascii_lowercase() } else { c });
    match (low(i + 1), low(i + 2)) {
        (Some('s' | 't' | 'm' | 'd'), _) => Some(2),
        (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l')) => Some(3),
        _ => None,
    }
}

/// The whitespace alternatives shared by both regexes: `\s+(?!\S)|\s+` on a run of `n` chars
/// starting at `i` (a run followed by a non-space leaves its last char for the next piece).
fn ws_end(cs: &[char], i: usize, n: usize) -> usize {
    if n > 1 && i + n < cs.len() {
        i + n - 1
    } else {
        i + n
    }
}

fn split_gpt2<'t>(text: &'t str, out: &mut Vec<&'t str>) {
    let (mut p, cs) = Pieces::new(text, out);
    let mut i = 0;
    while i < cs.len() {
        if let Some(l) = contraction(&cs, i, false) {
            p.push(i, i + l);
            i += l;
            continue;
        }
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        let j = if cs[i] == ' ' && i + 1 < cs.len() { i + 1 } else { i };
        let class: Option<fn(char) -> bool> = if is_letter(cs[j]) {
            Some(is_letter)
        } else if is_number(cs[j]) {
            Some(is_number)
        } else if is_other(cs[j]) {
            Some(is_other)
        } else {
            None
        };
        if let Some(f) = class {
            let mut k = j;
            while k < cs.len() && f(cs[k]) {
                k += 1;
            }
            p.push(i, k);
            i = k;
            continue;
        }
        let end = ws_end(&cs, i, ws_run(&cs, i).max(1));
        p.push(i, end);
        i = end;
    }
}

fn split_qwen2<'t>(text: &'t str, max_digits: usize, out: &mut Vec<&'t str>) {
    let (mut p, cs) = Pieces::new(text, out);
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if let Some(l) = contraction(&cs, i, true) {
            p.push(i, i + l);
            i += l;
            continue;
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if !is_crlf(c) && !is_number(c) && (is_letter(c) || cs.get(i + 1).is_some_and(|&n| is_letter(n))) {
            let mut k = i + 1;
            while k < cs.len() && is_letter(cs[k]) {
                k += 1;
            }
            p.push(i, k);
            i = k;
            continue;
        }
        // `\p{N}{1,max}`
        if is_number(c) {
            let mut k = i + 1;
            while k < cs.len() && k - i < max_digits && is_number(cs[k]) {
                k += 1;
            }
            p.push(i, k);
            i = k;
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        let j = if c == ' ' && i + 1 < cs.len() { i + 1 } else { i };
        if is_other(cs[j]) {
            let mut k = j;
            while k < cs.len() && is_other(cs[k]) {
                k += 1;
            }
            while k < cs.len() && is_crlf(cs[k]) {
                k += 1;
            }
            p.push(i, k);
            i = k;
            continue;
        }
        let n = ws_run(&cs, i).max(1);
        // `\s*[\r\n]+`: up to the run's last line break
        let end = match (i..i + n).rev().find(|&k| is_crlf(cs[k])) {
            Some(k) => k + 1,
            None => ws_end(&cs, i, n),
        };
        p.push(i, end);
        i = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: PreTokenizer, s: &str) -> Vec<&str> {
        pre_tokenize(pre, s)
    }

    #[test]
    fn gpt2_splits_like_its_regex() {
        let g = PreTokenizer::Gpt2;
        assert_eq!(split(g, "The capital of France is"), vec!["The", " capital", " of", " France", " is"]);
        assert_eq!(split(g, "it's 2024!  Ok"), vec!["it", "'s", " 2024", "!", " ", " Ok"]);
        // a run of breaks before a word leaves its last char to the next piece
        assert_eq!(split(g, "a\n\nb"), vec!["a", "\n", "\n", "b"]);
        assert_eq!(split(g, "a\n\n b  "), vec!["a", "\n\n", " b", "  "]);
    }

    #[test]
    fn smollm_isolates_every_digit_first() {
        let s = PreTokenizer::DigitsGpt2;
        assert_eq!(split(s, "it's 2024!  Ok"), vec!["it", "'s", " ", "2", "0", "2", "4", "!", " ", " Ok"]);
        assert_eq!(split(s, "v1.2"), vec!["v", "1", ".", "2"]);
    }

    #[test]
    fn qwen2_groups_breaks_and_takes_a_leading_mark_into_words() {
        let q = PreTokenizer::Qwen2 { max_digits: 1 };
        assert_eq!(split(q, "a\n\nb"), vec!["a", "\n\n", "b"]);
        assert_eq!(split(q, "(the \"Work\")."), vec!["(the", " \"", "Work", "\")."]);
        assert_eq!(split(q, "It'S 2024;\n  x"), vec!["It", "'S", " ", "2", "0", "2", "4", ";\n", " ", " x"]);
        let l3 = PreTokenizer::Qwen2 { max_digits: 3 };
        assert_eq!(split(l3, "12345"), vec!["123", "45"]);
    }

    #[test]
    fn pieces_cover_the_text_exactly() {
        let text = "Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>\n\n\t  Everyone—é ½ 'LL\r\n";
        for pre in [PreTokenizer::Gpt2, PreTokenizer::DigitsGpt2, PreTokenizer::Qwen2 { max_digits: 1 }] {
            let p = split(pre, text);
            assert_eq!(p.concat(), text, "{pre:?}");
            assert!(p.iter().all(|s| !s.is_empty()), "{pre:?}");
        }
    }

    #[test]
    fn pre_tokenizer_names_are_llama_cpps() {
        assert_eq!(PreTokenizer::from_name("smollm"), Some(PreTokenizer::DigitsGpt2));
        assert_eq!(PreTokenizer::from_name("qwen2"), Some(PreTokenizer::Qwen2 { max_digits: 1 }));
        assert_eq!(PreTokenizer::from_name("llama-bpe"), Some(PreTokenizer::Qwen2 { max_digits: 3 }));
        assert_eq!(PreTokenizer::from_name("tekken"), None);
    }
}
