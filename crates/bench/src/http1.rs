//! A minimal HTTP/1.1 keep-alive connection: one request at a time, the
//! answer read whole. The push scenario and the consumers (pop + ack) send
//! through it, as the Redis scenarios send through `resp.rs`: the load
//! generator shares the machine with the broker, and a general client's own
//! work per request (pool, header maps, body streams) took CPU the broker
//! would otherwise have had (docs/benchmarks.md, item 18). `http://` only,
//! like the broker's tests.

use std::fmt::Write as _;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// What an answer says that the scenarios read.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// `x-regina-leader`, when the answer names the leader.
    pub leader: Option<String>,
    pub body: Vec<u8>,
}

/// One node's connection, opened at the first request and again after the
/// server closed it (or a request failed on it).
pub struct Http1 {
    host: String,
    stream: Option<Stream>,
    /// `REGINA_TOKEN`, sent as the bearer token of every request.
    token: Option<String>,
    out: Vec<u8>,
}

struct Stream {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

impl Http1 {
    /// A connection to `base` (`http://host:port`), not opened yet.
    pub fn new(base: &str) -> Result<Http1, String> {
        let host = base
            .strip_prefix("http://")
            .ok_or_else(|| format!("{base}: the bench's HTTP/1.1 connection speaks plain http:// only"))?
            .trim_end_matches('/');
        Ok(Http1 { host: host.to_string(), stream: None, token: std::env::var("REGINA_TOKEN").ok(), out: Vec::new() })
    }

    /// Whether the connection is open (it was opened and not closed since).
    pub fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// Sends a JSON `POST` and reads its answer.
    pub async fn post(&mut self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Answer, String> {
        self.send("POST", path, headers, body).await
    }

    /// Sends a `GET` (`path` with its query) and reads its answer.
    pub async fn get(&mut self, path: &str) -> Result<Answer, String> {
        self.send("GET", path, &[], b"").await
    }

    async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Answer, String> {
        let mut head = String::with_capacity(256);
        let _ = write!(head, "{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.host);
        if method == "POST" {
            let _ = write!(head, "content-type: application/json\r\ncontent-length: {}\r\n", body.len());
        }
        if let Some(token) = &self.token {
            let _ = write!(head, "authorization: Bearer {token}\r\n");
        }
        for (name, value) in headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        head.push_str("\r\n");
        self.out.clear();
        self.out.extend_from_slice(head.as_bytes());
        self.out.extend_from_slice(body);
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => self.stream.insert(Stream::open(&self.host).await?),
        };
        let answer = stream.exchange(&self.out).await.map_err(|e| format!("{}: {e}", self.host));
        if !matches!(answer, Ok((_, true))) {
            // Closed by the server, or in an unknown state after an error.
            self.stream = None;
        }
        answer.map(|(answer, _)| answer)
    }
}

impl Stream {
    async fn open(host: &str) -> Result<Stream, String> {
        let stream = TcpStream::connect(host).await.map_err(|e| format!("connect {host}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (read, write) = stream.into_split();
        Ok(Stream { read: BufReader::with_capacity(64 << 10, read), write })
    }

    /// Sends one request and reads its answer, and whether the connection
    /// stays open after it.
    async fn exchange(&mut self, request: &[u8]) -> Result<(Answer, bool), String> {
        self.write.write_all(request).await.map_err(|e| format!("send: {e}"))?;
        self.answer().await.map_err(|e| format!("answer: {e}"))
    }

    async fn answer(&mut self) -> Result<(Answer, bool), String> {
        let mut line = String::new();
        self.line(&mut line).await?;
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 status line: {line:?}"))?;
        let (mut length, mut chunked, mut leader, mut open) = (None, false, None, true);
        loop {
            self.line(&mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else { return Err(format!("bad header {header:?}")) };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().map_err(|_| format!("content-length {value:?}"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("x-regina-leader") {
                leader = Some(value.to_string());
            } else if name.eq_ignore_ascii_case("connection") {
                open = !value.eq_ignore_ascii_case("close");
            }
        }
        let body = match (chunked, length) {
            (true, _) => self.chunks(&mut line).await?,
            (false, Some(n)) => self.exactly(n).await?,
            (false, None) => return Err("an answer with neither a length nor chunks".into()),
        };
        Ok((Answer { status, leader, body }, open))
    }

    async fn chunks(&mut self, line: &mut String) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            self.line(line).await?;
            let size = line.trim_end().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size.trim(), 16).map_err(|_| format!("chunk size {size:?}"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while {
                    self.line(line).await?;
                    !line.trim_end().is_empty()
                } {}
                return Ok(body);
            }
            body.extend_from_slice(&self.exactly(size).await?);
            self.line(line).await?;
        }
    }

    async fn exactly(&mut self, n: usize) -> Result<Vec<u8>, String> {
        let mut body = vec![0; n];
        self.read.read_exact(&mut body).await.map_err(|e| e.to_string())?;
        Ok(body)
    }

    async fn line(&mut self, line: &mut String) -> Result<(), String> {
        line.clear();
        match self.read.read_line(line).await {
            Ok(0) => Err("the connection closed".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Answers each request read from one connection with the next canned
    /// answer.
    async fn serve(answers: Vec<&'static str>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut read = BufReader::new(read);
            for answer in answers {
                let mut length = 0;
                let mut line = String::new();
                loop {
                    line.clear();
                    read.read_line(&mut line).await.unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                read.read_exact(&mut body).await.unwrap();
                write.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn reads_sized_and_chunked_answers_on_one_connection() {
        let url = serve(vec![
            "HTTP/1.1 201 Created\r\nContent-Length: 4\r\nX-Regina-Leader: 127.0.0.1:9\r\n\r\n[{}]",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n",
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        ])
        .await;
        let mut c = Http1::new(&url).unwrap();
        assert!(!c.is_open());
        let a = c.post("/api/v1/push", &[("x-queen-tenant", "t")], b"{}").await.unwrap();
        assert_eq!((a.status, a.leader.as_deref(), &a.body[..]), (201, Some("127.0.0.1:9"), &b"[{}]"[..]));
        let b = c.post("/api/v1/push", &[], b"{\"items\":[]}").await.unwrap();
        assert_eq!((b.status, &b.body[..]), (200, &b"abcde"[..]));
        assert!(c.is_open());
        let d = c.get("/api/v1/pop/queue/q?batch=1").await.unwrap();
        assert_eq!((d.status, d.body.len(), c.is_open()), (503, 0, false));
        // The server closed, and listens no more: the next request opens a
        // new connection, which is refused.
        assert!(c.post("/api/v1/push", &[], b"").await.is_err());
    }
}
