//! Incremental scanners shared by the dialects: each takes text in pieces of any
//! size, keeps only the state it needs between pieces, and never looks at a byte
//! twice.

pub(crate) mod json;
pub(crate) mod marker;
pub(crate) mod string;
pub(crate) mod tag;
