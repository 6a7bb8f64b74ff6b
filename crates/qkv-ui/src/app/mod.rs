//! The playground: the panels around one training session. It sends the session commands and
//! draws its messages; it never computes anything itself.

mod autosave;
mod cards;
mod channels;
mod compute;
mod export;
mod intents;
mod layout;
mod lesson;
mod look;
mod overlays;
mod present;
mod setups;
mod shown;
mod trial;

use qkv_session::{CheckpointFile, Command, RunId, Session, SessionHandle};

use crate::files::{FileKind, Inbox, IncomingFile, OutgoingFile, PathChoice};
use crate::platform::Platform;

use crate::attention_panel::{AttentionPanel, HeadIndex};
use crate::compute_choice::{Compute, ComputeOffer};
use crate::costs_panel::CostsPanel;
use crate::files_panel::FilesPanel;
use crate::frame_timer::FrameTimer;
use crate::hidden::{Hidden, Part};
use crate::images_panel::ImagesPanel;
use crate::lessons::{LESSONS, Moment, Panel};
use crate::loss_panel::LossPanel;
use crate::news::NewsPacing;
use crate::params_panel::ParamsPanel;
use crate::presentation::Look;
use crate::samples_panel::SamplesPanel;
use crate::setup_panel::{Setup, SetupPanel};
use crate::shortcuts::Shortcut;
use crate::theory_panel::TheoryPanel;
use crate::view::SessionView;
use autosave::Autosave;
use channels::Channels;
use compute::ComputeChoice;
use export::Exports;
use lesson::{Discussion, LessonProgress};
use look::Appearance;
use overlays::Overlays;
use setups::Setups;
use shown::Shown;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Playground,
    Samples,
    AllVariants,
}

/// What the last frame drew (what the UI tests look at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    pub attention_maps: usize,
    pub loss_points: usize,
    /// The link the QR code holds, when one was drawn.
    pub qr_link: Option<String>,
    /// The runs whose maps presentation mode set side by side, by label.
    pub presented_maps: Vec<String>,
    /// The panel the lesson's step outlined.
    pub outlined: Option<Panel>,
}

/// The panels around the session, each with its own state: what the user set in it (the loss
/// chart's smoothing, the attention map's head, the export folder), never training state.
struct Panels {
    setup: SetupPanel,
    loss: LossPanel,
    costs: CostsPanel,
    attention: AttentionPanel,
    images: ImagesPanel,
    samples: SamplesPanel,
    variants: ParamsPanel,
    /// Export and import (the export folder and the checkpoint path on the desktop).
    files: FilesPanel,
    theory: TheoryPanel,
}

impl Panels {
    /// `folder`: where exports go, where the platform has folders (the desktop).
    fn new(folder: Option<String>) -> Self {
        Self {
            setup: SetupPanel { paths: folder.is_some() },
            loss: LossPanel::default(),
            costs: CostsPanel::default(),
            attention: AttentionPanel::default(),
            images: ImagesPanel::default(),
            samples: SamplesPanel::default(),
            variants: ParamsPanel::default(),
            files: FilesPanel { paths: folder.is_some(), folder: folder.unwrap_or_default(), import_path: String::new() },
            theory: TheoryPanel,
        }
    }
}

/// The app: the setup, the session training it, and the panels that show it, in parts of one
/// concern each. Shells and tests reach it through methods, as a user would through the panels.
pub struct Playground {
    setup: Setups,
    channels: Channels,
    /// What the session has reported, as the panels draw it.
    view: SessionView,
    compute: ComputeChoice,
    shown: Shown,
    lesson: LessonProgress,
    /// Each panel's own state (what it shows is the view's).
    panels: Panels,
    overlays: Overlays,
    look: Appearance,
    exports: Exports,
    autosave: Autosave,
    platform: Box<dyn Platform>,
}

/// A new session on `compute`, its task handed to the platform to run.
fn start_session(platform: &dyn Platform, news: &NewsPacing, compute: &Compute) -> SessionHandle {
    let (handle, task) = qkv_session::channel(Session::new(compute.home.clone(), compute.id.clone()), news.waker());
    platform.spawn_session(task);
    handle
}

