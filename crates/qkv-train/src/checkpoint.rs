//! One file per run: configuration, tokenizer, weights, optimiser state, step and metrics.
//!
//! Layout (little-endian): the magic line, a u32 format version, then three length-prefixed
//! sections (JSON header, Burn's burnpack weights, the AdamW state in the burnpack layout of
//! Burn's optimiser records) and an FNV-1a checksum of everything before it. A truncated or damaged file is caught by the lengths or
//! the checksum before any of it is used.

use burn::module::Module;
use burn::store::{BurnpackStore, ModuleSnapshot};
use burn::tensor::{Bytes, Device};
use qkv_model::Model;
use serde::{Deserialize, Serialize};

use crate::cpu_copy::model_on_cpu;
use crate::dataset::Dataset;
use crate::optimiser::Optimiser;
use crate::run::{Metrics, Run, RunSpec};
use crate::tokenizer::Tokenizer;
use crate::{Cause, cause};

const MAGIC: &[u8] = b"QKV-LAB CHECKPOINT\n";
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{0} is not a QKV Lab checkpoint (it does not start with the checkpoint header)")]
    NotACheckpoint(String),
    #[error("{name} is checkpoint format version {found}; this QKV Lab reads version {VERSION}")]
    Version { name: String, found: u32 },
    #[error("{0} is truncated: it ends before its sections do; the file was cut short while copying or saving")]
    Truncated(String),
    #[error("{0} is corrupt: its checksum does not match its contents")]
    Corrupt(String),
    #[error("{name} has an unreadable header: {source}")]
    Header {
        name: String,
        #[source]
        source: Cause,
    },
    #[error("{name}: the weights do not fit the model its header describes: {source}")]
    Mismatch {
        name: String,
        #[source]
        source: Cause,
    },
    #[error(
        "{name}: the weights do not fit the model its header describes: the header describes {params} parameters, but \
         the file holds {bytes} bytes of weights"
    )]
    TooFewWeights { name: String, params: usize, bytes: usize },
    #[error(
        "{name}: the weights do not fit the model its header describes: {errors} errors, missing {missing:?}, unexpected \
         {unexpected:?}"
    )]
    WeightsDiffer { name: String, errors: usize, missing: Vec<String>, unexpected: Vec<String> },
    #[error("cannot {action} {name}: {source}")]
    Io {
        action: &'static str,
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot save {name}: {source}")]
    Save {
        name: String,
        #[source]
        source: Cause,
    },
}

/// Everything about a run except its tensors.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointHeader {
    pub spec: RunSpec,
    /// How the data was tokenised (absent for synthetic tasks, whose tokens are the digits).
    pub tokenizer: Option<Tokenizer>,
    /// The data source as the user named it.
    pub data: String,
    pub step: usize,
    pub tokens: usize,
    pub wall_secs: f64,
    pub metrics: Metrics,
    /// Dropout masks the model had drawn, so that a resumed run draws the masks an
    /// uninterrupted one would (0 in checkpoints written before it was kept).
    #[serde(default)]
    pub dropout_draws: u64,
}

/// FNV-1a, 64 bit: enough to tell a damaged file from an intact one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

fn push_section(out: &mut Vec<u8>, section: &[u8]) {
    out.extend((section.len() as u64).to_le_bytes());
    out.extend(section);
}

/// Serialises a run, awaiting every read of its weights and optimiser state (the browser cannot
/// block on its GPU).
pub async fn to_bytes(run: &Run, dataset: &Dataset, data: &str) -> Result<Vec<u8>, CheckpointError> {
    let failed = |source: Cause| CheckpointError::Save { name: run.spec.name.clone(), source };
    let header = CheckpointHeader {
        spec: run.spec.clone(),
        tokenizer: dataset.tokenizer().cloned(),
        data: data.to_string(),
        step: run.step,
        tokens: run.tokens(),
        wall_secs: run.wall_secs(),
        metrics: run.metrics.clone(),
        dropout_draws: run.model().seeds().drawn(),
    };
    let header = serde_json::to_vec(&header).map_err(|e| failed(cause(e)))?;
    let mut store = BurnpackStore::from_bytes(None);
    let saved = match model_on_cpu(run.model()).await.map_err(|e| failed(cause(e)))? {
        Model::Gpt(gpt) => gpt.save_into(&mut store),
        Model::Vit(vit) => vit.save_into(&mut store),
    };
    saved.map_err(|e| failed(cause(e)))?;
    let weights = store.get_bytes().map_err(|e| failed(cause(e)))?;
    let optimiser = run.optimiser().to_bytes().await.map_err(|e| failed(cause(e)))?;

    Ok(assemble(&header, &weights, &optimiser))
}

