//! How the loss chart smooths a noisy training curve (and a figure exported from it, alike).

/// Exponential moving average, debiased like TensorBoard's so the curve starts at the data.
#[derive(Debug, Clone, Copy)]
pub struct Ema {
    weight: f64,
    average: f64,
    norm: f64,
}

impl Ema {
    pub fn new(weight: f64) -> Self {
        Self { weight, average: 0.0, norm: 0.0 }
    }

    /// The smoothed value once `value` is in.
    pub fn push(&mut self, value: f64) -> f64 {
        self.average = self.weight * self.average + (1.0 - self.weight) * value;
        self.norm = self.weight * self.norm + (1.0 - self.weight);
        self.average / self.norm
    }
}

/// `values` smoothed with weight `weight` on the past.
pub fn smooth(values: &[f64], weight: f64) -> Vec<f64> {
    let mut ema = Ema::new(weight);
    values.iter().map(|&v| ema.push(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_starts_at_the_data_and_follows_a_constant() {
        assert_eq!(smooth(&[4.0, 4.0, 4.0], 0.9), vec![4.0, 4.0, 4.0]);
        let s = smooth(&[2.0, 0.0], 0.5);
        assert_eq!(s[0], 2.0);
        assert!((s[1] - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(smooth(&[1.0, 3.0], 0.0), vec![1.0, 3.0]);
    }
}
