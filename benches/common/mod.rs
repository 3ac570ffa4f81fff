//! Helpers the benchmarks share (each bench is its own binary; this module
//! is compiled into those that say `mod common;`).

/// A numeric knob from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