/// The file around its three sections: magic, version, the sections, the checksum (also how
/// tests and the fuzz targets build files that pass the checksum).
pub fn assemble(header: &[u8], weights: &[u8], optimiser: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(VERSION.to_le_bytes());
    push_section(&mut out, header);
    push_section(&mut out, weights);
    push_section(&mut out, optimiser);
    let sum = checksum(&out);
    out.extend(sum.to_le_bytes());
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    name: &'a str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CheckpointError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| CheckpointError::Truncated(self.name.to_string()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u64(&mut self) -> Result<u64, CheckpointError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn section(&mut self) -> Result<&'a [u8], CheckpointError> {
        let len = self.u64()?;
        self.take(usize::try_from(len).map_err(|_| CheckpointError::Truncated(self.name.to_string()))?)
    }
}

/// A checkpoint's parts, checked for damage but not yet turned into a run.
pub struct Checkpoint {
    pub header: CheckpointHeader,
    weights: Vec<u8>,
    optimiser: Vec<u8>,
    name: String,
}

impl Checkpoint {
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Self, CheckpointError> {
        if !bytes.starts_with(MAGIC) {
            return Err(CheckpointError::NotACheckpoint(name.to_string()));
        }
        let mut reader = Reader { bytes, at: MAGIC.len(), name };
        let version = u32::from_le_bytes(reader.take(4)?.try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(CheckpointError::Version { name: name.to_string(), found: version });
        }
        let header = reader.section()?;
        let weights = reader.section()?;
        let optimiser = reader.section()?;
        let body_end = reader.at;
        if reader.u64()? != checksum(&bytes[..body_end]) || reader.at != bytes.len() {
            return Err(CheckpointError::Corrupt(name.to_string()));
        }
        let header: CheckpointHeader =
            serde_json::from_slice(header).map_err(|e| CheckpointError::Header { name: name.to_string(), source: cause(e) })?;
        header.spec.model.validate().map_err(|e| CheckpointError::Header { name: name.to_string(), source: cause(e) })?;
        // Checked before a model of the header's size is allocated: a damaged or forged header
        // could otherwise ask for more memory than the machine has.
        let params = qkv_model::accounting::ParamReport::new(&header.spec.model).total_params;
        if weights.len() / 4 < params {
            return Err(CheckpointError::TooFewWeights { name: name.to_string(), params, bytes: weights.len() });
        }
        Ok(Self { header, weights: weights.to_vec(), optimiser: optimiser.to_vec(), name: name.to_string() })
    }

