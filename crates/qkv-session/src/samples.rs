//! What a run says when asked for a sample, as text for people: a text model continues the
//! prompt, a list model answers a validation list (its digits beside the expected ones), a
//! vision model classifies a held-out image.

use burn::tensor::activation::softmax;
use qkv_train::dataset::{Dataset, Inputs};
use qkv_train::experiment::Experiment;
use qkv_train::generate::{SampleOptions, answer_list, generate};
use qkv_train::run::RunError;
use qkv_train::synthetic::Split;

use crate::SessionError;

/// The sample of run `at` of `experiment`: `prompt` continued (the tokenizer's default where it
/// is empty), or the validation list or held-out image `options.seed` picks, answered.
pub(crate) async fn sample_text(experiment: &Experiment, at: usize, prompt: &str, options: &SampleOptions) -> Result<String, SessionError> {
    let model = burn::module::Module::valid(experiment.runs[at].model());
    let text = match experiment.dataset() {
        Dataset::Text(data) => {
            let prompt = if prompt.is_empty() { data.tokenizer.default_prompt() } else { prompt };
            let ids = data.tokenizer.encode(prompt)?;
            let generation = generate(&model.into_gpt().map_err(RunError::from)?, &ids, options).await?;
            data.tokenizer.continued(prompt, &generation.tokens)
        }
        Dataset::Synthetic(data) => {
            // Answer a validation list.
            let (input, expected) = data.lists(Split::Val, options.seed as usize % Split::Val.examples());
            let answer = answer_list(&model.into_gpt().map_err(RunError::from)?, &input).await?;
            let digits = |t: &[u32]| t.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ");
            let right = answer.iter().zip(&expected).filter(|(a, b)| a == b).count();
            format!(
                "input    {}\nanswer   {}\nexpected {}\n{right}/{} digits right",
                digits(&input),
                digits(&answer),
                digits(&expected),
                data.length
            )
        }
        Dataset::Images(images) => {
            // Classify a held-out image.
            let index = options.seed as usize % images.val.len();
            let device = experiment.runs[at].device().clone().without_autodiff();
            let pixels = Inputs::Pixels(images.val.image(index).to_vec()).to_input(1, &device);
            let probabilities = qkv_kernels::read_floats(softmax(model.forward(pixels), 2).reshape([-1])).await?;
            let (predicted, p) =
                probabilities.iter().enumerate().fold((0, 0f32), |best, (class, &p)| if p > best.1 { (class, p) } else { best });
            let name = |class: usize| images.class_names[class].clone();
            let label = usize::from(images.val.label(index));
            format!("held-out image {index}: {}, the model says {} ({:.0}%)", name(label), name(predicted), 100.0 * p)
        }
    };
    Ok(text)
}
