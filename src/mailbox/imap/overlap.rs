//! Which users have more than one session open at once. A STORE's own FETCH shows the
//! message's flags as they are when the server answers, and another session of the same
//! user may change them in between (the server is right, the check would not be): the
//! flags check runs only while its session is its user's only one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Open sessions per user (by the user's index in the plan).
#[derive(Debug)]
pub struct Live(Arc<[AtomicU32]>);

impl Live {
    /// No session open yet, for `users` users.
    pub fn new(users: usize) -> Live {
        Live((0..users).map(|_| AtomicU32::new(0)).collect())
    }

    /// Counts a session of `user` open until the lease is dropped.
    pub fn lease(&self, user: usize) -> Lease {
        if let Some(n) = self.0.get(user) {
            n.fetch_add(1, Ordering::Relaxed);
        }
        Lease {
            counts: self.0.clone(),
            user,
        }
    }
}

/// One open session of a user: counted while it lives, however the session ends.
#[derive(Debug)]
pub struct Lease {
    counts: Arc<[AtomicU32]>,
    user: usize,
}

impl Lease {
    /// True while no other session of the same user is open.
    pub fn alone(&self) -> bool {
        self.counts
            .get(self.user)
            .is_none_or(|n| n.load(Ordering::Relaxed) <= 1)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(n) = self.counts.get(self.user) {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_alone_until_a_second_session_opens_and_again_after_it_ends() {
        let live = Live::new(2);
        let a = live.lease(0);
        assert!(a.alone());
        let other_user = live.lease(1);
        assert!(a.alone(), "another user's session is no overlap");
        let b = live.lease(0);
        assert!(!a.alone() && !b.alone());
        drop(b);
        assert!(a.alone() && other_user.alone());
    }
}
