//! A split's token ids: in memory (a text tokenised here) or mapped from one of nanoGPT's token
//! files, read where a batch needs them.
//!
//! nanoGPT's `prepare.py` scripts write each split as a flat file of little-endian `uint16` token
//! ids, `train.bin` and `val.bin` side by side, and train from them memory-mapped: OpenWebText's
//! is 17 GB, more than a laptop holds, and a batch reads only its windows of it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::corpus::DataError;

/// Token ids, by position.
#[derive(Clone)]
pub enum Tokens {
    InMemory(Vec<u32>),
    /// A token file's bytes, two per id.
    Mapped(Arc<Mmap>),
}

impl Tokens {
    /// Maps a token file: non-empty, an even number of bytes.
    pub fn map_file(path: &Path) -> Result<Self, DataError> {
        let name = path.display().to_string();
        let io = |e: std::io::Error| DataError::Io { name: name.clone(), source: Arc::new(e) };
        let file = std::fs::File::open(path).map_err(io)?;
        if file.metadata().map_err(io)?.len() == 0 {
            return Err(DataError::Empty { name });
        }
        #[allow(unsafe_code)] // the one unsafe call outside the kernel and allocator crates
        // SAFETY: the map is read-only and lives as long as these tokens. Like nanoGPT's
        // np.memmap it assumes no other program rewrites the file while training reads it; one
        // that does changes the ids read, never memory safety of anything but those reads.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        match map.len() {
            bytes if bytes % 2 == 1 => Err(DataError::OddTokenFile { name, bytes }),
            _ => Ok(Tokens::Mapped(Arc::new(map))),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Tokens::InMemory(ids) => ids.len(),
            Tokens::Mapped(bytes) => bytes.len() / 2,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id at `index` (panics past the end, as a slice does).
    pub fn get(&self, index: usize) -> u32 {
        match self {
            Tokens::InMemory(ids) => ids[index],
            Tokens::Mapped(bytes) => u16::from_le_bytes([bytes[2 * index], bytes[2 * index + 1]]) as u32,
        }
    }

    /// The ids from `start` on, in order.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = u32> + '_ {
        (start..self.len()).map(|index| self.get(index))
    }

    /// The largest id, or `None` when there are none: one pass over every token.
    pub fn max_id(&self) -> Option<u32> {
        match self {
            Tokens::InMemory(ids) => ids.iter().copied().max(),
            Tokens::Mapped(bytes) => bytes.chunks_exact(2).map(|pair| u16::from_le_bytes([pair[0], pair[1]])).max().map(u32::from),
        }
    }
}

impl From<Vec<u32>> for Tokens {
    fn from(ids: Vec<u32>) -> Self {
        Tokens::InMemory(ids)
    }
}

/// The count only: a split may hold billions of tokens.
impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Tokens::InMemory(_) => "InMemory",
            Tokens::Mapped(_) => "Mapped",
        };
        f.debug_struct(kind).field("len", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_reads_as_little_endian_uint16_and_bad_ones_are_named() {
        let folder = std::env::temp_dir().join(format!("qkv-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let ids: Vec<u16> = vec![0, 1, 255, 256, 50256, 65535];
        let path = folder.join("train.bin");
        std::fs::write(&path, ids.iter().flat_map(|id| id.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let tokens = Tokens::map_file(&path).unwrap();
        assert_eq!(tokens.len(), ids.len());
        assert_eq!(tokens.iter_from(0).collect::<Vec<u32>>(), ids.iter().map(|&id| id as u32).collect::<Vec<u32>>());
        assert_eq!(tokens.max_id(), Some(65535));
        assert_eq!(tokens.iter_from(4).collect::<Vec<u32>>(), [50256, 65535]);

        std::fs::write(&path, [1u8, 2, 3]).unwrap();
        assert!(Tokens::map_file(&path).unwrap_err().to_string().contains("odd number"));
        std::fs::write(&path, []).unwrap();
        assert!(matches!(Tokens::map_file(&path), Err(DataError::Empty { .. })));
        assert!(Tokens::map_file(&folder.join("missing.bin")).is_err());
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
