//! The Python literals numpy writes in `.npy` headers (dicts, tuples,
//! strings, integers, `True`/`False`/`None`), parsed by a tiny
//! recursive-descent parser.

/// A value of the Python literal in an `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PyValue {
    Str(String),
    Int(u128),
    Bool(bool),
    None,
    Seq(Vec<PyValue>),
    Dict(Vec<(PyValue, PyValue)>),
}

/// A tiny recursive-descent parser for the literals numpy writes in headers.
pub(super) struct PyParser<'a> {
    pub(super) s: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> PyParser<'a> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.pos))
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<PyValue, String> {
        if depth > 32 {
            return Err("nesting too deep".into());
        }
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos] != q {
                    self.pos += 1;
                }
                if self.pos >= self.s.len() {
                    return Err("unterminated string".into());
                }
                let v = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                Ok(PyValue::Str(v))
            }
            Some(b'0'..=b'9') => {
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                // numpy on Windows once wrote `3L`.
                if self.s.get(self.pos) == Some(&b'L') {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos])
                    .unwrap_or("")
                    .trim_end_matches('L');
                digits
                    .parse::<u128>()
                    .map(PyValue::Int)
                    .map_err(|_| format!("integer {digits} is too large"))
            }
            Some(open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        return Ok(PyValue::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {}
                        _ => return Err(format!("expected ',' or '{}'", close as char)),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(PyValue::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    self.expect(b':')?;
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err("expected ',' or '}'".into()),
                    }
                }
            }
            Some(_) => {
                for (word, v) in [
                    (&b"True"[..], PyValue::Bool(true)),
                    (&b"False"[..], PyValue::Bool(false)),
                    (&b"None"[..], PyValue::None),
                ] {
                    if self.s[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        return Ok(v);
                    }
                }
                Err(format!("unexpected character at byte {}", self.pos))
            }
            None => Err("unexpected end of header".into()),
        }
    }
}
