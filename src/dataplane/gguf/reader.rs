//! Memory-mapped GGUF v3 reader. Refuses big-endian and v1/v2 files; every count and
//! length is checked against the bytes that remain before anything is allocated.

use super::value::*;
use super::{align_up, GgufError, Result, TypeId, DEFAULT_ALIGNMENT};
use memmap2::Mmap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// One tensor's info record plus its resolved byte span in the data section.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: TypeId,
    /// Offset relative to the data section, as stored.
    pub offset: u64,
    /// Byte size: from the type table, or (for unknown types) the span up to the next
    /// tensor / end of file, in which case `size_inferred` is set.
    pub size: u64,
    pub size_inferred: bool,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    pub fn ne0(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }
    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }
}

/// An open GGUF file.
pub struct Gguf {
    pub path: PathBuf,
    bytes: Source,
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

enum Source {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Map(m) => m,
            Source::Owned(v) => v,
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, field: &str, msg: impl Into<String>) -> GgufError {
        GgufError::Malformed {
            path: self.path.to_path_buf(),
            offset: self.pos as u64,
            field: field.to_string(),
            msg: msg.into(),
        }
    }
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(
                self.err(field, format!("needs {n} bytes but only {} remain (truncated file)", self.remaining()))
            );
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        Ok(self.take(N, field)?.try_into().expect("length checked"))
    }
    fn u32(&mut self, f: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(f)?))
    }
    fn u64(&mut self, f: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(f)?))
    }
    fn string(&mut self, field: &str) -> Result<Vec<u8>> {
        let at = self.pos;
        let n = self.u64(field)?;
        if n > self.remaining() as u64 {
            self.pos = at;
            return Err(
                self.err(field, format!("string length {n} exceeds the {} bytes that remain", self.remaining()))
            );
        }
        Ok(self.take(n as usize, field)?.to_vec())
    }
    fn value(&mut self, t: u32, field: &str, in_array: bool) -> Result<Value> {
        Ok(match t {
            T_U8 => Value::U8(self.arr::<1>(field)?[0]),
            T_I8 => Value::I8(self.arr::<1>(field)?[0] as i8),
            T_BOOL => Value::Bool(self.arr::<1>(field)?[0]),
            T_U16 => Value::U16(u16::from_le_bytes(self.arr(field)?)),
            T_I16 => Value::I16(i16::from_le_bytes(self.arr(field)?)),
            T_U32 => Value::U32(self.u32(field)?),
            T_I32 => Value::I32(i32::from_le_bytes(self.arr(field)?)),
            T_F32 => Value::F32(f32::from_le_bytes(self.arr(field)?)),
            T_U64 => Value::U64(self.u64(field)?),
            T_I64 => Value::I64(i64::from_le_bytes(self.arr(field)?)),
            T_F64 => Value::F64(f64::from_le_bytes(self.arr(field)?)),
            T_STR => Value::Str(self.string(field)?),
            T_ARRAY if !in_array => {
                let et = self.u32(field)?;
                if et == T_ARRAY {
                    return Err(self.err(field, "nested arrays are not allowed in GGUF"));
                }
                let min = match et {
                    T_U8 | T_I8 | T_BOOL => 1,
                    T_U16 | T_I16 => 2,
                    T_U32 | T_I32 | T_F32 => 4,
                    T_U64 | T_I64 | T_F64 | T_STR => 8,
                    _ => return Err(self.err(field, format!("unknown array element type {et}"))),
                };
                let n = self.u64(field)?;
                if n.checked_mul(min).is_none_or(|need| need > self.remaining() as u64) {
                    return Err(self.err(
                        field,
                        format!("array of {n} elements cannot fit in the {} bytes that remain", self.remaining()),
                    ));
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(et, field, true)?);
                }
                Value::Array(et, items)
            }
            _ => return Err(self.err(field, format!("unknown value type {t}"))),
        })
    }
}

