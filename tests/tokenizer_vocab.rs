//! llama.cpp's own tokenizer test suites: the vocabulary-only GGUFs of the llama-cpp-python
//! 0.3.36 sdist (`vendor/llama.cpp/models/ggml-vocab-*.gguf`) with their `.inp` / `.out`
//! pairs, the cases and ids `test-tokenizer-0` checks (no BOS, special tokens not parsed).
//! The sdist is fetched the way the other scripts fetch it (`scripts/llama-cpp.sh --src`:
//! pip, sha256-pinned, cached under .cache/llama).

mod common;

use kaiju::dataplane::gate::tokenizer::Tokenizer;
use kaiju::dataplane::gguf::Gguf;

/// Every suite with an `.inp`/`.out` pair but the WordPiece encoders (bert-bge, nomic-bert),
/// which no campaign model uses.
const SUITES: [&str; 14] = [
    "llama-spm",
    "phi-3",
    "gemma-4",
    "qwen2",
    "qwen35",
    "llama-bpe",
    "gpt-2",
    "starcoder",
    "refact",
    "deepseek-llm",
    "deepseek-coder",
    "falcon",
    "command-r",
    "mpt",
];

/// The cases of a suite: each input text with the ids llama.cpp expects.
fn cases(models: &std::path::Path, name: &str) -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let p = models.join(format!("ggml-vocab-{name}.gguf.{ext}"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let inp = read("inp");
    let out = read("out");
    // every case ends with the separator, the last one too
    let sep = "\n__ggml_vocab_test__\n";
    let texts: Vec<&str> = inp.strip_suffix(sep).unwrap_or(&inp).split(sep).collect();
    let ids: Vec<Vec<u32>> =
        out.lines().map(|l| l.split_whitespace().map(|t| t.parse().expect("an id")).collect()).collect();
    assert_eq!(texts.len(), ids.len(), "{name}: {} inputs, {} outputs", texts.len(), ids.len());
    texts.into_iter().map(String::from).zip(ids).collect()
}

#[test]
fn every_case_of_llama_cpps_vocabulary_suites_gives_its_ids() {
    let models = common::llama_src().join("models");
    let mut failed = Vec::new();
    let mut total = 0;
    for name in SUITES {
        let g = Gguf::open(models.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let tok = match Tokenizer::from_gguf(&g) {
            Ok(t) => t,
            Err(e) => {
                failed.push(format!("{name}: {e}"));
                continue;
            }
        };
        let cs = cases(&models, name);
        let bad: Vec<String> = cs
            .iter()
            .filter_map(|(text, want)| {
                let got = tok.encode(text);
                (&got != want).then(|| format!("  {text:?}\n    llama.cpp {want:?}\n    ours      {got:?}"))
            })
            .collect();
        // the ids spell the text again (SentencePiece's added space in front aside)
        for (text, want) in cs.iter().filter(|(t, _)| !t.contains('▁')) {
            let back = tok.decode(want);
            let back = if g.get_str("tokenizer.ggml.model") == Some("llama") {
                back.strip_prefix(' ').unwrap_or(&back).to_string()
            } else {
                back
            };
            if &back != text {
                failed.push(format!("{name}: {want:?} decodes to {back:?}, not {text:?}"));
            }
        }
        total += cs.len();
        eprintln!("{name}: {} of {} cases equal", cs.len() - bad.len(), cs.len());
        if !bad.is_empty() {
            failed.push(format!("{name}: {} of {} cases differ:\n{}", bad.len(), cs.len(), bad.join("\n")));
        }
    }
    assert!(failed.is_empty(), "{} suites, {total} cases checked; differences:\n{}", SUITES.len(), failed.join("\n"));
}
