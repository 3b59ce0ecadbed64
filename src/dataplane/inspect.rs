//! `kaiju-tui inspect FILE`: a readable summary of a knot, GGUF model or imatrix.

use crate::dataplane::encode::is_matmul_weight;
use crate::dataplane::encode::plan::matmul_kind_layer;
use crate::dataplane::gguf::{Gguf, TensorInfo};
use crate::dataplane::imatrix::Imatrix;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

fn human(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < 4 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

/// Whether the file begins with GGUF's magic: its first four bytes only (a model can be
/// hundreds of GB).
fn starts_with_gguf_magic(path: &Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4);
    let f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    f.take(4).read_to_end(&mut head).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(head == crate::dataplane::gguf::MAGIC)
}

/// Summarise `path`; with `model`, an imatrix's coverage of that model's matmul weights.
/// The file is opened once: a GGUF file is mapped and read as a model or an imatrix by its
/// `general.type`; any other file is read as the one other format here, the legacy .dat.
pub fn inspect(path: &Path, model: Option<&Path>) -> anyhow::Result<String> {
    if !starts_with_gguf_magic(path)? {
        let im = Imatrix::load(path).map_err(|e| {
            anyhow::anyhow!("{}: neither GGUF (no \"GGUF\" magic) nor a legacy imatrix .dat ({e})", path.display())
        })?;
        return imatrix_summary(path, &im, model);
    }
    let g = Gguf::open(path)?;
    if g.get_str("general.type") == Some("imatrix") {
        return imatrix_summary(path, &Imatrix::from_gguf(&g)?, model);
    }
    let mut s = String::new();
    writeln!(
        s,
        "{}: GGUF v{}, {} bytes ({}), alignment {}",
        path.display(),
        g.version,
        g.file_len(),
        human(g.file_len()),
        g.alignment
    )?;
    writeln!(
        s,
        "architecture: {}   name: {}",
        g.architecture().unwrap_or("?"),
        g.get_str("general.name").unwrap_or("?")
    )?;
    writeln!(s, "metadata ({} keys):", g.metadata.len())?;
    for (k, v) in &g.metadata {
        writeln!(s, "  {k:<48} {}", v.summary())?;
    }
    let mut by_type: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
    writeln!(s, "tensors ({}):", g.tensors.len())?;
    writeln!(s, "  {:<36} {:<9} {:<22} {:>12} {:>6}", "name", "type", "shape", "bytes", "bpw")?;
    for t in &g.tensors {
        let e = by_type.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.n_elements();
        e.2 += t.size;
        let bpw = t.size as f64 * 8.0 / t.n_elements() as f64;
        writeln!(
            s,
            "  {:<36} {:<9} {:<22} {:>12} {:>6.3}{}",
            t.name,
            t.ty.name(),
            format!("{:?}", t.dims),
            t.size,
            bpw,
            if t.size_inferred { "  (size inferred)" } else { "" }
        )?;
    }
    writeln!(s, "by type:")?;
    for (ty, (n, el, by)) in &by_type {
        writeln!(
            s,
            "  {ty:<9} {n:>4} tensors {el:>12} weights {:>10} {:.3} bpw",
            human(*by),
            *by as f64 * 8.0 / *el as f64
        )?;
    }
    layer_notes(&mut s, &g)?;
    mix_grid(&mut s, &g)?;
    if let Some(m) = model {
        coverage(&mut s, &g, &Imatrix::load(m)?, &format!("{} with imatrix {}", path.display(), m.display()))?;
    }
    Ok(s)
}

/// What a reader of the tensor list needs to know about a gemma4 file's layers: the per-layer
/// embeddings (a token table as wide as all layers' inputs together, and each layer's gate,
/// projection and norm), which the encoder copies from the base knot (they are neither
/// attention nor FFN matmuls), and the layers that read an earlier layer's K/V (so they have
/// no attn_k / attn_v of their own).
fn layer_notes(s: &mut String, g: &Gguf) -> anyhow::Result<()> {
    let arch = g.architecture().unwrap_or("");
    let n_layer = g.get_u64(&format!("{arch}.block_count")).unwrap_or(0);
    let per_layer = g.get_u64(&format!("{arch}.embedding_length_per_layer_input")).unwrap_or(0);
    if per_layer > 0 {
        let size = |names: &dyn Fn(&str) -> bool| -> (usize, u64) {
            g.tensors.iter().filter(|t| names(&t.name)).fold((0, 0), |(n, b), t| (n + 1, b + t.size))
        };
        let table = size(&|n| n == "per_layer_token_embd.weight");
        let global = size(&|n| n.starts_with("per_layer_"));
        let own = size(&|n| {
            n.starts_with("blk.")
                && [".inp_gate.weight", ".proj.weight", ".post_norm.weight"].iter().any(|t| n.ends_with(t))
        });
        writeln!(
            s,
            "per-layer embeddings: {per_layer} per layer × {n_layer} layers; token table {} ({:.1}% of the file), \
             per_layer_model_proj and per_layer_proj_norm {}; per layer inp_gate, proj, post_norm: {} tensors, {} \
             (not KAIJU1 matmuls: copied from the base knot)",
            human(table.1),
            table.1 as f64 * 100.0 / g.file_len().max(1) as f64,
            human(global.1 - table.1),
            own.0,
            human(own.1)
        )?;
    }
    let shared = g.get_u64(&format!("{arch}.attention.shared_kv_layers")).unwrap_or(0);
    if shared > 0 && shared < n_layer {
        writeln!(
            s,
            "shared K/V: layers {}-{} read the K/V of earlier layers (no attn_k / attn_v of their own)",
            n_layer - shared,
            n_layer - 1
        )?;
    }
    Ok(())
}

