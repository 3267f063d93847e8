//! The fleet's event channel: every daemon publishes its events; each one
//! relays the others' to its own subscribers (`/api/v1/events?fleet=1`,
//! `idpool slots --watch --fleet`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::Cluster;

/// Relay the fleet's events (their JSON) into `tx` until `stop`; a lost
/// subscription is made again a second later.
pub async fn relay_events(
    cluster: Arc<Cluster>,
    tx: broadcast::Sender<String>,
    stop: CancellationToken,
) {
    let channel = cluster.key_of(&["events"]);
    while !stop.is_cancelled() {
        let connect = async {
            let mut ps = cluster.client.get_async_pubsub().await?;
            ps.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(ps)
        };
        let ps = match tokio::time::timeout(cluster.timeout, connect).await {
            Ok(Ok(ps)) => Some(ps),
            _ => None,
        };
        if let Some(ps) = ps {
            let mut stream = ps.into_on_message();
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    msg = stream.next() => match msg {
                        Some(m) => {
                            if let Ok(text) = m.get_payload::<String>() {
                                // No subscriber is fine.
                                let _ = tx.send(text);
                            }
                        }
                        None => break,
                    },
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
