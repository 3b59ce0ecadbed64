//! `kaiju-tui imatrix`: an importance matrix over a calibration text by the native forward
//! pass, in one layer-major pass over the model (`Model::pass`: each layer's weights read once,
//! its pages given back after it), written in llama.cpp's GGUF imatrix format with the entries
//! `llama-imatrix` writes: for each matmul weight of the layers, `<name>.in_sum2` (Σ x² of each
//! input column over every token of every chunk) and `<name>.counts` (those tokens), and the
//! metadata `general.type` = imatrix, `imatrix.datasets`, `imatrix.chunk_count` and
//! `imatrix.chunk_size`. The text is chunked as `llama-imatrix` chunks it (`text::Text`: the
//! whole text tokenized once, each chunk of `ctx` tokens starting with BOS where the model
//! adds one, every position of every chunk counted).

use super::model::{Model, Run};
use super::text::Text;
use super::tokenizer::Tokenizer;
use super::GateError;
use crate::dataplane::clock::Stopwatch;
use crate::dataplane::gguf::{types, Gguf, GgufWriter, TensorPlan, Value};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What `imatrix` is asked to do.
#[derive(Debug, Clone)]
pub struct ImatrixJob {
    /// the f16 (or any GGUF the forward pass runs)
    pub model: PathBuf,
    /// the calibration text
    pub text: PathBuf,
    pub out: PathBuf,
    /// tokens per chunk (`llama-imatrix -c`)
    pub ctx: usize,
    /// at most this many chunks (0: every whole chunk the text holds, as `llama-imatrix`)
    pub chunks: usize,
    /// report each layer on stderr
    pub progress: bool,
}

/// What an `imatrix` run did.
#[derive(Debug, Clone, Serialize)]
pub struct ImatrixReport {
    pub out: String,
    /// entries written (one per matmul weight)
    pub tensors: usize,
    pub chunks: usize,
    pub ctx: usize,
    pub tokens: usize,
    pub seconds: f64,
    pub cpu_seconds: f64,
    /// tokens through the whole model per second
    pub tokens_per_s: f64,
    /// for each layer, how many times the pass came to its weights (one: read once)
    #[serde(skip)]
    pub layer_visits: Vec<u32>,
}

/// Σ x² of each column of the T × `cols` input `x`, in f64, a block of columns per task.
fn column_sums_of_squares(x: &[f32], cols: usize) -> Vec<f64> {
    const BLOCK: usize = 256;
    let mut out = vec![0f64; cols];
    out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, acc)| {
        let (j0, n) = (b * BLOCK, acc.len());
        for row in x.chunks_exact(cols) {
            acc.iter_mut().zip(&row[j0..j0 + n]).for_each(|(s, &v)| *s += v as f64 * v as f64);
        }
    });
    out
}

/// Compute the importance matrix `job` asks for and write it. Every problem with the inputs
/// (a model the forward pass does not run or with no matmul weights, a text that is missing,
/// empty, not UTF-8 or shorter than one chunk) and with the output (a folder that does not
/// exist or cannot be written, a path that is one of the inputs) is an error naming the file,
/// before the pass and before anything is written.
pub fn compute_file(job: &ImatrixJob) -> Result<ImatrixReport, GateError> {
    crate::fsutil::check_outputs(&[("--out", &job.out)], &[("--model", &job.model), ("--text", &job.text)])
        .map_err(GateError::Output)?;
    let g = Gguf::open(&job.model)?;
    // a model without layers (no matmul weights) is refused by the load, naming the file
    let m = Model::load(&g, 0)?;
    let tok = Tokenizer::from_gguf(&g)?;
    let body = Text::load(&tok, &job.text)?;
    let chunks = body.chunks(job.ctx, job.chunks)?;
    let sw = Stopwatch::start();
    let run = Run { seqs: (0..chunks).map(|c| body.chunk(c, job.ctx)).collect(), first: job.ctx - 1 };
    let mut acc: BTreeMap<String, (Vec<f64>, u64)> = BTreeMap::new();
    let n = m.n_layer();
    m.pass(
        &[run],
        &mut |names, cols, x| {
            let sums = column_sums_of_squares(x, cols);
            for name in names {
                let e = acc.entry(name.clone()).or_insert_with(|| (vec![0f64; cols], 0));
                e.0.iter_mut().zip(&sums).for_each(|(a, s)| *a += s);
                e.1 += (x.len() / cols) as u64;
            }
        },
        &mut |l| {
            if job.progress {
                eprintln!("imatrix: layer {l}/{n}");
            }
        },
    )?;
    let lap = sw.lap();
    write_gguf(&job.out, &acc, &job.text, chunks as u32, job.ctx as u32)?;
    let tokens = chunks * job.ctx;
    Ok(ImatrixReport {
        out: job.out.display().to_string(),
        tensors: acc.len(),
        chunks,
        ctx: job.ctx,
        tokens,
        seconds: lap.wall,
        cpu_seconds: lap.cpu,
        tokens_per_s: tokens as f64 / lap.wall.max(1e-9),
        layer_visits: m.layer_visits(),
    })
}

fn write_gguf(
    out: &Path,
    acc: &BTreeMap<String, (Vec<f64>, u64)>,
    text: &Path,
    chunks: u32,
    ctx: u32,
) -> Result<(), GateError> {
    // llama-imatrix records the text's path as it was given
    let meta = vec![
        ("general.type".to_string(), Value::str("imatrix")),
        (
            "imatrix.datasets".to_string(),
            Value::Array(crate::dataplane::gguf::value::T_STR, vec![Value::str(&text.display().to_string())]),
        ),
        ("imatrix.chunk_count".to_string(), Value::U32(chunks)),
        ("imatrix.chunk_size".to_string(), Value::U32(ctx)),
    ];
    let mut plans = Vec::new();
    for (k, (s, _)) in acc {
        // as llama-imatrix shapes them: cols × matrices, and 1 × matrices
        plans.push(TensorPlan {
            name: format!("{k}.in_sum2"),
            dims: vec![s.len() as u64, 1],
            ty: types::F32,
            size: s.len() as u64 * 4,
        });
        plans.push(TensorPlan { name: format!("{k}.counts"), dims: vec![1, 1], ty: types::F32, size: 4 });
    }
    let mut w = GgufWriter::create(out, &meta, plans)?;
    for (k, (s, n)) in acc {
        let b: Vec<u8> = s.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
        w.write_tensor(&format!("{k}.in_sum2"), &b)?;
        w.write_tensor(&format!("{k}.counts"), &(*n as f32).to_le_bytes())?;
    }
    w.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn column_sums_of_squares_are_each_columns() {
        let cols = 300;
        let x: Vec<f32> = (0..3 * cols).map(|i| (i % 7) as f32 - 3.0).collect();
        let s = super::column_sums_of_squares(&x, cols);
        for (j, v) in s.iter().enumerate() {
            let want: f64 = (0..3).map(|t| (x[t * cols + j] as f64).powi(2)).sum();
            assert_eq!(*v, want, "column {j}");
        }
    }
}
