//! The session's commands and messages as bytes, for a session that runs where only bytes reach
//! it: a browser's Web Worker shares no memory with the page. MessagePack keeps every float as it
//! is (a diverged run's NaN loss included, which JSON cannot carry) and checkpoints as bytes.
//!
//! An uploaded text is not part of a plan's serialised form (a saved setup or a link keeps its
//! name only), so a command that names an upload carries the upload's text beside it.
//!
//! Both directions carry the format's version ([`WIRE_VERSION`]). A page and its workers come
//! from one build, but a browser can hold a cached worker script beside a newer page: such bytes
//! are refused by their version, with a fix, rather than read as something else.

use serde::{Deserialize, Serialize};

use crate::{Command, Message};
use qkv_train::dataset::{DataSource, Upload};
use qkv_train::{Cause, cause};

/// The wire format's version. 2: the data source and the compute travel as types
/// (`Message::Loaded`), and both directions are stamped; the first format had no stamp.
pub const WIRE_VERSION: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the {what} came from another build of QKV Lab (wire format {found}, this page reads {WIRE_VERSION}): reload the page")]
    Version { what: &'static str, found: u32 },
    #[error("cannot put the {what} into bytes: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: rmp_serde::encode::Error,
    },
    #[error("the {what} arrived garbled ({source})")]
    Decode {
        what: &'static str,
        #[source]
        source: Cause,
    },
}

#[derive(Serialize, Deserialize)]
struct CommandOnWire {
    version: u32,
    command: Command,
    /// The text of the upload the command names, if it names one with its text.
    upload_text: Option<String>,
}

/// The upload a command trains on or imports with, if any.
fn upload_of(command: &mut Command) -> Option<&mut Upload> {
    match command {
        Command::Load(plan) => match &mut plan.data {
            DataSource::Upload(upload) => Some(upload),
            _ => None,
        },
        Command::Import { upload, .. } => upload.as_mut(),
        _ => None,
    }
}

/// Takes the command, which may carry checkpoints of megabytes, rather than copying it.
pub fn encode_command(mut command: Command) -> Result<Vec<u8>, WireError> {
    let upload_text = upload_of(&mut command).and_then(|upload| upload.corpus().ok()).map(|corpus| corpus.text.clone());
    rmp_serde::to_vec_named(&CommandOnWire { version: WIRE_VERSION, command, upload_text })
        .map_err(|source| WireError::Encode { what: "command", source })
}

/// `version`, read from bytes that decoded, refused unless it is this build's.
fn this_version(version: u32, what: &'static str) -> Result<(), WireError> {
    if version == WIRE_VERSION { Ok(()) } else { Err(WireError::Version { what, found: version }) }
}

/// Why bytes did not decode as this build's `what`: another build's, by their stamp, or garbled.
/// Only bytes that failed are probed for a stamp alone, so what reads is decoded once.
fn unreadable(bytes: &[u8], what: &'static str, error: rmp_serde::decode::Error) -> WireError {
    #[derive(Deserialize)]
    struct Stamp {
        version: u32,
    }
    match rmp_serde::from_slice::<Stamp>(bytes) {
        Ok(Stamp { version }) if version != WIRE_VERSION => WireError::Version { what, found: version },
        _ => WireError::Decode { what, source: cause(error) },
    }
}

pub fn decode_command(bytes: &[u8]) -> Result<Command, WireError> {
    let CommandOnWire { version, mut command, upload_text } = rmp_serde::from_slice(bytes).map_err(|e| unreadable(bytes, "command", e))?;
    this_version(version, "command")?;
    if let (Some(upload), Some(text)) = (upload_of(&mut command), upload_text) {
        *upload = Upload::new(&upload.name, text.as_bytes()).map_err(|e| WireError::Decode { what: "command", source: cause(e) })?;
    }
    Ok(command)
}

#[derive(Serialize)]
struct MessagesOnWire<'a> {
    version: u32,
    messages: &'a [Message],
}

#[derive(Deserialize)]
struct MessagesFromWire {
    version: u32,
    messages: Vec<Message>,
}

pub fn encode_messages(messages: &[Message]) -> Result<Vec<u8>, WireError> {
    rmp_serde::to_vec_named(&MessagesOnWire { version: WIRE_VERSION, messages })
        .map_err(|source| WireError::Encode { what: "messages", source })
}