    pub fn read(path: &std::path::Path) -> Result<Self, CheckpointError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io { action: "read", name: name.clone(), source })?;
        Self::from_bytes(&name, &bytes)
    }

    fn mismatch(&self, source: impl std::error::Error + Send + Sync + 'static) -> CheckpointError {
        CheckpointError::Mismatch { name: self.name.clone(), source: cause(source) }
    }

    /// Puts the saved weights (and their parameter ids) into `model`, which must have every
    /// tensor the file has and no other.
    fn load_weights(&self, model: &mut Model) -> Result<(), CheckpointError> {
        let mut store = BurnpackStore::from_bytes(Some(Bytes::from_bytes_vec(self.weights.clone())));
        // The file holds the GPT's or the ViT's own tensors, named as in a GPT saved alone.
        let applied = match model {
            Model::Gpt(gpt) => gpt.load_from(&mut store),
            Model::Vit(vit) => vit.load_from(&mut store),
        }
        .map_err(|e| self.mismatch(e))?;
        if !applied.is_success() || !applied.missing.is_empty() || !applied.unused.is_empty() {
            return Err(CheckpointError::WeightsDiffer {
                name: self.name.clone(),
                errors: applied.errors.len(),
                missing: applied.missing.iter().map(|m| m.0.clone()).collect(),
                unexpected: applied.unused.clone(),
            });
        }
        Ok(())
    }

    /// The run as it was saved, ready to take its next step on `device`.
    pub fn into_run(self, dataset: &Dataset, device: &Device) -> Result<Run, CheckpointError> {
        let header = self.header.clone();
        let mut run = Run::new(header.spec.clone(), dataset, device).map_err(|e| self.mismatch(e))?;
        let (model_slot, optimiser) = run.parts_mut();
        let model = model_slot.as_mut().expect("a new run has its model");
        self.load_weights(model)?;
        // The loaded parameters carry their saved ids, which the optimiser state is keyed by.
        *optimiser = Optimiser::new(&header.spec.training)
            .load_bytes(self.optimiser.clone(), &device.clone().without_autodiff())
            .map_err(|e| self.mismatch(e))?;
        optimiser.check_fits(model).map_err(|e| self.mismatch(e))?;
        run.restore(header.step, header.tokens, header.wall_secs, header.metrics);
        run.model().seeds().restore(header.dropout_draws);
        Ok(run)
    }

    /// Only the model, for sampling and export (no optimiser, no dataset needed).
    pub fn into_model(self, device: &Device) -> Result<Model, CheckpointError> {
        let mut model = Model::new_seeded(&self.header.spec.model, device, 0).map_err(|e| self.mismatch(e))?;
        self.load_weights(&mut model)?;
        Ok(model.valid())
    }
}

