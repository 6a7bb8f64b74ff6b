//! The GPU side of the kernels: CubeCL kernels for Burn's cubecl backend (wgpu and WebGPU, CUDA,
//! ROCm, Metal), reached as flex's are, through the tensor's primitive (`Cube`'s `CubeTensor`),
//! and recorded with their own backward under autodiff. One kernel launch where Burn's composed
//! ops take a dozen: on a GPU a small model's step is bound by launches, not arithmetic
//! (docs/performance.md, "The GPU path").

pub(crate) mod adamw;
pub(crate) mod attention;
pub(crate) mod attention_tiled;
pub(crate) mod block_sum;
pub(crate) mod burn_product;
pub(crate) mod cross_entropy;
pub(crate) mod dropout;
pub(crate) mod dx_target;
pub(crate) mod embed;
pub(crate) mod gelu;
pub(crate) mod grid_limit;
pub(crate) mod layer_norm;
pub(crate) mod layer_norm_serial;
pub(crate) mod linear;
pub(crate) mod packed;
pub(crate) mod product;
pub(crate) mod product_choice;
pub(crate) mod step_size;
pub(crate) mod weight_gradient;

use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::ops::{Backward, NodeGuard, OpsKind};
use burn::backend::{Autodiff, BackendTypes};
// Burn's `Cube` without fusion. With Burn's fusion a cubecl tensor is fusion's and the routes
// never come here; the conversions below then cannot be made, and say so.
use burn::tensor::{Int, Tensor};
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;

pub(crate) use grid_limit::along_axis;

/// A cubecl device with autodiff, as `Device::wgpu(..).autodiff()` builds it.
pub(crate) type CubeAutodiff = Autodiff<Cube, NoCheckpointing>;
/// A float tensor of [`CubeAutodiff`]: a cube tensor and its node in the graph.
pub(crate) type CubeAutodiffTensor = <CubeAutodiff as BackendTypes>::FloatTensorPrimitive;

pub(crate) fn to_cube<const D: usize>(tensor: Tensor<D>) -> CubeTensor {
    #[cfg(not(feature = "fusion"))]
    return tensor.try_into_primitive::<Cube>().expect("routed to cubecl: the tensor is a cubecl tensor");
    #[cfg(feature = "fusion")]
    unreachable!("with fusion nothing routes to the CubeCL kernels, yet {tensor:?} was")
}

pub(crate) fn from_cube<const D: usize>(tensor: CubeTensor) -> Tensor<D> {
    #[cfg(not(feature = "fusion"))]
    return Tensor::from_primitive::<Cube>(tensor);
    #[cfg(feature = "fusion")]
    unreachable!("with fusion nothing routes to the CubeCL kernels, yet {tensor:?} was")
}

pub(crate) fn to_cube_autodiff<const D: usize>(tensor: Tensor<D>) -> CubeAutodiffTensor {
    #[cfg(not(feature = "fusion"))]
    return tensor.try_into_primitive::<CubeAutodiff>().expect("routed to cubecl with autodiff");
    #[cfg(feature = "fusion")]
    unreachable!("with fusion nothing routes to the CubeCL kernels, yet {tensor:?} was")
}

pub(crate) fn from_cube_autodiff<const D: usize>(tensor: CubeAutodiffTensor) -> Tensor<D> {
    #[cfg(not(feature = "fusion"))]
    return Tensor::from_primitive::<CubeAutodiff>(tensor);
    #[cfg(feature = "fusion")]
    unreachable!("with fusion nothing routes to the CubeCL kernels, yet {:?} was", tensor.into_primitive())
}

/// An integer tensor (targets), which takes no part in the graph, as a cube tensor.
pub(crate) fn int_to_cube<const D: usize>(tensor: Tensor<D, Int>, autodiff: bool) -> CubeTensor {
    #[cfg(not(feature = "fusion"))]
    return match autodiff {
        true => tensor.try_into_primitive::<CubeAutodiff>().expect("routed to cubecl with autodiff"),
        false => tensor.try_into_primitive::<Cube>().expect("routed to cubecl"),
    };
    #[cfg(feature = "fusion")]
    unreachable!("with fusion nothing routes to the CubeCL kernels, yet {tensor:?} (autodiff {autodiff}) was")
}

/// A float tensor that takes no part in the graph (a mask), as a cube tensor.
pub(crate) fn constant_to_cube<const D: usize>(tensor: Tensor<D>, autodiff: bool) -> CubeTensor {
    match autodiff {
        true => to_cube_autodiff(tensor).into_primitive(),
        false => to_cube(tensor),
    }
}

