//! The protobuf wire format: a bounds-checked reader.

use crate::Error;

type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn varint(&mut self) -> Result<u64> {
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
    pub(crate) fn key(&mut self) -> Result<Option<(u32, u8)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        let wire = (k & 7) as u8;
        let num = k >> 3;
        if num == 0 || num > (1 << 29) - 1 {
            return Err(Error::new(format!("invalid field number {num}")));
        }
        if !matches!(wire, 0 | 1 | 2 | 5) {
            return Err(Error::new(format!(
                "unsupported wire type {wire} for field {num}"
            )));
        }
        Ok(Some((num as u32, wire)))
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

pub(crate) fn utf8(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
