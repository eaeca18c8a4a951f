//! Back-pressure on stdio. rmcp's loop reads the next request while earlier answers still wait
//! to be written, each answer in a task of its own: a client that sends calls and never reads
//! its output made the server hold every answer (15,000 calls: 970 MB). This transport stops
//! reading while [`MAX_OUTSTANDING`] requests are unanswered, an answer counting until it has
//! been written. A request the client cancels stops counting (rmcp drops its answer); `apply`
//! never counts, since it may wait on the person's answer to its form, which must be read.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::watch;

/// The most requests read and not yet answered on the wire: enough for an agent's parallel
/// calls, and a bound on what a client that never reads can make the server hold.
pub const MAX_OUTSTANDING: usize = 32;

/// The requests read whose answer is not written yet, and their count for [`Bounded::receive`]
/// to wait on.
#[derive(Clone)]
struct Outstanding {
    ids: Arc<Mutex<HashSet<RequestId>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Outstanding {
    fn change(&self, f: impl FnOnce(&mut HashSet<RequestId>)) {
        // A panic while holding it cannot leave the set half-changed: each change is one call.
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut ids);
        self.count.send_replace(ids.len());
    }
}

/// A transport that reads only while fewer than [`MAX_OUTSTANDING`] requests wait for their
/// answer to be written.
pub struct Bounded<T> {
    inner: T,
    outstanding: Outstanding,
    waiting: watch::Receiver<usize>,
}

impl<T> Bounded<T> {
    pub fn new(inner: T) -> Bounded<T> {
        let (count, waiting) = watch::channel(0);
        Bounded { inner, outstanding: Outstanding { ids: Arc::default(), count: Arc::new(count) }, waiting }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Bounded<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), T::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let outstanding = self.outstanding.clone();
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            // Written (or the client is gone): it no longer holds memory here.
            if let Some(id) = answered {
                outstanding.change(|ids| {
                    ids.remove(&id);
                });
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        // Cancel-safe: rmcp polls this in a select!, and waiting reads nothing.
        if self.waiting.wait_for(|n| *n < MAX_OUTSTANDING).await.is_err() {
            return None;
        }
        let message = self.inner.receive().await?;
        match &message {
            // `apply` is not counted: it may wait for the person's answer, which is read here.
            JsonRpcMessage::Request(r) if !is_apply(&r.request) => {
                let id = r.id.clone();
                self.outstanding.change(|ids| {
                    ids.insert(id);
                });
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = c.params.request_id.clone()
                {
                    self.outstanding.change(|ids| {
                        ids.remove(&id);
                    });
                }
            }
            _ => {}
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), T::Error>> + Send {
        self.inner.close()
    }
}

fn is_apply(request: &ClientRequest) -> bool {
    matches!(request, ClientRequest::CallToolRequest(call) if call.params.name == "apply")
}
