//! Crash-safe file output: write to a temp file beside the target, fsync, rename.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A temp file next to `target`; removed on drop unless committed.
pub struct TempFile {
    target: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
}

impl TempFile {
    pub fn new(target: &Path) -> io::Result<TempFile> {
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        fs::create_dir_all(dir)?;
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), unique()));
        let f = File::create(&tmp)?;
        Ok(TempFile { target: target.to_path_buf(), tmp, out: Some(BufWriter::with_capacity(1 << 20, f)) })
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.out.as_mut().expect("temp file already committed")
    }

    pub fn commit(self) -> io::Result<()> {
        self.sync()?.commit()
    }

    /// Flush and fsync the temp file, leaving it beside the target until [`Synced::commit`]
    /// renames it into place: several outputs of one command are each written whole before
    /// any of them replaces what its path held.
    pub fn sync(mut self) -> io::Result<Synced> {
        let out = self.out.take().expect("temp file already committed");
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        let len = f.metadata()?.len();
        drop(f);
        Ok(Synced { target: self.target.clone(), tmp: self.tmp.clone(), len, done: false })
    }
}

/// A temp file written whole and fsynced, not yet in place; removed on drop unless committed.
pub struct Synced {
    target: PathBuf,
    tmp: PathBuf,
    len: u64,
    done: bool,
}

impl Synced {
    /// The bytes written.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rename into place and sync the folder.
    pub fn commit(mut self) -> io::Result<()> {
        fs::rename(&self.tmp, &self.target)?;
        self.done = true;
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for Synced {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.out.is_some() {
            self.out = None;
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Whether a process is running (not gone, not a zombie waiting for its parent).
pub fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'
        Ok(s) => s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Remove the temp files of [`TempFile`]'s naming beside `target` whose writing process is
/// gone: a killed run leaves its half-written output behind (gigabytes for a big knot), and a
/// later run would otherwise leave it there too. Returns each removed file and its size.
pub fn remove_stale_temps(target: &Path) -> Vec<(PathBuf, u64)> {
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else { return vec![] };
    let prefix = format!(".{name}.tmp-");
    let mut removed = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = f.strip_prefix(&prefix).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let size = e.metadata().map(|m| m.len()).unwrap_or(0);
        if fs::remove_file(e.path()).is_ok() {
            removed.push((e.path(), size));
        }
    }
    removed
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Write a whole small file atomically.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut t = TempFile::new(target)?;
    t.writer().write_all(bytes)?;
    t.commit()
}

/// Whether two paths name the same file (through links, hard links and relative paths).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Why an output path cannot be written: named by its flag.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{flag} {path}: {msg}")]
    Path { flag: &'static str, path: PathBuf, msg: String },
    #[error("{flag} {path} is also {input_flag} {input}: an output never replaces what the command reads")]
    IsInput { flag: &'static str, path: PathBuf, input_flag: &'static str, input: PathBuf },
    #[error("{flag} {path} is also {other_flag}: each output needs a file of its own")]
    Twice { flag: &'static str, path: PathBuf, other_flag: &'static str },
}

/// Check, before any work, that each output (by its flag) can be written where it is asked
/// for: not a directory, in a folder that exists and takes a new file (a probe file is made
/// and removed), not the same file as any input (through links too) nor as another output.
pub fn check_outputs(outputs: &[(&'static str, &Path)], inputs: &[(&'static str, &Path)]) -> Result<(), OutputError> {
    for (i, &(flag, out)) in outputs.iter().enumerate() {
        let bad = |msg: String| OutputError::Path { flag, path: out.to_path_buf(), msg };
        if out.is_dir() {
            return Err(bad("is a directory; expected a file to write".into()));
        }
        let folder = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !folder.is_dir() {
            return Err(bad(format!("its folder {} does not exist", folder.display())));
        }
        let probe = folder.join(format!(".kaiju-probe-{}-{}", std::process::id(), unique()));
        match fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(_) => {
                let _ = fs::remove_file(&probe);
            }
            Err(e) => return Err(bad(format!("its folder {} cannot be written: {e}", folder.display()))),
        }
        for &(input_flag, input) in inputs {
            if out == input || same_file(out, input) {
                return Err(OutputError::IsInput {
                    flag,
                    path: out.to_path_buf(),
                    input_flag,
                    input: input.to_path_buf(),
                });
            }
        }
        for &(other_flag, other) in &outputs[..i] {
            if out == other || same_file(out, other) {
                return Err(OutputError::Twice { flag, path: out.to_path_buf(), other_flag });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_checked_against_inputs_folders_and_each_other() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("model.gguf");
        fs::write(&input, b"x").unwrap();
        let link = d.path().join("link.gguf");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let out = d.path().join("out.gguf");
        let ins = [("--model", input.as_path())];
        assert!(check_outputs(&[("--out", &out)], &ins).is_ok());
        assert!(!out.exists(), "the check writes nothing");
        let e = check_outputs(&[("--out", &link)], &ins).unwrap_err().to_string();
        assert!(e.contains("--out") && e.contains("--model") && e.contains("link.gguf"), "{e}");
        let e = check_outputs(&[("--out", d.path())], &ins).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = check_outputs(&[("--out", &d.path().join("no/such/out.gguf"))], &ins).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = check_outputs(&[("--out", Path::new("/proc/out.gguf"))], &ins).unwrap_err().to_string();
        assert!(e.contains("cannot be written"), "{e}");
        let e = check_outputs(&[("--out", &out), ("--log", &out)], &ins).unwrap_err().to_string();
        assert!(e.contains("--log") && e.contains("--out"), "{e}");
        let left: Vec<_> = fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 2, "no probe file left behind: {left:?}");
    }

    #[test]
    fn stale_temps_of_dead_runs_go_and_live_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("m-kaiju1.knot");
        // a pid that has run and is gone
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = d.path().join(format!(".m-kaiju1.knot.tmp-{dead}-0"));
        fs::write(&stale, vec![0u8; 1234]).unwrap();
        let live = d.path().join(".m-kaiju1.knot.tmp-1-0"); // init never goes
        fs::write(&live, b"x").unwrap();
        let own = d.path().join(format!(".m-kaiju1.knot.tmp-{}-7", std::process::id()));
        fs::write(&own, b"x").unwrap();
        let other = d.path().join(format!(".other.knot.tmp-{dead}-0"));
        fs::write(&other, b"x").unwrap();
        assert_eq!(remove_stale_temps(&target), vec![(stale.clone(), 1234)]);
        assert!(!stale.exists() && live.exists() && own.exists() && other.exists());
        assert!(remove_stale_temps(&target).is_empty());
    }
}
