//! The defaults of the scenario format's fields: the baseline cluster.

pub(super) fn members() -> usize {
    4
}
pub(super) fn callers() -> usize {
    4
}
pub(super) fn capacity() -> u32 {
    8
}
pub(super) fn network_delay_us() -> f64 {
    50.0
}
pub(super) fn timeout_ms() -> f64 {
    1_000.0
}
pub(super) fn warmup_s() -> f64 {
    10.0
}
pub(super) fn measure_s() -> f64 {
    60.0
}
pub(super) fn open_loop() -> Vec<f64> {
    vec![0.5, 0.85]
}
pub(super) fn closed_loop_tasks() -> Option<usize> {
    Some(16)
}
pub(super) fn zipf_s() -> f64 {
    1.0
}
pub(super) fn key_count() -> u64 {
    100_000
}
pub(super) fn cpu_sample_interval_ms() -> f64 {
    1_000.0
}
/// Whether `ms` is the default sampling interval (then a report leaves it out, and reports
/// of scenarios that do not set it keep their bytes).
#[allow(clippy::trivially_copy_pass_by_ref, clippy::float_cmp)]
pub(super) fn is_cpu_sample_interval_ms(ms: &f64) -> bool {
    *ms == cpu_sample_interval_ms()
}
