//! A stub OpenAI-compatible endpoint on loopback for tests: it answers each
//! chat-completion request with whatever the test's function returns, and
//! records the requests. It serves a bounded number of requests and stops
//! when dropped.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the stub answers: an HTTP status and a body.
pub type Answer = (u16, String);

pub struct StubServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// The most requests the stub was answering at once.
    pub peak_in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    address: std::net::SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// A chat completion whose message content is `content`.
pub fn completion(content: &str) -> Answer {
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    });
    (200, body.to_string())
}

impl StubServer {
    /// Serves at most `limit` requests; `respond` gets each request body and its index.
    pub fn start(
        limit: usize,
        respond: impl Fn(&Value, usize) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::start_slow(limit, Duration::ZERO, respond)
    }

    /// [`StubServer::start`], answering each request after `delay`, each
    /// connection on its own thread (so that requests can overlap).
    pub fn start_slow(
        limit: usize,
        delay: Duration,
        respond: impl Fn(&Value, usize) -> Answer + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding loopback");
        let address = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let peak_in_flight = Arc::new(AtomicUsize::new(0));
        let (seen, stopped, peak) = (requests.clone(), stop.clone(), peak_in_flight.clone());
        let respond = Arc::new(respond);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn(move || {
            std::thread::scope(|scope| {
                for (index, stream) in listener.incoming().take(limit).enumerate() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (seen, peak, respond, in_flight) =
                        (&seen, &peak, respond.clone(), in_flight.clone());
                    scope.spawn(move || {
                        let Some(body) = read_request(&stream) else {
                            return;
                        };
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(delay);
                        let (status, answer) = respond(&body, index);
                        seen.lock().unwrap().push(body);
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        write_response(stream, status, &answer);
                    });
                }
            });
        });
        Self {
            url: format!("http://{address}/v1"),
            requests,
            peak_in_flight,
            stop,
            address,
            thread: Some(thread),
        }
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn read_request(stream: &TcpStream) -> Option<Value> {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn write_response(mut stream: TcpStream, status: u16, body: &str) {
    let reason = if status == 200 { "OK" } else { "Error" };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}