pub fn decode_messages(bytes: &[u8]) -> Result<Vec<Message>, WireError> {
    let MessagesFromWire { version, messages } = rmp_serde::from_slice(bytes).map_err(|e| unreadable(bytes, "messages", e))?;
    this_version(version, "messages")?;
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CheckpointFile, RunId};
    use qkv_train::RunEvent;
    use qkv_train::plan::ExperimentPlan;
    use qkv_train::run::StepRecord;

    #[test]
    fn a_command_keeps_the_text_of_the_upload_it_names() {
        let upload = Upload::new("notes.txt", "to be or not to be".as_bytes()).unwrap();
        let plan = ExperimentPlan { data: DataSource::Upload(upload.clone()), ..ExperimentPlan::default() };
        let Command::Load(decoded) = decode_command(&encode_command(Command::Load(plan.clone())).unwrap()).unwrap() else {
            panic!("not a Load")
        };
        // Upload's equality compares the texts too.
        assert_eq!(decoded, plan);

        let file = CheckpointFile { name: "run.qkv".into(), bytes: vec![0, 255, 7] };
        let import = Command::Import { files: vec![file.clone()], upload: Some(upload) };
        let Command::Import { files, upload } = decode_command(&encode_command(import).unwrap()).unwrap() else { panic!("not an Import") };
        assert_eq!(files, [file]);
        assert_eq!(upload.unwrap().corpus().unwrap().text, "to be or not to be");
    }

    #[test]
    fn messages_keep_a_nan_loss_and_checkpoint_bytes() {
        let record = StepRecord {
            step: 3,
            train_loss: f64::NAN,
            lr: 1e-3,
            grad_norm: f64::INFINITY,
            tokens: 96,
            tokens_per_sec: 10.0,
            wall_secs: 0.5,
        };
        let messages = vec![
            Message::Run(RunEvent::Stepped { run: RunId(1), record, eval: None }),
            Message::Exported { run: RunId(0), name: "a".into(), checkpoint: (0..=255).collect(), metrics_csv: "step\n".into() },
            Message::Failed(qkv_train::Problem::new("out of memory")),
        ];
        let decoded = decode_messages(&encode_messages(&messages).unwrap()).unwrap();
        let [
            Message::Run(RunEvent::Stepped { run: RunId(1), record, eval: None }),
            Message::Exported { checkpoint, .. },
            Message::Failed(why),
        ] = decoded.as_slice()
        else {
            panic!("{decoded:?}")
        };
        assert!(record.train_loss.is_nan() && record.grad_norm == f64::INFINITY && record.step == 3);
        assert_eq!(checkpoint, &(0..=255).collect::<Vec<u8>>());
        assert_eq!(why.message, "out of memory");
    }

    /// Bytes of another build (a cached worker beside a newer page) are refused by their
    /// version, with the fix; the first format, which had no stamp, does not read as this one.
    #[test]
    fn another_build_s_bytes_are_refused_by_their_version() {
        #[derive(Serialize)]
        struct Stamped {
            version: u32,
            messages: Vec<u8>,
        }
        let newer = rmp_serde::to_vec_named(&Stamped { version: WIRE_VERSION + 1, messages: vec![] }).unwrap();
        let error = decode_messages(&newer).unwrap_err();
        assert!(matches!(error, WireError::Version { found, .. } if found == WIRE_VERSION + 1), "{error}");
        assert!(error.to_string().contains("reload the page"), "{error}");
        assert!(matches!(decode_command(&newer), Err(WireError::Version { .. })));
        // Version 1: the messages as a bare list, the command without a stamp.
        let first_format = rmp_serde::to_vec_named(&vec![Message::Playing(true)]).unwrap();
        assert!(decode_messages(&first_format).is_err());
        assert_eq!(decode_messages(&encode_messages(&[Message::Playing(true)]).unwrap()).unwrap().len(), 1);
    }

    #[test]
    fn garbled_bytes_are_refused_with_a_reason() {
        let error = decode_messages(&[0xc1, 1, 2]).unwrap_err();
        assert!(error.to_string().starts_with("the messages arrived garbled"), "{error}");
        assert!(decode_command(b"").is_err());
    }
}
