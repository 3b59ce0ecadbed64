//! The hexacode over GF(4) and the binary Golay code in its MOG form.
//!
//! Coordinates of a 24-vector are arranged as a 4×6 array, coordinate `i = 4·col + row`.
//! A binary array is a Golay codeword iff every column's parity equals the top row's parity
//! and the column "scores" (row r weighted by 0, 1, ω, ω̄) form a hexacodeword.

/// GF(4) = {0, 1, ω, ω̄} encoded 0, 1, 2, 3; addition is XOR.
pub fn gf4_mul(a: u8, b: u8) -> u8 {
    const T: [[u8; 4]; 4] = [[0, 0, 0, 0], [0, 1, 2, 3], [0, 2, 3, 1], [0, 3, 1, 2]];
    T[a as usize][b as usize]
}

/// The 64 hexacode words (a, b, c, φ(1), φ(ω), φ(ω̄)) for φ(x) = a·x² + b·x + c,
/// in the order of the index a·16 + b·4 + c.
pub const fn hexacode() -> [[u8; 6]; 64] {
    const MUL: [[u8; 4]; 4] = [[0, 0, 0, 0], [0, 1, 2, 3], [0, 2, 3, 1], [0, 3, 1, 2]];
    let mut out = [[0u8; 6]; 64];
    let mut idx = 0;
    while idx < 64 {
        let (a, b, c) = ((idx >> 4) as u8, ((idx >> 2) & 3) as u8, (idx & 3) as u8);
        out[idx][0] = a;
        out[idx][1] = b;
        out[idx][2] = c;
        let xs = [1u8, 2, 3];
        let mut k = 0;
        while k < 3 {
            let x = xs[k];
            let x2 = MUL[x as usize][x as usize];
            out[idx][3 + k] = MUL[a as usize][x2 as usize] ^ MUL[b as usize][x as usize] ^ c;
            k += 1;
        }
        idx += 1;
    }
    out
}

pub static HEXACODE: [[u8; 6]; 64] = hexacode();

/// Score of a column pattern (bit r = row r): 0·b0 + 1·b1 + ω·b2 + ω̄·b3.
pub const fn score(p: u8) -> u8 {
    ((p >> 1) & 1) ^ (((p >> 2) & 1) * 2) ^ (((p >> 3) & 1) * 3)
}

/// The column pattern with top bit 0 and the given score and parity (its complement is
/// the only other pattern with that score and parity).
pub const fn rep_pattern(score_v: u8, parity: u8) -> u8 {
    let mut p = 0u8;
    while p < 16 {
        if p & 1 == 0 && score(p) == score_v && (p.count_ones() as u8 & 1) == parity {
            return p;
        }
        p += 2;
    }
    unreachable!()
}

/// Is the 24-bit mask (bit i = coordinate i) a Golay codeword?
pub fn is_codeword(mask: u32) -> bool {
    let col = |j: usize| ((mask >> (4 * j)) & 15) as u8;
    let top_parity = (0..6).map(|j| col(j) & 1).fold(0, |a, b| a ^ b);
    if (0..6).any(|j| col(j).count_ones() as u8 & 1 != top_parity) {
        return false;
    }
    let s: Vec<u8> = (0..6).map(|j| score(col(j))).collect();
    let idx = (s[0] as usize) << 4 | (s[1] as usize) << 2 | s[2] as usize;
    HEXACODE[idx][3..] == s[3..]
}

/// All 4096 Golay codewords as masks.
pub fn codewords() -> Vec<u32> {
    let mut out = Vec::with_capacity(4096);
    for parity in 0..2u8 {
        for h in HEXACODE.iter() {
            for choice in 0..64u32 {
                let mut mask = 0u32;
                let mut top = 0u8;
                for (j, &s) in h.iter().enumerate() {
                    let mut p = rep_pattern(s, parity);
                    if choice >> j & 1 == 1 {
                        p ^= 15;
                    }
                    top ^= p & 1;
                    mask |= (p as u32) << (4 * j);
                }
                if top == parity {
                    out.push(mask);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hexacode_is_a_6_3_4_code() {
        let w = |h: &[u8; 6]| h.iter().filter(|&&s| s != 0).count();
        let mut dist = [0usize; 7];
        for h in HEXACODE.iter() {
            dist[w(h)] += 1;
        }
        assert_eq!(dist, [1, 0, 0, 0, 45, 0, 18]);
    }

    #[test]
    fn golay_weight_distribution() {
        let cw = codewords();
        assert_eq!(cw.len(), 4096);
        let mut dist = [0usize; 25];
        for &c in &cw {
            assert!(is_codeword(c));
            dist[c.count_ones() as usize] += 1;
        }
        let mut expect = [0usize; 25];
        expect[0] = 1;
        expect[8] = 759;
        expect[12] = 2576;
        expect[16] = 759;
        expect[24] = 1;
        assert_eq!(dist, expect);
        // Linearity.
        let set: std::collections::HashSet<u32> = cw.iter().copied().collect();
        for i in (0..4096).step_by(97) {
            for j in (0..4096).step_by(89) {
                assert!(set.contains(&(cw[i] ^ cw[j])));
            }
        }
        assert!(!is_codeword(1));
    }
}
