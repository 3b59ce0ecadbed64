//! Knot I/O on the real SmolLM2 file and on small generated files.

mod common;

use kaiju::dataplane::gguf::{dequant, types, writer::encode_header, Gguf, GgufWriter, TensorPlan, TypeId, Value};
use kaiju::dataplane::imatrix::Imatrix;
use std::path::Path;

#[test]
fn real_file_parses_and_round_trips_byte_identical() {
    let p = common::smollm2();
    let g = Gguf::open(&p).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.architecture(), Some("llama"));
    assert_eq!(g.tensors.len(), 272);
    assert_eq!(g.get_u64("llama.block_count"), Some(30));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("copy.gguf");
    let plans: Vec<TensorPlan> = g
        .tensors
        .iter()
        .map(|t| TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, size: t.size })
        .collect();
    let mut w = GgufWriter::create(&out, &g.metadata, plans).unwrap();
    for t in &g.tensors {
        w.write_tensor(&t.name, g.data(t)).unwrap();
    }
    w.finish().unwrap();
    let a = std::fs::read(&p).unwrap();
    let b = std::fs::read(&out).unwrap();
    assert_eq!(a.len(), b.len());
    assert!(a == b, "rewrite is not byte-identical");
}

#[test]
fn convert_to_f16_matches_llama_quantize_size_and_dequantizes_every_tensor() {
    let f16 = common::smollm2_f16();
    assert_eq!(std::fs::metadata(&f16).unwrap().len(), 270_885_952);
    let q = Gguf::open(common::smollm2()).unwrap();
    let g = Gguf::open(&f16).unwrap();
    assert_eq!(g.get_u64("general.file_type"), Some(1));
    for t in &q.tensors {
        let o = g.tensor(&t.name).unwrap();
        assert_eq!(o.dims, t.dims);
        if t.dims.len() >= 2 {
            assert_eq!(o.ty, types::F16, "{}", t.name);
        } else {
            assert_eq!(g.data(o), q.data(t), "{} copied", t.name);
        }
    }
    // spot-check one Q4_1 tensor: f16(dequant(q4_1)) element by element
    let t = q.tensor("blk.3.ffn_down.weight").unwrap();
    assert_eq!(t.ty, types::Q4_1);
    let vals = dequant::to_f32_vec(t.ty, q.data(t), t.ne0() as usize, t.n_elements() as usize).unwrap();
    assert_eq!(g.data(g.tensor(&t.name).unwrap()), &dequant::f32_to_f16_bytes(&vals)[..]);
}

