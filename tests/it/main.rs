//! Integration tests against real servers (one test binary).
