//! Pre-tokenizers: how a text is split into the pieces BPE runs on, as llama.cpp's
//! `unicode_regex_split` splits it for each `tokenizer.ggml.pre`.
//!
//! llama.cpp runs a list of regexes per pre-tokenizer, each refining the pieces the one before
//! left (a piece's matches and the stretches between them all become pieces). Some regexes have
//! hand-written implementations there, and here:
//! - `gpt2`: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - `qwen2`: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - `llama3`: as `qwen2` with digits in runs of up to three
//! - `qwen35`: as `qwen2` with marks (`\p{M}`) counted with the letters
//! - gemma4's: runs of `\n` and runs of anything else
//!
//! The others (deepseek-llm, deepseek-coder, falcon, the default, the digit split before
//! starcoder's gpt2) run as regexes, the way llama.cpp runs them with `std::regex`: a regex that
//! names a Unicode category runs on a "collapsed" text, every non-ASCII codepoint replaced by one
//! stand-in per category (whitespace by `\x0B`) and each `\p{..}` by its stand-in plus the ASCII
//! characters of that category; a regex without one runs on the text with non-ASCII whitespace
//! replaced by `\x0B`.

use regex::Regex;
use std::sync::LazyLock;

/// How a text is split into pieces before BPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    Gpt2,
    /// llama.cpp's "default": punctuation runs, gpt2, number runs, three-digit groups
    Default,
    /// digits isolated, then gpt2 (starcoder, smollm, refact, command-r, …)
    DigitsGpt2,
    /// qwen2 (`max_digits` 1) and llama3 (`max_digits` 3)
    Qwen2 {
        max_digits: usize,
    },
    /// qwen2 with marks counted as letters
    Qwen35,
    Falcon,
    DeepseekLlm,
    DeepseekCoder,
    /// gemma4: runs of newlines and runs of the rest (its BPE runs on `▁`-escaped UTF-8)
    Newlines,
}

impl PreTokenizer {
    /// The pre-tokenizer of a `tokenizer.ggml.pre` value (llama.cpp's names), None when unknown.
    pub fn from_name(pre: &str) -> Option<PreTokenizer> {
        Some(match pre {
            "default" => PreTokenizer::Default,
            "gpt2" | "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "roberta-bpe" | "jina-v1-en" | "jina-v2-code"
            | "exaone4" | "trillion" | "granite-docling" => PreTokenizer::Gpt2,
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
                PreTokenizer::DigitsGpt2
            }
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "hunyuan" | "megrez" => PreTokenizer::Qwen2 { max_digits: 1 },
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "dbrx" | "smaug-bpe" => {
                PreTokenizer::Qwen2 { max_digits: 3 }
            }
            "qwen35" => PreTokenizer::Qwen35,
            "falcon" => PreTokenizer::Falcon,
            "deepseek-llm" => PreTokenizer::DeepseekLlm,
            "deepseek-coder" => PreTokenizer::DeepseekCoder,
            "gemma4" => PreTokenizer::Newlines,
            _ => return None,
        })
    }

    /// The names [`PreTokenizer::from_name`] knows, for messages.
    pub const KNOWN: &'static str = "default, gpt2, mpt, smollm, starcoder, refact, command-r, qwen2, qwen35, \
        llama-bpe, falcon, deepseek-llm, deepseek-coder and their aliases";
}

/// A codepoint's Unicode general category as llama.cpp's pre-tokenizers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cat {
    Letter,
    Number,
    Punct,
    Mark,
    Symbol,
    Other,
}

static CATS: LazyLock<[(Cat, Regex); 5]> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("a valid category class");
    [
        (Cat::Letter, re(r"^\p{L}$")),
        (Cat::Number, re(r"^\p{N}$")),
        (Cat::Punct, re(r"^\p{P}$")),
        (Cat::Mark, re(r"^\p{M}$")),
        (Cat::Symbol, re(r"^\p{S}$")),
    ]
});

/// The general category of `c` (ASCII directly, the rest by the regex crate's tables).
pub fn category(c: char) -> Cat {
    if c.is_ascii() {
        return match c {
            'A'..='Z' | 'a'..='z' => Cat::Letter,
            '0'..='9' => Cat::Number,
            '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~' => Cat::Symbol,
            c if c.is_ascii_punctuation() => Cat::Punct,
            _ => Cat::Other,
        };
    }
    let mut buf = [0u8; 4];
    let s = c.encode_utf8(&mut buf);
    CATS.iter().find(|(_, re)| re.is_match(s)).map(|(k, _)| *k).unwrap_or(Cat::Other)
}