#[test]
fn dequantizers_match_llama_cpp_gguf_py_golden_values() {
    // tests/golden/dequant.bin is produced by scripts/gen-golden-dequant.py with gguf-py
    let b = std::fs::read(common::asset("tests/golden/dequant.bin")).unwrap();
    let mut pos = 0;
    let mut seen = vec![];
    while pos < b.len() {
        let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
        let (ty, n, nb) = (rd(pos) as u32, rd(pos + 4), rd(pos + 8));
        pos += 12;
        let raw = &b[pos..pos + nb];
        pos += nb;
        let want: Vec<f32> = b[pos..pos + 4 * n].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        pos += 4 * n;
        let got = dequant::to_f32_vec(TypeId(ty), raw, n, n).unwrap();
        for i in 0..n {
            assert!(
                got[i].to_bits() == want[i].to_bits() || (got[i].is_nan() && want[i].is_nan()),
                "type {} element {i}: {} vs {}",
                TypeId(ty).name(),
                got[i],
                want[i]
            );
        }
        seen.push(TypeId(ty).name());
    }
    assert_eq!(seen, ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K", "F16", "BF16"]);
}

#[test]
fn both_imatrix_formats_give_the_same_importances() {
    let a = Imatrix::load(common::imatrix_gguf()).unwrap();
    let b = Imatrix::load(common::imatrix_dat()).unwrap();
    assert_eq!(a.format, "gguf");
    assert_eq!(b.format, "dat");
    assert_eq!(a.entries.len(), 210);
    assert_eq!(a.entries.keys().collect::<Vec<_>>(), b.entries.keys().collect::<Vec<_>>());
    for (k, ea) in &a.entries {
        let eb = &b.entries[k];
        assert_eq!(ea.values.len(), eb.values.len(), "{k}");
        for (x, y) in ea.values.iter().zip(&eb.values) {
            assert!((x - y).abs() <= 1e-5 * x.abs().max(y.abs()).max(1e-30), "{k}: {x} vs {y}");
        }
    }
    // every matmul weight of the model is covered
    let g = Gguf::open(common::smollm2()).unwrap();
    let matmuls = g.tensors.iter().filter(|t| kaiju::dataplane::encode::is_matmul_weight(&t.name)).count();
    assert_eq!(matmuls, 210);
}

fn small_gguf(ty: TypeId, dims: Vec<u64>, data: Vec<u8>) -> Vec<u8> {
    let meta = vec![("general.architecture".to_string(), Value::str("llama")), ("x.n".to_string(), Value::U32(7))];
    let plans = vec![TensorPlan { name: "t".into(), dims, ty, size: data.len() as u64 }];
    let mut v = encode_header(&meta, &plans, 32);
    v.extend_from_slice(&data);
    v.resize(v.len().div_ceil(32) * 32, 0);
    v
}

#[test]
fn unknown_type_ids_are_carried_with_an_inferred_size() {
    let bytes = small_gguf(TypeId(999), vec![5], vec![1, 2, 3, 4, 5, 6, 7]);
    let g = Gguf::from_bytes("t.gguf", bytes).unwrap();
    let t = &g.tensors[0];
    assert!(t.size_inferred);
    assert_eq!(&g.data(t)[..7], &[1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(t.ty.name(), "type#999");
}

#[test]
fn hostile_files_are_refused_without_panic_or_huge_allocation() {
    // 40 bytes claiming 2^60 tensors
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(1u64 << 60).to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.resize(40, 0);
    let e = Gguf::from_bytes("h.gguf", b).err().unwrap().to_string();
    assert!(e.contains("tensor_count") && e.contains("h.gguf"), "{e}");
    // big-endian
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_be_bytes());
    b.resize(24, 0);
    assert!(Gguf::from_bytes("be.gguf", b).err().unwrap().to_string().contains("big-endian"));
    // v2
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&2u32.to_le_bytes());
    b.resize(24, 0);
    assert!(Gguf::from_bytes("v2.gguf", b).err().unwrap().to_string().contains("version 2"));
    // a string claiming 2^40 bytes
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    b.resize(64, 0);
    let e = Gguf::from_bytes("s.gguf", b).err().unwrap().to_string();
    assert!(e.contains("at byte 24") && e.contains("string length"), "{e}");
    // every truncation of a valid file is an error, never a panic
    let ok = small_gguf(types::F32, vec![4], vec![0; 16]);
    Gguf::from_bytes("ok.gguf", ok.clone()).unwrap();
    for n in 0..ok.len() - 16 {
        assert!(Gguf::from_bytes("cut.gguf", ok[..n].to_vec()).is_err(), "prefix {n}");
    }
    // imatrix .dat claiming absurd counts
    let e = Imatrix::from_bytes(Path::new("i.dat"), (i32::MAX).to_le_bytes().to_vec()).err().unwrap().to_string();
    assert!(e.contains("n_entries"), "{e}");
}

/// Metadata can be rewritten in place while tensors are being written (a hash that becomes
/// known late), but only at the same padded size; the data is untouched either way.
#[test]
fn metadata_is_rewritten_in_place_at_the_same_size_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let plans = vec![
        TensorPlan { name: "a".into(), dims: vec![4], ty: types::F32, size: 16 },
        TensorPlan { name: "b".into(), dims: vec![4], ty: types::F32, size: 16 },
    ];
    let meta = |h: &str| {
        vec![("general.architecture".to_string(), Value::str("llama")), ("x.hash".to_string(), Value::str(h))]
    };
    let mut w = GgufWriter::create(&out, &meta("0000"), plans).unwrap();
    w.write_tensor("a", &[1u8; 16]).unwrap();
    // longer than the padding to the alignment (32) can absorb: the data would move
    let e = w.rewrite_metadata(&meta(&"0".repeat(40))).unwrap_err().to_string();
    assert!(e.contains("rewritten metadata is") && e.contains("bytes"), "{e}");
    w.rewrite_metadata(&meta("beef")).unwrap();
    w.write_tensor("b", &[2u8; 16]).unwrap();
    w.finish().unwrap();
    let g = Gguf::open(&out).unwrap();
    assert_eq!(g.get_str("x.hash"), Some("beef"));
    assert_eq!(g.data(g.tensor("a").unwrap()), &[1u8; 16]);
    assert_eq!(g.data(g.tensor("b").unwrap()), &[2u8; 16]);
}

#[test]
fn inspect_reads_both_imatrix_formats_and_names_a_file_that_is_neither() {
    let g = kaiju::dataplane::inspect::inspect(&common::imatrix_gguf(), None).unwrap();
    assert!(g.contains("imatrix (gguf format), 210 entries"), "{g}");
    let d = kaiju::dataplane::inspect::inspect(&common::imatrix_dat(), None).unwrap();
    assert!(d.contains("imatrix (dat format), 210 entries"), "{d}");
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"hello\n").unwrap();
    let e = kaiju::dataplane::inspect::inspect(&junk, None).unwrap_err().to_string();
    assert!(e.contains("junk.gguf: neither GGUF (no \"GGUF\" magic) nor a legacy imatrix .dat ("), "{e}");
    let e = kaiju::dataplane::inspect::inspect(&dir.path().join("absent"), None).unwrap_err().to_string();
    assert!(e.contains("absent: ") && e.contains("No such file"), "{e}");
    // another model's imatrix: the width mismatch the encoder reports, not every weight "missing"
    let s = kaiju::dataplane::inspect::inspect(&common::qwen05(), Some(&common::imatrix_gguf())).unwrap();
    assert!(s.contains("0/168 matmul weights") && s.contains("width mismatch on 168 of them"), "{s}");
    assert!(!s.contains("missing:"), "{s}");
}

/// A directory given where a GGUF is expected is named as such (mapping it failed with
/// "No such device").
#[test]
fn a_directory_is_not_a_gguf() {
    let d = tempfile::tempdir().unwrap();
    let e = kaiju::dataplane::gguf::Gguf::open(d.path()).err().expect("refused").to_string();
    assert_eq!(e, format!("{}: a directory; expected a GGUF file", d.path().display()));
}
