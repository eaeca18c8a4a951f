//! Confirmations for the `apply` tool. When the person is asked, a confirmation is issued for
//! one binding (the digest of the plan hash and every argument of the call); the answer
//! counts only if it comes back for the same binding, before the confirmation expires, and
//! only once. The token is all a client sees (as `requestState`): the binding stays here, so
//! a client cannot move a person's "yes" to another plan or other inputs.
//!
//! Pure apart from the token's randomness; the clock is passed in, so tests step it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many confirmations may wait at once: a client that keeps calling `apply` without
/// answering must not grow the store without bound; the oldest goes first.
pub const MAX_PENDING: usize = 64;

/// Why an answer does not count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Never issued here, or already used.
    Unknown,
    Expired,
    /// Issued for another plan hash or other arguments.
    OtherBinding,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Unknown => "this confirmation is unknown or was already used (each works once)",
            Refusal::Expired => "this confirmation expired before the answer came back",
            Refusal::OtherBinding => "this confirmation was given for another plan hash or other arguments",
        })
    }
}

struct Pending {
    binding: String,
    issued: Instant,
}

pub struct Store {
    ttl: Duration,
    pending: Mutex<HashMap<String, Pending>>,
}

impl Store {
    pub fn new(ttl: Duration) -> Store {
        Store { ttl, pending: Mutex::new(HashMap::new()) }
    }

    /// A new confirmation for `binding`, as an unguessable token; an error when the
    /// operating system cannot supply the randomness (no confirmation is then possible).
    pub fn issue(&self, binding: &str, now: Instant) -> Result<String, getrandom::Error> {
        let token = token()?;
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|_, p| now.saturating_duration_since(p.issued) < self.ttl);
        while pending.len() >= MAX_PENDING {
            let Some(oldest) = pending.iter().min_by_key(|(_, p)| p.issued).map(|(k, _)| k.clone()) else { break };
            pending.remove(&oldest);
        }
        pending.insert(token.clone(), Pending { binding: binding.to_string(), issued: now });
        Ok(token)
    }

    /// Redeems `token` for `binding`. It is gone afterwards whatever the outcome, so a
    /// refused or replayed answer cannot be retried into a yes.
    pub fn redeem(&self, token: &str, binding: &str, now: Instant) -> Result<(), Refusal> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let entry = pending.remove(token).ok_or(Refusal::Unknown)?;
        if now.saturating_duration_since(entry.issued) >= self.ttl {
            return Err(Refusal::Expired);
        }
        if entry.binding != binding {
            return Err(Refusal::OtherBinding);
        }
        Ok(())
    }
}

/// 32 random bytes from the operating system's generator, as hex. There is no fallback: a
/// confirmation is only as strong as its token, so when the generator fails the apply is
/// refused rather than protected by something a client could guess.
fn token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(600);

    #[test]
    fn an_answer_counts_once_for_its_binding() {
        let store = Store::new(TTL);
        let now = Instant::now();
        let token = store.issue("hash-a|args", now).unwrap();
        assert_eq!(store.redeem(&token, "hash-a|args", now + Duration::from_secs(5)), Ok(()));
        assert_eq!(store.redeem(&token, "hash-a|args", now + Duration::from_secs(6)), Err(Refusal::Unknown));
    }

    #[test]
    fn another_binding_is_refused_and_burns_the_token() {
        let store = Store::new(TTL);
        let now = Instant::now();
        let token = store.issue("hash-a|args", now).unwrap();
        assert_eq!(store.redeem(&token, "hash-b|args", now), Err(Refusal::OtherBinding));
        assert_eq!(store.redeem(&token, "hash-a|args", now), Err(Refusal::Unknown));
    }

    #[test]
    fn a_late_answer_is_refused() {
        let store = Store::new(TTL);
        let now = Instant::now();
        let token = store.issue("b", now).unwrap();
        assert_eq!(store.redeem(&token, "b", now + TTL), Err(Refusal::Expired));
    }

    #[test]
    fn a_token_is_256_bits_of_hex() {
        let token = token().unwrap();
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }

    #[test]
    fn unknown_tokens_are_refused() {
        let store = Store::new(TTL);
        assert_eq!(store.redeem("00", "b", Instant::now()), Err(Refusal::Unknown));
    }

    #[test]
    fn tokens_differ_and_the_store_stays_bounded() {
        let store = Store::new(TTL);
        let now = Instant::now();
        let first = store.issue("b", now).unwrap();
        let mut last = String::new();
        for i in 0..(MAX_PENDING as u64 + 10) {
            last = store.issue("b", now + Duration::from_millis(i + 1)).unwrap();
            assert_ne!(last, first);
        }
        assert!(store.pending.lock().unwrap().len() <= MAX_PENDING);
        // The oldest went first; the newest still works.
        assert_eq!(store.redeem(&first, "b", now), Err(Refusal::Unknown));
        assert_eq!(store.redeem(&last, "b", now + Duration::from_secs(1)), Ok(()));
    }
}
