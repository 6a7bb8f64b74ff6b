//! Metrics as CSV: what `qkv train` writes and the app exports, one format for both.

use crate::run::Run;

/// One row per step and run; val columns are filled at the steps where an evaluation ran.
pub fn metrics_csv(runs: &[Run]) -> String {
    let mut out = String::from("run,variant,step,tokens,wall_secs,train_loss,lr,grad_norm,tokens_per_sec,val_loss,accuracy,sequence_accuracy\n");
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for run in runs {
        let variant = run.spec.model.attention.variant;
        // Step-0 evaluations have no training step to sit beside.
        for eval in run.metrics.evals.iter().filter(|e| e.step == 0) {
            out += &format!(
                "{},{variant},0,0,0,,,,,{},{},{}\n",
                run.spec.name,
                eval.val_loss,
                opt(eval.accuracy),
                opt(eval.sequence_accuracy)
            );
        }
        for step in &run.metrics.steps {
            let eval = run.metrics.evals.iter().find(|e| e.step == step.step);
            out += &format!(
                "{},{variant},{},{},{:.4},{},{},{},{:.1},{},{},{}\n",
                run.spec.name,
                step.step,
                step.tokens,
                step.wall_secs,
                step.train_loss,
                step.lr,
                step.grad_norm,
                step.tokens_per_sec,
                opt(eval.map(|e| e.val_loss)),
                opt(eval.and_then(|e| e.accuracy)),
                opt(eval.and_then(|e| e.sequence_accuracy)),
            );
        }
    }
    out
}
