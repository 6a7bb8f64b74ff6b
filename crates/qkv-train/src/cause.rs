//! Another library's error kept as the cause of one of ours.

use std::sync::Arc;

/// A cause from another library (tokenizers, serde, Burn's stores, …), kept whole so that the
/// chain reaches whoever reads the error (the CLI prints each cause once); shared, so that the
/// errors holding one stay cloneable.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// `error` as a [`Cause`].
pub fn cause(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
    Arc::new(error)
}
