//! Work split over the cores: rayon's current pool (the one flex uses, or the pool a caller
//! installed for its run). In the browser that pool is the page's one thread.

/// Below this many floating-point operations a task list runs on the calling thread: waking a
/// worker costs more than the work.
const PARALLEL_MIN_FLOPS: usize = 1 << 16;

/// `task(i)` for every i in 0..tasks, in parallel when the total work (`flops`) is worth it.
/// Returns the results in order.
pub(crate) fn map<R: Send>(tasks: usize, flops: usize, task: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if tasks > 1 && flops >= PARALLEL_MIN_FLOPS && rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        return (0..tasks).into_par_iter().map(task).collect();
    }
    (0..tasks).map(task).collect()
}

/// Contiguous ranges that split `len` items into about one chunk per thread (at least
/// `min_chunk` items each), for row-wise kernels.
pub(crate) fn chunks(len: usize, min_chunk: usize) -> Vec<std::ops::Range<usize>> {
    let threads = rayon::current_num_threads();
    let count = (len / min_chunk.max(1)).clamp(1, 4 * threads);
    let size = len.div_ceil(count);
    (0..len).step_by(size.max(1)).map(|start| start..(start + size).min(len)).collect()
}

/// `task(start, span)` for contiguous spans of `values` (from [`chunks`]), in parallel when the
/// work (`flops_per_value` each) is worth it; `start` is the span's first index.
pub(crate) fn for_spans(values: &mut [f32], min_chunk: usize, flops_per_value: usize, task: impl Fn(usize, &mut [f32]) + Sync + Send) {
    let len = values.len();
    let spans = chunks(len, min_chunk);
    let shared = SharedMut::new(values);
    map(spans.len(), len * flops_per_value, |i| {
        let span = spans[i].clone();
        // SAFETY: the spans are disjoint and lie in `values`, which outlives the parallel section.
        task(span.start, unsafe { shared.slice(span.start, span.len()) });
    });
}

/// A raw pointer that tasks may share: each task writes a region no other task touches.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut {
    start: *mut f32,
    /// Elements the buffer holds (or may hold, for its capacity): debug builds check every
    /// access against it.
    len: usize,
}

// SAFETY: tasks using a `SharedMut` write disjoint regions (each kernel says which), and the
// buffer outlives the parallel section.
unsafe impl Send for SharedMut {}
// SAFETY: as for Send: no two tasks touch the same element.
unsafe impl Sync for SharedMut {}

impl SharedMut {
    pub(crate) fn new(buffer: &mut [f32]) -> Self {
        Self { start: buffer.as_mut_ptr(), len: buffer.len() }
    }

    /// The spare capacity of `buffer`, for tasks that write all of it before anything reads
    /// it; the caller then sets the buffer's length.
    pub(crate) fn of_capacity(buffer: &mut Vec<f32>) -> Self {
        Self { start: buffer.as_mut_ptr(), len: buffer.capacity() }
    }

    /// Pointer to element `offset`.
    ///
    /// # Safety
    /// `offset` must lie in the buffer.
    pub(crate) unsafe fn at(self, offset: usize) -> *mut f32 {
        debug_assert!(offset < self.len, "element {offset} of a buffer of {}", self.len);
        // SAFETY: `offset` lies in the buffer (the caller's promise).
        unsafe { self.start.add(offset) }
    }

    /// The region [start, start + len) as a slice.
    ///
    /// # Safety
    /// No other live slice may overlap the region, and it must lie in the buffer.
    pub(crate) unsafe fn slice<'a>(self, start: usize, len: usize) -> &'a mut [f32] {
        debug_assert!(start.checked_add(len).is_some_and(|end| end <= self.len), "[{start}, +{len}) of a buffer of {}", self.len);
        // SAFETY: the region lies in the buffer and no other live slice overlaps it (the
        // caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.start.add(start), len) }
    }
}
