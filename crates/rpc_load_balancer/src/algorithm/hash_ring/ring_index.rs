//! The ring's lookup index: where a key's search starts, by the top bits of its hash.
//!
//! A key's owner is the first point ≥ the key's hash. A binary search over the sorted points
//! is a chain of dependent loads (10 at 8 members × 128 points; perf put 43 % of a keyed
//! pick's samples on one step of it). The points' hashes are uniform, so cutting the ring
//! into `2^k` equal arcs by the hash's top `k` bits, one to two points an arc on average,
//! leaves a search over the few points of one arc (0–3 as a rule). The answer is the binary
//! search's, position for position.

/// Per bucket `b` of the ring's `2^bits` equal arcs, the position of the first point whose
/// hash is ≥ the arc's start `b << (64 − bits)` (the points' length when none is).
///
/// Sized `2^bits`, the largest power of two ≤ the points' count (one entry for an empty ring):
/// one to two points an arc, and at most 4 bytes of index a point (a quarter of its 16).
#[derive(Debug)]
pub(super) struct RingIndex {
    /// `bits` of the bucket number (0 ..= 31).
    bits: u32,
    /// Position of the first point ≥ each bucket's start, in bucket order.
    first: Box<[u32]>,
}

impl RingIndex {
    /// The index of `points`, sorted by hash.
    pub(super) fn new(points: &[(u64, u32)]) -> Self {
        let bits = Self::bits_for(points.len());
        let buckets = 1usize << bits;
        let mut first = Vec::with_capacity(buckets);
        let mut position = 0;
        for bucket in 0..buckets as u64 {
            let arc_start = Self::arc_start(bucket, bits);
            while position < points.len() && points[position].0 < arc_start {
                position += 1;
            }
            // `bits_for` keeps every position below 2^32 (a longer ring has one bucket, at 0).
            first.push(position as u32);
        }
        Self {
            bits,
            first: first.into_boxed_slice(),
        }
    }

    /// The bucket bits for a ring of `points` points: ⌊log2 `points`⌋; 0 for an empty ring,
    /// or one too long for `u32` positions.
    fn bits_for(points: usize) -> u32 {
        if points == 0 || u32::try_from(points).is_err() {
            return 0;
        }
        points.ilog2()
    }

    /// The hash where bucket `bucket` starts: `bucket << (64 − bits)`, 0 for bucket 0.
    fn arc_start(bucket: u64, bits: u32) -> u64 {
        // Two shifts, so that bits = 0 shifts by 64 − 0 without overflow.
        (bucket << 1) << (63 - bits)
    }

    /// The bucket of hash `h`: its top `bits` bits (0 when `bits` is 0).
    #[inline]
    fn bucket(&self, h: u64) -> usize {
        ((h >> 1) >> (63 - self.bits)) as usize
    }

    /// Position of the first of `points` (those the index was built from) whose hash is ≥ `h`,
    /// `points.len()` when none is: `points.partition_point(|p| p.0 < h)`, searching only
    /// `h`'s bucket.
    #[inline]
    pub(super) fn first_at_or_after(&self, points: &[(u64, u32)], h: u64) -> usize {
        let bucket = self.bucket(h);
        let low = self.first[bucket] as usize;
        let high = self
            .first
            .get(bucket + 1)
            .map_or(points.len(), |&next| next as usize);
        // Every point before `low` is below the bucket's start (≤ h), every point from `high`
        // on at or above the next bucket's start (> h).
        low + points[low..high].partition_point(|(point, _)| *point < h)
    }
}
