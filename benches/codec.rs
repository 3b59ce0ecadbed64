//! `cargo bench --bench codec`: KAIJU1 codec speed and quality, printed as a markdown table.
//! Single-threaded figures are per core. Every figure is the median of seven runs, with the
//! slowest and fastest run beside it: this kind of virtual machine varies by ±20% from
//! minute to minute, so one figure alone says little. Set KAIJU_BENCH_QUICK=1 for a short run.

use kaiju::dataplane::codec::kaiju1::{self, EncodeOptions, Variant};
use kaiju::dataplane::codec::leech;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn u(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn gauss(&mut self) -> f32 {
        let (a, b) = (self.u().max(1e-7), self.u());
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f32::consts::PI * b).cos()
    }
}

const RUNS: usize = 7;

/// Seconds of `RUNS` runs of `f`, sorted, and the last run's result.
fn timed<R>(mut f: impl FnMut() -> R) -> ([f64; RUNS], R) {
    let mut times = [0f64; RUNS];
    let mut out = None;
    for t in &mut times {
        let t0 = Instant::now();
        out = Some(std::hint::black_box(f()));
        *t = t0.elapsed().as_secs_f64();
    }
    times.sort_by(f64::total_cmp);
    (times, out.expect("at least one run"))
}

/// A figure `of` the sorted run times: the median run's, then the range over the runs
/// (lowest first, whether the figure grows with the time, as a time per item does, or falls,
/// as a rate does), with `digits` decimals.
fn figure(times: &[f64; RUNS], of: impl Fn(f64) -> f64, unit: &str, digits: usize) -> String {
    let (a, mid, b) = (of(times[0]), of(times[RUNS / 2]), of(times[RUNS - 1]));
    let (lo, hi) = (a.min(b), a.max(b));
    format!("{mid:.digits$} {unit} (runs {lo:.digits$}–{hi:.digits$})")
}

fn main() {
    let quick = std::env::var("KAIJU_BENCH_QUICK").is_ok();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let n = if quick { 20_000 } else { 200_000 };
    let ys: Vec<[f32; 24]> = (0..n).map(|_| std::array::from_fn(|_| rng.gauss() * 2.8)).collect();
    let ws: Vec<[f32; 24]> = (0..n).map(|_| std::array::from_fn(|_| (rng.gauss()).exp())).collect();
    let us = |secs: f64| secs * 1e6 / n as f64;
    println!("| measurement | value |\n|---|---|");
    let (t, _) = timed(|| ys.iter().map(|y| leech::decode_unweighted(y)[0] as i64).sum::<i64>());
    println!("| Leech decode, unweighted | {} |", figure(&t, us, "µs", 3));
    let (t, _) = timed(|| ys.iter().zip(&ws).map(|(y, w)| leech::decode(y, w)[0] as i64).sum::<i64>());
    println!("| Leech decode, weighted | {} |", figure(&t, us, "µs", 3));
    let idx: Vec<u64> = ys.iter().map(|y| leech::index_of(&leech::decode_unweighted(y), 4)).collect();
    let (t, _) = timed(|| idx.iter().map(|&i| leech::point_of(i, 4)[0] as i64).sum::<i64>());
    println!("| index → point (dequant of 24 weights) | {} |", figure(&t, us, "µs", 3));

    let cols = 4096;
    let rows = if quick { 16 } else { 128 };
    let w: Vec<f32> = (0..cols * rows).map(|_| rng.gauss() * 0.02).collect();
    let ones = vec![1f32; cols];
    let imp: Vec<f32> = (0..cols).map(|_| (rng.gauss()).exp()).collect();
    let mw = |secs: f64| w.len() as f64 / secs / 1e6;
    let runs = [(4u32, 0u8), (4, 1), (4, 2), (5, 0), (6, 0), (3, 0), (8, 0), (10, 0), (12, 0), (16, 0)];
    for (q, search) in runs {
        let variant = Variant::new(q).unwrap();
        for (label, im) in [("plain", &ones), ("log-normal imatrix", &imp)] {
            let opts = EncodeOptions { variant, search, ..Default::default() };
            let (secs, (bytes, st)) = timed(|| pool.install(|| kaiju1::encode_tensor(&w, cols, |_| im, opts)));
            println!(
                "| encode Gaussian 4096-wide, q={q} ({:.3} bpw), search {search}, {label} | {}, SQNR {:.2} dB, weighted SQNR {:.2} dB, {:.1} decodes/block |",
                kaiju1::bpw(cols, variant),
                figure(&secs, mw, "M weights/core-s", 2),
                st.sqnr_db(),
                st.weighted_sqnr_db(),
                st.decodes as f64 / (w.len() / 24) as f64
            );
            if search == 0 && label == "plain" {
                let mut back = vec![0f32; w.len()];
                let (secs, _) =
                    timed(|| pool.install(|| kaiju1::dequantize(&bytes, cols, &mut back, variant).unwrap()));
                println!("| dequantize KAIJU1 q={q} | {} |", figure(&secs, mw, "M weights/core-s", 2));
            }
        }
    }
    // every core of the machine at once: per-core throughput when the rows are shared out,
    // each core getting as many rows as the one-thread runs (so a run is as long, and a
    // hiccup of the host weighs as much)
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let all = rayon::ThreadPoolBuilder::new().num_threads(cores).build().unwrap();
    let opts = EncodeOptions::default();
    let wa = w.repeat(cores);
    let mwa = |secs: f64| wa.len() as f64 / secs / 1e6;
    let encode_all = || all.install(|| kaiju1::encode_tensor(&wa, cols, |_| &imp, opts));
    encode_all(); // starts the pool's threads
    let (secs, (_, st)) = timed(encode_all);
    println!(
        "| encode Gaussian 4096-wide, q=4, search 0, log-normal imatrix, {cores} threads | {}, {}, weighted SQNR {:.2} dB |",
        figure(&secs, mwa, "M weights/s", 2),
        figure(&secs, |t| mwa(t) / cores as f64, "M weights/core-s", 2),
        st.weighted_sqnr_db()
    );
    println!(
        "| rate-distortion bound at the codebook rate q=4 / 5 / 6: 2.0 / 2.32 / 2.58 bpw | 12.04 / 13.97 / 15.56 dB |"
    );
}
