//! What a model's attention has learned, as numbers the papers' explanations can be checked
//! against (definitions and their reasons in docs/diagnostics.md):
//!
//! - how alike two projections are, `cos(W_K, W_V)` and `cos(W_Q, W_K)`: paper 2 explains why
//!   keys and values can share a projection by the first being high in trained standard models;
//!   and, since a cosine of weights changes with a change of basis that leaves the model's outputs
//!   as they are, how much of the input W_K and W_V read in common, which does not;
//! - how symmetric each head's attention logits are: sharing W_Q and W_K forces symmetry, which
//!   paper 2 blames for Q=K-V's losses;
//! - how many directions each projection uses, its effective rank;
//! - how large the logits are, which the scale 1/√d_k (or paper 1's 1/(2√d_k)) sets at the start.
//!
//! The weight figures need only the model; the logit figures need an input (tokens, or images
//! for a ViT). Every read from
//! the device is awaited, so that the browser (which cannot block on its GPU) can compute them.

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};

use crate::attention::CausalSelfAttention;
use crate::gpt::normalise;
use crate::model::{Input, Model};
use crate::variant::Projection;

/// One layer's diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerDiagnostics {
    /// `cos(W_K, W_V)`, the two weight matrices read as vectors; `None` where the layer has no
    /// separate W_K and W_V.
    pub key_value_cosine: Option<f64>,
    /// How much of the input the keys and the values read in common, a property of the model
    /// rather than of its weights' basis: per key/value head, the mean squared cosine of the
    /// principal angles between the spaces W_K's and W_V's slices read ([`subspace_overlap`]), then
    /// the mean over heads. 1 when each head's values read exactly what its keys read, 0 when
    /// nothing; subspaces drawn at random give head_dim / n_embd. `None` as for the cosine.
    #[serde(default)]
    pub key_value_overlap: Option<f64>,
    /// `cos(W_Q, W_K)`; `None` without separate W_Q and W_K of the same shape (GQA/MQA keys
    /// have fewer heads than queries).
    pub query_key_cosine: Option<f64>,
    /// The effective rank of each projection the layer owns, by its name ("W_K", "W_QK", …);
    /// empty where they were not computed ([`Ranks::Skipped`]).
    pub effective_ranks: Vec<(String, f64)>,
    /// Per head: the share of the logit matrix's energy in its symmetric part,
    /// `‖(A* + A*ᵀ)/2‖² / ‖A*‖²`, over every query-key pair before the causal mask, where A* is
    /// A with each row shifted by the constant that makes it most symmetric (a row's constant
    /// changes nothing in its softmax; [`symmetry_score`]): 1 when some symmetric logits give the
    /// same attention (Q=K-V's, and (Q=K-V)+'s, whose term is a row constant plus a key bias), 0.5
    /// for unrelated A_ij and A_ji, 0 for a cyclic antisymmetric matrix.
    pub symmetry: Vec<f64>,
    /// Root mean square of the scaled logits over the pairs a query may attend to, all heads.
    pub logit_rms: f64,
}

/// The diagnostics of every layer, in order, from the inputs they were measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDiagnostics {
    pub layers: Vec<LayerDiagnostics>,
}

impl ModelDiagnostics {
    /// The mean over layers of a per-layer figure that some layers may lack; `None` if all do.
    pub fn mean(&self, figure: impl Fn(&LayerDiagnostics) -> Option<f64>) -> Option<f64> {
        let values: Vec<f64> = self.layers.iter().filter_map(figure).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }

