//! How symmetric a head's attention is, measured where the measure means something
//! (docs/diagnostics.md, "Symmetry"):
//!
//! - an encoder's softmax sees every logit, so the logits themselves are scored;
//! - a decoder's sees only keys up to the query, and any such pattern is produced by symmetric
//!   logits (copy each visible logit into its masked mirror), so a score over the whole logit
//!   matrix measures entries no softmax reads. What sharing W_Q and W_K constrains there is the
//!   head's content form `M = (ΓW_Q)(ΓW_K)ᵀ`, the bilinear form the queries and keys take of the
//!   normalised input, Γ the layer norm's gain: it is scored instead.
//!
//! Where a variant adds a learned positional term to the logits, the share of the visible
//! logits that term carries is measured beside either.

use qkv_kernels::Mask;
use serde::{Deserialize, Serialize};

use crate::attention::CausalSelfAttention;
use crate::linalg::Matrix;
use crate::variant::{AttentionVariant, Projection};

/// Which symmetry a layer's `symmetry` figures are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SymmetryMeasure {
    /// The logit score over every query-key pair, a decoder's masked ones included: what files
    /// written before the framing chose the measure hold, for every model.
    #[default]
    EveryLogit,
    /// An encoder's: the logit score ([`symmetry_score`]) over the pairs its softmax sees, which
    /// are all of them.
    VisibleLogits,
    /// A decoder's: the symmetric share of each head's content form ([`symmetric_share`]).
    ContentForm,
}

impl SymmetryMeasure {
    /// The measure that fits a model attending under `mask`.
    pub fn of(mask: Mask) -> Self {
        match mask {
            Mask::Causal => SymmetryMeasure::ContentForm,
            Mask::Bidirectional => SymmetryMeasure::VisibleLogits,
        }
    }

    /// What the figure is called on screen and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SymmetryMeasure::EveryLogit | SymmetryMeasure::VisibleLogits => "logit symmetry",
            SymmetryMeasure::ContentForm => "content-form symmetry",
        }
    }
}

/// One layer's logits as read from the device, in their two parts
/// ([`CausalSelfAttention::logit_parts`]): `content` [batch, heads, time, time] and the learned
/// positional `term` [term_heads, time, time] (1 head, or one per head), row-major.
pub struct LogitParts {
    pub content: Vec<f32>,
    pub term: Option<Vec<f32>>,
    pub batch: usize,
    pub heads: usize,
    pub time: usize,
}

impl LogitParts {
    fn matrix(&self, b: usize, h: usize) -> &[f32] {
        let size = self.time * self.time;
        &self.content[(b * self.heads + h) * size..][..size]
    }

    /// Head `h`'s positional term, if the variant has one.
    fn term(&self, h: usize) -> Option<&[f32]> {
        let size = self.time * self.time;
        let term = self.term.as_ref()?;
        let head = if term.len() == size { 0 } else { h };
        Some(&term[head * size..][..size])
    }

    /// The logits the softmax is given, batch `b` head `h`: content plus term.
    pub(crate) fn logits(&self, b: usize, h: usize) -> Vec<f32> {
        match self.term(h) {
            Some(term) => self.matrix(b, h).iter().zip(term).map(|(c, t)| c + t).collect(),
            None => self.matrix(b, h).to_vec(),
        }
    }
}

/// A layer's symmetry figures under `mask`: the measure, its value per head, and per head the
/// positional term's share (empty without a term). A decoder's value is `content_form` (from
/// [`content_form_symmetry`]); an encoder's is read from its logits. Neither reads a logit the
/// mask hides.
pub fn symmetry_figures(parts: &LogitParts, mask: Mask, content_form: Vec<f64>) -> (SymmetryMeasure, Vec<f64>, Vec<f64>) {
    let measure = SymmetryMeasure::of(mask);
    let symmetry = match measure {
        SymmetryMeasure::ContentForm => content_form,
        _ => (0..parts.heads)
            .map(|h| {
                let logits: Vec<Vec<f32>> = (0..parts.batch).map(|b| parts.logits(b, h)).collect();
                symmetry_score(logits.iter().map(Vec::as_slice), parts.time)
            })
            .collect(),
    };
    (measure, symmetry, positional_share(parts, mask))
}

