//! `k3d-gpu schema`: the JSON Schema of k3dgpu.toml, or the Markdown reference built from it.

use crate::cli::SchemaArgs;
use crate::error::{EXIT_OK, Result};

pub fn run(args: &SchemaArgs) -> Result<u8> {
    if args.markdown {
        super::print_bytes(crate::config::docs::markdown().as_bytes());
    } else {
        super::print_bytes(&crate::config::docs::schema_bytes());
    }
    Ok(EXIT_OK)
}
