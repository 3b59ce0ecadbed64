//! kaiju-tui: the control room and KAIJU1 encoder of a model-zoo quantization campaign.
//!
//! Two halves (see docs/ARCHITECTURE.md):
//! - [`dataplane`]: model files: GGUF I/O, the KAIJU1 codec, the encoder, the gate
//! - [`controlplane`]: the campaign: queue, tick, backends, watcher, control room
//!
//! and the edges they share: [`cli`] (clap), [`commands`] (dispatch), [`exit`] (exit codes),
//! [`config`], [`fsutil`] (crash-safe output).

// Numeric kernels (lattice decoding, dequantization, the forward pass) index fixed-size
// arrays by position on purpose.
#![allow(clippy::needless_range_loop)]

pub mod applog;
pub mod cli;
pub mod commands;
pub mod config;
pub mod controlplane;
pub mod dataplane;
pub mod exit;
pub mod fsutil;
pub mod redact;

#[cfg(test)]
mod structure {
    /// The data plane knows nothing of the campaign: no file under src/dataplane names the
    /// control plane or the edges (cli, commands, config, exit).
    #[test]
    fn the_data_plane_imports_nothing_from_the_control_plane_or_the_edges() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dataplane");
        let (mut stack, mut seen, mut bad) = (vec![root], 0, Vec::new());
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    seen += 1;
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.split("//").next().unwrap_or("");
                        for other in ["controlplane", "crate::cli", "crate::commands", "crate::config", "crate::exit"] {
                            if code.contains(other) {
                                bad.push(format!("{}:{}: {other}", p.display(), n + 1));
                            }
                        }
                    }
                }
            }
        }
        assert!(seen > 20, "only {seen} files under src/dataplane");
        assert!(bad.is_empty(), "the data plane reaches out: {bad:#?}");
    }
}