    /// The symmetry score's mean over layers and heads.
    pub fn mean_symmetry(&self) -> Option<f64> {
        self.mean(|l| (!l.symmetry.is_empty()).then(|| l.symmetry.iter().sum::<f64>() / l.symmetry.len() as f64))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiagnosticsError {
    #[error("reading the model's weights or logits: {0}")]
    Read(#[from] qkv_kernels::ReadBackError),
    #[error("diagnostics need at least one input token")]
    NoTokens,
}

async fn read<const D: usize>(tensor: Tensor<D>) -> Result<Vec<f32>, DiagnosticsError> {
    Ok(qkv_kernels::read_floats(tensor).await?)
}

/// A weight matrix read from the device: its values (row-major) and its dimensions.
struct Weights {
    values: Vec<f32>,
    dims: [usize; 2],
}

async fn weights(layer: &Linear) -> Result<Weights, DiagnosticsError> {
    let weight: &Param<Tensor<2>> = &layer.weight;
    Ok(Weights { dims: weight.val().dims(), values: read(weight.val()).await? })
}

/// Diagnostics of every layer of `model`, the logit figures measured on `input`. Pass the model
/// as it is evaluated (`valid()`, without dropout), or the figures of the later layers vary with
/// dropout's masks.
pub async fn diagnose(model: &Model, input: Input) -> Result<ModelDiagnostics, DiagnosticsError> {
    diagnose_with(model, input, Ranks::Computed).await
}

/// Whether to compute the effective ranks, the one figure whose cost grows as d³ (a singular
/// value decomposition per projection): a live view of a wide model leaves them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranks {
    Computed,
    Skipped,
}

/// [`diagnose`], with the effective ranks computed or left empty.
pub async fn diagnose_with(model: &Model, input: Input, ranks: Ranks) -> Result<ModelDiagnostics, DiagnosticsError> {
    if input.is_empty() {
        return Err(DiagnosticsError::NoTokens);
    }
    let mut x = model.embed(input);
    let mut layers = Vec::new();
    for block in model.layers() {
        let attention_input = normalise(&block.ln_1, x.clone());
        layers.push(diagnose_layer(&block.attn, attention_input, ranks).await?);
        x = block.run(x, false).0;
    }
    Ok(ModelDiagnostics { layers })
}

async fn diagnose_layer(
    attn: &CausalSelfAttention,
    attention_input: Tensor<3>,
    ranks: Ranks,
) -> Result<LayerDiagnostics, DiagnosticsError> {
    let mut owned = Vec::new();
    for &projection in attn.variant.projections() {
        if let Some(layer) = attn.projection(projection) {
            owned.push((projection, weights(layer).await?));
        }
    }
    let find = |wanted: Projection| owned.iter().find(|(p, _)| *p == wanted).map(|(_, w)| w);
    let same_shape_cosine = |a: Projection, b: Projection| match (find(a), find(b)) {
        (Some(a), Some(b)) if a.dims == b.dims => Some(cosine(&a.values, &b.values)),
        _ => None,
    };
    let effective_ranks = match ranks {
        Ranks::Computed => owned
            .iter()
            .map(|(projection, w)| (projection.name().to_string(), effective_rank(&singular_values(&w.values, w.dims[0], w.dims[1]))))
            .collect(),
        Ranks::Skipped => Vec::new(),
    };

    let logits = attn.logits(&attn.project(attention_input), 0);
    let [batch, heads, time, _] = logits.dims();
    let values = read(logits).await?;
    let matrices: Vec<&[f32]> = values.chunks(time * time).collect();
    let symmetry = (0..heads).map(|h| symmetry_score((0..batch).map(|b| matrices[b * heads + h]), time)).collect();
    let key_value_overlap = match (find(Projection::Key), find(Projection::Value)) {
        (Some(k), Some(v)) if k.dims == v.dims => Some(subspace_overlap(&k.values, &v.values, k.dims[0], k.dims[1] / attn.head_dim)),
        _ => None,
    };
    Ok(LayerDiagnostics {
        key_value_cosine: same_shape_cosine(Projection::Key, Projection::Value),
        key_value_overlap,
        query_key_cosine: same_shape_cosine(Projection::Query, Projection::Key),
        effective_ranks,
        symmetry,
        logit_rms: causal_rms(&matrices, time),
    })
}

/// How much two projections of the same shape read the same part of their input, head by head:
/// `a` and `b` are row-major `[inputs, heads · head_dim]` (Burn's `Linear` layout, y = x W), and
/// each head reads the span of its `head_dim` columns. Per head, the mean of cos² over the
/// principal angles between the two spans (`‖Q_aᵀ Q_b‖²_F / min(rank_a, rank_b)` for orthonormal
/// bases Q), then the mean over heads.
///
/// Replacing a head's W_V slice by W_V R and its rows of W_O by R⁻¹ W_O, for any invertible R,
/// changes no output of the model, and changes `cos(W_K, W_V)`; it leaves the span, and so this
/// figure, as it was.
pub fn subspace_overlap(a: &[f32], b: &[f32], inputs: usize, heads: usize) -> f64 {
    let columns = a.len() / inputs.max(1);
    let head_dim = columns / heads.max(1);
    if head_dim == 0 {
        return 0.0;
    }
    let overlaps: Vec<f64> = (0..heads)
        .map(|h| {
            let span = |w: &[f32]| orthonormal_columns(w, inputs, columns, h * head_dim..(h + 1) * head_dim);
            let (qa, qb) = (span(a), span(b));
            let rank = qa.len().min(qb.len());
            if rank == 0 {
                return 0.0;
            }
            let squared: f64 = qa.iter().flat_map(|u| qb.iter().map(move |v| dot(u, v).powi(2))).sum();
            squared / rank as f64
        })
        .collect();
    overlaps.iter().sum::<f64>() / overlaps.len() as f64
}

fn dot(u: &[f64], v: &[f64]) -> f64 {
    u.iter().zip(v).map(|(x, y)| x * y).sum()
}

/// An orthonormal basis of the span of some columns of a row-major `rows × columns` matrix, by
/// Gram-Schmidt with the projection repeated (so that nearly dependent columns stay
/// orthogonal); columns that add no direction are left out.
fn orthonormal_columns(w: &[f32], rows: usize, columns: usize, which: std::ops::Range<usize>) -> Vec<Vec<f64>> {
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for c in which {
        let mut u: Vec<f64> = (0..rows).map(|r| f64::from(w[r * columns + c])).collect();
        let norm = dot(&u, &u).sqrt();
        for _ in 0..2 {
            for e in &basis {
                let along = dot(&u, e);
                u.iter_mut().zip(e).for_each(|(x, y)| *x -= along * y);
            }
        }
        let left = dot(&u, &u).sqrt();
        if left > 1e-9 * norm.max(f64::MIN_POSITIVE) {
            basis.push(u.into_iter().map(|x| x / left).collect());
        }
    }
    basis
}

/// The cosine of two equally long vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 { 0.0 } else { dot / (aa.sqrt() * bb.sqrt()) }
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

/// Root mean square of the entries with key position ≤ query position (the causal ones) of
/// `time × time` matrices.
pub fn causal_rms(matrices: &[&[f32]], time: usize) -> f64 {
    let (mut sum, mut count) = (0.0f64, 0usize);
    for a in matrices {
        for i in 0..time {
            for &value in &a[i * time..i * time + i + 1] {
                sum += f64::from(value).powi(2);
                count += 1;
            }
        }
    }
    (sum / count.max(1) as f64).sqrt()
}

/// Roy and Vetterli's effective rank: `exp(H(p))` with `p_i = σ_i / Σσ`, between 1 (one
/// direction) and the number of singular values (all equal).
pub fn effective_rank(singular_values: &[f64]) -> f64 {
    let total: f64 = singular_values.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let entropy: f64 = singular_values.iter().map(|s| s / total).filter(|&p| p > 0.0).map(|p| -p * p.ln()).sum();
    entropy.exp()
}

/// The singular values of a `rows × cols` row-major matrix, largest first: the square roots of
/// the eigenvalues of its smaller Gram matrix (a few hundred columns at most here).
pub fn singular_values(matrix: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let n = rows.min(cols);
    let at = |r: usize, c: usize| f64::from(matrix[r * cols + c]);
    // G = MᵀM (cols ≤ rows) or MMᵀ, n × n.
    let mut gram = vec![0.0f64; n * n];
    for i in 0..n {
        for j in i..n {
            let value: f64 =
                if cols <= rows { (0..rows).map(|r| at(r, i) * at(r, j)).sum() } else { (0..cols).map(|c| at(i, c) * at(j, c)).sum() };
            gram[i * n + j] = value;
            gram[j * n + i] = value;
        }
    }
    let mut eigenvalues = symmetric_eigenvalues(gram, n);
    eigenvalues.sort_by(|a, b| b.total_cmp(a));
    eigenvalues.into_iter().map(|e| e.max(0.0).sqrt()).collect()
}

/// Eigenvalues of a symmetric `n × n` row-major matrix: Householder reflections bring it to
/// tridiagonal form, whose eigenvalues implicit QL steps then find. About 4n³/3 operations in
/// all; cyclic Jacobi rotations, used before, took that several times over for every sweep,
/// which made the browser's attention refresh take most of a second.
fn symmetric_eigenvalues(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    let (mut diagonal, mut off_diagonal) = tridiagonalise(&mut a, n);
    tridiagonal_eigenvalues(&mut diagonal, &mut off_diagonal);
    diagonal
}

/// Reduces symmetric `a` (its lower triangle is read, and overwritten) to a tridiagonal matrix
/// with the same eigenvalues: its diagonal, and its off-diagonal with `e[i]` beside `d[i]` and
/// `e[0] = 0`. Row by row from the last, a reflection zeroes the row left of its subdiagonal.
fn tridiagonalise(a: &mut [f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut e = vec![0.0f64; n];
    for i in (1..n).rev() {
        let l = i - 1;
        let scale: f64 = (0..=l).map(|k| a[i * n + k].abs()).sum();
        if l == 0 || scale == 0.0 {
            // Nothing left of the subdiagonal to zero.
            e[i] = a[i * n + l];
            continue;
        }
        // The reflection v = row − g·e_l (scaled for range), with |g| the row's norm.
        let mut h = 0.0;
        for k in 0..=l {
            a[i * n + k] /= scale;
            h += a[i * n + k] * a[i * n + k];
        }
        let f = a[i * n + l];
        let g = if f >= 0.0 { -h.sqrt() } else { h.sqrt() };
        e[i] = scale * g;
        h -= f * g;
        a[i * n + l] = f - g;
        // p = A v / h into e[..=l] (free until those rows are reduced), and K = vᵀp / 2h.
        let mut vp = 0.0;
        for j in 0..=l {
            let below: f64 = (0..=j).map(|k| a[j * n + k] * a[i * n + k]).sum();
            let right: f64 = (j + 1..=l).map(|k| a[k * n + j] * a[i * n + k]).sum();
            e[j] = (below + right) / h;
            vp += e[j] * a[i * n + j];
        }
        let k_half = vp / (h + h);
        // A ← A − v qᵀ − q vᵀ with q = p − K v, on the lower triangle.
        for j in 0..=l {
            let vj = a[i * n + j];
            let qj = e[j] - k_half * vj;
            e[j] = qj;
            for k in 0..=j {
                a[j * n + k] -= vj * e[k] + qj * a[i * n + k];
            }
        }
    }
    let d = (0..n).map(|i| a[i * n + i]).collect();
    (d, e)
}

/// The eigenvalues of the symmetric tridiagonal matrix with diagonal `d` and off-diagonal `e`
/// (`e[i]` beside `d[i]`, `e[0]` unused), into `d`, by QL steps with an implicit shift towards
/// the eigenvalue of the leading 2 × 2 block nearest its corner.
fn tridiagonal_eigenvalues(d: &mut [f64], e: &mut [f64]) {
    let n = d.len();
    if n == 0 {
        return;
    }
    // From here on e[i] sits between d[i] and d[i + 1].
    e.copy_within(1.., 0);
    e[n - 1] = 0.0;
    for l in 0..n {
        for _iteration in 0..64 {
            // The first negligible off-diagonal entry from l on splits off a block l..=m.
            let mut m = l;
            while m + 1 < n && e[m].abs() > f64::EPSILON * (d[m].abs() + d[m + 1].abs()) {
                m += 1;
            }
            if m == l {
                break;
            }
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = g.hypot(1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0f64, 1.0f64, 0.0f64);
            let mut deflated = false;
            // Plane rotations chase the bulge from m back up to l.
            for i in (l..m).rev() {
                let f = s * e[i];
                let b = c * e[i];
                r = f.hypot(g);
                e[i + 1] = r;
                if r == 0.0 {
                    // An off-diagonal entry vanished: the block splits here; start again.
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    deflated = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
            }
            if !deflated {
                d[l] -= p;
                e[l] = g;
                e[m] = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpt::Gpt;
    use crate::gpt::tests::tiny_config;
    use crate::variant::AttentionVariant;
    use burn::tensor::Device;
    use burn::tensor::Int;

    fn tokens(device: &Device) -> Tensor<2, Int> {
        Tensor::from_data(burn::tensor::TensorData::new((0..16).map(|i| (i * 5 % 13) as i64).collect::<Vec<_>>(), [2, 8]), device)
    }

    fn diagnose_gpt(model: &Gpt, device: &Device) -> ModelDiagnostics {
        pollster::block_on(diagnose(&Model::Gpt(model.clone()), Input::Tokens(tokens(device), None))).unwrap()
    }

    fn diagnose_config(variant: AttentionVariant, edit: impl FnOnce(&mut Gpt)) -> ModelDiagnostics {
        let device = Device::flex();
        let mut model = Gpt::new_seeded(&tiny_config(variant), &device, 3).unwrap();
        edit(&mut model);
        diagnose_gpt(&model, &device)
    }

    #[test]
    fn equal_key_and_value_weights_have_cosine_one_and_opposite_ones_minus_one() {
        let same = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                block.attn.w_v = block.attn.w_k.clone();
            }
        });
        let opposite = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                let w_k = block.attn.w_k.as_ref().unwrap().weight.val();
                block.attn.w_v.as_mut().unwrap().weight = Param::from_tensor(w_k.neg());
            }
        });
        for layer in &same.layers {
            assert!((layer.key_value_cosine.unwrap() - 1.0).abs() < 1e-9, "{layer:?}");
        }
        for layer in &opposite.layers {
            assert!((layer.key_value_cosine.unwrap() + 1.0).abs() < 1e-9, "{layer:?}");
        }
        // Independent random initialisations are nearly orthogonal.
        let fresh = diagnose_config(AttentionVariant::Standard, |_| {});
        assert!(
            fresh.layers.iter().all(|l| l.key_value_cosine.unwrap().abs() < 0.2 && l.query_key_cosine.unwrap().abs() < 0.2),
            "{fresh:?}"
        );
    }

    /// R: for each of `heads` blocks of `head_dim`, reverse the columns and add twice the first
    /// to the second (a shear), so that every head's columns mix; and R⁻¹.
    fn mixing_basis(heads: usize, head_dim: usize, device: &Device) -> (Tensor<2>, Tensor<2>) {
        let n = heads * head_dim;
        let (mut r, mut inverse) = (vec![0.0f32; n * n], vec![0.0f32; n * n]);
        for h in 0..heads {
            let at = |i: usize, j: usize| (h * head_dim + i) * n + h * head_dim + j;
            // R = S P, S = I + 2 E_01, P reverses: R⁻¹ = P⁻¹ S⁻¹ = P (I − 2 E_01).
            for i in 0..head_dim {
                r[at(i, head_dim - 1 - i)] = 1.0;
                inverse[at(head_dim - 1 - i, i)] = 1.0;
            }
            r[at(0, head_dim - 2)] = 2.0;
            inverse[at(head_dim - 1, 1)] = -2.0;
        }
        let tensor = |values: Vec<f32>| Tensor::from_data(burn::tensor::TensorData::new(values, [n, n]), device);
        (tensor(r), tensor(inverse))
    }

    #[test]
    fn the_key_value_overlap_survives_a_change_of_basis_that_moves_the_cosine() {
        let device = Device::flex();
        let config = tiny_config(AttentionVariant::Standard);
        let fresh = Gpt::new_seeded(&config, &device, 3).unwrap();
        for layer in &diagnose_gpt(&fresh, &device).layers {
            // Independently drawn 4-dimensional subspaces of 16 dimensions: about 4/16.
            let overlap = layer.key_value_overlap.unwrap();
            assert!((0.1..0.45).contains(&overlap), "near chance at initialisation: {overlap}");
        }
        // A model whose values read exactly what its keys read (W_V = W_K: cosine 1), so that
        // the change of basis below moves the cosine by far more than chance would.
        let mut model = fresh.clone();
        for block in &mut model.blocks {
            let w_k = block.attn.w_k.clone().unwrap();
            block.attn.w_v = Some(w_k);
        }
        let mut changed = model.clone();
        let head_dim = config.n_embd / config.n_head;
        let (r, inverse) = mixing_basis(config.n_head, head_dim, &device);
        for block in &mut changed.blocks {
            // W_V → W_V R (its bias too) and W_O → R⁻¹ W_O: every output stays as it was.
            let w_v = block.attn.w_v.as_mut().unwrap();
            w_v.weight = Param::from_tensor(w_v.weight.val().matmul(r.clone()));
            if let Some(bias) = &mut w_v.bias {
                *bias = Param::from_tensor(bias.val().unsqueeze::<2>().matmul(r.clone()).squeeze_dim(0));
            }
            let w_o = &mut block.attn.w_o;
            w_o.weight = Param::from_tensor(inverse.clone().matmul(w_o.weight.val()));
        }
        let logits = |m: &Gpt| m.forward(tokens(&device)).into_data().try_to_vec::<f32>().unwrap();
        let largest = logits(&model).iter().zip(logits(&changed)).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(largest < 1e-4, "the change of basis changes no output: {largest}");
        let (before, after) = (diagnose_gpt(&model, &device), diagnose_gpt(&changed, &device));
        for (b, a) in before.layers.iter().zip(&after.layers) {
            let (overlap_before, overlap_after) = (b.key_value_overlap.unwrap(), a.key_value_overlap.unwrap());
            // The same up to the rounding of the changed weights to f32.
            assert!((overlap_before - overlap_after).abs() < 1e-6, "{overlap_before} → {overlap_after}");
            assert!((overlap_before - 1.0).abs() < 1e-6, "values read what keys read: {overlap_before}");
            let (cosine_before, cosine_after) = (b.key_value_cosine.unwrap(), a.key_value_cosine.unwrap());
            assert!((cosine_before - 1.0).abs() < 1e-6 && cosine_after.abs() < 0.5, "the raw cosine moves: {b:?} {a:?}");
        }
    }

    #[test]
    fn the_overlap_is_one_for_the_same_span_and_zero_for_orthogonal_ones() {
        // Two heads of 2 columns reading 6 inputs, row-major [6, 4].
        let inputs = 6;
        let w_k: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32) - 5.0).collect();
        // W_V = W_K R per head, R = [[1, 3], [2, -1]]: the same spans, another basis.
        let mut w_v = vec![0.0f32; 24];
        for row in 0..inputs {
            for head in 0..2 {
                let (a, b) = (w_k[row * 4 + 2 * head], w_k[row * 4 + 2 * head + 1]);
                w_v[row * 4 + 2 * head] = a + 2.0 * b;
                w_v[row * 4 + 2 * head + 1] = 3.0 * a - b;
            }
        }
        assert!((subspace_overlap(&w_k, &w_v, inputs, 2) - 1.0).abs() < 1e-9);
        assert!(cosine(&w_k, &w_v) < 0.9, "while their cosine is not 1");
        // Keys read inputs 0-1 (head 0) and 2-3 (head 1); values read 4-5 in both heads.
        let unit = |rows: [[usize; 2]; 2]| {
            let mut w = vec![0.0f32; 24];
            for (head, pair) in rows.iter().enumerate() {
                for (j, &row) in pair.iter().enumerate() {
                    w[row * 4 + 2 * head + j] = 1.0;
                }
            }
            w
        };
        let (keys, values) = (unit([[0, 1], [2, 3]]), unit([[4, 5], [4, 5]]));
        assert!(subspace_overlap(&keys, &values, inputs, 2).abs() < 1e-12);
        // Head 0 shares one of its two directions, head 1 none: (1/2 + 0) / 2.
        let half = unit([[0, 4], [4, 5]]);
        assert!((subspace_overlap(&keys, &half, inputs, 2) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn only_layers_with_both_matrices_have_a_cosine() {
        let shared = diagnose_config(AttentionVariant::SharedKeyValue, |_| {});
        assert!(shared.layers.iter().all(|l| l.key_value_cosine.is_none() && l.query_key_cosine.is_none()));
        let identity = diagnose_config(AttentionVariant::QueryIdentity, |_| {});
        assert!(identity.layers.iter().all(|l| l.key_value_cosine.is_some() && l.query_key_cosine.is_none()));
        assert_eq!(identity.mean(|l| l.query_key_cosine), None);
        let names: Vec<&str> = identity.layers[0].effective_ranks.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["W_K", "W_V"]);
    }

    #[test]
    fn shared_query_key_logits_are_symmetric_and_standard_ones_are_not() {
        let shared = diagnose_config(AttentionVariant::SharedQueryKey, |_| {});
        for layer in &shared.layers {
            assert_eq!(layer.symmetry.len(), 4);
            assert!(layer.symmetry.iter().all(|s| (s - 1.0).abs() < 1e-6), "{layer:?}");
        }
        let standard = diagnose_config(AttentionVariant::Standard, |_| {});
        assert!(standard.layers.iter().flat_map(|l| &l.symmetry).all(|&s| s < 0.99), "{standard:?}");
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
    fn the_logit_rms_counts_only_causal_pairs() {
        // Causal entries 1, 2, 2 (rms √3); the future entry 100 is ignored.
        let a = [1.0f32, 100.0, 2.0, 2.0];
        assert!((causal_rms(&[&a[..]], 2) - 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_model_with_larger_logits_measures_larger() {
        let base = diagnose_config(AttentionVariant::Standard, |_| {});
        let doubled = diagnose_config(AttentionVariant::Standard, |model| {
            for block in &mut model.blocks {
                block.attn.scale *= 2.0;
            }
        });
        // The first layer sees the same input; later ones see what the changed attention made.
        let (a, b) = (&base.layers[0], &doubled.layers[0]);
        assert!((b.logit_rms / a.logit_rms - 2.0).abs() < 1e-3, "{a:?} {b:?}");
    }

    #[test]
    fn effective_ranks_of_known_spectra() {
        assert!((effective_rank(&[1.0, 1.0, 1.0, 1.0]) - 4.0).abs() < 1e-12);
        assert!((effective_rank(&[5.0, 0.0, 0.0]) - 1.0).abs() < 1e-12);
        // p = (3/4, 1/4): exp(-(0.75 ln 0.75 + 0.25 ln 0.25)).
        let expected = (-(0.75f64 * 0.75f64.ln() + 0.25 * 0.25f64.ln())).exp();
        assert!((effective_rank(&[3.0, 1.0]) - expected).abs() < 1e-12);
    }

    #[test]
    fn singular_values_of_known_matrices() {
        // Rows (3, 0), (0, -1), (0, 0): singular values 3 and 1.
        let tall = [3.0f32, 0.0, 0.0, -1.0, 0.0, 0.0];
        let values = singular_values(&tall, 3, 2);
        assert!((values[0] - 3.0).abs() < 1e-9 && (values[1] - 1.0).abs() < 1e-9, "{values:?}");
        // A rank-one 3 × 4 matrix u vᵀ with |u| = 3, |v| = 2: one singular value 6.
        let (u, v) = ([1.0f32, 2.0, 2.0], [1.0f32, 1.0, 1.0, 1.0]);
        let outer: Vec<f32> = u.iter().flat_map(|a| v.iter().map(move |b| a * b)).collect();
        let values = singular_values(&outer, 3, 4);
        assert!((values[0] - 6.0).abs() < 1e-9 && values[1..].iter().all(|s| s.abs() < 1e-6), "{values:?}");
        // A cyclic permutation scaled by 2 in 5 dimensions: all singular values 2, effective
        // rank 5.
        let n = 5;
        let mut m = vec![0.0f32; n * n];
        for i in 0..n {
            m[i * n + (i + 1) % n] = 2.0;
        }
        let values = singular_values(&m, n, n);
        assert!((effective_rank(&values) - 5.0).abs() < 1e-6, "{values:?}");
    }

    /// M = H₁ diag(σ) H₂ with Householder reflections H = I − 2vvᵀ/vᵀv, which are orthogonal:
    /// M's singular values are the σ, whatever the v. Distinct, repeated and small ones (as
    /// small as the f32 entries and the Gram matrix leave measurable).
    #[test]
    fn singular_values_of_a_rotated_spectrum() {
        let n = 48;
        let reflection = |seed: f64| -> Vec<f64> {
            let v: Vec<f64> = (0..n).map(|i| ((i as f64 + 1.0) * seed).sin()).collect();
            let vv: f64 = v.iter().map(|x| x * x).sum();
            (0..n * n).map(|ij| f64::from(u8::from(ij / n == ij % n)) - 2.0 * v[ij / n] * v[ij % n] / vv).collect()
        };
        let (h1, h2) = (reflection(0.7), reflection(1.9));
        let sigma: Vec<f64> = (0..n)
            .map(|i| {
                if i < 8 {
                    2.0
                } else if i < 12 {
                    0.1
                } else {
                    1.0 + i as f64 * 0.25
                }
            })
            .collect();
        let m: Vec<f32> = (0..n * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                (0..n).map(|k| h1[i * n + k] * sigma[k] * h2[k * n + j]).sum::<f64>() as f32
            })
            .collect();
        let mut expected = sigma.clone();
        expected.sort_by(|a, b| b.total_cmp(a));
        let values = singular_values(&m, n, n);
        assert_eq!(values.len(), n);
        for (got, want) in values.iter().zip(&expected) {
            assert!((got - want).abs() < 1e-3 * want.max(1.0), "{got} against {want}: {values:?}");
        }
    }
}
