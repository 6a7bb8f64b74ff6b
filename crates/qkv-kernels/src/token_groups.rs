//! A batch's positions grouped by token, made on the host where the batch is made. On a GPU the
//! token table's gradient (`cube::embed`) adds up each token's rows of the output's gradient by
//! these groups: two launches whose units each add at most [`RUN`] values a channel, whatever the
//! batch, and no atomics (which no browser has for floats). Burn's scatter gives a unit a channel
//! and loops it over every position of the batch.

/// Values a unit adds up for a channel in one group: a run of one token's positions (the first
/// launch), or of one token's runs (the second).
pub(crate) const RUN: usize = 64;

/// The positions of a [batch, time] batch of tokens (row-major), grouped by token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGroups {
    /// Every position, ordered by its token (a token's positions in their own order).
    order: Vec<u32>,
    /// The runs of at most [`RUN`] positions of one token in `order`: (token, first index).
    runs: Vec<(i64, u32)>,
}

/// What the kernels read for a table of `vocab` tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Positions by token, as [`TokenGroups`] orders them, without tokens outside the table.
    pub order: Vec<i32>,
    /// Run j covers `order[run_starts[j]..run_starts[j + 1]]`.
    pub run_starts: Vec<i32>,
    /// Token v's runs are `token_runs[v]..token_runs[v + 1]` (none for a token not in the batch).
    pub token_runs: Vec<i32>,
    /// The loop of the second launch: [`RUN`], or a multiple of it where a token has more runs
    /// than that (more than RUN² positions).
    pub span: usize,
}

impl TokenGroups {
    /// The groups of `tokens`, a batch's tokens in row-major order.
    pub fn of(tokens: &[i64]) -> Self {
        let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
        order.sort_by_key(|&position| tokens[position as usize]);
        let mut runs = Vec::new();
        for (index, &position) in order.iter().enumerate() {
            let token = tokens[position as usize];
            let starts_run = match runs.last() {
                Some(&(last, start)) => last != token || index - start as usize == RUN,
                None => true,
            };
            if starts_run {
                runs.push((token, index as u32));
            }
        }
        Self { order, runs }
    }

    /// Positions grouped.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The layout for a table of `vocab` tokens: tokens outside it (which the embedding cannot
    /// read either) belong to no group.
    pub(crate) fn layout(&self, vocab: usize) -> Layout {
        let in_table = |token: i64| usize::try_from(token).is_ok_and(|t| t < vocab);
        let mut order = Vec::with_capacity(self.order.len());
        let mut run_starts = Vec::with_capacity(self.runs.len() + 1);
        let mut runs_of = vec![0usize; vocab];
        for (j, &(token, start)) in self.runs.iter().enumerate() {
            if !in_table(token) {
                continue;
            }
            let end = self.runs.get(j + 1).map_or(self.order.len(), |&(_, next)| next as usize);
            run_starts.push(order.len() as i32);
            order.extend(self.order[start as usize..end].iter().map(|&p| p as i32));
            runs_of[token as usize] += 1;
        }
        run_starts.push(order.len() as i32);
        let mut token_runs = Vec::with_capacity(vocab + 1);
        let mut total = 0;
        token_runs.push(0);
        for runs in &runs_of {
            total += runs;
            token_runs.push(total as i32);
        }
        let most = runs_of.iter().copied().max().unwrap_or(0);
        Layout { order, run_starts, token_runs, span: RUN * most.div_ceil(RUN).max(1) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_grouped_by_token_in_runs_of_at_most_run() {
        // Token 3 at 150 positions (three runs), 1 at two, 7 at one; 9 lies outside a table of 8.
        let mut tokens = vec![3i64; 150];
        tokens[10] = 1;
        tokens[100] = 1;
        tokens[20] = 7;
        tokens[30] = 9;
        let groups = TokenGroups::of(&tokens);
        assert_eq!(groups.len(), 150);
        let layout = groups.layout(8);
        // Every position of a token in the table, once, in runs of one token.
        assert_eq!(layout.order.len(), 149);
        assert_eq!(&layout.order[..2], &[10, 100]);
        let runs: Vec<_> = layout.run_starts.windows(2).map(|w| (w[0] as usize, w[1] as usize)).collect();
        assert!(runs.iter().all(|&(start, end)| end > start && end - start <= RUN));
        for (v, window) in layout.token_runs.windows(2).enumerate() {
            for &(start, end) in &runs[window[0] as usize..window[1] as usize] {
                assert!(layout.order[start..end].iter().all(|&p| tokens[p as usize] == v as i64), "token {v}");
            }
        }
        // Token 3's 146 positions take three runs; 0, 2, 4, 5 and 6 none.
        assert_eq!(layout.token_runs, vec![0, 0, 1, 1, 4, 4, 4, 4, 5]);
        assert_eq!(layout.span, RUN);
        // A token at more than RUN² positions takes a longer second loop.
        let many = TokenGroups::of(&vec![0; RUN * RUN + 1]).layout(1);
        assert_eq!((many.token_runs, many.span), (vec![0, RUN as i32 + 1], 2 * RUN));
        assert_eq!(TokenGroups::of(&[]).layout(3), Layout { order: vec![], run_starts: vec![0], token_runs: vec![0; 4], span: RUN });
    }
}
