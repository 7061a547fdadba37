//! LDAP's message framing, without sockets: each LDAPMessage is a BER SEQUENCE with its
//! length up front (RFC 4511 §4.1.1, §5.1), so the proxy can split the bytes going by into
//! messages and read each one's id and operation. Bytes that are not LDAP, or a message
//! longer than [`MAX_MESSAGE`], make the stream opaque: the proxy then forwards it as it
//! comes instead of buffering without bound.

/// The longest message the proxy buffers whole: far above any search or entry of the lab's
/// directory (one `inetOrgPerson` per recipient).
pub const MAX_MESSAGE: usize = 1 << 20;

/// What the front of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A whole message, taken off the buffer.
    Message(Vec<u8>),
    /// The start of a message: more bytes are needed.
    Need,
    /// Not an LDAP message the proxy can frame (a bad length or one over
    /// [`MAX_MESSAGE`]): forward the rest as it comes.
    Opaque,
}

/// One BER element's header at the start of `buf`: `Ok(Some((tag, header length, total
/// length)))`, `Ok(None)` when the header is not all there yet, `Err(())` when it is not a
/// definite length LDAP allows.
fn header(buf: &[u8]) -> Result<Option<(u8, usize, usize)>, ()> {
    let (Some(&tag), Some(&first)) = (buf.first(), buf.get(1)) else {
        return Ok(None);
    };
    if first < 0x80 {
        return Ok(Some((tag, 2, 2 + first as usize)));
    }
    let n = (first & 0x7f) as usize;
    if n == 0 || n > 4 {
        // Indefinite or absurd lengths never occur in LDAP (RFC 4511 §5.1).
        return Err(());
    }
    let Some(bytes) = buf.get(2..2 + n) else {
        return Ok(None);
    };
    let len = bytes.iter().fold(0usize, |a, b| (a << 8) | *b as usize);
    Ok(Some((tag, 2 + n, 2 + n + len)))
}

/// Takes the next whole message off the front of `buf`, if there is one.
pub fn next(buf: &mut Vec<u8>) -> Next {
    match header(buf) {
        Err(()) => Next::Opaque,
        Ok(None) => Next::Need,
        Ok(Some((_, _, total))) if total > MAX_MESSAGE => Next::Opaque,
        Ok(Some((_, _, total))) if buf.len() < total => Next::Need,
        Ok(Some((_, _, total))) => Next::Message(buf.drain(..total).collect()),
    }
}

/// The message id's bytes and the operation's tag of a whole LDAPMessage; `None` when it
/// is not shaped like one.
pub fn operation(msg: &[u8]) -> Option<(Vec<u8>, u8)> {
    let (_, head, _) = header(msg).ok()??;
    let body = msg.get(head..)?;
    let (_, id_head, id_len) = header(body).ok()??;
    let id = body.get(id_head..id_len)?.to_vec();
    Some((id, *body.get(id_len)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SearchRequest with message id 2 (as ldapsearch sends it, trimmed to the op tag)
    // and a SearchResultDone for it.
    const SEARCH: &[u8] = &[0x30, 0x07, 0x02, 0x01, 0x02, 0x63, 0x02, 0x04, 0x00];
    const DONE: &[u8] = &[
        0x30, 0x0c, 0x02, 0x01, 0x02, 0x65, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00,
    ];

    #[test]
    fn messages_are_split_whole_and_read_for_their_id_and_operation() {
        let mut buf = [SEARCH, DONE, &DONE[..5]].concat();
        assert_eq!(next(&mut buf), Next::Message(SEARCH.to_vec()));
        assert_eq!(next(&mut buf), Next::Message(DONE.to_vec()));
        assert_eq!(next(&mut buf), Next::Need);
        assert_eq!(buf, DONE[..5].to_vec());
        assert_eq!(operation(SEARCH), Some((vec![2], 0x63)));
        assert_eq!(operation(DONE), Some((vec![2], 0x65)));
    }

    #[test]
    fn a_long_form_length_is_read() {
        let mut long = vec![0x30, 0x82, 0x01, 0x00];
        long.extend(std::iter::repeat_n(0u8, 256));
        assert_eq!(header(&long), Ok(Some((0x30, 4, 260))));
        assert_eq!(header(&long[..3]), Ok(None));
        assert_eq!(next(&mut long[..100].to_vec()), Next::Need);
    }

    #[test]
    fn what_cannot_be_framed_or_is_too_long_is_opaque_not_buffered() {
        // Indefinite length, a five-byte length, and 16 MiB declared.
        for bytes in [
            &[0x30, 0x80, 0x00][..],
            &[0x30, 0x85, 1, 0, 0, 0, 0][..],
            &[0x30, 0x84, 0x01, 0x00, 0x00, 0x00][..],
        ] {
            assert_eq!(next(&mut bytes.to_vec()), Next::Opaque, "{bytes:?}");
        }
        assert_eq!(operation(&[0x30, 0x03, 0x02, 0x05, 0x01]), None);
    }
}
