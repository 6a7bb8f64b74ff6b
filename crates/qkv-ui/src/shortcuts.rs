//! The keyboard, for a teacher at a projector: Space trains or pauses, S steps, R resets, 1–5
//! open the lessons, the arrow keys move through a lesson's steps, P presents, H switches to the high-contrast theme, Q shows the link's QR
//! code, ? lists the keys. None fires while a text field has the keyboard (typing a
//! prompt is not a command).

use egui::{Context, Key, Modifiers};

/// What a key asks the playground for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortcut {
    /// Train when paused, pause when training.
    TrainOrPause,
    Step,
    /// Start the setup over from untrained models.
    Reset,
    /// Open lesson `n` (an index: the key 1 opens lesson 0).
    Lesson(usize),
    /// Enter or leave presentation mode.
    Present,
    /// Switch between the usual theme and the high-contrast one.
    HighContrast,
    /// Show or hide the QR code of the demo's link.
    QrCode,
    /// Show or hide the list of keys.
    Keys,
    /// The lesson's next step.
    NextStep,
    /// The lesson's previous step.
    PreviousStep,
}

/// Every key, with what it does, as the list of keys shows them.
pub const KEYS: [(&str, &str); 9] = [
    ("Space", "train / pause"),
    ("S", "one step"),
    ("R", "reset: untrained models again"),
    ("1 – 5", "open a lesson"),
    ("Left / Right", "the lesson's previous / next step"),
    ("P", "presentation mode on / off"),
    ("H", "high-contrast light theme on / off"),
    ("Q", "QR code of this demo's link (in the browser)"),
    ("?", "show or hide these keys"),
];

/// The number keys that open lessons, in order.
const LESSON_KEYS: [Key; 5] = [Key::Num1, Key::Num2, Key::Num3, Key::Num4, Key::Num5];

/// The other keys and what each asks for.
const ACTION_KEYS: [(Key, Shortcut); 9] = [
    (Key::Space, Shortcut::TrainOrPause),
    (Key::S, Shortcut::Step),
    (Key::R, Shortcut::Reset),
    (Key::P, Shortcut::Present),
    (Key::H, Shortcut::HighContrast),
    (Key::Q, Shortcut::QrCode),
    (Key::Questionmark, Shortcut::Keys),
    (Key::ArrowRight, Shortcut::NextStep),
    (Key::ArrowLeft, Shortcut::PreviousStep),
];

/// The shortcuts pressed since the last frame, taken from the input so that no widget acts on
/// them as well; none while a text field has the keyboard. `lessons` is how many lessons exist.
pub fn pressed(ctx: &Context, lessons: usize) -> Vec<Shortcut> {
    if ctx.egui_wants_keyboard_input() {
        return Vec::new();
    }
    ctx.input_mut(|input| {
        // Shift does not count against a key (egui matches logically), so "?" (Shift+/ on most
        // layouts) is taken like the others.
        let lessons = LESSON_KEYS.into_iter().enumerate().take(lessons).map(|(index, key)| (key, Shortcut::Lesson(index)));
        ACTION_KEYS
            .into_iter()
            .chain(lessons)
            .filter(|&(key, _)| input.consume_key(Modifiers::NONE, key))
            .map(|(_, shortcut)| shortcut)
            .collect()
    })
}
