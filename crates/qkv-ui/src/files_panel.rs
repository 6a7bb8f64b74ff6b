//! Export and import: save a run's checkpoint and metrics, continue a saved run, copy a link to
//! the setup. Where files go is the platform's business; this panel only says what the user asked.

use egui::Ui;

use crate::files::FileKind;
use crate::intent::Intent;
use crate::view::SessionView;

#[derive(Default)]
pub struct FilesPanel {
    /// Whether the user names files by path (the desktop) rather than picking and downloading.
    pub paths: bool,
    /// Where exports go, on the desktop.
    pub folder: String,
    /// The checkpoint to import, on the desktop.
    pub import_path: String,
}

impl FilesPanel {
    /// `share_link`: a link that opens the applied setup, where the shell has one.
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView, share_link: Option<&str>) -> Option<Intent> {
        let mut request = None;
        if self.paths {
            ui.horizontal(|ui| {
                // Buttons first: the fields take what width is left in the panel.
                ui.label("folder");
                if ui.button("choose…").clicked() {
                    request = Some(Intent::ChooseFolder);
                }
                ui.add(egui::TextEdit::singleline(&mut self.folder).desired_width(ui.available_width())).accessible_name("export folder");
            });
        }
        ui.horizontal_wrapped(|ui| {
            for run in &view.runs {
                if ui.button(format!("export {}", run.name())).clicked() {
                    request = Some(Intent::ExportRun(run.info.id));
                }
            }
        });
        if self.paths {
            ui.horizontal(|ui| {
                ui.label("checkpoint");
                if ui.button("browse…").clicked() {
                    request = Some(Intent::BrowseCheckpoint);
                }
                if ui.button("import").on_hover_text("continue the run saved at the path typed here").clicked() {
                    request = Some(Intent::ImportPath);
                }
                ui.add(egui::TextEdit::singleline(&mut self.import_path).hint_text("path/to/run.qkv").desired_width(ui.available_width()))
                    .accessible_name("checkpoint path");
            });
        } else if ui.button("load checkpoint…").on_hover_text("or drop a .qkv file on the page").clicked() {
            request = Some(Intent::PickFile(FileKind::Checkpoint));
        }
        if let Some(link) = share_link
            && ui.button("copy link to this setup").on_hover_text(link).clicked()
        {
            request = Some(Intent::CopyLink(link.to_string()));
        }
        request
    }
}
