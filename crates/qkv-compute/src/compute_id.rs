//! Which compute, as the protocol, the saved compute choice and the screens name it: the
//! backend, the adapter it runs on, and how many workers share its runs. Its label for people is
//! made from these ([`fmt::Display`]), never kept on its own.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::Backend;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ComputeId {
    pub backend: Backend,
    /// The adapter as the shell names it ("NVIDIA GeForce RTX 3060 (Vulkan)", "WebGPU (own
    /// device; the page draws with WebGL)"); `None` for the CPU, and for a backend's first GPU
    /// found without a name.
    pub adapter: Option<String>,
    /// The Web Workers its runs train in: 0 where they train in the process that shows them.
    pub workers: usize,
}

impl ComputeId {
    /// The CPU, through flex.
    pub fn cpu() -> Self {
        Self { backend: Backend::Flex, adapter: None, workers: 0 }
    }

    /// `backend` on the adapter named `adapter`.
    pub fn on(backend: Backend, adapter: impl Into<String>) -> Self {
        Self { backend, adapter: Some(adapter.into()), workers: 0 }
    }

    /// `backend`'s first device, unnamed.
    pub fn first(backend: Backend) -> Self {
        Self { backend, adapter: None, workers: 0 }
    }

    /// The same compute, its runs trained in `workers` Web Workers.
    pub fn in_workers(self, workers: usize) -> Self {
        Self { workers, ..self }
    }
}

/// "flex (CPU)", "flex (CPU, in a Web Worker)", "flex (CPU, in 3 Web Workers)", "wgpu: NVIDIA …
/// (Vulkan)", "cuda: first GPU".
impl fmt::Display for ComputeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let workers = match self.workers {
            0 => String::new(),
            1 => ", in a Web Worker".to_string(),
            n => format!(", in {n} Web Workers"),
        };
        match (&self.adapter, self.backend) {
            (None, Backend::Flex) => write!(f, "flex (CPU{workers})"),
            (None, backend) => write!(f, "{backend}: first GPU{workers}"),
            (Some(adapter), backend) => write!(f, "{backend}: {adapter}{workers}"),
        }
    }
}

/// A label that does not name a compute: what `Display` writes is all that reads back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' does not name a compute: it reads as flex (CPU) or BACKEND: ADAPTER")]
pub struct NotACompute(pub String);

/// Reads what `Display` writes, which is also how versions of QKV Lab before the compute had a
/// type saved it (a page's remembered compute choice names its computes by these labels).
impl FromStr for ComputeId {
    type Err = NotACompute;

    fn from_str(label: &str) -> Result<Self, Self::Err> {
        let wrong = || NotACompute(label.to_string());
        // The workers' part, inside flex's parentheses or after a GPU's name.
        let (flex_inside, rest) = match label.strip_prefix("flex (CPU").and_then(|l| l.strip_suffix(')')) {
            Some(inside) => (true, inside),
            None => (false, label),
        };
        let (head, workers) = if let Some(head) = rest.strip_suffix(", in a Web Worker") {
            (head, 1)
        } else if let Some((head, count)) = rest.strip_suffix(" Web Workers").and_then(|l| l.rsplit_once(", in ")) {
            (head, count.parse().map_err(|_| wrong())?)
        } else {
            (rest, 0)
        };
        if flex_inside {
            return if head.is_empty() { Ok(Self::cpu().in_workers(workers)) } else { Err(wrong()) };
        }
        let (backend, adapter) = head.split_once(": ").ok_or_else(wrong)?;
        let backend = Backend::from_name(backend).ok_or_else(wrong)?;
        let adapter = (adapter != "first GPU").then(|| adapter.to_string());
        Ok(Self { backend, adapter, workers })
    }
}

/// The type's own form, or a label (what earlier versions saved), read back by [`FromStr`].
impl<'de> Deserialize<'de> for ComputeId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Saved {
            Typed {
                backend: Backend,
                #[serde(default)]
                adapter: Option<String>,
                #[serde(default)]
                workers: usize,
            },
            Label(String),
        }
        match Saved::deserialize(deserializer)? {
            Saved::Typed { backend, adapter, workers } => Ok(Self { backend, adapter, workers }),
            Saved::Label(label) => label.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_made_from_the_identity_and_read_back() {
        let cases = [
            (ComputeId::cpu(), "flex (CPU)"),
            (ComputeId::cpu().in_workers(1), "flex (CPU, in a Web Worker)"),
            (ComputeId::cpu().in_workers(3), "flex (CPU, in 3 Web Workers)"),
            (ComputeId::on(Backend::Wgpu, "NVIDIA GeForce RTX 3060 (Vulkan)"), "wgpu: NVIDIA GeForce RTX 3060 (Vulkan)"),
            (
                ComputeId::on(Backend::Wgpu, "WebGPU (own device; the page draws with WebGL)"),
                "wgpu: WebGPU (own device; the page draws with WebGL)",
            ),
            (ComputeId::first(Backend::Cuda), "cuda: first GPU"),
            (ComputeId::on(Backend::Wgpu, "A").in_workers(2), "wgpu: A, in 2 Web Workers"),
        ];
        for (id, label) in cases {
            assert_eq!(id.to_string(), label);
            assert_eq!(label.parse::<ComputeId>().unwrap(), id, "{label}");
        }
        assert!("a toaster".parse::<ComputeId>().unwrap_err().to_string().contains("'a toaster'"));
        assert!("tpu: v5".parse::<ComputeId>().is_err(), "no such backend");
        assert!("flex (GPU)".parse::<ComputeId>().is_err());
    }

    #[test]
    fn an_identity_reads_back_from_its_own_form_and_from_an_older_label() {
        let id = ComputeId::on(Backend::Wgpu, "WebGPU");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, r#"{"backend":"wgpu","adapter":"WebGPU","workers":0}"#);
        assert_eq!(serde_json::from_str::<ComputeId>(&json).unwrap(), id);
        assert_eq!(serde_json::from_str::<ComputeId>(r#""wgpu: WebGPU""#).unwrap(), id, "as saved before it had a type");
        assert_eq!(serde_json::from_str::<ComputeId>(r#"{"backend":"flex"}"#).unwrap(), ComputeId::cpu());
        let bytes = rmp_serde::to_vec_named(&id).unwrap();
        assert_eq!(rmp_serde::from_slice::<ComputeId>(&bytes).unwrap(), id, "across a worker's wire");
    }
}
