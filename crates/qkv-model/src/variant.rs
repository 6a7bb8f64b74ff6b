//! The attention variants QKV Lab compares: which of W_Q, W_K, W_V a layer owns, and which
//! it shares. Head sharing (GQA, MQA) is orthogonal and lives in `AttentionConfig::kv_heads`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a layer turns its input into queries, keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionVariant {
    /// W_Q, W_K and W_V: the transformer as published.
    Standard,
    /// Paper 1, "Q=I": no query weight; head h's query is channels [h·d_k, (h+1)·d_k) of the
    /// attention input.
    #[serde(rename = "wq-identity")]
    QueryIdentity,
    /// Paper 1's ablation the other way round, "K=I": no key weight; head h's key is channels
    /// [h·d_k, (h+1)·d_k) of the attention input.
    #[serde(rename = "wk-identity")]
    KeyIdentity,
    /// "V=I": no value weight; head h's value is channels [h·d_k, (h+1)·d_k) of the input.
    #[serde(rename = "wv-identity")]
    ValueIdentity,
    /// Paper 2, "Q=K-V": one projection gives both query and key, so the logits are symmetric.
    #[serde(rename = "shared-qk")]
    SharedQueryKey,
    /// Paper 2, "(Q=K-V)+": as `SharedQueryKey`, plus a learned positional term on the logits
    /// that breaks their symmetry.
    #[serde(rename = "shared-qk-asym")]
    SharedQueryKeyAsym,
    /// Q=K-V plus a learned bias on each head's logits for the distance i − j between query and
    /// key: a term of the pair, which (Q=K-V)+'s separable one is not. Ours, not the papers'.
    #[serde(rename = "shared-qk-rel")]
    SharedQueryKeyRel,
    /// Paper 2, "Q-K=V": key and value share one projection, so only one tensor is cached.
    #[serde(rename = "shared-kv")]
    SharedKeyValue,
    /// Paper 2, "Q=K=V": one projection for all three.
    #[serde(rename = "shared-qkv")]
    SharedAll,
    /// Paper 2, "(Q=K=V)+": as `SharedAll`, plus (Q=K-V)+'s learned positional term on the
    /// logits.
    #[serde(rename = "shared-qkv-asym")]
    SharedAllAsym,
    /// The standard layer plus (Q=K-V)+rel's learned bias on the distance i − j: the control
    /// that tells what the bias adds from what sharing W_Q and W_K costs. Ours, not the papers'.
    #[serde(rename = "standard-rel")]
    StandardRel,
}

/// One learned projection of the attention input, named by the roles it plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Projection {
    Query,
    Key,
    Value,
    QueryKey,
    KeyValue,
    QueryKeyValue,
}

impl Projection {
    /// The name used in parameter reports.
    pub fn name(self) -> &'static str {
        match self {
            Projection::Query => "W_Q",
            Projection::Key => "W_K",
            Projection::Value => "W_V",
            Projection::QueryKey => "W_QK",
            Projection::KeyValue => "W_KV",
            Projection::QueryKeyValue => "W_QKV",
        }
    }

    /// Produces keys or values, whose heads GQA/MQA share; a projection that also produces
    /// queries keeps all n_head heads.
    pub fn serves_kv_heads_only(self) -> bool {
        matches!(self, Projection::Key | Projection::Value | Projection::KeyValue)
    }
}

