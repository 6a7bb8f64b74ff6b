//! The linear algebra QKV Lab's model code does on the host, in f64: paper 1's change of basis
//! (reparam.rs) and the diagnostics' spectra, spans and quadratic forms (diagnostics.rs). These
//! are d × d matrices at most, read once from the device, where exactness matters more than speed.

use burn::tensor::{Device, Tensor, TensorData};

/// A dense row-major f64 matrix: what the change of basis and the diagnostics need.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Matrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) data: Vec<f64>,
}

impl Matrix {
    pub(crate) fn identity(n: usize) -> Self {
        let mut data = vec![0.0; n * n];
        (0..n).for_each(|i| data[i * n + i] = 1.0);
        Self { rows: n, cols: n, data }
    }

    /// A row-major `rows × cols` block of f32 values, widened.
    pub(crate) fn from_f32(values: &[f32], rows: usize, cols: usize) -> Self {
        assert_eq!(values.len(), rows * cols, "matrix shape");
        Self { rows, cols, data: values.iter().map(|&v| f64::from(v)).collect() }
    }

    /// The trace of a square matrix.
    pub(crate) fn trace(&self) -> f64 {
        (0..self.rows.min(self.cols)).map(|i| self.data[i * self.cols + i]).sum()
    }

    pub(crate) fn read<const D: usize>(tensor: Tensor<D>) -> Self {
        let dims = tensor.dims();
        let (rows, cols) = if D == 1 { (1, dims[0]) } else { (dims[0], dims[1]) };
        let data = tensor.into_data().try_into_vec_as::<f32>().expect("weights read back as f32");
        Self { rows, cols, data: data.into_iter().map(f64::from).collect() }
    }

    pub(crate) fn tensor<const D: usize>(&self, device: &Device) -> Tensor<D> {
        let values: Vec<f32> = self.data.iter().map(|&v| v as f32).collect();
        let shape: Vec<usize> = if D == 1 { vec![self.cols] } else { vec![self.rows, self.cols] };
        Tensor::from_data(TensorData::new(values, shape), device)
    }

    pub(crate) fn matmul(&self, other: &Matrix) -> Matrix {
        assert_eq!(self.cols, other.rows, "matrix shapes");
        let mut data = vec![0.0; self.rows * other.cols];
        for i in 0..self.rows {
            for k in 0..self.cols {
                let a = self.data[i * self.cols + k];
                if a == 0.0 {
                    continue;
                }
                let row = &other.data[k * other.cols..][..other.cols];
                for (out, &b) in data[i * other.cols..][..other.cols].iter_mut().zip(row) {
                    *out += a * b;
                }
            }
        }
        Matrix { rows: self.rows, cols: other.cols, data }
    }

    /// Row i multiplied by factors[i]: diag(factors)·M.
    pub(crate) fn scale_rows(mut self, factors: &[f64]) -> Matrix {
        for (row, factor) in self.data.chunks_mut(self.cols).zip(factors) {
            row.iter_mut().for_each(|v| *v *= factor);
        }
        self
    }

    /// Column j multiplied by factors[j]: M·diag(factors).
    pub(crate) fn scale_columns(mut self, factors: &[f64]) -> Matrix {
        for row in self.data.chunks_mut(self.cols) {
            row.iter_mut().zip(factors).for_each(|(v, factor)| *v *= factor);
        }
        self
    }

    pub(crate) fn transpose(&self) -> Matrix {
        let data = (0..self.cols).flat_map(|j| (0..self.rows).map(move |i| self.data[i * self.cols + j])).collect();
        Matrix { rows: self.cols, cols: self.rows, data }
    }

    /// Columns `from..from + n`.
    pub(crate) fn columns(&self, from: usize, n: usize) -> Matrix {
        let data = self.data.chunks(self.cols).flat_map(|row| row[from..from + n].iter().copied()).collect();
        Matrix { rows: self.rows, cols: n, data }
    }

