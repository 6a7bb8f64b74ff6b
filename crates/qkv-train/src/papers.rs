//! The papers' published figures that reports and the app set our results beside, with their
//! source. docs/papers.md holds the same figures for people; a test keeps the two equal.

use qkv_model::{AttentionConfig, AttentionVariant};

use crate::synthetic::SyntheticTask;

/// Paper 1 (Karbevski & Mijoski, arXiv 2510.23912), GPT-2 small on OpenWebText: the model
/// without W_Q (117M parameters) is on par with the original (124M) in validation loss.
pub const PAPER1_SOURCE: &str = "paper 1, GPT-2 small (124M) on OpenWebText";

/// Paper 1's validation losses of the original GPT-2 small and of the model without W_Q whose
/// MLP is widened back to the original's parameter count.
pub const PAPER1_STANDARD_LOSS: f64 = 3.016;
pub const PAPER1_WIDE_MLP_LOSS: f64 = 3.004;

/// Paper 2 (Kayyam, Madan Gopal & Lewis, ICML 2026): what its 300M models were trained on.
pub const PAPER2_SOURCE: &str = "paper 2, 300M models on 10B SlimPajama tokens";

/// Paper 2's validation perplexity (per BPE token) of the standard 300M model.
pub const PAPER2_STANDARD_PPL: f64 = 5.11;

/// Paper 2's 300M perplexities: (the variant as our runs name it without a head ratio, the
/// paper's name with its ratio of key/value heads to its 16 heads, perplexity).
pub const PAPER2_PPL: [(&str, &str, f64); 7] = [
    ("Q-K=V", "Q-K=V", 5.27),
    ("Q=K-V", "Q=K-V", 5.36),
    ("Q=K=V", "Q=K=V", 6.41),
    ("GQA", "GQA 4/16", 5.15),
    ("MQA", "MQA 1/16", 5.19),
    ("Q-K=V + GQA", "Q-K=V + GQA 4/16", 5.32),
    ("Q-K=V + MQA", "Q-K=V + MQA 1/16", 5.36),
];

/// The changes in perplexity, in percent, that paper 2's text states for the two combinations: its
/// table's perplexities as printed (rounded to two decimals) give +4.1% and +4.9% (docs/papers.md).
pub const PAPER2_STATED_CHANGES: [(&str, f64); 2] = [("Q-K=V + GQA", 3.9), ("Q-K=V + MQA", 4.8)];

/// Paper 2's cosine of W_K and W_V in trained standard models, as the paper states it (it does not
/// say how it was taken: docs/diagnostics.md).
pub const PAPER2_KEY_VALUE_COSINE: f64 = 0.73;

/// Paper 2's vision table as the authors' public code quotes it: each variant's accuracy on MNIST
/// (28×28 digits, 60,000 to train; not our 8×8 digits), by the name our runs give the variant.
pub const PAPER2_VISION_SOURCE: &str = "paper 2's vision table, MNIST";
pub const PAPER2_MNIST_ACCURACY: [(&str, f64); 6] =
    [("Q-K-V", 0.981), ("Q=K-V", 0.981), ("(Q=K-V)+", 0.982), ("Q-K=V", 0.976), ("Q=K=V", 0.978), ("(Q=K=V)+", 0.977)];

/// Paper 2's MNIST accuracy for the variant our runs name `name`; None for a variant the paper
/// did not train on images.
pub fn paper2_mnist_accuracy(name: &str) -> Option<f64> {
    PAPER2_MNIST_ACCURACY.iter().find(|(ours, _)| *ours == name).map(|&(_, accuracy)| accuracy)
}

/// The tasks of [`PAPER2_SYNTHETIC_ACCURACY`]'s columns, in order.
pub const PAPER2_SYNTHETIC_TASKS: [SyntheticTask; 5] =
    [SyntheticTask::Reverse, SyntheticTask::Sort, SyntheticTask::Sub, SyntheticTask::Swap, SyntheticTask::Copy];

