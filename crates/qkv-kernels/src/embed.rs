//! A GPT's input: the token embeddings plus the position embeddings, `wte[token] + wpe[offset +
//! t]`. On a cubecl GPU one kernel (`cube::embed`), with its own backward; everywhere else
//! Burn's embeddings and an add, as the model composed them before.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::tensor::{Int, Tensor, TensorData};
use burn_cubecl::CubeBackend as Cube;

use crate::cube::{self, from_cube, from_cube_autodiff, int_to_cube, to_cube, to_cube_autodiff};
use crate::flex::{Route, backward_step_on, route};

/// `wte[tokens] + wpe[offset..offset + time]`: [batch, time] tokens, [vocab, channels] and
/// [positions, channels] tables → [batch, time, channels].
pub fn embed(tokens: Tensor<2, Int>, wte: Tensor<2>, wpe: Tensor<2>, offset: usize) -> Tensor<3> {
    let route = route(&wte.device(), wte.dtype());
    // The kernel reads the tokens as the i32 Burn's cubecl devices use.
    let takes = matches!(route, Route::Cube | Route::CubeAutodiff) && tokens.dtype() == burn::tensor::DType::I32;
    match route {
        Route::Cube if takes => from_cube(cube::embed::forward(int_to_cube(tokens, false), to_cube(wte), to_cube(wpe), offset).0),
        Route::CubeAutodiff if takes => {
            let tokens = int_to_cube(tokens, true);
            let (wte, wte_node) = to_cube_autodiff(wte).into_parts();
            let (wpe, wpe_node) = to_cube_autodiff(wpe).into_parts();
            from_cube_autodiff(cube::record(CubeEmbedBackward, [wte_node, wpe_node], || cube::embed::forward(tokens, wte, wpe, offset)))
        }
        _ => composed(tokens, wte, wpe, offset),
    }
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

impl Backward<Cube, 2> for CubeEmbedBackward {
    type State = cube::embed::Saved;

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        backward_step_on::<Cube, _, 2, _>(&ops, grads, |saved, grad| {
            let (d_wte, d_wpe) = cube::embed::backward(saved, grad);
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
        for (time, offset) in [(7, 0), (3, 4)] {
            let tokens =
                Tensor::<2, Int>::from_data(TensorData::new((0..2 * time as i64).map(|i| (i * 5) % 11).collect(), [2, time]), &device);
            let run = |fused: bool| {
                let (wte, wpe) = (input([11, 6], 1, &device), input([7, 6], 2, &device));
                let out = if fused {
                    embed(tokens.clone(), wte.clone(), wpe.clone(), offset)
                } else {
                    composed(tokens.clone(), wte.clone(), wpe.clone(), offset)
                };
                let grads = (out.clone() * input([2, time, 6], 3, &device)).sum().backward();
                (values(out), values(wte.grad(&grads).expect("dwte")), values(wpe.grad(&grads).expect("dwpe")))
            };
            let (fused, composed) = (run(true), run(false));
            assert_close(&fused.0, &composed.0, 1e-6, &format!("out, offset {offset}"));
            assert_close(&fused.1, &composed.1, 1e-5, &format!("d wte, offset {offset}"));
            assert_close(&fused.2, &composed.2, 1e-5, &format!("d wpe, offset {offset}"));
        }
    }
}