impl Gguf {
    /// Open and parse a GGUF file via a read-only memory map.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let path = path.as_ref().to_path_buf();
        let io = |source| GgufError::Io { path: path.clone(), source };
        let f = File::open(&path).map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        if !meta.is_file() {
            // mapping a directory fails with "No such device", which names nothing useful
            let what = if meta.is_dir() { "a directory" } else { "not a regular file" };
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{what}; expected a GGUF file"),
            )));
        }
        let len = meta.len();
        let src = if len == 0 {
            Source::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only; files are not modified while we hold them
            // (our writer always writes to a temp file and renames).
            Source::Map(unsafe { Mmap::map(&f) }.map_err(io)?)
        };
        Self::parse(path, src)
    }

    /// Parse from an in-memory buffer (tests, fuzzing).
    pub fn from_bytes(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Gguf> {
        Self::parse(path.as_ref().to_path_buf(), Source::Owned(bytes))
    }

    fn parse(path: PathBuf, src: Source) -> Result<Gguf> {
        let b = src.bytes();
        let mut c = Cursor { b, pos: 0, path: &path };
        let magic = c.take(4, "magic")?;
        if magic != super::MAGIC {
            c.pos = 0;
            return Err(c.err("magic", format!("expected \"GGUF\", found {magic:?}")));
        }
        let version = c.u32("version")?;
        if version & 0xFFFF == 0 && version != 0 {
            c.pos = 4;
            return Err(
                c.err("version", "file is big-endian (byte-swapped version); only little-endian GGUF is supported")
            );
        }
        if version != 3 {
            c.pos = 4;
            return Err(c.err("version", format!("GGUF version {version} is not supported (expected 3)")));
        }
        let n_tensors = c.u64("tensor_count")?;
        let n_kv = c.u64("kv_count")?;
        // Every KV needs at least 8 (key len) + 4 (type) + 1 bytes; every tensor info at least 8+4+4+8.
        if n_kv.checked_mul(13).is_none_or(|n| n > c.remaining() as u64) {
            c.pos = 16;
            return Err(c.err("kv_count", format!("{n_kv} key/value pairs cannot fit in a {}-byte file", b.len())));
        }
        if n_tensors.checked_mul(24).is_none_or(|n| n > c.remaining() as u64) {
            c.pos = 8;
            return Err(c.err("tensor_count", format!("{n_tensors} tensors cannot fit in a {}-byte file", b.len())));
        }
        let mut metadata = Vec::with_capacity(n_kv as usize);
        for i in 0..n_kv {
            let key = c.string(&format!("kv[{i}].key"))?;
            let key = String::from_utf8(key).map_err(|_| c.err(&format!("kv[{i}].key"), "key is not UTF-8"))?;
            let t = c.u32(&format!("{key}.type"))?;
            let v = c.value(t, &key, false)?;
            metadata.push((key, v));
        }
        let mut alignment = DEFAULT_ALIGNMENT;
        if let Some((_, v)) = metadata.iter().find(|(k, _)| k == "general.alignment") {
            match v {
                Value::U32(a) if a.is_power_of_two() => alignment = *a as u64,
                other => {
                    return Err(c.err("general.alignment", format!("expected a power-of-two u32, found {other:?}")))
                }
            }
        }
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        for i in 0..n_tensors {
            let f = format!("tensor[{i}]");
            let name = c.string(&format!("{f}.name"))?;
            let name = String::from_utf8(name).map_err(|_| c.err(&format!("{f}.name"), "name is not UTF-8"))?;
            let nd = c.u32(&format!("{name}.n_dims"))?;
            if nd == 0 || nd > 4 {
                return Err(c.err(&format!("{name}.n_dims"), format!("expected 1..=4 dims, found {nd}")));
            }
            let mut dims = Vec::with_capacity(nd as usize);
            for d in 0..nd {
                let v = c.u64(&format!("{name}.ne[{d}]"))?;
                if v == 0 || v > (1 << 40) {
                    return Err(c.err(&format!("{name}.ne[{d}]"), format!("dimension {v} out of range")));
                }
                dims.push(v);
            }
            let ty = TypeId(c.u32(&format!("{name}.type"))?);
            let offset = c.u64(&format!("{name}.offset"))?;
            tensors.push(TensorInfo { name, dims, ty, offset, size: 0, size_inferred: false });
        }
        let data_offset = align_up(c.pos as u64, alignment);
        let data_len = (b.len() as u64).saturating_sub(data_offset);
        // Resolve sizes; unknown types span to the next offset.
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by_key(|&i| tensors[i].offset);
        for (k, &i) in order.iter().enumerate() {
            let end_limit = order.get(k + 1).map(|&j| tensors[j].offset).unwrap_or(data_len);
            let t = &mut tensors[i];
            let pe = |msg: String| GgufError::Tensor { path: path.clone(), tensor: t.name.clone(), msg };
            if t.offset % alignment != 0 {
                return Err(pe(format!("offset {} is not a multiple of the alignment {alignment}", t.offset)));
            }
            match t.ty.tensor_bytes(&t.dims) {
                Some(sz) => t.size = sz,
                None if t.ty.geometry().is_some() => {
                    return Err(pe(format!(
                        "row length {} is not a multiple of the {} block size",
                        t.ne0(),
                        t.ty.name()
                    )))
                }
                None => {
                    t.size = end_limit.saturating_sub(t.offset);
                    t.size_inferred = true;
                }
            }
            if t.offset.checked_add(t.size).is_none_or(|e| e > data_len) {
                return Err(pe(format!(
                    "data [{}, +{}) runs past the end of the data section ({} bytes)",
                    t.offset, t.size, data_len
                )));
            }
        }
        Ok(Gguf { path, bytes: src, version, metadata, tensors, alignment, data_offset })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(|v| v.as_str())
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|v| v.as_u64())
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(|v| v.as_f64())
    }

    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Raw bytes of a tensor.
    pub fn data(&self, t: &TensorInfo) -> &[u8] {
        let start = (self.data_offset + t.offset) as usize;
        &self.bytes.bytes()[start..start + t.size as usize]
    }

    pub fn file_len(&self) -> u64 {
        self.bytes.bytes().len() as u64
    }

    /// Give back the memory pages holding `bytes` (a slice of this file: a tensor's data), so
    /// that a pass over a model bigger than memory keeps only what it is working on resident.
    /// The mapping is read-only and shared with the file, which nothing writes while it is
    /// open: a page read again is faulted back in from the file with the same bytes. A file
    /// read into memory ([`Gguf::from_bytes`]) keeps its bytes, and a slice of something else
    /// is ignored. Returns whether pages were given back.
    pub fn release(&self, bytes: &[u8]) -> bool {
        let Some((map, offset)) = self.map_offset(bytes) else {
            return false;
        };
        // SAFETY: DontNeed on a shared read-only file mapping drops the pages from this
        // process; any later read (a borrow still alive included) faults the file's unchanged
        // bytes back in, so no borrow ever sees different contents.
        unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, bytes.len()) }.is_ok()
    }

    /// Ask the system to start reading `bytes` (a slice of this file) ahead of their use: the
    /// next layer of a pass, while this one computes.
    pub fn prefetch(&self, bytes: &[u8]) {
        if let Some((map, offset)) = self.map_offset(bytes) {
            // advice only: a refusal changes nothing but the timing
            let _ = map.advise_range(memmap2::Advice::WillNeed, offset, bytes.len());
        }
    }

    /// The mapping and `bytes`' offset in it, where `bytes` is a non-empty slice of it.
    fn map_offset(&self, bytes: &[u8]) -> Option<(&Mmap, usize)> {
        let Source::Map(map) = &self.bytes else {
            return None;
        };
        let (base, at) = (map.as_ptr() as usize, bytes.as_ptr() as usize);
        let offset = at.checked_sub(base)?;
        (!bytes.is_empty() && offset.checked_add(bytes.len())? <= map.len()).then_some((map, offset))
    }
}