impl Playground {
    /// `platform` is the shell's (files, the session's task); `offer` lists the devices
    /// offered, the preferred first, and what was chosen among them on an earlier visit. `saved`
    /// is the setup stored by a previous run of the app (JSON); an unreadable one is replaced by
    /// the default.
    pub fn new(ctx: &egui::Context, platform: Box<dyn Platform>, offer: impl Into<ComputeOffer>, saved: Option<&str>) -> Self {
        let (compute, unread_choice) = ComputeChoice::new(offer.into());
        let (setup, notice) = match saved.map(serde_json::from_str::<Setup>) {
            Some(Ok(setup)) => (setup, unread_choice.map(|note| (note, true))),
            Some(Err(e)) => (Setup::default(), Some((format!("the saved setup could not be read ({e}); starting from the default"), true))),
            None => (Setup::default(), unread_choice.map(|note| (note, true))),
        };
        let news = NewsPacing::new(ctx);
        let session = start_session(platform.as_ref(), &news, compute.current());
        let folder = platform.default_folder();
        // A setup that is a lesson's (the default is the first) shows that lesson's text.
        let lesson = LESSONS.iter().position(|lesson| (lesson.plan)() == setup.plan);
        let mut playground = Self {
            setup: Setups { edited: setup, applied: None },
            channels: Channels { session, news, inbox: Inbox::default() },
            view: SessionView::default(),
            compute,
            shown: Shown::default(),
            lesson: LessonProgress::at_start(lesson),
            panels: Panels::new(folder),
            overlays: Overlays { notice, ..Overlays::default() },
            look: Appearance::default(),
            exports: Exports::default(),
            autosave: Autosave::default(),
            platform,
        };
        playground.platform.kept_runs(&playground.autosave.kept);
        // The first screen shows what the setup is about before anyone presses Train: its
        // parameter and KV-cache bars, the untrained models' loss and attention maps. On a GPU this
        // also compiles the kernels the first step needs while the page draws.
        playground.apply_setup();
        if let Some(verdict) = &playground.compute.verdict {
            let summary = verdict.summary();
            playground.tell(summary, false);
        }
        playground
    }

    /// The setup to persist.
    pub fn saved_setup(&self) -> String {
        serde_json::to_string(&self.setup.edited).unwrap_or_default()
    }

    /// The shell's measure of the last repaint's cost on the UI thread, which paces how often
    /// training news is drawn.
    pub fn record_repaint(&mut self, secs: f64) {
        self.channels.news.record_repaint(secs);
    }

    /// The compute the session trains on, as the compute list names it.
    pub fn compute_label(&self) -> String {
        self.compute.current().label()
    }

    /// What the session has reported: the runs, their curves, the attention maps.
    pub fn view(&self) -> &SessionView {
        &self.view
    }

    /// The setup being edited.
    pub fn setup(&self) -> &Setup {
        &self.setup.edited
    }

    /// The setup being edited, for a shell or a test that edits it as the setup panel would.
    pub fn setup_mut(&mut self) -> &mut Setup {
        &mut self.setup.edited
    }

    /// The latest note for the user, and whether it reports a problem.
    pub fn notice(&self) -> Option<(&str, bool)> {
        self.overlays.notice()
    }

    /// Shows `text` in the top bar (a problem in the error colour).
    pub fn tell(&mut self, text: String, is_problem: bool) {
        self.overlays.notice = Some((text, is_problem));
    }

    /// The frame times measured so far.
    pub fn frames(&self) -> &FrameTimer {
        &self.overlays.frames
    }

    /// A link that opens the applied setup, where the shell has one (the browser's address).
    pub fn set_share_link(&mut self, link: String) {
        self.exports.share_link = Some(link);
    }

    pub fn share_link(&self) -> Option<&str> {
        self.exports.share_link.as_deref()
    }

    /// Where exports are written (desktop).
    pub fn export_folder(&self) -> &str {
        &self.panels.files.folder
    }

    pub fn set_export_folder(&mut self, folder: String) {
        self.panels.files.folder = folder;
    }

