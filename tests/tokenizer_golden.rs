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
    let runs = std::fs::read_to_string(common::asset("tests/golden/tokens/runs.txt")).unwrap();
    let got = tok.encode(&runs);
    let want = ids(&format!("{name}.runs.ids"));
    let first = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(got, want, "{name}: runs of one character, first difference at token {first:?}");
}

/// A 1,000,000-character run of one letter is one pre-tokenizer piece: BPE with a scan for the
/// best pair per merge takes hours on it, a heap of candidate merges well under a second
/// (`cargo bench --bench forward` prints the time). Its ids decode back to the run.
#[test]
fn a_million_character_run_tokenizes() {
    for model in [common::smollm2(), common::qwen05()] {
        let g = Gguf::open(&model).unwrap();
        let tok = Tokenizer::from_gguf(&g).unwrap();
        for c in ['a', '-'] {
            let run: String = std::iter::repeat_n(c, 1_000_000).collect();
            let ids = tok.encode(&run);
            assert!(!ids.is_empty() && ids.len() < 1_000_000, "{}: {} ids", model.display(), ids.len());
            assert!(tok.decode(&ids) == run, "{}: the ids do not spell the run", model.display());
        }
    }
}

#[test]
fn smollm2_tokens_are_llama_cpps() {
    check(&common::smollm2(), "smollm2");
}

#[test]
fn qwen2_tokens_are_llama_cpps() {
    check(&common::qwen05(), "qwen05");
}

/// `tokenize` takes any text llama.cpp takes, whitespace alone included (`" "` is qwen2's
/// [220], as `llama-tokenize --ids --no-bos` prints it); only an empty file is refused, named.
#[test]
fn tokenize_takes_whitespace_and_names_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = |text: &str| {
        let f = dir.path().join("t.txt");
        std::fs::write(&f, text).unwrap();
        let o = std::process::Command::new(common::bin())
            .args(["tokenize", "--model"])
            .arg(common::qwen05())
            .arg(&f)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).trim().to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    assert_eq!(run(" ").1, "220");
    assert_eq!(run("\n\n").1, "271");
    let (code, out, err) = run("");
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("t.txt: the text is empty (0 bytes)"), "{err}");
}

/// A vocabulary whose `token_type` array is longer than its tokens, or holds a type llama.cpp
/// does not have, is refused naming the file and the field (it panicked with an index out of
/// bounds), by `tokenize` and by every loader of the tokenizer; so is a vocabulary with no tokens.
#[test]
fn a_token_type_array_that_does_not_fit_its_tokens_is_refused() {
    use kaiju::dataplane::gguf::{value::T_I32, Value};
    let d = tempfile::tempdir().unwrap();
    let src = common::asset("tests/golden/forward/qwen2.gguf");
    let text = d.path().join("t.txt");
    std::fs::write(&text, "hello world").unwrap();
    for (name, extra, want) in [("long.gguf", 7i32, "types for 320 tokens"), ("range.gguf", 99, "type 99")] {
        let out = d.path().join(name);
        common::gguf_copy(&src, &out, None, |meta| {
            for (k, v) in meta.iter_mut() {
                if k == "tokenizer.ggml.token_type" {
                    let Value::Array(_, items) = v else { panic!("token_type is an array") };
                    let mut t: Vec<Value> = items.iter().map(|i| Value::I32(i.as_u64().unwrap() as i32)).collect();
                    if extra == 99 {
                        t[5] = Value::I32(99);
                    } else {
                        t.push(Value::I32(extra));
                    }
                    *v = Value::Array(T_I32, t);
                }
            }
        });
        let o = std::process::Command::new(common::bin())
            .args(["tokenize", "--model"])
            .arg(&out)
            .arg(&text)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(name) && err.contains("tokenizer.ggml.token_type") && err.contains(want), "{name}: {err}");
        let g = kaiju::dataplane::gguf::Gguf::open(&out).unwrap();
        assert!(kaiju::dataplane::gate::tokenizer::Tokenizer::from_gguf(&g).is_err(), "{name}");
    }
    // a gpt2 vocabulary with no tokens at all: refused, not an empty line and exit 0
    let out = d.path().join("empty.gguf");
    common::gguf_copy(&src, &out, None, |meta| {
        for (k, v) in meta.iter_mut() {
            if k == "tokenizer.ggml.tokens" {
                *v = Value::Array(kaiju::dataplane::gguf::value::T_STR, Vec::new());
            }
        }
    });
    let o =
        std::process::Command::new(common::bin()).args(["tokenize", "--model"]).arg(&out).arg(&text).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!((o.status.code(), o.stdout.is_empty()), (Some(1), true), "{err}");
    assert!(err.contains("empty.gguf: tokenizer.ggml.tokens: the array is empty"), "{err}");
}
