//! Waiting for sockets with `ppoll`, which sleeps on a high-resolution timer: socket read
//! timeouts round up to scheduler ticks, which would make 20 ms media ticks milliseconds
//! late. The only `unsafe` code of this crate.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A `pollfd` that asks whether `fd` is readable.
pub fn pollin(fd: &impl AsRawFd) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// One `ppoll` over `fds` for up to `wait`; fills in their `revents` and returns how many
/// have events (0 on timeout, and on an error such as an interrupting signal, when the
/// `revents` are all cleared: a caller simply polls again).
pub fn poll(fds: &mut [libc::pollfd], wait: Duration) -> usize {
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd for its length, `ts` a
    // valid timespec, and no signal mask is passed.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        fds.iter_mut().for_each(|f| f.revents = 0);
    }
    usize::try_from(n).unwrap_or(0)
}

/// Waits up to `wait` (one `ppoll`) for any of `sockets`; returns which are readable, in
/// order.
pub fn readable(sockets: &[&UdpSocket], wait: Duration) -> Vec<bool> {
    let mut fds: Vec<libc::pollfd> = sockets.iter().map(|s| pollin(*s)).collect();
    let ready = poll(&mut fds, wait) > 0;
    fds.iter()
        .map(|f| ready && f.revents & libc::POLLIN != 0)
        .collect()
}

/// Waits until `socket` is readable or `wait` passed; returns whether it is readable.
pub fn wait_readable(socket: &UdpSocket, wait: Duration) -> bool {
    let mut fds = [pollin(socket)];
    poll(&mut fds, wait) > 0 && fds[0].revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn waits_precisely_and_reports_which_socket_is_readable() {
        let (a, b) = (
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        );
        let t = Instant::now();
        assert!(!wait_readable(&a, Duration::from_millis(5)));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(5) && waited < Duration::from_millis(50),
            "{waited:?}"
        );
        assert_eq!(readable(&[&a, &b], Duration::ZERO), [false, false]);
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert!(wait_readable(&b, Duration::from_secs(1)));
        assert_eq!(readable(&[&a, &b], Duration::from_secs(1)), [false, true]);
        assert!(readable(&[], Duration::ZERO).is_empty());
    }
}
