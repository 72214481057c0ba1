//! An answer's events on their way from the LLM (the embedded engine, or the task reading
//! an upstream's stream) to its [`LlmStream`](super::LlmStream): a channel whose sending
//! side wakes the consumer waiting on it ([`AnswerEvents::wake_on`]), so an async consumer
//! waits for the next event instead of polling on a timer. Dropping the sender wakes it too
//! (it then finds the channel closed).

use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use super::LlmEvent;

/// The waker of whoever waits for the next event.
type Slot = Arc<Mutex<Option<Waker>>>;

/// A new channel for one answer.
pub fn answer_channel() -> (AnswerSender, AnswerEvents) {
    let (tx, rx) = mpsc::channel();
    let waker = Slot::default();
    (
        AnswerSender {
            tx,
            waker: waker.clone(),
        },
        AnswerEvents {
            rx,
            waker,
            early: None,
        },
    )
}

/// The LLM's end.
pub struct AnswerSender {
    tx: mpsc::Sender<LlmEvent>,
    waker: Slot,
}

impl AnswerSender {
    /// Sends an event and wakes the consumer; the event back when the answer was dropped.
    pub fn send(&self, event: LlmEvent) -> Result<(), LlmEvent> {
        self.tx.send(event).map_err(|e| e.0)?;
        self.wake();
        Ok(())
    }

    fn wake(&self) {
        if let Some(w) = self.waker.lock().ok().and_then(|mut w| w.take()) {
            w.wake();
        }
    }
}

impl Drop for AnswerSender {
    fn drop(&mut self) {
        self.wake();
    }
}

/// The stream's end.
pub struct AnswerEvents {
    rx: mpsc::Receiver<LlmEvent>,
    waker: Slot,
    /// An event taken while looking whether one was there.
    early: Option<LlmEvent>,
}

impl AnswerEvents {
    /// The next event if one is there, or why not (`Disconnected`: the LLM's end is gone).
    pub fn try_recv(&mut self) -> Result<LlmEvent, TryRecvError> {
        match self.early.take() {
            Some(ev) => Ok(ev),
            None => self.rx.try_recv(),
        }
    }

    /// Wakes `waker` at the next event, or at once when one (or the end) is already there.
    pub fn wake_on(&mut self, waker: &Waker) {
        if let Ok(mut slot) = self.waker.lock() {
            *slot = Some(waker.clone());
        }
        // Registered first, then looked: an event sent in between wakes it anyway.
        if self.early.is_some() {
            return waker.wake_by_ref();
        }
        match self.rx.try_recv() {
            Ok(ev) => {
                self.early = Some(ev);
                waker.wake_by_ref();
            }
            Err(TryRecvError::Disconnected) => waker.wake_by_ref(),
            Err(TryRecvError::Empty) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_sender_wakes_the_waiting_consumer_and_its_drop_does_too() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let woken = || count.0.load(Ordering::SeqCst);
        let (tx, mut rx) = answer_channel();
        rx.wake_on(&waker);
        assert_eq!(woken(), 0, "nothing there yet");
        tx.send(LlmEvent::Text("a".into())).unwrap();
        assert_eq!(woken(), 1);
        // Already there when it registers: woken at once, and the event is not lost.
        tx.send(LlmEvent::Done).unwrap();
        assert!(matches!(rx.try_recv(), Ok(LlmEvent::Text(_))));
        rx.wake_on(&waker);
        assert_eq!(woken(), 2);
        assert!(matches!(rx.try_recv(), Ok(LlmEvent::Done)));
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
        rx.wake_on(&waker);
        drop(tx);
        assert_eq!(woken(), 3, "the end wakes it");
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    }
}
