//! The tests' fake API server (`tests/support/fake_apiserver.rs`) and the modules it is made
//! of, for the benches that observe and apply over real HTTP. One list, so a new part of the
//! fake reaches every bench at once.

#[path = "../../tests/support/fake_apiserver.rs"]
#[allow(dead_code)]
pub mod fake_apiserver;
#[path = "../../tests/support/port_forward.rs"]
#[allow(dead_code)]
pub mod port_forward;
#[path = "../../tests/support/quantity.rs"]
#[allow(dead_code)]
pub mod quantity;
#[path = "../../tests/support/schema.rs"]
#[allow(dead_code)]
pub mod schema;
#[path = "../../tests/support/ssa.rs"]
#[allow(dead_code)]
pub mod ssa;
