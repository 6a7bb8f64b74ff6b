//! `qkv params` as a user runs it: the papers' totals, the JSON interface, the errors.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::process::{Command, Output};

use serde_json::Value;

fn qkv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_qkv")).args(args).output().expect("qkv runs")
}

fn json(args: &[&str]) -> Value {
    let output = qkv(args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("valid JSON")
}

fn millions(row: &Value) -> f64 {
    row["total_params"].as_u64().unwrap() as f64 / 1e6
}

#[test]
fn paper_1_totals_are_124m_and_117m() {
    let standard = json(&["params", "--preset", "gpt2-small", "--json"]);
    let identity = json(&["params", "--preset", "gpt2-small", "--variant", "Q=I", "--json"]);
    assert_eq!(millions(&standard).round(), 124.0);
    assert_eq!(millions(&identity).round(), 117.0);
    assert_eq!(identity["variant"], "wq-identity");
    let realloc = json(&["params", "--preset", "gpt2-small-realloc", "--json"]);
    assert_eq!(realloc["total_params"], standard["total_params"]);
}

#[test]
fn paper_2_models_are_300m_and_1_2b() {
    let m300 = json(&["params", "--preset", "paper2-300m", "--json"]);
    let b12 = json(&["params", "--preset", "paper2-1.2b", "--json"]);
    assert_eq!((millions(&m300) / 100.0).round(), 3.0);
    assert_eq!((millions(&b12) / 100.0).round(), 12.0);
}

#[test]
fn json_has_the_stable_fields() {
    let row = json(&["params", "--preset", "shakespeare-char", "--context", "100", "--dtype", "bf16", "--json"]);
    for field in [
        "preset",
        "variant",
        "kv_heads",
        "total_params",
        "embedding_params",
        "non_embedding_params",
        "attention_params",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes",
        "components",
    ] {
        assert!(row.get(field).is_some(), "missing {field}");
    }
    let per_token = row["kv_cache_bytes_per_token"].as_u64().unwrap();
    assert_eq!(row["kv_cache_bytes"].as_u64().unwrap(), per_token * 100);
    let components = row["components"].as_array().unwrap();
    let sum: u64 = components.iter().map(|c| c["params"].as_u64().unwrap()).sum();
    assert_eq!(sum, row["total_params"].as_u64().unwrap());
    assert!(components.iter().all(|c| c["name"].is_string()));
}

#[test]
fn all_variants_side_by_side_with_gqa_leaves_out_the_query_sharing_ones() {
    let rows = json(&["params", "--preset", "paper2-300m", "--variant", "all", "--kv-heads", "4", "--json"]);
    let variants: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["variant"].as_str().unwrap()).collect();
    assert_eq!(variants, ["standard", "wq-identity", "shared-kv", "standard-rel"]);
    let output = qkv(&["params", "--preset", "paper2-300m", "--variant", "all", "--kv-heads", "4"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("shared-qk left out"));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(table.contains("Δ total vs standard") && table.contains("Δ KV cache"), "{table}");
    // The reference column is standard with the same kv_heads, so Q-K=V halves it.
    assert!(table.contains("-50.00%"), "{table}");
}

#[test]
fn all_variants_table_lists_every_variant() {
    let rows = json(&["params", "--preset", "gpt2-small", "--variant", "all", "--json"]);
    assert_eq!(rows.as_array().unwrap().len(), 11);
    let output = qkv(&["params", "--preset", "gpt2-small", "--variant", "all"]);
    let table = String::from_utf8(output.stdout).unwrap();
    let names = [
        "standard",
        "wq-identity",
        "wk-identity",
        "wv-identity",
        "shared-qk",
        "shared-qk-asym",
        "shared-qk-rel",
        "shared-kv",
        "shared-qkv",
        "shared-qkv-asym",
        "standard-rel",
    ];
    for name in names.iter().chain(&["Q=K=V", "(Q=K=V)+", "(Q=K-V)+rel", "Q-K-V+rel"]) {
        assert!(table.contains(name), "{name} missing from\n{table}");
    }
}

#[test]
fn human_table_shows_components_and_totals_in_millions() {
    let output = qkv(&["params", "--preset", "gpt2-small"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("W_Q") && text.contains("MLP in") && text.contains("KV cache (f32)"), "{text}");
    assert!(text.contains("124.37"), "{text}");
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code_2() {
    let cases: [(&[&str], &str); 4] = [
        (&["params", "--preset", "classroom", "--variant", "shared-qk", "--kv-heads", "2"], "kv_heads"),
        (&["params", "--preset", "classroom", "--kv-heads", "3"], "divisor"),
        (&["params", "--preset", "classroom", "--variant", "Q=V"], "unknown attention variant"),
        (&["params", "--preset", "classroom", "--mlp-hidden", "0"], "mlp_hidden is 0"),
    ];
    for (args, expected) in cases {
        let output = qkv(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let output = qkv(&["params", "--preset", "gpt5"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown preset"));
}
