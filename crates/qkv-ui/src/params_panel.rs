//! Parameter and KV-cache counts of every attention variant side by side, for a chosen preset.

use egui::{ComboBox, DragValue, Grid, RichText, Ui};
use qkv_model::accounting::kv_cache_bytes_per_token;
use qkv_model::{AttentionVariant, CacheDType, ModelConfig, ParamReport, Preset};

/// Settings of the comparison; the table is recomputed from them every frame (it is cheap:
/// counting never allocates weights).
pub struct ParamsPanel {
    pub preset: Preset,
    /// Key/value heads; `None` for multi-head attention.
    pub kv_heads: Option<usize>,
    pub dtype: CacheDType,
}

impl Default for ParamsPanel {
    fn default() -> Self {
        Self { preset: Preset::Gpt2Small, kv_heads: None, dtype: CacheDType::F32 }
    }
}

/// One column of the table.
pub struct VariantColumn {
    pub variant: AttentionVariant,
    pub report: ParamReport,
    pub kv_bytes_per_token: usize,
}

impl ParamsPanel {
    fn base_config(&self) -> ModelConfig {
        let mut config = self.preset.config();
        config.attention.kv_heads = self.kv_heads;
        config
    }

    /// The variants that accept the current settings, with their accounting.
    pub fn columns(&self) -> Vec<VariantColumn> {
        AttentionVariant::ALL
            .into_iter()
            .map(|variant| self.base_config().with_variant(variant))
            .filter(|config| config.validate().is_ok())
            .map(|config| VariantColumn {
                variant: config.attention.variant,
                kv_bytes_per_token: kv_cache_bytes_per_token(&config, self.dtype),
                report: ParamReport::new(&config),
            })
            .collect()
    }

    pub fn ui(&mut self, ui: &mut Ui) {
        let n_head = self.preset.config().n_head;
        ui.horizontal(|ui| {
            ComboBox::from_label("preset").selected_text(self.preset.name()).show_ui(ui, |ui| {
                for preset in Preset::ALL {
                    if ui.selectable_value(&mut self.preset, preset, preset.name()).changed() {
                        self.kv_heads = None;
                    }
                }
            });
            let mut kv_heads = self.kv_heads.unwrap_or(n_head);
            ui.label("kv heads");
            if ui.add(DragValue::new(&mut kv_heads).range(1..=n_head)).accessible_name("kv heads").changed() {
                self.kv_heads = Some(kv_heads);
            }
            ComboBox::from_label("KV dtype").selected_text(self.dtype.to_string()).show_ui(ui, |ui| {
                for dtype in [CacheDType::F32, CacheDType::F16, CacheDType::Bf16] {
                    ui.selectable_value(&mut self.dtype, dtype, dtype.to_string());
                }
            });
        });
        ui.label(RichText::new(self.preset.description()).weak());

        let base = self.base_config();
        if let Err(err) = base.clone().with_variant(AttentionVariant::Standard).validate() {
            ui.colored_label(ui.visuals().error_fg_color, err.to_string());
            return;
        }
        let columns = self.columns();
        let Some(standard) = columns.iter().find(|c| c.variant == AttentionVariant::Standard) else {
            return;
        };
        let change = |value: usize, reference: usize| format!("{:+.2}%", 100.0 * (value as f64 - reference as f64) / reference as f64);
        let millions = |n: usize| format!("{:.2} M", n as f64 / 1e6);
        Grid::new("params_grid").striped(true).num_columns(columns.len() + 1).show(ui, |ui| {
            ui.label("");
            for column in &columns {
                ui.strong(format!("{}\n{}", column.variant.name(), column.variant.notation()));
            }
            ui.end_row();
            type Count = fn(&VariantColumn) -> usize;
            let rows: [(&str, Count); 4] = [
                ("total", |c| c.report.total_params),
                ("non-embedding", |c| c.report.non_embedding_params),
                ("attention", |c| c.report.attention_params),
                ("KV cache / token", |c| c.kv_bytes_per_token),
            ];
            for (label, value) in rows {
                ui.label(label);
                for column in &columns {
                    let v = value(column);
                    let text = if label.starts_with("KV") { format!("{v} B") } else { millions(v) };
                    ui.label(format!("{text}\n{}", change(v, value(standard))));
                }
                ui.end_row();
            }
        });
        let left_out = AttentionVariant::ALL.len() - columns.len();
        if left_out > 0 {
            ui.label(
                RichText::new(format!(
                    "{left_out} variants left out: Q=K-V, (Q=K-V)+ and Q=K=V compute queries with the key projection, so they cannot share key/value heads."
                ))
                .weak(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_follow_the_accounting_and_drop_variants_that_cannot_share_heads() {
        let mut panel = ParamsPanel::default();
        let columns = panel.columns();
        assert_eq!(columns.len(), AttentionVariant::ALL.len());
        for column in &columns {
            let config = Preset::Gpt2Small.config().with_variant(column.variant);
            assert_eq!(column.report, ParamReport::new(&config));
        }
        panel.kv_heads = Some(4);
        let variants: Vec<_> = panel.columns().into_iter().map(|c| c.variant).collect();
        assert_eq!(
            variants,
            [AttentionVariant::Standard, AttentionVariant::QueryIdentity, AttentionVariant::SharedKeyValue, AttentionVariant::StandardRel]
        );
    }
}
