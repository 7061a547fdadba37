//! The UDP side of the server: OS threads, each blocking in `recvmmsg` on a socket, that
//! answer up to [`BATCH`] queries per wake-up (from the reply cache when they can), send
//! the replies with one `sendmmsg`, and count the whole batch under one lock. Several
//! threads may share one socket (`--threads`): the kernel hands each datagram to one of
//! them. A delayed answer waits in a task of the async runtime, never in the thread.
//!
//! Why threads and batches: nearly all the time of a UDP query is the kernel's (two
//! system calls and the loopback delivery). NSD takes queries 64 at a time with
//! `recvmmsg` and answers with `sendmmsg`; an async loop pays one `recvfrom`, one
//! `sendto` and an `epoll_wait` whenever the queue runs dry. A blocking `recvmmsg` with
//! `MSG_WAITFORONE` sleeps until a query comes and then takes all that are waiting.

use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{
    ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg, sendmmsg,
};

use super::answer::{Answer, Transport};
use super::cache::AnswerCache;
use super::shared::{MAX_DELAYED, Shared};

/// Most queries taken in one system call (NSD takes 64 too).
pub const BATCH: usize = 64;
/// Room for one query: a query is one question and at most an OPT record, a few hundred
/// bytes; a longer datagram is cut here (and then is no readable query).
pub const SLOT: usize = 4096;
/// How often a thread with nothing to do looks whether the server is stopping.
pub const WAKE: Duration = Duration::from_millis(100);

/// Makes `s` a socket the serving threads can block on: blocking, waking every [`WAKE`].
pub fn prepare(s: &UdpSocket) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(WAKE))
}

/// Serves `sock` until `stop` is set, recording into shard `shard` of `sh`; delayed
/// answers are spawned on `rt`.
pub fn serve(
    sock: Arc<UdpSocket>,
    sh: Arc<Shared>,
    stop: Arc<AtomicBool>,
    shard: usize,
    rt: tokio::runtime::Handle,
) {
    let fd = sock.as_raw_fd();
    let mut bufs = vec![0u8; BATCH * SLOT];
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut got: Vec<(usize, Option<SockaddrStorage>)> = Vec::with_capacity(BATCH);
    let mut answers: Vec<(Answer, SockaddrStorage, IpAddr)> = Vec::with_capacity(BATCH);
    let mut rng = fastrand::Rng::new();
    // The query log wants every question's name: it goes the slow way.
    let mut cache = sh.log_off().then(AnswerCache::default);
    while !stop.load(Ordering::Relaxed) {
        got.clear();
        {
            let mut iovs: Vec<[IoSliceMut; 1]> = bufs
                .chunks_mut(SLOT)
                .map(|c| [IoSliceMut::new(c)])
                .collect();
            // An error is the wake-up timeout (EAGAIN), a signal, or an ICMP error of an
            // earlier send (the client went away): look at `stop` and wait again.
            match recvmmsg(
                fd,
                &mut recv_headers,
                iovs.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(msgs) => got.extend(msgs.map(|m| (m.bytes, m.address))),
                Err(_) => continue,
            }
        }
        let t0 = Instant::now();
        let at = sh.rule_time(t0);
        answers.clear();
        for (k, (n, from)) in got.iter().enumerate() {
            let (Some(from), Some(ip)) = (from, from.as_ref().and_then(ip_of)) else {
                continue; // an unconnected UDP socket always has the sender's address
            };
            let packet = &bufs[k * SLOT..k * SLOT + (*n).min(SLOT)];
            let mut a = match &mut cache {
                Some(c) => c.answer(&sh.responder, packet, at, &mut rng),
                None => sh.responder.respond(packet, Transport::Udp, at, &mut rng),
            };
            if !a.delay.is_zero() {
                if sh.delayed.fetch_add(1, Ordering::Relaxed) < MAX_DELAYED
                    && let Some(to) = socket_addr(from)
                {
                    delay(&rt, sock.clone(), sh.clone(), a, to, t0);
                    continue;
                }
                sh.delayed.fetch_sub(1, Ordering::Relaxed);
                a.delay = Duration::ZERO;
                sh.count_shed();
            }
            answers.push((a, *from, ip));
        }
        send_all(fd, &mut send_headers, &answers);
        sh.record(
            shard,
            Transport::Udp,
            t0,
            answers.iter().map(|(a, _, ip)| (a, *ip)),
        );
    }
}

/// Sends `a`'s reply to `to` after its delay, from a task of `rt`, and counts it then.
fn delay(
    rt: &tokio::runtime::Handle,
    sock: Arc<UdpSocket>,
    sh: Arc<Shared>,
    a: Answer,
    to: SocketAddr,
    t0: Instant,
) {
    rt.spawn(async move {
        tokio::time::sleep(a.delay).await;
        // The socket blocks, but a UDP send only waits for room in its (4 MiB) buffer.
        if let Some(r) = &a.reply {
            let _ = sock.send_to(r, to);
        }
        sh.delayed.fetch_sub(1, Ordering::Relaxed);
        sh.record(0, Transport::Udp, t0, [(&a, to.ip())]);
    });
}

/// Sends every reply of `answers` with as few `sendmmsg` calls as the kernel allows.
fn send_all(
    fd: RawFd,
    headers: &mut MultiHeaders<SockaddrStorage>,
    answers: &[(Answer, SockaddrStorage, IpAddr)],
) {
    let out: Vec<(&[u8], SockaddrStorage)> = answers
        .iter()
        .filter_map(|(a, to, _)| a.reply.as_deref().map(|r| (r, *to)))
        .collect();
    let mut done = 0;
    while done < out.len() {
        let iovs: Vec<[IoSlice; 1]> = out[done..].iter().map(|(r, _)| [IoSlice::new(r)]).collect();
        let addrs: Vec<Option<SockaddrStorage>> =
            out[done..].iter().map(|(_, a)| Some(*a)).collect();
        let no_cmsgs: [ControlMessage; 0] = [];
        match sendmmsg(fd, headers, &iovs, addrs, no_cmsgs, MsgFlags::empty()) {
            Ok(sent) => done += sent.count().max(1),
            Err(Errno::EINTR) => {}
            // The first reply could not go (e.g. an unreachable address): the others can.
            Err(_) => done += 1,
        }
    }
}

/// The IP address of a sender.
fn ip_of(s: &SockaddrStorage) -> Option<IpAddr> {
    socket_addr(s).map(|a| a.ip())
}

/// A sender's address as std writes it.
fn socket_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::from(*v4));
    }
    s.as_sockaddr_in6().map(|v6| SocketAddr::from(*v6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_addresses_read_back_as_std_writes_them() {
        for a in ["127.0.0.1:53", "[::1]:5353"] {
            let a: SocketAddr = a.parse().expect("address");
            assert_eq!(socket_addr(&SockaddrStorage::from(a)), Some(a));
            assert_eq!(ip_of(&SockaddrStorage::from(a)), Some(a.ip()));
        }
    }
}
