//! Apply: run a plan — only if it still hashes the same — in dependency order, then verify.
//! The executor is generic over a [`executor::Runner`]; the providers (k3d, Kubernetes,
//! verify) are the only code that changes the world. Their errors are `error::ApplyError`.

pub mod error;
pub mod executor;
pub mod k3d;
pub mod kubernetes;
pub mod lock;
pub mod node_check;
pub mod node_image;
pub mod port_forward;
pub mod providers;
pub mod registries;
pub mod verify;
