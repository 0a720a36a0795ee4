//! The protobuf wire format: a bounds-checked reader.

use crate::Error;

type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64> {
        // Most varints (keys, lengths, small numbers) are one byte.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_slow()
    }

    fn varint_slow(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(Error::new("truncated varint"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(Error::new("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::new("varint overflows 64 bits"))
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::new("truncated field"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| Error::new("truncated field"))?;
        self.take(n)
    }

    pub(crate) fn fixed32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn fixed64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// The next field's number and wire type, or None at the end.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<Option<(u32, u8)>> {
        // Both paths yield one packed `num << 3 | wire` word: a (u32, u8) pair merged
        // from the two paths went through the stack as two stores and one wider load,
        // which the CPU cannot forward (it stalled the decoder's hottest loop).
        let k = match self.buf.get(self.pos) {
            None => return Ok(None),
            // A one-byte key: fields 1..=15.
            Some(&b) if (8..0x80).contains(&b) && matches!(b & 7, 0 | 1 | 2 | 5) => {
                self.pos += 1;
                u32::from(b)
            }
            Some(_) => self.key_slow()?,
        };
        Ok(Some((k >> 3, (k & 7) as u8)))
    }

    /// A key longer than one byte, checked, as `num << 3 | wire`.
    #[cold]
    #[inline(never)]
    fn key_slow(&mut self) -> Result<u32> {
        let k = self.varint()?;
        let wire = k & 7;
        let num = k >> 3;
        if num == 0 || num > (1 << 29) - 1 {
            return Err(Error::new(format!("invalid field number {num}")));
        }
        if !matches!(wire, 0 | 1 | 2 | 5) {
            return Err(Error::new(format!(
                "unsupported wire type {wire} for field {num}"
            )));
        }
        Ok(k as u32)
    }

    pub(crate) fn skip(&mut self, wire: u8) -> Result<()> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.bytes().map(drop),
            5 => self.take(4).map(drop),
            _ => Err(Error::new(format!("unsupported wire type {wire}"))),
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// The fields of a `runtime.Unknown`, the envelope of every body: `k8s\0`, then
/// `{typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2, contentEncoding = 3, contentType = 4}`.
#[derive(Default)]
pub(crate) struct Unknown<'a> {
    pub(crate) api_version: &'a [u8],
    pub(crate) kind: &'a [u8],
    pub(crate) raw: &'a [u8],
    pub(crate) content_encoding: &'a [u8],
    pub(crate) content_type: &'a [u8],
}

impl<'a> Unknown<'a> {
    /// Parses a whole body, its `k8s\0` prefix included.
    pub(crate) fn parse(body: &'a [u8]) -> Result<Self> {
        let Some(envelope) = body.strip_prefix(crate::MAGIC) else {
            return Err(Error::new(
                "missing the Kubernetes protobuf prefix \"k8s\\x00\"",
            ));
        };
        let mut u = Unknown::default();
        let mut r = Reader::new(envelope);
        while let Some((num, wire)) = r.key()? {
            match (num, wire) {
                (1, 2) => {
                    let mut tm = Reader::new(r.bytes()?);
                    while let Some((n, w)) = tm.key()? {
                        match (n, w) {
                            (1, 2) => u.api_version = tm.bytes()?,
                            (2, 2) => u.kind = tm.bytes()?,
                            _ => tm.skip(w)?,
                        }
                    }
                }
                (2, 2) => u.raw = r.bytes()?,
                (3, 2) => u.content_encoding = r.bytes()?,
                (4, 2) => u.content_type = r.bytes()?,
                (1..=4, _) => {
                    return Err(Error::new(format!(
                        "wire type {wire} is wrong for field {num} of runtime.Unknown"
                    )));
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(u)
    }
}

pub(crate) fn utf8(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::Reader;

    #[test]
    fn one_byte_and_long_keys_read_alike() {
        // Field 1 length-delimited, as one byte and as a redundant two-byte varint.
        for buf in [&[0x0a, 0x00][..], &[0x8a, 0x00, 0x00][..]] {
            let mut r = Reader::new(buf);
            assert_eq!(r.key().ok().flatten(), Some((1, 2)));
        }
        // Field 16 needs two bytes.
        assert_eq!(
            Reader::new(&[0x80, 0x01]).key().ok().flatten(),
            Some((16, 0))
        );
    }

    #[test]
    fn bad_keys_are_errors() {
        // Field 0, and the group wire types 3 and 4.
        for buf in [&[0x02][..], &[0x0b][..], &[0x0c][..], &[0x80][..]] {
            assert!(Reader::new(buf).key().is_err(), "{buf:?}");
        }
        assert!(Reader::new(&[]).key().is_ok_and(|k| k.is_none()));
    }
}
