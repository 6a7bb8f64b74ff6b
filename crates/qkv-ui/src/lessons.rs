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
            and attention maps and a shorter parameter bar. Then keep training both: the copy starts with a fresh \
            optimiser in an ill-conditioned basis (see 'condition of W_Q') and may stumble, one reason paper 1 \
            trains with W_Q = I from the start rather than converting.",
        plan: || ExperimentPlan {
            preset: Preset::Theory,
            model: ModelOverrides { mlp_skip: Some(false), ..ModelOverrides::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard)],
            ..ExperimentPlan::default()
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use qkv_train::Dataset;

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
}