/// Paper 2's synthetic tasks as the authors' public code reproduces its table: non-causal
/// encoders, token accuracy on held-out lists, averaged over [`PAPER2_SYNTHETIC_SWEEP`]
/// (docs/papers.md). Each of the six variants' token accuracy on [`PAPER2_SYNTHETIC_TASKS`], by the
/// name our runs give the variant.
pub const PAPER2_SYNTHETIC_ACCURACY: SyntheticTable = [
    ("Q-K-V", [0.529, 0.753, 0.992, 0.524, 0.991]),
    ("Q=K-V", [0.475, 0.691, 0.991, 0.471, 0.994]),
    ("(Q=K-V)+", [0.522, 0.770, 0.993, 0.530, 0.991]),
    ("Q-K=V", [0.510, 0.747, 0.992, 0.511, 0.994]),
    ("Q=K=V", [0.295, 0.671, 0.991, 0.307, 0.992]),
    ("(Q=K=V)+", [0.370, 0.770, 0.990, 0.382, 0.990]),
];

/// Paper 2's token accuracy for the variant our runs name `name` on `task`; None where the table
/// has neither.
pub fn paper2_synthetic_accuracy(name: &str, task: SyntheticTask) -> Option<f64> {
    synthetic_cell(&PAPER2_SYNTHETIC_ACCURACY, name, task)
}

fn synthetic_cell(table: &SyntheticTable, name: &str, task: SyntheticTask) -> Option<f64> {
    let column = PAPER2_SYNTHETIC_TASKS.iter().position(|&t| t == task)?;
    table.iter().find(|(ours, _)| *ours == name).map(|(_, row)| row[column])
}

/// A table of token accuracies by variant, over [`PAPER2_SYNTHETIC_TASKS`].
pub type SyntheticTable = [(&'static str, [f64; 5]); 6];

/// One of the authors' synthetic models: its width, depth and heads, and the length of its lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SyntheticSetting {
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub length: usize,
}

/// A sweep of the authors' synthetic models: every width × depth × heads × list length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticSweep {
    pub widths: &'static [usize],
    pub layers: &'static [usize],
    pub heads: &'static [usize],
    pub lengths: &'static [usize],
}

impl SyntheticSweep {
    /// Every setting of the sweep, in order of width, depth, heads, then length.
    pub fn settings(&self) -> Vec<SyntheticSetting> {
        let mut settings = Vec::new();
        for &n_embd in self.widths {
            for &n_layer in self.layers {
                for &n_head in self.heads {
                    settings.extend(self.lengths.iter().map(|&length| SyntheticSetting { n_embd, n_layer, n_head, length }));
                }
            }
        }
        settings
    }

    /// Whether `settings` are exactly this sweep's, each once or more, in any order.
    pub fn is(&self, settings: &[SyntheticSetting]) -> bool {
        let mut ours = settings.to_vec();
        ours.sort_unstable();
        ours.dedup();
        let mut all = self.settings();
        all.sort_unstable();
        ours == all
    }
}

/// The sweep [`PAPER2_SYNTHETIC_ACCURACY`] averages over (with 3 seeds each).
pub const PAPER2_SYNTHETIC_SWEEP: SyntheticSweep =
    SyntheticSweep { widths: &[32, 64, 256], layers: &[2, 4], heads: &[2, 4], lengths: &[16, 64, 128] };

/// The smaller half of [`PAPER2_SYNTHETIC_SWEEP`] that fits a laptop: widths 32 and 64, 2 layers,
/// 2 and 4 heads, lists of 16 and 64.
pub const PAPER2_SYNTHETIC_HALF_SWEEP: SyntheticSweep =
    SyntheticSweep { widths: &[32, 64], layers: &[2], heads: &[2, 4], lengths: &[16, 64] };

