//! The list tasks of paper 2's predecessor: L random digits in, a transformed list out. Framed
//! for a decoder as `x SEP y` with the loss on `y` only, or for an encoder (as the predecessor's
//! own models are) as `x` in and `y` out at the same positions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Token of the separator between input and output lists; digits are tokens 0-9.
pub const SEP: u32 = 10;
/// Digits and the separator.
pub const VOCAB_SIZE: usize = 11;
/// Examples per split, as in the reference setup.
pub const TRAIN_EXAMPLES: usize = 50_000;
pub const VAL_EXAMPLES: usize = 1_000;
pub const TEST_EXAMPLES: usize = 10_000;
/// Draws the validation and test examples, whatever the training seed.
const HELD_OUT_SEED: u64 = 0x4E1D_0075;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyntheticTask {
    /// y = x
    Copy,
    /// y = flip(x)
    Reverse,
    /// y = x sorted ascending
    Sort,
    /// y = x[L/2:] ++ x[:L/2]
    Swap,
    /// y_i = 9 - x_i
    Sub,
    /// y = x rotated right by one: y_0 = x_{L-1}, y_i = x_{i-1}. Ours, not the papers': each
    /// position reads its left neighbour, a relation that runs one way only, so in an encoder a
    /// symmetric score (Q = K: i scores j as j scores i) cannot single it out with one head.
    Rotate,
}

impl SyntheticTask {
    pub const ALL: [SyntheticTask; 6] =
        [SyntheticTask::Copy, SyntheticTask::Reverse, SyntheticTask::Sort, SyntheticTask::Swap, SyntheticTask::Sub, SyntheticTask::Rotate];

    pub fn name(self) -> &'static str {
        match self {
            SyntheticTask::Copy => "copy",
            SyntheticTask::Reverse => "reverse",
            SyntheticTask::Sort => "sort",
            SyntheticTask::Swap => "swap",
            SyntheticTask::Sub => "sub",
            SyntheticTask::Rotate => "rotate",
        }
    }

    /// The target list for input `x`.
    pub fn target(self, x: &[u32]) -> Vec<u32> {
        match self {
            SyntheticTask::Copy => x.to_vec(),
            SyntheticTask::Reverse => x.iter().rev().copied().collect(),
            SyntheticTask::Sort => {
                let mut y = x.to_vec();
                y.sort_unstable();
                y
            }
            SyntheticTask::Swap => {
                let half = x.len() / 2;
                x[half..].iter().chain(&x[..half]).copied().collect()
            }
            SyntheticTask::Sub => x.iter().map(|d| 9 - d).collect(),
            SyntheticTask::Rotate => x.iter().rev().take(1).chain(&x[..x.len().saturating_sub(1)]).copied().collect(),
        }
    }
}

impl fmt::Display for SyntheticTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown synthetic task '{0}': use {names}", names = SyntheticTask::ALL.map(SyntheticTask::name).join(", "))]
pub struct UnknownTask(pub String);

impl FromStr for SyntheticTask {
    type Err = UnknownTask;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SyntheticTask::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| UnknownTask(s.to_string()))
    }
}

/// How a task's lists reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// `x SEP y` read left to right by a causal model, which writes y after the separator.
    #[default]
    Decoder,
    /// `x` read at once by a bidirectional model, which answers y_i at position i.
    Encoder,
}

impl Framing {
    pub fn is_decoder(&self) -> bool {
        *self == Framing::Decoder
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
    Test,
}

impl Split {
    fn stream(self) -> u64 {
        match self {
            Split::Train => 1,
            Split::Val => 2,
            Split::Test => 3,
        }
    }

    pub fn examples(self) -> usize {
        match self {
            Split::Train => TRAIN_EXAMPLES,
            Split::Val => VAL_EXAMPLES,
            Split::Test => TEST_EXAMPLES,
        }
    }
}

/// A task at list length L. Its training examples are fixed by a seed; its validation and test
/// examples are the same for every seed, so that seeds are compared on the same held-out lists.
/// Example i of a split is generated on demand, so long lists cost no memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticData {
    pub task: SyntheticTask,
    pub length: usize,
    pub seed: u64,
    #[serde(default)]
    pub framing: Framing,
}

