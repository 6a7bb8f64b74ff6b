//! Trivial classifiers on the same split as a vision study's transformers: what a reader needs
//! to tell whether a ViT's accuracy says anything. Both are deterministic and train on the
//! training split only.
//!
//! - nearest neighbour: each held-out image takes the label of the closest training image
//!   (Euclidean distance over the pixels; the first of equally close ones);
//! - a linear classifier: multinomial logistic regression on the pixels, fitted by full-batch
//!   gradient descent with a small L2 penalty.

use crate::image_split::ImageSplit;

/// Each baseline's share of a held-out split classified right, trained on `train`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baselines {
    pub nearest_neighbour: f64,
    pub linear: f64,
}

impl Baselines {
    /// The baselines trained on `train` once, each scored on every split of `held_out`, in order.
    pub fn of(train: &ImageSplit, held_out: &[&ImageSplit], classes: usize) -> Vec<Self> {
        let linear = LinearClassifier::fit(train, classes);
        held_out.iter().map(|split| Self { nearest_neighbour: nearest_neighbour(train, split), linear: linear.accuracy(split) }).collect()
    }
}

fn accuracy(held_out: &ImageSplit, predict: impl Fn(&[f32]) -> usize) -> f64 {
    let right = (0..held_out.len()).filter(|&i| predict(held_out.image(i)) == usize::from(held_out.label(i))).count();
    right as f64 / held_out.len().max(1) as f64
}

/// 1-nearest-neighbour accuracy.
pub fn nearest_neighbour(train: &ImageSplit, held_out: &ImageSplit) -> f64 {
    if train.is_empty() {
        return 0.0;
    }
    let distance = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum::<f64>();
    accuracy(held_out, |image| {
        let nearest = (0..train.len())
            .map(|j| (distance(image, train.image(j)), j))
            .fold((f64::INFINITY, 0), |best, d| if d.0 < best.0 { d } else { best });
        usize::from(train.label(nearest.1))
    })
}

/// Gradient descent steps, learning rate and L2 penalty of the linear classifier. They were chosen
/// when the embedded digits had two splits, on the 299 held out then, which are today's test
/// images: a choice made on the test set, which can only favour the baseline. Trained on 1,498
/// images, at rate 0.5 the fit was still climbing (93.98% after 400 steps, 94.65% after 1,500,
/// 95.32% after 4,000); at rate 4, 2,000 steps gave 95.99% (rate 8, 3,000 steps: 95.65%), about
/// where a logistic regression is known to land on this set.
const LINEAR_STEPS: usize = 2000;
const LINEAR_RATE: f64 = 4.0;
const LINEAR_L2: f64 = 1e-4;

/// A multinomial logistic regression on the pixels: a weight per pixel and class, and a bias per
/// class.
pub struct LinearClassifier {
    /// [classes][pixels + 1]: the last column is the bias.
    weights: Vec<Vec<f64>>,
}

impl LinearClassifier {
    /// Fitted on `train`, its weights (and biases) from zero.
    pub fn fit(train: &ImageSplit, classes: usize) -> Self {
        let n = train.len();
        let inputs = if n == 0 { 0 } else { train.image(0).len() };
        let mut classifier = Self { weights: vec![vec![0.0f64; inputs + 1]; classes] };
        if n > 0 {
            classifier.descend(train);
        }
        classifier
    }

    /// Each class's score: its bias (the last weight) plus its weights over the pixels. One fitted
    /// on no images scores every class 0.
    fn scores(&self, image: &[f32]) -> Vec<f64> {
        self.weights
            .iter()
            .map(|w| {
                let (bias, pixels) = w.split_last().map_or((0.0, &[][..]), |(bias, pixels)| (*bias, pixels));
                bias + image.iter().zip(pixels).map(|(&x, w)| f64::from(x) * w).sum::<f64>()
            })
            .collect()
    }

    /// The share of `held_out` it classifies right.
    pub fn accuracy(&self, held_out: &ImageSplit) -> f64 {
        accuracy(held_out, |image| {
            let s = self.scores(image);
            (0..s.len()).fold(0, |best, class| if s[class] > s[best] { class } else { best })
        })
    }

    fn descend(&mut self, train: &ImageSplit) {
        let (n, classes, inputs) = (train.len(), self.weights.len(), train.image(0).len());
        for _ in 0..LINEAR_STEPS {
            let mut gradient = vec![vec![0.0f64; inputs + 1]; classes];
            for i in 0..n {
                let image = train.image(i);
                let s = self.scores(image);
                let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - top).exp()).collect();
                let total: f64 = e.iter().sum();
                for (class, g) in gradient.iter_mut().enumerate() {
                    let error = e[class] / total - f64::from(u8::from(usize::from(train.label(i)) == class));
                    image.iter().zip(g.iter_mut()).for_each(|(&x, g)| *g += error * f64::from(x));
                    g[inputs] += error;
                }
            }
            for (w, g) in self.weights.iter_mut().zip(&gradient) {
                for (k, (w, g)) in w.iter_mut().zip(g).enumerate() {
                    let penalty = if k < inputs { LINEAR_L2 * *w } else { 0.0 };
                    *w -= LINEAR_RATE * (g / n as f64 + penalty);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::{ImageData, ImageSource};

    #[test]
    fn a_tiny_set_is_classified_as_its_neighbours_say() {
        // Two classes on a line: 0 near 0, 1 near 1.
        let train = ImageSplit::new(vec![0.0, 0.1, 0.9, 1.0], vec![0, 0, 1, 1]);
        let held_out = ImageSplit::new(vec![0.05, 0.95, 0.4], vec![0, 1, 1]);
        assert!((nearest_neighbour(&train, &held_out) - 2.0 / 3.0).abs() < 1e-12, "0.4 is nearer 0.1");
        assert!((LinearClassifier::fit(&train, 2).accuracy(&held_out) - 2.0 / 3.0).abs() < 1e-12);
        // Fitted on nothing, it answers class 0 everywhere rather than failing.
        let empty = ImageSplit::new(vec![], vec![]);
        assert!((LinearClassifier::fit(&empty, 2).accuracy(&held_out) - 1.0 / 3.0).abs() < 1e-12);
    }

    /// The embedded digits' figures, which the vision report quotes (docs/vision.md), trained on
    /// the 1,198 training images: nearest neighbour and the linear classifier on the validation
    /// and the test images.
    #[test]
    fn the_digits_baselines_are_high() {
        let digits = ImageData::load(&ImageSource::Digits).unwrap();
        let test = digits.test.as_ref().unwrap();
        let [on_val, on_test] = Baselines::of(&digits.train, &[&digits.val, test], digits.classes)[..] else { panic!("two splits") };
        assert!((on_val.nearest_neighbour - 293.0 / 300.0).abs() < 1e-9, "{on_val:?}");
        assert!((on_test.nearest_neighbour - 293.0 / 299.0).abs() < 1e-9, "{on_test:?}");
        for linear in [on_val.linear, on_test.linear] {
            assert!((0.95..0.97).contains(&linear), "{on_val:?} {on_test:?}");
        }
    }
}