    /// Enlarges one head's map, as clicking it does.
    pub fn select_head(&mut self, head: HeadIndex) {
        self.panels.attention.selected = Some(head);
    }

    /// What the last frame drew: attention maps, and points of the loss plot.
    pub fn drawn(&self) -> Drawn {
        Drawn {
            attention_maps: self.panels.attention.maps_drawn,
            loss_points: self.panels.loss.points_drawn,
            qr_link: self.overlays.qr_shown.clone(),
            presented_maps: self
                .panels
                .attention
                .presented
                .iter()
                .filter_map(|&r| self.view.runs.get(r))
                .map(|r| r.label().to_string())
                .collect(),
            outlined: self.lesson.outlined,
        }
    }

    fn send(&mut self, command: Command) {
        if !self.channels.session.send(command) {
            self.tell("the training session stopped unexpectedly; restarting it".into(), true);
            self.channels.session = start_session(self.platform.as_ref(), &self.channels.news, self.compute.current());
            self.setup.applied = None;
        }
    }

    /// Loads the edited setup into the session (training starts from scratch).
    pub fn apply_setup(&mut self) {
        self.cancel_trial();
        self.view = SessionView { exports: std::mem::take(&mut self.view.exports), ..SessionView::default() };
        self.autosave.saved_at = 0;
        self.lesson.discussion = Discussion::Ahead;
        self.send(Command::AttentionEvery(self.panels.attention.refresh_every));
        self.send(Command::Load(self.setup.edited.plan.clone()));
        self.setup.applied = Some(self.setup.edited.clone());
    }

    fn ensure_loaded(&mut self) {
        // A setup already sent is not sent again: its Load may still be on its way.
        if self.setup.unloaded() {
            self.apply_setup();
        }
    }

    pub fn train(&mut self) {
        // Going on ends the lesson's pause, and what it said.
        if self.lesson.go_on() {
            self.overlays.notice = None;
        }
        // Train while another compute is timed: the user wants this one now.
        self.cancel_trial();
        self.ensure_loaded();
        if self.wants_trial() {
            self.start_trial();
        }
        self.send(Command::Play);
    }

    pub fn pause(&mut self) {
        self.cancel_trial();
        self.send(Command::Pause);
    }

    pub fn step(&mut self) {
        self.cancel_trial();
        self.ensure_loaded();
        self.send(Command::Step);
    }

    /// Saves run `run`'s checkpoint and metrics (into the export folder; the browser downloads).
    pub fn export(&mut self, run: RunId) {
        self.send(Command::Export { run });
    }

    /// The lesson whose setup is loaded, if the setup is a lesson's.
    pub fn lesson(&self) -> Option<usize> {
        self.lesson.index
    }

    /// What a key asks for ([`crate::shortcuts`]), as its button would do it.
    fn apply_shortcut(&mut self, shortcut: Shortcut) {
        match shortcut {
            // A lesson's pause for discussion goes on at Space, also before the session has said
            // it paused (then the view still says playing, and Space would pause again).
            Shortcut::TrainOrPause if self.discussing() => self.train(),
            Shortcut::TrainOrPause if self.view.playing => self.pause(),
            Shortcut::TrainOrPause => self.train(),
            // As the Step button, which waits while training plays.
            Shortcut::Step if self.view.playing => {}
            Shortcut::Step => self.step(),
            Shortcut::Reset => self.apply_setup(),
            Shortcut::Lesson(index) => self.load_lesson(index),
            Shortcut::Keys => self.overlays.show_keys = !self.overlays.show_keys,
            Shortcut::Present => self.look.chosen.presenting = !self.look.chosen.presenting,
            Shortcut::HighContrast => self.look.chosen.high_contrast = !self.look.chosen.high_contrast,
            Shortcut::QrCode => self.overlays.show_qr = !self.overlays.show_qr,
            Shortcut::NextStep => self.next_card(),
            Shortcut::PreviousStep => self.previous_card(),
        }
    }

