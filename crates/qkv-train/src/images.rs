//! Images to classify, for the vision transformer: the 8×8 handwritten digits embedded in every
//! build (so vision works offline and in the browser), with fixed validation and test splits, and
//! the sets a user has on disk ([`crate::image_files`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::corpus::DataError;
use crate::image_files::{self, ImageFiles};
use crate::image_split::{ImageShape, ImageSplit};
use std::path::Path;

/// 1,797 digits of 8×8 pixels (0..16) with their labels, 65 bytes each, in scikit-learn's order
/// (`scripts/build_digits.py`; licences in `assets/README.md`).
const DIGITS: &[u8] = include_bytes!("../../../assets/digits.bin");
const DIGIT_SIDE: usize = 8;
const DIGIT_MAX: f32 = 16.0;
/// The digits are split by position modulo 6: the sixth of every six images is the test set (299
/// of them), the third validates (300), the other four train (1,198). Images from throughout the
/// file, so every split holds the same mix: the file's last images are harder to tell from its
/// first ones (a nearest-neighbour classifier: 94.6% on the last 297 from the first 1,500, 98.0%
/// on every sixth), so a split by position would measure something else. The test images are the
/// ones every earlier build held out, so figures on them stay comparable.
const DIGITS_SPLIT_EVERY: usize = 6;
const DIGITS_TEST_AT: usize = 5;
const DIGITS_VALIDATION_AT: usize = 2;

/// A set of images the user names: `digits`, `relations`, `mnist:DIR`, `fashion-mnist:DIR`,
/// `cifar10:DIR`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageSource {
    /// The embedded 8×8 digits.
    Digits,
    /// Where a bright square is from a dim one, generated ([`crate::relations`]).
    Relations,
    /// MNIST's IDX files in a folder.
    Mnist(String),
    /// Fashion-MNIST's IDX files (MNIST's format and names) in a folder.
    FashionMnist(String),
    /// CIFAR-10's binary batches in a folder.
    Cifar10(String),
}

impl ImageSource {
    /// `name:DIR` for a set on disk, or None.
    pub fn parse(text: &str) -> Option<Self> {
        let (kind, dir) = text.split_once(':')?;
        let dir = dir.to_string();
        match kind {
            "mnist" => Some(ImageSource::Mnist(dir)),
            "fashion-mnist" => Some(ImageSource::FashionMnist(dir)),
            "cifar10" => Some(ImageSource::Cifar10(dir)),
            _ => None,
        }
    }
}

impl fmt::Display for ImageSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageSource::Digits => f.write_str("digits"),
            ImageSource::Relations => f.write_str("relations"),
            ImageSource::Mnist(dir) => write!(f, "mnist:{dir}"),
            ImageSource::FashionMnist(dir) => write!(f, "fashion-mnist:{dir}"),
            ImageSource::Cifar10(dir) => write!(f, "cifar10:{dir}"),
        }
    }
}

/// A labelled image set split for training, validation (what every evaluation during training,
/// and any choice made from it, reads) and, where the set has one apart, a test split touched only
/// for a study's final figure.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageData {
    pub source: ImageSource,
    pub shape: ImageShape,
    /// Labels are 0..classes.
    pub classes: usize,
    pub class_names: Vec<String>,
    pub train: ImageSplit,
    pub val: ImageSplit,
    /// None where the set has no third split: a set on disk validates on its published test files.
    pub test: Option<ImageSplit>,
}

impl ImageData {
    pub fn load(source: &ImageSource) -> Result<Self, DataError> {
        let from_files = |files: ImageFiles, names: &[&str]| ImageData {
            source: source.clone(),
            shape: files.shape,
            classes: names.len(),
            class_names: names.iter().map(|name| name.to_string()).collect(),
            train: files.train,
            val: files.val,
            test: None,
        };
        const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        Ok(match source {
            ImageSource::Digits => Self::digits(),
            ImageSource::Relations => {
                let (train, val) = crate::relations::splits();
                from_files(ImageFiles { shape: crate::relations::shape(), train, val }, &crate::relations::CLASSES)
            }
            ImageSource::Mnist(dir) => from_files(image_files::mnist(Path::new(dir))?, &DIGITS),
            ImageSource::FashionMnist(dir) => from_files(image_files::mnist(Path::new(dir))?, &image_files::FASHION_CLASSES),
            ImageSource::Cifar10(dir) => from_files(image_files::cifar10(Path::new(dir))?, &image_files::CIFAR10_CLASSES),
        })
    }

    fn digits() -> Self {
        let record = DIGIT_SIDE * DIGIT_SIDE + 1;
        let split = |keep: fn(usize) -> bool| {
            let records = || DIGITS.chunks(record).enumerate().filter(move |(i, _)| keep(i % DIGITS_SPLIT_EVERY));
            ImageSplit::new(
                records().flat_map(|(_, r)| r[..record - 1].iter().map(|&p| f32::from(p) / DIGIT_MAX)).collect(),
                records().map(|(_, r)| r[record - 1]).collect(),
            )
        };
        ImageData {
            source: ImageSource::Digits,
            shape: ImageShape { height: DIGIT_SIDE, width: DIGIT_SIDE, channels: 1 },
            classes: 10,
            class_names: (0..10).map(|digit| digit.to_string()).collect(),
            train: split(|at| at != DIGITS_TEST_AT && at != DIGITS_VALIDATION_AT),
            val: split(|at| at == DIGITS_VALIDATION_AT),
            test: Some(split(|at| at == DIGITS_TEST_AT)),
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
    fn the_digits_are_whole_and_split_three_ways() {
        let digits = ImageData::load(&ImageSource::Digits).unwrap();
        let test = digits.test.as_ref().unwrap();
        assert_eq!((digits.train.len(), digits.val.len(), test.len()), (1198, 300, 299));
        assert_eq!(digits.shape.values(), 64);
        assert_eq!(digits.train.image(0).len(), 64);
        // No image is in two splits: the file holds no two identical records in different ones.
        let images = |split: &ImageSplit| (0..split.len()).map(|i| split.image(i).to_vec()).collect::<Vec<_>>();
        let (train, val) = (images(&digits.train), images(&digits.val));
        assert!(images(test).iter().all(|image| !train.contains(image) && !val.contains(image)));
        for split in [&digits.train, &digits.val, test] {
            assert!((0..split.len()).all(|i| split.image(i).iter().all(|p| (0.0..=1.0).contains(p))));
            // Every class is in both splits, within a third of a tenth of it.
            for class in 0..10 {
                let count = (0..split.len()).filter(|&i| split.label(i) == class).count();
                assert!(count * 30 > split.len() * 2 && count * 30 < split.len() * 4, "class {class}: {count} of {}", split.len());
            }
        }
        // scikit-learn's first digit is a 0 with an empty border column.
        assert_eq!(digits.train.label(0), 0);
        assert_eq!(digits.train.image(0)[..8], [0.0, 0.0, 5.0 / 16.0, 13.0 / 16.0, 9.0 / 16.0, 1.0 / 16.0, 0.0, 0.0]);
    }

    #[test]
    fn sets_on_disk_are_named_by_kind_and_folder() {
        for text in ["mnist:data/mnist", "fashion-mnist:/data/fashion", "cifar10:C:/cifar-10-batches-bin"] {
            assert_eq!(ImageSource::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(ImageSource::parse("cifar100:x"), None);
        assert_eq!(ImageSource::parse("digits"), None, "the embedded set has no folder");
        let error = ImageData::load(&ImageSource::Cifar10("no/such/folder".into())).unwrap_err().to_string();
        assert!(error.contains("data_batch_1.bin"), "{error}");
    }
}
