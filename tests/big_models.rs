//! The passes over a model bigger than memory: every pass (the imatrix, the gate's two models,
//! the encoder's calibration) is layer-major, each layer's weights visited once, and its pages
//! given back after it. Checked on a model of many thin layers (24, random weights, the tiny
//! qwen2's real 320-token vocabulary), where the count of visits is what is tested, and
//! against the chunk-major results the same passes gave when each chunk ran through every
//! layer in turn.

mod common;

use kaiju::dataplane::codec::kaiju1::{EncodeOptions, Variant};
use kaiju::dataplane::encode::{self, feedback, EncodeJob};
use kaiju::dataplane::gate::imatrix_calc::{compute_file, ImatrixJob};
use kaiju::dataplane::gate::model::{Model, Run};
use kaiju::dataplane::gate::quality::{self, Thresholds};
use kaiju::dataplane::gate::text::Text;
use kaiju::dataplane::gate::tokenizer::Tokenizer;
use kaiju::dataplane::gate::{self, GateJob};
use kaiju::dataplane::gguf::{Gguf, GgufWriter, TensorPlan, Value};
use kaiju::dataplane::imatrix::Imatrix;
use std::path::{Path, PathBuf};

const LAYERS: usize = 24;

/// A qwen2 model of `LAYERS` thin layers at `out`: the tiny qwen2's metadata, vocabulary,
/// embeddings and norms, each layer's matmul weights drawn afresh (fixed seed), F32.
fn deep_thin_model(out: &Path) {
    let src = Gguf::open(common::asset("tests/golden/forward/qwen2.gguf")).unwrap();
    let mut meta = src.metadata.clone();
    for (k, v) in meta.iter_mut() {
        if k == "qwen2.block_count" {
            *v = Value::U32(LAYERS as u32);
        }
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut draw = |n: usize, cols: u64| -> Vec<u8> {
        let a = 1.7 / (cols as f32).sqrt();
        (0..n)
            .flat_map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = (seed >> 40) as f32 / (1u64 << 24) as f32;
                ((2.0 * u - 1.0) * a).to_le_bytes()
            })
            .collect()
    };
    let mut tensors: Vec<(TensorPlan, Vec<u8>)> = Vec::new();
    let plain = |t: &kaiju::dataplane::gguf::TensorInfo, name: String| {
        (TensorPlan { name, dims: t.dims.clone(), ty: t.ty, size: t.size }, src.data(t).to_vec())
    };
    for t in src.tensors.iter().filter(|t| !t.name.starts_with("blk.")) {
        tensors.push(plain(t, t.name.clone()));
    }
    for l in 0..LAYERS {
        for t in src.tensors.iter().filter(|t| t.name.starts_with("blk.0.")) {
            let name = t.name.replacen("blk.0.", &format!("blk.{l}."), 1);
            if encode::is_matmul_weight(&t.name) {
                let bytes = draw(t.n_elements() as usize, t.ne0());
                tensors.push((TensorPlan { name, dims: t.dims.clone(), ty: t.ty, size: t.size }, bytes));
            } else {
                tensors.push(plain(t, name));
            }
        }
    }
    let plans = tensors.iter().map(|(p, _)| p.clone()).collect();
    let mut w = GgufWriter::create(out, &meta, plans).unwrap();
    for (p, b) in &tensors {
        w.write_tensor(&p.name, b).unwrap();
    }
    w.finish().unwrap();
}

/// The deep model's base (F32), its f16 and the calibration text, in `dir`.
fn inputs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let base = dir.join("deep.gguf");
    deep_thin_model(&base);
    let f16 = dir.join("deep-f16.gguf");
    kaiju::dataplane::convert::to_f16_file(&base, &f16, true).unwrap();
    (base, f16, common::asset("assets/calib/calib.txt"))
}

