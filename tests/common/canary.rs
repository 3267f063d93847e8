//! A canary listener on 127.0.0.2 (standing in for a private or link-local
//! address): it records every connection and the request line it got.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// What reached the canary.
#[derive(Clone, Default)]
pub struct Canary {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Canary {
    /// Listen on 127.0.0.2:0; every connection is answered `200 ok` and closed.
    pub async fn start() -> Canary {
        let listener = TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind 127.0.0.2");
        let port = listener.local_addr().expect("addr").port();
        let canary = Canary {
            port,
            seen: Arc::default(),
        };
        let seen = canary.seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut reader = BufReader::new(stream);
                    let mut line = String::new();
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        reader.read_line(&mut line),
                    )
                    .await;
                    seen.lock().push(line.trim().to_string());
                    let mut stream = reader.into_inner();
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\naccess-control-allow-origin: *\r\nconnection: close\r\n\r\nok")
                        .await;
                });
            }
        });
        canary
    }

    /// `127.0.0.2:<port>`
    pub fn addr(&self) -> String {
        format!("127.0.0.2:{}", self.port)
    }

    /// The first line of every connection so far.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().clone()
    }
}
