//! LDAP on the wire, as far as a counting, delaying proxy needs it: where each BER message
//! ends (`frame`).

pub mod frame;
