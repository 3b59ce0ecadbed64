//! The prerequisite probe: for each model, f16 truth (GCS), imatrix and base knot (R2), its
//! qspec gate, and whether the KAIJU1 knot has shipped.

use super::qspec::{classify_file, GateKind};
use super::queue::Entry;
use crate::backend::store::{keys, ObjectStore, Probe};
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
            v.push("f16 truth".into());
        }
        if self.imatrix.is_absent() {
            v.push("imatrix".into());
        }
        if self.base.is_absent() {
            v.push("base knot".into());
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

/// Probe every queue entry (in parallel; each check is independent).
pub fn probe(entries: &[Entry], gcs: &dyn ObjectStore, r2: &dyn ObjectStore, qspecs: &Path) -> Inventory {
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
            };
            (id.clone(), inv)
        })
        .collect()
}
