//! The stdio transport: one JSON-RPC message a line, as rmcp's own, but a line that is no
//! message is answered as JSON-RPC 2.0 says instead of dropped: `-32700 Parse error` for a
//! line that is not JSON (rmcp ignores it), `-32600 Invalid Request` for JSON that is not a
//! message (rmcp answers with no `id` at all), each with `"id": null` — the line's own id
//! where it has one a request could carry and the object has `method` — and the server reads
//! on. A notification that does not parse is never answered (JSON-RPC answers no
//! notification), nor is an object without `method` (a malformed response: its id is one the
//! server chose, and an error with it would fail the client's own request of that id); stderr
//! says so, in one escaped line. An answer to bad input is
//! valid JSON, so a peer that echoes it sends a response, not another bad line: no storm.
//!
//! A line is at most [`MAX_LINE`] bytes (rmcp's limit), never buffered past it: a longer one
//! is skipped to its end and answered as a parse error. Every message is written whole by one
//! writer task, so a send that rmcp stops waiting for never leaves half a line on stdout.

use std::future::Future;
use std::io;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The longest line read: rmcp's `DEFAULT_MAX_LINE_LENGTH`.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// One line to write, and who waits until it is written.
type Job = (Vec<u8>, oneshot::Sender<io::Result<()>>);

/// A JSON-RPC transport over a reader and a writer, one message per line.
pub struct Lines<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Skipping the rest of a line longer than [`MAX_LINE`] (kept here: `receive` is polled
    /// in a `select!` and may stop mid-line).
    skipping: bool,
    /// The answer to a bad line, queued and not yet written: read no further until it is, so
    /// a client that sends bad lines and never reads cannot make answers pile up.
    answering: Option<oneshot::Receiver<io::Result<()>>>,
    write: Option<mpsc::UnboundedSender<Job>>,
}

impl<R: AsyncRead + Unpin + Send> Lines<R> {
    /// Starts the writer task: call inside the runtime.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W) -> Lines<R> {
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            answering: None,
            write: Some(writer(write)),
        }
    }

    /// Queues `bytes` (a line) for the writer; the receiver says when it is written.
    fn queue(&self, bytes: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        let (done, written) = oneshot::channel();
        if let Some(write) = &self.write {
            // A closed writer drops `done`: the receiver then reads as failed.
            let _ = write.send((bytes, done));
        }
        written
    }

    /// The next whole line into `self.line` (with its `\n`, if it has one: the last line of
    /// the input may not); `Ok(false)` at the end of input; `Err(())` for a line past
    /// [`MAX_LINE`] bytes (its newline aside), skipped.
    async fn next_line(&mut self) -> io::Result<Result<bool, ()>> {
        loop {
            let (used, outcome) = {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    // A last line with no newline is a line, as rmcp's own reader takes it.
                    return Ok(Ok(!self.line.is_empty()));
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.skipping {
                    if newline.is_some() {
                        self.skipping = false;
                    }
                    (take, None)
                } else if self.line.len() + take - usize::from(newline.is_some()) > MAX_LINE {
                    self.line.clear();
                    self.skipping = newline.is_none();
                    (take, Some(Err(())))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| Ok(true)))
                }
            };
            self.read.consume(used);
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }
}

/// Writes each queued line whole, in order, and says when it is written; stops at the first
/// failed write (the client is gone).
fn writer<W: AsyncWrite + Unpin + Send + 'static>(mut out: W) -> mpsc::UnboundedSender<Job> {
    let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
    tokio::spawn(async move {
        while let Some((bytes, done)) = queue.recv().await {
            let written = match out.write_all(&bytes).await {
                Ok(()) => out.flush().await,
                Err(e) => Err(e),
            };
            let failed = written.is_err();
            let _ = done.send(written);
            if failed {
                break;
            }
        }
    });
    jobs
}

/// What a line is.
#[derive(Debug)]
enum Judged {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do: a blank line, or a notification that does not parse.
    Nothing,
    /// The error to answer with.
    Answer(Value),
    /// Not answered, and the note for stderr saying why: an object without `method` is a
    /// response (or no message at all), and a response's id is one the server chose, so an
    /// error echoing it would fail the client's own request that happens to have that id.
    Unanswered(String),
}

/// A member of a rejected object, read without building it: a 16 MiB `method` is skipped,
/// not parsed into a tree a second time.
#[derive(Debug, Default, PartialEq)]
enum Member {
    #[default]
    Absent,
    Null,
    Text(String),
    Number(serde_json::Number),
    Other,
}

