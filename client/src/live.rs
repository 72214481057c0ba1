//! One WebSocket realtime session driven in real time, for the turn-taking benchmarks: a
//! reader task stamps every event with its arrival, and audio is appended 20 ms at a time on
//! the wall clock, as a microphone would send it, with the events that arrived meanwhile
//! handed to the caller as they come.

use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Sink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// A connected session.
pub struct LiveSession {
    tx: Sink,
    events: mpsc::UnboundedReceiver<(Instant, Value)>,
}

impl LiveSession {
    /// Connects to `url` (`ws://HOST:PORT/v1/realtime?...`).
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        let (tx, mut rx) = ws.split();
        let (events_tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(Message::Text(t))) = rx.next().await {
                if let Ok(v) = serde_json::from_str::<Value>(&t) {
                    let _ = events_tx.send((Instant::now(), v));
                }
            }
        });
        Ok(Self { tx, events })
    }

    /// Sends one client event.
    pub async fn send(&mut self, event: Value) -> anyhow::Result<()> {
        self.tx
            .send(Message::Text(event.to_string().into()))
            .await?;
        Ok(())
    }

    /// Appends 24 kHz `audio` as `audio/pcm` in 20 ms events paced by the wall clock, handing
    /// every event that arrives meanwhile to `on_event` with its arrival. Returns when the
    /// first chunk was sent: the audio's sample `n` reaches the server about `n / 24` ms
    /// later.
    pub async fn append_live(
        &mut self,
        audio: &[f32],
        mut on_event: impl FnMut(Instant, &Value),
    ) -> anyhow::Result<Instant> {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut started = None;
        for chunk in audio.chunks(480) {
            tick.tick().await;
            started.get_or_insert_with(Instant::now);
            let bytes: Vec<u8> = chunk
                .iter()
                .flat_map(|&s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
                .collect();
            let audio = base64::engine::general_purpose::STANDARD.encode(bytes);
            self.send(json!({"type":"input_audio_buffer.append","audio":audio}))
                .await?;
            while let Ok((at, v)) = self.events.try_recv() {
                on_event(at, &v);
            }
        }
        Ok(started.unwrap_or_else(Instant::now))
    }

    /// Hands every event to `on_event` until `stop` says so (true) or `timeout` passes;
    /// returns whether `stop` did.
    pub async fn events_until(
        &mut self,
        timeout: Duration,
        mut stop: impl FnMut(Instant, &Value) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while let Ok(Some((at, v))) = tokio::time::timeout_at(deadline, self.events.recv()).await {
            if stop(at, &v) {
                return true;
            }
        }
        false
    }

    /// Closes the socket (best effort).
    pub async fn close(mut self) {
        let _ = self.tx.close().await;
    }
}
