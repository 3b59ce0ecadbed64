//! GGUF metadata values, kept exactly as stored so that a rewrite is byte-identical.

/// A metadata value. Strings are raw bytes (GGUF says UTF-8, but a copier must not care);
/// bools keep their raw byte.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(u8),
    Str(Vec<u8>),
    Array(u32, Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

pub const T_U8: u32 = 0;
pub const T_I8: u32 = 1;
pub const T_U16: u32 = 2;
pub const T_I16: u32 = 3;
pub const T_U32: u32 = 4;
pub const T_I32: u32 = 5;
pub const T_F32: u32 = 6;
pub const T_BOOL: u32 = 7;
pub const T_STR: u32 = 8;
pub const T_ARRAY: u32 = 9;
pub const T_U64: u32 = 10;
pub const T_I64: u32 = 11;
pub const T_F64: u32 = 12;

impl Value {
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => T_U8,
            Value::I8(_) => T_I8,
            Value::U16(_) => T_U16,
            Value::I16(_) => T_I16,
            Value::U32(_) => T_U32,
            Value::I32(_) => T_I32,
            Value::F32(_) => T_F32,
            Value::Bool(_) => T_BOOL,
            Value::Str(_) => T_STR,
            Value::Array(..) => T_ARRAY,
            Value::U64(_) => T_U64,
            Value::I64(_) => T_I64,
            Value::F64(_) => T_F64,
        }
    }

    pub fn str(s: &str) -> Value {
        Value::Str(s.as_bytes().to_vec())
    }

    /// Any integer value as u64 (negative values refused).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) if v >= 0 => Some(v as u64),
            Value::I16(v) if v >= 0 => Some(v as u64),
            Value::I32(v) if v >= 0 => Some(v as u64),
            Value::I64(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }

    /// A bool value (its raw byte nonzero); None for any other type.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b != 0),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// A short human rendering for `inspect`.
    pub fn summary(&self) -> String {
        match self {
            Value::Str(b) => {
                let s = String::from_utf8_lossy(b);
                if s.chars().count() > 60 {
                    format!("{:?}…", s.chars().take(60).collect::<String>())
                } else {
                    format!("{s:?}")
                }
            }
            Value::Array(t, items) => Value::array_summary(*t, items),
            Value::Bool(b) => (*b != 0).to_string(),
            Value::F32(v) => v.to_string(),
            Value::F64(v) => v.to_string(),
            other => other.as_u64().map(|v| v.to_string()).unwrap_or_else(|| format!("{other:?}")),
        }
    }

    /// A per-layer array of numbers or flags (a gemma4 file's head counts, FFN widths,
    /// sliding-window pattern) as its values, runs collapsed (`[6144 ×15, 12288 ×20]`), when
    /// that fits a line; any other array as its length and element type.
    fn array_summary(t: u32, items: &[Value]) -> String {
        let opaque = || format!("[{} × type {t}]", items.len());
        let scalar = |v: &Value| match v {
            Value::Bool(_) | Value::F32(_) | Value::F64(_) => Some(v.summary()),
            v => v.as_u64().map(|n| n.to_string()),
        };
        let Some(vals) = items.iter().map(scalar).collect::<Option<Vec<String>>>() else { return opaque() };
        let mut runs: Vec<(String, usize)> = Vec::new();
        for v in vals {
            match runs.last_mut() {
                Some((last, n)) if *last == v => *n += 1,
                _ => runs.push((v, 1)),
            }
        }
        let body: Vec<String> = runs.into_iter().map(|(v, n)| if n > 1 { format!("{v} ×{n}") } else { v }).collect();
        let s = format!("[{}]", body.join(", "));
        if items.is_empty() || s.chars().count() > 72 {
            opaque()
        } else {
            s
        }
    }

    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.push(*v as u8),
            Value::Bool(v) => out.push(*v),
            Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Str(b) => {
                out.extend_from_slice(&(b.len() as u64).to_le_bytes());
                out.extend_from_slice(b);
            }
            Value::Array(t, items) => {
                out.extend_from_slice(&t.to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for it in items {
                    it.write_to(out);
                }
            }
        }
    }
}