/// The authors' runs on [`PAPER2_SYNTHETIC_HALF_SWEEP`] alone: the mean of the per-run token
/// accuracies in their published results files over its 8 settings and 3 seeds (24 runs a cell;
/// docs/papers.md).
pub const PAPER2_SYNTHETIC_HALF_ACCURACY: SyntheticTable = [
    ("Q-K-V", [0.399, 0.596, 0.992, 0.391, 0.990]),
    ("Q=K-V", [0.339, 0.563, 0.992, 0.342, 0.996]),
    ("(Q=K-V)+", [0.385, 0.618, 0.995, 0.409, 0.992]),
    ("Q-K=V", [0.352, 0.582, 0.992, 0.348, 0.996]),
    ("Q=K=V", [0.236, 0.557, 0.994, 0.259, 0.995]),
    ("(Q=K=V)+", [0.299, 0.626, 0.992, 0.310, 0.990]),
];

/// The authors' token accuracy for the variant our runs name `name` on `task`, averaged over
/// exactly `settings`: None where they published no average over those settings, or have no
/// such variant.
pub fn paper2_synthetic_accuracy_over(settings: &[SyntheticSetting], name: &str, task: SyntheticTask) -> Option<f64> {
    let tables = [(PAPER2_SYNTHETIC_SWEEP, &PAPER2_SYNTHETIC_ACCURACY), (PAPER2_SYNTHETIC_HALF_SWEEP, &PAPER2_SYNTHETIC_HALF_ACCURACY)];
    let (_, table) = tables.into_iter().find(|(sweep, _)| sweep.is(settings))?;
    synthetic_cell(table, name, task)
}

/// Which of [`PAPER2_PPL`]'s comparisons a model's attention is, against a standard one with a
/// key/value head per head; `None` for the standard model itself and the variants the paper did
/// not train on text.
pub fn paper2_name(attention: &AttentionConfig, n_head: usize) -> Option<&'static str> {
    let shared_heads = attention.shared_kv_heads(n_head).map(|k| if k == 1 { "MQA" } else { "GQA" });
    match (attention.variant, shared_heads) {
        (AttentionVariant::Standard, heads) => heads,
        (AttentionVariant::SharedKeyValue, None) => Some("Q-K=V"),
        (AttentionVariant::SharedKeyValue, Some("MQA")) => Some("Q-K=V + MQA"),
        (AttentionVariant::SharedKeyValue, Some(_)) => Some("Q-K=V + GQA"),
        (AttentionVariant::SharedQueryKey, None) => Some("Q=K-V"),
        (AttentionVariant::SharedAll, None) => Some("Q=K=V"),
        _ => None,
    }
}

/// Paper 2's perplexity for comparison `name` (one of [`PAPER2_PPL`]'s, as our runs name it).
pub fn paper2_ppl(name: &str) -> Option<f64> {
    PAPER2_PPL.iter().find(|(ours, _, _)| *ours == name).map(|&(_, _, ppl)| ppl)
}

/// Paper 2's change in perplexity against its standard model for comparison `name` (one of
/// [`PAPER2_PPL`]'s), with the paper's name for it: 0.031 is +3.1%.
pub fn paper2_change(name: &str) -> Option<(&'static str, f64)> {
    PAPER2_PPL.iter().find(|(ours, _, _)| *ours == name).map(|&(_, paper, ppl)| (paper, ppl / PAPER2_STANDARD_PPL - 1.0))
}

