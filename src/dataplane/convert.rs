//! `kaiju-tui convert --to f16`: the local feeder's f16 step. Every weight with two or more
//! dims is dequantized and stored as F16 (as llama.cpp's `llama-quantize … F16` does); 1-D
//! tensors (norms, biases) are copied unchanged. Metadata is kept, with `general.file_type`
//! set to MOSTLY_F16.

use crate::dataplane::gguf::{dequant, types, Gguf, GgufWriter, TensorPlan, Value};
use crate::dataplane::progress::Progress;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Gguf(#[from] crate::dataplane::gguf::GgufError),
    #[error("{tensor}: {source}")]
    Dequant {
        tensor: String,
        #[source]
        source: dequant::DequantError,
    },
}

fn to_f16(t: &crate::dataplane::gguf::TensorInfo) -> bool {
    t.dims.len() >= 2 && t.name.ends_with("weight")
}

pub fn to_f16_file(input: &Path, output: &Path, quiet: bool) -> Result<u64, ConvertError> {
    let g = Gguf::open(input)?;
    let mut meta: Vec<(String, Value)> = g
        .metadata
        .iter()
        .filter(|(k, _)| k != "general.file_type" && k != "general.quantization_version")
        .cloned()
        .collect();
    meta.push(("general.quantization_version".into(), Value::U32(2)));
    meta.push(("general.file_type".into(), Value::U32(1)));
    let plans: Vec<TensorPlan> = g
        .tensors
        .iter()
        .map(|t| {
            if to_f16(t) {
                TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: types::F16, size: t.n_elements() * 2 }
            } else {
                TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, size: t.size }
            }
        })
        .collect();
    let total: u64 = g.tensors.iter().map(|t| t.n_elements()).sum();
    let mut prog = Progress::new("convert", total, quiet);
    let mut w = GgufWriter::create(output, &meta, plans)?;
    for t in &g.tensors {
        if to_f16(t) && t.ty != types::F16 {
            let vals = dequant::to_f32_vec(t.ty, g.data(t), t.ne0() as usize, t.n_elements() as usize)
                .map_err(|source| ConvertError::Dequant { tensor: t.name.clone(), source })?;
            w.write_tensor(&t.name, &dequant::f32_to_f16_bytes(&vals))?;
        } else {
            w.write_tensor(&t.name, g.data(t))?;
        }
        prog.advance(t.n_elements(), &t.name);
    }
    w.finish()?;
    Ok(std::fs::metadata(output).map(|m| m.len()).unwrap_or(0))
}
