//! The ggml tensor type table: ids, names, block geometry.
//!
//! Unknown ids are carried as [`TypeId`] values without a size; the reader infers their
//! byte span from the data layout so that copying never depends on understanding a type.

use crate::dataplane::codec::kaiju1;
use crate::dataplane::codec::kaiju1::Variant;

/// A ggml type id as stored in a tensor info (known or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeId(pub u32);

/// Geometry of a known type: `block` elements take `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockGeometry {
    pub name: &'static str,
    pub block: u64,
    pub bytes: u64,
}

const fn g(name: &'static str, block: u64, bytes: u64) -> Option<BlockGeometry> {
    Some(BlockGeometry { name, block, bytes })
}

pub const F32: TypeId = TypeId(0);
pub const F16: TypeId = TypeId(1);
pub const Q4_0: TypeId = TypeId(2);
pub const Q4_1: TypeId = TypeId(3);
pub const Q5_0: TypeId = TypeId(6);
pub const Q5_1: TypeId = TypeId(7);
pub const Q8_0: TypeId = TypeId(8);
pub const Q4_K: TypeId = TypeId(12);
pub const Q6_K: TypeId = TypeId(14);
pub const BF16: TypeId = TypeId(30);
/// The default KAIJU1 variant's type id (private, outside ggml's range; docs/KAIJU1.md).
pub const KAIJU1: TypeId = TypeId(Variant::TYPE_BASE + 4);

impl TypeId {
    /// F16, BF16 or F32: an unquantized tensor (what an f16 truth's matmul weights are).
    pub fn is_unquantized(self) -> bool {
        self == F16 || self == BF16 || self == F32
    }

    /// Block geometry from ggml's type table, `None` for ids this build does not know
    /// (and for KAIJU1, whose size is per row, see [`TypeId::row_bytes`]).
    pub fn geometry(self) -> Option<BlockGeometry> {
        match self.0 {
            0 => g("F32", 1, 4),
            1 => g("F16", 1, 2),
            2 => g("Q4_0", 32, 18),
            3 => g("Q4_1", 32, 20),
            6 => g("Q5_0", 32, 22),
            7 => g("Q5_1", 32, 24),
            8 => g("Q8_0", 32, 34),
            9 => g("Q8_1", 32, 40),
            10 => g("Q2_K", 256, 84),
            11 => g("Q3_K", 256, 110),
            12 => g("Q4_K", 256, 144),
            13 => g("Q5_K", 256, 176),
            14 => g("Q6_K", 256, 210),
            15 => g("Q8_K", 256, 292),
            16 => g("IQ2_XXS", 256, 66),
            17 => g("IQ2_XS", 256, 74),
            18 => g("IQ3_XXS", 256, 98),
            19 => g("IQ1_S", 256, 50),
            20 => g("IQ4_NL", 32, 18),
            21 => g("IQ3_S", 256, 110),
            22 => g("IQ2_S", 256, 82),
            23 => g("IQ4_XS", 256, 136),
            24 => g("I8", 1, 1),
            25 => g("I16", 1, 2),
            26 => g("I32", 1, 4),
            27 => g("I64", 1, 8),
            28 => g("F64", 1, 8),
            29 => g("IQ1_M", 256, 56),
            30 => g("BF16", 1, 2),
            34 => g("TQ1_0", 256, 54),
            35 => g("TQ2_0", 256, 66),
            39 => g("MXFP4", 32, 17),
            40 => g("NVFP4", 64, 36),
            41 => g("Q1_0", 128, 18),
            _ => None,
        }
    }

    /// The KAIJU1 variant of this type id, if it is one.
    pub fn kaiju(self) -> Option<Variant> {
        Variant::from_type_id(self.0)
    }

    pub fn name(self) -> String {
        if let Some(v) = self.kaiju() {
            return v.name();
        }
        match self.geometry() {
            Some(g) => g.name.to_string(),
            None => format!("type#{}", self.0),
        }
    }

    /// Bytes of one row of `ne0` elements, when the type is known and `ne0` fits its blocks.
    pub fn row_bytes(self, ne0: u64) -> Option<u64> {
        if let Some(v) = self.kaiju() {
            return Some(kaiju1::row_bytes(ne0 as usize, v) as u64);
        }
        let g = self.geometry()?;
        if !ne0.is_multiple_of(g.block) {
            return None;
        }
        (ne0 / g.block).checked_mul(g.bytes)
    }

    /// Bytes of a tensor with these dims, when the type is known.
    pub fn tensor_bytes(self, dims: &[u64]) -> Option<u64> {
        let ne0 = *dims.first().unwrap_or(&1);
        let rows = dims.iter().skip(1).try_fold(1u64, |a, &d| a.checked_mul(d))?;
        self.row_bytes(ne0)?.checked_mul(rows)
    }
}