impl AttentionVariant {
    /// The projections a layer of this variant owns. The model builds exactly these and the
    /// accounting counts exactly these.
    pub fn projections(self) -> &'static [Projection] {
        use Projection::*;
        match self {
            AttentionVariant::Standard | AttentionVariant::StandardRel => &[Query, Key, Value],
            AttentionVariant::QueryIdentity => &[Key, Value],
            AttentionVariant::KeyIdentity => &[Query, Value],
            AttentionVariant::ValueIdentity => &[Query, Key],
            AttentionVariant::SharedQueryKey | AttentionVariant::SharedQueryKeyAsym | AttentionVariant::SharedQueryKeyRel => {
                &[QueryKey, Value]
            }
            AttentionVariant::SharedKeyValue => &[Query, KeyValue],
            AttentionVariant::SharedAll | AttentionVariant::SharedAllAsym => &[QueryKeyValue],
        }
    }

    pub const ALL: [AttentionVariant; 11] = [
        AttentionVariant::Standard,
        AttentionVariant::QueryIdentity,
        AttentionVariant::KeyIdentity,
        AttentionVariant::ValueIdentity,
        AttentionVariant::SharedQueryKey,
        AttentionVariant::SharedQueryKeyAsym,
        AttentionVariant::SharedQueryKeyRel,
        AttentionVariant::SharedKeyValue,
        AttentionVariant::SharedAll,
        AttentionVariant::SharedAllAsym,
        AttentionVariant::StandardRel,
    ];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            AttentionVariant::Standard => "standard",
            AttentionVariant::QueryIdentity => "wq-identity",
            AttentionVariant::KeyIdentity => "wk-identity",
            AttentionVariant::ValueIdentity => "wv-identity",
            AttentionVariant::SharedQueryKey => "shared-qk",
            AttentionVariant::SharedQueryKeyAsym => "shared-qk-asym",
            AttentionVariant::SharedQueryKeyRel => "shared-qk-rel",
            AttentionVariant::SharedKeyValue => "shared-kv",
            AttentionVariant::SharedAll => "shared-qkv",
            AttentionVariant::SharedAllAsym => "shared-qkv-asym",
            AttentionVariant::StandardRel => "standard-rel",
        }
    }

    /// The papers' notation.
    pub fn notation(self) -> &'static str {
        match self {
            AttentionVariant::Standard => "Q-K-V",
            AttentionVariant::QueryIdentity => "Q=I",
            AttentionVariant::KeyIdentity => "K=I",
            AttentionVariant::ValueIdentity => "V=I",
            AttentionVariant::SharedQueryKey => "Q=K-V",
            AttentionVariant::SharedQueryKeyAsym => "(Q=K-V)+",
            AttentionVariant::SharedQueryKeyRel => "(Q=K-V)+rel",
            AttentionVariant::SharedKeyValue => "Q-K=V",
            AttentionVariant::SharedAll => "Q=K=V",
            AttentionVariant::SharedAllAsym => "(Q=K=V)+",
            AttentionVariant::StandardRel => "Q-K-V+rel",
        }
    }

    /// The query is computed from the key projection, so queries and keys must have the same
    /// number of heads: such variants cannot use GQA or MQA.
    pub fn query_shares_key(self) -> bool {
        matches!(
            self,
            AttentionVariant::SharedQueryKey
                | AttentionVariant::SharedQueryKeyAsym
                | AttentionVariant::SharedQueryKeyRel
                | AttentionVariant::SharedAll
                | AttentionVariant::SharedAllAsym
        )
    }

    /// Adds a learned bias per head on the distance i − j to the logits (`RelativeBias`).
    pub fn has_relative_bias(self) -> bool {
        matches!(self, AttentionVariant::SharedQueryKeyRel | AttentionVariant::StandardRel)
    }

    /// Adds paper 2's "+" term to the logits: a learned gain and a bias on the query and key
    /// positions (`AsymmetricLogits`), which lets a symmetric score prefer some keys.
    pub fn has_positional_term(self) -> bool {
        matches!(self, AttentionVariant::SharedQueryKeyAsym | AttentionVariant::SharedAllAsym)
    }

    /// Why this variant's keys and values must have all n_head heads (no GQA or MQA), if they must.
    pub fn needs_every_kv_head(self) -> Option<&'static str> {
        if self.query_shares_key() {
            Some("computes queries with the key projection")
        } else if matches!(self, AttentionVariant::KeyIdentity | AttentionVariant::ValueIdentity) {
            Some("reads its keys or values from the input itself, which has n_head heads' channels")
        } else {
            None
        }
    }

    /// One of W_Q, W_K, W_V is the identity: paper 1's variant and its two ablations.
    pub fn has_identity_projection(self) -> bool {
        matches!(self, AttentionVariant::QueryIdentity | AttentionVariant::KeyIdentity | AttentionVariant::ValueIdentity)
    }

    /// Keys and values are one tensor, so the KV cache holds one tensor per layer, not two.
    pub fn key_is_value(self) -> bool {
        matches!(self, AttentionVariant::SharedKeyValue | AttentionVariant::SharedAll | AttentionVariant::SharedAllAsym)
    }

    /// Tensors the KV cache keeps per layer and token: 2 (K and V), or 1 when K = V.
    pub fn cached_tensors(self) -> usize {
        if self.key_is_value() { 1 } else { 2 }
    }

    /// Paper 1 gives the identity query a halved scale, 1/(2·√d_k), because the query is not
    /// shrunk by a learned matrix and the logits start larger. An identity key makes the logits
    /// larger in the same way, so it gets the same; everything else uses 1/√d_k.
    pub fn default_scale(self, d_k: usize) -> f64 {
        let standard = 1.0 / (d_k as f64).sqrt();
        match self {
            AttentionVariant::QueryIdentity | AttentionVariant::KeyIdentity => standard / 2.0,
            _ => standard,
        }
    }
}

impl fmt::Display for AttentionVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown variant name, with the accepted ones listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown attention variant '{0}': use one of standard, wq-identity, wk-identity, wv-identity, \
     shared-qk, shared-qk-asym, shared-qk-rel, shared-kv, shared-qkv, shared-qkv-asym, standard-rel (or \
     the papers' Q=I, K=I, V=I, Q=K-V, (Q=K-V)+, Q-K=V, Q=K=V, (Q=K=V)+, and our (Q=K-V)+rel, Q-K-V+rel)"
)]
pub struct UnknownVariant(pub String);

impl FromStr for AttentionVariant {
    type Err = UnknownVariant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        AttentionVariant::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(wanted) || v.notation().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| UnknownVariant(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paper_notations_parse_to_the_same_variant() {
        for v in AttentionVariant::ALL {
            assert_eq!(v.name().parse::<AttentionVariant>().unwrap(), v);
            assert_eq!(v.notation().parse::<AttentionVariant>().unwrap(), v);
        }
        assert_eq!("q=i".parse::<AttentionVariant>().unwrap(), AttentionVariant::QueryIdentity);
    }

    #[test]
    fn unknown_name_lists_the_accepted_ones() {
        let err = "Q=V".parse::<AttentionVariant>().unwrap_err().to_string();
        assert!(err.contains("'Q=V'") && err.contains("shared-kv"), "{err}");
    }

    #[test]
    fn serde_uses_the_cli_names() {
        for v in AttentionVariant::ALL {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.name()));
        }
    }

    #[test]
    fn identity_scale_is_half_the_standard_scale() {
        assert_eq!(AttentionVariant::QueryIdentity.default_scale(64), 1.0 / 16.0);
        assert_eq!(AttentionVariant::Standard.default_scale(64), 1.0 / 8.0);
        assert_eq!(AttentionVariant::KeyIdentity.default_scale(64), 1.0 / 16.0);
        assert_eq!(AttentionVariant::ValueIdentity.default_scale(64), 1.0 / 8.0);
    }
}
