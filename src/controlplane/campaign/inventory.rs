//! The prerequisite probe: for each model, f16 truth (GCS), imatrix and base knot (R2), its
//! qspec gate, and whether the KAIJU1 knot has shipped.

use super::ladder::FailedGate;
use super::queue::Entry;
use crate::controlplane::backend::store::{keys, ObjectStore, Probe};
use crate::dataplane::gate::qspec::{classify_file, GateKind};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct ModelInventory {
    pub f16: Probe,
    pub imatrix: Probe,
    pub base: Probe,
    pub gate: GateKind,
    /// `models/<id>-kaiju1.knot` in R2
    pub output: Probe,
    /// the knots of its encodes that failed their gates, by the gate logs R2 keeps of them
    /// (`campaign::ladder`); the listing's error where R2 could not say
    pub failed: Result<Vec<FailedGate>, String>,
}

impl ModelInventory {
    /// All four prerequisites present and the qspec is an argmax gate.
    pub fn ready(&self) -> bool {
        self.f16.is_present() && self.imatrix.is_present() && self.base.is_present() && self.gate.is_gate()
    }

    /// UNKNOWN checks with their errors.
    pub fn unknowns(&self) -> Vec<(&'static str, String)> {
        [("f16", &self.f16), ("imatrix", &self.imatrix), ("base", &self.base), ("output", &self.output)]
            .into_iter()
            .filter_map(|(n, p)| match p {
                Probe::Unknown(e) => Some((n, e.clone())),
                _ => None,
            })
            .collect()
    }

    /// What is missing, in words.
    pub fn missing(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.f16.is_absent() {
            v.push("no f16 truth".into());
        }
        if self.imatrix.is_absent() {
            v.push("no imatrix".into());
        }
        if self.base.is_absent() {
            v.push("no base knot".into());
        }
        if let Some(r) = self.gate.reason() {
            v.push(r);
        }
        v
    }
}

pub type Inventory = BTreeMap<String, ModelInventory>;

pub fn qspec_path(dir: &Path, id: &str) -> std::path::PathBuf {
    dir.join(format!("{id}.qspec.json"))
}

/// Threads for the probe: its checks wait on the network (cloud backends), not the CPU, so
/// the pool is sized for round trips in flight rather than for cores.
const PROBE_THREADS: usize = 16;

fn probe_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(PROBE_THREADS)
            .thread_name(|i| format!("kaiju-probe-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Probe every queue entry (concurrently; each check is independent).
pub fn probe(entries: &[Entry], gcs: &dyn ObjectStore, r2: &dyn ObjectStore, qspecs: &Path) -> Inventory {
    match probe_pool() {
        Some(pool) => pool.install(|| probe_all(entries, gcs, r2, qspecs)),
        None => probe_all(entries, gcs, r2, qspecs),
    }
}

fn probe_all(entries: &[Entry], gcs: &dyn ObjectStore, r2: &dyn ObjectStore, qspecs: &Path) -> Inventory {
    entries
        .par_iter()
        .map(|e| {
            let id = &e.id;
            let inv = ModelInventory {
                f16: gcs.head(&keys::f16(id)),
                imatrix: r2.head(&keys::imatrix(id)),
                base: r2.head(&keys::base(id)),
                gate: classify_file(&qspec_path(qspecs, id)),
                output: r2.head(&keys::kaiju_knot(id)),
                failed: r2
                    .list(&keys::kaiju_failed(id))
                    .map(|l| l.iter().filter_map(|o| FailedGate::of_key(id, &o.key)).collect())
                    .map_err(|e| e.to_string()),
            };
            for (check, why) in inv.unknowns() {
                log::info!(target: "probe", "{id}: {check} UNKNOWN: {why}");
            }
            (id.clone(), inv)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::backend::store::{ObjectMeta, StoreError};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A store whose every check waits, as a network round trip does, and which records how
    /// many checks were in flight at once.
    struct Slow {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl ObjectStore for Slow {
        fn describe(&self) -> String {
            "slow".into()
        }
        fn stat(&self, _: &str) -> Result<Option<ObjectMeta>, StoreError> {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(None)
        }
        fn get_to_file(&self, k: &str, _: &Path) -> Result<u64, StoreError> {
            Err(StoreError::NotFound { store: "slow".into(), key: k.into() })
        }
        fn get_range(&self, k: &str, _: u64, _: u64) -> Result<Vec<u8>, StoreError> {
            Err(StoreError::NotFound { store: "slow".into(), key: k.into() })
        }
        fn put_file(&self, _: &str, _: &Path) -> Result<(), StoreError> {
            Ok(())
        }
        fn list(&self, _: &str) -> Result<Vec<ObjectMeta>, StoreError> {
            Ok(vec![])
        }
    }

    #[test]
    fn the_probe_keeps_many_round_trips_in_flight_whatever_the_core_count() {
        let text: String = (0..24).map(|i| format!("m{i} params=1 family=llama READY-NOW\n")).collect();
        let q = crate::controlplane::campaign::queue::Queue::parse(std::path::Path::new("q.txt"), &text).unwrap();
        let s = Slow { now: AtomicUsize::new(0), most: AtomicUsize::new(0) };
        let inv = probe(&q.entries, &s, &s, Path::new("/nonexistent"));
        assert_eq!(inv.len(), 24);
        assert!(inv.values().all(|m| m.f16.is_absent() && m.output.is_absent()));
        let most = s.most.load(Ordering::SeqCst);
        assert!(most >= 8, "only {most} checks in flight at once");
    }
}
