//! Sections: the call header and the reply status behind a value, each followed by its length,
//! and the rule that lets them grow within one wire version.
//!
//! A section is `[the fields of this release][fields appended by newer releases][length: u32
//! LE]`. The length delimits it (it is checked against the message: a length past the start
//! of the message is [`DecodeError::Malformed`]). A decoder reads the fields it knows, in order,
//! with postcard, and **skips whatever follows them** ([`Tail`]); a decoder of a newer release
//! reads the fields it appended from the tail, and gives each its default when the section ends
//! before it (a sender of an older release). So a field is only ever appended, never removed,
//! reordered or retyped; to change one, append another.
//!
//! A control request is the last thing in its message, so the same rule holds for it with the
//! message's end as the section's end ([`decode_control`]).
//!
//! Hostile input costs nothing more than before: the skipped bytes are never parsed, the known
//! fields are decoded from a slice already bounded by the message, and strings are borrowed.
//! No field of this release is optional yet: [`Tail::next_or_default`] is what the fields
//! that later releases append (load reports on replies, trace context on calls) are read with.

use serde::{Deserialize, Serialize};

use super::{start_message, DecodeError, TRAILER_LEN};

/// Appends `value` (postcard) and then the section's length (u32 LE) to `out`.
pub(crate) fn push_trailer<T: Serialize + ?Sized>(
    out: Vec<u8>,
    value: &T,
) -> Result<Vec<u8>, postcard::Error> {
    let start = out.len();
    let out = postcard::to_extend(value, out)?;
    #[cfg(feature = "test-hooks")]
    let out = super::newer_fields::append(out);
    let len = u32::try_from(out.len() - start).map_err(|_| postcard::Error::SerializeBufferFull)?;
    let mut out = out;
    out.extend_from_slice(&len.to_le_bytes());
    Ok(out)
}

/// Splits `body` into what precedes its section and the section's bytes (without the length).
pub(crate) fn split_trailer<'a>(
    body: &'a [u8],
    what: &str,
) -> Result<(&'a [u8], &'a [u8]), DecodeError> {
    let malformed = || DecodeError::Malformed(format!("no {what} at the end"));
    let len_at = body.len().checked_sub(TRAILER_LEN).ok_or_else(malformed)?;
    let mut len = [0; TRAILER_LEN];
    len.copy_from_slice(&body[len_at..]);
    let len = usize::try_from(u32::from_le_bytes(len)).map_err(|_| malformed())?;
    let start = len_at.checked_sub(len).ok_or_else(malformed)?;
    Ok((&body[..start], &body[start..len_at]))
}

/// Decodes the fields of this release at the start of a section; returns them and the
/// [`Tail`] after them (fields of newer releases, skipped unless read).
pub(crate) fn decode_trailer<'a, T: Deserialize<'a>>(
    section: &'a [u8],
    what: &'static str,
) -> Result<(T, Tail<'a>), DecodeError> {
    match postcard::take_from_bytes::<T>(section) {
        Ok((value, rest)) => Ok((value, Tail { rest, what })),
        Err(e) => Err(DecodeError::Malformed(format!("{what}: {e}"))),
    }
}

/// Encodes a control request: `[version][request]`.
pub(crate) fn encode_control<T: Serialize + ?Sized>(
    request: &T,
) -> Result<Vec<u8>, postcard::Error> {
    let out = postcard::to_extend(request, start_message(16))?;
    #[cfg(feature = "test-hooks")]
    let out = super::newer_fields::append(out);
    Ok(out)
}

/// Decodes a control request (the rest of its message after the version), skipping bytes
/// after it as [`decode_trailer`] does; `BadRequest`-worthy errors are
/// [`DecodeError::Malformed`].
pub(crate) fn decode_control<'a, T: Deserialize<'a>>(
    body: &'a [u8],
) -> Result<(T, Tail<'a>), DecodeError> {
    decode_trailer(body, "control request")
}

/// The bytes of a section after the fields a decoder read: fields appended by releases newer
/// than the one that wrote the decoder. Skipped unless read with [`Tail::next_or_default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail<'a> {
    rest: &'a [u8],
    what: &'static str,
}

#[cfg_attr(
    not(test),
    allow(dead_code, reason = "the API for fields later releases append")
)]
impl<'a> Tail<'a> {
    /// The next appended field, or `T::default()` when the section ends before it (the sender
    /// is of a release older than the field). A field that starts but does not decode as `T`
    /// (cut short, bad tag, bad UTF-8) is [`DecodeError::Malformed`], never the default.
    pub(crate) fn next_or_default<T: Deserialize<'a> + Default>(
        &mut self,
    ) -> Result<T, DecodeError> {
        if self.rest.is_empty() {
            return Ok(T::default());
        }
        match postcard::take_from_bytes::<T>(self.rest) {
            Ok((value, rest)) => {
                self.rest = rest;
                Ok(value)
            }
            Err(e) => Err(DecodeError::Malformed(format!(
                "{} (appended field): {e}",
                self.what
            ))),
        }
    }

    /// The next appended field, or `None` when the section ends before it (the sender is of a
    /// release older than the field); a field that starts but does not decode is
    /// [`DecodeError::Malformed`], as for [`Self::next_or_default`].
    pub(crate) fn next_if_sent<T: Deserialize<'a>>(&mut self) -> Result<Option<T>, DecodeError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        match postcard::take_from_bytes::<T>(self.rest) {
            Ok((value, rest)) => {
                self.rest = rest;
                Ok(Some(value))
            }
            Err(e) => Err(DecodeError::Malformed(format!(
                "{} (appended field): {e}",
                self.what
            ))),
        }
    }

    /// Bytes left unread: fields of releases newer than this reader, which it skips.
    pub(crate) fn unknown_len(&self) -> usize {
        self.rest.len()
    }
}

#[cfg(test)]
mod tests;
