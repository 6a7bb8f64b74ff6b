//! QKV Lab's shells around the `qkv-ui` playground: a desktop window (`cargo run --release`)
//! and a browser page (`trunk serve`). Both share eframe's wgpu device with Burn.

mod shell;

#[cfg(not(target_family = "wasm"))]
mod native;
#[cfg(target_family = "wasm")]
mod web;
#[cfg(target_family = "wasm")]
mod worker;

/// Training allocates and frees the same large tensors every step; see `qkv_allocator`.
#[cfg(not(target_family = "wasm"))]
#[global_allocator]
static ALLOCATOR: qkv_allocator::Allocator = qkv_allocator::Allocator;

#[cfg(not(target_family = "wasm"))]
fn main() -> eframe::Result {
    qkv_allocator::keep_freed_pages();
    native::run()
}

/// The page starts the app; a worker that the page started for training runs its session.
#[cfg(target_family = "wasm")]
fn main() {
    match worker::worker_scope() {
        Some(scope) => worker::run_session(scope),
        None => web::start(),
    }
}
