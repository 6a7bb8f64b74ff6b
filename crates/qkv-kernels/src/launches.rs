//! What work costs a GPU, counted instead of timed: kernel launches, the distinct kernels among
//! them, and the engine's read-backs (host waits). The counts do not depend on the machine's
//! speed, so a test may assert them exactly, and they tell how "live" a small model can train on
//! a GPU, where a step is bound by launches and waits rather than arithmetic.
//!
//! Launches come from CubeCL's launch hook, which sees every kernel any CubeCL device of the
//! process issues (wgpu, WebGPU, CUDA, ...), on any thread, before it is submitted; flex, the CPU
//! backend, launches none. A kernel is compiled once per device the first time it is launched, so
//! the distinct kernels launched since the process started are the kernels it compiled. Read-backs
//! are counted where the engine reads a tensor back ([`read_back`]): Burn's ops themselves never
//! wait for the device in the model's step.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use burn::tensor::kind::Basic;
use burn::tensor::{Tensor, TensorData};
use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
use cubecl_runtime::launched::LaunchedKernels;
use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

/// Read-backs since the process started ([`read_back`]).
static READ_BACKS: AtomicUsize = AtomicUsize::new(0);

/// Reads `tensor` back to the host, waiting for the device to finish what it depends on: the one
/// way the engine does so, so that [`LaunchCounter`] can count the waits.
pub fn read_back<const D: usize, K: Basic>(tensor: Tensor<D, K>) -> impl Future<Output = Result<TensorData, ReadBackError>> + Send {
    READ_BACKS.fetch_add(1, Ordering::Relaxed);
    let data = tensor.into_data_async();
    async { Ok(data.await?) }
}

/// [`read_back`] of a float tensor, as `f32` values.
pub async fn read_floats<const D: usize>(tensor: Tensor<D>) -> Result<Vec<f32>, ReadBackError> {
    Ok(read_back(tensor).await?.try_into_vec_as::<f32>()?)
}

/// Why values could not be read back from a device.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    #[error("reading results from the device failed: {0}")]
    Device(#[from] burn::tensor::ExecutionError),
    #[error("the values read back are not numbers of the expected type: {0}")]
    Values(#[from] burn::tensor::DataError),
}

/// The launches of each kernel, by name.
#[derive(Default)]
struct ByKernel(Mutex<BTreeMap<&'static str, usize>>);

impl LaunchObserver for ByKernel {
    fn launched(&self, kernel: &'static str) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entry(kernel).or_default() += 1;
    }
}

/// What some work cost: a difference of two [`LaunchCounter::tally`]s, or a whole window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Kernel launches.
    pub launches: usize,
    /// Launches by kernel, named as CubeCL's profiling log shortens them (the type, without
    /// generics or path).
    pub by_kernel: BTreeMap<String, usize>,
    /// Read-backs: each one waits for the device to finish.
    pub read_backs: usize,
}

impl Tally {
    /// What happened between `earlier` and `self`, two tallies of one counter (a count that
    /// went down, as between two separate windows, counts 0).
    pub fn since(&self, earlier: &Tally) -> Tally {
        let by_kernel = self
            .by_kernel
            .iter()
            .map(|(name, &count)| (name.clone(), count.saturating_sub(earlier.by_kernel.get(name).copied().unwrap_or(0))))
            .filter(|&(_, count)| count > 0)
            .collect();
        Tally {
            launches: self.launches.saturating_sub(earlier.launches),
            by_kernel,
            read_backs: self.read_backs.saturating_sub(earlier.read_backs),
        }
    }
}

/// Counts every kernel launch of the process while it lives. One at a time: CubeCL has one slot
/// for a launch observer, and a second counter takes it over until it is dropped.
#[must_use = "launches are counted only while the counter lives"]
pub struct LaunchCounter {
    by_kernel: Arc<ByKernel>,
    /// The kernels launched since the counter started, by CubeCL's stable hash of their id (type,
    /// compile-time arguments and launch settings: what tells two compilations apart), and the
    /// collection that gathers the next ones.
    distinct: Mutex<(HashSet<u128>, LaunchedKernels)>,
    read_backs_at_start: usize,
    _observation: LaunchObservation,
}

impl LaunchCounter {
    pub fn start() -> Self {
        let by_kernel = Arc::new(ByKernel::default());
        Self {
            _observation: LaunchObservation::new(by_kernel.clone()),
            distinct: Mutex::new((HashSet::new(), LaunchedKernels::new())),
            read_backs_at_start: READ_BACKS.load(Ordering::Relaxed),
            by_kernel,
        }
    }

    /// What was counted so far.
    pub fn tally(&self) -> Tally {
        let launched = self.by_kernel.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut by_kernel = BTreeMap::new();
        for (&name, &count) in launched.iter() {
            *by_kernel.entry(type_name_format(name, TypeNameFormatLevel::Short)).or_default() += count;
        }
        Tally { launches: launched.values().sum(), by_kernel, read_backs: READ_BACKS.load(Ordering::Relaxed) - self.read_backs_at_start }
    }

    /// How many distinct kernels were launched so far. A device compiles each kernel the first
    /// time it is launched, so for a counter started with the process (and one device) this is
    /// how many kernels the process compiled.
    pub fn distinct_kernels(&self) -> usize {
        let mut distinct = self.distinct.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (seen, collecting) = &mut *distinct;
        let finished = std::mem::replace(collecting, LaunchedKernels::new());
        seen.extend(finished.finish());
        seen.len()
    }
}
