//! Computing an importance matrix with the native forward pass: Σx² per input column of
//! every matmul weight over a calibration text, written in llama.cpp's GGUF imatrix format.

use super::model::{Model, DEFAULT_DENSE_LIMIT};
use super::text::Text;
use super::tokenizer::Tokenizer;
use super::GateError;
use crate::dataplane::gguf::{types, Gguf, GgufWriter, TensorPlan, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Returns the number of tensors written.
pub fn compute_file(model: &Path, text: &Path, ctx: usize, max_chunks: usize, out: &Path) -> Result<usize, GateError> {
    let g = Gguf::open(model)?;
    let tok = Tokenizer::from_gguf(&g)?;
    let body = Text::load(&tok, text)?;
    let chunks = body.chunks(ctx, max_chunks.max(1))?;
    let m = Model::load(&g, DEFAULT_DENSE_LIMIT)?;
    let mut acc: BTreeMap<String, (Vec<f64>, u64)> = BTreeMap::new();
    for c in 0..chunks {
        m.forward_observed(&body.chunk(c, ctx), ctx - 1, &mut |name, x| {
            let cols = x.len() / ctx;
            let e = acc.entry(name.to_string()).or_insert_with(|| (vec![0f64; cols], 0));
            for row in x.chunks(cols) {
                for (s, v) in e.0.iter_mut().zip(row) {
                    *s += (*v as f64) * (*v as f64);
                }
            }
            e.1 += (x.len() / cols) as u64;
        })?;
    }
    write_gguf(out, &acc, text, chunks as u32, ctx as u32)?;
    Ok(acc.len())
}

fn write_gguf(
    out: &Path,
    acc: &BTreeMap<String, (Vec<f64>, u64)>,
    text: &Path,
    chunks: u32,
    ctx: u32,
) -> Result<(), GateError> {
    let name = text.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let meta = vec![
        ("general.type".to_string(), Value::str("imatrix")),
        ("imatrix.datasets".to_string(), Value::Array(crate::dataplane::gguf::value::T_STR, vec![Value::str(&name)])),
        ("imatrix.chunk_count".to_string(), Value::U32(chunks)),
        ("imatrix.chunk_size".to_string(), Value::U32(ctx)),
    ];
    let mut plans = Vec::new();
    for (k, (s, _)) in acc {
        plans.push(TensorPlan {
            name: format!("{k}.in_sum2"),
            dims: vec![s.len() as u64],
            ty: types::F32,
            size: s.len() as u64 * 4,
        });
        plans.push(TensorPlan { name: format!("{k}.counts"), dims: vec![1], ty: types::F32, size: 4 });
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
