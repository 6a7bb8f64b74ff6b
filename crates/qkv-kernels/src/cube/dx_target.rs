//! Where a backward kernel writes an input's gradient when that input already has one (a
//! pre-norm branch's input, whose residual add stepped back first: `crate::layer_norm::pre_norm`):
//! added into it in the same launch where the kernel may write over it, else beside it and added
//! afterwards, as Burn's autodiff would.

use burn::backend::ops::FloatTensorOps;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::empty;

/// `dx[at]` = `value`, or += where the kernel adds into the gradient so far
/// ([`DxTarget::accumulate`]).
#[cube]
pub(crate) fn store_dx(dx: &mut Tensor<f32>, at: usize, value: f32, #[comptime] accumulate: bool) {
    if accumulate {
        dx[at] += value;
    } else {
        dx[at] = value;
    }
}

/// Where a backward kernel writes dx. Given x's gradient so far, the kernel adds into it where it
/// may write over it in row-major order (`accumulate`); else it writes a new tensor, and the
/// gradient so far is added afterwards ([`Self::finish`]).
pub(crate) struct DxTarget {
    pub dx: CubeTensor,
    pub accumulate: bool,
    afterwards: Option<CubeTensor>,
}

impl DxTarget {
    pub(crate) fn new(stream: Option<CubeTensor>, x: &CubeTensor) -> Self {
        match stream {
            Some(stream) if stream.can_mut() && stream.is_contiguous() && stream.meta.shape() == x.meta.shape() => {
                Self { dx: stream, accumulate: true, afterwards: None }
            }
            afterwards => Self { dx: empty(x, x.meta.shape()), accumulate: false, afterwards },
        }
    }

    /// Values the kernel reads of dx: all of them where it adds into it.
    pub(crate) fn values_read(&self) -> usize {
        if self.accumulate { self.dx.meta.shape().num_elements() } else { 0 }
    }

    /// x's whole gradient, once the kernel has run.
    pub(crate) fn finish(self) -> CubeTensor {
        match self.afterwards {
            Some(stream) => Cube::float_add(self.dx, stream),
            None => self.dx,
        }
    }
}
