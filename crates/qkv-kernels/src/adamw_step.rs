//! The scalars of one AdamW update: what the CPU kernel (`adamw`) and the GPU's (`cube::adamw`)
//! both read, kept apart from either so that neither imports the other.

/// The scalars of one AdamW update.
#[derive(Debug, Clone, Copy)]
pub struct AdamWStep {
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub lr: f64,
    /// Decoupled weight decay λ (0 for parameters that are not decayed).
    pub weight_decay: f32,
    /// Updates taken including this one (t ≥ 1): the bias corrections depend on it.
    pub time: i32,
}
