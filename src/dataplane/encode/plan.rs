//! What the encoder does with each tensor it re-encodes: a KAIJU1 variant, or the base knot's
//! own bytes ("keep"); and the per-kind policy an operator can pin (`--mix attn_v=6,…`).

use crate::dataplane::codec::kaiju1::Variant;

/// The matmul kinds (tensor name tails without `blk.N.` and `.weight`).
pub const KINDS: [&str; 13] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_up",
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
    "ffn_gate_up_exps",
];

/// The matmul kind and layer of a tensor name (`blk.<N>.<kind>.weight`).
pub fn matmul_kind_layer(name: &str) -> Option<(&str, u32)> {
    let (layer, tail) = name.strip_prefix("blk.")?.split_once('.')?;
    let layer = layer.parse::<u32>().ok()?;
    let kind = tail.strip_suffix(".weight").filter(|k| KINDS.contains(k))?;
    Some((kind, layer))
}

/// The matmul kind of a tensor name (`blk.<N>.<kind>.weight` → `<kind>`, one of [`KINDS`]).
pub fn matmul_kind(name: &str) -> Option<&str> {
    matmul_kind_layer(name).map(|(k, _)| k)
}

/// Is this tensor name a 2D attention/FFN matmul weight?
pub fn is_matmul_weight(name: &str) -> bool {
    matmul_kind(name).is_some()
}

/// The form one re-encoded tensor takes in the knot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Choice {
    /// KAIJU1 with this variant.
    Kaiju(Variant),
    /// The base knot's tensor, byte for byte (its own type): for the few tensors where no
    /// variant at the budget is good enough.
    Keep,
}

impl Choice {
    /// `3`…`8` (a Voronoi modulus) or `keep`.
    pub fn parse(s: &str) -> Option<Choice> {
        match s.trim() {
            "keep" => Some(Choice::Keep),
            q => q.parse::<u32>().ok().and_then(Variant::new).map(Choice::Kaiju),
        }
    }
    /// `q4`, `q8`, `keep`: the label of telemetry and `inspect`.
    pub fn label(self) -> String {
        match self {
            Choice::Kaiju(v) => format!("q{}", v.q),
            Choice::Keep => "keep".into(),
        }
    }
    pub fn variant(self) -> Option<Variant> {
        match self {
            Choice::Kaiju(v) => Some(v),
            Choice::Keep => None,
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Kaiju(v) => write!(f, "{}", v.q),
            Choice::Keep => f.write_str("keep"),
        }
    }
}

impl serde::Serialize for Choice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// What `Choice::parse` accepts, for error messages.
pub fn choices_expected() -> String {
    let qs: Vec<String> = Variant::MODULI.iter().map(|q| q.to_string()).collect();
    format!("a Voronoi modulus ({}) or keep", qs.join(", "))
}

/// One rule of a [`Mix`]: a matmul kind (or `*`, every kind), optionally a range of layers,
/// and the choice for the tensors it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub kind: Option<String>,
    pub layers: Option<(u32, u32)>,
    pub choice: Choice,
}

impl Rule {
    fn matches(&self, kind: &str, layer: u32) -> bool {
        self.kind.as_deref().is_none_or(|k| k == kind) && self.layers.is_none_or(|(a, b)| (a..=b).contains(&layer))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_deref().unwrap_or("*"))?;
        match self.layers {
            Some((a, b)) if a == b => write!(f, "@{a}")?,
            Some((a, b)) => write!(f, "@{a}-{b}")?,
            None => {}
        }
        write!(f, "={}", self.choice)
    }
}

/// A mixed-precision policy: the choice for some matmul kinds and layers, overriding the
/// default (`--mix attn_v=6,ffn_down=5`, `--mix '*@0=8,ffn_down@20-29=keep'`), as
/// llama.cpp's 2-bit types spend more bits on `attn_v` and `ffn_down`. A later rule
/// overrides an earlier one where both match. Each tensor's type id says its variant, so a
/// reader needs nothing else. Under `--bpw` the tensors a mix names are pinned and the
/// allocator spends the rest of the budget on the others.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mix(pub Vec<Rule>);