/// Each chunk through every layer in turn (a pass of one chunk at a time): the order every
/// pass ran in before they were layer-major. Returns the final states of each chunk's
/// positions from `first`, in chunk order, and the model's visits.
fn chunk_major(m: &Model, chunks: &[Vec<u32>], first: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for c in chunks {
        out.extend(m.pass(&[Run { seqs: vec![c.clone()], first }], &mut |_, _, _| {}, &mut |_| {}).unwrap().remove(0));
    }
    out
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.abs() as f64).fold(0.0, f64::max).max(1e-30);
    a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max) / scale
}

/// The imatrix, the gate (both models) and a feedback encode over a 24-layer model: each
/// visits each layer once, and each result is the chunk-major one.
#[test]
fn every_pass_visits_each_layer_once_and_matches_the_chunk_major_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (base, f16, calib) = inputs(dir.path());
    let (ctx, chunks) = (128, 6);

    // the imatrix: one pass, each layer once
    let job = ImatrixJob { model: f16.clone(), text: calib.clone(), out: p("im.gguf"), ctx, chunks, progress: false };
    let r = compute_file(&job).unwrap();
    assert_eq!(r.tensors, LAYERS * 7, "an entry for each matmul");
    assert_eq!(r.layer_visits, vec![1; LAYERS], "each layer's weights read once");
    let im = Imatrix::load(p("im.gguf")).unwrap();
    assert_eq!(im.chunk_count, Some(chunks as u64));
    // chunk-major: each chunk's Σx² through every layer, summed over the chunks
    let g = Gguf::open(&f16).unwrap();
    let m = Model::load(&g, 0).unwrap();
    let text = Text::load(&Tokenizer::from_gguf(&g).unwrap(), &calib).unwrap();
    let seqs: Vec<Vec<u32>> = (0..chunks).map(|c| text.chunk(c, ctx)).collect();
    let mut sums: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for s in &seqs {
        let run = [Run { seqs: vec![s.clone()], first: ctx - 1 }];
        m.pass(
            &run,
            &mut |names, cols, x| {
                for n in names {
                    let e = sums.entry(n.clone()).or_insert_with(|| vec![0.0; cols]);
                    for row in x.chunks(cols) {
                        e.iter_mut().zip(row).for_each(|(a, v)| *a += (*v as f64).powi(2));
                    }
                }
            },
            &mut |_| {},
        )
        .unwrap();
    }
    assert_eq!(m.layer_visits(), vec![chunks as u32; LAYERS], "chunk-major reads every layer once per chunk");
    let tokens = (chunks * ctx) as f64;
    for (name, s) in &sums {
        let e = im.entries.get(name).unwrap_or_else(|| panic!("{name} in the imatrix"));
        for (got, want) in e.values.iter().zip(s) {
            let want = want / tokens;
            assert!((*got as f64 - want).abs() <= 1e-5 * want.abs().max(1e-12), "{name}: {got} against {want}");
        }
    }

    // a feedback encode: the calibration visits each layer once
    let t = encode::run(&EncodeJob {
        f16: f16.clone(),
        imatrix: p("im.gguf"),
        base: base.clone(),
        out: p("deep.knot"),
        telemetry: None,
        opts: EncodeOptions { variant: Variant::new(8).unwrap(), ..Default::default() },
        mix: Default::default(),
        budget: None,
        allow_keep: false,
        feedback: Some(feedback::FeedbackOptions {
            text: calib.clone(),
            chunks: 2,
            seq: feedback::DEFAULT_SEQ,
            inputs: feedback::Inputs::DEFAULT,
            prior: feedback::DEFAULT_PRIOR,
            correction: feedback::DEFAULT_CORRECTION,
            refine: 0,
            products: kaiju::dataplane::linalg::Products::F32,
        }),
        quiet: true,
    })
    .unwrap();
    let f = t.feedback.as_ref().expect("a feedback report");
    assert_eq!(f.layer_visits, vec![1; LAYERS], "the calibration reads each layer once");
    assert_eq!(t.totals.encoded_tensors, LAYERS * 7);

    // the gate: one pass over each model, its figures those of the chunks run one by one
    let qspec = p("qspec.json");
    let minted = gate::mint(&f16, &["The license".into(), "def main():".into()], None, None).unwrap();
    std::fs::write(&qspec, serde_json::to_string(&minted.qspec).unwrap()).unwrap();
    let out = gate::run(&GateJob {
        knot: p("deep.knot"),
        qspec: qspec.clone(),
        reference: Some(f16.clone()),
        text: Some(calib.clone()),
        ctx,
        chunks,
        thresholds: Thresholds { kld_max: Some(10.0), ..Default::default() },
        ..Default::default()
    })
    .unwrap();
    assert_eq!(out.layer_visits, vec![1; LAYERS], "the knot read once: cases and text in one pass");
    assert_eq!(out.ref_layer_visits, Some(vec![1; LAYERS]), "the f16 read once");
    let q = out.quality.as_ref().expect("the distributional check ran");
    let kg = Gguf::open(p("deep.knot")).unwrap();
    let km = Model::load(&kg, 0).unwrap();
    let first = kaiju::dataplane::gate::text::first_scored(ctx);
    let (hr, hk) = (chunk_major(&m, &seqs, first), chunk_major(&km, &seqs, first));
    // the layer-major states, for the bound below
    let run = [quality::text_run(&text, ctx, chunks)];
    let lr = m.pass(&run, &mut |_, _, _| {}, &mut |_| {}).unwrap().remove(0);
    let lk = km.pass(&run, &mut |_, _, _| {}, &mut |_| {}).unwrap().remove(0);
    let (dr, dk) = (max_rel_diff(&lr, &hr), max_rel_diff(&lk, &hk));
    eprintln!("final states, layer-major against chunk-major: max relative difference f16 {dr:e}, knot {dk:e}");
    assert!(dr <= 1e-5 && dk <= 1e-5, "f16 {dr:e}, knot {dk:e}");
    let sw = kaiju::dataplane::clock::Stopwatch::start();
    let old = quality::score(&m, &km, &hr, &hk, &text, ctx, chunks, sw).unwrap();
    eprintln!(
        "gate: layer-major KLD {:.9} top-1 {:.4}% PPL ratio {:.9}; chunk-major {:.9} {:.4}% {:.9}",
        q.kld_mean, q.top1_pct, q.ppl_ratio, old.kld_mean, old.top1_pct, old.ppl_ratio
    );
    assert!(q.kld_mean > 0.0, "the knot differs from its f16");
    assert!((q.kld_mean - old.kld_mean).abs() <= 1e-4 * old.kld_mean, "{} against {}", q.kld_mean, old.kld_mean);
    assert!((q.ppl_ratio - old.ppl_ratio).abs() <= 1e-5, "{} against {}", q.ppl_ratio, old.ppl_ratio);
    assert!((q.top1_pct - old.top1_pct).abs() <= 100.0 / q.tokens_scored as f64 + 1e-9);
    // the argmax cases ran in the same pass: each is the one-sequence forward pass's answer
    for (c, case) in out.cases.iter().zip(minted.qspec.all_cases()) {
        let logits = km.forward(&case.prompt_tokens, true).unwrap();
        assert_eq!(c.top5, gate::top_k(&logits, 5), "case {:?}", case.prompt_tokens);
    }
}

