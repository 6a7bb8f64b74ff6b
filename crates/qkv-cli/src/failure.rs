//! How a command fails: the error the user reads, with its causes, and the exit code a script
//! reads (2 for a command line that cannot be, 1 for a run that failed).

use std::error::Error;
use std::fmt;

/// Why a command failed: a library's typed error or a sentence of the CLI's own. The CLI is the
/// edge where errors become what the user reads, so it keeps them whole until then.
pub type Failure = Box<dyn Error + Send + Sync>;

/// A command line that asks for something that cannot be (exit code 2, as for clap's own usage
/// errors), as opposed to a run that failed (1): a script can tell a typo from a failed run.
#[derive(Debug)]
pub struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Usage {}

/// A usage error with its sentence.
pub fn usage(message: impl Into<String>) -> Failure {
    Box::new(Usage(message.into()))
}

/// The exit code of a failure: 2 for a command line or a setting that cannot be (the CLI's own
/// checks, a model or recipe that fails validation or does not fit), 1 for a run that failed.
pub fn exit_code(failure: &Failure) -> u8 {
    use qkv_train::RunError;
    use qkv_train::plan::{PlanError, StartError};
    let usage = failure.is::<Usage>()
        || failure.is::<qkv_kernels::UnknownProduct>()
        || failure.is::<qkv_model::ConfigError>()
        || failure.is::<qkv_train::TrainingConfigError>()
        || failure.is::<PlanError>()
        || failure.downcast_ref::<RunError>().is_some_and(RunError::is_setting)
        || failure.downcast_ref::<StartError>().is_some_and(StartError::is_setting)
        || failure.downcast_ref::<qkv_compute::ComputeError>().is_some_and(qkv_compute::ComputeError::is_usage);
    if usage { 2 } else { 1 }
}

/// `error: …` and a `caused by: …` line for each cause the lines above do not already say: many
/// errors put their cause's words into their own sentence, and the user reads each once.
pub fn report(failure: &(dyn Error + 'static)) -> String {
    // The engine's Problem walks the chain the same way for messages; one walk serves both.
    let problem = qkv_train::Problem::of(failure);
    let mut out = format!("error: {}", problem.message);
    for cause in &problem.causes {
        out.push_str(&format!("\n  caused by: {cause}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and maybe a cause.
    #[derive(Debug)]
    struct Layer(String, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    fn chain(messages: &[&str]) -> Layer {
        messages.iter().rev().fold(None, |cause, m| Some(Layer(m.to_string(), cause.map(Box::new)))).unwrap()
    }

    #[test]
    fn every_cause_is_said_once() {
        let io = chain(&["reading runs/a/checkpoint.qkv", "permission denied (os error 13)"]);
        assert_eq!(report(&io), "error: reading runs/a/checkpoint.qkv\n  caused by: permission denied (os error 13)");
        // A cause already in its error's sentence is not repeated, at any depth.
        let folded = chain(&["model configuration: n_head 0 must be at least 1", "n_head 0 must be at least 1", "disk full"]);
        assert_eq!(report(&folded), "error: model configuration: n_head 0 must be at least 1\n  caused by: disk full");
        assert_eq!(report(&chain(&["alone"])), "error: alone");
    }

    #[test]
    fn usage_errors_exit_2_and_others_1() {
        assert_eq!(exit_code(&usage("--steps must be at least 1")), 2);
        let failed: Failure = Box::new(chain(&["the run diverged"]));
        assert_eq!(exit_code(&failed), 1);
    }
}
