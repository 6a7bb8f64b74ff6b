//! Where the panels' [`Intent`]s are carried out: the one place a click turns into a command
//! to the session, a file dialog or a file.

use qkv_session::Command;

use super::Playground;
use crate::files::{FileKind, PathChoice};
use crate::intent::Intent;

impl Playground {
    /// Does what a panel asked for.
    pub(super) fn carry_out(&mut self, ctx: &egui::Context, intent: Intent) {
        match intent {
            Intent::ApplySetup => {
                self.lesson.index = None;
                self.apply_setup();
            }
            Intent::PickFile(kind) => self.pick_file(kind),
            Intent::BrowseText => {
                if let Some(path) = self.choose_path(PathChoice::File(FileKind::Text)) {
                    self.setup.edited.plan.data = qkv_train::DataSource::File(path);
                    self.lesson.index = None;
                }
            }
            Intent::BrowseCheckpoint => {
                if let Some(path) = self.choose_path(PathChoice::File(FileKind::Checkpoint)) {
                    self.panels.files.import_path = path;
                    self.import_path();
                }
            }
            Intent::ImportPath => self.import_path(),
            Intent::ChooseFolder => {
                if let Some(path) = self.choose_path(PathChoice::Folder) {
                    self.panels.files.folder = path;
                }
            }
            Intent::CopyLink(link) => {
                ctx.copy_text(link);
                self.tell("copied a link that opens this setup".into(), false);
            }
            Intent::ExportRun(run) => self.export(run),
            Intent::ExportFigure(export) => self.export_figure(export),
            Intent::AttentionPrompt(prompt) => self.send(Command::AttentionPrompt(prompt)),
            Intent::RefreshMapsEvery(steps) => self.send(Command::AttentionEvery(steps)),
            Intent::Sample(runs) => {
                for run in runs {
                    let options = qkv_train::generate::SampleOptions { seed: run.0 as u64 + 1, ..self.panels.samples.options.clone() };
                    self.send(Command::Sample { run, prompt: self.panels.samples.prompt.clone(), options });
                }
            }
            Intent::EliminateQuery(run) => self.send(Command::EliminateQuery { run, into: self.view.unused_id() }),
        }
    }
}