/// The pages a pass has read are given back: a mapped tensor's resident size falls to
/// (almost) nothing after `Gguf::release`, the bytes read again are the same, and a file read
/// into memory keeps its bytes.
#[test]
fn released_pages_leave_the_process_and_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    let n = 8 << 20; // 32 MB of f32
    let bytes: Vec<u8> = (0..n as u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let plan = TensorPlan {
        name: "w".into(),
        dims: vec![n as u64],
        ty: kaiju::dataplane::gguf::types::F32,
        size: 4 * n as u64,
    };
    let mut w = GgufWriter::create(&path, &[], vec![plan]).unwrap();
    w.write_tensor("w", &bytes).unwrap();
    w.finish().unwrap();
    let g = Gguf::open(&path).unwrap();
    let t = g.tensor("w").unwrap();
    let sum = |b: &[u8]| b.iter().map(|&x| x as u64).sum::<u64>();
    let want = sum(&bytes);
    assert_eq!(sum(g.data(t)), want);
    let rss = || mapping_rss_kb(&path);
    let touched = rss();
    assert!(touched >= 30_000, "the read tensor is resident: {touched} kB");
    assert!(g.release(g.data(t)), "a mapped file's pages go back");
    let after = rss();
    assert!(after <= 1_000, "{after} kB resident after the release ({touched} kB before)");
    assert_eq!(sum(g.data(t)), want, "read again: the same bytes, faulted in from the file");
    let owned = Gguf::from_bytes(&path, std::fs::read(&path).unwrap()).unwrap();
    assert!(!owned.release(owned.data(owned.tensor("w").unwrap())), "bytes in memory are kept");
    assert_eq!(sum(owned.data(owned.tensor("w").unwrap())), want);
    assert!(!g.release(&bytes), "a slice of something else is ignored");
}

