//! A model's copy on the CPU, read back without blocking.
//!
//! Saving a checkpoint and eliminating W_Q read every weight. Natively a read may wait on the
//! GPU; in the browser it may not, so each weight is awaited into a copy on flex, and the
//! synchronous code (burnpack, the conversion's f64 algebra) runs on that copy.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Device, Tensor, TensorData};

/// A read of the weights back from their device that failed (e.g. a lost GPU).
#[derive(Debug, thiserror::Error)]
#[error("reading the model's weights: {0}")]
pub struct WeightsReadError(#[from] pub qkv_kernels::ReadBackError);

/// Every weight of `model`, in the order the module visits them, flattened and awaited from its
/// device.
pub async fn read_weights<M: Module>(model: &M) -> Result<Vec<(ParamId, TensorData)>, WeightsReadError> {
    struct Flattened(Vec<(ParamId, Tensor<1>)>);
    impl ModuleVisitor for Flattened {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let value = param.val();
            let n = value.dims().iter().product::<usize>();
            self.0.push((param.id, value.reshape([n])));
        }
    }
    let mut flattened = Flattened(Vec::new());
    model.visit(&mut flattened);
    let mut read = Vec::with_capacity(flattened.0.len());
    for (id, tensor) in flattened.0 {
        read.push((id, qkv_kernels::read_back(tensor).await?));
    }
    Ok(read)
}

/// `model` in validation mode on flex, with the same parameter ids (which checkpoints and the
/// optimiser state are keyed by).
pub async fn model_on_cpu<M: Module>(model: &M) -> Result<M, WeightsReadError> {
    let model = model.valid();
    let cpu = Device::flex();
    if model.devices().iter().all(|d| *d == cpu) {
        return Ok(model);
    }
    let read: HashMap<ParamId, TensorData> = read_weights(&model).await?.into_iter().collect();

    struct OnCpu {
        read: HashMap<ParamId, TensorData>,
        cpu: Device,
    }
    impl ModuleMapper for OnCpu {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let data = self.read.remove(&id).expect("every parameter was read above");
            let copy = Tensor::<1>::from_data(data, &self.cpu).reshape(tensor.dims());
            Param::from_mapped_value(id, copy, mapper)
        }
    }
    Ok(model.map(&mut OnCpu { read, cpu }))
}