    /// Hides the controls a link's `hide=` (or `--hide`) names ([`Hidden::parse`]); steps the
    /// teacher skipped stay skipped.
    pub fn hide(&mut self, hidden: Hidden) {
        let steps_skipped = self.shown.hidden.hides(Part::Steps);
        self.shown.hidden = hidden;
        if steps_skipped {
            self.shown.hidden.set(Part::Steps, true);
        }
    }

    /// Presentation mode and the theme, as the user chose them.
    pub fn look(&self) -> Look {
        self.look.chosen
    }

    /// Enters or leaves presentation mode, or changes the theme (from the next frame on).
    pub fn set_look(&mut self, look: Look) {
        self.look.chosen = look;
    }

    pub fn load_lesson(&mut self, index: usize) {
        let plan = (LESSONS[index].plan)();
        self.lesson = LessonProgress { open_theory: plan.preset == qkv_model::Preset::Theory, ..LessonProgress::at_start(Some(index)) };
        self.setup.edited = Setup::from_plan(plan);
        self.apply_setup();
    }

    /// Applies every message the session has sent since the last frame.
    fn apply_messages(&mut self) {
        let colours = self.setup.edited.colours32();
        while let Some(message) = self.channels.session.try_recv() {
            self.view.apply(message, &colours);
        }
        self.advance_trial();
        self.save_exports();
        self.autosave_runs();
        self.pause_for_discussion();
    }

    /// Pauses a playing lesson once, at its moment to discuss ([`crate::lessons::Pause`]), and
    /// says why; Space (or Train) goes on. The pause is sent when a frame sees the moment, so the
    /// session trains on until it lands. Where the lesson's steps all ended before a frame saw a
    /// moment of accuracy (a stalled frame, a small lesson on a fast machine), the moment is still
    /// shown: the maps to discuss are there. A moment at a step is not (its words are about the
    /// steps after it).
    fn pause_for_discussion(&mut self) {
        let Some(pause) = self.lesson.index.and_then(|i| LESSONS[i].pause) else { return };
        let ended_past_it = self.view.finished && matches!(pause.when, Moment::ReferenceAccuracy(_));
        let trained = self.view.playing || ended_past_it;
        if self.lesson.discussion != Discussion::Ahead || !trained || !pause.when.reached(&self.view) {
            return;
        }
        self.lesson.discussion = Discussion::Now;
        self.pause();
        self.tell(pause.say.to_string(), false);
    }

    /// The lesson is paused at its moment to discuss, waiting for the teacher to go on.
    pub fn discussing(&self) -> bool {
        self.lesson.discussion == Discussion::Now
    }

    /// Goes on from the lesson's pause as the teacher would: where the lesson waits for
    /// "Eliminate W_Q", presses it for the reference run, then trains on (Space).
    pub fn go_on(&mut self) {
        if self.awaits_elimination()
            && let Some(run) = self.view.reference().map(|r| r.info.id)
        {
            self.send(Command::EliminateQuery { run, into: self.view.unused_id() });
        }
        self.train();
    }

    /// The lesson paused for "Eliminate W_Q" to be pressed, and it has not been yet: the button
    /// is highlighted. Only the lesson about the elimination pauses for it (lesson 3 pauses to
    /// discuss its maps, and its Q-K-V has a button too).
    pub fn awaits_elimination(&self) -> bool {
        let eliminating = self.lesson.index.is_some_and(|i| LESSONS[i].screen == crate::lessons::Screen::Elimination);
        eliminating && self.discussing() && self.view.conversion.is_none()
    }

    /// Where the platform keeps runs: asks for every run's checkpoint each [`AUTOSAVE_EVERY`]
    /// steps and when training ends, and hands what comes back to the platform.
    fn autosave_runs(&mut self) {
        if let Some(snapshot) = self.view.snapshot.take() {
            self.platform.keep_runs(snapshot);
        }
        let step = self.view.step();
        if self.platform.keeps_runs() && self.autosave.due(step, self.view.finished) {
            self.autosave.saved_at = step;
            self.send(Command::Snapshot);
        }
    }

    /// The experiment step of the runs kept from an earlier start, while they are offered.
    pub fn kept_offer(&self) -> Option<usize> {
        self.autosave.offer.as_ref().map(|kept| kept.step)
    }

