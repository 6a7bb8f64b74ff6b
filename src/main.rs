//! QKV Lab's desktop shell: opens the window and hosts the panels of `qkv-ui`.

use eframe::egui;
use qkv_ui::ParamsPanel;

#[derive(Default)]
struct QkvLab {
    params: ParamsPanel,
}

impl eframe::App for QkvLab {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::CentralPanel::default().show(ui, |ui| {
            ui.heading("QKV Lab");
            ui.label("Does a transformer need all three of W_Q, W_K and W_V?");
            ui.label(
                "Live side-by-side training, loss curves and attention maps are being built; \
                 for now the counts below show what each attention variant costs.",
            );
            ui.separator();
            self.params.ui(ui);
        });
    }
}

fn main() -> eframe::Result {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size([1100.0, 520.0]).with_title("QKV Lab"),
        renderer: eframe::Renderer::Wgpu,
        ..Default::default()
    };
    eframe::run_native("QKV Lab", options, Box::new(|_cc| Ok(Box::new(QkvLab::default()))))
}
