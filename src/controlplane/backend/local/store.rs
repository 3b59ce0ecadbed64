//! The local "buckets": each a directory, object keys as relative paths.

use crate::controlplane::backend::store::{ObjectMeta, ObjectStore, StoreError};
use std::path::{Path, PathBuf};

/// A bucket that is a directory (the embedded local default).
pub struct LocalStore {
    pub root: PathBuf,
}

impl LocalStore {
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { root: root.into() }
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        if key.is_empty() || key.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(self.err(key, "invalid object key".into()));
        }
        Ok(self.root.join(key))
    }

    fn err(&self, key: &str, msg: String) -> StoreError {
        StoreError::Other { store: self.describe(), key: key.into(), msg }
    }
}

impl ObjectStore for LocalStore {
    fn describe(&self) -> String {
        format!("local:{}", self.root.display())
    }

    fn stat(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let p = self.path(key)?;
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => Ok(Some(local_meta(key, &m))),
            Ok(_) => Err(self.err(key, format!("{}: not a regular file", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.err(key, format!("{}: {e}", p.display()))),
        }
    }

    fn get_to_file(&self, key: &str, dest: &Path) -> Result<u64, StoreError> {
        let p = self.path(key)?;
        if !p.exists() {
            return Err(StoreError::NotFound { store: self.describe(), key: key.into() });
        }
        if let Some(d) = dest.parent() {
            std::fs::create_dir_all(d).map_err(|e| self.err(key, e.to_string()))?;
        }
        let _ = std::fs::remove_file(dest);
        // a hard link is a free "download" for a local bucket; fall back to a copy
        if std::fs::hard_link(&p, dest).is_ok() {
            return std::fs::metadata(dest).map(|m| m.len()).map_err(|e| self.err(key, e.to_string()));
        }
        std::fs::copy(&p, dest).map_err(|e| self.err(key, e.to_string()))
    }

    fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        use std::io::{Read, Seek, SeekFrom};
        let p = self.path(key)?;
        let mut f = std::fs::File::open(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound { store: self.describe(), key: key.into() },
            _ => self.err(key, e.to_string()),
        })?;
        f.seek(SeekFrom::Start(start)).map_err(|e| self.err(key, e.to_string()))?;
        let mut buf = Vec::new();
        f.take(len).read_to_end(&mut buf).map_err(|e| self.err(key, e.to_string()))?;
        Ok(buf)
    }

    fn put_file(&self, key: &str, src: &Path) -> Result<(), StoreError> {
        let p = self.path(key)?;
        let mut t = crate::fsutil::TempFile::new(&p).map_err(|e| self.err(key, e.to_string()))?;
        let mut f = std::fs::File::open(src).map_err(|e| self.err(key, format!("{}: {e}", src.display())))?;
        std::io::copy(&mut f, t.writer()).map_err(|e| self.err(key, e.to_string()))?;
        t.commit().map_err(|e| self.err(key, e.to_string()))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut out = Vec::new();
        // only the folder the prefix names is walked (`models/a-kaiju1.failed/`: that one)
        let folder =
            prefix.rsplit_once('/').map(|(d, _)| d).filter(|d| !d.split('/').any(|c| c == ".." || c.is_empty()));
        let mut stack = vec![folder.map_or_else(|| self.root.clone(), |d| self.root.join(d))];
        while let Some(d) = stack.pop() {
            let rd = match std::fs::read_dir(&d) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(self.err(prefix, e.to_string())),
            };
            for ent in rd.flatten() {
                let p = ent.path();
                let name = ent.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&self.root) {
                    let key = rel.to_string_lossy().replace('\\', "/");
                    if key.starts_with(prefix) {
                        let m = ent.metadata().map_err(|e| self.err(&key, e.to_string()))?;
                        out.push(local_meta(&key, &m));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

fn local_meta(key: &str, m: &std::fs::Metadata) -> ObjectMeta {
    let mtime = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos());
    ObjectMeta { key: key.into(), size: m.len(), etag: mtime.map(|t| format!("{t:x}-{:x}", m.len())) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::backend::store::Probe;

    #[test]
    fn local_store_probe_put_get_list() {
        let d = tempfile::tempdir().unwrap();
        let s = LocalStore::new(d.path().join("bucket"));
        assert_eq!(s.head("models/a.knot"), Probe::Absent);
        let src = d.path().join("src");
        std::fs::write(&src, b"hello world").unwrap();
        s.put_file("models/a.knot", &src).unwrap();
        assert_eq!(s.head("models/a.knot"), Probe::Present { size: 11 });
        assert_eq!(s.get_range("models/a.knot", 6, 100).unwrap(), b"world");
        let dst = d.path().join("out/x");
        assert_eq!(s.get_to_file("models/a.knot", &dst).unwrap(), 11);
        let listed = s.list("models/").unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].key.as_str(), listed[0].size), ("models/a.knot", 11));
        assert_eq!(s.stat("models/a.knot").unwrap(), Some(listed[0].clone()));
        assert!(listed[0].etag.is_some());
        assert!(s.get_range("models/a.knot", 11, 10).unwrap().is_empty());
        assert!(matches!(s.head("../etc/passwd"), Probe::Unknown(_)));
    }

    #[test]
    fn unreadable_is_unknown_not_absent() {
        let d = tempfile::tempdir().unwrap();
        // a path component that is a file makes the lookup fail with ENOTDIR, not ENOENT
        std::fs::write(d.path().join("models"), b"x").unwrap();
        let s = LocalStore::new(d.path());
        let p = s.head("models/a/b.gguf");
        assert!(matches!(p, Probe::Unknown(_)), "{p:?}");
        // a directory where an object is expected is not an object, and not absent either
        std::fs::create_dir_all(d.path().join("dir/x.knot")).unwrap();
        assert!(matches!(s.head("dir/x.knot"), Probe::Unknown(_)));
    }
}