/// A knot's mix: for each layer, each matmul kind's form (the KAIJU1 variant's q, or the
/// type a tensor kept from the base knot has). Nothing for a file without KAIJU1 tensors.
fn mix_grid(s: &mut String, g: &Gguf) -> anyhow::Result<()> {
    if !g.tensors.iter().any(|t| t.ty.kaiju().is_some()) {
        return Ok(());
    }
    let mut kinds: Vec<&str> = Vec::new();
    let mut cells: BTreeMap<u32, BTreeMap<&str, String>> = BTreeMap::new();
    for t in &g.tensors {
        let Some((kind, layer)) = matmul_kind_layer(&t.name) else { continue };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        let cell = t.ty.kaiju().map(|v| format!("q{}", v.q)).unwrap_or_else(|| t.ty.name().to_lowercase());
        cells.entry(layer).or_default().insert(kind, cell);
    }
    let w: Vec<usize> = kinds.iter().map(|k| k.len().max(4)).collect();
    writeln!(s, "mix (each matmul tensor's form: q = KAIJU1 variant, else the type kept from the base knot):")?;
    write!(s, "  {:<6}", "layer")?;
    for (k, w) in kinds.iter().zip(&w) {
        write!(s, " {k:<w$}")?;
    }
    writeln!(s)?;
    for (layer, row) in &cells {
        write!(s, "  {layer:<6}")?;
        for (k, w) in kinds.iter().zip(&w) {
            write!(s, " {:<w$}", row.get(k).map(String::as_str).unwrap_or("-"))?;
        }
        writeln!(s)?;
    }
    Ok(())
}

/// An imatrix's summary line, and with `model` its coverage of that model's matmul weights.
fn imatrix_summary(path: &Path, im: &Imatrix, model: Option<&Path>) -> anyhow::Result<String> {
    let mut s = String::new();
    writeln!(
        s,
        "{}: imatrix ({} format), {} entries, chunks {:?}, datasets {:?}",
        path.display(),
        im.format,
        im.entries.len(),
        im.chunk_count,
        im.datasets
    )?;
    if let Some(m) = model {
        coverage(&mut s, &Gguf::open(m)?, im, &m.display().to_string())?;
    }
    Ok(s)
}

/// How many of the model's matmul weights the imatrix covers, and which it misses.
fn coverage(s: &mut String, g: &Gguf, im: &Imatrix, what: &str) -> anyhow::Result<()> {
    let want: Vec<_> = g.tensors.iter().filter(|t| is_matmul_weight(&t.name)).collect();
    let uncovered: Vec<_> = want.iter().filter(|t| im.for_tensor(&t.name, t.ne0() as usize).is_none()).collect();
    writeln!(s, "imatrix coverage of {what}: {}/{} matmul weights", want.len() - uncovered.len(), want.len())?;
    // an entry of the right name but another width: the imatrix of another model, as the
    // encoder reports it, not a missing one
    let (wrong, missing): (Vec<&&TensorInfo>, Vec<&&TensorInfo>) =
        uncovered.into_iter().partition(|t| im.entries.contains_key(&t.name));
    if let Some(t) = wrong.first() {
        let e = &im.entries[&t.name];
        writeln!(
            s,
            "  width mismatch on {} of them: e.g. {} has {} columns, its imatrix entry {} (an imatrix of another model?)",
            wrong.len(),
            t.name,
            t.ne0(),
            e.n_cols
        )?;
    }
    for t in missing {
        writeln!(s, "  missing: {}", t.name)?;
    }
    Ok(())
}
