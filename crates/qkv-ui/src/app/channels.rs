//! What the playground listens to between frames: the training session (and how often its news
//! is drawn), and the files the platform hands over (dropped, picked).

use qkv_session::SessionHandle;

use crate::files::Inbox;
use crate::news::NewsPacing;

pub(super) struct Channels {
    pub(super) session: SessionHandle,
    /// When the session's news is drawn.
    pub(super) news: NewsPacing,
    /// Files the platform read for the playground (a drop, a dialog's pick).
    pub(super) inbox: Inbox,
}