/// Writes `bytes` next to `path` first and renames, so an interrupted save never leaves a
/// half-written checkpoint under the real name.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let io = |source: std::io::Error| CheckpointError::Io { action: "write", name: path.display().to_string(), source };
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::run::tests::{tiny_spec, tiny_text};
    use pollster::FutureExt as _;
    use qkv_model::AttentionVariant;

    /// A checkpoint `qkv train` wrote on 2026-12-06, before the model's config type was renamed
    /// from `GptConfig` to `ModelConfig` (classroom, 1 layer of 2 heads, 8 wide, 2 steps): it
    /// still reads, and its model still runs.
    #[test]
    fn a_checkpoint_written_before_the_config_was_renamed_still_loads() {
        let bytes = include_bytes!("../tests/fixtures/checkpoint-2026-12-06.qkv");
        let checkpoint = Checkpoint::from_bytes("checkpoint-2026-12-06.qkv", bytes).unwrap();
        let model = &checkpoint.header.spec.model;
        assert_eq!((model.n_layer, model.n_head, model.n_embd, model.block_size), (1, 2, 8, 8));
        assert_eq!((checkpoint.header.step, checkpoint.header.spec.name.as_str()), (2, "standard"));
        let loaded = checkpoint.into_model(&Device::flex()).unwrap();
        assert_eq!(loaded.layers().count(), 1);
    }

    fn trained_run(dataset: &Dataset) -> Run {
        let mut run = Run::new(tiny_spec(AttentionVariant::SharedKeyValue, dataset), dataset, &Device::flex()).unwrap();
        let mut rng = Rng::new(3);
        for _ in 0..3 {
            run.train_step(&[dataset.train_batch(&mut rng, 8, 16, 0)]).block_on().unwrap();
        }
        run
    }

    #[test]
    fn a_round_trip_gives_the_identical_next_step_loss() {
        let dataset = tiny_text();
        let mut original = trained_run(&dataset);
        let bytes = to_bytes(&original, &dataset, "tiny").block_on().unwrap();
        let checkpoint = Checkpoint::from_bytes("run.qkv", &bytes).unwrap();
        assert_eq!(checkpoint.header.step, 3);
        assert_eq!(checkpoint.header.data, "tiny");
        let mut restored = checkpoint.into_run(&dataset, &Device::flex()).unwrap();
        assert_eq!(restored.step, 3);
        assert_eq!(restored.metrics, original.metrics);
        let batch = dataset.train_batch(&mut Rng::new(99), 8, 16, 0);
        let a = original.train_step(std::slice::from_ref(&batch)).block_on().unwrap();
        let b = restored.train_step(std::slice::from_ref(&batch)).block_on().unwrap();
        assert_eq!(a.train_loss, b.train_loss);
        // A second step shows that the optimiser state came back too, not only the weights.
        let batch = dataset.train_batch(&mut Rng::new(100), 8, 16, 0);
        let a = original.train_step(std::slice::from_ref(&batch)).block_on().unwrap();
        let b = restored.train_step(std::slice::from_ref(&batch)).block_on().unwrap();
        assert_eq!(a.train_loss, b.train_loss);
    }

    #[test]
    fn damaged_files_get_clear_errors() {
        let dataset = tiny_text();
        let bytes = to_bytes(&trained_run(&dataset), &dataset, "tiny").block_on().unwrap();

        let err = Checkpoint::from_bytes("notes.txt", b"hello").err().unwrap();
        assert!(matches!(err, CheckpointError::NotACheckpoint(_)), "{err}");
        let err = Checkpoint::from_bytes("cut.qkv", &bytes[..bytes.len() / 2]).err().unwrap();
        assert!(matches!(err, CheckpointError::Truncated(_)), "{err}");
        let mut flipped = bytes.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        let err = Checkpoint::from_bytes("flipped.qkv", &flipped).err().unwrap();
        assert!(matches!(err, CheckpointError::Corrupt(_)), "{err}");
        assert!(err.to_string().contains("flipped.qkv"));
    }

    #[test]
    fn weights_that_do_not_fit_the_header_are_refused() {
        let dataset = tiny_text();
        let run = trained_run(&dataset);
        let bytes = to_bytes(&run, &dataset, "tiny").block_on().unwrap();
        // Rewrite the header to describe a wider model, with a valid checksum: only the weights
        // can tell that they belong to another model.
        let checkpoint = Checkpoint::from_bytes("x", &bytes).unwrap();
        let mut header = checkpoint.header.clone();
        header.spec.model.mlp_hidden *= 2;
        let header = serde_json::to_vec(&header).unwrap();
        let forged = assemble(&header, &checkpoint.weights, &checkpoint.optimiser);
        let err = Checkpoint::from_bytes("forged.qkv", &forged).and_then(|c| c.into_run(&dataset, &Device::flex())).err().unwrap();
        let misfit =
            matches!(err, CheckpointError::Mismatch { .. } | CheckpointError::WeightsDiffer { .. } | CheckpointError::TooFewWeights { .. });
        assert!(misfit, "{err}");
        assert!(err.to_string().contains("the weights do not fit the model its header describes"), "{err}");

        // A header describing a model far larger than the file is refused before any of it is
        // allocated.
        let mut header = checkpoint.header.clone();
        header.spec.model.n_layer = 1000;
        let forged = assemble(&serde_json::to_vec(&header).unwrap(), &checkpoint.weights, &checkpoint.optimiser);
        let err = Checkpoint::from_bytes("huge.qkv", &forged).err().unwrap();
        assert!(matches!(err, CheckpointError::TooFewWeights { .. }) && err.to_string().contains("parameters"), "{err}");
    }

    #[test]
    fn an_optimiser_state_of_another_model_is_refused() {
        let dataset = tiny_text();
        let this = Checkpoint::from_bytes("this", &to_bytes(&trained_run(&dataset), &dataset, "tiny").block_on().unwrap()).unwrap();
        let other = Checkpoint::from_bytes("other", &to_bytes(&trained_run(&dataset), &dataset, "tiny").block_on().unwrap()).unwrap();
        let forged = assemble(&serde_json::to_vec(&this.header).unwrap(), &this.weights, &other.optimiser);
        let err = Checkpoint::from_bytes("mixed.qkv", &forged).unwrap().into_run(&dataset, &Device::flex()).err().unwrap();
        assert!(matches!(err, CheckpointError::Mismatch { .. }), "{err}");
        assert!(err.to_string().contains("optimiser state"), "{err}");
    }
}
