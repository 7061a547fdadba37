//! Process limits and privileges: many connections need many file descriptors; labs and
//! mounts need root.

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
    }
    lim.rlim_cur
}

/// The hard RLIMIT_NOFILE: the most descriptors this process can get ([`raise_nofile`]
/// raises the soft limit to it).
pub fn nofile_hard() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: getrlimit only writes the struct passed by pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    if ok { lim.rlim_max } else { 0 }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    euid == 0
}
