//! A training step's kernels by parallel shape, as a GPU engineer reads them: per kernel, its
//! launches, the units they launch, the longest serial work one unit does, and the bytes in and
//! out; per step, the serial trips along the critical path (each launch waits for the one before,
//! so the step takes at least the sum of every launch's busiest unit). From the shapes our
//! kernels note at launch (`qkv_kernels::LaunchShape`), and Burn's matrix product's as modelled
//! from cubek's source, so the figures depend on the model and the batch, not the machine.
//! Burn's other kernels note none: they are counted, and listed as such.

use serde::Serialize;

use qkv_kernels::CountedLaunch;

/// One kernel's launches in a step.
#[derive(Debug, Serialize, PartialEq)]
pub struct KernelShape {
    pub kernel: String,
    /// One of QKV Lab's kernels, whose shape is known; of Burn's, the product's shape is
    /// modelled and the others' counted only.
    pub ours: bool,
    pub launches: f64,
    /// Units launched, over the step's launches of it.
    pub threads: u64,
    /// The serial trips of the busiest unit of its busiest launch.
    pub longest_serial_trips: u64,
    /// Σ over its launches of each launch's busiest unit: its share of the critical path.
    pub critical_path_trips: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// A step's kernels, the most serial work first, and the totals of those with a shape (ours and
/// Burn's products).
#[derive(Debug, Serialize, PartialEq)]
pub struct StepShapes {
    pub kernels: Vec<KernelShape>,
    /// Σ over the launches with a shape of each one's busiest unit.
    pub critical_path_trips: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The bytes any step of this model and batch must move ([`least_bytes`]), against which
    /// `bytes_read + bytes_written` is read.
    pub bytes_least: u64,
    /// Launches per step with no shape (Burn's kernels).
    pub launches_without_shape: f64,
}

/// The bytes a training step must move however its kernels are fused, for `parameters` f32
/// parameters and a batch of `tokens` positions: the tokens and their targets read (i32), and
/// eight values a parameter, each once: the parameter read (forward) and written (the update),
/// its gradient written and read (the clipping needs the global norm before any update, so the
/// gradient must be kept), and AdamW's two moments read and written. Everything else a step
/// moves is activations, which a kernel that kept them on the chip (or recomputed them) would
/// not.
pub fn least_bytes(parameters: usize, tokens: usize) -> u64 {
    4 * (8 * parameters as u64 + 2 * tokens as u64)
}

impl StepShapes {
    /// The shapes of `launches`, the launches of `steps` like steps, per step, beside the
    /// `bytes_least` a step must move.
    pub fn of(launches: &[CountedLaunch], steps: usize, bytes_least: u64) -> Self {
        let steps_u64 = steps.max(1) as u64;
        let mut kernels: Vec<KernelShape> = Vec::new();
        for launch in launches {
            let at = match kernels.iter().position(|k| k.kernel == launch.kernel) {
                Some(at) => at,
                None => {
                    kernels.push(KernelShape {
                        kernel: launch.kernel.clone(),
                        ours: launch.ours,
                        launches: 0.0,
                        threads: 0,
                        longest_serial_trips: 0,
                        critical_path_trips: 0,
                        bytes_read: 0,
                        bytes_written: 0,
                    });
                    kernels.len() - 1
                }
            };
            let kernel = &mut kernels[at];
            kernel.launches += 1.0;
            if let Some(shape) = launch.shape {
                kernel.threads += shape.threads;
                kernel.longest_serial_trips = kernel.longest_serial_trips.max(shape.serial_trips);
                kernel.critical_path_trips += shape.serial_trips;
                kernel.bytes_read += shape.bytes_read;
                kernel.bytes_written += shape.bytes_written;
            }
        }
        for kernel in &mut kernels {
            kernel.launches /= steps as f64;
            kernel.threads /= steps_u64;
            kernel.critical_path_trips /= steps_u64;
            kernel.bytes_read /= steps_u64;
            kernel.bytes_written /= steps_u64;
        }
        kernels.sort_by(|a, b| {
            b.critical_path_trips.cmp(&a.critical_path_trips).then(b.launches.total_cmp(&a.launches)).then_with(|| a.kernel.cmp(&b.kernel))
        });
        let without_shape = launches.iter().filter(|l| l.shape.is_none()).count();
        Self {
            critical_path_trips: kernels.iter().map(|k| k.critical_path_trips).sum(),
            bytes_read: kernels.iter().map(|k| k.bytes_read).sum(),
            bytes_written: kernels.iter().map(|k| k.bytes_written).sum(),
            bytes_least,
            launches_without_shape: without_shape as f64 / steps as f64,
            kernels,
        }
    }

    pub fn print(&self, variant: &str) {
        println!(
            "\n{variant}'s step by parallel shape (ours from their launch shapes, Burn's product as modelled, Burn's others counted only):"
        );
        println!(
            "{:>8} {:>11} {:>13} {:>14} {:>11} {:>11}  kernel",
            "launches", "units", "longest unit", "critical path", "MB read", "MB written"
        );
        let mb = |bytes: u64| bytes as f64 / 1e6;
        for k in &self.kernels {
            if k.threads > 0 {
                println!(
                    "{:>8.1} {:>11} {:>13} {:>14} {:>11.2} {:>11.2}  {}",
                    k.launches,
                    k.threads,
                    k.longest_serial_trips,
                    k.critical_path_trips,
                    mb(k.bytes_read),
                    mb(k.bytes_written),
                    if k.ours { k.kernel.clone() } else { format!("{} (Burn's, modelled)", k.kernel) }
                );
            } else {
                println!("{:>8.1} {:>11} {:>13} {:>14} {:>11} {:>11}  {} (Burn's)", k.launches, "", "", "", "", "", k.kernel);
            }
        }
        println!(
            "{} serial trips along the critical path, {:.2} MB read, {:.2} MB written; {:.1} launches of Burn's without a shape",
            self.critical_path_trips,
            mb(self.bytes_read),
            mb(self.bytes_written),
            self.launches_without_shape
        );
        let moved = self.bytes_read + self.bytes_written;
        println!(
            "{:.2} MB moved, {:.1}× the {:.2} MB any step must move (the batch, and each parameter, its gradient and AdamW's moments once: the rest is activations)",
            mb(moved),
            moved as f64 / self.bytes_least.max(1) as f64,
            mb(self.bytes_least)
        );
    }
}
