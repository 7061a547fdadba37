//! Octet-level helpers shared by the IMAP response readers (`response` and its fast path
//! `fetch_scan`): what ends an atom, the fingerprint that stands for a structure, text
//! from octets. A file of their own so that neither reader imports the other's.

/// The octets an atom ends at: a space, parentheses, brackets, a line end.
pub(super) const ATOM_STOPS: [bool; 256] = stops(b" ()[]\r\n");

/// A table true at each of `octets`.
pub(super) const fn stops(octets: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < octets.len() {
        t[octets[i] as usize] = true;
        i += 1;
    }
    t
}

/// Text as a String, with U+FFFD for what is not UTF-8 (as `String::from_utf8_lossy`,
/// whose octet-by-octet walk costs several times the fast check that valid text passes).
pub(super) fn text(octets: &[u8]) -> String {
    match std::str::from_utf8(octets) {
        Ok(t) => t.to_owned(),
        Err(_) => String::from_utf8_lossy(octets).into_owned(),
    }
}

/// A 64-bit fingerprint of `bytes`, eight octets per step (a multiply and a shift each):
/// ENVELOPE and BODYSTRUCTURE of every message listed go through it, so it must cost far
/// less than reading them. Not for adversaries, only for telling versions apart.
pub(super) fn fingerprint64(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
        h ^= h >> 29;
    }
    let mut w = [0u8; 8];
    w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
    h ^ (h >> 32)
}
