//! The command line's training loop: a session played to its end on the calling thread, which
//! waits on every read-back (the engine is async; a command line has nothing else to do
//! meanwhile).

use pollster::FutureExt as _;

use qkv_session::{Command, Message, Session};
use qkv_train::Experiment;

/// Plays every run to its end and hands each step's messages to `on_step` with the experiment
/// as that step left it. Stops early with `on_step`'s error.
pub fn play_to_end<E>(session: &mut Session, mut on_step: impl FnMut(&Experiment, &[Message]) -> Result<(), E>) -> Result<(), E> {
    session.handle(Command::Play).block_on();
    while session.is_busy() {
        let messages = session.advance().block_on();
        on_step(session.experiment().expect("a busy session has an experiment"), &messages)?;
    }
    Ok(())
}
