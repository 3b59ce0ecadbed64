//! The local build service: each build a directory under `<root>/builds/` and a child
//! process (`kaiju-tui run-build DIR`) that runs [`super::pipeline`] there.

use super::build_dir::{
    read_status, runner_pid, write_status, LocalStores, LOG_FILE, RUNNER_PID_FILE, SPEC_FILE, STORES_FILE,
};
use crate::controlplane::backend::builds::{
    chrono_like, now, BuildError, BuildInfo, BuildService, BuildSpec, BuildStatus, LogChunk,
};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// How local builds run.
#[derive(Debug, Clone)]
pub enum Runner {
    /// Spawn `exe run-build DIR` and return at once (the real thing).
    Spawn { exe: PathBuf },
    /// Run the pipeline in this process before `submit` returns (tests, `demo`).
    Inline,
}

pub struct LocalBuilds {
    pub dir: PathBuf,
    pub stores: LocalStores,
    pub runner: Runner,
}

impl LocalBuilds {
    fn err(&self, msg: String) -> BuildError {
        BuildError::Service { service: self.describe(), msg }
    }

    fn new_id(&self, model: &str) -> String {
        let ms = (now() * 1000.0) as u64;
        let mut n = 0;
        loop {
            let id = format!("b{ms}-{n}-{model}");
            if !self.dir.join(&id).exists() {
                return id;
            }
            n += 1;
        }
    }
}

impl BuildService for LocalBuilds {
    fn describe(&self) -> String {
        format!("local-builds:{}", self.dir.display())
    }

    fn submit(&self, spec: &BuildSpec) -> Result<BuildInfo, BuildError> {
        let id = self.new_id(&spec.model_id);
        let dir = self.dir.join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| self.err(format!("{}: {e}", dir.display())))?;
        let info = BuildInfo::queued(id.clone(), spec, now());
        let w =
            |p: &str, v: Vec<u8>| crate::fsutil::write_atomic(&dir.join(p), &v).map_err(|e| self.err(e.to_string()));
        w(SPEC_FILE, serde_json::to_vec_pretty(spec).expect("serializes"))?;
        w(STORES_FILE, serde_json::to_vec_pretty(&self.stores).expect("serializes"))?;
        write_status(&dir, &info).map_err(|e| self.err(e.to_string()))?;
        match &self.runner {
            Runner::Inline => {
                super::pipeline::run_build(&dir);
            }
            Runner::Spawn { exe } => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(LOG_FILE))
                    .map_err(|e| self.err(e.to_string()))?;
                let log2 = log.try_clone().map_err(|e| self.err(e.to_string()))?;
                // in a process group of its own: a signal meant for the control room (Ctrl-C in
                // the terminal, SIGHUP when the terminal goes) does not kill the build with it
                let mut child = std::process::Command::new(exe)
                    .arg("run-build")
                    .arg(&dir)
                    .stdin(std::process::Stdio::null())
                    .stdout(log)
                    .stderr(log2)
                    .process_group(0)
                    .spawn()
                    .map_err(|e| self.err(format!("cannot start {}: {e}", exe.display())))?;
                // not in status.json: the runner may already be writing that one
                // (the runner records it too, so a failed write here loses nothing but the
                // report of a runner that dies before its first status)
                let _ = w(RUNNER_PID_FILE, child.id().to_string().into_bytes());
                // waited for by a thread of its own, so that a finished runner is reaped, not
                // left a zombie until this process exits; the build is followed through its
                // status file, not the child
                let _ = std::thread::Builder::new().name(format!("reap-{id}")).spawn(move || child.wait());
            }
        }
        self.get(&id)
    }

    fn list(&self, ongoing_only: bool) -> Result<Vec<BuildInfo>, BuildError> {
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(self.err(format!("{}: {e}", self.dir.display()))),
        };
        let mut out = Vec::new();
        for ent in rd.flatten() {
            if let Ok(b) = self.get(&ent.file_name().to_string_lossy()) {
                if !ongoing_only || b.status.is_ongoing() {
                    out.push(b);
                }
            }
        }
        out.sort_by(|a, b| b.create_time.total_cmp(&a.create_time).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    fn get(&self, id: &str) -> Result<BuildInfo, BuildError> {
        let dir = self.dir.join(id);
        let mut info =
            read_status(&dir).ok_or_else(|| BuildError::NoSuchBuild { service: self.describe(), id: id.into() })?;
        // a runner that died without finishing leaves WORKING behind: report it
        if info.status.is_ongoing() {
            if let Some(pid) = runner_pid(&dir, &info) {
                if !crate::fsutil::process_alive(pid) {
                    if let Some(again) = read_status(&dir).filter(|s| !s.status.is_ongoing()) {
                        return Ok(again);
                    }
                    info.status = BuildStatus::InternalError;
                    info.detail = Some(format!("runner process {pid} is gone"));
                    info.finish_time = Some(now());
                    let _ = write_status(&dir, &info);
                }
            }
        }
        Ok(info)
    }

    fn cancel(&self, id: &str) -> Result<(), BuildError> {
        let dir = self.dir.join(id);
        let mut info = self.get(id)?;
        if !info.status.is_ongoing() {
            return Err(self.err(format!("build {id} is {} and cannot be cancelled", info.status.as_str())));
        }
        std::fs::write(dir.join("cancel"), b"").map_err(|e| self.err(e.to_string()))?;
        if let Some(pid) = runner_pid(&dir, &info) {
            // let it go before its workspace is removed and its status written, so nothing is
            // written there after
            stop_runner(pid, std::time::Duration::from_secs(5));
        }
        // a killed runner neither logs nor cleans up: its half-written knot (tens of GB on a
        // big model) would stay in the workspace
        let _ = std::fs::remove_dir_all(dir.join("workspace"));
        info.status = BuildStatus::Cancelled;
        info.finish_time = Some(now());
        write_status(&dir, &info).map_err(|e| self.err(e.to_string()))?;
        let line = format!(
            "[{}] build CANCELLED by the operator (step {}); workspace removed\n",
            chrono_like(now()),
            info.step.as_deref().unwrap_or("-")
        );
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(LOG_FILE))
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()))
            .map_err(|e| self.err(e.to_string()))
    }

    fn read_log(&self, id: &str, offset: u64) -> Result<LogChunk, BuildError> {
        use std::io::{Read, Seek, SeekFrom};
        let p = self.dir.join(id).join(LOG_FILE);
        let mut f = match std::fs::File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LogChunk { data: vec![], next_offset: offset })
            }
            Err(e) => return Err(self.err(format!("{}: {e}", p.display()))),
        };
        f.seek(SeekFrom::Start(offset)).map_err(|e| self.err(e.to_string()))?;
        let mut data = Vec::new();
        f.take(1 << 20).read_to_end(&mut data).map_err(|e| self.err(e.to_string()))?;
        Ok(LogChunk { next_offset: offset + data.len() as u64, data })
    }
}

