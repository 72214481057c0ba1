//! Small socket helpers shared by the media engine and the WebRTC client.

use std::net::UdpSocket;
use std::time::Duration;

/// Waits until `socket` is readable or `wait` passed, with a high-resolution timer (`ppoll`
/// sleeps on an hrtimer; socket read timeouts round up to scheduler ticks, which made ticks
/// milliseconds late).
pub fn readable(socket: &UdpSocket, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let n = unsafe { libc::ppoll(&mut fds, 1, &ts, std::ptr::null()) };
    n > 0 && fds.revents & libc::POLLIN != 0
}
