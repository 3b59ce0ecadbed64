//! The GGUF-embedded tokenizer, giving llama.cpp's ids for a text (`add_special` and
//! `parse_special` false, as `llama-tokenize --no-bos` and `llama-perplexity`'s scoring run it).
//! The argmax gate takes token ids directly; perplexity and the distributional gate need the
//! text's ids to be exactly llama.cpp's, or figures are not comparable with the peer's.
//! llama.cpp's own vocabulary suites check it (`tests/tokenizer_vocab.rs`), and goldens pin
//! both fixtures on long texts (`tests/tokenizer_golden.rs`).
//!
//! The models, by `tokenizer.ggml.model`:
//! - `gpt2`: byte-level BPE (each byte a printable char), after the pre-tokenizer that
//!   `tokenizer.ggml.pre` names ([`pre`]); llama3-style pre-tokenizers take a piece that is a
//!   whole token as it is (llama.cpp's `ignore_merges`).
//! - `llama`: SentencePiece (`spm`): spaces as `▁`, a space put in front of the text when
//!   `tokenizer.ggml.add_space_prefix` says so (the default), byte fallback `<0xXX>`.
//! - `gemma4`: BPE over raw UTF-8 with spaces as `▁`, split at runs of newlines only (a run
//!   that is a token taken whole), byte fallback `<0xXX>`.
//!
//! Before any of them, the vocabulary's user-defined tokens (token type 4) that appear in the
//! text are cut out as themselves, longest first, as llama.cpp's `tokenizer_st_partition`
//! does even when special tokens are not parsed (e.g. mpt's runs of spaces).

mod bpe;
pub mod pre;
mod spm;
mod symbols;

use crate::dataplane::gguf::{Gguf, Value};
pub use pre::PreTokenizer;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error(
        "{0}: tokenizer.ggml.model is {1:?}; the gate tokenizes text for gpt2 (byte-level BPE), llama \
         (SentencePiece) and gemma4 models"
    )]
    Model(String, String),
    #[error("{0}: tokenizer.ggml.{1} is missing")]
    Missing(String, &'static str),
    #[error("{0}: tokenizer.ggml.pre = {1:?} is not a pre-tokenizer the gate knows ({known})", known = PreTokenizer::KNOWN)]
    Pre(String, String),
    #[error("{0}: tokenizer.ggml.{1}: {2}")]
    Malformed(String, &'static str, String),
}

/// Which algorithm turns a piece into ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// merges over the pieces; `byte_level`: the gpt2 byte-to-char mapping (else raw UTF-8
    /// with `▁` for spaces and `<0xXX>` byte tokens, gemma4)
    Bpe { byte_level: bool },
    /// SentencePiece
    Spm,
}

/// A token cut out of the text before the tokenizer runs (a user-defined token).
struct Special {
    text: String,
    id: u32,
    /// whitespace after it is dropped (phi-3's tokens)
    rstrip: bool,
}

pub struct Tokenizer {
    kind: Kind,
    vocab: HashMap<String, u32>,
    /// each token's text, by id
    tokens: Vec<String>,
    /// SentencePiece scores, by id
    scores: Vec<f32>,
    /// merge rank by its GGUF text ("a b": two symbols, one space); the first of a repeated one
    ranks: HashMap<String, usize>,
    byte_char: [char; 256],
    /// each byte's token where the model falls back to bytes
    byte_tokens: [Option<u32>; 256],
    pre: PreTokenizer,
    ignore_merges: bool,
    add_space_prefix: bool,
    /// longest first
    specials: Vec<Special>,
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

/// Token texts llama.cpp marks as control tokens whatever their type in the file (its EOG,
/// EOT and FIM detection): never cut out of a text when special tokens are not parsed.
const CONTROL_LOOKING: [&str; 45] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "<|fim_repo|>",
];

/// GGUF token types
const USER_DEFINED: u64 = 4;

