//! `qkv params`: the accounting of `qkv_model::ParamReport`, as a table or as JSON.

use clap::Args;
use serde::Serialize;

use crate::Failure;
use qkv_model::accounting::{component_rank, kv_cache_bytes_per_token};
use qkv_model::{AttentionVariant, CacheDType, Component, ModelConfig, ParamReport, Preset};

#[derive(Args, Debug)]
pub struct ParamsArgs {
    /// Architecture preset, e.g. gpt2-small, shakespeare-char or vision-digits (a name it does
    /// not know is answered with every one it does).
    #[arg(long)]
    preset: Preset,
    /// Attention variant, or `all` for every variant side by side [default: the preset's own].
    #[arg(long)]
    variant: Option<String>,
    /// Key/value heads: n_head for MHA, a divisor for GQA, 1 for MQA.
    #[arg(long)]
    kv_heads: Option<usize>,
    /// Width of the MLP's hidden layer.
    #[arg(long)]
    mlp_hidden: Option<usize>,
    /// Context length for the KV-cache size [default: the preset's block_size].
    #[arg(long)]
    context: Option<usize>,
    /// Element type of the KV cache.
    #[arg(long, default_value = "f32")]
    dtype: CacheDType,
    /// Print JSON: one object, or an array with --variant all.
    #[arg(long)]
    json: bool,
}

/// A model's exact counts, as `qkv params` and `qkv inspect` print them; the field names are a
/// stable interface for scripts.
#[derive(Debug, Serialize)]
pub(crate) struct Counts {
    pub(crate) variant: AttentionVariant,
    pub(crate) notation: &'static str,
    pub(crate) kv_heads: usize,
    pub(crate) total_params: usize,
    pub(crate) embedding_params: usize,
    pub(crate) non_embedding_params: usize,
    pub(crate) attention_params: usize,
    /// Keys and values per token of context, every layer, in the cache's element type.
    pub(crate) kv_cache_bytes_per_token: usize,
    pub(crate) components: Vec<Component>,
}

impl Counts {
    pub(crate) fn of(config: &ModelConfig, dtype: CacheDType) -> Self {
        let report = ParamReport::new(config);
        Self {
            variant: config.attention.variant,
            notation: config.attention.variant.notation(),
            kv_heads: config.kv_heads(),
            total_params: report.total_params,
            embedding_params: report.embedding_params,
            non_embedding_params: report.non_embedding_params,
            attention_params: report.attention_params,
            kv_cache_bytes_per_token: kv_cache_bytes_per_token(config, dtype),
            components: report.components,
        }
    }
}

/// One model's accounting; the field names are a stable interface for scripts.
#[derive(Debug, Serialize)]
struct ParamsRow {
    preset: String,
    #[serde(flatten)]
    counts: Counts,
    kv_cache_bytes: usize,
    context: usize,
    dtype: CacheDType,
    #[serde(skip)]
    config: ModelConfig,
}

impl ParamsRow {
    fn new(preset: Preset, config: ModelConfig, context: usize, dtype: CacheDType) -> Self {
        let counts = Counts::of(&config, dtype);
        Self {
            preset: preset.name().to_string(),
            kv_cache_bytes: counts.kv_cache_bytes_per_token * context,
            counts,
            context,
            dtype,
            config,
        }
    }

    fn params_of(&self, component: &str) -> Option<usize> {
        self.counts.components.iter().find(|c| c.name == component).map(|c| c.params)
    }
}

pub fn run(args: &ParamsArgs) -> Result<(), Failure> {
    let mut base = args.preset.config();
    if let Some(mlp_hidden) = args.mlp_hidden {
        base.mlp_hidden = mlp_hidden;
    }
    if let Some(kv_heads) = args.kv_heads {
        base.attention.kv_heads = Some(kv_heads);
    }
    let context = args.context.unwrap_or(base.block_size);
    if context == 0 {
        return Err(crate::usage("--context 0: give the number of tokens the KV cache holds (at least 1)"));
    }

    let all = args.variant.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("all"));
    if all {
        let mut rows = Vec::new();
        for variant in AttentionVariant::ALL {
            let config = base.clone().with_variant(variant);
            match config.validate() {
                Ok(()) => rows.push(ParamsRow::new(args.preset, config, context, args.dtype)),
                // One variant that cannot take these settings should not hide the others.
                Err(err) => eprintln!("note: {variant} left out: {err}"),
            }
        }
        if rows.is_empty() {
            return Err(crate::usage("no variant accepts these settings"));
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", side_by_side(&rows));
        }
    } else {
        let config = match &args.variant {
            Some(name) => base.with_variant(name.parse().map_err(|e| crate::usage(format!("--variant: {e}")))?),
            None => base,
        };
        config.validate()?;
        let row = ParamsRow::new(args.preset, config, context, args.dtype);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&row)?);
        } else {
            print!("{}", single(&row));
        }
    }
    Ok(())
}

fn millions(n: usize) -> String {
    format!("{:.2}", n as f64 / 1e6)
}

/// How a side-by-side table writes its counts: in millions for models of ten million parameters
/// and more, where the last two digits of a million are what tells variants apart, and whole for
/// smaller ones, whose components would all read 0.00 million.
fn count_format(largest: usize) -> (&'static str, fn(usize) -> String) {
    if largest >= 10_000_000 { ("parameters in millions", millions) } else { ("parameters", grouped) }
}

fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.2} {}", UNITS[unit]) }
}

