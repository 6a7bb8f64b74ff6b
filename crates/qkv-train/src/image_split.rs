//! Images as the trainer holds them: an image's size, and a split's images with their labels.
//! Every image set (embedded, generated or read from disk) is made of these.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

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
    /// Images of `pixels.len() / labels.len()` values each, with their labels.
    pub fn new(pixels: Vec<f32>, labels: Vec<u8>) -> Self {
        Self { pixels: pixels.into(), labels: labels.into() }
    }

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
