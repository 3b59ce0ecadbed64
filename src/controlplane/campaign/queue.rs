//! `queue.txt`: the ordered model list (small → large). One model per line:
//!
//! ```text
//! <id>  params=<B>  [effective=<B>]  family=<family>  [hf=<org/name>]  [q=<3|4|5|6|8> | bpw=<budget>[,<budget>…] | bpw=auto]  [mix=<kind>=<q>,…]  [search=<0-8>]  [refine=<0-4>]  [chunks=<n>]  [seq=<32-2048>]  <STATE>  [# comment / reason]
//! ```
//!
//! `bpw=` names one budget, or a **ladder** of budgets in ascending order (`bpw=2.25,2.6,3.0`):
//! the model is encoded at the first, and a knot that fails its gate is encoded again at the
//! next (`tick::model_step`). `bpw=auto` is the campaign's ladder (`[encode] ladder`).
//!
//! `search=` and `refine=` set this model's encode effort (`--search`, `--calib-refine`) over
//! the campaign's (`search`, `[feedback] refine`): a small model can afford what a large one
//! cannot. `chunks=` and `seq=` set its error feedback's calibration tokens (`--calib-chunks`,
//! `--calib-seq`) over the campaign's `[feedback] chunks` / `seq`.
//!
//! Lines are kept verbatim, so reading and writing round-trips byte for byte; an edit
//! rewrites only the tokens it changes. Saving re-reads the file under a lock and refuses
//! when it changed on disk since it was loaded, so a concurrent edit is never lost silently.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Tag {
    ReadyNow,
    AutoFeed,
    External,
    Hold,
    OutOfScope,
}

