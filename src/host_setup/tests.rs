//! Unit tests of the pure plan.

use super::*;
