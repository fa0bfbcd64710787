//! The node's CPU sampler (to be written).

/// How a node measures its CPU load.
#[derive(Debug, Clone, Default)]
pub enum CpuSampler {
    /// The whole machine.
    #[default]
    System,
}
