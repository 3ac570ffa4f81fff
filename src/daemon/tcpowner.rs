//! Who owns a loopback TCP socket: the uid the kernel lists for it in
//! `/proc/net/tcp` and `/proc/net/tcp6` (Linux).
//!
//! Loopback TCP carries no credential of its own, but the kernel names
//! every socket's owner in these tables, readable by every user. Both ends
//! of the daemon's connections use it:
//! * the daemon looks up its *peer's* socket (local address = the peer's,
//!   remote = ours) and refuses another user's connection before reading a
//!   byte of it;
//! * a client looks up the socket at the *other end* of the connection it
//!   just opened (local = the listener's address, remote = ours; while the
//!   kernel still holds it as a half-open request, the listener's uid is
//!   shown) and sends nothing to a listener of another user.
//!
//! How: the kernel's `sock_diag` netlink interface looks one socket up by
//! its exact addresses (a hash lookup: some 20 µs), and names the same
//! owner the tables show. The tables themselves are the fallback where
//! `sock_diag` is missing: [`parse_row`] is a pure parser of a table's
//! line, [`scan`] the reader over it. Reading them is slow — the kernel
//! walks its whole established-connection hash for every read (measured:
//! 20–30 ms for a 159-line table on a 262,144-bucket hash), far too slow
//! for every hook. Where neither can be read (no `/proc`, another OS) a
//! lookup is [`Lookup::Unavailable`]: callers then rely on the token
//! alone, as on macOS.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `st` of a listening socket in the tables.
const LISTEN: u8 = 0x0A;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The socket is there and belongs to this uid.
    Owner(u32),
    /// The tables were read and no socket matched (the peer is gone).
    NotFound,
    /// No table could be read: the OS does not tell.
    Unavailable,
}

/// One row of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
    uid: u32,
}

impl Row {
    /// Whether this is the socket whose local address is `local` and
    /// remote address is `remote` (IPv4-mapped IPv6 addresses compare as
    /// their IPv4 address).
    fn is(&self, local: SocketAddr, remote: SocketAddr) -> bool {
        self.local == plain(local) && self.remote == plain(remote)
    }

    /// Whether this socket listens where a connection to
    /// `127.0.0.1:port` leads (loopback, or every address).
    fn listens_on(&self, port: u16) -> bool {
        self.state == LISTEN
            && self.local.port() == port
            && (self.local.ip().is_loopback() || self.local.ip().is_unspecified())
    }
}

