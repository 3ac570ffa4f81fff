//! The one HTTP stub server of the suite: listens on 127.0.0.1, keeps every
//! request it gets, and answers each as its script says. The fakes of the
//! recording service, the OTLP receiver, the recorder daemon, a release
//! server and a misbehaving MCP server are all this stub with a script.
//!
//! What the stub cannot do (tunnel a connection, write on the socket by
//! hand and watch it) is [`RawServer`]: a bare listener, the one other
//! server of the suite.
//!
//! The script runs on the stub's own thread, one request at a time and in
//! the order they came, and sees every earlier request; the answer is then
//! written from a thread of its own, so an answer that takes its time (a
//! paced stream, a held request) never delays the next request.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::wait::scaled;

/// One request the stub received, as it came (the body undecoded).
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target: the path and any query string.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the stub read it.
    pub at: Instant,
}

impl Request {
    /// The first header of that name (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The first of `headers` named `name` (any case): what every view of a
/// request the fakes keep looks a header up with.
pub fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// How the stub answers one request.
pub enum Reply {
    /// This status, no header, the body `{}`.
    Status(u16),
    /// Status, headers, body.
    With(u16, Vec<(String, String)>, Vec<u8>),
    /// A response built with `tiny_http` (a body read as it is sent).
    Response(tiny_http::ResponseBox),
    /// Holds the request this long (5 s at most), then drops it unanswered.
    Hang(Duration),
}

type Script = Box<dyn FnMut(&Request, &[Request]) -> Reply + Send>;

/// A stub server on 127.0.0.1; it stops when dropped, and by itself after
/// two minutes (scaled by the slowness factor) so a leaked one ends.
pub struct Stub {
    port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
    script: Arc<Mutex<Script>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Stub {
    /// A stub on a free port answering by `script` (given the request and
    /// every earlier one).
    pub fn start(script: impl FnMut(&Request, &[Request]) -> Reply + Send + 'static) -> Stub {
        Stub::on_port(0, script).expect("bind 127.0.0.1")
    }

    /// A stub on `port` (0: any free one), or why that port cannot be had.
    pub fn on_port(
        port: u16,
        script: impl FnMut(&Request, &[Request]) -> Reply + Send + 'static,
    ) -> Result<Stub, String> {
        let server = tiny_http::Server::http(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .ok_or("not an IP address")?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(script)));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, script2, stop2) = (Arc::clone(&seen), Arc::clone(&script), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            let until = Instant::now() + scaled(Duration::from_secs(120));
            while !stop2.load(Ordering::SeqCst) && Instant::now() < until {
                let Ok(Some(mut request)) = server.recv_timeout(Duration::from_millis(20)) else {
                    continue;
                };
                let mut body = Vec::new();
                let _ = request.as_reader().read_to_end(&mut body);
                let got = Request {
                    method: request.method().to_string(),
                    path: request.url().to_owned(),
                    headers: request
                        .headers()
                        .iter()
                        .map(|h| (h.field.to_string(), h.value.to_string()))
                        .collect(),
                    body,
                    at: Instant::now(),
                };
                let reply = {
                    let mut seen = seen2.lock().expect("lock");
                    let reply = (script2.lock().expect("lock"))(&got, &seen);
                    seen.push(got);
                    reply
                };
                thread::spawn(move || answer(request, reply));
            }
        });
        Ok(Stub {
            port,
            seen,
            script,
            stop,
            thread: Some(thread),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("lock").clone()
    }

    /// Forgets the requests so far.
    pub fn clear(&self) {
        self.seen.lock().expect("lock").clear();
    }

    /// Answers from now on by `script`.
    pub fn set_script(&self, script: impl FnMut(&Request, &[Request]) -> Reply + Send + 'static) {
        *self.script.lock().expect("lock") = Box::new(script);
    }

    /// Stops listening and returns once the port is closed: connections
    /// are refused from now on.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.shut();
    }
}

fn answer(request: tiny_http::Request, reply: Reply) {
    let response = match reply {
        Reply::Status(code) => tiny_http::Response::from_string("{}")
            .with_status_code(code)
            .boxed(),
        Reply::With(code, headers, body) => {
            let mut response = tiny_http::Response::from_data(body).with_status_code(code);
            for (k, v) in headers {
                response.add_header(header(&k, &v));
            }
            response.boxed()
        }
        Reply::Response(response) => response,
        Reply::Hang(d) => {
            // The script's hold, not a wait for an event.
            thread::sleep(d.min(Duration::from_secs(5)));
            drop(request);
            return;
        }
    };
    let _ = request.respond(response);
}

/// A header for a [`Reply::Response`] (or a test's own `tiny_http` response).
pub fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("header")
}

/// A bare listener on 127.0.0.1 for the two things the stub cannot do, as
/// `tiny_http` keeps the socket to itself: tunnel a connection (an HTTP
/// proxy's `CONNECT`), and answer on the socket by hand while watching it
/// (a stream that stays silent, where only a read tells that the client
/// closed it). Each connection's request head (see [`read_head`]) and
/// socket go to `handle` on a thread of its own; a connection that closes
/// before a whole head is dropped. Stops accepting when dropped.
pub struct RawServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl RawServer {
    pub fn start(handle: impl Fn(String, TcpStream) + Send + Sync + 'static) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = Arc::new(handle);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let handle = Arc::clone(&handle);
                thread::spawn(move || {
                    if let Some(head) = read_head(&mut conn) {
                        handle(head, conn);
                    }
                });
            }
        });
        RawServer { port, stop }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads an HTTP answer to its end (the server closes the connection):
/// its status (0 when it is not an HTTP answer) and the whole text.
pub fn read_answer(s: &mut impl Read) -> (u16, String) {
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// An HTTP request's head (request line and headers, through the blank
/// line), read a byte at a time so that nothing after it is consumed;
/// `None` if the peer closed first.
pub fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
        if conn.read(&mut byte).unwrap_or(0) == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}
