//! `qkv serve`: lends this machine's devices to runs on other machines (`--remote ws://HOST:PORT`),
//! through Burn's remote backend: the run sends each operation here, this process runs it on its
//! devices, and the run reads back what it needs (the gradients, the loss).

use clap::Args;

use crate::Failure;
use crate::compute::Backend;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// TCP port to listen on, on every interface.
    #[arg(long, default_value_t = 3000)]
    pub port: u16,
    /// The backend whose devices are lent.
    #[arg(long, default_value = "flex")]
    pub backend: Backend,
    /// How many of the backend's devices to lend (GPU backends).
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
}

/// Serves until the process is interrupted (Ctrl+C or SIGTERM).
#[cfg(feature = "remote")]
pub fn run(args: &ServeArgs) -> Result<(), Failure> {
    use qkv_model::burn::tensor::server::{RemoteServer, WebSocketTransport};
    let (devices, port) = (pollster::block_on(args.backend.devices(args.devices))?, args.port);
    // The listener is bound before the banner, so "listening" is true when it is printed and a
    // port in use is an error here rather than in the server's log.
    let listener = std::net::TcpListener::bind(("0.0.0.0", port))
        .map_err(|e| format!("cannot listen on port {port} ({e}): pick another with --port"))?;
    let names: Vec<String> = devices.iter().map(|d| format!("{d:?}")).collect();
    eprintln!(
        "qkv serve: lending {} on ws://0.0.0.0:{port}; on another machine, train with `--remote ws://THIS-HOST:{port}` \
         (the same qkv release). Ctrl+C stops.",
        names.join(", ")
    );
    RemoteServer::new(devices).serve(WebSocketTransport::from_listener(listener))?;
    Ok(())
}

#[cfg(not(feature = "remote"))]
pub fn run(_args: &ServeArgs) -> Result<(), Failure> {
    Err(Box::new(qkv_compute::ComputeError::NoRemote))
}