fn is_letter(c: char) -> bool {
    category(c) == Cat::Letter
}

fn is_number(c: char) -> bool {
    c.is_ascii_digit() || (!c.is_ascii() && category(c) == Cat::Number)
}

fn is_mark(c: char) -> bool {
    !c.is_ascii() && category(c) == Cat::Mark
}

fn is_crlf(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// Split `text` into the pieces BPE runs on.
pub fn pre_tokenize(pre: PreTokenizer, text: &str) -> Vec<&str> {
    let mut pieces = vec![text];
    for step in steps(pre) {
        let mut next = Vec::with_capacity(pieces.len());
        for p in pieces {
            match step {
                Step::Gpt2 => split_gpt2(p, &mut next),
                Step::Qwen2 { max_digits, marks } => split_qwen2(p, max_digits, marks, &mut next),
                Step::Newlines => split_newlines(p, &mut next),
                Step::Regex(r) => r.split(p, &mut next),
            }
        }
        pieces = next;
    }
    pieces.retain(|p| !p.is_empty());
    pieces
}

/// One regex of a pre-tokenizer's list.
#[derive(Clone, Copy)]
enum Step {
    Gpt2,
    Qwen2 { max_digits: usize, marks: bool },
    Newlines,
    Regex(&'static LlamaRegex),
}

macro_rules! llama_regexes {
    ($($name:ident = $re:expr;)*) => {
        $(static $name: LazyLock<LlamaRegex> = LazyLock::new(|| LlamaRegex::new($re));)*
    };
}

// llama.cpp's own regex strings (llama-vocab.cpp), translated as its unicode_regex_split does;
// non-ASCII characters as \x{..} escapes (several of deepseek's are not in Unicode normal form)
llama_regexes! {
    RE_DIGIT = r"\p{N}";
    RE_DIGITS = r"\p{N}+";
    RE_THREE_DIGITS = r"[0-9][0-9][0-9]";
    RE_DEFAULT_PUNCT = r"[\p{P}\$\+<=>\^~\|]+";
    RE_FALCON_PUNCT = r"[\p{P}\$\+<=>\^~\|`]+";
    RE_CRLF = "[\r\n]";
    RE_DS_LETTERS = r"\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+";
    RE_DS_PUNCT = r"\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+";
    RE_TRAILING_SPACE = r"\s+$";
    RE_CJK = r"[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+";
    RE_SPACE_LETTERS = r"\s?\p{L}+";
    RE_SPACE_PUNCT = r"\s?\p{P}+";
}

fn steps(pre: PreTokenizer) -> Vec<Step> {
    match pre {
        PreTokenizer::Gpt2 => vec![Step::Gpt2],
        PreTokenizer::Default => {
            vec![Step::Regex(&RE_DEFAULT_PUNCT), Step::Gpt2, Step::Regex(&RE_DIGITS), Step::Regex(&RE_THREE_DIGITS)]
        }
        PreTokenizer::DigitsGpt2 => vec![Step::Regex(&RE_DIGIT), Step::Gpt2],
        PreTokenizer::Qwen2 { max_digits } => vec![Step::Qwen2 { max_digits, marks: false }],
        PreTokenizer::Qwen35 => vec![Step::Qwen2 { max_digits: 1, marks: true }],
        PreTokenizer::Falcon => vec![Step::Regex(&RE_FALCON_PUNCT), Step::Gpt2, Step::Regex(&RE_THREE_DIGITS)],
        PreTokenizer::DeepseekLlm => vec![
            Step::Regex(&RE_CRLF),
            Step::Regex(&RE_DS_LETTERS),
            Step::Regex(&RE_DS_PUNCT),
            Step::Regex(&RE_TRAILING_SPACE),
            Step::Regex(&RE_CJK),
            Step::Regex(&RE_DIGITS),
        ],
        PreTokenizer::DeepseekCoder => vec![
            Step::Regex(&RE_CRLF),
            Step::Regex(&RE_SPACE_LETTERS),
            Step::Regex(&RE_SPACE_PUNCT),
            Step::Regex(&RE_CJK),
            Step::Regex(&RE_DIGIT),
        ],
        PreTokenizer::Newlines => vec![Step::Newlines],
    }
}

/// A llama.cpp pre-tokenizer regex, compiled for the text it runs on there.
pub struct LlamaRegex {
    re: Regex,
    /// it names a Unicode category: it runs on the collapsed text
    collapsed: bool,
}

/// Stand-ins of the collapsed text (llama.cpp uses the bytes 0xD0–0xD5; private-use
/// codepoints here, one char each, so char positions stay the text's).
const OTHER: char = '\u{E0D0}';
fn stand_in(c: Cat) -> char {
    match c {
        Cat::Number => '\u{E0D1}',
        Cat::Letter => '\u{E0D2}',
        Cat::Punct => '\u{E0D3}',
        Cat::Mark => '\u{E0D4}',
        Cat::Symbol => '\u{E0D5}',
        Cat::Other => OTHER,
    }
}

impl LlamaRegex {
    /// Translate `expr` as llama.cpp does: each `\p{X}` of a known category becomes its
    /// stand-in and the ASCII characters of the category (bracketed when outside a class).
    fn new(expr: &str) -> LlamaRegex {
        const CATS: [(&str, Cat, &str); 5] = [
            (r"\p{N}", Cat::Number, "0-9"),
            (r"\p{L}", Cat::Letter, "A-Za-z"),
            (r"\p{P}", Cat::Punct, r"!-#%-*,-/:-;?-@\[-\]_\{\}"),
            (r"\p{M}", Cat::Mark, ""),
            (r"\p{S}", Cat::Symbol, r"\$\+<->\^`\|\~"),
        ];
        let collapsed = CATS.iter().any(|(p, _, _)| expr.contains(p));
        let mut out = String::new();
        if collapsed {
            let mut inside = false;
            let mut rest = expr;
            let mut prev = '\0';
            while let Some(c) = rest.chars().next() {
                if let Some((p, cat, ascii)) = CATS.iter().find(|(p, _, _)| rest.starts_with(p)) {
                    let class = format!("\\x{{{:X}}}{ascii}", stand_in(*cat) as u32);
                    out += &if inside { class } else { format!("[{class}]") };
                    rest = &rest[p.len()..];
                    prev = '}';
                    continue;
                }
                if c == '[' && prev != '\\' {
                    inside = true;
                } else if c == ']' && prev != '\\' {
                    inside = false;
                }
                out.push(c);
                prev = c;
                rest = &rest[c.len_utf8()..];
            }
        } else {
            out = expr.to_string();
        }
        LlamaRegex { re: Regex::new(&out).unwrap_or_else(|e| panic!("pre-tokenizer regex {expr:?}: {e}")), collapsed }
    }

    /// The text as this regex sees it: one char per char of `text`.
    fn haystack(&self, text: &str) -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii() {
                    c
                } else if c.is_whitespace() {
                    '\x0B'
                } else if self.collapsed {
                    stand_in(category(c))
                } else {
                    c
                }
            })
            .collect()
    }

    /// Split `text`: each match a piece, and each stretch between matches.
    fn split<'t>(&self, text: &'t str, out: &mut Vec<&'t str>) {
        let hay = self.haystack(text);
        // char index → byte offset, in the text and in the haystack
        let at_text: Vec<usize> = text.char_indices().map(|(b, _)| b).chain([text.len()]).collect();
        let at_hay: Vec<usize> = hay.char_indices().map(|(b, _)| b).chain([hay.len()]).collect();
        let to_text = |hb: usize| at_text[at_hay.partition_point(|&b| b < hb)];
        let mut last = 0;
        for m in self.re.find_iter(&hay) {
            let (s, e) = (to_text(m.start()), to_text(m.end()));
            if s > last {
                out.push(&text[last..s]);
            }
            out.push(&text[s..e]);
            last = e;
        }
        if last < text.len() {
            out.push(&text[last..]);
        }
    }
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
    let is_other = |c: char| !c.is_whitespace() && !is_letter(c) && !is_number(c);
    let mut i = 0;
    while i < cs.len() {
        if let Some(l) = contraction(&cs, i, false) {
            p.push(i, i + l);
            i += l;
            continue;
        }
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        let j = if cs[i] == ' ' && i + 1 < cs.len() { i + 1 } else { i };
        let class: Option<&dyn Fn(char) -> bool> = if is_letter(cs[j]) {
            Some(&is_letter)
        } else if is_number(cs[j]) {
            Some(&is_number)
        } else if is_other(cs[j]) {
            Some(&is_other)
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

/// qwen2 / llama3 (`marks` false) and qwen35 (`marks`: `\p{M}` joins the letters and leaves
/// the "other" class).
fn split_qwen2<'t>(text: &'t str, max_digits: usize, marks: bool, out: &mut Vec<&'t str>) {
    let (mut p, cs) = Pieces::new(text, out);
    let wordy = |c: char| is_letter(c) || (marks && is_mark(c));
    let is_other = |c: char| !c.is_whitespace() && !wordy(c) && !is_number(c);
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if let Some(l) = contraction(&cs, i, true) {
            p.push(i, i + l);
            i += l;
            continue;
        }
        // `[^\r\n\p{L}\p{N}]?\p{L}+` (qwen35: `[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+`)
        if !is_crlf(c) && !is_number(c) && (wordy(c) || cs.get(i + 1).is_some_and(|&n| wordy(n))) {
            let mut k = i + 1;
            while k < cs.len() && wordy(cs[k]) {
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

/// gemma4's `[^\n]+|[\n]+`.
fn split_newlines<'t>(text: &'t str, out: &mut Vec<&'t str>) {
    let mut start = 0;
    let b = text.as_bytes();
    for i in 1..=b.len() {
        if i == b.len() || (b[i] == b'\n') != (b[start] == b'\n') {
            out.push(&text[start..i]);
            start = i;
        }
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
        // qwen35 keeps a combining mark with its letters
        assert_eq!(split(PreTokenizer::Qwen35, "ne\u{301}e"), vec!["ne\u{301}e"]);
        assert_eq!(split(q, "ne\u{301}e"), vec!["ne", "\u{301}e"]);
    }

    #[test]
    fn regex_pre_tokenizers_split_as_llama_cpp_runs_them() {
        // falcon: punctuation runs first, then gpt2, then three-digit groups
        assert_eq!(split(PreTokenizer::Falcon, "a.b 12345"), vec!["a", ".", "b", " ", "123", "45"]);
        // deepseek-coder: line breaks alone, a space joins letters and punctuation runs
        assert_eq!(split(PreTokenizer::DeepseekCoder, "x = f(1)\n"), vec!["x", " =", " f", "(", "1", ")", "\n"]);
        // the collapsed text: a non-ASCII letter is a letter, non-ASCII whitespace is \s
        assert_eq!(split(PreTokenizer::DeepseekCoder, "é\u{3000}ü"), vec!["é", "\u{3000}ü"]);
        assert_eq!(split(PreTokenizer::Newlines, "a b\n\nc\n"), vec!["a b", "\n\n", "c", "\n"]);
    }

    #[test]
    fn pieces_cover_the_text_exactly() {
        let text = "Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>\n\n\t  Everyone—é ½ 'LL\r\n";
        for pre in [
            PreTokenizer::Gpt2,
            PreTokenizer::Default,
            PreTokenizer::DigitsGpt2,
            PreTokenizer::Qwen2 { max_digits: 1 },
            PreTokenizer::Qwen35,
            PreTokenizer::Falcon,
            PreTokenizer::DeepseekLlm,
            PreTokenizer::DeepseekCoder,
            PreTokenizer::Newlines,
        ] {
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
        assert_eq!(PreTokenizer::from_name("default"), Some(PreTokenizer::Default));
        assert_eq!(PreTokenizer::from_name("tekken"), None);
    }

    #[test]
    fn categories_are_unicodes() {
        assert_eq!(category('é'), Cat::Letter);
        assert_eq!(category('½'), Cat::Number);
        assert_eq!(category('—'), Cat::Punct);
        assert_eq!(category('\u{301}'), Cat::Mark);
        assert_eq!(category('€'), Cat::Symbol);
        assert_eq!(category('_'), Cat::Punct);
        assert_eq!(category('$'), Cat::Symbol);
    }
}