/// `sl local rem st tx:rx tr:when retrnsmt uid …`; `None` for the header
/// or a line of another shape.
fn parse_row(line: &str) -> Option<Row> {
    let mut fields = line.split_ascii_whitespace();
    let slot = fields.next()?;
    if !slot.ends_with(':') {
        return None;
    }
    let local = parse_addr(fields.next()?)?;
    let remote = parse_addr(fields.next()?)?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    // tx_queue:rx_queue, tr:tm->when, retrnsmt, then the uid.
    let uid = fields.nth(3)?.parse().ok()?;
    Some(Row {
        local,
        remote,
        state,
        uid,
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6). The kernel
/// prints each 32-bit word of the address as it lies in memory, read as a
/// native integer, so the bytes are the word's native-endian bytes.
fn parse_addr(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(addr)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(addr.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(plain(SocketAddr::new(ip, port)))
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn plain(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// The owner of the connected socket whose local address is `local` and
/// remote address is `remote` (`NotFound` for one the kernel shows with no
/// owner: a half-open request or a `TIME_WAIT` remnant).
pub(crate) fn socket_uid(local: SocketAddr, remote: SocketAddr) -> Lookup {
    match diag::lookup(local, remote) {
        Some(found) => found,
        None => scan(|row| row.is(local, remote) && row.state != LISTEN),
    }
}

/// The owner of the socket listening on `addr` (what a connection to it
/// reaches: a socket bound to that address or to every address).
pub(crate) fn listener_uid(addr: SocketAddr) -> Lookup {
    let any = SocketAddr::new(
        match addr {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        },
        0,
    );
    match diag::lookup(addr, any) {
        Some(found) => found,
        None => scan(|row| row.listens_on(addr.port())),
    }
}

/// The `sock_diag` exact lookup (Linux): `None` when the interface is not
/// there, so the caller falls back to the tables.
#[cfg(target_os = "linux")]
mod diag {
    use super::{Lookup, plain};
    use std::net::{IpAddr, SocketAddr};
    use std::time::Duration;

    const NETLINK_SOCK_DIAG: libc::c_int = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLMSG_ERROR: u16 = 2;
    /// `inet_diag_sockid.idiag_cookie` meaning "any socket".
    const NO_COOKIE: u32 = !0;
    /// States whose owner the kernel reports as 0 whoever it is: a
    /// `TIME_WAIT` remnant, a half-open request.
    const NO_OWNER_STATES: [u8; 3] = [3, 6, 12];
    /// How long the kernel may take to answer (it answers at once).
    const ANSWER: Duration = Duration::from_millis(200);

    /// `struct nlmsghdr` + `struct inet_diag_req_v2`.
    #[repr(C)]
    struct Request {
        len: u32,
        kind: u16,
        flags: u16,
        seq: u32,
        pid: u32,
        family: u8,
        protocol: u8,
        ext: u8,
        pad: u8,
        states: u32,
        sport: [u8; 2],
        dport: [u8; 2],
        src: [u8; 16],
        dst: [u8; 16],
        interface: u32,
        cookie: [u32; 2],
    }

    /// The socket with local address `local` and remote `remote`, looked up
    /// as an IPv4 socket and then as an IPv6 one (a v6 socket that reached
    /// 127.0.0.1 shows the address mapped).
    pub(super) fn lookup(local: SocketAddr, remote: SocketAddr) -> Option<Lookup> {
        let (local, remote) = (plain(local), plain(remote));
        let as_v4 = local.is_ipv4() && remote.is_ipv4();
        let first = ask(local, remote, as_v4)?;
        if first != Lookup::NotFound || !as_v4 {
            return Some(first);
        }
        ask(local, remote, false)
    }

    fn bytes(ip: IpAddr, v4: bool) -> [u8; 16] {
        let mut out = [0u8; 16];
        match ip {
            IpAddr::V4(a) if v4 => out[..4].copy_from_slice(&a.octets()),
            IpAddr::V4(a) => out = a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => out = a.octets(),
        }
        out
    }

    /// One request and its answer; `None` when `sock_diag` cannot be used.
    fn ask(local: SocketAddr, remote: SocketAddr, v4: bool) -> Option<Lookup> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: a plain socket(2); the fd is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a fresh, valid fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: ANSWER.as_micros() as libc::suseconds_t,
        };
        // SAFETY: a valid timeval and its size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
        let request = Request {
            len: std::mem::size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: NLM_F_REQUEST,
            seq: 1,
            pid: 0,
            family: if v4 { libc::AF_INET } else { libc::AF_INET6 } as u8,
            protocol: libc::IPPROTO_TCP as u8,
            ext: 0,
            pad: 0,
            states: !0,
            sport: local.port().to_be_bytes(),
            dport: remote.port().to_be_bytes(),
            src: bytes(local.ip(), v4),
            dst: bytes(remote.ip(), v4),
            interface: 0,
            cookie: [NO_COOKIE; 2],
        };
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `request` and `kernel` are valid for their sizes.
        let sent = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                (&request as *const Request).cast(),
                std::mem::size_of::<Request>(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return None;
        }
        let mut answer = [0u8; 1024];
        // SAFETY: `answer` is writable for its length.
        let got =
            unsafe { libc::recv(fd.as_raw_fd(), answer.as_mut_ptr().cast(), answer.len(), 0) };
        let got = usize::try_from(got).ok()?;
        super::parse_answer(
            &answer[..got],
            NLMSG_ERROR,
            SOCK_DIAG_BY_FAMILY,
            &NO_OWNER_STATES,
        )
    }
}

#[cfg(not(target_os = "linux"))]
mod diag {
    use super::Lookup;
    use std::net::SocketAddr;

    pub(super) fn lookup(_local: SocketAddr, _remote: SocketAddr) -> Option<Lookup> {
        None
    }
}

/// The kernel's answer to one `sock_diag` lookup: a `struct nlmsghdr`,
/// then either an error (`ENOENT`: no such socket) or a `struct
/// inet_diag_msg`, whose owner uid is at byte 64 and state at byte 1.
/// `None` for an answer that says the interface cannot be used.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_answer(answer: &[u8], error: u16, found: u16, no_owner: &[u8]) -> Option<Lookup> {
    const HEADER: usize = 16;
    let u32_at = |at: usize| {
        answer
            .get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]))?;
    if kind == error {
        // A negative errno; ENOENT is "no such socket", anything else
        // (EINVAL, EPERM…) that the interface is of no use here.
        let errno = -(u32_at(HEADER)? as i32);
        return (errno == libc::ENOENT).then_some(Lookup::NotFound);
    }
    if kind != found {
        return None;
    }
    let state = *answer.get(HEADER + 1)?;
    if no_owner.contains(&state) {
        return Some(Lookup::NotFound);
    }
    u32_at(HEADER + 64).map(Lookup::Owner)
}

