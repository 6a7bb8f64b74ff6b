//! Export of a model's weights to safetensors for PyTorch users.
//!
//! Names follow nanoGPT where a tensor has a nanoGPT counterpart, and shapes follow PyTorch's
//! `nn.Linear` ([out, in]):
//!
//! | QKV Lab (Burn)               | safetensors                            |
//! |------------------------------|----------------------------------------|
//! | `wte.weight`                 | `transformer.wte.weight`               |
//! | `wpe.weight`                 | `transformer.wpe.weight`               |
//! | `blocks.N.ln_1.gamma/beta`   | `transformer.h.N.ln_1.weight/bias`     |
//! | `blocks.N.attn.w_o.*`        | `transformer.h.N.attn.c_proj.*`        |
//! | `blocks.N.attn.w_q.*` etc.   | `transformer.h.N.attn.w_q.*` (nanoGPT fuses Q, K, V into `c_attn`; the variants own different projections, so they keep their own names: `w_q`, `w_k`, `w_v`, `w_qk`, `w_kv`, `w_qkv`) |
//! | `blocks.N.attn.asymmetry.mix.*` | `transformer.h.N.attn.asymmetry.mix.*` |
//! | `blocks.N.mlp.c_fc/c_proj.*` | `transformer.h.N.mlp.c_fc/c_proj.*`    |
//! | `ln_f.gamma/beta`            | `transformer.ln_f.weight/bias`         |
//! | `lm_head.weight` (untied)    | `lm_head.weight`                       |
//!
//! A tied model has no `lm_head.weight`: PyTorch code ties it to `transformer.wte.weight`.

use burn::store::{BurnToPyTorchAdapter, KeyRemapper, ModuleSnapshot, SafetensorsStore};

use qkv_model::Gpt;

const RENAMES: [(&str, &str); 5] = [
    (r"^wte\.", "transformer.wte."),
    (r"^wpe\.", "transformer.wpe."),
    (r"^blocks\.(\d+)\.", "transformer.h.$1."),
    (r"\.attn\.w_o\.", ".attn.c_proj."),
    (r"^ln_f\.", "transformer.ln_f."),
];

/// Why a model could not be written as safetensors (Burn's store says why).
#[derive(Debug, thiserror::Error)]
#[error("cannot write the weights as safetensors: {0}")]
pub struct ExportError(String);

/// The model's weights as a safetensors file, with `metadata` (e.g. the config as JSON).
pub fn to_safetensors(model: &Gpt, metadata: &[(&str, String)]) -> Result<Vec<u8>, ExportError> {
    let mut remapper = KeyRemapper::new();
    for (from, to) in RENAMES {
        remapper = remapper.add_pattern(from, to).map_err(|e| ExportError(e.to_string()))?;
    }
    let mut store = SafetensorsStore::from_bytes(None).with_to_adapter(BurnToPyTorchAdapter).remap(remapper);
    for (key, value) in metadata {
        store = store.metadata(*key, value.clone());
    }
    model.save_into(&mut store).map_err(|e| ExportError(format!("{e:?}")))?;
    store.get_bytes().map_err(|e| ExportError(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;
    use qkv_model::{AttentionVariant, Preset};
    use safetensors::SafeTensors;

    #[test]
    fn the_export_reads_back_with_nanogpt_names_and_pytorch_shapes() {
        let device = Device::flex();
        let mut config = Preset::Classroom.config().with_variant(AttentionVariant::SharedKeyValue);
        config.tie_embeddings = false;
        let model = Gpt::new(&config, &device).unwrap();
        let bytes = to_safetensors(&model, &[("config", serde_json::to_string(&config).unwrap())]).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let mut names: Vec<String> = file.names().into_iter().map(String::from).collect();
        names.sort();
        for expected in [
            "transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.h.0.ln_1.weight",
            "transformer.h.0.attn.w_q.weight",
            "transformer.h.1.attn.w_kv.weight",
            "transformer.h.0.attn.c_proj.weight",
            "transformer.h.0.mlp.c_fc.weight",
            "transformer.ln_f.weight",
            "lm_head.weight",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
        }
        // nn.Linear stores [out, in]; Burn stores [in, out].
        let c_fc = file.tensor("transformer.h.0.mlp.c_fc.weight").unwrap();
        assert_eq!(c_fc.shape(), [config.mlp_hidden, config.n_embd]);
        let exported: Vec<f32> = c_fc.data().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let burn = model.blocks[0].mlp.c_fc.weight.val().transpose().into_data().try_into_vec_as::<f32>().unwrap();
        assert_eq!(exported, burn);
        struct CountTensors(usize);
        impl burn::module::ModuleVisitor for CountTensors {
            fn visit_float<const D: usize>(&mut self, _: &burn::module::Param<burn::tensor::Tensor<D>>) {
                self.0 += 1;
            }
        }
        let mut count = CountTensors(0);
        burn::module::Module::visit(&model, &mut count);
        assert_eq!(names.len(), count.0, "every parameter is exported once");
    }
}
