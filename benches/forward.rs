//! `cargo bench --bench forward`: the native forward pass on the SmolLM2-135M fixture in f16
//! (the gate's reference side), tokens per second over one 128-token chunk, single-threaded
//! and on every core, printed as a markdown table. Median of seven runs with the range.
//! Then the gate's tokenizer (SmolLM2's) on 1 MB of text: the repository's licence and docs
//! repeated, and one character repeated (a single pre-tokenizer piece, what a quadratic BPE
//! cannot finish).
//! Needs `.cache/models/smollm2-135m-f16.gguf` (the tests and scripts/cross-check.sh make it).

use kaiju::dataplane::gate::model::{Model, DEFAULT_DENSE_LIMIT};
use kaiju::dataplane::gguf::Gguf;
use std::time::Instant;

const RUNS: usize = 7;

fn main() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models/smollm2-135m-f16.gguf");
    let Ok(g) = Gguf::open(&path) else {
        eprintln!("{}: missing; `cargo test --release --test forward_golden` makes it", path.display());
        std::process::exit(2);
    };
    let m = Model::load(&g, DEFAULT_DENSE_LIMIT).expect("SmolLM2 loads");
    let tokens: Vec<u32> = (0..128u32).map(|i| (i * 7919 + 13) % m.cfg.n_vocab as u32).collect();
    println!("| forward pass, SmolLM2-135M f16, 128 tokens, all logits | tokens/s |\n|---|---|");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, cores] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut times: Vec<f64> = (0..RUNS)
            .map(|_| {
                let t0 = Instant::now();
                std::hint::black_box(pool.install(|| m.forward(&tokens, false).unwrap()));
                t0.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let rate = |t: f64| tokens.len() as f64 / t;
        println!(
            "| {threads} thread{} | {:.1} (runs {:.1}–{:.1}) |",
            if threads == 1 { "" } else { "s" },
            rate(times[RUNS / 2]),
            rate(times[RUNS - 1]),
            rate(times[0])
        );
    }
    tokenizer(&g);
}

/// Milliseconds to tokenize 1 MB of ordinary text and 1 MB of one character.
fn tokenizer(g: &Gguf) {
    let tok = kaiju::dataplane::gate::tokenizer::Tokenizer::from_gguf(g).expect("SmolLM2's tokenizer");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut prose = String::new();
    while prose.len() < 1_000_000 {
        for f in ["LICENSE", "README.md", "docs/ARCHITECTURE.md"] {
            prose += &std::fs::read_to_string(root.join(f)).unwrap_or_default();
        }
    }
    let mut end = 1_000_000.min(prose.len());
    while !prose.is_char_boundary(end) {
        end -= 1;
    }
    let run: String = std::iter::repeat_n('a', 1_000_000).collect();
    println!("\n| tokenizer (SmolLM2), 1 MB | tokens | ms |\n|---|---|---|");
    for (what, text) in [("licence + docs", &prose[..end]), ("one character", &run[..])] {
        let t0 = Instant::now();
        let ids = std::hint::black_box(tok.encode(text));
        println!("| {what} | {} | {:.0} |", ids.len(), t0.elapsed().as_secs_f64() * 1e3);
    }
}
