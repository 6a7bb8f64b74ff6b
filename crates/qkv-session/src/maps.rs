//! The attention maps a session sends: what they read (a prompt's tokens, a synthetic example,
//! an image's patches), how each position is labelled, and every run's maps, diagnostics and
//! answers on it.

use burn::tensor::Tensor;

use qkv_model::diagnostics::{Ranks, diagnose_with};
use qkv_train::dataset::{Dataset, Inputs};
use qkv_train::experiment::Experiment;
use qkv_train::synthetic::{Framing, SEP, Split};

use crate::{AttentionMaps, HeldOutImages, LIVE_RANKS_MAX_WIDTH, RunId, SessionError};

/// Prompt tokens shown in the attention maps of text data: enough to read, few enough to see.
const ATTENTION_PROMPT_TOKENS: usize = 32;

/// The attention maps (probabilities and logits) of every run of `experiment` on the same input,
/// with each run's diagnostics and, for images, its answers on the first held-out images.
pub(crate) async fn attention_maps(experiment: &Experiment, prompt: &str, ids: &[RunId]) -> Result<AttentionMaps, SessionError> {
    let (inputs, labels) = attention_input(experiment, prompt)?;
    let time = labels.len();
    let (mut runs, mut logits) = (Vec::new(), Vec::new());
    let mut diagnostics = Vec::new();
    let images = held_out_images(experiment);
    let mut predictions = Vec::new();
    for run in &experiment.runs {
        let model = burn::module::Module::valid(run.model());
        let device = run.device().clone().without_autodiff();
        if let Some(images) = &images {
            let pixels = Inputs::Pixels(images.pixels.concat()).to_input(images.pixels.len(), &device);
            let classes = model.forward(pixels).argmax(2).reshape([-1]);
            let classes = qkv_kernels::read_back(classes).await?.iter::<i64>().map(|c| c as usize).collect();
            predictions.push(classes);
        }
        let output = model.forward_with_attention(inputs.to_input(1, &device));
        let n_layer = output.attention.len();
        let n_head = output.attention.first().map_or(0, |l| l.dims()[1]);
        // Probabilities then logits, in one read.
        let flat = output.attention.into_iter().chain(output.attention_logits).map(|l| l.reshape([-1])).collect();
        let values = qkv_kernels::read_floats(Tensor::cat(flat, 0)).await?;
        let per_map = time * time;
        let maps = |values: &[f32]| -> Vec<Vec<Vec<f32>>> {
            (0..n_layer).map(|l| (0..n_head).map(|h| values[(l * n_head + h) * per_map..][..per_map].to_vec()).collect()).collect()
        };
        let (probabilities, logit_values) = values.split_at(n_layer * n_head * per_map);
        runs.push(maps(probabilities));
        logits.push(maps(logit_values));
        let ranks = if run.spec.model.n_embd <= LIVE_RANKS_MAX_WIDTH { Ranks::Computed } else { Ranks::Skipped };
        diagnostics.push(diagnose_with(&model, inputs.to_input(1, &device), ranks).await?);
    }
    Ok(AttentionMaps { step: experiment.step, tokens: labels, ids: ids.to_vec(), runs, logits, diagnostics, images, predictions })
}

/// What the attention maps read (one row) and a label for each of its positions.
fn attention_input(experiment: &Experiment, prompt: &str) -> Result<(Inputs, Vec<String>), SessionError> {
    let block_size = experiment.runs.iter().map(|r| r.spec.model.block_size).min().unwrap_or(1);
    let (tokens, labels): (Vec<u32>, Vec<String>) = match experiment.dataset() {
        // The first held-out image: the class token, then the patches row by row.
        Dataset::Images(images) => {
            let image = experiment.runs.first().and_then(|r| r.spec.model.image);
            let (patches, columns) = image.map_or((0, 1), |image| (image.patches(), image.width / image.patch));
            let labels =
                std::iter::once("class".to_string()).chain((0..patches).map(|p| format!("r{}c{}", p / columns, p % columns))).collect();
            return Ok((Inputs::Pixels(images.val.image(0).to_vec()), labels));
        }
        Dataset::Synthetic(data) => {
            // One validation example in full: the maps show how the answer reads the input (an
            // encoder reads the list alone).
            let example = if data.framing == Framing::Encoder { data.lists(Split::Val, 0).0 } else { data.example(Split::Val, 0) };
            let labels = example.iter().map(|&t| if t == SEP { "|".to_string() } else { t.to_string() }).collect();
            (example, labels)
        }
        Dataset::Text(text) => {
            let tokens = if prompt.is_empty() {
                // The first full line of the validation split.
                let newline = text.tokenizer.encode("\n").ok().and_then(|t| t.first().copied());
                let start = newline.and_then(|nl| text.val.iter_from(0).position(|t| t == nl)).map_or(0, |p| p + 1);
                text.val.iter_from(start).take(ATTENTION_PROMPT_TOKENS).collect()
            } else {
                text.tokenizer.encode(prompt)?
            };
            if tokens.is_empty() {
                return Err(SessionError::EmptyPrompt);
            }
            let tokens: Vec<u32> = tokens.into_iter().take(block_size.min(64)).collect();
            let labels = tokens.iter().map(|&t| text.tokenizer.decode(&[t])).collect();
            (tokens, labels)
        }
    };
    Ok((Inputs::Tokens(tokens.into_iter().map(i64::from).collect()), labels))
}

/// Held-out images the app shows each vision run's answers for.
const HELD_OUT_SHOWN: usize = 8;

/// The first held-out images of a vision experiment (the maps read the first), or none.
fn held_out_images(experiment: &Experiment) -> Option<HeldOutImages> {
    let images = experiment.dataset().images()?;
    let input = experiment.runs.first()?.spec.model.image?;
    let shown = 0..HELD_OUT_SHOWN.min(images.val.len());
    Some(HeldOutImages {
        height: images.shape.height,
        width: images.shape.width,
        channels: images.shape.channels,
        patch: input.patch,
        pixels: shown.clone().map(|i| images.val.image(i).to_vec()).collect(),
        labels: shown.map(|i| usize::from(images.val.label(i))).collect(),
        class_names: images.class_names.clone(),
    })
}
