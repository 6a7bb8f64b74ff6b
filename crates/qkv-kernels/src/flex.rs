//! Where a tensor runs, and flex's tensors as plain slices: the seam between Burn's dispatched
//! `Tensor` and the kernels.

use std::borrow::Cow;
use std::sync::OnceLock;

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::Ops;
use burn::backend::flex::{FlexTensor, Layout};
use burn::backend::{Autodiff, Backend, BackendTypes, DispatchDevice, Flex, GradientCheckpointingStrategy};
use burn::tensor::{Bytes, DType, Device, Int, Shape, Tensor};

/// Flex with autodiff, as `Device::flex().autodiff()` builds it.
pub(crate) type FlexAutodiff = Autodiff<Flex, NoCheckpointing>;
/// A float tensor of [`FlexAutodiff`]: a flex tensor and its node in the graph.
pub(crate) type AutodiffTensor = <FlexAutodiff as BackendTypes>::FloatTensorPrimitive;

/// The frame of every fused op's backward: takes the gradient arriving at the op's output,
/// computes the inputs' gradients from it and the saved `state` (in the order of the op's
/// inputs), and hands each to its input where that input is tracked. The gradient is handed over
/// whole, so an elementwise backward may write over it ([`in_place`]). `None` marks an input
/// without one (e.g. an absent bias); gradients past the op's inputs are dropped.
pub(crate) fn backward_step<S, const N: usize, G: IntoIterator<Item = Option<FlexTensor>>>(
    ops: &Ops<S, N>,
    grads: &mut Gradients,
    gradients: impl FnOnce(&S, FlexTensor) -> G,
) {
    backward_step_on::<Flex, S, N, G>(ops, grads, gradients)
}

/// [`backward_step`] for the tensors of backend `B` (flex, cubecl).
pub(crate) fn backward_step_on<B: Backend, S, const N: usize, G: IntoIterator<Item = Option<B::FloatTensorPrimitive>>>(
    ops: &Ops<S, N>,
    grads: &mut Gradients,
    gradients: impl FnOnce(&S, B::FloatTensorPrimitive) -> G,
) {
    let grad = grads.consume::<B>(&ops.node);
    for (parent, gradient) in ops.parents.iter().zip(gradients(&ops.state, grad)) {
        if let (Some(node), Some(gradient)) = (parent, gradient) {
            grads.register::<B>(node.id, gradient);
        }
    }
}

/// Which implementation an op takes for tensors on `device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Flex's kernels, no graph.
    Flex,
    /// Flex's kernels, recorded with their own backward.
    FlexAutodiff,
    /// CubeCL's kernels (`crate::cube`), no graph: a GPU's tensors outside autodiff (the
    /// optimiser's, a validation model's). Ops without a CubeCL kernel yet compose Burn's.
    Cube,
    /// CubeCL's kernels, recorded with their own backward.
    CubeAutodiff,
    /// Burn's ops, composed: any other device, float type or checkpointing strategy.
    Composed,
}

/// Whether the fused kernels are in use: on unless `QKV_FUSED=0` (read once per process).
pub fn fused_kernels_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("QKV_FUSED").map_or(true, |v| v != "0"))
}

/// Whether `device` is flex, the CPU backend (with or without autodiff).
pub fn is_flex(device: &Device) -> bool {
    matches!(device.clone().without_autodiff().as_dispatch(), DispatchDevice::Flex(_))
}

/// Whether `device` is one of Burn's cubecl devices (wgpu, WebGPU, CUDA, ROCm, Metal), with or
/// without autodiff.
pub fn is_cube(device: &Device) -> bool {
    matches!(device.clone().without_autodiff().as_dispatch(), DispatchDevice::Cube(_))
}

/// The route for float tensors of `dtype` on `device`.
pub(crate) fn route(device: &Device, dtype: DType) -> Route {
    if dtype != DType::F32 || !fused_kernels_enabled() {
        return Route::Composed;
    }
    if !is_flex(device) {
        // With Burn's fusion a cubecl tensor is fusion's, not a `CubeTensor`: composed ops then,
        // which fusion merges itself.
        if cfg!(feature = "fusion") || !is_cube(device) {
            return Route::Composed;
        }
        return match device.gradient_checkpointing_strategy() {
            None => Route::Cube,
            Some(GradientCheckpointingStrategy::Disabled) => Route::CubeAutodiff,
            Some(GradientCheckpointingStrategy::Balanced) => Route::Composed,
        };
    }
    match device.gradient_checkpointing_strategy() {
        None => Route::Flex,
        Some(GradientCheckpointingStrategy::Disabled) => Route::FlexAutodiff,
        Some(GradientCheckpointingStrategy::Balanced) => Route::Composed,
    }
}

pub(crate) fn to_flex<const D: usize>(tensor: Tensor<D>) -> FlexTensor {
    tensor.try_into_primitive::<Flex>().expect("routed to flex: the tensor is a flex tensor")
}

pub(crate) fn to_autodiff<const D: usize>(tensor: Tensor<D>) -> AutodiffTensor {
    tensor.try_into_primitive::<FlexAutodiff>().expect("routed to flex with autodiff")
}

pub(crate) fn from_flex<const D: usize>(tensor: FlexTensor) -> Tensor<D> {
    Tensor::from_primitive::<Flex>(tensor)
}

pub(crate) fn from_autodiff<const D: usize>(tensor: AutodiffTensor) -> Tensor<D> {
    Tensor::from_primitive::<FlexAutodiff>(tensor)
}

/// A tensor that takes no part in the graph (an integer index, a mask), as flex's tensor.
pub(crate) fn constant_to_flex<const D: usize>(tensor: Tensor<D>, route: Route) -> FlexTensor {
    match route {
        Route::FlexAutodiff => to_autodiff(tensor).into_primitive(),
        _ => to_flex(tensor),
    }
}

