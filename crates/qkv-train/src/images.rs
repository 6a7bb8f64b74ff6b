//! Images to classify, for the vision transformer: the 8×8 handwritten digits embedded in every
//! build (so vision works offline and in the browser), with a fixed held-out split.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// 1,797 digits of 8×8 pixels (0..16) with their labels, 65 bytes each, in scikit-learn's order
/// (`scripts/build_digits.py`; licences in `assets/README.md`).
const DIGITS: &[u8] = include_bytes!("../../../assets/digits.bin");
const DIGIT_SIDE: usize = 8;
const DIGIT_MAX: f32 = 16.0;
/// Every sixth image is held out (299 of them), the rest (1,498) train: images from throughout
/// the file, so both splits hold the same mix. The file's last images are harder to tell from
/// its first ones (a nearest-neighbour classifier: 94.6% on the last 297 from the first 1,500,
/// 98.0% on this split), so a split by position would measure something else.
const DIGITS_HELD_OUT_EVERY: usize = 6;

/// A set of images the user names: `digits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageSource {
    /// The embedded 8×8 digits.
    Digits,
}

impl fmt::Display for ImageSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageSource::Digits => "digits",
        })
    }
}

/// An image's size: `height` × `width` pixels of `channels` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageShape {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl ImageShape {
    /// Values in one image.
    pub fn values(&self) -> usize {
        self.height * self.width * self.channels
    }
}

impl fmt::Display for ImageShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×{}", self.height, self.width)?;
        if self.channels > 1 {
            write!(f, "×{}", self.channels)?;
        }
        Ok(())
    }
}

/// Images with their labels, pixels in [0, 1], each image's values HWC.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSplit {
    pixels: Arc<[f32]>,
    labels: Arc<[u8]>,
}

impl ImageSplit {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Image `index`'s values.
    pub fn image(&self, index: usize) -> &[f32] {
        let values = self.pixels.len() / self.len();
        &self.pixels[index * values..(index + 1) * values]
    }

    pub fn label(&self, index: usize) -> u8 {
        self.labels[index]
    }
}

/// A labelled image set split for training and held-out evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageData {
    pub source: ImageSource,
    pub shape: ImageShape,
    /// Labels are 0..classes.
    pub classes: usize,
    pub class_names: Vec<String>,
    pub train: ImageSplit,
    pub val: ImageSplit,
}

impl ImageData {
    pub fn load(source: ImageSource) -> Self {
        match source {
            ImageSource::Digits => Self::digits(),
        }
    }

    fn digits() -> Self {
        let record = DIGIT_SIDE * DIGIT_SIDE + 1;
        let split = |held_out: bool| {
            let records = || {
                DIGITS.chunks(record).enumerate().filter(move |(i, _)| (i % DIGITS_HELD_OUT_EVERY == DIGITS_HELD_OUT_EVERY - 1) == held_out)
            };
            ImageSplit {
                pixels: records().flat_map(|(_, r)| r[..record - 1].iter().map(|&p| f32::from(p) / DIGIT_MAX)).collect(),
                labels: records().map(|(_, r)| r[record - 1]).collect(),
            }
        };
        ImageData {
            source: ImageSource::Digits,
            shape: ImageShape { height: DIGIT_SIDE, width: DIGIT_SIDE, channels: 1 },
            classes: 10,
            class_names: (0..10).map(|digit| digit.to_string()).collect(),
            train: split(false),
            val: split(true),
        }
    }

    pub fn name(&self) -> String {
        self.source.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digits_are_whole_and_held_out_apart() {
        let digits = ImageData::load(ImageSource::Digits);
        assert_eq!((digits.train.len(), digits.val.len()), (1498, 299));
        assert_eq!(digits.shape.values(), 64);
        assert_eq!(digits.train.image(0).len(), 64);
        for split in [&digits.train, &digits.val] {
            assert!(split.pixels.iter().all(|p| (0.0..=1.0).contains(p)));
            // Every class is in both splits, within a third of a tenth of it.
            for class in 0..10 {
                let count = split.labels.iter().filter(|&&l| l == class).count();
                assert!(count * 30 > split.len() * 2 && count * 30 < split.len() * 4, "class {class}: {count} of {}", split.len());
            }
        }
        // scikit-learn's first digit is a 0 with an empty border column.
        assert_eq!(digits.train.label(0), 0);
        assert_eq!(digits.train.image(0)[..8], [0.0, 0.0, 5.0 / 16.0, 13.0 / 16.0, 9.0 / 16.0, 1.0 / 16.0, 0.0, 0.0]);
    }
}