impl<'de> serde::Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Member, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Member;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Member, E> {
                Ok(Member::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Member, E> {
                Ok(Member::Other)
            }
            fn visit_i64<E>(self, n: i64) -> Result<Member, E> {
                Ok(Member::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Member, E> {
                Ok(Member::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Member, E> {
                Ok(serde_json::Number::from_f64(n).map_or(Member::Other, Member::Number))
            }
            fn visit_str<E>(self, s: &str) -> Result<Member, E> {
                Ok(Member::Text(s.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Member, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Member::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Member, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(Member::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The two members of a rejected object that decide its answer; every other is skipped.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    id: Member,
    #[serde(default)]
    method: Member,
}

/// Judges one line (without its `\n`).
fn judge(line: &[u8]) -> Judged {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Judged::Nothing;
    }
    if let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        return Judged::Message(Box::new(message));
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err() {
        return Judged::Answer(error(Value::Null, -32700, "Parse error"));
    }
    // Valid JSON: an object starts with `{` (a struct would also read from an array).
    let object = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let Some(head) = object.then(|| serde_json::from_slice::<Head>(line).ok()).flatten() else {
        // Not an object, or one whose `id` or `method` is given twice: no id to trust.
        return Judged::Answer(error(Value::Null, -32600, "Invalid Request"));
    };
    match (&head.method, &head.id) {
        (Member::Absent, id) => {
            let id = match id {
                Member::Text(s) => format!(" (id {})", crate::escape::quoted(s)),
                Member::Number(n) => format!(" (id {n})"),
                _ => String::new(),
            };
            Judged::Unanswered(format!(
                "note: MCP stdin: a JSON object without \"method\"{id} is no request (a malformed response?): not answered"
            ))
        }
        (Member::Text(_), Member::Absent) => Judged::Nothing,
        // Echoed back only when it is an id a request could carry.
        (_, Member::Text(s)) => Judged::Answer(error(json!(s), -32600, "Invalid Request")),
        (_, Member::Number(n)) => Judged::Answer(error(json!(n), -32600, "Invalid Request")),
        _ => Judged::Answer(error(Value::Null, -32600, "Invalid Request")),
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn line_of(value: &impl serde::Serialize) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for Lines<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let written = line_of(&item).map(|bytes| self.queue(bytes));
        async move {
            match written?.await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(written) = self.answering.as_mut() {
                // Cancel-safe: the answer stays queued, and this waits again on the next call.
                let ok = matches!(written.await, Ok(Ok(())));
                self.answering = None;
                if !ok {
                    return None;
                }
            }
            let judged = match self.next_line().await {
                Err(e) => {
                    crate::stderrln!("note: MCP stdin: {e}");
                    return None;
                }
                Ok(Ok(false)) => return None,
                Ok(Err(())) => Judged::Answer(error(Value::Null, -32700, "Parse error")),
                Ok(Ok(true)) => {
                    let line = std::mem::take(&mut self.line);
                    let judged = judge(line.strip_suffix(b"\n").unwrap_or(&line));
                    // The buffer is reused: its capacity stays for the next line.
                    self.line = line;
                    self.line.clear();
                    judged
                }
            };
            match judged {
                Judged::Message(message) => return Some(*message),
                Judged::Nothing => {}
                Judged::Unanswered(note) => crate::stderrln!("{note}"),
                Judged::Answer(answer) => {
                    let Ok(bytes) = line_of(&answer) else { return None };
                    self.answering = Some(self.queue(bytes));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        // The writer task ends once what is queued is written.
        self.write = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line past MAX_LINE, arriving over many reads, is refused once and skipped to its
    /// newline; the next line is read whole, and the end of input is the end. A line of
    /// exactly MAX_LINE bytes (and its newline) still fits, and so does a last line with no
    /// newline.
    #[test]
    fn an_overlong_line_is_skipped_and_the_next_one_read() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut input = vec![b'a'; MAX_LINE + 10];
            input.push(b'\n');
            input.extend_from_slice(b"{\"jsonrpc\":\"2.0\"}\n");
            input.extend(std::iter::repeat_n(b'b', MAX_LINE));
            input.push(b'\n');
            input.extend_from_slice(b"{}");
            let mut lines = Lines::new(std::io::Cursor::new(input), tokio::io::sink());
            assert_eq!(lines.next_line().await.unwrap(), Err(()));
            assert!(lines.line.is_empty());
            assert_eq!(lines.next_line().await.unwrap(), Ok(true));
            assert_eq!(lines.line.strip_suffix(b"\n").unwrap(), b"{\"jsonrpc\":\"2.0\"}");
            lines.line.clear();
            assert_eq!(lines.next_line().await.unwrap(), Ok(true));
            assert_eq!(lines.line.len(), MAX_LINE + 1);
            lines.line.clear();
            assert_eq!(lines.next_line().await.unwrap(), Ok(true));
            assert_eq!(lines.line, b"{}");
            lines.line.clear();
            assert_eq!(lines.next_line().await.unwrap(), Ok(false));
        });
    }

    #[test]
    fn each_kind_of_bad_line_has_its_answer() {
        let code = |line: &str| match judge(line.as_bytes()) {
            Judged::Answer(a) => (a["error"]["code"].as_i64().unwrap_or_default(), a["id"].clone()),
            other => panic!("{line:?}: {other:?}"),
        };
        assert_eq!(code("not json"), (-32700, Value::Null));
        assert_eq!(code("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": "), (-32700, Value::Null));
        assert_eq!(code("\u{1b}[2J"), (-32700, Value::Null));
        assert_eq!(code("[]"), (-32600, Value::Null));
        assert_eq!(code("42"), (-32600, Value::Null));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":6,"method":42}"#), (-32600, json!(6)));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#), (-32600, Value::Null));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":"a","method":["x"],"params":{"big":[1,2]}}"#), (-32600, json!("a")));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#), (-32600, Value::Null));
        assert_eq!(code(r#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#), (-32600, Value::Null));
        assert_eq!(code(r#" [9, "ping"]"#), (-32600, Value::Null));
        // A response's id is the server's: never echoed, nothing answered.
        for response in [
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":"bad"}}"#,
            r#"{"jsonrpc":"2.0","id":"3","result":1,"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":"\n\u001b[2J","result":[1,{}],"error":7}"#,
            "{}",
        ] {
            match judge(response.as_bytes()) {
                Judged::Unanswered(note) => {
                    assert!(!note.contains(['\n', '\u{1b}']), "{note:?}");
                    assert!(note.contains("without \"method\""), "{note}");
                }
                other => panic!("{response}: {other:?}"),
            }
        }
        for nothing in ["", "  \r", r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#] {
            assert!(matches!(judge(nothing.as_bytes()), Judged::Nothing), "{nothing:?}");
        }
        let ping = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r";
        assert!(matches!(judge(ping.as_bytes()), Judged::Message(_)));
    }
}