/// Per head, the share of the visible logits' energy that the positional term carries:
/// `‖P̃‖² / (‖C̃‖² + ‖P̃‖²)` over the pairs the mask lets through, summed over the batch, where
/// C̃ and P̃ are the content and the term with each row centred over the keys it sees (a row's
/// constant changes nothing in its softmax). Empty where the variant has no term.
pub fn positional_share(parts: &LogitParts, mask: Mask) -> Vec<f64> {
    if parts.term.is_none() {
        return Vec::new();
    }
    let t = parts.time;
    let seen = |i: usize| match mask {
        Mask::Causal => i + 1,
        Mask::Bidirectional => t,
    };
    let centred_energy = |row: &[f32]| {
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / row.len() as f64;
        row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>()
    };
    (0..parts.heads)
        .map(|h| {
            let term = parts.term(h).expect("the term exists");
            let (mut content, mut positional) = (0.0f64, 0.0f64);
            for b in 0..parts.batch {
                let matrix = parts.matrix(b, h);
                for i in 0..t {
                    let row = i * t..i * t + seen(i);
                    content += centred_energy(&matrix[row.clone()]);
                    positional += centred_energy(&term[row]);
                }
            }
            if content + positional == 0.0 { 0.0 } else { positional / (content + positional) }
        })
        .collect()
}

/// `‖(A* + A*ᵀ)/2‖² / ‖A*‖²` summed over several `time × time` matrices (row-major), where A*
/// is what the softmax sees of A: adding r_i to row i changes no attention, so each row is
/// shifted by the r_i that leaves the least antisymmetric energy, and the whole by its mean.
///
/// The antisymmetric part of A + r1ᵀ is K + (r1ᵀ − 1rᵀ)/2 with K = (A − Aᵀ)/2; the r that
/// minimises its energy is r_i = −(1/n) Σ_j (A_ij − A_ji) (a least-squares fit of the
/// differences r_i − r_j to −2K_ij). A plain row centring would not do: it makes a symmetric
/// Gram matrix, Q=K-V's, asymmetric wherever two rows' means differ.
pub fn symmetry_score<'a>(matrices: impl Iterator<Item = &'a [f32]>, time: usize) -> f64 {
    let (mut symmetric, mut total) = (0.0f64, 0.0f64);
    let n = time as f64;
    for a in matrices {
        let at = |i: usize, j: usize| f64::from(a[i * time + j]);
        let shift: Vec<f64> = (0..time).map(|i| -(0..time).map(|j| at(i, j) - at(j, i)).sum::<f64>() / n).collect();
        let mean = (0..time).map(|i| (0..time).map(|j| at(i, j)).sum::<f64>() + n * shift[i]).sum::<f64>() / (n * n);
        let seen = |i: usize, j: usize| at(i, j) + shift[i] - mean;
        for i in 0..time {
            for j in 0..time {
                let (aij, aji) = (seen(i, j), seen(j, i));
                symmetric += ((aij + aji) / 2.0).powi(2);
                total += aij * aij;
            }
        }
    }
    if total == 0.0 { 1.0 } else { symmetric / total }
}

/// Per query head h, the symmetric share of its content form `M_h = A_h B_gᵀ`, where A_h is the
/// columns of the gain-folded query weights `ΓW_Q` that head h reads, B_g those of `ΓW_K` for
/// the key head g it attends with (GQA: h's group), and an identity projection's head is the
/// gain on its own channels. `projections` are the layer's weights with the layer norm's gain
/// folded in (rows scaled by Γ); `gain` is Γ (ones without a norm).
pub(crate) fn content_form_symmetry(attn: &CausalSelfAttention, projections: &[(Projection, Matrix)], gain: &[f64]) -> Vec<f64> {
    use Projection::*;
    let find = |roles: &[Projection]| roles.iter().find_map(|role| projections.iter().find(|(p, _)| p == role).map(|(_, w)| w));
    // An identity projection's weights, Γ on the input's own channels (no variant has two).
    let (query_identity, key_identity) = (attn.variant == AttentionVariant::QueryIdentity, attn.variant == AttentionVariant::KeyIdentity);
    let identity = (query_identity || key_identity).then(|| Matrix::identity(gain.len()).scale_rows(gain));
    let query = if query_identity { identity.as_ref() } else { find(&[Query, QueryKey, QueryKeyValue]) };
    let key = if key_identity { identity.as_ref() } else { find(&[Key, QueryKey, KeyValue, QueryKeyValue]) };
    let (Some(query), Some(key)) = (query, key) else {
        return Vec::new();
    };
    let (k, group) = (attn.head_dim, attn.n_head / attn.kv_heads.max(1));
    (0..attn.n_head).map(|h| symmetric_share(&query.columns(h * k, k), &key.columns(h / group * k, k))).collect()
}

