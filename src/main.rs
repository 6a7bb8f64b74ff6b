//! QKV Lab's shells around the `qkv-ui` playground: a desktop window (`cargo run --release`)
//! and a browser page (`trunk serve`). Both share eframe's wgpu device with Burn.

// What the browser cannot do (clippy.toml's `disallowed-methods`) is an error in its build.
#![cfg_attr(target_arch = "wasm32", warn(clippy::disallowed_methods))]

mod shell;

#[cfg(not(target_family = "wasm"))]
mod native;
#[cfg(target_family = "wasm")]
mod web;

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
    match web::worker::worker_scope() {
        Some(scope) => web::worker::run_session(scope),
        None => web::start(),
    }
}