impl Mix {
    /// Parse `KIND[@LAYERS]=CHOICE[,…]` (empty: no overrides): KIND a matmul kind or `*`,
    /// LAYERS `N` or `A-B`, CHOICE a Voronoi modulus or `keep`.
    pub fn parse(s: &str) -> Result<Mix, String> {
        let mut out: Vec<Rule> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (lhs, q) = item.split_once('=').ok_or_else(|| format!("{item:?}: expected KIND=Q, e.g. attn_v=6"))?;
            let (kind, layers) =
                match lhs.trim().split_once('@') {
                    Some((k, l)) => (
                        k.trim(),
                        Some(parse_layers(l.trim()).ok_or_else(|| {
                            format!("{item:?}: expected layers N or A-B (A ≤ B) after '@', found {l:?}")
                        })?),
                    ),
                    None => (lhs.trim(), None),
                };
            if kind != "*" && !KINDS.contains(&kind) {
                return Err(format!("{kind:?}: expected a matmul kind ({}) or *", KINDS.join(", ")));
            }
            let choice = Choice::parse(q).ok_or_else(|| format!("{lhs}={q}: expected {}", choices_expected()))?;
            let rule = Rule { kind: (kind != "*").then(|| kind.to_string()), layers, choice };
            if out.iter().any(|r| r.kind == rule.kind && r.layers == rule.layers) {
                return Err(format!("{}: given twice", lhs.trim()));
            }
            out.push(rule);
        }
        Ok(Mix(out))
    }

    /// The choice this policy pins for tensor `name`, if any (the last rule that names it).
    pub fn pinned(&self, name: &str) -> Option<Choice> {
        let (kind, layer) = matmul_kind_layer(name)?;
        self.0.iter().rev().find(|r| r.matches(kind, layer)).map(|r| r.choice)
    }

    /// The choice for tensor `name` under this policy.
    pub fn choice_for(&self, name: &str, default: Choice) -> Choice {
        self.pinned(name).unwrap_or(default)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The rules that name none of `names` (a layer range past the model's depth, a kind it
    /// does not have): a mix that silently does nothing is a mistake.
    pub fn unmatched<'m>(&'m self, names: &[String]) -> Vec<&'m Rule> {
        let hits: Vec<(&str, u32)> = names.iter().filter_map(|n| matmul_kind_layer(n)).collect();
        self.0.iter().filter(|r| !hits.iter().any(|&(k, l)| r.matches(k, l))).collect()
    }
}

fn parse_layers(s: &str) -> Option<(u32, u32)> {
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let n = s.parse().ok()?;
            (n, n)
        }
    };
    (a <= b).then_some((a, b))
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_weight_names() {
        assert!(is_matmul_weight("blk.0.attn_q.weight"));
        assert!(is_matmul_weight("blk.31.ffn_down.weight"));
        assert!(is_matmul_weight("blk.3.ffn_up_exps.weight"));
        assert!(!is_matmul_weight("blk.0.attn_norm.weight"));
        assert!(!is_matmul_weight("blk.0.attn_q.bias"));
        assert!(!is_matmul_weight("token_embd.weight"));
        assert!(!is_matmul_weight("output.weight"));
        assert!(!is_matmul_weight("blk.x.attn_q.weight"));
        assert_eq!(matmul_kind_layer("blk.17.ffn_down.weight"), Some(("ffn_down", 17)));
    }

    #[test]
    fn mix_parses_and_picks_the_choice_by_kind() {
        let v = |q| Choice::Kaiju(Variant::new(q).unwrap());
        let m = Mix::parse("attn_v=6, ffn_down=5, ffn_up=keep, attn_q=8").unwrap();
        assert_eq!(m.to_string(), "attn_v=6,ffn_down=5,ffn_up=keep,attn_q=8");
        assert_eq!(m.choice_for("blk.3.attn_v.weight", v(4)), v(6));
        assert_eq!(m.choice_for("blk.12.ffn_down.weight", v(4)), v(5));
        assert_eq!(m.choice_for("blk.12.ffn_up.weight", v(4)), Choice::Keep);
        assert_eq!(m.choice_for("blk.12.ffn_down_exps.weight", v(4)), v(4));
        assert_eq!(m.choice_for("blk.0.attn_k.weight", v(3)), v(3));
        assert_eq!(m.pinned("blk.0.attn_k.weight"), None);
        assert_eq!(Mix::parse("").unwrap(), Mix::default());
        // layers, the wildcard, and the last rule winning
        let m = Mix::parse("*@0=8, ffn_down@20-29=keep, *@29=3").unwrap();
        assert_eq!(m.to_string(), "*@0=8,ffn_down@20-29=keep,*@29=3");
        assert_eq!(m.pinned("blk.0.attn_q.weight"), Some(v(8)));
        assert_eq!(m.pinned("blk.1.attn_q.weight"), None);
        assert_eq!(m.pinned("blk.25.ffn_down.weight"), Some(Choice::Keep));
        assert_eq!(m.pinned("blk.29.ffn_down.weight"), Some(v(3)));
        assert_eq!(m.pinned("token_embd.weight"), None);
        for (bad, says) in [
            ("attn_v", "expected KIND=Q"),
            ("attn_x=6", "expected a matmul kind"),
            ("attn_v@3-1=6", "expected layers N or A-B"),
            ("attn_v@x=6", "expected layers N or A-B"),
            ("attn_v=7", "expected a Voronoi modulus (3, 4, 5, 6, 8, 10, 12, 16) or keep"),
            ("attn_v=6,attn_v=5", "given twice"),
        ] {
            let e = Mix::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn choices_have_labels_and_order() {
        assert_eq!(Choice::parse("keep"), Some(Choice::Keep));
        assert_eq!(Choice::parse("3").unwrap().label(), "q3");
        assert_eq!(Choice::parse("9"), None);
        assert!(Choice::parse("3").unwrap() < Choice::parse("8").unwrap());
    }
}