/// Paper 2's change for comparison `name` as a change in validation loss, the measure the app
/// judges text by: a loss is the log of a perplexity, so ln(ppl) / ln(standard's) − 1. The paper's
/// figures are per BPE token and ours per character, so this sets the two side by side by
/// direction and order, not size (docs/papers.md).
pub fn paper2_loss_change(name: &str) -> Option<(&'static str, f64)> {
    PAPER2_PPL.iter().find(|(ours, _, _)| *ours == name).map(|&(_, paper, ppl)| (paper, ppl.ln() / PAPER2_STANDARD_PPL.ln() - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_are_those_docs_papers_md_states() {
        let docs = include_str!("../../../docs/papers.md");
        assert!(docs.contains(&format!("| standard | {PAPER2_STANDARD_PPL} |")), "the standard model's perplexity");
        for (_, paper, ppl) in PAPER2_PPL {
            assert!(docs.contains(&format!("| {paper} | {ppl} |")), "{paper} at {ppl} is not in docs/papers.md");
        }
        assert!(docs.contains(&format!("gives {PAPER1_WIDE_MLP_LOSS} against the original's {PAPER1_STANDARD_LOSS}")));
        assert!(docs.contains(&format!("cos(W_K, W_V) = {PAPER2_KEY_VALUE_COSINE}")));
        for (name, row) in PAPER2_SYNTHETIC_ACCURACY.iter().chain(&PAPER2_SYNTHETIC_HALF_ACCURACY) {
            let cells: Vec<String> = row.iter().map(|a| format!("{a:.3}")).collect();
            assert!(docs.contains(&format!("| {name} | {} |", cells.join(" | "))), "{name}'s synthetic row is not in docs/papers.md");
        }
        assert_eq!(paper2_synthetic_accuracy("Q=K=V", SyntheticTask::Swap), Some(0.307));
        assert_eq!(paper2_synthetic_accuracy("Q=K=V", SyntheticTask::Rotate), None, "ours, not the paper's");
        for (name, accuracy) in PAPER2_MNIST_ACCURACY {
            assert!(docs.contains(&format!("| {name} | {accuracy} |")), "{name} at {accuracy} on MNIST is not in docs/papers.md");
        }
    }

    #[test]
    fn the_authors_figure_is_the_one_averaged_over_the_same_settings() {
        let half = PAPER2_SYNTHETIC_HALF_SWEEP.settings();
        assert_eq!(half.len(), 8);
        assert_eq!(PAPER2_SYNTHETIC_SWEEP.settings().len(), 36);
        assert!(half.iter().all(|s| PAPER2_SYNTHETIC_SWEEP.settings().contains(s)), "the half is part of the whole");
        let mut shuffled: Vec<SyntheticSetting> = half.iter().rev().chain(&half).copied().collect();
        shuffled.swap(0, 5);
        assert_eq!(paper2_synthetic_accuracy_over(&shuffled, "Q=K=V", SyntheticTask::Swap), Some(0.259));
        let whole = PAPER2_SYNTHETIC_SWEEP.settings();
        assert_eq!(paper2_synthetic_accuracy_over(&whole, "Q=K=V", SyntheticTask::Swap), Some(0.307));
        assert_eq!(paper2_synthetic_accuracy_over(&half[1..], "Q=K=V", SyntheticTask::Swap), None, "a sweep they did not average");
        assert_eq!(paper2_synthetic_accuracy_over(&half, "(Q=K-V)+rel", SyntheticTask::Swap), None, "ours, not theirs");
    }

    #[test]
    fn a_model_is_the_comparison_its_projections_and_heads_make() {
        let attention = |variant, kv_heads| AttentionConfig { kv_heads, ..AttentionConfig::new(variant) };
        assert_eq!(paper2_name(&attention(AttentionVariant::Standard, None), 4), None, "the reference");
        assert_eq!(paper2_name(&attention(AttentionVariant::Standard, Some(2)), 4), Some("GQA"));
        assert_eq!(paper2_name(&attention(AttentionVariant::Standard, Some(1)), 4), Some("MQA"));
        assert_eq!(paper2_name(&attention(AttentionVariant::SharedKeyValue, Some(1)), 4), Some("Q-K=V + MQA"));
        assert_eq!(paper2_name(&attention(AttentionVariant::SharedQueryKeyAsym, None), 4), None, "not trained on text there");
        let (paper, change) = paper2_change("Q=K=V").unwrap();
        assert_eq!(paper, "Q=K=V");
        assert!((change - 0.2544).abs() < 1e-3, "{change}");
        // ln 5.27 / ln 5.11 − 1: the same comparison in validation loss.
        let (_, loss) = paper2_loss_change("Q-K=V").unwrap();
        assert!((loss - 0.0189).abs() < 1e-4, "{loss}");
    }
}
