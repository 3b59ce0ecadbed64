//! llama.cpp importance matrices, in both the GGUF format (`<name>.in_sum2` / `<name>.counts`)
//! and the legacy binary `.dat` format, reduced to per-tensor per-column importances.

use crate::dataplane::gguf::{types, Gguf};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ImatrixError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Gguf(#[from] crate::dataplane::gguf::GgufError),
    #[error("{path}: at byte {offset}: {field}: {msg}")]
    Malformed { path: PathBuf, offset: u64, field: String, msg: String },
}

/// Importance of one weight tensor: `n_mat` matrices (experts) of `n_cols` input columns.
#[derive(Debug, Clone, PartialEq)]
pub struct ImEntry {
    pub n_cols: usize,
    pub n_mat: usize,
    pub values: Vec<f32>,
}

impl ImEntry {
    /// Importances of matrix `m` (expert index, 0 for dense weights).
    pub fn matrix(&self, m: usize) -> &[f32] {
        &self.values[m * self.n_cols..(m + 1) * self.n_cols]
    }
}

#[derive(Debug, Clone, Default)]
pub struct Imatrix {
    pub entries: BTreeMap<String, ImEntry>,
    pub datasets: Vec<String>,
    pub chunk_count: Option<u64>,
    pub format: &'static str,
}

impl Imatrix {
    /// Load either format (detected by the GGUF magic).
    pub fn load(path: impl AsRef<Path>) -> Result<Imatrix, ImatrixError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ImatrixError::Io { path: path.into(), source })?;
        Self::from_bytes(path, bytes)
    }

    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Imatrix, ImatrixError> {
        if bytes.starts_with(crate::dataplane::gguf::MAGIC) {
            Self::from_gguf(&Gguf::from_bytes(path, bytes)?)
        } else {
            Self::from_dat(path, &bytes)
        }
    }

    pub fn from_gguf(g: &Gguf) -> Result<Imatrix, ImatrixError> {
        let bad = |field: &str, msg: String| ImatrixError::Malformed {
            path: g.path.clone(),
            offset: 0,
            field: field.into(),
            msg,
        };
        if let Some(t) = g.get_str("general.type") {
            if t != "imatrix" {
                return Err(bad("general.type", format!("expected \"imatrix\", found {t:?}")));
            }
        }
        let mut im = Imatrix { format: "gguf", ..Default::default() };
        im.chunk_count = g.get_u64("imatrix.chunk_count");
        if let Some(crate::dataplane::gguf::Value::Array(_, items)) = g.get("imatrix.datasets") {
            im.datasets = items.iter().filter_map(|v| v.as_str().map(String::from)).collect();
        }
        for t in &g.tensors {
            let Some(name) = t.name.strip_suffix(".in_sum2") else {
                continue;
            };
            let counts_name = format!("{name}.counts");
            let c = g.tensor(&counts_name).ok_or_else(|| bad(&counts_name, "missing counts tensor".into()))?;
            if t.ty != types::F32 || c.ty != types::F32 {
                return Err(bad(&t.name, "in_sum2 and counts must be F32".into()));
            }
            let n_cols = t.ne0() as usize;
            let n_mat = t.n_rows() as usize;
            if c.n_elements() as usize != n_mat {
                return Err(bad(&counts_name, format!("has {} values for {n_mat} matrices", c.n_elements())));
            }
            let sums = f32s(g.data(t));
            let counts = f32s(g.data(c));
            let mut values = Vec::with_capacity(sums.len());
            for (m, &cnt) in counts.iter().enumerate() {
                for &s in &sums[m * n_cols..(m + 1) * n_cols] {
                    values.push(if cnt > 0.0 { s / cnt } else { 1.0 });
                }
            }
            im.entries.insert(name.to_string(), ImEntry { n_cols, n_mat, values });
        }
        Ok(im)
    }

    pub fn from_dat(path: &Path, b: &[u8]) -> Result<Imatrix, ImatrixError> {
        let mut pos = 0usize;
        let err = |pos: usize, field: &str, msg: String| ImatrixError::Malformed {
            path: path.into(),
            offset: pos as u64,
            field: field.into(),
            msg,
        };
        let rd_i32 = |pos: &mut usize, field: &str| -> Result<i32, ImatrixError> {
            let s = b.get(*pos..*pos + 4).ok_or_else(|| err(*pos, field, "truncated file".into()))?;
            *pos += 4;
            Ok(i32::from_le_bytes(s.try_into().expect("4 bytes")))
        };
        let n = rd_i32(&mut pos, "n_entries")?;
        if n < 0 || n as usize > b.len() / 12 {
            return Err(err(0, "n_entries", format!("{n} entries cannot fit in a {}-byte file", b.len())));
        }
        let mut im = Imatrix { format: "dat", ..Default::default() };
        for i in 0..n {
            let at = pos;
            let len = rd_i32(&mut pos, &format!("entry[{i}].name_len"))?;
            if len <= 0 || len as usize > b.len() - pos {
                return Err(err(at, &format!("entry[{i}].name_len"), format!("bad name length {len}")));
            }
            let name = String::from_utf8_lossy(&b[pos..pos + len as usize]).into_owned();
            pos += len as usize;
            let ncall = rd_i32(&mut pos, &format!("{name}.ncall"))?;
            let at = pos;
            let nval = rd_i32(&mut pos, &format!("{name}.nval"))?;
            if nval < 0 || nval as usize * 4 > b.len() - pos {
                return Err(err(
                    at,
                    &format!("{name}.nval"),
                    format!("{nval} values cannot fit in the rest of the file"),
                ));
            }
            let vals = f32s(&b[pos..pos + nval as usize * 4]);
            pos += nval as usize * 4;
            let values = vals.iter().map(|&v| if ncall > 0 { v / ncall as f32 } else { v }).collect();
            im.entries.insert(name, ImEntry { n_cols: nval as usize, n_mat: 1, values });
        }
        if b.len() - pos >= 8 {
            let last_chunk = rd_i32(&mut pos, "last_chunk")?;
            im.chunk_count = u64::try_from(last_chunk).ok();
            let len = rd_i32(&mut pos, "dataset_len")?;
            if len > 0 && len as usize <= b.len() - pos {
                im.datasets.push(String::from_utf8_lossy(&b[pos..pos + len as usize]).into_owned());
            }
        }
        Ok(im)
    }

    /// Importances for a weight tensor of the model, reshaped to its expert count.
    /// Legacy files store MoE entries flat; `n_cols` from the model fixes the shape.
    pub fn for_tensor(&self, name: &str, n_cols: usize) -> Option<ImEntry> {
        let e = self.entries.get(name)?;
        if e.n_cols == n_cols {
            return Some(e.clone());
        }
        if n_cols > 0 && e.values.len() % n_cols == 0 && e.n_mat == 1 {
            return Some(ImEntry { n_cols, n_mat: e.values.len() / n_cols, values: e.values.clone() });
        }
        None
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
