//! Train and validation loss of every run, overlaid in the runs' colours; accuracy for the
//! synthetic tasks.

use egui::{ComboBox, Slider, Ui};
use egui_plot::{Legend, Line, LineStyle, Plot, PlotPoints};

use crate::view::SessionView;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    Steps,
    Tokens,
    Seconds,
}

impl XAxis {
    fn label(self) -> &'static str {
        match self {
            XAxis::Steps => "steps",
            XAxis::Tokens => "tokens",
            XAxis::Seconds => "seconds",
        }
    }
}

pub struct LossPanel {
    pub log_y: bool,
    /// Exponential moving average weight of the past, 0 = raw.
    pub smoothing: f64,
    pub x_axis: XAxis,
    /// Points drawn in the last frame (per curve, summed), for tests and the status line.
    pub points_drawn: usize,
}

impl Default for LossPanel {
    fn default() -> Self {
        Self { log_y: false, smoothing: 0.6, x_axis: XAxis::Steps, points_drawn: 0 }
    }
}

/// Exponential moving average, debiased like TensorBoard's so the curve starts at the data.
pub fn smooth(values: &[f64], weight: f64) -> Vec<f64> {
    let mut average = 0.0;
    let mut norm = 0.0;
    values
        .iter()
        .map(|&v| {
            average = weight * average + (1.0 - weight) * v;
            norm = weight * norm + (1.0 - weight);
            average / norm
        })
        .collect()
}

impl LossPanel {
    fn y(&self, loss: f64) -> f64 {
        if self.log_y { loss.max(1e-9).log10() } else { loss }
    }

    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) {
        ui.horizontal_wrapped(|ui| {
            ui.checkbox(&mut self.log_y, "log y");
            ui.add(Slider::new(&mut self.smoothing, 0.0..=0.99).text("smoothing"));
            ComboBox::from_label("x axis").selected_text(self.x_axis.label()).show_ui(ui, |ui| {
                for axis in [XAxis::Steps, XAxis::Tokens, XAxis::Seconds] {
                    ui.selectable_value(&mut self.x_axis, axis, axis.label());
                }
            });
        });
        let has_accuracy = view.runs.iter().any(|r| r.evals.iter().any(|e| e.accuracy.is_some()));
        let height = if has_accuracy { ui.available_height() * 0.6 } else { ui.available_height() };
        let x_axis = self.x_axis;
        let x_of = move |step: usize, tokens: usize, secs: f64| match x_axis {
            XAxis::Steps => step as f64,
            XAxis::Tokens => tokens as f64,
            XAxis::Seconds => secs,
        };
        let log_y = self.log_y;
        let mut points = 0;
        Plot::new("loss_plot")
            .legend(Legend::default())
            .height(height.max(120.0))
            .x_axis_label(self.x_axis.label())
            .y_axis_label(if log_y { "loss (log10)" } else { "loss" })
            .y_axis_formatter(move |mark, _| if log_y { format!("{:.2}", 10f64.powf(mark.value)) } else { format!("{:.2}", mark.value) })
            .show(ui, |plot| {
                for run in &view.runs {
                    let train: Vec<f64> = run.steps.iter().map(|s| s.train_loss).collect();
                    let smoothed = smooth(&train, self.smoothing);
                    let train_points: Vec<[f64; 2]> =
                        run.steps.iter().zip(smoothed).map(|(s, loss)| [x_of(s.step, s.tokens, s.wall_secs), self.y(loss)]).collect();
                    let val_points: Vec<[f64; 2]> =
                        run.evals.iter().map(|e| [x_of(e.step, e.tokens, e.wall_secs), self.y(e.val_loss)]).collect();
                    points += train_points.len() + val_points.len();
                    plot.line(
                        Line::new(format!("{} train", run.name()), PlotPoints::from(train_points))
                            .color(run.colour.gamma_multiply(0.6))
                            .width(1.5),
                    );
                    plot.line(
                        Line::new(format!("{} val", run.name()), PlotPoints::from(val_points))
                            .color(run.colour)
                            .width(2.5)
                            .style(LineStyle::dashed_loose()),
                    );
                }
            });
        if has_accuracy {
            Plot::new("accuracy_plot")
                .legend(Legend::default())
                .height(ui.available_height().max(100.0))
                .x_axis_label(self.x_axis.label())
                .y_axis_label("val accuracy per token")
                .include_y(0.0)
                .include_y(1.0)
                .show(ui, |plot| {
                    for run in &view.runs {
                        let acc: Vec<[f64; 2]> =
                            run.evals.iter().filter_map(|e| e.accuracy.map(|a| [x_of(e.step, e.tokens, e.wall_secs), a])).collect();
                        points += acc.len();
                        plot.line(Line::new(format!("{} accuracy", run.name()), PlotPoints::from(acc)).color(run.colour));
                    }
                });
        }
        self.points_drawn = points;
    }
}

#[cfg(test)]
mod tests {
    use super::smooth;

    #[test]
    fn smoothing_starts_at_the_data_and_follows_a_constant() {
        assert_eq!(smooth(&[4.0, 4.0, 4.0], 0.9), vec![4.0, 4.0, 4.0]);
        let s = smooth(&[2.0, 0.0], 0.5);
        assert_eq!(s[0], 2.0);
        assert!((s[1] - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(smooth(&[1.0, 3.0], 0.0), vec![1.0, 3.0]);
    }
}
