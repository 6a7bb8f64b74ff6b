//! The GPU side of the kernels: CubeCL kernels for Burn's cubecl backend (wgpu and WebGPU, CUDA,
//! ROCm, Metal), reached as flex's are, through the tensor's primitive (`Cube`'s `CubeTensor`).
//! One kernel launch where Burn's composed ops take a dozen: on a GPU a small model's step is
//! bound by launches, not arithmetic (docs/performance.md, "The GPU path").

pub(crate) mod adamw;

use burn::backend::Cube;
use burn::tensor::Tensor;
use burn_cubecl::tensor::CubeTensor;

pub(crate) fn to_cube<const D: usize>(tensor: Tensor<D>) -> CubeTensor {
    tensor.try_into_primitive::<Cube>().expect("routed to cubecl: the tensor is a cubecl tensor")
}

pub(crate) fn from_cube<const D: usize>(tensor: CubeTensor) -> Tensor<D> {
    Tensor::from_primitive::<Cube>(tensor)
}

/// `tensor` itself where a kernel may write over it in order (nothing else holds its buffer and
/// its values lie there in row-major order), else a contiguous copy that nothing else holds.
pub(crate) fn writable(tensor: CubeTensor) -> CubeTensor {
    let tensor = contiguous(tensor);
    if tensor.can_mut() { tensor } else { tensor.copy() }
}

/// `tensor`, its values in row-major order in its buffer, so that a kernel may index them flat.
pub(crate) fn contiguous(tensor: CubeTensor) -> CubeTensor {
    burn_cubecl::kernel::into_contiguous(tensor)
}
