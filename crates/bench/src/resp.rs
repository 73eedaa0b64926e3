//! A minimal Redis (RESP2) connection: pipelined commands and their
//! replies. Enough for the peer scenarios (`redis.rs`); no dependency, so
//! the harness measures Redis through the same tokio runtime and the same
//! loopback as it measures Regina.

use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as a text, for bulk and simple strings.
    pub fn text(&self) -> Option<String> {
        match self {
            Reply::Simple(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The elements of an array reply (none for a nil array).
    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(v)) => v,
            _ => &[],
        }
    }
}

pub struct Conn {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    out: Vec<u8>,
    queued: usize,
}

/// `redis://host:port` or `host:port`.
pub fn address(url: &str) -> String {
    url.trim_start_matches("redis://").trim_end_matches('/').to_string()
}

impl Conn {
    pub async fn connect(url: &str) -> Result<Conn, String> {
        let addr = address(url);
        let stream = TcpStream::connect(&addr).await.map_err(|e| format!("connecting to Redis at {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (r, w) = stream.into_split();
        Ok(Conn { reader: BufReader::with_capacity(1 << 16, r), writer: w, out: Vec::new(), queued: 0 })
    }

    /// Queues one command; [`Conn::flush`] sends every queued one at once.
    pub fn queue(&mut self, args: &[&[u8]]) {
        self.out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
        self.queued += 1;
    }

    /// Sends the queued commands and reads their replies, in order.
    pub async fn flush(&mut self) -> Result<Vec<Reply>, String> {
        self.writer.write_all(&self.out).await.map_err(|e| format!("writing to Redis: {e}"))?;
        self.out.clear();
        let mut replies = Vec::with_capacity(self.queued);
        for _ in 0..std::mem::take(&mut self.queued) {
            replies.push(read_reply(&mut self.reader).await.map_err(|e| format!("reading from Redis: {e}"))?);
        }
        Ok(replies)
    }

    /// One command, one reply; an error reply is an error.
    pub async fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.queue(args);
        match self.flush().await?.pop() {
            Some(Reply::Error(e)) => Err(format!("Redis: {e}")),
            Some(r) => Ok(r),
            None => Err("Redis sent no reply".into()),
        }
    }
}

type ReplyFuture<'a> = Pin<Box<dyn Future<Output = std::io::Result<Reply>> + Send + 'a>>;

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Reads one reply (arrays recurse, hence the box).
fn read_reply(r: &mut BufReader<OwnedReadHalf>) -> ReplyFuture<'_> {
    Box::pin(async move {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Err(bad("Redis closed the connection".into()));
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(line.len().min(1));
        let number = || rest.parse::<i64>().map_err(|_| bad(format!("not a RESP length: {line:?}")));
        match kind {
            "+" => Ok(Reply::Simple(rest.to_string())),
            "-" => Ok(Reply::Error(rest.to_string())),
            ":" => Ok(Reply::Int(number()?)),
            "$" => match number()? {
                n if n < 0 => Ok(Reply::Bulk(None)),
                n => {
                    let mut b = vec![0u8; n as usize + 2];
                    r.read_exact(&mut b).await?;
                    b.truncate(n as usize);
                    Ok(Reply::Bulk(Some(b)))
                }
            },
            "*" => match number()? {
                n if n < 0 => Ok(Reply::Array(None)),
                n => {
                    let mut items = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        items.push(read_reply(r).await?);
                    }
                    Ok(Reply::Array(Some(items)))
                }
            },
            _ => Err(bad(format!("not a RESP reply: {line:?}"))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers whatever it is sent with `canned`, once.
    async fn canned(canned: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address").to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("a connection");
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            s.write_all(canned).await.expect("an answer");
        });
        addr
    }

    #[tokio::test]
    async fn pipelined_replies_of_every_kind_read_in_order() {
        let addr = canned(b"+OK\r\n-ERR no\r\n:42\r\n$-1\r\n*2\r\n*2\r\n$3\r\nk:1\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\ns\r\n$1\r\n7\r\n*-1\r\n").await;
        let mut c = Conn::connect(&format!("redis://{addr}")).await.expect("connected");
        for _ in 0..5 {
            c.queue(&[b"PING"]);
        }
        let r = c.flush().await.expect("replies");
        assert_eq!(
            r[..4],
            [Reply::Simple("OK".into()), Reply::Error("ERR no".into()), Reply::Int(42), Reply::Bulk(None)]
        );
        let stream = &r[4].items()[0];
        assert_eq!(stream.items()[0].text().as_deref(), Some("k:1"));
        let entry = &stream.items()[1].items()[0];
        assert_eq!(entry.items()[0].text().as_deref(), Some("1-0"));
        assert_eq!(entry.items()[1].items()[1].text().as_deref(), Some("7"));
        assert_eq!(r[4].items()[1], Reply::Array(None));
    }
}
