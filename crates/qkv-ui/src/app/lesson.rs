//! Where a loaded lesson stands: which lesson, the step shown, the panel outlined, and its pause
//! for discussion.

use crate::lessons::Panel;

/// A lesson's pause for discussion: still ahead, now (paused, its words shown), or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Discussion {
    Ahead,
    Now,
    Done,
}

pub(super) struct LessonProgress {
    /// The lesson whose setup is loaded (an index into `LESSONS`), if the setup is a lesson's.
    pub(super) index: Option<usize>,
    /// The lesson's step shown (an index into its cards).
    pub(super) card: usize,
    /// The panel the step outlined in the last frame.
    pub(super) outlined: Option<Panel>,
    /// Where the lesson is with its pause (it pauses once per load).
    pub(super) discussion: Discussion,
    /// The theory lesson opens its section once; after that the user decides.
    pub(super) open_theory: bool,
}

impl LessonProgress {
    /// At the start of lesson `index` (or of no lesson).
    pub(super) fn at_start(index: Option<usize>) -> Self {
        Self { index, card: 0, outlined: None, discussion: Discussion::Ahead, open_theory: false }
    }

    /// Goes on from the pause, if the lesson is paused at it; whether it was.
    pub(super) fn go_on(&mut self) -> bool {
        let was = self.discussion == Discussion::Now;
        if was {
            self.discussion = Discussion::Done;
        }
        was
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lesson_pauses_once_and_goes_on_once() {
        let mut progress = LessonProgress::at_start(Some(2));
        assert!(!progress.go_on(), "nothing to go on from before the pause");
        assert_eq!(progress.discussion, Discussion::Ahead);
        progress.discussion = Discussion::Now;
        assert!(progress.go_on());
        assert_eq!(progress.discussion, Discussion::Done);
        assert!(!progress.go_on());
    }
}
