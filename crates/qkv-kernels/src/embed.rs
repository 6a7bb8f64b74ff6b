//! A GPT's input: the token embeddings plus the position embeddings, `wte[token] + wpe[offset +
//! t]`. On a cubecl GPU one kernel (`cube::embed`), with its own backward; everywhere else
//! Burn's embeddings and an add, as the model composed them before.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::tensor::{Int, Tensor, TensorData};
use burn_cubecl::CubeBackend as Cube;

use crate::cube::{self, CubeAutodiffTensor, from_cube, from_cube_autodiff, int_to_cube, to_cube, to_cube_autodiff};
use crate::flex::{Route, backward_step_on, route};
use crate::token_groups::{Layout, TokenGroups};

/// `wte[tokens] + wpe[offset..offset + time]`: [batch, time] tokens, [vocab, channels] and
/// [positions, channels] tables → [batch, time, channels]. `groups`, the same tokens grouped on
/// the host ([`TokenGroups`]), lets a GPU's backward add up the token table's gradient without
/// looping a unit over the whole batch; without them it takes Burn's scatter.
pub fn embed(tokens: Tensor<2, Int>, wte: Tensor<2>, wpe: Tensor<2>, offset: usize, groups: Option<&TokenGroups>) -> Tensor<3> {
    let route = route(&wte.device(), wte.dtype());
    // The kernel reads the tokens as the i32 Burn's cubecl devices use.
    let takes = matches!(route, Route::Cube | Route::CubeAutodiff) && tokens.dtype() == burn::tensor::DType::I32;
    match route {
        Route::Cube if takes => from_cube(cube::embed::forward(int_to_cube(tokens, false), to_cube(wte), to_cube(wpe), offset, None).0),
        Route::CubeAutodiff if takes => {
            let [batch, time] = tokens.dims();
            let groups = groups.filter(|groups| groups.len() == batch * time).map(|groups| upload(groups, wte.dims()[0], &tokens.device()));
            let tokens = int_to_cube(tokens, true);
            let table = to_cube_autodiff(wte);
            let (wte, wte_node) = table.clone().into_parts();
            let (wpe, wpe_node) = to_cube_autodiff(wpe).into_parts();
            let run = || {
                let (out, saved) = cube::embed::forward(tokens, wte, wpe, offset, groups);
                (out, EmbedState { saved, table })
            };
            from_cube_autodiff(cube::record(CubeEmbedBackward, [wte_node, wpe_node], run))
        }
        _ => composed(tokens, wte, wpe, offset),
    }
}

/// `groups`' layout for a table of `vocab` tokens, on `device` (three uploads, no launch).
fn upload(groups: &TokenGroups, vocab: usize, device: &burn::tensor::Device) -> cube::embed::DeviceGroups {
    let Layout { order, run_starts, token_runs, span } = groups.layout(vocab);
    let on_device = |values: Vec<i32>| {
        let len = values.len();
        int_to_cube(Tensor::<1, Int>::from_data(TensorData::new(values, [len]), device), true)
    };
    cube::embed::DeviceGroups { order: on_device(order), run_starts: on_device(run_starts), token_runs: on_device(token_runs), span }
}

/// Burn's embeddings and an add.
fn composed(tokens: Tensor<2, Int>, wte: Tensor<2>, wpe: Tensor<2>, offset: usize) -> Tensor<3> {
    let [_, time] = tokens.dims();
    let device = tokens.device();
    let positions =
        Tensor::<1, Int>::from_data(TensorData::new((offset as i64..(offset + time) as i64).collect(), [time]), &device).reshape([1, time]);
    burn::tensor::module::embedding(wte, tokens) + burn::tensor::module::embedding(wpe, positions)
}

#[derive(Debug)]
struct CubeEmbedBackward;

/// What the backward pass needs: the kernel's, and the token table as the graph knows it.
#[derive(Debug, Clone)]
struct EmbedState {
    saved: cube::embed::Saved,
    /// The token table's tensor, to take its gradient so far out of the graph's (a tied LM head
    /// steps back first: it uses the table later) and add to it in the kernel, where autodiff
    /// would add the two in a launch of its own. A parameter, which the model holds anyway.
    table: CubeAutodiffTensor,
}

impl Backward<Cube, 2> for CubeEmbedBackward {
    type State = EmbedState;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let so_far = ops.parents[0].is_some().then(|| grads.remove::<Cube>(&ops.state.table)).flatten();
        backward_step_on::<Cube, _, 2, _>(&ops, grads, |state, grad| {
            let (d_wte, d_wpe) = cube::embed::backward(&state.saved, grad, so_far);
            [Some(d_wte), Some(d_wpe)]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{assert_close, input, values};

    /// The kernel and Burn's embeddings agree forward and backward, positions from 0 (training)
    /// and from an offset (generating with a cache), on wgpu (lavapipe).
    #[test]
    fn the_kernel_matches_burns_embeddings_forward_and_backward() {
        let Some(device) = crate::tests::wgpu().map(|d| d.autodiff()) else { return };
        // Token 0 at over a third of 200 positions: two runs of its group.
        for (time, offset) in [(7, 0), (3, 4), (100, 0)] {
            let ids: Vec<i64> = (0..2 * time as i64).map(|i| if i % 3 == 0 { 0 } else { (i * 5) % 11 }).collect();
            let groups = TokenGroups::of(&ids);
            let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, time]), &device);
            // Tied: the table is also read later (as a GPT's LM head reads it), so its gradient
            // from there is added to the embedding's.
            let run = |fused: bool, groups: Option<&TokenGroups>, tied: bool| {
                let (wte, wpe) = (input([11, 6], 1, &device), input([offset + time, 6], 2, &device));
                let out = if fused {
                    embed(tokens.clone(), wte.clone(), wpe.clone(), offset, groups)
                } else {
                    composed(tokens.clone(), wte.clone(), wpe.clone(), offset)
                };
                let loss = match tied {
                    true => (out.clone().matmul(wte.clone().transpose().unsqueeze()) * input([2, time, 11], 3, &device)).sum(),
                    false => (out.clone() * input([2, time, 6], 3, &device)).sum(),
                };
                let grads = loss.backward();
                (values(out), values(wte.grad(&grads).expect("dwte")), values(wpe.grad(&grads).expect("dwpe")))
            };
            for tied in [false, true] {
                let composed = run(false, None, tied);
                for (fused, how) in [(run(true, None, tied), "scattered"), (run(true, Some(&groups), tied), "grouped")] {
                    let case = format!("offset {offset}, time {time}, tied {tied}");
                    assert_close(&fused.0, &composed.0, 1e-6, &format!("out, {case}"));
                    assert_close(&fused.1, &composed.1, 1e-4, &format!("d wte {how}, {case}"));
                    assert_close(&fused.2, &composed.2, 1e-4, &format!("d wpe, {case}"));
                }
            }
        }
    }
}
