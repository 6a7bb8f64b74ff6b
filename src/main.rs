//! QKV Lab's shells around the `qkv-ui` playground: a desktop window (`cargo run --release`)
//! and a browser page (`trunk serve`). Both share eframe's wgpu device with Burn.

mod shell;

#[cfg(not(target_family = "wasm"))]
mod native;
#[cfg(target_family = "wasm")]
mod web;

#[cfg(not(target_family = "wasm"))]
fn main() -> eframe::Result {
    native::run()
}

#[cfg(target_family = "wasm")]
fn main() {
    web::start();
}
