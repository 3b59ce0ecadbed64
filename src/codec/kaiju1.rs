pub fn row_bytes(n: usize) -> usize { let nb = n.div_ceil(24); nb.div_ceil(8) * 6 + nb * 6 }
pub fn dequantize(_s: &[u8], _n: usize, _d: &mut [f32]) -> Result<(), std::io::Error> { todo!() }
