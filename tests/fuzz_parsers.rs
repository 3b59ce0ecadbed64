//! Property-based fuzzing of the GGUF and imatrix parsers: mutated valid files and random
//! bytes must give a value or an error, never a panic. Bounded by PROPTEST_CASES (default
//! 256 here); `scripts/fuzz.sh` runs a longer campaign.

use kaiju::dataplane::gguf::{types, writer::encode_header, Gguf, TensorPlan, Value};
use kaiju::dataplane::imatrix::Imatrix;
use proptest::prelude::*;
use std::path::Path;

fn seed_gguf() -> Vec<u8> {
    let meta = vec![
        ("general.architecture".to_string(), Value::str("llama")),
        ("a.arr".to_string(), Value::Array(4, vec![Value::U32(1), Value::U32(2)])),
        ("a.s".to_string(), Value::Array(8, vec![Value::str("x"), Value::str("yz")])),
    ];
    let plans = vec![
        TensorPlan { name: "t.in_sum2".into(), dims: vec![4], ty: types::F32, size: 16 },
        TensorPlan { name: "t.counts".into(), dims: vec![1], ty: types::F32, size: 4 },
    ];
    let mut v = encode_header(&meta, &plans, 32);
    v.extend_from_slice(&[0; 32]);
    v.extend_from_slice(&1f32.to_le_bytes());
    v.resize(v.len().div_ceil(32) * 32, 0);
    v
}

fn seed_dat() -> Vec<u8> {
    let mut v = 1i32.to_le_bytes().to_vec();
    v.extend_from_slice(&1i32.to_le_bytes());
    v.push(b't');
    v.extend_from_slice(&2i32.to_le_bytes());
    v.extend_from_slice(&2i32.to_le_bytes());
    v.extend_from_slice(&1f32.to_le_bytes());
    v.extend_from_slice(&2f32.to_le_bytes());
    v
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn mutated_gguf_never_panics(muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut b = seed_gguf();
        for (i, v) in muts { let k = i.index(b.len()); b[k] = v; }
        if let Ok(g) = Gguf::from_bytes("m.gguf", b.clone()) {
            for t in &g.tensors { let _ = g.data(t); }
        }
        let _ = Imatrix::from_bytes(Path::new("m.gguf"), b);
    }

    #[test]
    fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut g = b"GGUF\x03\0\0\0".to_vec();
        g.extend_from_slice(&b);
        let _ = Gguf::from_bytes("r.gguf", g);
        let _ = Imatrix::from_bytes(Path::new("r.dat"), b);
    }

    #[test]
    fn mutated_dat_never_panics(muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut b = seed_dat();
        for (i, v) in muts { let k = i.index(b.len()); b[k] = v; }
        let _ = Imatrix::from_bytes(Path::new("m.dat"), b);
    }
}
