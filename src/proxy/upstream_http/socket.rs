//! Shutting down a connection ureq does not hand out: found among the
//! process's descriptors by its two addresses.

use super::*;

/// Shuts down the TCP connection between `local` and `peer`, so that a
/// thread blocked reading it returns (end of stream) at once. ureq 2 does
/// not hand out its sockets: the connection is found among the process's
/// descriptors (Linux `/proc/self/fd`) by its two addresses, which name one
/// connected socket. Elsewhere, or if it is already gone, nothing happens.
pub(super) fn shut_down_connection(local: SocketAddr, peer: SocketAddr) {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in fds.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if socket_addr(fd, libc::getsockname) == Some(local)
            && socket_addr(fd, libc::getpeername) == Some(peer)
        {
            // SAFETY: shutdown takes a descriptor number and no memory; on
            // one that is not (or no longer) a socket it fails harmlessly.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            return;
        }
    }
}

pub(super) type NameFn =
    unsafe extern "C" fn(libc::c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> libc::c_int;

/// A socket's own (`getsockname`) or peer (`getpeername`) address, if
/// `fd` is an IP socket.
pub(super) fn socket_addr(fd: libc::c_int, name: NameFn) -> Option<SocketAddr> {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` is writable for `len` bytes, as the call requires.
    let rc = unsafe { name(fd, (&raw mut storage).cast(), &raw mut len) };
    if rc != 0 {
        return None;
    }
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let v4: libc::sockaddr_in = unsafe { *(&raw const storage).cast() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(v4.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let v6: libc::sockaddr_in6 = unsafe { *(&raw const storage).cast() };
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                v6.sin6_addr.s6_addr.into(),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_shut_down_by_its_addresses() {
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");
        let (local, peer) = (
            client.local_addr().expect("local"),
            client.peer_addr().expect("peer"),
        );
        assert_eq!(
            socket_addr(client.as_raw_fd(), libc::getsockname),
            Some(local)
        );
        assert_eq!(
            socket_addr(client.as_raw_fd(), libc::getpeername),
            Some(peer)
        );
        shut_down_connection(local, peer);
        // The server sees the end of the stream; the client cannot read.
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(server.read(&mut [0u8; 8]).expect("read"), 0);
        assert_eq!((&client).read(&mut [0u8; 8]).expect("read"), 0);
        let _ = client.shutdown(Shutdown::Both);
    }
}