/// Stop a build's runner: SIGTERM, and SIGKILL where it is still alive after `grace` (a runner
/// stuck in a long write would otherwise outlive the cancel and write its status over
/// CANCELLED). Returns whether it is gone.
fn stop_runner(pid: u32, grace: std::time::Duration) -> bool {
    let gone_within = |d: std::time::Duration| {
        let t0 = std::time::Instant::now();
        loop {
            if !crate::fsutil::process_alive(pid) {
                return true;
            }
            if t0.elapsed() >= d {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
    if gone_within(grace) {
        return true;
    }
    let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    gone_within(std::time::Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::backend::builds::BuildKind;
    use std::collections::BTreeMap;
    use std::path::Path;

    /// A runner that ignores SIGTERM (as one stuck in a long write would outlive it) is killed
    /// after the grace period; one that does not is gone at once.
    #[test]
    fn a_runner_that_outlives_the_grace_period_is_killed() {
        let spawn = |script: &str| std::process::Command::new("sh").args(["-c", script]).spawn().unwrap();
        let d = tempfile::tempdir().unwrap();
        let ready = d.path().join("trapped");
        let mut stubborn = spawn(&format!("trap '' TERM; : > '{}'; while :; do sleep 0.05; done", ready.display()));
        // its trap is set once it has written the file
        for _ in 0..600 {
            if ready.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(ready.exists(), "the stand-in runner did not start");
        let t0 = std::time::Instant::now();
        assert!(stop_runner(stubborn.id(), std::time::Duration::from_millis(300)));
        assert!(t0.elapsed() >= std::time::Duration::from_millis(300), "it waited out the grace period first");
        let st = stubborn.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(9), "{st:?}");
        let mut plain = spawn("while :; do sleep 0.05; done");
        assert!(stop_runner(plain.id(), std::time::Duration::from_secs(5)));
        let st = plain.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(15), "{st:?}");
    }

    fn service(d: &Path, exe: PathBuf) -> LocalBuilds {
        let stores = LocalStores {
            gcs_dir: d.join("gcs"),
            r2_dir: d.join("r2"),
            hf_dir: d.join("hf"),
            calib_text: None,
            gate_text: None,
            feedback_text: None,
        };
        LocalBuilds { dir: d.join("builds"), stores, runner: Runner::Spawn { exe } }
    }

    /// A build submitted to a stand-in runner (a script that exits with `code` at once): the
    /// service and the build's id.
    fn submit_to_runner(d: &Path, code: u8) -> (LocalBuilds, String) {
        use std::os::unix::fs::PermissionsExt;
        let exe = d.join("runner.sh");
        std::fs::write(&exe, format!("#!/bin/sh\nexit {code}\n")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let b = service(d, exe);
        let spec = BuildSpec {
            kind: BuildKind::Encode,
            model_id: "m".into(),
            substitutions: BTreeMap::new(),
            tags: vec![],
            resources: Default::default(),
        };
        let id = b.submit(&spec).unwrap().id;
        (b, id)
    }

    /// A runner that dies before it writes a status is reported as an internal error, not
    /// left queued for ever; and `submit` never writes the status the runner owns.
    #[test]
    fn a_runner_gone_before_its_first_status_is_an_internal_error() {
        let d = tempfile::tempdir().unwrap();
        let (b, id) = submit_to_runner(d.path(), 3);
        let dir = b.dir.join(&id);
        assert_eq!(read_status(&dir).unwrap().pid, None, "submit leaves status.json to the runner");
        let mut status = BuildStatus::Queued;
        for _ in 0..100 {
            status = b.get(&id).unwrap().status;
            if !status.is_ongoing() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(status, BuildStatus::InternalError);
        assert!(b.get(&id).unwrap().detail.unwrap().contains("is gone"));
    }

    /// A finished runner is reaped by the process that spawned it (the control room, `demo`),
    /// not left a zombie until that process exits.
    #[test]
    fn a_finished_runner_is_reaped() {
        let d = tempfile::tempdir().unwrap();
        let (b, id) = submit_to_runner(d.path(), 0);
        let pid: u32 = std::fs::read_to_string(b.dir.join(&id).join(RUNNER_PID_FILE)).unwrap().parse().unwrap();
        // reaped: /proc has no entry for it (a zombie keeps one, in state Z, until waited for)
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(25));
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.contains(&id) && !s.contains("runner.sh"))
        });
        assert!(gone, "runner {pid} left a zombie: {:?}", std::fs::read_to_string(format!("/proc/{pid}/stat")));
    }
}