impl Tag {
    pub const ALL: [Tag; 5] = [Tag::ReadyNow, Tag::AutoFeed, Tag::External, Tag::Hold, Tag::OutOfScope];
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::ReadyNow => "READY-NOW",
            Tag::AutoFeed => "AUTO-FEED",
            Tag::External => "EXTERNAL",
            Tag::Hold => "HOLD",
            Tag::OutOfScope => "OUT-OF-SCOPE",
        }
    }
    pub fn parse(s: &str) -> Option<Tag> {
        Tag::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Entry {
    pub id: String,
    pub params_b: f64,
    /// Billions of weights each token is multiplied by (`effective=`; gemma4's E models, whose
    /// per-layer token tables are only looked up): what the encode and the gate scale with.
    /// None: all of `params_b`.
    pub effective_b: Option<f64>,
    pub family: String,
    pub hf_source: Option<String>,
    /// KAIJU1 Voronoi modulus for this model (`q=`; default 4 = 2.25 bpw).
    pub modulus: Option<u32>,
    /// Per-kind KAIJU1 variants overriding `q=` (`mix=attn_v=6,ffn_down=5`; see `--mix`).
    pub mix: Option<String>,
    /// The budgets of matmul bits per weight, ascending (`bpw=2.6`, or a ladder
    /// `bpw=2.25,2.6,3.0`; see `--bpw`): the encoder allocates each tensor's variant for the
    /// rung it is at, and `q=` no longer applies. Empty: no `bpw=` (the line's `q=`).
    pub budgets: Vec<f64>,
    /// `bpw=auto`: [`Entry::budgets`] are the campaign's ladder ([`Queue::with_ladder`]).
    pub auto_budgets: bool,
    /// Scale codes the encoder searches each side of a block's estimate (`search=2`; see
    /// `--search`), over the campaign's `search`. None: the campaign's.
    pub search: Option<u8>,
    /// Passes of block coordinate descent after each tensor's feedback encode (`refine=1`; see
    /// `--calib-refine`), over the campaign's `[feedback] refine`. None: the campaign's.
    pub refine: Option<usize>,
    /// Chunks of 512 calibration tokens for this model's error feedback (`chunks=10`; see
    /// `--calib-chunks`), over the campaign's `[feedback] chunks`. None: the campaign's.
    pub calib_chunks: Option<usize>,
    /// Tokens per calibration sequence (`seq=128`; see `--calib-seq`), over the campaign's
    /// `[feedback] seq`. None: the campaign's.
    pub calib_seq: Option<usize>,
    pub tag: Tag,
    /// Text after `#` on the line (the reason for HOLD / OUT-OF-SCOPE, or any note).
    pub comment: Option<String>,
    /// Line number (1-based) in the file.
    pub line: usize,
}

impl Entry {
    /// Billions of weights the encode and the gate work through: `effective=`, else `params=`.
    pub fn work_b(&self) -> f64 {
        self.effective_b.unwrap_or(self.params_b)
    }

    /// A llama entry of `params_b` billion parameters in state `tag`, nothing else set: what
    /// the unit tests build on (`Entry { hf_source: …, ..Entry::test(…) }`).
    #[cfg(test)]
    pub fn test(id: &str, params_b: f64, tag: Tag) -> Entry {
        Entry {
            id: id.into(),
            params_b,
            effective_b: None,
            family: "llama".into(),
            hf_source: None,
            modulus: None,
            mix: None,
            budgets: vec![],
            auto_budgets: false,
            search: None,
            refine: None,
            calib_chunks: None,
            calib_seq: None,
            tag,
            comment: None,
            line: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {msg}")]
    Parse { path: PathBuf, line: usize, msg: String },
    #[error("{path}: changed on disk since it was loaded (another editor or the watcher?); reload and redo the edit — nothing was written")]
    Conflict { path: PathBuf },
    #[error("no model {0:?} in the queue")]
    NoSuchModel(String),
    #[error("{0}")]
    Edit(String),
}

/// What an edit does to a line's `# comment`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comment<'a> {
    Keep,
    Set(&'a str),
    Clear,
}

/// Separates a hold note from the comment the line had before (restored on unhold).
pub const HOLD_SEP: &str = " ¦ ";

#[derive(Debug, Clone)]
pub struct Queue {
    pub path: PathBuf,
    lines: Vec<String>,
    trailing_newline: bool,
    loaded: Vec<u8>,
    /// the campaign's ladder, what `bpw=auto` lines climb ([`Queue::with_ladder`])
    ladder: Vec<f64>,
    pub entries: Vec<Entry>,
}

/// The campaign's ladder of budgets by default (`[encode] ladder`), what `bpw=auto` climbs:
/// the q=4 default's bits, then the fixtures' budgets (docs/ENCODER.md, "Budgets").
pub const DEFAULT_LADDER: [f64; 4] = [2.25, 2.6, 3.0, 3.3];

/// What a budget of bits per weight must be.
pub const BUDGET_EXPECTED: &str = "a budget of bits per weight above 0 and at most 16, e.g. 2.6";

/// Whether `b` is a budget an encode takes (`--bpw`).
pub fn is_budget(b: f64) -> bool {
    b.is_finite() && b > 0.0 && b <= 16.0
}

/// Whether `ladder` is one: at least one budget, each one ([`is_budget`]), each above the one
/// before; the reason when not.
pub fn check_ladder(ladder: &[f64]) -> Result<(), String> {
    if ladder.is_empty() {
        return Err(format!("expected one budget or more ({BUDGET_EXPECTED})"));
    }
    if let Some(b) = ladder.iter().find(|b| !is_budget(**b)) {
        return Err(format!("{b}: expected {BUDGET_EXPECTED}"));
    }
    if let Some(w) = ladder.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "{} after {}: expected the budgets in ascending order, each once (the ladder climbs)",
            w[1], w[0]
        ));
    }
    Ok(())
}

