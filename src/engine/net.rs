//! The media engine's socket helpers: a high-resolution wait (`ppoll` sleeps on an hrtimer;
//! socket read timeouts round up to scheduler ticks, which made 20 ms ticks milliseconds
//! late) with an eventfd waker, so that commands reach a thread blocked on its socket at
//! once, and the receive buffer size.

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn timespec(wait: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    }
}

fn ppoll(fds: &mut [libc::pollfd], wait: Duration) -> i32 {
    let ts = timespec(wait);
    // SAFETY: `fds` is a valid array of pollfd for its length, `ts` a valid timespec, no mask.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Asks for a receive buffer of `bytes` on `socket` (the kernel caps it at `rmem_max`):
/// a media socket shared by every call must ride out a stall of its thread, or a flood,
/// without dropping the calls' own packets (the default holds ~2.5 ms at 100k packets/s).
/// Returns the size the kernel granted.
pub fn set_recv_buffer(socket: &UdpSocket, bytes: usize) -> std::io::Result<usize> {
    let set = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_RCVBUF takes and returns a c_int; both pointers are valid for `size`.
    unsafe {
        if libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&set as *const libc::c_int).cast(),
            size,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let mut got: libc::c_int = 0;
        let mut len = size;
        if libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(got.max(0) as usize)
    }
}

/// Wakes a thread that waits in [`Waker::wait`].
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A new non-blocking eventfd.
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Wakes the waiting thread (coalesces: many wakes, one wake-up).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd; failure (counter full) is fine.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Waits until `socket` is readable, the waker fired, or `wait` passed. Returns whether
    /// the socket is readable; a wake is consumed.
    pub fn wait(&self, socket: &UdpSocket, wait: Duration) -> bool {
        let mut fds = [pollfd(socket.as_raw_fd()), pollfd(self.fd.as_raw_fd())];
        if ppoll(&mut fds, wait) <= 0 {
            return false;
        }
        if fds[1].revents & libc::POLLIN != 0 {
            let mut buf = 0u64;
            // SAFETY: reads 8 bytes into a valid u64 from our non-blocking eventfd.
            let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
        }
        fds[0].revents & libc::POLLIN != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn waker_interrupts_a_wait_and_timeouts_are_precise() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let waker = std::sync::Arc::new(Waker::new().unwrap());
        let t = Instant::now();
        assert!(!waker.wait(&socket, Duration::from_millis(5)));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(5) && waited < Duration::from_millis(50),
            "{waited:?}"
        );
        let w = waker.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w.wake();
        });
        let t = Instant::now();
        assert!(!waker.wait(&socket, Duration::from_secs(5)));
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the wake ended the wait"
        );
        h.join().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        assert!(waker.wait(&socket, Duration::from_secs(1)));
    }
}