/// The resident kB of this process's mapping of `path` (`/proc/self/smaps`).
fn mapping_rss_kb(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let want = path.canonicalize().unwrap();
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            inside = line.ends_with(&*want.to_string_lossy());
        } else if inside && line.starts_with("Rss:") {
            total += line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

/// `imatrix` refuses bad input with an error naming the file, before any pass and before any
/// output is written.
#[test]
fn imatrix_refuses_bad_input_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let model = common::asset("tests/golden/forward/qwen2.gguf");
    let text = common::asset("assets/calib/calib.txt");
    std::fs::write(p("empty.txt"), "").unwrap();
    std::fs::write(p("short.txt"), "a few words").unwrap();
    // a GGUF with no layers: the tiny model's metadata with block_count 0, its embeddings only
    common::gguf_copy(&model, &p("nolayers.gguf"), None, |meta| {
        for (k, v) in meta.iter_mut() {
            if k == "qwen2.block_count" {
                *v = Value::U32(0);
            }
        }
    });
    let run = |model: &Path, text: &Path, out: &Path| {
        let job =
            ImatrixJob { model: model.into(), text: text.into(), out: out.into(), ctx: 64, chunks: 0, progress: false };
        compute_file(&job).map(|_| ()).unwrap_err().to_string()
    };
    let out = p("im.gguf");
    let cases: Vec<(String, PathBuf, PathBuf, PathBuf, &str)> = vec![
        ("missing text".into(), model.clone(), p("nope.txt"), out.clone(), "nope.txt"),
        ("empty text".into(), model.clone(), p("empty.txt"), out.clone(), "empty.txt"),
        ("text shorter than a chunk".into(), model.clone(), p("short.txt"), out.clone(), "short.txt"),
        ("a model with no matmuls".into(), p("nolayers.gguf"), text.clone(), out.clone(), "nolayers.gguf"),
        ("unwritable output".into(), model.clone(), text.clone(), PathBuf::from("/proc/im.gguf"), "/proc"),
        ("missing folder".into(), model.clone(), text.clone(), p("no/such/im.gguf"), "no/such"),
        ("output is the model".into(), model.clone(), text.clone(), model.clone(), "qwen2.gguf"),
        ("output is the text".into(), model.clone(), text.clone(), text.clone(), "calib.txt"),
    ];
    for (what, m, t, o, named) in cases {
        let e = run(&m, &t, &o);
        assert!(e.contains(named), "{what}: {e}");
        assert!(!out.exists(), "{what}: nothing written");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 3, "no temp or probe file left: {left:?}");
    assert!(std::fs::metadata(&model).unwrap().len() > 100_000 && std::fs::metadata(&text).unwrap().len() > 10_000);
}