/// A `bpw=` value: `auto` (None: the campaign's ladder), or budgets separated by commas.
fn parse_budgets(v: &str) -> Result<Option<Vec<f64>>, String> {
    if v == "auto" {
        return Ok(None);
    }
    let ladder = v
        .split(',')
        .map(|b| {
            b.parse::<f64>()
                .ok()
                .filter(|b| is_budget(*b))
                .ok_or_else(|| format!("{b:?}: expected {BUDGET_EXPECTED} (or a ladder 2.25,2.6,3.0, or auto)"))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    check_ladder(&ladder)?;
    Ok(Some(ladder))
}

fn parse_line(path: &Path, n: usize, raw: &str) -> Result<Option<Entry>, QueueError> {
    let (body, comment) = match raw.find('#') {
        Some(i) => (&raw[..i], Some(raw[i + 1..].trim().to_string()).filter(|c| !c.is_empty())),
        None => (raw, None),
    };
    let toks: Vec<&str> = body.split_whitespace().collect();
    if toks.is_empty() {
        return Ok(None);
    }
    let err = |msg: String| QueueError::Parse { path: path.into(), line: n, msg };
    let id = toks[0];
    // an id names files and folders (<id>.f16.gguf, builds/<id>-…) and is an argument of the
    // commands: it starts with a letter or digit, so it is never `.`, `..`, hidden or an option
    if !(id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
    {
        return Err(err(format!("model id {id:?}: expected a letter or digit, then letters, digits, '.', '_' or '-'")));
    }
    let (mut params, mut family, mut hf, mut tag, mut modulus, mut mix) = (None, None, None, None, None, None);
    let (mut bpw, mut effective, mut search, mut refine) = (None, None, None, None);
    let (mut calib_chunks, mut calib_seq) = (None, None);
    let mut seen: Vec<&str> = Vec::new();
    for t in &toks[1..] {
        if let Some((key, _)) = t.split_once('=') {
            if seen.contains(&key) {
                return Err(err(format!("{id}: {key}= given twice")));
            }
            seen.push(key);
        }
        if let Some(v) = t.strip_prefix("params=") {
            params = Some(v.parse::<f64>().ok().filter(|p| p.is_finite() && *p > 0.0 && *p < 100_000.0).ok_or_else(
                || err(format!("{id}: params={v:?}: expected a positive number of billions (under 100000)")),
            )?);
        } else if let Some(v) = t.strip_prefix("effective=") {
            effective = Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|p| p.is_finite() && *p > 0.0)
                    .ok_or_else(|| err(format!("{id}: effective={v:?}: expected a positive number of billions")))?,
            );
        } else if let Some(v) = t.strip_prefix("family=") {
            family = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("hf=") {
            hf = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("q=") {
            modulus = Some(
                v.parse::<u32>()
                    .ok()
                    .filter(|&q| crate::dataplane::codec::kaiju1::Variant::new(q).is_some())
                    .ok_or_else(|| {
                        let valid: Vec<String> =
                            crate::dataplane::codec::kaiju1::Variant::all().map(|v| v.q.to_string()).collect();
                        err(format!("{id}: q={v:?}: expected a KAIJU1 Voronoi modulus ({})", valid.join(", ")))
                    })?,
            );
        } else if let Some(v) = t.strip_prefix("bpw=") {
            bpw = Some(parse_budgets(v).map_err(|why| err(format!("{id}: bpw={v:?}: {why}")))?);
        } else if let Some(v) = t.strip_prefix("mix=") {
            crate::dataplane::encode::Mix::parse(v).map_err(|e| err(format!("{id}: mix={v:?}: {e}")))?;
            mix = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("search=") {
            use crate::dataplane::codec::kaiju1::{parse_search, search_expected};
            search = Some(
                parse_search(v)
                    .ok_or_else(|| err(format!("{id}: search={v:?}: expected {}, e.g. 2", search_expected())))?,
            );
        } else if let Some(v) = t.strip_prefix("refine=") {
            use crate::dataplane::encode::feedback::{parse_refine, refine_expected};
            refine = Some(
                parse_refine(v)
                    .ok_or_else(|| err(format!("{id}: refine={v:?}: expected {}, e.g. 1", refine_expected())))?,
            );
        } else if let Some(v) = t.strip_prefix("chunks=") {
            use crate::dataplane::encode::feedback::{chunks_expected, parse_chunks};
            calib_chunks = Some(
                parse_chunks(v)
                    .ok_or_else(|| err(format!("{id}: chunks={v:?}: expected {}, e.g. 10", chunks_expected())))?,
            );
        } else if let Some(v) = t.strip_prefix("seq=") {
            use crate::dataplane::encode::feedback::{parse_seq, seq_expected};
            calib_seq = Some(parse_seq(v).ok_or_else(|| {
                err(format!("{id}: seq={v:?}: expected {} for the calibration, e.g. 128", seq_expected()))
            })?);
        } else if let Some(tg) = Tag::parse(t) {
            if tag.replace(tg).is_some() {
                return Err(err(format!("{id}: more than one state tag")));
            }
        } else {
            return Err(err(format!(
                "{id}: unexpected {t:?}: expected params=, effective=, family=, hf=, q=, bpw=, mix=, search=, refine=, chunks=, seq= or a state tag ({})",
                Tag::ALL.map(|t| t.as_str()).join(" / ")
            )));
        }
    }
    if modulus.is_some() && bpw.is_some() {
        return Err(err(format!(
            "{id}: q= and bpw= together: q= picks one variant, bpw= a budget the encoder allocates; give one"
        )));
    }
    let params_b = params.ok_or_else(|| err(format!("{id}: missing params=<billions>")))?;
    if let Some(e) = effective.filter(|&e| e > params_b) {
        return Err(err(format!("{id}: effective={e} is more than params={params_b}: expected a part of the model")));
    }
    Ok(Some(Entry {
        id: id.to_string(),
        params_b,
        effective_b: effective,
        family: family.ok_or_else(|| err(format!("{id}: missing family=<name>")))?,
        hf_source: hf,
        modulus,
        mix,
        auto_budgets: bpw.as_ref().is_some_and(Option::is_none),
        budgets: bpw.flatten().unwrap_or_default(),
        search,
        refine,
        calib_chunks,
        calib_seq,
        tag: tag
            .ok_or_else(|| err(format!("{id}: missing state tag ({})", Tag::ALL.map(|t| t.as_str()).join(" / "))))?,
        comment,
        line: n,
    }))
}

impl Queue {
    pub fn parse(path: &Path, text: &str) -> Result<Queue, QueueError> {
        let trailing_newline = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        let lines: Vec<String> = if text.is_empty() { vec![] } else { body.split('\n').map(String::from).collect() };
        let mut entries = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if let Some(e) = parse_line(path, i + 1, l)? {
                if entries.iter().any(|x: &Entry| x.id == e.id) {
                    return Err(QueueError::Parse {
                        path: path.into(),
                        line: i + 1,
                        msg: format!("duplicate model id {:?}", e.id),
                    });
                }
                entries.push(e);
            }
        }
        let q = Queue {
            path: path.into(),
            lines,
            trailing_newline,
            loaded: text.as_bytes().to_vec(),
            ladder: vec![],
            entries,
        };
        Ok(q.with_ladder(&DEFAULT_LADDER))
    }

    /// The queue with `ladder` as the campaign's (`[encode] ladder`): every `bpw=auto` line
    /// climbs it.
    pub fn with_ladder(mut self, ladder: &[f64]) -> Queue {
        self.ladder = ladder.to_vec();
        for e in self.entries.iter_mut().filter(|e| e.auto_budgets) {
            e.budgets = ladder.to_vec();
        }
        self
    }

    pub fn load(path: &Path) -> Result<Queue, QueueError> {
        let text = std::fs::read_to_string(path).map_err(|source| QueueError::Io { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    /// The file text as it would be written.
    pub fn render(&self) -> String {
        let mut s = self.lines.join("\n");
        if self.trailing_newline {
            s.push('\n');
        }
        s
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }

    fn reparse(&mut self) -> Result<(), QueueError> {
        let text = self.render();
        let (loaded, ladder) = (std::mem::take(&mut self.loaded), std::mem::take(&mut self.ladder));
        *self = Queue::parse(&self.path, &text)?.with_ladder(&ladder);
        self.loaded = loaded;
        Ok(())
    }

    fn line_of(&self, id: &str) -> Result<usize, QueueError> {
        self.get(id).map(|e| e.line - 1).ok_or_else(|| QueueError::NoSuchModel(id.into()))
    }

    /// Change a model's state tag in place, and its comment as asked.
    pub fn set_tag(&mut self, id: &str, tag: Tag, comment: Comment<'_>) -> Result<(), QueueError> {
        let li = self.line_of(id)?;
        let old = self.get(id).expect("exists").tag;
        let raw = &self.lines[li];
        let (body, old_comment) = match raw.find('#') {
            Some(i) => (&raw[..i], Some(&raw[i..])),
            None => (raw.as_str(), None),
        };
        // replace the tag token, keeping the spacing around it
        let mut out = String::new();
        let mut rest = body;
        let mut done = false;
        while !rest.is_empty() {
            let ws = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..ws]);
            rest = &rest[ws..];
            let tl = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let tok = &rest[..tl];
            if !done && tok == old.as_str() {
                out.push_str(tag.as_str());
                done = true;
            } else {
                out.push_str(tok);
            }
            rest = &rest[tl..];
        }
        match (comment, old_comment) {
            (Comment::Set(c), _) => {
                if !out.ends_with(char::is_whitespace) {
                    out.push_str("  ");
                }
                out.push_str("# ");
                out.push_str(c);
            }
            (Comment::Keep, Some(c)) => out.push_str(c),
            (Comment::Clear, _) => out.truncate(out.trim_end().len()),
            (Comment::Keep, None) => {}
        }
        self.lines[li] = out;
        self.reparse()
    }

    /// Hold a model, remembering its tag in the comment so that unhold can restore it.
    pub fn hold(&mut self, id: &str, reason: Option<&str>) -> Result<(), QueueError> {
        let e = self.get(id).ok_or_else(|| QueueError::NoSuchModel(id.into()))?;
        if e.tag == Tag::Hold {
            return Err(QueueError::Edit(format!("{id} is already on HOLD")));
        }
        // the reason lives in the model's one queue line, before the remembered comment
        if let Some(r) = reason.filter(|r| r.contains(['\n', '\r', '¦'])) {
            return Err(QueueError::Edit(format!(
                "hold reason {r:?}: expected one line without '¦' (it is kept in the model's queue line, \
                 where '¦' separates it from the comment that unhold restores)"
            )));
        }
        let mut c = format!("hold (was {}){}", e.tag, reason.map(|r| format!(": {r}")).unwrap_or_default());
        if let Some(old) = &e.comment {
            c = format!("{c}{HOLD_SEP}{old}");
        }
        self.set_tag(id, Tag::Hold, Comment::Set(&c))
    }

    /// Release a held model: back to the tag remembered by [`Queue::hold`], else `fallback`
    /// (or AUTO-FEED when it has an HF source, READY-NOW when not).
    pub fn unhold(&mut self, id: &str, fallback: Option<Tag>) -> Result<Tag, QueueError> {
        let e = self.get(id).ok_or_else(|| QueueError::NoSuchModel(id.into()))?;
        if e.tag != Tag::Hold {
            return Err(QueueError::Edit(format!("{id} is not on HOLD (it is {})", e.tag)));
        }
        let note = e.comment.as_deref().and_then(|c| c.strip_prefix("hold (was "));
        let remembered = note.and_then(|c| c.split_once(')')).and_then(|(t, _)| Tag::parse(t));
        let original = note.and_then(|c| c.split_once(HOLD_SEP)).map(|(_, o)| o.to_string());
        let tag = fallback.or(remembered).unwrap_or(if e.hf_source.is_some() { Tag::AutoFeed } else { Tag::ReadyNow });
        let comment = match (&original, note) {
            (Some(o), _) => Comment::Set(o),
            (None, Some(_)) => Comment::Clear,
            (None, None) => Comment::Keep,
        };
        self.set_tag(id, tag, comment)?;
        Ok(tag)
    }

    /// Move a model one entry up (`-1`) or down (`+1`) past its neighbouring entry;
    /// comment lines stay where they are.
    pub fn move_by(&mut self, id: &str, dir: i32) -> Result<(), QueueError> {
        let pos = self.entries.iter().position(|e| e.id == id).ok_or_else(|| QueueError::NoSuchModel(id.into()))?;
        let other = pos as i64 + dir.signum() as i64;
        if other < 0 || other as usize >= self.entries.len() {
            return Err(QueueError::Edit(format!(
                "{id} is already at the {} of the queue",
                if dir < 0 { "top" } else { "bottom" }
            )));
        }
        let (a, b) = (self.entries[pos].line - 1, self.entries[other as usize].line - 1);
        self.lines.swap(a, b);
        self.reparse()
    }

    /// Write atomically, refusing if the file changed on disk since load.
    pub fn save(&mut self) -> Result<(), QueueError> {
        let io = |source| QueueError::Io { path: self.path.clone(), source };
        let lock_path = self.path.with_extension("txt.lock");
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io)?;
        lock.lock().map_err(io)?;
        let current = std::fs::read(&self.path).map_err(io)?;
        if current != self.loaded {
            return Err(QueueError::Conflict { path: self.path.clone() });
        }
        let text = self.render();
        crate::fsutil::write_atomic(&self.path, text.as_bytes()).map_err(io)?;
        self.loaded = text.into_bytes();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: &str = "# zoo\n\nsmollm2-135m  params=0.135 family=llama hf=HuggingFaceTB/SmolLM2-135M-Instruct   READY-NOW\n# mid comment\nqwen2.5-0.5b params=0.5  family=qwen2  hf=Qwen/Qwen2.5-0.5B-Instruct AUTO-FEED  # small\ngemma-2-9b params=9.2 family=gemma2 HOLD # gemma2 soft-capping\n";

    fn q() -> Queue {
        Queue::parse(Path::new("queue.txt"), Q).unwrap()
    }

    #[test]
    fn round_trip_is_byte_identical() {
        assert_eq!(q().render(), Q);
        let no_nl = Q.trim_end_matches('\n');
        assert_eq!(Queue::parse(Path::new("q"), no_nl).unwrap().render(), no_nl);
        let e = &q().entries;
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].comment.as_deref(), Some("small"));
        assert_eq!(e[2].tag, Tag::Hold);
        assert_eq!(e[0].hf_source.as_deref(), Some("HuggingFaceTB/SmolLM2-135M-Instruct"));
    }

    #[test]
    fn hold_edits_only_the_tag_and_comment() {
        let mut q = q();
        q.set_tag("smollm2-135m", Tag::Hold, Comment::Set("operator hold")).unwrap();
        let s = q.render();
        assert!(s.contains("hf=HuggingFaceTB/SmolLM2-135M-Instruct   HOLD  # operator hold\n"), "{s}");
        q.set_tag("smollm2-135m", Tag::ReadyNow, Comment::Keep).unwrap();
        assert!(q.render().contains("   READY-NOW  # operator hold\n"));
        assert_eq!(q.get("smollm2-135m").unwrap().tag, Tag::ReadyNow);
    }

    #[test]
    fn hold_remembers_the_tag_for_unhold() {
        let mut q = q();
        let before = q.render();
        q.hold("qwen2.5-0.5b", Some("flaky feeder")).unwrap();
        assert_eq!(
            q.get("qwen2.5-0.5b").unwrap().comment.as_deref(),
            Some("hold (was AUTO-FEED): flaky feeder ¦ small")
        );
        assert!(q.hold("qwen2.5-0.5b", None).is_err());
        assert_eq!(q.unhold("qwen2.5-0.5b", None).unwrap(), Tag::AutoFeed);
        assert_eq!(q.render(), before, "hold + unhold is the identity");
        q.hold("smollm2-135m", None).unwrap();
        q.unhold("smollm2-135m", None).unwrap();
        assert_eq!(q.render(), before);
        assert!(q.unhold("qwen2.5-0.5b", None).is_err());
        // a hand-written HOLD falls back by HF source
        assert_eq!(q.unhold("gemma-2-9b", None).unwrap(), Tag::ReadyNow);
    }

    #[test]
    fn move_swaps_entries_and_keeps_comments() {
        let mut q = q();
        q.move_by("gemma-2-9b", -1).unwrap();
        let ids: Vec<_> = q.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["smollm2-135m", "gemma-2-9b", "qwen2.5-0.5b"]);
        assert!(q.render().contains("# mid comment\ngemma-2-9b"));
        assert!(q.move_by("smollm2-135m", -1).is_err());
    }

    #[test]
    fn parse_errors_name_line_and_field() {
        let e = Queue::parse(Path::new("queue.txt"), "a params=x family=l HOLD\n").unwrap_err().to_string();
        assert!(e.contains("queue.txt:1") && e.contains("params="), "{e}");
        let e = Queue::parse(Path::new("queue.txt"), "a params=1 family=l\n").unwrap_err().to_string();
        assert!(e.contains("missing state tag"), "{e}");
        let e = Queue::parse(Path::new("queue.txt"), "a params=1 family=l HOLD\na params=1 family=l HOLD\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate"), "{e}");
        let e = Queue::parse(Path::new("queue.txt"), "a params=1 family=l HOLD bogus\n").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        let e =
            Queue::parse(Path::new("queue.txt"), "a params=1 family=l mix=attn_v=9 HOLD\n").unwrap_err().to_string();
        assert!(
            e.contains("queue.txt:1") && e.contains("mix=") && e.contains("(3, 4, 5, 6, 8, 10, 12, 16) or keep"),
            "{e}"
        );
    }

    #[test]
    fn effective_params_are_what_the_work_scales_with() {
        let q = Queue::parse(Path::new("queue.txt"), "e params=5.1 effective=2.0 family=gemma4 HOLD\n").unwrap();
        assert_eq!((q.entries[0].params_b, q.entries[0].effective_b, q.entries[0].work_b()), (5.1, Some(2.0), 2.0));
        let q = Queue::parse(Path::new("queue.txt"), "a params=7 family=l HOLD\n").unwrap();
        assert_eq!((q.entries[0].effective_b, q.entries[0].work_b()), (None, 7.0));
        for (line, want) in [
            ("e params=2 effective=3 family=g HOLD", "effective=3 is more than params=2"),
            ("e params=2 effective=-1 family=g HOLD", "effective=\"-1\": expected a positive number"),
        ] {
            let e = Queue::parse(Path::new("queue.txt"), &format!("{line}\n")).unwrap_err().to_string();
            assert!(e.contains("queue.txt:1") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn a_ladder_is_budgets_in_ascending_order_and_auto_is_the_campaigns() {
        let text = "a params=1 family=l bpw=2.25,2.6,3.0 READY-NOW\nb params=1 family=l bpw=auto READY-NOW\n";
        let q = Queue::parse(Path::new("queue.txt"), text).unwrap();
        assert_eq!(q.entries[0].budgets, vec![2.25, 2.6, 3.0]);
        assert!(!q.entries[0].auto_budgets);
        assert_eq!((q.entries[1].budgets.as_slice(), q.entries[1].auto_budgets), (&DEFAULT_LADDER[..], true));
        // the campaign's ladder reaches the auto lines only, and survives an edit
        let mut q = q.with_ladder(&[2.0, 4.0]);
        assert_eq!((q.entries[0].budgets.len(), q.entries[1].budgets.clone()), (3, vec![2.0, 4.0]));
        q.hold("a", None).unwrap();
        assert_eq!(q.entries[1].budgets, vec![2.0, 4.0]);
        assert_eq!(q.render().lines().nth(1), Some("b params=1 family=l bpw=auto READY-NOW"));
        for (bad, says) in [
            ("bpw=2.6,2.25", "2.25 after 2.6: expected the budgets in ascending order"),
            ("bpw=2.6,2.6", "2.6 after 2.6"),
            ("bpw=2.6,", "\"\": expected a budget"),
            ("bpw=Auto", "\"Auto\": expected a budget"),
        ] {
            let e = Queue::parse(Path::new("queue.txt"), &format!("a params=1 family=l {bad} READY-NOW\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("queue.txt:1") && e.contains(says), "{bad}: {e}");
        }
        assert!(check_ladder(&[]).unwrap_err().contains("one budget or more"));
        assert!(check_ladder(&[2.0, f64::NAN]).unwrap_err().contains("NaN: expected a budget"));
    }

    #[test]
    fn mix_is_kept_for_the_encode_build() {
        let q = Queue::parse(Path::new("queue.txt"), "a params=1 family=l q=4 mix=attn_v=6,ffn_down=5 READY-NOW\n")
            .unwrap();
        assert_eq!(q.entries[0].mix.as_deref(), Some("attn_v=6,ffn_down=5"));
        assert_eq!(q.entries[0].modulus, Some(4));
        assert_eq!(q.entries[0].budgets, Vec::<f64>::new());
        let q = Queue::parse(Path::new("queue.txt"), "a params=1 family=l bpw=2.6 READY-NOW\n").unwrap();
        assert_eq!(q.entries[0].budgets, vec![2.6]);
        for bad in ["bpw=0", "bpw=x", "bpw=-1", "bpw=inf", "bpw=99", "bpw=1e9", "bpw=2.6,x", "bpw=,2.6"] {
            let e = Queue::parse(Path::new("queue.txt"), &format!("a params=1 family=l {bad} READY-NOW\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("queue.txt:1") && e.contains("expected a budget of bits per weight"), "{bad}: {e}");
        }
        // nonsense that used to pass silently: each refused with the line and what is wrong
        for (line, says) in [
            ("a params=1 family=l q=8 bpw=2.5 READY-NOW", "q= and bpw= together"),
            ("a params=1 family=l params=3 READY-NOW", "params= given twice"),
            ("a params=1e400 family=l READY-NOW", "params=\"1e400\": expected a positive number"),
            ("a params=1 family=l q=7 READY-NOW", "3, 4, 5, 6, 8, 10, 12, 16"),
            ("a params=1 family=l search=9 READY-NOW", "search=\"9\": expected a number of scale codes from 0 to 8"),
            ("a params=1 family=l search=-1 READY-NOW", "search=\"-1\": expected a number of scale codes"),
            ("a params=1 family=l refine=5 READY-NOW", "refine=\"5\": expected a number of passes from 0 to 4"),
            ("a params=1 family=l refine=1 refine=1 READY-NOW", "refine= given twice"),
            (
                "a params=1 family=l chunks=0 READY-NOW",
                "chunks=\"0\": expected a number of 512-token calibration chunks",
            ),
            ("a params=1 family=l chunks=ten READY-NOW", "chunks=\"ten\": expected a number"),
            (
                "a params=1 family=l chunks=99999999999 READY-NOW",
                "chunks=\"99999999999\": expected a number of 512-token calibration chunks from 1 to 1024",
            ),
            (". params=1 family=l READY-NOW", "model id \".\": expected"),
            (".. params=1 family=l READY-NOW", "model id \"..\": expected"),
            ("-rf params=1 family=l READY-NOW", "model id \"-rf\": expected"),
            (".hidden params=1 family=l READY-NOW", "model id \".hidden\": expected"),
            (
                "a params=1 family=l seq=16 READY-NOW",
                "seq=\"16\": expected a sequence length from 32 to 2048 tokens for the calibration",
            ),
            (
                "a params=1 family=l seq=4096 READY-NOW",
                "seq=\"4096\": expected a sequence length from 32 to 2048 tokens for the calibration",
            ),
            ("a params=1 family=l seq=128 seq=128 READY-NOW", "seq= given twice"),
        ] {
            let e = Queue::parse(Path::new("queue.txt"), &format!("{line}\n")).unwrap_err().to_string();
            assert!(e.contains("queue.txt:1") && e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn search_refine_and_the_calibration_tokens_are_read_per_model_and_round_trip() {
        let text = "a params=0.5 family=qwen2 bpw=3.3 search=2 refine=1 READY-NOW # small: the best measured setting\nb params=7 family=qwen2 chunks=10 seq=128 READY-NOW\n";
        let q = Queue::parse(Path::new("queue.txt"), text).unwrap();
        assert_eq!((q.entries[0].search, q.entries[0].refine), (Some(2), Some(1)));
        assert_eq!((q.entries[1].search, q.entries[1].refine), (None, None));
        assert_eq!((q.entries[0].calib_chunks, q.entries[0].calib_seq), (None, None));
        assert_eq!((q.entries[1].calib_chunks, q.entries[1].calib_seq), (Some(10), Some(128)));
        assert_eq!(q.render(), text);
    }

    #[test]
    fn a_hold_reason_that_would_break_the_line_or_the_restore_is_refused() {
        let text = "a params=1 family=l hf=o/a AUTO-FEED  # original note\n";
        for bad in ["two\nlines", "cr\rhere", "with ¦ inside", "a¦b"] {
            let mut q = Queue::parse(Path::new("queue.txt"), text).unwrap();
            let e = q.hold("a", Some(bad)).unwrap_err().to_string();
            assert!(e.starts_with("hold reason") && !e.contains("queue.txt:"), "{e}");
            assert_eq!(q.render(), text, "nothing changed");
        }
        let mut q = Queue::parse(Path::new("queue.txt"), text).unwrap();
        q.hold("a", Some("licence # to check")).unwrap();
        q.unhold("a", None).unwrap();
        assert_eq!(q.render(), text, "hold + unhold restores the line");
    }

    #[test]
    fn concurrent_edit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("queue.txt");
        std::fs::write(&p, Q).unwrap();
        let mut a = Queue::load(&p).unwrap();
        let mut b = Queue::load(&p).unwrap();
        a.set_tag("qwen2.5-0.5b", Tag::Hold, Comment::Keep).unwrap();
        a.save().unwrap();
        b.move_by("gemma-2-9b", -1).unwrap();
        let e = b.save().unwrap_err();
        assert!(matches!(e, QueueError::Conflict { .. }));
        // a's edit survived
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("qwen2.5-0.5b params=0.5  family=qwen2  hf=Qwen/Qwen2.5-0.5B-Instruct HOLD  # small"));
        // a can keep editing from its fresh state
        a.move_by("gemma-2-9b", -1).unwrap();
        a.save().unwrap();
    }
}
