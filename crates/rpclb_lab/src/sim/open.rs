//! The calls still open for their callers, oldest first: a list linked through the calls
//! themselves. Every call has the same timeout, so the oldest open call is the next to time
//! out; a call that ends leaves the list at once. (A FIFO of every call's deadline held an
//! entry per call issued in the last timeout — at 6 million calls a simulated second in
//! `large`, 150 MB — and popped each one, ended or not.)

use super::{Sim, NIL};

impl Sim<'_> {
    /// Appends `call`, just issued, as the newest open call.
    pub(super) fn open(&mut self, call: u32) {
        let newest = self.open_newest;
        let c = &mut self.calls[call as usize];
        c.older = newest;
        c.newer = NIL;
        if newest == NIL {
            self.open_oldest = call;
        } else {
            self.calls[newest as usize].newer = call;
        }
        self.open_newest = call;
    }

    /// Removes `call`, which ended for its caller.
    pub(super) fn close(&mut self, call: u32) {
        let c = &self.calls[call as usize];
        let (older, newer) = (c.older, c.newer);
        if older == NIL {
            self.open_oldest = newer;
        } else {
            self.calls[older as usize].newer = newer;
        }
        if newer == NIL {
            self.open_newest = older;
        } else {
            self.calls[newer as usize].older = older;
        }
    }

    /// When the oldest open call times out, and which it is.
    pub(super) fn next_timeout(&self) -> Option<(u64, u32)> {
        (self.open_oldest != NIL).then(|| {
            let call = self.open_oldest;
            (self.calls[call as usize].issued + self.timeout_ns, call)
        })
    }
}
