//! A batch split by rows into shards that go forward and backward on threads of their own
//! ([`fan_out`]), their gradients summed: data parallelism inside one run.
//!
//! Why: on the CPU a step is many ops of a fraction of a millisecond each, and spreading every op
//! over the cores costs a wake-up and a wait per op (on this project's 2-core machine a single
//! run gained ~10% from its second core that way). A shard per core meets the others once per
//! step. The loss is a weighted mean over the batch's counted tokens, so each shard's loss is
//! weighted by its share of them and the sum of the shards' gradients is the batch's gradient, up
//! to the order in which floats are added.

use burn::module::Module;
use burn::tensor::Device;
use qkv_model::Model;

use crate::dataset::Batch;

/// Rows [start, end) of a batch and the shard's share of the loss.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shard {
    pub batch: Batch,
    /// Where the shard's rows start in the batch.
    pub first_row: usize,
    /// The shard's counted tokens over the batch's: its mean loss times this is its part of the
    /// batch's mean.
    pub weight: f64,
}

/// `step` of each shard on `model`, in order: each shard on a thread of its own and on its
/// device (`devices`, one a shard), and on a fork of the model's parameters into leaves of its
/// own. Burn's autodiff merges graphs that share a node and holds a graph's lock through a whole
/// backward pass, so shards on the same leaves would take turns; gradients are keyed by parameter,
/// not by node, and meet again in the caller's accumulator. Each shard draws its dropout masks
/// from its share of the model's seed stream, which masks its rows as the whole batch would be
/// masked, and the stream then moves on as one step's draws moved it.
pub(crate) fn fan_out<T: Send>(
    model: &Model,
    shards: &[Shard],
    devices: &[&Device],
    step: impl Fn(&Model, &Shard, &Device) -> T + Sync,
) -> Vec<T> {
    let forks: Vec<Model> = shards
        .iter()
        .zip(devices)
        .map(|(shard, device)| model.clone().fork(device).with_seeds(&model.seeds().shard(shard.first_row)))
        .collect();
    let threads_each = (rayon::current_num_threads() / shards.len().max(1)).max(1);
    let tasks = forks.iter().zip(shards).zip(devices).collect();
    let steps = crate::threads::on_threads(tasks, threads_each, |((fork, shard), device)| step(fork, shard, device));
    if let Some(first) = forks.first() {
        model.seeds().catch_up(first.seeds());
    }
    steps
}

/// `batch` as up to `parts` shards of whole rows, in order. Shards without a counted token (a
/// loss mask of zeros there) are left out: they add nothing to the loss and would divide by
/// zero. A batch without any counted token stays whole, so that its loss is reported as it is.
pub(crate) fn split(batch: &Batch, parts: usize) -> Vec<Shard> {
    let parts = parts.clamp(1, batch.rows.max(1));
    let counted = |rows: std::ops::Range<usize>| match &batch.loss_mask {
        Some(mask) => mask[rows.start * batch.time..rows.end * batch.time].iter().map(|&m| f64::from(m)).sum(),
        None => (rows.len() * batch.time) as f64,
    };
    let total = counted(0..batch.rows);
    if parts == 1 || total <= 0.0 {
        return vec![Shard { batch: batch.clone(), first_row: 0, weight: 1.0 }];
    }
    let size = batch.rows.div_ceil(parts);
    (0..batch.rows)
        .step_by(size)
        .map(|start| start..(start + size).min(batch.rows))
        .filter_map(|rows| {
            let weight = counted(rows.clone()) / total;
            let cells = rows.start * batch.time..rows.end * batch.time;
            let shard = Batch {
                rows: rows.len(),
                time: batch.time,
                inputs: batch.inputs.rows(rows.clone(), batch.rows),
                targets: batch.targets[cells.clone()].to_vec(),
                loss_mask: batch.loss_mask.as_ref().map(|mask| mask[cells].to_vec()),
            };
            (weight > 0.0).then_some(Shard { batch: shard, first_row: rows.start, weight })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Inputs;

    fn batch(rows: usize, time: usize, mask: Option<Vec<f32>>) -> Batch {
        let cells = (0..(rows * time) as i64).collect::<Vec<_>>();
        Batch { rows, time, inputs: Inputs::Tokens(cells.clone()), targets: cells.iter().map(|c| c + 100).collect(), loss_mask: mask }
    }

    #[test]
    fn shards_cover_the_rows_in_order_weighted_by_their_tokens() {
        let whole = batch(5, 3, None);
        let shards = split(&whole, 2);
        assert_eq!(shards.iter().map(|s| s.batch.rows).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(
            shards.iter().flat_map(|s| s.batch.inputs.tokens().unwrap().to_vec()).collect::<Vec<_>>(),
            whole.inputs.tokens().unwrap()
        );
        assert_eq!(shards.iter().flat_map(|s| s.batch.targets.clone()).collect::<Vec<_>>(), whole.targets);
        assert_eq!(shards.iter().map(|s| s.weight).collect::<Vec<_>>(), [0.6, 0.4]);
        assert_eq!(shards.iter().map(|s| s.first_row).collect::<Vec<_>>(), [0, 3]);
        assert_eq!(split(&whole, 1), [Shard { batch: whole.clone(), first_row: 0, weight: 1.0 }]);
        assert_eq!(split(&whole, 9).len(), 5, "no more shards than rows");
    }

    #[test]
    fn masked_shards_weigh_their_counted_tokens_and_empty_ones_drop_out() {
        // Row 0 counts 1 token, row 1 counts 3, row 2 none.
        let mask = vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0];
        let shards = split(&batch(3, 3, Some(mask)), 3);
        assert_eq!(shards.len(), 2);
        assert_eq!(shards.iter().map(|s| s.weight).collect::<Vec<_>>(), [0.25, 0.75]);
        assert_eq!(shards[1].batch.loss_mask.as_deref(), Some(&[1.0, 1.0, 1.0][..]));
        let nothing_counted = batch(2, 2, Some(vec![0.0; 4]));
        assert_eq!(split(&nothing_counted, 2), [Shard { batch: nothing_counted.clone(), first_row: 0, weight: 1.0 }]);
    }
}