pub(crate) fn int_to_flex<const D: usize>(tensor: Tensor<D, Int>, route: Route) -> FlexTensor {
    match route {
        Route::FlexAutodiff => tensor.try_into_primitive::<FlexAutodiff>().expect("routed to flex with autodiff"),
        _ => tensor.try_into_primitive::<Flex>().expect("routed to flex"),
    }
}

/// The tensor's values in row-major order: borrowed when they already are, copied otherwise.
pub(crate) fn values(tensor: &FlexTensor) -> Cow<'_, [f32]> {
    match tensor.layout().contiguous_offsets() {
        Some((start, end)) => Cow::Borrowed(&tensor.storage::<f32>()[start..end]),
        None => Cow::Owned(tensor.to_contiguous().storage::<f32>().to_vec()),
    }
}

/// `tensor` itself when nothing else holds its buffer and its values lie there in order from
/// the start, so that a kernel may write over them ([`values_mut`]); otherwise a copy laid out
/// so. A tensor still in use elsewhere, or the rest of a buffer a view lies in, is untouched.
pub(crate) fn writable(tensor: FlexTensor) -> FlexTensor {
    let n = tensor.layout().num_elements();
    if tensor.is_unique() && tensor.layout().contiguous_offsets() == Some((0, n)) {
        return tensor;
    }
    self::tensor(values(&tensor).into_owned(), tensor.shape())
}

/// The values of a [`writable`] tensor, to write over.
pub(crate) fn values_mut(tensor: &mut FlexTensor) -> &mut [f32] {
    let n = tensor.layout().num_elements();
    // The buffer is the tensor's alone (`writable`), so this borrows it without a copy.
    &mut tensor.storage_mut::<f32>()[..n]
}

/// `kernel` run on the tensor's values in place, for an elementwise op that may overwrite its
/// input: in the tensor's own buffer where [`writable`] allows it (an op's output passed on, the
/// gradient arriving at a backward step), which spares a new buffer and its zeroing.
pub(crate) fn in_place(tensor: FlexTensor, kernel: impl FnOnce(&mut [f32])) -> FlexTensor {
    let mut tensor = writable(tensor);
    kernel(values_mut(&mut tensor));
    tensor
}

/// Integer values (indices, targets) as i64, whatever integer type the tensor holds.
pub(crate) fn int_values(tensor: &FlexTensor) -> Vec<i64> {
    let tensor = tensor.to_contiguous();
    let (start, end) = tensor.layout().contiguous_offsets().expect("contiguous after to_contiguous");
    match tensor.dtype() {
        DType::I64 => tensor.storage::<i64>()[start..end].to_vec(),
        DType::I32 => tensor.storage::<i32>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::I16 => tensor.storage::<i16>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::I8 => tensor.storage::<i8>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::U64 => tensor.storage::<u64>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::U32 => tensor.storage::<u32>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::U16 => tensor.storage::<u16>()[start..end].iter().map(|&v| v as i64).collect(),
        DType::U8 => tensor.storage::<u8>()[start..end].iter().map(|&v| v as i64).collect(),
        other => panic!("integer values of a {other:?} tensor"),
    }
}

/// A new f32 tensor of `shape` holding `data` in row-major order.
pub(crate) fn tensor(data: Vec<f32>, shape: impl Into<Shape>) -> FlexTensor {
    let shape = shape.into();
    debug_assert_eq!(shape.num_elements(), data.len());
    FlexTensor::new(Bytes::from_elems(data), Layout::contiguous(shape), DType::F32)
}

/// A new f32 tensor of `shape` whose element `index` sits at Σ index·stride in `data`: a
/// permuted view, so that the layout the next op wants costs no copy.
pub(crate) fn strided_tensor(data: Vec<f32>, shape: impl Into<Shape>, strides: Vec<isize>) -> FlexTensor {
    FlexTensor::new(Bytes::from_elems(data), Layout::new(shape.into(), strides, 0), DType::F32)
}

/// A 4-d tensor read through its strides: [batch, heads, time, d] at any layout.
#[derive(Clone, Copy)]
pub(crate) struct View4<'a> {
    pub data: &'a [f32],
    pub offset: usize,
    pub strides: [isize; 4],
}

impl<'a> View4<'a> {
    /// `None` for negative strides (a flipped tensor); the caller copies then.
    pub(crate) fn of(tensor: &'a FlexTensor) -> Option<Self> {
        let layout = tensor.layout();
        let strides: [isize; 4] = layout.strides().try_into().ok()?;
        if strides.iter().any(|&s| s < 0) {
            return None;
        }
        Some(Self { data: tensor.storage::<f32>(), offset: layout.start_offset(), strides })
    }

    /// Pointer to element [b, h, 0, 0].
    pub(crate) fn matrix(&self, b: usize, h: usize) -> *const f32 {
        let at = self.offset as isize + b as isize * self.strides[0] + h as isize * self.strides[1];
        debug_assert!(at >= 0 && (at as usize) <= self.data.len());
        // SAFETY: within the tensor's storage, as its layout says.
        unsafe { self.data.as_ptr().offset(at) }
    }

    /// Pointer to element [b, h, t, 0].
    pub(crate) fn row(&self, b: usize, h: usize, t: usize) -> *const f32 {
        // SAFETY: within the tensor's storage, as its layout says.
        unsafe { self.matrix(b, h).offset(t as isize * self.strides[2]) }
    }

    /// Row and column strides of one [time, d] matrix.
    pub(crate) fn row_stride(&self) -> isize {
        self.strides[2]
    }

    pub(crate) fn col_stride(&self) -> isize {
        self.strides[3]
    }
}
