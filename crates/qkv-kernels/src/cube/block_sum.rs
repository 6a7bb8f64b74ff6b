//! Sums over many values in two stages, so that no unit's loop grows with the batch. A kernel
//! that produces the values adds up each workgroup's share in workgroup memory
//! ([`workgroup_sum`]: a tree of log₂(units) steps) and writes one partial sum per workgroup;
//! a finish adds up the partials, one workgroup per sum, each unit taking every `units`-th
//! partial ([`strided_sum`]). A sum over the batch's rows then costs each unit a fixed number of
//! values, whatever the batch: more rows add workgroups, not trips.
//!
//! Burn's full sums use atomics where the device has float atomics, and one unit for the whole
//! tensor where it has not (every browser today); these need neither.

use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::grid_limit::Axis;
use super::{along_axis, contiguous, empty, note, tree_steps};

/// Units in a summing workgroup: 256 (WebGPU's guaranteed limit a workgroup), or the largest
/// power of two the device allows where that is fewer. A power of two, for [`workgroup_sum`]'s
/// tree.
pub(crate) fn workgroup_units(client: &cubecl::client::Client) -> usize {
    let cap = (client.properties().hardware.max_units_per_cube.max(1) as usize).min(256);
    if cap.is_power_of_two() { cap } else { cap.next_power_of_two() / 2 }
}

/// Each of `values`' `count` entries summed over the workgroup's units, in place: every unit's
/// `values[k]` becomes the workgroup's Σ values[k]. `shared` holds count·CUBE_DIM values,
/// CUBE_DIM a power of two. One tree for all `count` sums: its log₂(units) + 2 barriers are what
/// an emulated GPU pays most for, so a kernel sums what it can at once. Every unit of the
/// workgroup must call it (it waits for them all), so a kernel that calls it must not end units
/// early.
#[cube]
pub(crate) fn workgroup_sums(shared: &mut Shared<[f32]>, values: &mut Array<f32>, #[comptime] count: usize) {
    let unit = UNIT_POS as usize;
    let units = CUBE_DIM as usize;
    #[unroll]
    for k in 0..count {
        shared[k * units + unit] = values[k];
    }
    sync_cube();
    let mut active = units / 2;
    while active > 0 {
        if unit < active {
            #[unroll]
            for k in 0..count {
                let other = shared[k * units + unit + active];
                shared[k * units + unit] += other;
            }
        }
        sync_cube();
        active /= 2;
    }
    #[unroll]
    for k in 0..count {
        values[k] = shared[k * units];
    }
    // No unit may write the next sums' values before every unit has read these.
    sync_cube();
}

/// [`workgroup_sums`] of one value, returned to every unit; `shared` holds CUBE_DIM values.
#[cube]
pub(crate) fn workgroup_sum(shared: &mut Shared<[f32]>, value: f32) -> f32 {
    let mut values = Array::<f32>::new(1usize);
    values[0] = value;
    workgroup_sums(shared, &mut values, 1usize);
    values[0]
}

/// Σ of `values[start + u]`, `values[start + u + units]`, … below `start + count`: this unit's
/// share of a finish, u its place in the workgroup.
#[cube]
pub(crate) fn strided_sum(values: &Tensor<f32>, start: usize, count: usize) -> f32 {
    let mut sum = 0.0f32;
    let mut i = UNIT_POS as usize;
    while i < count {
        sum += values[start + i];
        i += CUBE_DIM as usize;
    }
    sum
}

/// `sums[g]` = Σ `values[g·run .. (g + 1)·run]` (the last run may be shorter), one workgroup a
/// run.
#[cube(launch)]
fn sum_runs_kernel(values: &Tensor<f32>, sums: &mut Tensor<f32>, run: u32, #[comptime] units: usize) {
    let group = CUBE_POS;
    let start = group * run as usize;
    let left = values.len() - start;
    let count = select(left < run as usize, left, run as usize);
    let mut shared = Shared::<[f32]>::new_slice(units);
    let sum = workgroup_sum(&mut shared, strided_sum(values, start, count));
    if UNIT_POS == 0 {
        sums[group] = sum;
    }
}

/// [`sum_runs`]' workgroups over `n` values, one a run of `run` (`grid_limit`): the values are a
/// batch's rows (the loss mask's) or their partial sums.
pub(crate) fn run_groups(n: usize, run: usize) -> Axis {
    (n.div_ceil(run), "batch × context")
}

/// The sums of `values`' runs of `run` values, in order (the last run may be shorter), as a
/// tensor of one sum a run: one launch, each unit adding up ⌈run / units⌉ values.
pub(crate) fn sum_runs(values: CubeTensor, run: usize) -> CubeTensor {
    let values = contiguous(values);
    let n = values.meta.shape().num_elements();
    assert!(n > 0 && run > 0, "sums of runs of {run} over {n} values");
    let axis = run_groups(n, run);
    let groups = axis.0;
    let sums = empty(&values, [groups]);
    let client = values.client.clone();
    let units = workgroup_units(&client);
    let (count, dim) = (cubecl::CubeCount::new_1d(along_axis(axis)), cubecl::CubeDim::new_1d(units as u32));
    note(&count, dim, run.min(n).div_ceil(units) + tree_steps(units), n, groups);
    sum_runs_kernel::launch(&client, count, dim, values.into_tensor_arg(), sums.clone().into_tensor_arg(), run as u32, units);
    sums
}

