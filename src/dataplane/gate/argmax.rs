//! The gate's argmax cases: each qspec prompt's greedy next token on the knot (and, given the
//! f16, on the f16 too, with the f16's margin), the rule that turns a low-margin swap into an
//! inconclusive case, and `mint-gate` (an argmax qspec from the f16's own predictions).
//!
//! A case's **margin** is the f16's top-1 logit minus its top-2. When it is small the f16
//! itself barely prefers its token: any knot that is not the f16 is about as likely to swap
//! the two as to keep them, so a failed case says nothing about damage. The contract:
//! without `argmax_min_margin` every case is strict (the knot's argmax must be the expected
//! token); with it (and distributional thresholds, on which the verdict then rests) a case the
//! knot fails only by choosing the f16's runner-up, where the f16's margin is below the level,
//! is INCONCLUSIVE instead of FAIL.

use super::model::{Model, Run};
use super::qspec::{GateCase, QSpec, LOW_MARGIN};
use super::{tokenizer, GateError};
use crate::dataplane::gguf::Gguf;
use serde::Serialize;
use std::path::Path;

/// Top-k (token, logit) pairs, highest first.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}

/// The top-1 logit minus the top-2 of a top-k list (None with fewer than two).
pub fn margin(top: &[(u32, f32)]) -> Option<f32> {
    (top.len() >= 2).then(|| top[0].1 - top[1].1)
}

/// What one case amounts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    /// failed only by taking the f16's runner-up where the f16's margin is below
    /// `argmax_min_margin`: the gate's verdict rests on the distributional thresholds
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }
}

/// The f16's own result on a case (the gate's `--ref`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RefCase {
    pub argmax: u32,
    pub top5: Vec<(u32, f32)>,
    /// its top-1 logit minus its top-2
    pub margin: f32,
}

/// One argmax case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseOutcome {
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    pub reject_token: Option<u32>,
    pub argmax: u32,
    /// the knot's argmax is the expected token
    pub pass: bool,
    pub verdict: Verdict,
    pub top5: Vec<(u32, f32)>,
    pub margin_over_reject: Option<f32>,
    /// the f16 on the same prompt, when the gate has it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub f16: Option<RefCase>,
    /// why the case is inconclusive (one line, for the log and the zoo)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive_because: Option<String>,
}

impl CaseOutcome {
    /// Apply the margin rule (`min_margin` is `argmax_min_margin`, applied only when the caller
    /// has thresholds to rest the verdict on): a failed case whose argmax is the f16's
    /// runner-up, where the f16 itself chose the expected token by less than `min_margin`,
    /// becomes inconclusive.
    pub fn judge(&mut self, min_margin: Option<f32>) {
        self.inconclusive_because = None;
        self.verdict = if self.pass { Verdict::Pass } else { Verdict::Fail };
        let (Some(min), Some(r), false) = (min_margin, &self.f16, self.pass) else { return };
        let runner_up = r.top5.get(1).map(|t| t.0);
        if r.argmax == self.expect_token && runner_up == Some(self.argmax) && r.margin < min {
            self.verdict = Verdict::Inconclusive;
            self.inconclusive_because = Some(format!(
                "the knot chose {}, the f16's runner-up, and the f16 chose {} by only {:.4} logit \
                 (< argmax_min_margin {min})",
                self.argmax, self.expect_token, r.margin
            ));
        }
    }

    /// The case's line in the gate log.
    pub fn log_line(&self, n: usize) -> String {
        format!(
            "case {n}: prompt_tokens {:?} expect {} argmax {}{}{}   {}",
            self.prompt_tokens,
            self.expect_token,
            self.argmax,
            self.margin_over_reject.map(|m| format!(" margin {m:.4}")).unwrap_or_default(),
            self.f16.as_ref().map(ref_clause).unwrap_or_default(),
            self.verdict.as_str()
        )
    }
}

impl RefCase {
    /// "argmax 198, margin 0.6800 over 715"
    pub fn summary(&self) -> String {
        format!(
            "argmax {}, margin {:.4}{}",
            self.argmax,
            self.margin,
            self.top5.get(1).map(|t| format!(" over {}", t.0)).unwrap_or_default()
        )
    }
}

/// " · f16 argmax 198, margin 0.6800 over 715" (the f16's result beside the knot's).
pub fn ref_clause(r: &RefCase) -> String {
    format!(" · f16 {}", r.summary())
}

