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
