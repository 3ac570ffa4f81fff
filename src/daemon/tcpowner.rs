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
//! [`parse_row`] is a pure parser of a table's line; [`socket_uid`] and
//! [`listener_uid`] are the thin readers over it. A table that cannot be read at all
//! (no `/proc`, another OS) is [`Lookup::Unavailable`]: callers then rely on
//! the token alone, as on macOS.
//!
//! Cost: the tables list every TCP socket of the network namespace
//! (`TIME_WAIT` ones too), so one lookup reads them line by line and stops
//! at the first match.

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

/// The owner of the socket whose local address is `local` and remote
/// address is `remote`, from the kernel's tables.
pub(crate) fn socket_uid(local: SocketAddr, remote: SocketAddr) -> Lookup {
    scan(|row| row.is(local, remote))
}

/// The owner of the socket listening where `127.0.0.1:port` leads.
pub(crate) fn listener_uid(port: u16) -> Lookup {
    scan(|row| row.listens_on(port))
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
        assert_eq!(find_listener(&table, 2024), Some(0), "0.0.0.0 reaches loopback");
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
        assert_eq!(socket_uid(peer, server), Lookup::Owner(me), "the peer's end");
        assert_eq!(socket_uid(server, peer), Lookup::Owner(me), "the server's end");
        assert_eq!(listener_uid(server.port()), Lookup::Owner(me));
        drop((client, accepted));
        let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = gone.local_addr().expect("addr").port();
        drop(gone);
        assert_eq!(listener_uid(port), Lookup::NotFound);
    }
}