/// Reads the tables line by line until a row matches.
fn scan(mut wanted: impl FnMut(&Row) -> bool) -> Lookup {
    if !cfg!(target_os = "linux") {
        return Lookup::Unavailable;
    }
    let mut read_any = false;
    for table in TABLES {
        let Ok(file) = std::fs::File::open(table) else {
            continue;
        };
        read_any = true;
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        let mut line = String::with_capacity(256);
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if let Some(row) = parse_row(&line)
                        && wanted(&row)
                    {
                        return Lookup::Owner(row.uid);
                    }
                }
            }
        }
    }
    if read_any {
        Lookup::NotFound
    } else {
        Lookup::Unavailable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find_uid(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u32> {
        table
            .lines()
            .filter_map(parse_row)
            .find(|r| r.is(local, remote))
            .map(|r| r.uid)
    }

    fn find_listener(table: &str, port: u16) -> Option<u32> {
        table
            .lines()
            .filter_map(parse_row)
            .find(|r| r.listens_on(port))
            .map(|r| r.uid)
    }

    /// Rows as the kernel prints them on a little-endian machine; the
    /// parser reads them natively, so the fixture is built the same way.
    fn v4(a: [u8; 4], port: u16) -> String {
        format!("{:08X}:{port:04X}", u32::from_ne_bytes(a))
    }

    fn v6(a: [u8; 16], port: u16) -> String {
        let mut s = String::new();
        for chunk in a.chunks_exact(4) {
            let word = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            s.push_str(&format!("{word:08X}"));
        }
        format!("{s}:{port:04X}")
    }

    fn row(local: &str, remote: &str, state: u8, uid: u32) -> String {
        format!(
            "   3: {local} {remote} {state:02X} 00000000:00000000 00:00000000 00000000  {uid:>4}        0 10859 2 000000004b341fca 20 0 0 10 -1"
        )
    }

    const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn a_connection_is_found_by_both_addresses_and_names_its_owner() {
        let lo = [127, 0, 0, 1];
        let table = [
            HEADER.to_owned(),
            row(&v4([0; 4], 2024), &v4([0; 4], 0), LISTEN, 0),
            row(&v4(lo, 4000), &v4([0; 4], 0), LISTEN, 1000),
            // The daemon's accepted socket, then the peer's own.
            row(&v4(lo, 4000), &v4(lo, 50000), 1, 1000),
            row(&v4(lo, 50000), &v4(lo, 4000), 1, 65534),
            // The same ports on another address must not match.
            row(&v4([127, 0, 0, 2], 50001), &v4(lo, 4000), 1, 7),
        ]
        .join("\n");
        assert_eq!(
            find_uid(&table, addr("127.0.0.1:50000"), addr("127.0.0.1:4000")),
            Some(65534)
        );
        assert_eq!(
            find_uid(&table, addr("127.0.0.1:4000"), addr("127.0.0.1:50000")),
            Some(1000)
        );
        assert_eq!(
            find_uid(&table, addr("127.0.0.1:50001"), addr("127.0.0.1:4000")),
            None
        );
        assert_eq!(find_listener(&table, 4000), Some(1000));
        assert_eq!(
            find_listener(&table, 2024),
            Some(0),
            "0.0.0.0 reaches loopback"
        );
        assert_eq!(find_listener(&table, 4001), None);
    }

    #[test]
    fn ipv6_rows_and_mapped_addresses() {
        let mut mapped = [0u8; 16];
        mapped[10] = 0xff;
        mapped[11] = 0xff;
        mapped[12..].copy_from_slice(&[127, 0, 0, 1]);
        let mut one = [0u8; 16];
        one[15] = 1;
        let table = [
            HEADER.to_owned(),
            row(&v6(mapped, 50002), &v6(mapped, 4000), 1, 42),
            row(&v6(one, 4100), &v6([0; 16], 0), LISTEN, 43),
        ]
        .join("\n");
        assert_eq!(
            find_uid(&table, addr("127.0.0.1:50002"), addr("127.0.0.1:4000")),
            Some(42),
            "a v4-mapped v6 socket matches its IPv4 address"
        );
        assert_eq!(
            find_uid(
                &table,
                addr("[::ffff:127.0.0.1]:50002"),
                addr("127.0.0.1:4000")
            ),
            Some(42)
        );
        assert_eq!(find_listener(&table, 4100), Some(43));
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let lo = [127, 0, 0, 1];
        let table = [
            "garbage".to_owned(),
            "   1: zzzz:0001 00000000:0000 0A".to_owned(),
            format!("   2: {} {} 01", v4(lo, 1), v4(lo, 2)),
            row(&v4(lo, 1), &v4(lo, 2), 1, 5),
        ]
        .join("\n");
        assert_eq!(
            find_uid(&table, addr("127.0.0.1:1"), addr("127.0.0.1:2")),
            Some(5)
        );
        assert_eq!(find_uid("", addr("127.0.0.1:1"), addr("127.0.0.1:2")), None);
    }

    #[test]
    fn sock_diag_answers() {
        let mut found = vec![0u8; 16 + 72];
        found[4..6].copy_from_slice(&20u16.to_ne_bytes());
        found[17] = 1; // ESTABLISHED
        found[16 + 64..16 + 68].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(parse_answer(&found, 2, 20, &[6]), Some(Lookup::Owner(1000)));
        found[17] = 6; // TIME_WAIT: the kernel names no owner
        assert_eq!(parse_answer(&found, 2, 20, &[6]), Some(Lookup::NotFound));
        let mut error = vec![0u8; 16 + 4];
        error[4..6].copy_from_slice(&2u16.to_ne_bytes());
        error[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse_answer(&error, 2, 20, &[]), Some(Lookup::NotFound));
        error[16..20].copy_from_slice(&(-libc::EINVAL).to_ne_bytes());
        assert_eq!(
            parse_answer(&error, 2, 20, &[]),
            None,
            "unusable: fall back"
        );
        assert_eq!(parse_answer(&[1, 2], 2, 20, &[]), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_names_us_as_the_owner_of_both_ends() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let server = listener.local_addr().expect("addr");
        let client = std::net::TcpStream::connect(server).expect("connect");
        let (accepted, peer) = listener.accept().expect("accept");
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(peer, client.local_addr().expect("local"));
        assert_eq!(
            socket_uid(peer, server),
            Lookup::Owner(me),
            "the peer's end"
        );
        assert_eq!(
            socket_uid(server, peer),
            Lookup::Owner(me),
            "the server's end"
        );
        assert_eq!(listener_uid(server), Lookup::Owner(me));
        assert_eq!(
            diag::lookup(peer, server),
            Some(Lookup::Owner(me)),
            "sock_diag answers, without the tables"
        );
        // The tables say the same as sock_diag.
        assert_eq!(scan(|r| r.is(peer, server)), Lookup::Owner(me));
        assert_eq!(scan(|r| r.listens_on(server.port())), Lookup::Owner(me));
        drop((client, accepted));
        let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = gone.local_addr().expect("addr");
        drop(gone);
        assert_eq!(listener_uid(addr), Lookup::NotFound);
        assert_eq!(socket_uid(peer, addr), Lookup::NotFound);
    }
}
