//! lmstack's benchmarks live in the `benches` of this crate (`parser.rs`,
//! `sse.rs`); run them with `cargo bench -p lmstack-benches`. The crate has no
//! code of its own.
