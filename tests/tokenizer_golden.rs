//! The gate's tokenizer gives llama.cpp's token ids (`llama-tokenize --ids --no-bos`, saved by
//! scripts/gen-golden-tokens.sh) on both real fixtures: SmolLM2 (pre-tokenizer `smollm`) and
//! Qwen2.5-Coder-0.5B (`qwen2`). Perplexity and KL figures are only comparable with the peer's
//! when the scored tokens are the same.

mod common;

use kaiju::dataplane::gate::tokenizer::Tokenizer;
use kaiju::dataplane::gguf::Gguf;

fn ids(file: &str) -> Vec<u32> {
    std::fs::read_to_string(common::asset(&format!("tests/golden/tokens/{file}")))
        .unwrap()
        .trim()
        .split(',')
        .map(|t| t.parse().unwrap())
        .collect()
}

fn check(model: &std::path::Path, name: &str) {
    let g = Gguf::open(model).unwrap();
    let tok = Tokenizer::from_gguf(&g).unwrap();
    let licence = std::fs::read_to_string(common::asset("LICENSE")).unwrap();
    let got: Vec<u32> = tok.encode(&licence).into_iter().take(512).collect();
    let want = ids(&format!("{name}.LICENSE.ids"));
    assert_eq!(want.len(), 512);
    let first = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(got, want, "{name}: first difference at token {first:?}");
    let edge = std::fs::read_to_string(common::asset("tests/golden/tokens/edge.txt")).unwrap();
    assert!(edge.contains("\r\n") && edge.contains('\t') && edge.contains("日本語"), "edge.txt lost its edge cases");
    let got = tok.encode(&edge);
    let want = ids(&format!("{name}.edge.ids"));
    let first = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(got, want, "{name}: first difference at token {first:?}");
}

#[test]
fn smollm2_tokens_are_llama_cpps() {
    check(&common::smollm2(), "smollm2");
}

#[test]
fn qwen2_tokens_are_llama_cpps() {
    check(&common::qwen05(), "qwen05");
}
