//! The front's events for the Python loop and the calls it has open: a Mutex<VecDeque> of events and a descriptor
//! (`notify`: an eventfd on Linux) that is readable while events wait (signalled only when the queue goes from empty
//! to non-empty; `drain` resets it and re-arms it when it leaves events behind), and the live calls' outbound channels by call id. A call is live
//! (in `calls`) from its CALL event until Python finishes it or the front cancels it; whichever removes it decides:
//! only the front's removal queues CANCELLED, so a finished call never gets one. Thread-safe (tokio workers push,
//! the Python thread drains and answers).

use crate::notify::Notify;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// A metadata value: text, or the base64-decoded bytes of a `-bin` key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaValue {
    Text(String),
    Binary(Vec<u8>),
}

/// A call's start: its method, metadata, peer, deadline and (not client-streaming) its one request message.
#[derive(Debug)]
pub struct CallStart {
    pub method: String,
    pub metadata: Vec<(String, MetaValue)>,
    pub peer: String,
    pub timeout_s: Option<f64>,
    pub request: Option<Bytes>,
}

#[derive(Debug)]
pub enum Event {
    Call(u64, Box<CallStart>),
    Message(u64, Bytes),
    HalfClose(u64),
    Cancelled(u64),
}

/// What Python sends a call: a framed response message, or the status that ends it.
#[derive(Debug)]
pub enum Outbound {
    Message(Bytes),
    Finish {
        code: u32,
        message: String,
        data: Option<Bytes>,
    },
}

pub struct Events {
    queue: Mutex<VecDeque<Event>>,
    notify: Notify,
    calls: Mutex<HashMap<u64, UnboundedSender<Outbound>>>,
}

impl Events {
    pub fn new() -> io::Result<Self> {
        Ok(Events {
            queue: Mutex::new(VecDeque::new()),
            notify: Notify::new()?,
            calls: Mutex::new(HashMap::new()),
        })
    }

    pub fn fd(&self) -> i64 {
        self.notify.fd()
    }

    pub fn push(&self, event: Event) {
        let was_empty = {
            let mut q = self.queue.lock().unwrap();
            let was_empty = q.is_empty();
            q.push_back(event);
            was_empty
        };
        if was_empty {
            self.notify.signal();
        }
    }

    /// Up to `max` events, oldest first; the eventfd stays readable while any are left.
    pub fn drain(&self, max: usize) -> Vec<Event> {
        self.notify.reset();
        let mut q = self.queue.lock().unwrap();
        let n = q.len().min(max);
        let out: Vec<Event> = q.drain(..n).collect();
        if !q.is_empty() {
            drop(q);
            self.notify.signal();
        }
        out
    }

    /// Registers a live call and queues its CALL event.
    pub fn open_call(&self, id: u64, tx: UnboundedSender<Outbound>, start: CallStart) {
        self.calls.lock().unwrap().insert(id, tx);
        self.push(Event::Call(id, Box::new(start)));
    }

    pub fn is_live(&self, id: u64) -> bool {
        self.calls.lock().unwrap().contains_key(&id)
    }

    /// The front ends a live call (reset, dead connection, deadline, bad input): CANCELLED for Python when it was
    /// still live. Returns whether it was.
    pub fn cancel(&self, id: u64) -> bool {
        let was_live = self.calls.lock().unwrap().remove(&id).is_some();
        if was_live {
            self.push(Event::Cancelled(id));
        }
        was_live
    }

    /// Cancels every live call (the front is closing; their tasks are gone).
    pub fn cancel_all(&self) {
        let ids: Vec<u64> = self
            .calls
            .lock()
            .unwrap()
            .drain()
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            self.push(Event::Cancelled(id));
        }
    }

    /// Python's side: a message for a live call; false when the call is gone.
    pub fn send(&self, id: u64, out: Outbound) -> bool {
        let calls = self.calls.lock().unwrap();
        match calls.get(&id) {
            Some(tx) => tx.send(out).is_ok(),
            None => false,
        }
    }

    /// Python's side: the call's last word; false when the call is gone.
    pub fn finish(&self, id: u64, out: Outbound) -> bool {
        let tx = self.calls.lock().unwrap().remove(&id);
        match tx {
            Some(tx) => tx.send(out).is_ok(),
            None => false,
        }
    }

    pub fn live_calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}