/// Σ `values`, as a [1] tensor: one launch per workgroup's share, and one to finish where there
/// is more than one share. Each unit adds up one value, then ⌈shares / units⌉ partial sums.
pub(crate) fn sum_all(values: CubeTensor) -> CubeTensor {
    let units = workgroup_units(&values.client);
    let n = values.meta.shape().num_elements();
    if n <= units {
        return sum_runs(values, n);
    }
    let partials = sum_runs(values, units);
    let shares = partials.meta.shape().num_elements();
    sum_runs(partials, shares)
}

/// Rows a unit of [`column_sums`] adds up in one launch: a fixed loop, so that a unit's work
/// does not grow with the rows (the batch).
pub(crate) const COLUMN_ROWS: usize = 64;

/// `sums[b, c]` = Σ `values[r, c]` over the rows r of block b ([`COLUMN_ROWS`] rows), one unit a
/// (block, column): neighbouring units read neighbouring values of a row.
#[cube(launch)]
fn column_sums_kernel(values: &Tensor<f32>, sums: &mut Tensor<f32>, rows: u32, columns: u32) {
    let (rows, columns) = (rows as usize, columns as usize);
    let i = ABSOLUTE_POS;
    if i >= sums.len() {
        terminate!();
    }
    let (block, column) = (i / columns, i % columns);
    let mut sum = 0.0f32;
    for k in 0..COLUMN_ROWS {
        let row = block * COLUMN_ROWS + k;
        if row < rows {
            sum += values[row * columns + column];
        }
    }
    sums[i] = sum;
}

/// Each column's sum of `values` [rows, columns], as a [columns] tensor: a launch for every
/// 64-fold of rows (one up to 64 rows, two up to 4,096), each unit adding 64 values.
pub(crate) fn column_sums(values: CubeTensor) -> CubeTensor {
    let mut values = contiguous(values);
    let [mut rows, columns] = values.meta.shape().dims();
    loop {
        let blocks = rows.div_ceil(COLUMN_ROWS).max(1);
        let sums = empty(&values, [blocks, columns]);
        let client = values.client.clone();
        let (count, dim) = super::units(&client, blocks * columns);
        note(&count, dim, COLUMN_ROWS, rows * columns, blocks * columns);
        column_sums_kernel::launch(
            &client,
            count,
            dim,
            values.into_tensor_arg(),
            sums.clone().into_tensor_arg(),
            rows as u32,
            columns as u32,
        );
        if blocks == 1 {
            return sums;
        }
        (values, rows) = (sums, blocks);
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use crate::cube::{from_cube, to_cube};
    use crate::tests::{assert_close, gpu, input, values};

    /// Up to 64 rows in one launch, more in a second (and a third past 4,096).
    #[test]
    fn columns_sum_as_the_cpu_sums_them() {
        for (rows, columns) in [(1, 5), (8, 300), (64, 7), (65, 3), (4100, 2)] {
            let x: Tensor<2> = input([rows, columns], rows as u64, &gpu());
            let flat = values(x.clone());
            let expected: Vec<f32> = (0..columns).map(|c| (0..rows).map(|r| flat[r * columns + c]).sum()).collect();
            let sums = values(from_cube::<2>(super::column_sums(to_cube(x))));
            assert_close(&sums, &expected, 1e-3, &format!("{rows} rows of {columns}"));
        }
    }

    #[test]
    fn runs_sum_as_the_cpu_sums_them() {
        // Runs shorter than a workgroup, of one workgroup, and of several, so every unit's loop
        // runs zero, one and more times.
        for (n, run) in [(15, 5), (512, 256), (3999, 1000), (7, 7)] {
            let x: Tensor<1> = input([n], run as u64, &gpu());
            let expected: Vec<f32> = values(x.clone()).chunks(run).map(|run| run.iter().sum()).collect();
            let sums = values(from_cube::<1>(super::sum_runs(to_cube(x), run)));
            assert_close(&sums, &expected, 1e-5, &format!("runs of {run} in {n}"));
        }
    }

    #[test]
    fn a_total_sums_as_the_cpu_sums_it() {
        // Within one workgroup, just past it, and past a workgroup's worth of workgroups.
        for n in [200, 257, 70_001] {
            let x: Tensor<1> = input([n], 9, &gpu());
            let expected = values(x.clone()).iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
            let sum = values(from_cube::<1>(super::sum_all(to_cube(x))));
            assert_close(&sum, &[expected], 1e-5, &format!("Σ of {n}"));
        }
    }
}
