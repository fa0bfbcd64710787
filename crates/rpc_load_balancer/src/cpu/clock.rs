//! The process-wide monotonic clock CPU readings are timed on: the one in [`crate::load`]
//! (the routing core's system clock reads it too).

pub(crate) use crate::load::clock::now_ms;
