//! The GGUF-embedded gpt2-style byte-level BPE tokenizer (tokens + merges), with a
//! GPT-2/SmolLM-style pre-tokenizer (contractions, letters, single digits, punctuation,
//! whitespace). Used for perplexity; the argmax gate takes token ids directly.

use crate::gguf::{Gguf, Value};
use std::collections::HashMap;

pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    ranks: HashMap<(String, String), usize>,
    byte_char: [char; 256],
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
    /// From a GGUF with `tokenizer.ggml.model = "gpt2"`; None when there is no such tokenizer.
    pub fn from_gguf(g: &Gguf) -> Option<Tokenizer> {
        if g.get_str("tokenizer.ggml.model") != Some("gpt2") {
            return None;
        }
        let Some(Value::Array(_, toks)) = g.get("tokenizer.ggml.tokens") else {
            return None;
        };
        let Some(Value::Array(_, merges)) = g.get("tokenizer.ggml.merges") else {
            return None;
        };
        let vocab = toks.iter().enumerate().filter_map(|(i, v)| Some((v.as_str()?.to_string(), i as u32))).collect();
        let ranks = merges
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let (a, b) = v.as_str()?.split_once(' ')?;
                Some(((a.to_string(), b.to_string()), i))
            })
            .collect();
        let add_bos = matches!(g.get("tokenizer.ggml.add_bos_token"), Some(Value::Bool(1)));
        let bos = g.get_u64("tokenizer.ggml.bos_token_id").map(|v| v as u32);
        Some(Tokenizer { vocab, ranks, byte_char: byte_chars(), bos, add_bos })
    }

    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for piece in pre_tokenize(text) {
            let mut syms: Vec<String> = piece.bytes().map(|b| self.byte_char[b as usize].to_string()).collect();
            loop {
                let mut best: Option<(usize, usize)> = None;
                for i in 0..syms.len().saturating_sub(1) {
                    if let Some(&r) = self.ranks.get(&(syms[i].clone(), syms[i + 1].clone())) {
                        if best.is_none_or(|(br, _)| r < br) {
                            best = Some((r, i));
                        }
                    }
                }
                let Some((_, i)) = best else { break };
                let merged = format!("{}{}", syms[i], syms[i + 1]);
                syms.splice(i..i + 2, [merged]);
            }
            for s in syms {
                if let Some(&id) = self.vocab.get(&s) {
                    out.push(id);
                } else {
                    // every byte symbol is in a byte-level vocabulary; skip anything else
                    for ch in s.chars() {
                        if let Some(&id) = self.vocab.get(&ch.to_string()) {
                            out.push(id);
                        }
                    }
                }
            }
        }
        out
    }
}

/// Split like `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| \p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
/// with digits one at a time.
pub fn pre_tokenize(text: &str) -> Vec<&str> {
    let cs: Vec<(usize, char)> = text.char_indices().collect();
    let end_of = |k: usize| if k < cs.len() { cs[k].0 } else { text.len() };
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i].1;
        if c == '\'' {
            let rest = &text[cs[i].0..];
            if let Some(l) = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"].iter().find(|p| rest.starts_with(**p)) {
                out.push(&rest[..l.len()]);
                i += l.chars().count();
                continue;
            }
        }
        let start = i;
        let mut j = i;
        let lead_space = c == ' ' && i + 1 < cs.len() && !cs[i + 1].1.is_whitespace();
        if lead_space {
            j += 1;
        }
        let k = cs[j].1;
        if k.is_alphabetic() && (lead_space || j == i) {
            while j < cs.len() && cs[j].1.is_alphabetic() {
                j += 1;
            }
        } else if k.is_numeric() && (lead_space || j == i) {
            j += 1;
        } else if !k.is_whitespace() {
            while j < cs.len() && !cs[j].1.is_whitespace() && !cs[j].1.is_alphabetic() && !cs[j].1.is_numeric() {
                j += 1;
            }
        } else {
            // whitespace run; leave the last space for the next word when one follows
            while j < cs.len() && cs[j].1.is_whitespace() {
                j += 1;
            }
            if j < cs.len() && j - start > 1 && cs[j - 1].1 == ' ' {
                j -= 1;
            }
        }
        out.push(&text[cs[start].0..end_of(j)]);
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_tokenizer_splits_like_gpt2() {
        assert_eq!(pre_tokenize("The capital of France is"), vec!["The", " capital", " of", " France", " is"]);
        assert_eq!(pre_tokenize("it's 2024!  Ok"), vec!["it", "'s", " 2", "0", "2", "4", "!", " ", " Ok"]);
        assert_eq!(pre_tokenize("a\n\nb"), vec!["a", "\n\n", "b"]);
    }
}