fn percent_change(value: usize, reference: usize) -> String {
    if reference == 0 {
        return "-".into();
    }
    format!("{:+.2}%", 100.0 * (value as f64 - reference as f64) / reference as f64)
}

fn describe(config: &ModelConfig) -> String {
    format!(
        "{} layers × {} heads × {} (d_k {}), kv_heads {}, MLP {}, vocab {}, context {}, bias {}, {}",
        config.n_layer,
        config.n_head,
        config.n_embd,
        config.head_dim(),
        config.kv_heads(),
        config.mlp_hidden,
        config.vocab_size,
        config.block_size,
        if config.bias { "on" } else { "off" },
        if config.tie_embeddings { "tied embeddings" } else { "untied LM head" },
    )
}

fn single(row: &ParamsRow) -> String {
    let mut out = format!("{} · {} ({})\n{}\n\n", row.preset, row.counts.variant, row.counts.notation, describe(&row.config));
    out += &format!("{:<20} {:>14} {:>16} {:>10}\n", "component", "per layer", "params", "M");
    for c in &row.counts.components {
        let per_layer = c.per_layer.map(grouped).unwrap_or_default();
        out += &format!("{:<20} {:>14} {:>16} {:>10}\n", c.name, per_layer, grouped(c.params), millions(c.params));
    }
    out += &format!("{}\n", "-".repeat(63));
    for (name, n) in [
        ("total", row.counts.total_params),
        ("  embedding", row.counts.embedding_params),
        ("  non-embedding", row.counts.non_embedding_params),
        ("  attention", row.counts.attention_params),
    ] {
        out += &format!("{:<20} {:>14} {:>16} {:>10}\n", name, "", grouped(n), millions(n));
    }
    out += &format!(
        "\nKV cache ({}): {} per token, {} at context {}\n",
        row.dtype,
        bytes(row.counts.kv_cache_bytes_per_token),
        bytes(row.kv_cache_bytes),
        row.context
    );
    out
}

fn side_by_side(rows: &[ParamsRow]) -> String {
    let standard = rows.iter().find(|r| r.counts.variant == AttentionVariant::Standard).unwrap_or(&rows[0]);
    let mut names: Vec<&str> = Vec::new();
    for row in rows {
        for c in &row.counts.components {
            if !names.contains(&c.name.as_str()) {
                names.push(&c.name);
            }
        }
    }
    names.sort_by_key(|name| component_rank(name));
    // Every column at least one wider than its longest name, so that names never touch.
    let width = 1 + rows.iter().map(|r| r.counts.variant.name().len().max(r.counts.notation.len())).max().unwrap_or(0).max(14);
    let line = |label: &str, cells: Vec<String>| {
        let mut s = format!("{label:<22}");
        for cell in cells {
            s += &format!("{cell:>width$}");
        }
        s + "\n"
    };
    let (unit, count) = count_format(rows.iter().map(|r| r.counts.total_params).max().unwrap_or(0));
    let mut out = format!("{} — {}\n{unit}\n\n", rows[0].preset, describe(&standard.config));
    out += &line("", rows.iter().map(|r| r.counts.variant.name().to_string()).collect());
    out += &line("", rows.iter().map(|r| r.counts.notation.to_string()).collect());
    for name in names {
        out += &line(name, rows.iter().map(|r| r.params_of(name).map_or("-".into(), count)).collect());
    }
    out += &format!("{}\n", "-".repeat(22 + width * rows.len()));
    out += &line("total", rows.iter().map(|r| count(r.counts.total_params)).collect());
    out += &line("non-embedding", rows.iter().map(|r| count(r.counts.non_embedding_params)).collect());
    out += &line("attention", rows.iter().map(|r| count(r.counts.attention_params)).collect());
    out += &line("Δ total vs standard", rows.iter().map(|r| percent_change(r.counts.total_params, standard.counts.total_params)).collect());
    out += &line("Δ attention", rows.iter().map(|r| percent_change(r.counts.attention_params, standard.counts.attention_params)).collect());
    out += &line(&format!("KV/token ({})", rows[0].dtype), rows.iter().map(|r| bytes(r.counts.kv_cache_bytes_per_token)).collect());
    out += &line(&format!("KV @ {}", rows[0].context), rows.iter().map(|r| bytes(r.kv_cache_bytes)).collect());
    out += &line("Δ KV cache", rows.iter().map(|r| percent_change(r.kv_cache_bytes, standard.kv_cache_bytes)).collect());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(grouped(124373760), "124,373,760");
        assert_eq!(grouped(12), "12");
        assert_eq!(millions(124_373_760), "124.37");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(73_728 * 1024), "72.00 MiB");
        assert_eq!(percent_change(117, 124), "-5.65%");
    }

    /// A small model's table gives whole counts (the digits ViT's class token is 64 parameters,
    /// which reads 0.00 in millions); a large one's stays in millions.
    #[test]
    fn small_models_are_counted_whole_and_large_ones_in_millions() {
        let rows = |preset: Preset| -> Vec<ParamsRow> {
            AttentionVariant::ALL
                .iter()
                .map(|&variant| {
                    let config = preset.config().with_variant(variant);
                    ParamsRow::new(preset, config, preset.config().block_size, CacheDType::F32)
                })
                .collect()
        };
        let small = side_by_side(&rows(Preset::VisionDigits));
        assert!(small.contains("\nparameters\n") && small.contains("102,666"), "{small}");
        let large = side_by_side(&rows(Preset::Gpt2Small));
        assert!(large.contains("parameters in millions") && large.contains("124.37"), "{large}");
    }
}