impl Tokenizer {
    /// From a GGUF's embedded tokenizer; an error names what is missing or unsupported.
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer, TokenizerError> {
        let path = g.path.display().to_string();
        let model = g.get_str("tokenizer.ggml.model").unwrap_or("(none)");
        let kind = match model {
            "gpt2" => Kind::Bpe { byte_level: true },
            "gemma4" => Kind::Bpe { byte_level: false },
            "llama" => Kind::Spm,
            other => return Err(TokenizerError::Model(path, other.to_string())),
        };
        let Some(Value::Array(_, toks)) = g.get("tokenizer.ggml.tokens") else {
            return Err(TokenizerError::Missing(path, "tokens"));
        };
        let malformed = |field: &'static str, msg: String| TokenizerError::Malformed(path.clone(), field, msg);
        if toks.is_empty() {
            return Err(malformed("tokens", "the array is empty; expected the vocabulary's tokens".into()));
        }
        if toks.len() > u32::MAX as usize {
            return Err(malformed("tokens", format!("{} tokens; expected at most {}", toks.len(), u32::MAX)));
        }
        let tokens: Vec<String> = toks
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| malformed("tokens", format!("token {i} is not a string; expected one per token")))
            })
            .collect::<Result<_, _>>()?;
        let mut ranks = HashMap::new();
        let mut scores = Vec::new();
        let pre = match kind {
            Kind::Bpe { .. } => {
                let Some(Value::Array(_, merges)) = g.get("tokenizer.ggml.merges") else {
                    return Err(TokenizerError::Missing(path, "merges"));
                };
                ranks.reserve(merges.len());
                for (i, m) in merges.iter().enumerate().filter_map(|(i, v)| Some((i, v.as_str()?))) {
                    if m.contains(' ') {
                        ranks.entry(m.to_string()).or_insert(i);
                    }
                }
                let name =
                    if model == "gemma4" { "gemma4" } else { g.get_str("tokenizer.ggml.pre").unwrap_or("default") };
                PreTokenizer::from_name(name).ok_or_else(|| TokenizerError::Pre(path.clone(), name.to_string()))?
            }
            Kind::Spm => {
                let Some(Value::Array(_, sc)) = g.get("tokenizer.ggml.scores") else {
                    return Err(TokenizerError::Missing(path, "scores"));
                };
                if sc.len() != tokens.len() {
                    return Err(malformed(
                        "scores",
                        format!("{} scores for {} tokens; expected one per token", sc.len(), tokens.len()),
                    ));
                }
                scores = sc.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect();
                PreTokenizer::Gpt2 // unused: SentencePiece runs on the whole text
            }
        };
        let vocab: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let byte_char = byte_chars();
        let byte_tokens: [Option<u32>; 256] = std::array::from_fn(|b| match kind {
            Kind::Bpe { byte_level: true } => vocab.get(&byte_char[b].to_string()).copied(),
            _ => vocab
                .get(&format!("<0x{b:02X}>"))
                .copied()
                .or_else(|| (b < 128).then(|| vocab.get(&(b as u8 as char).to_string()).copied()).flatten()),
        });
        let types: Vec<u64> = match g.get("tokenizer.ggml.token_type") {
            Some(Value::Array(_, t)) => t.iter().map(|v| v.as_u64().unwrap_or(1)).collect(),
            _ => Vec::new(),
        };
        // one type per token, each one of llama.cpp's (undefined 0 … byte 6)
        if !types.is_empty() && types.len() != tokens.len() {
            return Err(malformed(
                "token_type",
                format!("{} types for {} tokens; expected one per token", types.len(), tokens.len()),
            ));
        }
        if let Some((i, t)) = types.iter().enumerate().find(|&(_, &t)| t > 6) {
            return Err(malformed("token_type", format!("token {i} has type {t}; expected 0 to 6")));
        }
        // phi-3 strips the whitespace after its special tokens (llama.cpp, by the model's name)
        let name = g.get_str("general.name").unwrap_or("").to_lowercase();
        let phi3 = name.contains("phi-3") || name.contains("phi3");
        let mut specials: Vec<Special> = types
            .iter()
            .enumerate()
            .filter(|&(i, &t)| t == USER_DEFINED && !tokens[i].is_empty() && !CONTROL_LOOKING.contains(&&*tokens[i]))
            .map(|(i, _)| Special { text: tokens[i].clone(), id: i as u32, rstrip: phi3 })
            .collect();
        specials.sort_by_key(|s| std::cmp::Reverse(s.text.len()));
        let flag = |k: &str| g.get(k).and_then(Value::as_bool);
        let add_bos = flag("tokenizer.ggml.add_bos_token").unwrap_or(kind == Kind::Spm) || model == "gemma4";
        // a special token id past the vocabulary is dropped with a warning, as llama.cpp does
        let bos = match g.get_u64("tokenizer.ggml.bos_token_id") {
            Some(b) if b as usize >= tokens.len() => {
                log::warn!(
                    target: "gate",
                    "{path}: tokenizer.ggml.bos_token_id {b} is not a token id (the vocabulary has {}); no BOS is added",
                    tokens.len()
                );
                None
            }
            b => b.map(|v| v as u32),
        };
        let ignore_merges = matches!(pre, PreTokenizer::Qwen2 { max_digits: 3 });
        let add_space_prefix = kind == Kind::Spm && flag("tokenizer.ggml.add_space_prefix").unwrap_or(true);
        Ok(Tokenizer {
            kind,
            vocab,
            tokens,
            scores,
            ranks,
            byte_char,
            byte_tokens,
            pre,
            ignore_merges,
            add_space_prefix,
            specials,
            bos,
            add_bos,
        })
    }

    /// The text of a run of ids (special tokens as their text): byte-level tokens mapped back
    /// to their bytes, `▁` as a space, `<0xXX>` as its byte; invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        let byte_of: HashMap<char, u8> = match self.kind {
            Kind::Bpe { byte_level: true } => self.byte_char.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect(),
            _ => HashMap::new(),
        };
        for (id, t) in ids.iter().filter_map(|&i| Some((i, self.tokens.get(i as usize)?))) {
            // a user-defined token is its text as written (llama.cpp's token_to_piece)
            if self.specials.iter().any(|s| s.id == id) {
                bytes.extend(t.bytes());
                continue;
            }
            match self.kind {
                Kind::Bpe { byte_level: true } => bytes.extend(t.chars().filter_map(|c| byte_of.get(&c).copied())),
                _ => match t.strip_prefix("<0x").and_then(|h| h.strip_suffix('>')).map(|h| u8::from_str_radix(h, 16)) {
                    Some(Ok(b)) if t.len() == 6 => bytes.push(b),
                    _ => bytes.extend(t.replace('▁', " ").bytes()),
                },
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub fn pre(&self) -> PreTokenizer {
        self.pre
    }

    /// The text's token ids (no BOS; callers add it where the model wants one).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        // SentencePiece prefixes a space to the first piece of text and to any after a token
        let mut after_token = true;
        for frag in self.partition(text) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    after_token = true;
                }
                Fragment::Text(t) => {
                    match self.kind {
                        Kind::Spm => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if self.add_space_prefix && after_token {
                                s.push(' ');
                            }
                            s.push_str(t);
                            let v =
                                spm::Vocab { ids: &self.vocab, scores: &self.scores, byte_tokens: &self.byte_tokens };
                            spm::tokenize(&s.replace(' ', "▁"), &v, &mut out);
                        }
                        Kind::Bpe { byte_level } => {
                            let escaped;
                            let t = if byte_level {
                                t
                            } else {
                                escaped = t.replace(' ', "▁");
                                &escaped
                            };
                            // a text repeats its pieces: each one's ids are computed once
                            let mut cache: HashMap<&str, Vec<u32>> = HashMap::new();
                            for piece in pre::pre_tokenize(self.pre, t) {
                                if let Some(ids) = cache.get(piece) {
                                    out.extend_from_slice(ids);
                                } else {
                                    let ids = self.bpe(piece, byte_level);
                                    out.extend_from_slice(&ids);
                                    if cache.len() < 1 << 16 {
                                        cache.insert(piece, ids);
                                    }
                                }
                            }
                        }
                    }
                    after_token = false;
                }
            }
        }
        out
    }

    /// The text cut at the user-defined tokens in it, as llama.cpp's `tokenizer_st_partition`
    /// cuts it: each token, longest first, splits every text fragment that holds it.
    fn partition<'t>(&self, text: &'t str) -> Vec<Fragment<'t>> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(text)];
        for sp in &self.specials {
            if !frags.iter().any(|f| matches!(f, Fragment::Text(t) if t.contains(sp.text.as_str()))) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(mut t) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = t.find(sp.text.as_str()) {
                    if at > 0 {
                        next.push(Fragment::Text(&t[..at]));
                    }
                    next.push(Fragment::Token(sp.id));
                    t = &t[at + sp.text.len()..];
                    if sp.rstrip {
                        t = t.trim_start_matches(|c: char| c.is_ascii_whitespace());
                    }
                }
                if !t.is_empty() {
                    next.push(Fragment::Text(t));
                }
            }
            frags = next;
        }
        frags
    }

    /// BPE on one piece: its symbols merged, each looked up; a symbol that is no token goes
    /// out as its bytes' tokens (llama.cpp: a byte-level char that is no token is dropped).
    fn bpe(&self, piece: &str, byte_level: bool) -> Vec<u32> {
        let mapped;
        let text = if byte_level {
            mapped = piece.bytes().map(|b| self.byte_char[b as usize]).collect::<String>();
            mapped.as_str()
        } else {
            piece
        };
        // llama3-style: a piece that is a token is taken whole; gemma4: a run of newlines too
        let whole = self.ignore_merges || (!byte_level && text.bytes().all(|b| b == b'\n'));
        if whole {
            if let Some(&id) = self.vocab.get(text) {
                return vec![id];
            }
        }
        let mut out = Vec::new();
        for r in bpe::merge(text, &self.ranks) {
            let s = &text[r];
            match self.vocab.get(s) {
                Some(&id) => out.push(id),
                // llama.cpp looks each byte of the symbol's text up as a one-byte token: only an
                // ASCII one can be (the mapped chars above 127 are two bytes)
                None if byte_level => out.extend(
                    s.bytes().filter(u8::is_ascii).filter_map(|b| self.vocab.get(&(b as char).to_string()).copied()),
                ),
                None => out.extend(s.bytes().filter_map(|b| self.byte_tokens[b as usize])),
            }
        }
        out
    }
}

enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}