/// Every case's tokens within the vocabulary and its prompt within the context, before any
/// forward pass: a bad case names the qspec, the case and the field.
pub fn check_cases<'c>(
    qspec: &Path,
    cases: impl Iterator<Item = &'c GateCase>,
    n_vocab: usize,
    n_ctx: Option<usize>,
) -> Result<(), GateError> {
    let bad = |msg: String| GateError::Usage(format!("{}: {msg}", qspec.display()));
    for (i, c) in cases.enumerate() {
        let case = if i == 0 { "the qspec's case".to_string() } else { format!("case {}", i + 1) };
        let fields = c
            .prompt_tokens
            .iter()
            .map(|&t| ("prompt_tokens", t))
            .chain(std::iter::once(("expect_token", c.expect_token)))
            .chain(c.reject_token.map(|t| ("reject_token", t)));
        for (field, t) in fields {
            if t as usize >= n_vocab {
                return Err(bad(format!("{case}: {field} {t} is out of range (the model has {n_vocab} tokens)")));
            }
        }
        if let Some(n) = n_ctx.filter(|&n| c.prompt_tokens.len() > n) {
            return Err(bad(format!(
                "{case}: prompt_tokens holds {} tokens, more than the model's context of {n}",
                c.prompt_tokens.len()
            )));
        }
        if c.prompt_tokens.is_empty() {
            return Err(bad(format!("{case}: prompt_tokens is empty")));
        }
    }
    Ok(())
}

/// The run that checks a case: its prompt, the last position kept.
pub fn case_run(c: &GateCase) -> Run {
    Run { seqs: vec![c.prompt_tokens.clone()], first: c.prompt_tokens.len().saturating_sub(1) }
}

/// One case's outcome from the knot's logits at its prompt's last position, and the f16's
/// when it was run too (recorded, not yet judged). The case's tokens are within the
/// vocabulary ([`check_cases`]).
pub fn outcome(c: &GateCase, logits: &[f32], f16: Option<&[f32]>) -> CaseOutcome {
    let top5 = top_k(logits, 5);
    let argmax = top5[0].0;
    let f16 = f16.map(|l| {
        let top5 = top_k(l, 5);
        RefCase { argmax: top5[0].0, margin: margin(&top5).unwrap_or(f32::INFINITY), top5 }
    });
    let pass = argmax == c.expect_token;
    CaseOutcome {
        prompt_tokens: c.prompt_tokens.clone(),
        expect_token: c.expect_token,
        reject_token: c.reject_token,
        argmax,
        pass,
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        margin_over_reject: c.reject_token.map(|r| logits[c.expect_token as usize] - logits[r as usize]),
        top5,
        f16,
        inconclusive_because: None,
    }
}

/// One prompt as `mint-gate` measured it on the f16.
#[derive(Debug, Clone, Serialize)]
pub struct MintedCase {
    pub prompt: String,
    pub prompt_tokens: Vec<u32>,
    /// the f16's top five (token, logit, text), highest first
    pub top5: Vec<(u32, f32, String)>,
    pub margin: f32,
}

/// A minted qspec and what each of its prompts measured.
#[derive(Debug, Clone)]
pub struct Minted {
    pub qspec: QSpec,
    pub cases: Vec<MintedCase>,
    /// the margin under which a case is reported (`--min-margin`, else [`LOW_MARGIN`])
    pub warn_below: f32,
}

impl Minted {
    /// The report `mint-gate` prints: each prompt, the f16's top five and its margin, and a
    /// warning for each case below the margin.
    pub fn report(&self) -> String {
        let mut s = String::new();
        for (i, c) in self.cases.iter().enumerate() {
            s += &format!("case {}: {:?} → {:?}\n", i + 1, c.prompt, c.prompt_tokens);
            for (t, l, text) in &c.top5 {
                s += &format!("  {t:>8}  {l:>10.4}  {text:?}\n");
            }
            s += &format!("  f16 margin (top-1 − top-2): {:.4}", c.margin);
            if c.margin < self.warn_below {
                s += &format!(
                    "  LOW: below {} logit, any knot may swap its top two (a coin toss, not damage); \
                     prefer a prompt the f16 is sure of",
                    self.warn_below
                );
            }
            s.push('\n');
        }
        s
    }
}

/// What a margin between two logits (`argmax_min_margin`, `--min-margin`) takes.
pub const MARGIN_EXPECTED: &str = "a finite logit difference above 0";

/// Whether `m` can be a margin between two logits: finite and above 0.
pub fn is_margin(m: f32) -> bool {
    m.is_finite() && m > 0.0
}

