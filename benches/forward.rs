//! `cargo bench --bench forward`: the native forward pass on the SmolLM2-135M fixture in f16
//! (the gate's reference side), tokens per second over one 128-token chunk, single-threaded
//! and on every core, printed as a markdown table. Median of seven runs with the range.
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
}
