//! Classroom presets: a question, a few sentences of context, and the runs that answer it.

use qkv_model::{AttentionVariant, Preset};
use qkv_train::plan::{ExperimentPlan, ModelOverrides, RunPlan, TrainingOverrides};
use qkv_train::{DataSource, SyntheticTask};

pub struct Lesson {
    pub title: &'static str,
    pub explanation: &'static str,
    pub plan: fn() -> ExperimentPlan,
}

fn classroom(data: DataSource, runs: Vec<RunPlan>) -> ExperimentPlan {
    ExperimentPlan { preset: Preset::Classroom, data, runs, training: TrainingOverrides::default(), ..ExperimentPlan::default() }
}

pub const LESSONS: [Lesson; 5] = [
    Lesson {
        title: "Does attention need W_Q?",
        explanation: "Paper 1 removes the query weight: each head's query is simply its slice of the layer's \
            input (W_Q = I). The model loses a d×d matrix per layer. Train both on Shakespeare and watch whether \
            the curves separate: the paper finds a GPT-2-small without W_Q within about 1% of the original.",
        plan: || {
            classroom(
                DataSource::Shakespeare,
                vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::QueryIdentity)],
            )
        },
    },
    Lesson {
        title: "Share K and V, halve the cache",
        explanation: "When keys and values come from one projection (Q-K=V) a generating model caches one \
            tensor per token instead of two: the KV bars below halve. Q=K=V goes further and shares the query \
            too. Does the loss notice?",
        plan: || {
            classroom(
                DataSource::Shakespeare,
                vec![
                    RunPlan::new(AttentionVariant::Standard),
                    RunPlan::new(AttentionVariant::SharedKeyValue),
                    RunPlan::new(AttentionVariant::SharedAll),
                ],
            )
        },
    },
    Lesson {
        title: "Symmetric attention",
        explanation: "With Q = K the score of token i for j equals that of j for i: the maps are symmetric before \
            the causal mask cuts them. Reversing a list needs each answer digit to look far back, in one \
            direction; (Q=K-V)+ adds a small positional term that breaks the symmetry. Compare the maps and the \
            accuracy curves.",
        plan: || {
            classroom(
                DataSource::Synthetic { task: SyntheticTask::Reverse, length: 8 },
                vec![RunPlan::new(AttentionVariant::SharedQueryKey), RunPlan::new(AttentionVariant::SharedQueryKeyAsym)],
            )
        },
    },
    Lesson {
        title: "Fewer KV heads",
        explanation: "Grouped-query attention lets several query heads read one key/value head (GQA), or all of \
            them read one (MQA): the cache shrinks by the group size. Sharing K and V on top of MQA shrinks it \
            again by half.",
        plan: || {
            classroom(
                DataSource::Shakespeare,
                vec![
                    RunPlan::new(AttentionVariant::Standard).named("MHA"),
                    RunPlan::new(AttentionVariant::Standard).with_kv_heads(2).named("GQA-2"),
                    RunPlan::new(AttentionVariant::Standard).with_kv_heads(1).named("MQA"),
                    RunPlan::new(AttentionVariant::SharedKeyValue).with_kv_heads(1).named("K=V + MQA"),
                ],
            )
        },
    },
    Lesson {
        title: "Is W_Q needed? Watch it vanish",
        explanation: "Paper 1's theory: attention sees its input X only through XW_Q, XW_K and XW_V, so any \
            invertible Θ can move into the layer's input. Train this small model (no LayerNorm, no skip around \
            the MLP) for a while, then press 'Eliminate W_Q' below: a copy without W_Q joins with the same logits \
            and attention maps and a shorter parameter bar. Then keep training both on the same batches: the copy \
            computes the same function, yet its loss jumps on its first step and takes a few dozen steps to catch \
            up (how far it jumps depends on the seed: with a worse-conditioned W_Q the copy can wander for longer). \
            Same function, different optimisation: the copy starts with a fresh Adam state, whose first steps \
            move every weight by about the learning rate whatever its gradient, and Adam is not invariant to the \
            change of basis, which is ill-conditioned here (see 'condition of W_Q'). One reason paper 1 trains \
            with W_Q = I from the start rather than converting.",
        plan: || ExperimentPlan {
            preset: Preset::Theory,
            model: ModelOverrides { mlp_skip: Some(false), ..ModelOverrides::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard)],
            // The jump is chaotic: after 100 steps W_Q's condition number is ~300–6,000 depending
            // on the seed, and the copy's first steps range from a few tenths to twenty nats
            // (measured over seeds 1–7 and 1337). This seed shows a clear jump (~2.4) that is
            // caught up well within 40 steps, as the text says.
            training: TrainingOverrides { seed: Some(4), ..TrainingOverrides::default() },
            ..ExperimentPlan::default()
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use pollster::FutureExt as _;
    use qkv_model::burn::module::Module;
    use qkv_model::burn::tensor::Device;
    use qkv_train::theory::{TheoryCase, continue_converted, convert_and_measure};
    use qkv_train::{Dataset, Experiment, RunEvent};

    #[test]
    fn every_lesson_builds_valid_runs() {
        for lesson in &LESSONS {
            let plan = (lesson.plan)();
            let dataset = plan.dataset().unwrap();
            let specs = plan.specs(&dataset).unwrap_or_else(|e| panic!("{}: {e}", lesson.title));
            assert!(!specs.is_empty(), "{}", lesson.title);
            if let Dataset::Synthetic(data) = &dataset {
                assert!(data.time() <= specs[0].model.block_size);
            }
        }
    }

    /// Lesson 5's claim, on the lesson's own model and data: the copy without W_Q starts with the
    /// original's loss, jumps on its first step, and catches up within a few dozen steps.
    #[test]
    fn the_copy_without_w_q_jumps_on_its_first_step_and_catches_up() {
        let lesson = &LESSONS[4];
        assert!(lesson.explanation.contains("its loss jumps on its first step and takes a few dozen steps to catch up"));
        let plan = (lesson.plan)();
        let dataset = plan.dataset().unwrap();
        let specs = plan.specs(&dataset).unwrap();
        let mut experiment = Experiment::new(dataset, specs, &Device::flex()).unwrap();
        // "Train for a while": past the warm-up, as a class would before pressing the button.
        for _ in 0..100 {
            experiment.step().block_on();
        }
        let original = &experiment.runs[0];
        let (conversion, report) =
            convert_and_measure(TheoryCase::NoMlpSkip, original, original.model().valid(), experiment.val_batches()).unwrap();
        assert!(report.exact && report.max_abs_logit_diff < 1e-4, "{report:?}");
        let copy = continue_converted(original, conversion, "copy", experiment.dataset()).unwrap();
        experiment.add_run(copy).unwrap();
        let gaps: Vec<f64> = (0..40)
            .map(|_| {
                let losses: Vec<f64> = experiment
                    .step()
                    .block_on()
                    .into_iter()
                    .filter_map(|event| match event {
                        RunEvent::Stepped { record, .. } => Some(record.train_loss),
                        _ => None,
                    })
                    .collect();
                losses[1] - losses[0]
            })
            .collect();
        // The first loss is computed before either updates: the same function, the same loss.
        assert!(gaps[0].abs() < 1e-3, "{gaps:?}");
        assert!(gaps[1] > 0.3, "the jump after the copy's first update: {gaps:?}");
        let late = gaps[30..].iter().sum::<f64>() / 10.0;
        assert!(late.abs() < 0.1, "caught up within 40 steps: {gaps:?}");
    }
}
