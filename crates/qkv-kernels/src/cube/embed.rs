//! A GPT's input on a cubecl GPU: token and position embeddings added, one launch, where Burn's
//! embeddings and the sum take three (two gathers and an add) and an upload of the positions.
//! Backward, the token table's gradient is Burn's scatter (`embedding_backward`), and the
//! position table's the gradient summed over the batch, one launch where Burn's embedding, its
//! scatter and the broadcast's sum took three.

use burn::backend::ops::{FloatTensorOps, ModuleOps};
use burn::tensor::Slice;
use burn_cubecl::CubeBackend as Cube;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{contiguous, empty, note, units};

/// out[r, c] = wte[tokens[r], c] + wpe[offset + r mod time, c], one unit a value.
#[cube(launch)]
fn embed_kernel(tokens: &Tensor<i32>, wte: &Tensor<f32>, wpe: &Tensor<f32>, out: &mut Tensor<f32>, offset: u32, time: u32) {
    let i = ABSOLUTE_POS;
    if i >= out.len() {
        terminate!();
    }
    let channels = out.shape(out.rank() - 1);
    let row = i / channels;
    let c = i % channels;
    let token = u32::cast_from(tokens[row]) as usize;
    let position = offset as usize + row % time as usize;
    out[i] = wte[token * wte.stride(0) + c * wte.stride(1)] + wpe[position * wpe.stride(0) + c * wpe.stride(1)];
}

/// What the backward pass needs of the forward.
#[derive(Debug, Clone)]
pub(crate) struct Saved {
    tokens: CubeTensor,
    wte: CubeTensor,
    positions: usize,
    offset: usize,
}

/// [batch, time, channels] from `tokens` [batch, time] (i32), the token table `wte` [vocab,
/// channels] and the position table `wpe` [positions, channels], positions from `offset`.
pub(crate) fn forward(tokens: CubeTensor, wte: CubeTensor, wpe: CubeTensor, offset: usize) -> (CubeTensor, Saved) {
    let tokens = contiguous(tokens);
    let [batch, time] = tokens.meta.shape().dims();
    let [positions, channels] = wpe.meta.shape().dims();
    let out = empty(&wte, [batch, time, channels]);
    let n = batch * time * channels;
    let client = wte.client.clone();
    let (cube_count, cube_dim) = units(&client, n);
    note(&cube_count, cube_dim, 1, batch * time + 2 * n, n);
    embed_kernel::launch(
        &client,
        cube_count,
        cube_dim,
        tokens.clone().into_tensor_arg(),
        wte.clone().into_tensor_arg(),
        wpe.into_tensor_arg(),
        out.clone().into_tensor_arg(),
        offset as u32,
        time as u32,
    );
    (out, Saved { tokens, wte, positions, offset })
}

/// The token table's and the position table's gradients from the output's.
pub(crate) fn backward(saved: &Saved, d_out: CubeTensor) -> (CubeTensor, CubeTensor) {
    let Saved { tokens, wte, positions, offset } = saved;
    let [_, time, channels] = d_out.meta.shape().dims();
    let d_wte = Cube::embedding_backward(wte.clone(), d_out.clone(), tokens.clone());
    let by_position = Cube::float_reshape(Cube::float_sum_dim(d_out, 0), [time, channels].into());
    let d_wpe = if *offset == 0 && time == *positions {
        by_position
    } else {
        let zeros = Cube::float_zeros([*positions, channels].into(), &wte.device, burn::tensor::FloatDType::F32);
        Cube::float_slice_assign(zeros, &[Slice::from(*offset..*offset + time)], by_position)
    };
    (d_wte, d_wpe)
}
