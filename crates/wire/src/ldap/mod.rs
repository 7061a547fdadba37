//! LDAP on the wire, as far as a counting, delaying proxy needs it.

pub mod frame;
