//! What a model's forward pass returns, the GPT's and the ViT's alike.

use burn::tensor::Tensor;

/// Logits and, when requested, the attention probabilities of every layer
/// ([batch, n_head, time, time] each) and the attention logits they are the softmax of. A ViT's
/// time is its tokens (the class token, then the patches) and its logits are [batch, 1, classes].
pub struct ModelOutput {
    pub logits: Tensor<3>,
    pub attention: Vec<Tensor<4>>,
    /// Per layer, `AttentionTrace::logits` (`crate::attention`): before any causal mask.
    pub attention_logits: Vec<Tensor<4>>,
}