    /// Continues the runs kept from an earlier start where they stood, and trains on.
    pub fn continue_kept(&mut self) {
        let Some(kept) = self.autosave.offer.take() else { return };
        self.import(kept.files);
        self.autosave.saved_at = kept.step;
        self.send(Command::Play);
    }

    /// Hands every exported run to the user (a folder on the desktop, downloads in the browser).
    fn save_exports(&mut self) {
        for export in std::mem::take(&mut self.view.exports) {
            let name = &export.name;
            let files = [
                OutgoingFile { name: format!("{name}.qkv"), bytes: export.checkpoint, mime: "application/octet-stream" },
                OutgoingFile { name: format!("{name}-metrics.csv"), bytes: export.metrics_csv.into_bytes(), mime: "text/csv" },
            ];
            self.save(&files);
        }
    }

    /// Hands `files` to the platform (the export folder on the desktop, downloads in the
    /// browser) and says how that went.
    fn save(&mut self, files: &[OutgoingFile]) {
        match self.platform.save(&self.panels.files.folder, files) {
            Ok(done) => self.tell(done, false),
            Err(e) => self.tell(e.to_string(), true),
        }
    }

    /// Continues saved runs from their checkpoint files' contents (a run trained on an upload
    /// finds its text in the setup's, when the names match).
    fn import(&mut self, files: Vec<CheckpointFile>) {
        self.cancel_trial();
        self.view = SessionView::default();
        let upload = match &self.setup.edited.plan.data {
            qkv_train::DataSource::Upload(upload) => Some(upload.clone()),
            _ => None,
        };
        self.send(Command::Import { files, upload });
        // The last autosave was of the runs this import replaces.
        self.autosave.saved_at = 0;
        self.setup.applied = Some(self.setup.edited.clone());
        self.lesson.index = None;
    }

    fn import_path(&mut self) {
        match IncomingFile::read(std::path::Path::new(self.panels.files.import_path.trim())) {
            Ok(file) => self.import(vec![CheckpointFile { name: file.name, bytes: file.bytes }]),
            Err(e) => self.tell(e.to_string(), true),
        }
    }

    /// A file the user gave the app: a checkpoint continues its run; anything else becomes the
    /// text the setup trains on.
    pub fn receive(&mut self, file: IncomingFile) {
        if file.is_checkpoint() {
            self.import(vec![CheckpointFile { name: file.name, bytes: file.bytes }]);
            return;
        }
        match qkv_train::Upload::new(&file.name, &file.bytes) {
            Ok(upload) => {
                self.setup.edited.plan.data = qkv_train::DataSource::Upload(upload);
                self.lesson.index = None;
                self.tell(format!("{} is the data now: press Train (or Apply setup) to train on it", file.name), false);
            }
            Err(e) => self.tell(e.to_string(), true),
        }
    }

    fn receive_files(&mut self, ctx: &egui::Context) {
        for file in ctx.input(|i| i.raw.dropped_files.clone()) {
            self.platform.read_dropped(file, &self.channels.inbox);
        }
        for file in self.channels.inbox.take() {
            match file {
                Ok(file) => self.receive(file),
                Err(e) => self.tell(e.to_string(), true),
            }
        }
    }

    /// Opens the platform's file dialog, where it has one.
    fn pick_file(&mut self, kind: FileKind) {
        if !self.platform.pick(kind, &self.channels.inbox) {
            self.tell("type the file's path instead: this app has no file dialog here".into(), true);
        }
    }

    /// Opens the platform's dialog for a path; the path chosen, if any (a failed dialog says
    /// why in the notice).
    fn choose_path(&mut self, choice: PathChoice) -> Option<String> {
        match self.platform.choose_path(choice) {
            Ok(path) => path.map(|p| p.display().to_string()),
            Err(e) => {
                self.tell(e.to_string(), true);
                None
            }
        }
    }

    /// The setup the session was last loaded with (what a shared link should open).
    pub fn applied_setup(&self) -> Option<&Setup> {
        self.setup.applied.as_ref()
    }
}