/// `‖(M + Mᵀ)/2‖² / ‖M‖²` for `M = A Bᵀ` (A and B both d × k), from k × k products only:
/// `‖M‖² = tr(AᵀA · BᵀB)`, `tr(M²) = tr((BᵀA)²)`, and `‖(M + Mᵀ)/2‖² = (‖M‖² + tr(M²)) / 2`.
/// 1 for a symmetric M (A = B: Q=K-V), about 1/2 for unrelated A and B, 0 for an antisymmetric
/// one. A zero form counts as symmetric.
pub(crate) fn symmetric_share(a: &Matrix, b: &Matrix) -> f64 {
    let (a_t, b_t) = (a.transpose(), b.transpose());
    let norm = a_t.matmul(a).matmul(&b_t.matmul(b)).trace();
    let ba = b_t.matmul(a);
    let square = ba.matmul(&ba).trace();
    if norm <= 0.0 { 1.0 } else { (norm + square) / (2.0 * norm) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_symmetric_share_of_known_forms() {
        // d = 3, k = 2.
        let a = Matrix { rows: 3, cols: 2, data: vec![1.0, 0.0, 2.0, -1.0, 0.5, 3.0] };
        assert!((symmetric_share(&a, &a) - 1.0).abs() < 1e-12, "A Aᵀ is symmetric");
        // M = A Bᵀ with B = A J, J = [[0, 1], [-1, 0]]: M = A Jᵀ Aᵀ is antisymmetric.
        let b = Matrix { rows: 3, cols: 2, data: vec![0.0, 1.0, 1.0, 2.0, -3.0, 0.5] };
        assert!(symmetric_share(&a, &b).abs() < 1e-12, "{}", symmetric_share(&a, &b));
        // Against M built whole: a 3 × 3 M = A Bᵀ with B unrelated.
        let c = Matrix { rows: 3, cols: 2, data: vec![0.3, -2.0, 1.0, 1.0, 0.0, 4.0] };
        let m = a.matmul(&c.transpose());
        let sym: f64 =
            (0..3).flat_map(|i| (0..3).map(move |j| (i, j))).map(|(i, j)| ((m.data[i * 3 + j] + m.data[j * 3 + i]) / 2.0).powi(2)).sum();
        let all: f64 = m.data.iter().map(|v| v * v).sum();
        assert!((symmetric_share(&a, &c) - sym / all).abs() < 1e-12);
    }

    /// Random-looking content and a positional term for 2 heads over 5 positions, the entries a
    /// causal mask hides filled by `fill(i, j, mirror)`.
    fn causal_parts(fill: impl Fn(f32, f32) -> f32) -> LogitParts {
        let (batch, heads, time) = (2, 2, 5);
        let value = |seed: usize| ((seed * 7919 % 101) as f32 / 50.0) - 1.0;
        let refill = |values: Vec<f32>, matrices: usize| {
            let mut out = values.clone();
            for m in 0..matrices {
                for i in 0..time {
                    for j in i + 1..time {
                        let at = m * time * time;
                        out[at + i * time + j] = fill(values[at + i * time + j], values[at + j * time + i]);
                    }
                }
            }
            out
        };
        let content = (0..batch * heads * time * time).map(|s| value(s + 3)).collect();
        let term = (0..heads * time * time).map(|s| value(s * 13 + 1) / 2.0).collect();
        LogitParts { content: refill(content, batch * heads), term: Some(refill(term, heads)), batch, heads, time }
    }

    #[test]
    fn a_decoder_s_figures_do_not_read_the_masked_logits() {
        let current = causal_parts(|own, _| own);
        let mirrored = causal_parts(|_, mirror| mirror);
        let content_form = vec![0.7, 1.0];
        let figures = |parts: &LogitParts| symmetry_figures(parts, Mask::Causal, content_form.clone());
        assert_eq!(figures(&current), figures(&mirrored));
        let (measure, symmetry, positional) = figures(&current);
        assert_eq!(measure, SymmetryMeasure::ContentForm);
        assert_eq!(symmetry, content_form);
        assert!(positional.iter().all(|&s| 0.0 < s && s < 1.0), "{positional:?}");
        // The score over every logit, which a decoder used to carry, moves with the fill: with
        // the mirror fill the softmax's view is symmetric by construction.
        let every = |parts: &LogitParts| symmetry_score([parts.logits(0, 0)].iter().map(Vec::as_slice), parts.time);
        assert!((every(&mirrored) - 1.0).abs() < 1e-9 && every(&current) < 0.98, "{} {}", every(&current), every(&mirrored));
    }

    #[test]
    fn an_encoder_s_figures_are_its_logits_score() {
        let parts = causal_parts(|own, _| own);
        let (measure, symmetry, positional) = symmetry_figures(&parts, Mask::Bidirectional, Vec::new());
        assert_eq!(measure, SymmetryMeasure::VisibleLogits);
        let expected = symmetry_score((0..2).map(|b| parts.logits(b, 1)).collect::<Vec<_>>().iter().map(Vec::as_slice), 5);
        assert_eq!(symmetry[1], expected);
        assert_eq!(positional.len(), 2);
    }

    #[test]
    fn the_symmetry_score_sees_what_the_softmax_sees() {
        let score = |a: &[f32], time| symmetry_score([a].into_iter(), time);
        // A cycle, i → i+1 (mod 3), antisymmetric with no row constant to remove: 0.
        let cycle = [0.0f32, 1.0, -1.0, -1.0, 0.0, 1.0, 1.0, -1.0, 0.0];
        assert!(score(&cycle, 3).abs() < 1e-12);
        let gram = [1.0f32, 2.0, 0.5, 2.0, 5.0, -1.0, 0.5, -1.0, 3.0];
        assert!((score(&gram, 3) - 1.0).abs() < 1e-12);
        // (Q=K-V)+'s kind of term, a row constant plus a key bias, on symmetric logits: the
        // softmax sees symmetric logits (g_ij + c_i + c_j), so 1. The raw matrix is not symmetric.
        let (rows, keys) = ([0.3f32, -2.0, 1.1], [0.7f32, 0.0, -1.5]);
        let plus: Vec<f32> = (0..9).map(|k| gram[k] + rows[k / 3] + keys[k % 3]).collect();
        assert!((score(&plus, 3) - 1.0).abs() < 1e-9, "{}", score(&plus, 3));
        assert!((plus[1] - plus[3]).abs() > 0.1);
        // Any two tokens: their attention is always that of a symmetric matrix.
        assert!((score(&[0.0, 1.0, -1.0, 0.0], 2) - 1.0).abs() < 1e-12);
        // A term in i − j that prefers the previous token is not.
        let previous: Vec<f32> = (0..9).map(|k| gram[k] + if k / 3 == k % 3 + 1 { 2.0 } else { 0.0 }).collect();
        assert!(score(&previous, 3) < 0.95, "{}", score(&previous, 3));
    }

    #[test]
    fn a_term_that_is_a_row_constant_carries_no_share() {
        let mut parts = causal_parts(|own, _| own);
        parts.term = Some((0..25).map(|s| (s / 5) as f32).collect());
        assert_eq!(positional_share(&parts, Mask::Causal), [0.0, 0.0]);
        parts.term = None;
        assert!(positional_share(&parts, Mask::Causal).is_empty());
    }
}