impl SyntheticData {
    /// The input list x and its answer y of example `index` of `split`.
    pub fn lists(&self, split: Split, index: usize) -> (Vec<u32>, Vec<u32>) {
        let seed = match split {
            Split::Train => self.seed,
            Split::Val | Split::Test => HELD_OUT_SEED,
        };
        let mut rng = Rng::for_item(seed, split.stream(), index as u64);
        let x: Vec<u32> = (0..self.length).map(|_| rng.below(10) as u32).collect();
        let y = self.task.target(&x);
        (x, y)
    }

    /// The full sequence `x SEP y` of example `index` of `split`, 2L + 1 tokens (the decoder
    /// framing's).
    pub fn example(&self, split: Split, index: usize) -> Vec<u32> {
        let (mut sequence, y) = self.lists(split, index);
        sequence.push(SEP);
        sequence.extend(y);
        sequence
    }

    /// What the model reads of example `index` and the token each position is trained to
    /// predict, [`SyntheticData::time`] each: a decoder reads `x SEP y` without its last token
    /// and predicts the next; an encoder reads x and predicts y.
    pub fn input_and_targets(&self, split: Split, index: usize) -> (Vec<u32>, Vec<u32>) {
        match self.framing {
            Framing::Decoder => {
                let sequence = self.example(split, index);
                (sequence[..sequence.len() - 1].to_vec(), sequence[1..].to_vec())
            }
            Framing::Encoder => self.lists(split, index),
        }
    }

    /// Tokens the model reads per example.
    pub fn time(&self) -> usize {
        match self.framing {
            Framing::Decoder => 2 * self.length,
            Framing::Encoder => self.length,
        }
    }

    /// Positions (of the model's input) whose prediction is part of `y`.
    pub fn answer_positions(&self) -> std::ops::Range<usize> {
        match self.framing {
            Framing::Decoder => self.length..2 * self.length,
            Framing::Encoder => 0..self.length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_the_reference_definitions() {
        let x = [3, 1, 4, 1, 5, 9];
        assert_eq!(SyntheticTask::Copy.target(&x), x);
        assert_eq!(SyntheticTask::Reverse.target(&x), [9, 5, 1, 4, 1, 3]);
        assert_eq!(SyntheticTask::Sort.target(&x), [1, 1, 3, 4, 5, 9]);
        assert_eq!(SyntheticTask::Swap.target(&x), [1, 5, 9, 3, 1, 4]);
        assert_eq!(SyntheticTask::Sub.target(&x), [6, 8, 5, 8, 4, 0]);
        assert_eq!(SyntheticTask::Rotate.target(&x), [9, 3, 1, 4, 1, 5]);
    }

    #[test]
    fn examples_are_framed_and_reproducible() {
        let data = SyntheticData { task: SyntheticTask::Reverse, length: 8, seed: 3, framing: Framing::Decoder };
        let e = data.example(Split::Train, 17);
        assert_eq!(e.len(), 17);
        assert_eq!(e[8], SEP);
        assert_eq!(&e[9..], SyntheticTask::Reverse.target(&e[..8]).as_slice());
        assert_eq!(e, data.example(Split::Train, 17));
        assert_ne!(e, data.example(Split::Val, 17));
        assert!(e.iter().all(|&t| (t as usize) < VOCAB_SIZE));
    }

    #[test]
    fn the_encoder_reads_the_list_and_answers_at_the_same_positions() {
        let decoder = SyntheticData { task: SyntheticTask::Rotate, length: 5, seed: 3, framing: Framing::Decoder };
        let encoder = SyntheticData { framing: Framing::Encoder, ..decoder };
        let (x, y) = encoder.input_and_targets(Split::Val, 4);
        assert_eq!((x.len(), encoder.time(), encoder.answer_positions()), (5, 5, 0..5));
        assert_eq!(y, SyntheticTask::Rotate.target(&x));
        // The same lists as the decoder's, framed differently.
        let (input, targets) = decoder.input_and_targets(Split::Val, 4);
        assert_eq!((input.len(), decoder.answer_positions()), (decoder.time(), 5..10));
        assert_eq!((&input[..5], input[5], &targets[5..]), (&x[..], SEP, &y[..]));
    }
}
