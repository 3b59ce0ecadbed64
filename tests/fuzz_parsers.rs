//! Property-based fuzzing of the GGUF and imatrix parsers: mutated valid files and random
//! bytes must give a value or an error, never a panic. Bounded by PROPTEST_CASES (default
//! 256 here); `scripts/fuzz.sh` runs a longer campaign.

use kaiju::dataplane::gguf::value::{T_BOOL, T_F32, T_I32, T_STR, T_U32, T_U64};
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

/// The tokenizer metadata of the tiny qwen2 model (byte-level BPE), or the same vocabulary as
/// a SentencePiece one (scores added), alone in a GGUF with no tensors: the seeds of the
/// tokenizer fuzzing.
fn tokenizer_seed(spm: bool) -> Vec<(String, Value)> {
    let g = Gguf::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/forward/qwen2.gguf")).unwrap();
    let mut meta: Vec<(String, Value)> =
        g.metadata.iter().filter(|(k, _)| k.starts_with("tokenizer.") || k == "general.name").cloned().collect();
    if spm {
        let n = match g.get("tokenizer.ggml.tokens") {
            Some(Value::Array(_, t)) => t.len(),
            _ => 0,
        };
        for (k, v) in meta.iter_mut() {
            if k == "tokenizer.ggml.model" {
                *v = Value::str("llama");
            }
        }
        meta.push((
            "tokenizer.ggml.scores".into(),
            Value::Array(T_F32, (0..n).map(|i| Value::F32(-(i as f32))).collect()),
        ));
    }
    meta
}

/// A value of GGUF type `ty` made from `n`: a number of that type, or for strings one of a few
/// awkward ones (empty, a lone merge space, a byte-level token, a long run).
fn value_of(ty: u32, n: i64) -> Value {
    match ty {
        T_STR => Value::str(["", " ", "\u{120}x \u{120}y", "<0xFF>", &"a".repeat(300)][n.rem_euclid(5) as usize]),
        T_F32 => Value::F32(f32::from_bits(n as u32)),
        T_U32 => Value::U32(n as u32),
        T_U64 => Value::U64(n as u64),
        T_BOOL => Value::Bool((n & 1) as u8),
        _ => Value::I32(n as i32),
    }
}

/// One change to one key of the tokenizer's metadata: an array cut short, lengthened, one of
/// its elements replaced (each array stays of one type, as GGUF writes them), the key removed,
/// or its value replaced by a scalar or an array of another type.
fn mutate_tokenizer(
    meta: &mut Vec<(String, Value)>,
    key: prop::sample::Index,
    op: u8,
    at: prop::sample::Index,
    n: i64,
) {
    // an array three times in four: the arrays are what the loader indexes
    let arrays: Vec<usize> = (0..meta.len()).filter(|&i| matches!(meta[i].1, Value::Array(..))).collect();
    let k = if !op.is_multiple_of(4) && !arrays.is_empty() {
        arrays[key.index(arrays.len())]
    } else {
        key.index(meta.len())
    };
    let op = op / 4;
    let types = [T_I32, T_U32, T_U64, T_F32, T_STR, T_BOOL];
    match (op % 6, &mut meta[k].1) {
        (0, Value::Array(_, v)) => v.truncate(at.index(v.len() + 1)),
        (1, Value::Array(ty, v)) => v.push(value_of(*ty, n)),
        (2, Value::Array(ty, v)) if !v.is_empty() => {
            let i = at.index(v.len());
            v[i] = value_of(*ty, n);
        }
        (3, _) => {
            meta.remove(k);
        }
        (4, v) => *v = value_of(types[at.index(types.len())], n),
        (_, v) => {
            let ty = types[at.index(types.len())];
            *v = Value::Array(ty, (0..n.rem_euclid(8)).map(|i| value_of(ty, n.wrapping_add(i))).collect());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16 * cases()))]

    /// Tokenizer metadata with arrays of the wrong length, elements out of range, keys missing
    /// or of another type: the loader refuses it or the tokenizer runs; encoding and decoding
    /// never panic. Sixteen times the other targets' cases: a case loads no model, and an array
    /// one too long holding the one type the loader indexes tokens by is a narrow target.
    #[test]
    fn mutated_tokenizer_metadata_never_panics(
        spm in any::<bool>(),
        // small numbers more often than any: token types, ids and counts live there
        muts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<prop::sample::Index>(), prop_oneof![3 => 0i64..8, 1 => -2i64..400, 1 => any::<i64>()]), 1..6),
    ) {
        use kaiju::dataplane::gate::tokenizer::Tokenizer;
        let mut meta = tokenizer_seed(spm);
        for (key, op, at, n) in muts {
            if !meta.is_empty() {
                mutate_tokenizer(&mut meta, key, op, at, n);
            }
        }
        let g = Gguf::from_bytes("t.gguf", encode_header(&meta, &[], 32)).unwrap();
        if let Ok(t) = Tokenizer::from_gguf(&g) {
            let ids = t.encode("Hello world, 12345 <|endoftext|> \u{e9}\u{4e2d}  \n\tx");
            let _ = t.decode(&ids);
            let _ = t.decode(&[0, 1, 7, u32::MAX]);
        }
    }
}

/// The seeds themselves load and tokenize, so that the fuzzing starts from working metadata.
#[test]
fn tokenizer_seeds_load() {
    use kaiju::dataplane::gate::tokenizer::Tokenizer;
    for spm in [false, true] {
        let g = Gguf::from_bytes("t.gguf", encode_header(&tokenizer_seed(spm), &[], 32)).unwrap();
        let t = Tokenizer::from_gguf(&g).unwrap_or_else(|e| panic!("spm {spm}: {e}"));
        assert!(!t.encode("Hello world").is_empty(), "spm {spm}");
    }
}
