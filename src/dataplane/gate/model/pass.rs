//! The layer-major pass over a model: every token of every sequence through layer l before
//! layer l + 1, so that each layer's weights are read and decoded once per pass, and their
//! pages given back to the system after it. Memory is then one layer's weights plus the hidden
//! states, whatever the model's depth; a pass that ran each sequence through every layer in
//! turn would read the whole model once per sequence, from disk when it does not fit in memory.
//!
//! The gate (both models over the text, the argmax cases beside them), the `imatrix` command
//! and the one-sequence [`Model::forward_from`] run through [`Model::pass`]; the encoder's
//! calibration drives the same stages itself, one layer at a time, and gives each layer's
//! pages back with [`Model::release_layer`] as the pass does.
//!
//! [`Model::layer_visits`] counts, for each layer, how many times a stage came to it from
//! another layer: one per pass when the pass is layer-major.

use super::ops::{rms_norm, softcap};
use super::{Batch, Model, ModelError, Proj};
use std::sync::atomic::Ordering::Relaxed;

/// The most tokens whose stages run together (the gate's 16 chunks of 512): a pass over more
/// runs each layer group by group, every group through layer l before any reaches l + 1, so
/// that the stages' buffers (the FFN's two T × n_ff activations above all) stay bounded; the
/// layer's pages stay resident while its groups run.
pub const GROUP_TOKENS: usize = 8192;

/// Sequences of one length to run through a model, and the first position of each whose
/// final hidden states the caller keeps.
#[derive(Debug, Clone)]
pub struct Run {
    pub seqs: Vec<Vec<u32>>,
    pub first: usize,
}

/// What a pass shows its caller of each matmul's input: the names of the weights that read it,
/// its width (cols) and the T × cols input itself.
pub type Observe<'o> = dyn FnMut(&[String], usize, &[f32]) + 'o;

impl<'a> Model<'a> {
    /// Called by every stage of layer `li`: a stage that comes from another layer is a visit.
    pub(super) fn enter(&self, li: usize) {
        if self.current.swap(li, Relaxed) != li {
            self.visits[li].fetch_add(1, Relaxed);
        }
    }

    /// For each layer, how many times a stage came to its weights from another layer since
    /// the model was loaded: one per layer-major pass.
    pub fn layer_visits(&self) -> Vec<u32> {
        self.visits.iter().map(|v| v.load(Relaxed)).collect()
    }

    /// The file bytes of layer `li`'s weights that are read on every matmul (none for a model
    /// decoded up front).
    fn layer_bytes(&self, li: usize) -> impl Iterator<Item = &'a [u8]> + '_ {
        let l = &self.layers[li];
        let per_layer = l.per_layer.iter().flat_map(|p| [&p.inp_gate, &p.proj]);
        l.w.iter().flatten().chain(per_layer).filter_map(|w| w.mapped())
    }

    /// Give back the memory pages of layer `li`'s weights (`Gguf::release`): a pass is done
    /// with them.
    pub fn release_layer(&self, li: usize) {
        for b in self.layer_bytes(li) {
            self.file.release(b);
        }
    }

    /// Ask the system to read layer `li`'s weights ahead of their use.
    pub fn prefetch_layer(&self, li: usize) {
        if li < self.layers.len() {
            for b in self.layer_bytes(li) {
                self.file.prefetch(b);
            }
        }
    }

    /// Layer `li` over batch `b` with the model's own weights, the five stages in turn;
    /// `obs` sees each matmul's input once, with the names of the weights that read it.
    pub fn run_layer(&self, li: usize, b: &mut Batch, obs: &mut Observe<'_>) {
        let own = |p: Proj| self.weight(li, p).expect("a stage asks for the weights its layer has");
        let mut show = |group: usize, x: &[f32]| {
            let ps = Proj::BY_INPUT[group];
            let names: Vec<String> =
                ps.iter().filter(|&&p| self.weight(li, p).is_some()).map(|p| p.tensor(li)).collect();
            obs(&names, own(ps[0]).cols, x);
        };
        let h = self.layer_attn_in(li, b);
        show(0, &h);
        let att = self.layer_attention(li, &h, b, &own);
        drop(h);
        show(1, &att);
        let h = self.layer_attn_out(li, b, &att, &own);
        drop(att);
        show(2, &h);
        let g = self.layer_ffn_act(li, &h, &own);
        drop(h);
        show(3, &g);
        self.layer_ffn_out(li, b, &g, &own);
    }

    /// One layer-major pass over `runs`: each run's sequences embedded and cut into groups of
    /// at most [`GROUP_TOKENS`] tokens, every group through layer l before any reaches l + 1,
    /// each layer's pages given back after it and the next one's asked for ahead. `obs` sees
    /// every matmul's input (per group); `progress(l)` is called after layer l (1-based).
    /// Returns, for each run, the final hidden states (after the output norm) of positions
    /// `first..len` of each of its sequences, in order: S × (len − first) × n_embd.
    pub fn pass(
        &self,
        runs: &[Run],
        obs: &mut Observe<'_>,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut groups: Vec<(usize, Batch)> = Vec::new();
        for (r, run) in runs.iter().enumerate() {
            let len = run.seqs.first().map_or(0, Vec::len);
            if run.first >= len {
                return Err(ModelError::Empty);
            }
            let per_group = (GROUP_TOKENS / len).max(1);
            for seqs in run.seqs.chunks(per_group) {
                let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
                groups.push((r, self.embed(&refs)?));
            }
        }
        self.prefetch_layer(0);
        for li in 0..self.n_layer() {
            self.prefetch_layer(li + 1);
            for (_, b) in groups.iter_mut() {
                self.run_layer(li, b, obs);
            }
            self.release_layer(li);
            progress(li + 1);
        }
        let d = self.cfg.n_embd;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); runs.len()];
        for (r, b) in groups {
            let (first, len) = (runs[r].first, b.len);
            let mut h = vec![0f32; b.x.len()];
            rms_norm(&b.x, &self.out_norm, self.cfg.eps, &mut h);
            for seq in h.chunks(len * d) {
                out[r].extend_from_slice(&seq[first * d..]);
            }
        }
        Ok(out)
    }

    /// The logits of final hidden states `h` (T × n_embd, as [`Model::pass`] returns them):
    /// T × n_vocab, through the output matrix (or the tied embeddings) and the final soft-cap.
    pub fn logits(&self, h: &[f32]) -> Vec<f32> {
        let out_w = self.output.as_ref().unwrap_or(&self.tok_embd);
        let mut logits = vec![0f32; h.len() / self.cfg.n_embd * out_w.rows];
        out_w.matmul(self.products, h, &mut logits);
        if let Some(cap) = self.cfg.final_softcap {
            softcap(&mut logits, cap);
        }
        logits
    }
}