    /// Rows `from..from + n`.
    pub(crate) fn rows_of(&self, from: usize, n: usize) -> Matrix {
        Matrix { rows: n, cols: self.cols, data: self.data[from * self.cols..(from + n) * self.cols].to_vec() }
    }

    /// Columns `from..` replaced by `block`'s.
    pub(crate) fn set_columns(&mut self, from: usize, block: &Matrix) {
        for (row, new) in self.data.chunks_mut(self.cols).zip(block.data.chunks(block.cols)) {
            row[from..from + block.cols].copy_from_slice(new);
        }
    }

    /// Largest column sum of absolute values.
    pub(crate) fn norm1(&self) -> f64 {
        (0..self.cols).map(|j| (0..self.rows).map(|i| self.data[i * self.cols + j].abs()).sum::<f64>()).fold(0.0, f64::max)
    }

    /// Gauss–Jordan with partial pivoting; `None` when singular.
    pub(crate) fn inverse(&self) -> Option<Matrix> {
        let n = self.rows;
        let mut a = self.clone();
        let mut inv = Matrix::identity(n);
        let scale = self.data.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
        for col in 0..n {
            let pivot = (col..n).max_by(|&x, &y| a.data[x * n + col].abs().total_cmp(&a.data[y * n + col].abs()))?;
            if a.data[pivot * n + col].abs() <= scale * 1e-13 {
                return None;
            }
            for m in [&mut a, &mut inv] {
                for j in 0..n {
                    m.data.swap(col * n + j, pivot * n + j);
                }
            }
            let p = a.data[col * n + col];
            for j in 0..n {
                a.data[col * n + j] /= p;
                inv.data[col * n + j] /= p;
            }
            for row in 0..n {
                let factor = a.data[row * n + col];
                if row == col || factor == 0.0 {
                    continue;
                }
                for j in 0..n {
                    a.data[row * n + j] -= factor * a.data[col * n + j];
                    inv.data[row * n + j] -= factor * inv.data[col * n + j];
                }
            }
        }
        Some(inv)
    }
}

pub(crate) fn dot(u: &[f64], v: &[f64]) -> f64 {
    u.iter().zip(v).map(|(x, y)| x * y).sum()
}

/// An orthonormal basis of the span of some columns of `w`, by Gram-Schmidt with the projection
/// repeated (so that nearly dependent columns stay orthogonal); columns that add no direction
/// are left out.
pub(crate) fn orthonormal_columns(w: &Matrix, which: std::ops::Range<usize>) -> Vec<Vec<f64>> {
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for c in which {
        let mut u: Vec<f64> = (0..w.rows).map(|r| w.data[r * w.cols + c]).collect();
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

/// The singular values of a `rows × cols` row-major matrix, largest first: the square roots of
/// the eigenvalues of its smaller Gram matrix (a few hundred columns at most here).
pub(crate) fn singular_values(matrix: &[f32], rows: usize, cols: usize) -> Vec<f64> {
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

    #[test]
    fn matrix_inverse_and_condition() {
        let m = Matrix { rows: 2, cols: 2, data: vec![4.0, 7.0, 2.0, 6.0] };
        let inv = m.inverse().unwrap();
        let product = m.matmul(&inv);
        for (p, i) in product.data.iter().zip(Matrix::identity(2).data) {
            assert!((p - i).abs() < 1e-12);
        }
        assert!(Matrix { rows: 2, cols: 2, data: vec![1.0, 2.0, 2.0, 4.0] }.inverse().is_none());
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
        // A cyclic permutation scaled by 2 in 5 dimensions: all singular values 2.
        let n = 5;
        let mut m = vec![0.0f32; n * n];
        for i in 0..n {
            m[i * n + (i + 1) % n] = 2.0;
        }
        let values = singular_values(&m, n, n);
        assert!(values.len() == 5 && values.iter().all(|s| (s - 2.0).abs() < 1e-6), "{values:?}");
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
