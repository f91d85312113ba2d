//! The descriptor the Python loop waits on (`loop.add_reader`): readable from `signal` until `reset`. Linux: an
//! eventfd (one descriptor, one 8-byte write/read). Elsewhere (the wheel also builds for macOS and Windows): a
//! connected socket pair, one byte written, all read back. Thread-safe: any thread may signal or reset.

use std::io;

#[cfg(target_os = "linux")]
pub struct Notify {
    fd: std::os::fd::OwnedFd,
}

#[cfg(target_os = "linux")]
impl Notify {
    pub fn new() -> io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: eventfd returns a fresh descriptor we own, or -1
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a valid descriptor nobody else owns
        Ok(Notify {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn fd(&self) -> i64 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd() as i64
    }

    pub fn signal(&self) {
        use std::os::fd::AsRawFd;
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd; EAGAIN (counter full) means it is readable anyway
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub fn reset(&self) {
        use std::os::fd::AsRawFd;
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; EAGAIN means it was not set
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

#[cfg(not(target_os = "linux"))]
mod pair {
    #[cfg(unix)]
    pub type Sock = std::os::unix::net::UnixStream;
    #[cfg(not(unix))]
    pub type Sock = std::net::TcpStream;

    #[cfg(unix)]
    pub fn pair() -> std::io::Result<(Sock, Sock)> {
        Sock::pair()
    }

    /// Windows has no socketpair: a loopback TCP connection.
    #[cfg(not(unix))]
    pub fn pair() -> std::io::Result<(Sock, Sock)> {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let w = Sock::connect(l.local_addr()?)?;
        let (r, _) = l.accept()?;
        Ok((r, w))
    }

    #[cfg(unix)]
    pub fn raw(s: &Sock) -> i64 {
        use std::os::fd::AsRawFd;
        s.as_raw_fd() as i64
    }

    #[cfg(not(unix))]
    pub fn raw(s: &Sock) -> i64 {
        use std::os::windows::io::AsRawSocket;
        s.as_raw_socket() as i64
    }
}

#[cfg(not(target_os = "linux"))]
pub struct Notify {
    reader: pair::Sock,
    writer: pair::Sock,
}

#[cfg(not(target_os = "linux"))]
impl Notify {
    pub fn new() -> io::Result<Self> {
        let (reader, writer) = pair::pair()?;
        reader.set_nonblocking(true)?;
        writer.set_nonblocking(true)?;
        Ok(Notify { reader, writer })
    }

    pub fn fd(&self) -> i64 {
        pair::raw(&self.reader)
    }

    pub fn signal(&self) {
        use std::io::Write;
        // WouldBlock: the buffer is full of unread signals, readable anyway
        let _ = (&self.writer).write(&[1]);
    }

    pub fn reset(&self) {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while let Ok(n) = (&self.reader).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
    }
}