/// Derive an argmax qspec from the f16 model's own greedy next token on each prompt (the
/// first is the qspec's top-level prompt, the rest its `cases`), recording the f16's margin on
/// each; with `min_margin`, a prompt the f16 is less sure of than that is refused.
pub fn mint(f16: &Path, prompts: &[String], id: Option<String>, min_margin: Option<f32>) -> Result<Minted, GateError> {
    if prompts.is_empty() {
        return Err(GateError::Usage("mint-gate needs at least one --prompt".into()));
    }
    if let Some(m) = min_margin.filter(|&m| !is_margin(m)) {
        return Err(GateError::Usage(format!("--min-margin {m}: expected {MARGIN_EXPECTED}")));
    }
    let g = Gguf::open(f16)?;
    let tok = tokenizer::Tokenizer::from_gguf(&g)?;
    let m = Model::load(&g, 0)?;
    let mut prompt_ids = Vec::new();
    for prompt in prompts {
        let mut ids = tok.encode(prompt);
        if tok.add_bos {
            if let Some(b) = tok.bos {
                ids.insert(0, b);
            }
        }
        if ids.is_empty() {
            return Err(GateError::Usage(format!("--prompt {prompt:?}: no tokens")));
        }
        prompt_ids.push(ids);
    }
    // every prompt in one layer-major pass: the f16 is read once
    let runs: Vec<Run> = prompt_ids.iter().map(|ids| Run { seqs: vec![ids.clone()], first: ids.len() - 1 }).collect();
    let states = m.pass(&runs, &mut |_, _, _| {}, &mut |_| {})?;
    let mut cases = Vec::new();
    let mut measured = Vec::new();
    for ((prompt, ids), h) in prompts.iter().zip(prompt_ids).zip(&states) {
        let top = top_k(&m.logits(h), 5);
        let margin = margin(&top).unwrap_or(f32::INFINITY);
        if let Some(min) = min_margin.filter(|&min| margin < min) {
            return Err(GateError::Usage(format!(
                "--prompt {prompt:?}: the f16's margin is {margin:.4} logit ({} over {}), below --min-margin {min}: \
                 any knot may swap the two; choose a prompt the f16 is sure of",
                top[0].0, top[1].0
            )));
        }
        cases.push(GateCase {
            prompt_text: Some(prompt.clone()),
            prompt_tokens: ids.clone(),
            expect_token: top[0].0,
            reject_token: top.get(1).map(|t| t.0),
            f16_margin: Some(margin),
        });
        measured.push(MintedCase {
            prompt: prompt.clone(),
            prompt_tokens: ids,
            top5: top.iter().map(|&(t, l)| (t, l, tok.decode(&[t]))).collect(),
            margin,
        });
    }
    let mut q = QSpec::of_cases(cases).expect("at least one case");
    q.id = id;
    q.family = g.architecture().map(String::from);
    q.expect_text = measured.first().and_then(|c| c.top5.first()).map(|t| t.2.clone());
    q.reject_text = measured.first().and_then(|c| c.top5.get(1)).map(|t| t.2.clone());
    Ok(Minted { qspec: q, cases: measured, warn_below: min_margin.unwrap_or(LOW_MARGIN) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(expect: u32, argmax: u32, f16_top: &[(u32, f32)]) -> CaseOutcome {
        CaseOutcome {
            prompt_tokens: vec![1, 2],
            expect_token: expect,
            reject_token: None,
            argmax,
            pass: argmax == expect,
            verdict: Verdict::Fail,
            top5: vec![(argmax, 10.0)],
            margin_over_reject: None,
            f16: Some(RefCase { argmax: f16_top[0].0, margin: margin(f16_top).unwrap(), top5: f16_top.to_vec() }),
            inconclusive_because: None,
        }
    }

    #[test]
    fn a_swap_of_the_f16s_top_two_under_the_margin_is_inconclusive() {
        // the example: the f16's 198 over 715 by 0.68, the knot chose 715
        let mut c = outcome(198, 715, &[(198, 17.22), (715, 16.54), (13, 12.0)]);
        c.judge(Some(1.0));
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.inconclusive_because.as_deref().unwrap().contains("0.6800 logit (< argmax_min_margin 1)"));
        // unset: strict, as before margins existed
        c.judge(None);
        assert_eq!((c.verdict, c.inconclusive_because.is_none()), (Verdict::Fail, true));
        // a level at or below the f16's margin: the swap is damage
        c.judge(Some(0.5));
        assert_eq!(c.verdict, Verdict::Fail);
    }

    #[test]
    fn only_the_runner_up_of_an_f16_that_holds_the_case_is_forgiven() {
        // the knot's token is the f16's third: a real miss, however small the margin
        let mut c = outcome(198, 13, &[(198, 17.22), (715, 16.54), (13, 16.50)]);
        c.judge(Some(1.0));
        assert_eq!(c.verdict, Verdict::Fail);
        // the f16 itself does not choose the expected token: the qspec is wrong for this f16
        let mut c = outcome(198, 715, &[(715, 17.22), (198, 16.54)]);
        c.judge(Some(1.0));
        assert_eq!(c.verdict, Verdict::Fail);
        // a case that holds stays a pass; one without the f16 stays strict
        let mut c = outcome(198, 198, &[(198, 17.22), (715, 16.54)]);
        c.judge(Some(1.0));
        assert_eq!(c.verdict, Verdict::Pass);
        let mut c = outcome(198, 715, &[(198, 17.22), (715, 16.54)]);
        c.f16 = None;
        c.judge(Some(1.0));
        assert_eq!(c.verdict, Verdict::Fail);
    }

    #[test]
    fn the_case_line_shows_the_f16_beside_the_knot() {
        let mut c = outcome(198, 715, &[(198, 17.22), (715, 16.54)]);
        c.judge(Some(1.0));
        let l = c.log_line(2);
        assert!(l.starts_with("case 2: prompt_tokens [1, 2] expect 198 argmax 715"), "{l}");
        assert!(l.contains("f16 argmax 198, margin 0.6800 over 715"), "{l}");
        assert!(l.ends_with("INCONCLUSIVE"), "{l}");
    }
}
