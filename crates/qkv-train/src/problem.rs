//! An error as it travels in a message, and as the command line reports it: a session's front
//! end may be in another thread, a Web Worker or a test, so the error goes as data (serialisable,
//! comparable), with its causes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What went wrong, as the user reads it, and the causes under it that the sentence does not
/// already say (each once, outermost first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub message: String,
    pub causes: Vec<String>,
}

impl Problem {
    /// `error` and its chain of sources.
    pub fn of(error: &(dyn std::error::Error + 'static)) -> Self {
        let message = error.to_string();
        let mut said = message.clone();
        let mut causes = Vec::new();
        let mut cause = error.source();
        while let Some(error) = cause {
            let text = error.to_string();
            if !text.is_empty() && !said.contains(&text) {
                said.push_str(&text);
                causes.push(text);
            }
            cause = error.source();
        }
        Self { message, causes }
    }

    /// A problem of the front end's own, with no cause under it.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), causes: Vec::new() }
    }

    /// The same problem with `more` said after its sentence.
    pub fn and(mut self, more: &str) -> Self {
        self.message = format!("{}; {more}", self.message);
        self
    }
}

/// The sentence; the causes are for whoever lists them (the sentences of this project's errors
/// already quote their cause).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_keeps_the_causes_its_sentence_does_not_say() {
        let io = std::io::Error::other("disk full");
        let said = crate::corpus::DataError::Io { name: "a.txt".into(), source: std::sync::Arc::new(io) };
        let problem = Problem::of(&said);
        assert_eq!(problem.message, "cannot read a.txt: disk full");
        assert!(problem.causes.is_empty(), "the sentence quotes its cause: {problem:?}");
        let wire = crate::checkpoint::CheckpointError::Save { name: "run".into(), source: crate::cause(said) };
        let problem = Problem::of(&wire);
        assert_eq!(problem.to_string(), "cannot save run: cannot read a.txt: disk full");
        assert_eq!(Problem::new("no run 5").and("apply the setup again").message, "no run 5; apply the setup again");
    }
}
