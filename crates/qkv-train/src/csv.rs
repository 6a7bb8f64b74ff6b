//! CSV files: the metrics that `qkv train` writes and the app exports (one format for both), and
//! the table writer under them and under `qkv experiment`'s results. Fields are quoted where they
//! need it (run names are the user's: a comma or a quote in one must not shift the columns).

use crate::records::{EvalRecord, RunSpec, StepRecord};
use crate::run::Run;

/// A CSV table: the header line, then one line per row, each ending in `\n`. A field holding a
/// comma, a quote or a line break is quoted, its quotes doubled; the others are written bare.
pub fn table<R, F>(header: &[&str], rows: R) -> String
where
    R: IntoIterator<Item = F>,
    F: IntoIterator<Item = String>,
{
    let mut writer = ::csv::WriterBuilder::new().terminator(::csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    // Writing into memory fails only on rows of different lengths, which are this module's and
    // its callers' bug, not the user's.
    writer.write_record(header).expect("a CSV header");
    for row in rows {
        writer.write_record(row).expect("every CSV row as long as its header");
    }
    let bytes = writer.into_inner().expect("a CSV table held in memory");
    String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
}

/// An optional number as a CSV field: empty when absent.
pub fn optional(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| v.to_string())
}

/// One row per step and run; val columns are filled at the steps where an evaluation ran.
pub fn metrics_csv(runs: &[Run]) -> String {
    metrics_table(runs.iter().map(|run| (&run.spec, &run.metrics.steps[..], &run.metrics.evals[..])))
}

/// [`metrics_csv`] of runs known by their records alone (what a front end holds).
pub fn metrics_table<'a>(runs: impl IntoIterator<Item = (&'a RunSpec, &'a [StepRecord], &'a [EvalRecord])>) -> String {
    const HEADER: [&str; 12] = [
        "run",
        "variant",
        "step",
        "tokens",
        "wall_secs",
        "train_loss",
        "lr",
        "grad_norm",
        "tokens_per_sec",
        "val_loss",
        "accuracy",
        "sequence_accuracy",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (spec, steps, evals) in runs {
        let (name, variant) = (&spec.name, spec.model.attention.variant.to_string());
        // Step-0 evaluations have no training step to sit beside.
        for eval in evals.iter().filter(|e| e.step == 0) {
            let untrained = ["0", "0", "0", "", "", "", ""].map(String::from);
            let scores = [Some(eval.val_loss), eval.accuracy, eval.sequence_accuracy].map(optional);
            rows.push([name.clone(), variant.clone()].into_iter().chain(untrained).chain(scores).collect());
        }
        for step in steps {
            let eval = evals.iter().find(|e| e.step == step.step);
            rows.push(vec![
                name.clone(),
                variant.clone(),
                step.step.to_string(),
                step.tokens.to_string(),
                format!("{:.4}", step.wall_secs),
                step.train_loss.to_string(),
                step.lr.to_string(),
                step.grad_norm.to_string(),
                format!("{:.1}", step.tokens_per_sec),
                optional(eval.map(|e| e.val_loss)),
                optional(eval.and_then(|e| e.accuracy)),
                optional(eval.and_then(|e| e.sequence_accuracy)),
            ]);
        }
    }
    table(&HEADER, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_quotes_or_newlines_are_quoted_and_others_left_bare() {
        let rows = [["plain", "a,b", "say \"hi\"", "two\nlines", ""].map(String::from)];
        let text = table(&["name", "comma", "quote", "break", "empty"], rows);
        assert_eq!(text, "name,comma,quote,break,empty\nplain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\n");
        let read: Vec<Vec<String>> =
            ::csv::Reader::from_reader(text.as_bytes()).records().map(|r| r.unwrap().iter().map(String::from).collect()).collect();
        assert_eq!(read, [["plain", "a,b", "say \"hi\"", "two\nlines", ""]], "read back as written");
    }

    #[test]
    fn numbers_are_written_as_rust_prints_them_and_absent_ones_empty() {
        assert_eq!(optional(Some(0.25)), "0.25");
        assert_eq!(optional(None), "");
        assert_eq!(table(&["x"], [[optional(Some(3.0))]]), "x\n3\n");
    }
}
