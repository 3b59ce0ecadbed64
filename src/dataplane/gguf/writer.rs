//! Streaming GGUF v3 writer: header and tensor infos first, then tensors one at a time in
//! plan order, each padded to the alignment. Output goes to a temp file in the target
//! directory and is fsynced and renamed into place by [`GgufWriter::finish`]; dropping an
//! unfinished writer removes the temp file, so a failed run never leaves a half knot.

use super::value::Value;
use super::{align_up, GgufError, Result, TypeId, DEFAULT_ALIGNMENT};
use crate::fsutil::TempFile;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// What will be written for one tensor.
#[derive(Debug, Clone)]
pub struct TensorPlan {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: TypeId,
    pub size: u64,
}

pub struct GgufWriter {
    tmp: TempFile,
    plans: Vec<TensorPlan>,
    next: usize,
    alignment: u64,
    written: u64,
    header_len: usize,
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Serialize header + metadata + tensor infos + padding to the data section.
pub fn encode_header(metadata: &[(String, Value)], plans: &[TensorPlan], alignment: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(super::MAGIC);
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(plans.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        push_str(&mut out, k);
        out.extend_from_slice(&v.type_id().to_le_bytes());
        v.write_to(&mut out);
    }
    let mut off = 0u64;
    for p in plans {
        push_str(&mut out, &p.name);
        out.extend_from_slice(&(p.dims.len() as u32).to_le_bytes());
        for d in &p.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&p.ty.0.to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
        off = align_up(off + p.size, alignment);
    }
    let pad = align_up(out.len() as u64, alignment) as usize - out.len();
    out.resize(out.len() + pad, 0);
    out
}

impl GgufWriter {
    pub fn create(path: &Path, metadata: &[(String, Value)], plans: Vec<TensorPlan>) -> Result<GgufWriter> {
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) if a.is_power_of_two() => *a as u64,
            Some((_, v)) => {
                return Err(GgufError::Malformed {
                    path: path.to_path_buf(),
                    offset: 0,
                    field: "general.alignment".into(),
                    msg: format!("expected a power-of-two u32, found {v:?}"),
                })
            }
            None => DEFAULT_ALIGNMENT,
        };
        let io = |source| GgufError::Io { path: path.to_path_buf(), source };
        // a killed earlier run of this output left its temp file: reclaim it, and say so
        let stale = crate::fsutil::remove_stale_temps(path);
        if !stale.is_empty() {
            let bytes: u64 = stale.iter().map(|(_, n)| n).sum();
            eprintln!(
                "kaiju-tui: removed {} temp file(s) of a killed earlier run beside {} ({bytes} bytes)",
                stale.len(),
                path.display()
            );
        }
        let mut tmp = TempFile::new(path).map_err(io)?;
        let header = encode_header(metadata, &plans, alignment);
        tmp.writer().write_all(&header).map_err(io)?;
        Ok(GgufWriter { tmp, plans, next: 0, alignment, written: 0, header_len: header.len() })
    }

    /// Replace the metadata written by [`GgufWriter::create`] with `metadata` whose header,
    /// padded to the alignment, has the same size, so that no tensor moves (e.g. a hash
    /// computed while the tensors were written, in place of a placeholder of its length).
    /// The alignment key must not change.
    pub fn rewrite_metadata(&mut self, metadata: &[(String, Value)]) -> Result<()> {
        let path = self.tmp.target().to_path_buf();
        let header = encode_header(metadata, &self.plans, self.alignment);
        if header.len() != self.header_len {
            return Err(GgufError::Tensor {
                path,
                tensor: "(header)".into(),
                msg: format!("rewritten metadata is {} bytes, the written one {}", header.len(), self.header_len),
            });
        }
        let io = |source| GgufError::Io { path: path.clone(), source };
        let w = self.tmp.writer();
        w.seek(SeekFrom::Start(0)).map_err(io)?;
        w.write_all(&header).map_err(io)?;
        w.seek(SeekFrom::End(0)).map_err(io)?;
        Ok(())
    }

    /// The plan of the tensor that must be written next, if any.
    pub fn next_plan(&self) -> Option<&TensorPlan> {
        self.plans.get(self.next)
    }

    /// Append bytes of the current tensor (may be called several times per tensor).
    pub fn write_part(&mut self, data: &[u8]) -> Result<()> {
        let path = self.tmp.target().to_path_buf();
        let plan = self.plans.get(self.next).ok_or_else(|| GgufError::Tensor {
            path: path.clone(),
            tensor: "?".into(),
            msg: "more tensor data than planned".into(),
        })?;
        if self.written + data.len() as u64 > plan.size {
            return Err(GgufError::Tensor {
                path,
                tensor: plan.name.clone(),
                msg: format!("{} bytes written but the plan says {}", self.written + data.len() as u64, plan.size),
            });
        }
        self.tmp.writer().write_all(data).map_err(|source| GgufError::Io { path, source })?;
        self.written += data.len() as u64;
        if self.written == plan.size {
            let pad = align_up(plan.size, self.alignment) - plan.size;
            let zeros = vec![0u8; pad as usize];
            let path = self.tmp.target().to_path_buf();
            self.tmp.writer().write_all(&zeros).map_err(|source| GgufError::Io { path, source })?;
            self.next += 1;
            self.written = 0;
        }
        Ok(())
    }

    /// Write one whole tensor; `name` must match the plan.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let path = self.tmp.target().to_path_buf();
        match self.plans.get(self.next) {
            Some(p) if p.name == name && p.size == data.len() as u64 && self.written == 0 => self.write_part(data),
            Some(p) => Err(GgufError::Tensor {
                path,
                tensor: name.into(),
                msg: format!("expected tensor {} of {} bytes next, got {} bytes", p.name, p.size, data.len()),
            }),
            None => Err(GgufError::Tensor { path, tensor: name.into(), msg: "no more tensors planned".into() }),
        }
    }

    /// fsync and rename into place; fails if any planned tensor is missing.
    pub fn finish(self) -> Result<()> {
        let path = self.tmp.target().to_path_buf();
        self.finish_synced()?.commit().map_err(|source| GgufError::Io { path, source })
    }

    /// fsync, leaving the file beside its path until the caller commits it (after the
    /// command's other outputs are written too); fails if any planned tensor is missing.
    pub fn finish_synced(self) -> Result<crate::fsutil::Synced> {
        let path = self.tmp.target().to_path_buf();
        if self.next != self.plans.len() {
            return Err(GgufError::Tensor {
                path,
                tensor: self.plans.get(self.next).map(|p| p.name.clone()).unwrap_or_default(),
                msg: format!("only {} of {} tensors were written", self.next, self.plans.len()),
            });
        }
        self.tmp.sync().map_err(|source| GgufError::Io { path, source })
    }
}
