//! The arithmetic under the kernels: products through gemm, and exp and erf written without
//! branches or library calls so that loops over them vectorise (libm's `erff` and `expf` are
//! scalar calls, one element at a time).

/// `dst (m×n) = scale · lhs (m×k) · rhs (k×n)`, or `dst += …` when `accumulate`; every operand
/// is addressed by a pointer to its first element and its row and column strides, so views
/// (a head's slice of a [batch, time, heads·d] tensor, a transposed matrix) cost no copy.
/// Runs on the calling thread: the kernels parallelise over heads and rows themselves.
///
/// # Safety
/// Every operand must lie in its buffer as its strides say, and `dst` must not overlap the
/// others.
pub(crate) unsafe fn matmul(
    shape: [usize; 3],
    dst: (*mut f32, isize, isize),
    accumulate: bool,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
) {
    // SAFETY: the caller's promise is matmul_on's.
    unsafe { matmul_on(gemm::Parallelism::None, shape, dst, accumulate, lhs, rhs, scale) }
}

/// [`matmul`] spread over the current thread pool by gemm itself, which packs each operand
/// once for all threads: for one large product.
///
/// # Safety
/// As [`matmul`].
pub(crate) unsafe fn matmul_parallel(
    shape: [usize; 3],
    dst: (*mut f32, isize, isize),
    accumulate: bool,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
) {
    let parallelism = match rayon::current_num_threads() {
        1 => gemm::Parallelism::None,
        threads => gemm::Parallelism::Rayon(threads),
    };
    // SAFETY: the caller's promise is matmul_on's.
    unsafe { matmul_on(parallelism, shape, dst, accumulate, lhs, rhs, scale) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn matmul_on(
    parallelism: gemm::Parallelism,
    [m, n, k]: [usize; 3],
    dst: (*mut f32, isize, isize),
    accumulate: bool,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    scale: f32,
) {
    let (dst, dst_rs, dst_cs) = dst;
    let (lhs, lhs_rs, lhs_cs) = lhs;
    let (rhs, rhs_rs, rhs_cs) = rhs;
    // gemm computes dst = alpha·dst + beta·lhs·rhs, reading dst only when asked to.
    // SAFETY: the operands lie in their buffers as their strides say and dst overlaps none of
    // them (the caller's promise), which is what gemm asks.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            dst_cs,
            dst_rs,
            accumulate,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Compiles `$body` three times: for AVX-512, for AVX2 with FMA, and for the baseline target,
/// and picks the best the processor has at run time (the binary still runs on any x86-64).
/// Elsewhere (wasm, ARM) only the baseline version exists.
macro_rules! vectorised {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx512($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the processor has the features this version was compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn baseline($($arg: $ty),*) $(-> $ret)? $body
            baseline($($arg),*)
        }
    };
}
pub(crate) use vectorised;

const LOG2_E: f32 = std::f32::consts::LOG2_E;
// ln 2 split in two so that n·ln2 is subtracted without rounding error (Cody and Waite).
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Adding and subtracting 1.5·2^23 rounds an f32 to the nearest integer, in two additions.
const ROUNDER: f32 = 12_582_912.0;

/// e^x to within about 2 ulp for x in [-87, 88] (beyond, the nearest representable end; NaN stays
/// NaN): e^x = 2^n · e^r with n = round(x / ln 2), e^r by its Taylor series to r^7.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // t holds n in its low mantissa bits; n itself is t − 1.5·2^23.
    let t = x * LOG2_E + ROUNDER;
    let n = t - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // 2^n from n's bits: (n + 127) into the exponent field. Integer arithmetic on the bits
    // vectorises where `n as i32` (a saturating conversion) would not. n ∈ [-126, 127].
    let two_to_n = f32::from_bits(t.to_bits().wrapping_add(127) << 23);
    p * two_to_n
}

/// erf(x) within 2e-7 (Abramowitz and Stegun 7.1.26), from exp(-x²) passed in so that GELU's
/// backward reuses it for the normal density.
#[inline(always)]
pub(crate) fn erf_with(x: f32, exp_minus_x2: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_8, -1.453_152_1, 1.061_405_4];
    let t = 1.0 / (1.0 + P * x.abs());
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let magnitude = 1.0 - poly * exp_minus_x2;
    magnitude.copysign(x)
}

/// Σ values, in eight running sums so that the loop vectorises.
#[inline(always)]
pub(crate) fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Σ a·b, in eight running sums.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0f32; 8];
    let chunks = a.chunks_exact(8).zip(b.chunks_exact(8));
    let tail: f32 = a[a.len() / 8 * 8..].iter().zip(&b[b.len() / 8 * 8..]).map(|(x, y)| x * y).sum();
    for (ca, cb) in chunks {
        for i in 0..8 {
            lanes[i] += ca[i] * cb[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// max of `values` (−∞ for none).
#[inline(always)]
pub(crate) fn max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(v);
        }
    }
    lanes.iter().fold(tail, |m, &v| m.max(v))
}

vectorised! {
    /// `row[j] = e^(row[j] − shift)` for every j, returning Σ row: a softmax's numerators and
    /// denominator.
    pub(crate) fn exp_shifted_sum(row: &mut [f32], shift: f32) -> f32 {
        for v in row.iter_mut() {
            *v = exp(*v - shift);
        }
        sum(row)
    }
}

vectorised! {
    /// `row *= factor`.
    pub(crate) fn scale(row: &mut [f32], factor: f32) {
        for v in row.iter_mut() {
            *v *= factor;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_agrees_with_the_standard_library_to_a_few_ulp() {
        let mut worst = 0f32;
        for i in -8700..8799 {
            let x = i as f32 * 0.01 + 0.003;
            let (ours, std) = (exp(x), x.exp());
            worst = worst.max(((ours - std) / std).abs());
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn erf_agrees_with_a_double_precision_series() {
        // erf by its Maclaurin series in f64, exact to well below f32 resolution for |x| ≤ 3.
        fn erf64(x: f64) -> f64 {
            let (mut term, mut total) = (x, x);
            for n in 1..200 {
                term *= -x * x / n as f64;
                total += term / (2 * n + 1) as f64;
            }
            total * 2.0 / std::f64::consts::PI.sqrt()
        }
        for i in -300..=300 {
            let x = i as f32 * 0.01;
            let ours = erf_with(x, exp(-x * x));
            assert!((ours as f64 - erf64(x as f64)).abs() < 3e-7, "erf({x}) = {ours}");
        }
        assert_eq!(erf_with(6.0, exp(-36.0)), 1.0);
    }

    #[test]
    fn reductions_cover_every_element() {
        let values: Vec<f32> = (0..21).map(|i| i as f32 - 7.5).collect();
        assert_eq!(sum(&values), values.iter().sum::<f32>());
        assert_eq!(max(&values), 12.5);
        assert_eq!(dot(&values, &values), values.iter().map(|v| v * v).sum::<f32>());
        let mut row = vec![0.0, 1.0, 2.0];
        let total = exp_shifted_sum(&mut row, 2.0);
        assert!((total - (1.0 + (-1f32).exp() + (-2f32).exp())).abs() < 1e-6);
    }
}