/// Runs an op's forward pass (`run`: its output and what its backward needs) and records it in
/// the graph with `backward`, for the inputs behind `nodes`; untracked, the saved state is
/// dropped.
pub(crate) fn record<K: Backward<Cube, N>, const N: usize>(
    backward: K,
    nodes: [NodeGuard; N],
    run: impl FnOnce() -> (CubeTensor, K::State),
) -> CubeAutodiffTensor {
    match backward.prepare::<NoCheckpointing>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let (output, state) = run();
            prep.finish(state, output)
        }
        OpsKind::UnTracked(prep) => prep.finish(run().0),
    }
}

/// `tensor` itself where a kernel may write over it in order (nothing else holds its buffer and
/// its values lie there in row-major order), else a contiguous copy that nothing else holds.
pub(crate) fn writable(tensor: CubeTensor) -> CubeTensor {
    let tensor = contiguous(tensor);
    if tensor.can_mut() { tensor } else { tensor.copy() }
}

/// A new f32 tensor of `shape` on `like`'s device, its values unwritten (a kernel's output).
pub(crate) fn empty(like: &CubeTensor, shape: impl Into<burn::tensor::Shape>) -> CubeTensor {
    burn_cubecl::ops::numeric::empty_device_dtype(like.client.clone(), like.device.clone(), shape.into(), burn::tensor::DType::F32)
}

/// Storage buffers a kernel may bind on `client`'s device beside the one CubeCL keeps for its
/// metadata: what kernels that take several tensors a launch size their launches by.
pub(crate) fn bindable(client: &cubecl::client::Client) -> usize {
    (client.properties().hardware.max_bindings as usize).saturating_sub(1)
}

/// One unit per item, `items` of them: the cubes to launch and their shape.
pub(crate) fn units(client: &cubecl::client::Client, items: usize) -> (cubecl::CubeCount, cubecl::CubeDim) {
    let cube_dim = cubecl::CubeDim::new(client, items);
    (cubecl::calculate_cube_count_elemwise(client, items, cube_dim), cube_dim)
}

/// Says how the launch about to be made is shaped ([`crate::launches::note_shape`]): `count`
/// workgroups of `dim` units, the busiest unit's `serial_trips`, and the 4-byte values (f32 or
/// i32) it reads and writes, each counted once.
pub(crate) fn note(count: &cubecl::CubeCount, dim: cubecl::CubeDim, serial_trips: usize, values_read: usize, values_written: usize) {
    let workgroups = match count {
        cubecl::CubeCount::Static(x, y, z) => u64::from(*x) * u64::from(*y) * u64::from(*z),
        // Counts read from a buffer on the device: none of ours.
        cubecl::CubeCount::Dynamic(_) => 0,
    };
    crate::launches::note_shape(crate::launches::LaunchShape {
        threads: workgroups * u64::from(dim.num_elems()),
        serial_trips: serial_trips as u64,
        bytes_read: 4 * values_read as u64,
        bytes_written: 4 * values_written as u64,
    });
}

/// `tensor` (contiguous) as one row of its values, the same buffer: a kernel that indexes its
/// tensors flat and binds them in a sequence is then compiled once whatever their ranks (a
/// tensor's rank is part of the compiled kernel).
pub(crate) fn flat(tensor: &CubeTensor) -> CubeTensor {
    use burn::backend::ops::FloatTensorOps;
    let n = tensor.meta.shape().num_elements();
    burn_cubecl::CubeBackend::float_reshape(tensor.clone(), [n].into())
}

/// Steps of a workgroup tree over `units` units (`block_sum::workgroup_sums`).
pub(crate) fn tree_steps(units: usize) -> usize {
    units.max(1).ilog2() as usize
}

/// `tensor`, its values in row-major order in its buffer, so that a kernel may index them flat.
pub(crate) fn contiguous(tensor: CubeTensor) -> CubeTensor {
    burn_cubecl::kernel::into_contiguous(tensor)
}

#[cfg(test)]
mod tests {
    /// No kernel of ours needs atomics: browsers have no float atomics, so a step's kernels and
    /// their shapes (`crate::launches`) are the same there as natively, where Burn's sums used
    /// them.
    #[test]
    fn no_kernel_of_ours_uses_atomics() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/src/cube");
        let mut read = 0;
        for entry in std::fs::read_dir(folder).expect("the kernels' folder") {
            let path = entry.expect("an entry").path();
            let source = std::fs::read_to_string(&path).expect("a kernel's source");
            assert!(!source.contains(&["Atomic", "<"].concat()), "{} uses atomics", path.display());
            read += 1;
        }
        assert!(read > 10, "read {read} files of kernels");
    }
}
