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
//!
//! Our own kernels also say how each launch is shaped ([`LaunchShape`]: units launched, the
//! longest serial work a unit does, bytes in and out), computed where they are launched from the
//! shapes they are given, and the counter files the shape with the launch ([`CountedLaunch`]).
//! Burn's kernels carry none: the hook tells their names only.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use burn::tensor::kind::Basic;
use burn::tensor::{Tensor, TensorData, Transaction};
use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
use cubecl_runtime::launched::LaunchedKernels;
use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};

/// Every launch compiled and dropped rather than run while the guard lives, on every device
/// (CubeCL's dry run): launches are counted as usual, so a step's counts and shapes at sizes the
/// device could not run in time come in seconds. Anything read back meanwhile is meaningless.
pub use cubecl_runtime::dry_run::DryRun;

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

/// The values of several float tensors one after another, read back in one wait (Burn's
/// `Transaction`): where a cat would first copy them into one tensor, a launch per tensor.
pub fn read_floats_together<const D: usize>(tensors: Vec<Tensor<D>>) -> impl Future<Output = Result<Vec<f32>, ReadBackError>> + Send {
    READ_BACKS.fetch_add(1, Ordering::Relaxed);
    let read = tensors.into_iter().fold(Transaction::default(), Transaction::register).execute_async();
    async {
        let mut values = Vec::new();
        for data in read.await? {
            values.extend(data.try_into_vec_as::<f32>()?);
        }
        Ok(values)
    }
}

/// Why values could not be read back from a device.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    #[error("reading results from the device failed: {0}")]
    Device(#[from] burn::tensor::ExecutionError),
    #[error("the values read back are not numbers of the expected type: {0}")]
    Values(#[from] burn::tensor::DataError),
}

/// How one launch of one of our kernels (or of Burn's product, as modelled) is shaped: what a GPU
/// engineer reads a kernel by. The figures depend only on the shapes launched, not on the machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchShape {
    /// Units launched: workgroups × units a workgroup.
    pub threads: u64,
    /// The serial work of the busiest unit, in loop trips: nested loops multiplied, loops one
    /// after another added, a workgroup tree counted by its steps. What bounds the launch's time
    /// however many units the device runs at once.
    pub serial_trips: u64,
    /// Bytes of the values the launch reads, each counted once (the least it can read).
    pub bytes_read: u64,
    /// Bytes of the values it writes.
    pub bytes_written: u64,
}

thread_local! {
    /// The shape of the next launch of ours on this thread ([`note_shape`]).
    static NOTED: Cell<Option<LaunchShape>> = const { Cell::new(None) };
    /// The shape of the next launch of Burn's matrix product on this thread, as modelled
    /// ([`note_product_shape`]).
    static NOTED_PRODUCT: Cell<Option<LaunchShape>> = const { Cell::new(None) };
}

/// Says how the next launch of one of our kernels on this thread is shaped; a [`LaunchCounter`]
/// files it with that launch (CubeCL reports a launch on the thread that issues it, before it
/// is submitted). Called right before the launch; a note nobody counts is replaced by the next.
pub(crate) fn note_shape(shape: LaunchShape) {
    NOTED.with(|noted| noted.set(Some(shape)));
}

/// Says how the next launch of Burn's matrix product (cubek's `MatmulEntry`) on this thread is
/// shaped, as `crate::cube::burn_product` models it from cubek's source: filed like
/// [`note_shape`]'s, with that launch only.
pub(crate) fn note_product_shape(shape: LaunchShape) {
    NOTED_PRODUCT.with(|noted| noted.set(Some(shape)));
}

/// Says that the next launch of Burn's matrix product on this thread has no modelled shape, so
/// that it is counted without one rather than given an earlier note nobody counted.
pub(crate) fn unknown_product_shape() {
    NOTED_PRODUCT.with(|noted| noted.set(None));
}

/// Our kernels are named by their type's path in this crate.
fn is_ours(kernel: &str) -> bool {
    kernel.starts_with(concat!(env!("CARGO_CRATE_NAME"), "::"))
}

/// Burn's matrix product, the one kernel of Burn's whose shape is modelled.
fn is_burn_product(kernel: &str) -> bool {
    type_name_format(kernel, TypeNameFormatLevel::Short) == "MatmulEntry"
}

/// One launch, as a [`LaunchCounter`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedLaunch {
    /// Named as [`Tally::by_kernel`] names it.
    pub kernel: String,
    /// One of QKV Lab's kernels (else Burn's).
    pub ours: bool,
    /// Its shape, where it is ours and said so, or Burn's product as modelled.
    pub shape: Option<LaunchShape>,
}

/// The launches of each kernel, by name, and every launch in order with its shape.
#[derive(Default)]
struct ByKernel {
    counts: Mutex<BTreeMap<&'static str, usize>>,
    log: Mutex<Vec<(&'static str, Option<LaunchShape>)>>,
}

impl LaunchObserver for ByKernel {
    fn launched(&self, kernel: &'static str) {
        *self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entry(kernel).or_default() += 1;
        // Only ours take the note (and Burn's product its own): a copy Burn launches while our
        // launch's arguments are made comes between the note and the launch it belongs to.
        let shape = if is_ours(kernel) {
            NOTED.with(Cell::take)
        } else if is_burn_product(kernel) {
            NOTED_PRODUCT.with(Cell::take)
        } else {
            None
        };
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((kernel, shape));
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
        let launched = self.by_kernel.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut by_kernel = BTreeMap::new();
        for (&name, &count) in launched.iter() {
            *by_kernel.entry(type_name_format(name, TypeNameFormatLevel::Short)).or_default() += count;
        }
        Tally { launches: launched.values().sum(), by_kernel, read_backs: READ_BACKS.load(Ordering::Relaxed) - self.read_backs_at_start }
    }

    /// A place in the launches counted so far, for [`Self::launches_since`].
    pub fn mark(&self) -> usize {
        self.by_kernel.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Every launch counted since `mark`, in order.
    pub fn launches_since(&self, mark: usize) -> Vec<CountedLaunch> {
        let log = self.by_kernel.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        log.get(mark..)
            .unwrap_or_default()
            .iter()
            .map(|&(kernel, shape)| CountedLaunch {
                kernel: type_name_format(kernel, TypeNameFormatLevel::Short),
                ours: is_ours(kernel),
                shape,
            })
            .collect()
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
