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

    /// A lease on the first user from `from` on (in turn, wrapping) with no session open,
    /// or on `from` itself when every user has one: with at least as many users as
    /// sessions at once, no user has two. Two sessions of one user make what one of them
    /// sees ambiguous: an EXPUNGE response may report the other's expunge, which that
    /// one counts too, and a STORE's flags may be the other's.
    pub fn claim(&self, from: usize) -> Lease {
        let n = self.0.len();
        let free = (0..n).map(|k| (from + k) % n).find(|&u| {
            self.0[u]
                .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        });
        match free {
            Some(user) => Lease {
                counts: self.0.clone(),
                user,
            },
            None => self.lease(from),
        }
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
    /// Which user of the plan's list the session logs in as.
    pub fn user(&self) -> usize {
        self.user
    }

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

    #[test]
    fn a_claim_takes_the_next_user_without_a_session_or_shares_when_none_is_free() {
        let live = Live::new(3);
        let first = live.claim(1);
        assert_eq!(first.user(), 1);
        // User 1 is busy: the next in turn.
        let second = live.claim(1);
        assert_eq!(second.user(), 2);
        // Wrapping past the last user.
        let third = live.claim(2);
        assert_eq!(third.user(), 0);
        assert!(first.alone() && second.alone() && third.alone());
        // Every user busy: the one in turn, shared.
        let fourth = live.claim(1);
        assert_eq!(fourth.user(), 1);
        assert!(!first.alone() && !fourth.alone());
        drop(second);
        assert_eq!(
            live.claim(0).user(),
            2,
            "a user whose session ended is free again"
        );
    }
}
