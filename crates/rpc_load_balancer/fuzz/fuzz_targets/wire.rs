//! Hostile bytes from another node: every decoder returns a value or a typed error, and serving
//! the bytes as a call and as a control request replies with something that decodes
//! (`rpc_load_balancer::__fuzz::wire`, which the corpus replay test runs too).
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    rpc_load_balancer::__fuzz::wire(bytes);
});
