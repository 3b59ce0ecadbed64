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

    pub fn commit(mut self) -> io::Result<()> {
        let out = self.out.take().expect("temp file already committed");
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&self.tmp, &self.target)?;
        if let Some(dir) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

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
