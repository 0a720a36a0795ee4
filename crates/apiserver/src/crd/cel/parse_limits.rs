//! cel-go's parser limits, checked on the text of a rule before the `cel` crate parses it.
//!
//! The `cel` crate's parser (ANTLR) recurses a few frames per nesting level, hundreds of KiB
//! of stack per level in a debug build, and aborts the process when the stack runs out. cel-go,
//! which kube-apiserver compiles rules with, stops nesting with its default limits
//! (`MaxRecursionDepth` 250, `ExpressionSizeCodePointLimit` 100,000), at two places:
//!
//! * while parsing, a listener counts the open invocations of each grammar rule and fails when
//!   one rule is open more than 250 times: `expression recursion limit exceeded: 250`;
//! * building the expression from the parse tree, it counts nested ternaries, relations,
//!   arithmetic, selections (`a.b`), indexes (`a[b]`) and member calls (`a.f()`) and fails
//!   past 250: `max recursion depth exceeded`.
//!
//! [`check`] reproduces both counts in one pass over the text, with explicit stacks (it cannot
//! run out of stack itself), so a rule the real server refuses is refused here with its error
//! before the parser sees it, and one it accepts is parsed. Text that does not parse is only
//! refused for depth when the count of what parses is over the limit.

/// cel-go's default `MaxRecursionDepth`, kept by Kubernetes.
pub(crate) const MAX_RECURSION_DEPTH: u32 = 250;

/// cel-go's default `ExpressionSizeCodePointLimit`, kept by Kubernetes.
pub(crate) const EXPRESSION_SIZE_CODE_POINT_LIMIT: usize = 100_000;

/// The error cel-go reports for `src` when it is over one of its parser's limits: too long,
/// or nested too deeply while parsing or while building the expression.
pub(crate) fn check(src: &str) -> Result<(), String> {
    let size = src.chars().count();
    if size > EXPRESSION_SIZE_CODE_POINT_LIMIT {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {EXPRESSION_SIZE_CODE_POINT_LIMIT}"
        ));
    }
    match Scan::default().run(src.as_bytes()) {
        Some(Limit::Parse) => Err(format!(
            "ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
        )),
        Some(Limit::Build) => Err("ERROR: <input>:-1:0: max recursion depth exceeded".into()),
        None => Ok(()),
    }
}

/// Which of cel-go's counts goes over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// The parse listener's (a grammar rule open too many times).
    Parse,
    /// The expression builder's (too many nested operators, selections, calls...).
    Build,
}

/// Binary and ternary operators, lowest precedence first.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    /// `?` of a ternary, its `then` branch being parsed.
    Then,
    /// `:` of a ternary, its `else` branch (a nested `expr`) being parsed.
    Else,
    Or,
    And,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`.
    Relation,
    /// `+`, `-`.
    Add,
    /// `*`, `/`, `%`.
    Mul,
}

impl Op {
    fn precedence(self) -> u8 {
        match self {
            Op::Then | Op::Else => 1,
            Op::Or => 2,
            Op::And => 3,
            Op::Relation => 4,
            Op::Add => 5,
            Op::Mul => 6,
        }
    }
}

/// What an open bracket holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Group {
    Root,
    /// `(e)`, a list `[...]` or a map `{...}`: a primary expression of the enclosing one.
    Primary,
    /// The arguments of `f(...)`.
    GlobalCall,
    /// The arguments of `x.f(...)`, or the index of `x[...]`: counted by the builder.
    Member,
    /// The fields of `T{...}`.
    Message,
}

/// Open invocations of the grammar rules that nest fastest: `expr` (one more per bracket and
/// per ternary `else` branch), `relation` (one more in the right operand of a relation) and
/// `calc` (one or two more in right operands of arithmetic). The others (`conditionalOr`,
/// `unary`, `member`, `primary`, ...) open once per bracket, never more than `expr`.
#[derive(Clone, Copy, Default, Debug)]
struct Open {
    expr: u32,
    relation: u32,
    calc: u32,
}

impl Open {
    fn max(self) -> u32 {
        self.expr.max(self.relation).max(self.calc)
    }
}

/// One bracket's expression, parsed by precedence (shunting-yard): operator and operand stacks,
/// each operand being the builder's depth of the expression it stands for.
#[derive(Debug)]
struct Frame {
    group: Group,
    /// Rule invocations open where the bracket opens.
    base: Open,
    operands: Vec<u32>,
    ops: Vec<Op>,
    /// Counts of `ops` by kind: open `else` branches, relations and arithmetic.
    elses: u32,
    relations: u32,
    calcs: u32,
    thens: u32,
    /// Builder depth of the elements already complete (`[a, b]`, `{k: v}`, `f(a, b)`).
    depth: u32,
    /// Whether the next token starts an operand (so `-` is unary, `[` a list).
    expect_operand: bool,
}

impl Frame {
    fn new(group: Group, base: Open) -> Self {
        Frame {
            group,
            base,
            operands: Vec::new(),
            ops: Vec::new(),
            elses: 0,
            relations: 0,
            calcs: 0,
            thens: 0,
            depth: 0,
            expect_operand: true,
        }
    }

    /// Rule invocations open at the current position of this bracket.
    fn open(&self) -> Open {
        Open {
            expr: self.base.expr.saturating_add(1 + self.elses),
            relation: self.base.relation.saturating_add(1 + self.relations),
            calc: self.base.calc.saturating_add(1 + self.calcs),
        }
    }

    fn push_op(&mut self, op: Op) {
        match op {
            Op::Then => self.thens += 1,
            Op::Else => self.elses += 1,
            Op::Relation => self.relations += 1,
            Op::Add | Op::Mul => self.calcs += 1,
            Op::Or | Op::And => {}
        }
        self.ops.push(op);
    }

    fn pop_operand(&mut self) -> u32 {
        self.operands.pop().unwrap_or(0)
    }

    /// Replaces the top operator and its operands with the depth of what they build.
    fn reduce(&mut self) {
        let Some(op) = self.ops.pop() else {
            return;
        };
        let depth = match op {
            Op::Else => {
                self.elses -= 1;
                let (e, t, c) = (self.pop_operand(), self.pop_operand(), self.pop_operand());
                c.max(t).max(e).saturating_add(1)
            }
            Op::Then => {
                self.thens -= 1;
                let (t, c) = (self.pop_operand(), self.pop_operand());
                c.max(t)
            }
            Op::Or | Op::And => {
                // balanced, and not counted by the builder
                let (r, l) = (self.pop_operand(), self.pop_operand());
                l.max(r)
            }
            Op::Relation | Op::Add | Op::Mul => {
                if op == Op::Relation {
                    self.relations -= 1;
                } else {
                    self.calcs -= 1;
                }
                let (r, l) = (self.pop_operand(), self.pop_operand());
                l.max(r).saturating_add(1)
            }
        };
        self.operands.push(depth);
    }

    /// A binary operator: left associative, so operators of the same precedence or higher
    /// are complete.
    fn binary(&mut self, op: Op) {
        let p = op.precedence();
        while let Some(&top) = self.ops.last() {
            if matches!(top, Op::Then | Op::Else) || top.precedence() < p {
                break;
            }
            self.reduce();
        }
        self.push_op(op);
        self.expect_operand = true;
    }

    /// `?` of a ternary: everything since the last ternary is its condition.
    fn then(&mut self) {
        while self
            .ops
            .last()
            .is_some_and(|o| !matches!(o, Op::Then | Op::Else))
        {
            self.reduce();
        }
        self.push_op(Op::Then);
        self.expect_operand = true;
    }

    /// `:` of a ternary: everything since its `?` is the `then` branch.
    fn otherwise(&mut self) {
        while self.ops.last().is_some_and(|o| *o != Op::Then) {
            self.reduce();
        }
        if self.ops.pop().is_some() {
            self.thens -= 1;
        }
        self.push_op(Op::Else);
        self.expect_operand = true;
    }

    /// The end of an element (`,`, a map's `:`, the closing bracket).
    fn end_element(&mut self) {
        while !self.ops.is_empty() {
            self.reduce();
        }
        let d = self.operands.drain(..).max().unwrap_or(0);
        self.depth = self.depth.max(d);
        self.expect_operand = true;
    }

    /// Applies `f` to the depth of the operand on top (a postfix operator).
    fn postfix(&mut self, f: impl FnOnce(u32) -> u32) {
        match self.operands.last_mut() {
            Some(d) => *d = f(*d),
            None => self.operands.push(f(0)),
        }
    }
}

#[derive(Default)]
struct Scan {
    frames: Vec<Frame>,
    /// Whether the last token was an identifier (so `(` calls it, `{` builds a message).
    after_ident: bool,
}

impl Scan {
    fn top(&mut self) -> &mut Frame {
        if self.frames.is_empty() {
            self.frames.push(Frame::new(Group::Root, Open::default()));
        }
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    /// An operand starts (identifier, literal, or a primary bracket): the parser opens the
    /// rules down to `primary`, which may go over the listener's limit.
    fn operand(&mut self, depth: u32) -> Result<(), Limit> {
        let f = self.top();
        if f.open().max() > MAX_RECURSION_DEPTH {
            return Err(Limit::Parse);
        }
        f.operands.push(depth);
        f.expect_operand = false;
        Ok(())
    }

    fn open_group(&mut self, group: Group) -> Result<(), Limit> {
        let f = self.top();
        let base = f.open();
        if group == Group::Primary && base.max() > MAX_RECURSION_DEPTH {
            return Err(Limit::Parse);
        }
        self.frames.push(Frame::new(group, base));
        self.after_ident = false;
        Ok(())
    }

    fn close_group(&mut self) -> Result<(), Limit> {
        if self.frames.len() < 2 {
            return Ok(()); // an unmatched closing bracket: a syntax error, not a depth
        }
        let Some(mut f) = self.frames.pop() else {
            return Ok(());
        };
        f.end_element();
        let inner = f.depth;
        match f.group {
            Group::Root | Group::Primary => {
                self.operand(0)?;
                self.top().postfix(|_| inner);
            }
            Group::GlobalCall => self.top().postfix(|d| d.max(inner)),
            // `a.b.C{...}`: the selections were the message's name
            Group::Message => self.top().postfix(|_| inner),
            Group::Member => self.top().postfix(|d| d.max(inner).saturating_add(1)),
        }
        self.top().expect_operand = false;
        self.after_ident = false;
        Ok(())
    }

    fn run(mut self, s: &[u8]) -> Option<Limit> {
        match self.scan(s) {
            Err(l) => Some(l),
            Ok(depth) if depth > MAX_RECURSION_DEPTH => Some(Limit::Build),
            Ok(_) => None,
        }
    }

    /// Scans `s`; the builder's depth of the whole expression, or the listener's limit.
    fn scan(&mut self, s: &[u8]) -> Result<u32, Limit> {
        let mut i = 0;
        while i < s.len() {
            let c = s[i];
            let next = s.get(i + 1).copied();
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if c == b'/' && next == Some(b'/') {
                i = s[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(s.len(), |p| i + p + 1);
                continue;
            }
            let after_ident = std::mem::take(&mut self.after_ident);
            let expect = self.top().expect_operand;
            if c.is_ascii_alphabetic() || c == b'_' {
                let end = ident_end(s, i);
                let word = &s[i..end];
                if matches!(s.get(end), Some(b'"' | b'\'')) && is_string_prefix(word) {
                    let raw = word.iter().any(|b| b.eq_ignore_ascii_case(&b'r'));
                    i = string_end(s, end, raw);
                    if expect {
                        self.operand(0)?;
                    }
                    continue;
                }
                i = end;
                if word == b"in" && !expect {
                    self.top().binary(Op::Relation);
                    continue;
                }
                if expect {
                    self.operand(0)?;
                }
                self.after_ident = true;
                continue;
            }
            if c.is_ascii_digit()
                || (c == b'.' && expect && next.is_some_and(|b| b.is_ascii_digit()))
            {
                i = number_end(s, i);
                if expect {
                    self.operand(0)?;
                }
                continue;
            }
            match c {
                b'"' | b'\'' => {
                    i = string_end(s, i, false);
                    if expect {
                        self.operand(0)?;
                    }
                    continue;
                }
                b'`' => {
                    // an escaped field name (`a.`b-c``)
                    i = s[i + 1..]
                        .iter()
                        .position(|&b| b == b'`')
                        .map_or(s.len(), |p| i + p + 2);
                    self.after_ident = true;
                    continue;
                }
                _ => {}
            }
            let two = [c, next.unwrap_or(0)];
            match &two {
                b"==" | b"!=" | b"<=" | b">=" => {
                    self.top().binary(Op::Relation);
                    i += 2;
                    continue;
                }
                b"||" => {
                    self.top().binary(Op::Or);
                    i += 2;
                    continue;
                }
                b"&&" => {
                    self.top().binary(Op::And);
                    i += 2;
                    continue;
                }
                _ => {}
            }
            i += 1;
            match c {
                b'<' | b'>' => self.top().binary(Op::Relation),
                b'+' => self.top().binary(Op::Add),
                b'-' if !expect => self.top().binary(Op::Add),
                b'*' | b'/' | b'%' => self.top().binary(Op::Mul),
                // `!x`, `-x`: not counted, and repeated in a loop of the grammar
                b'!' | b'-' => {}
                // `?` before an operand marks an optional entry (`[?a]`, `{?k: v}`)
                b'?' if expect => {}
                b'?' => self.top().then(),
                b':' => {
                    let f = self.top();
                    if f.thens > 0 {
                        f.otherwise();
                    } else {
                        f.end_element(); // a map's or a message's `key: value`
                    }
                }
                b',' => self.top().end_element(),
                b'.' if expect => {} // `.a`: a name from the root
                b'.' => {
                    if s.get(i) == Some(&b'?') {
                        i += 1; // `a.?b`
                    }
                    while s.get(i).is_some_and(u8::is_ascii_whitespace) {
                        i += 1;
                    }
                    i = match s.get(i) {
                        Some(b'`') => s[i + 1..]
                            .iter()
                            .position(|&b| b == b'`')
                            .map_or(s.len(), |p| i + p + 2),
                        _ => ident_end(s, i),
                    };
                    let mut j = i;
                    while s.get(j).is_some_and(u8::is_ascii_whitespace) {
                        j += 1;
                    }
                    if s.get(j) == Some(&b'(') {
                        i = j + 1;
                        self.open_group(Group::Member)?;
                    } else {
                        self.top().postfix(|d| d.saturating_add(1));
                        self.after_ident = true;
                    }
                }
                b'(' if !expect && after_ident => self.open_group(Group::GlobalCall)?,
                b'(' => self.open_group(Group::Primary)?,
                b'[' if expect => self.open_group(Group::Primary)?,
                b'[' => self.open_group(Group::Member)?,
                b'{' if !expect && after_ident => self.open_group(Group::Message)?,
                b'{' => self.open_group(Group::Primary)?,
                b')' | b']' | b'}' => self.close_group()?,
                _ => {}
            }
        }
        while self.frames.len() > 1 {
            self.close_group()?;
        }
        let root = self.top();
        root.end_element();
        Ok(root.depth)
    }
}

fn ident_end(s: &[u8], mut i: usize) -> usize {
    while s
        .get(i)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        i += 1;
    }
    i
}

/// `r`, `b`, `rb`, `br` in any case: a raw or bytes string follows.
fn is_string_prefix(word: &[u8]) -> bool {
    match word {
        [a] => matches!(a.to_ascii_lowercase(), b'r' | b'b'),
        [a, b] => matches!(
            (a.to_ascii_lowercase(), b.to_ascii_lowercase()),
            (b'r', b'b') | (b'b', b'r')
        ),
        _ => false,
    }
}

/// The end of the string literal whose quote is at `i` (`'`, `"`, or tripled); backslashes
/// escape unless `raw`. An unterminated string ends with the line (or the text).
fn string_end(s: &[u8], i: usize, raw: bool) -> usize {
    let q = s[i];
    let triple = s.get(i..i + 3) == Some(&[q, q, q][..]);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < s.len() {
        let b = s[j];
        if b == b'\\' && !raw {
            j += 2;
            continue;
        }
        if triple {
            if s.get(j..j + 3) == Some(&[q, q, q][..]) {
                return j + 3;
            }
        } else if b == q || b == b'\n' || b == b'\r' {
            return j + 1;
        }
        j += 1;
    }
    s.len()
}

/// The end of the number at `i`: `12`, `0x1F`, `1.5`, `.5`, `2e-3`, with a `u` suffix.
fn number_end(s: &[u8], i: usize) -> usize {
    let digits = |mut j: usize, hex: bool| {
        while s
            .get(j)
            .is_some_and(|b| b.is_ascii_digit() || (hex && b.is_ascii_hexdigit()))
        {
            j += 1;
        }
        j
    };
    let mut j;
    if s.get(i..i + 2)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"0x"))
    {
        j = digits(i + 2, true);
    } else {
        j = digits(i, false);
        if s.get(j) == Some(&b'.') && s.get(j + 1).is_some_and(u8::is_ascii_digit) {
            j = digits(j + 1, false);
        }
        if s.get(j).is_some_and(|b| matches!(b, b'e' | b'E')) {
            let mut k = j + 1;
            if s.get(k).is_some_and(|b| matches!(b, b'+' | b'-')) {
                k += 1;
            }
            if s.get(k).is_some_and(u8::is_ascii_digit) {
                j = digits(k, false);
            }
        }
    }
    if s.get(j).is_some_and(|b| matches!(b, b'u' | b'U')) {
        j += 1;
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(src: &str) -> Option<Limit> {
        Scan::default().run(src.as_bytes())
    }

    fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    }

    /// The last depth kube-apiserver v1.36 accepts for each shape, and what it answers one
    /// deeper (measured with `kubectl create --dry-run=server`).
    #[test]
    fn boundaries_are_kube_apiservers() {
        type Shape = fn(usize) -> String;
        let shapes: [(&str, Shape, usize, Limit); 14] = [
            ("parens", |n| nested("(", "true", ")", n), 249, Limit::Parse),
            (
                "lists",
                |n| format!("size({}) == 1", nested("[", "", "]", n)),
                249,
                Limit::Parse,
            ),
            (
                "lists in a call",
                |n| format!("size({}) == 1", nested("[", "1", "]", n)),
                248,
                Limit::Parse,
            ),
            (
                "maps in a call",
                |n| format!("size({}) == 1", nested("{1:", "1", "}", n)),
                248,
                Limit::Parse,
            ),
            (
                "calls",
                |n| nested("int(", "1", ")", n) + " == 1",
                249,
                Limit::Parse,
            ),
            (
                "macros",
                |n| (0..n).fold("true".to_string(), |r, i| format!("[1].all(x{i}, {r})")),
                249,
                Limit::Parse,
            ),
            (
                "map macros",
                |n| {
                    let m = (0..n).fold("1".to_string(), |r, i| format!("[{r}].map(x{i}, x{i})"));
                    format!("size({m}) == 1")
                },
                248,
                Limit::Parse,
            ),
            (
                "ternaries",
                |n| "true ? 1 : ".repeat(n) + "1 == 1",
                249,
                Limit::Parse,
            ),
            (
                "sums in parens",
                |n| nested("(1 + ", "1", ")", n) + " > 0",
                124,
                Limit::Parse,
            ),
            (
                "a sum",
                |n| "1".to_string() + &" + 1".repeat(n) + " > 0",
                249,
                Limit::Build,
            ),
            (
                "a relation",
                |n| "1".to_string() + &" == 1".repeat(n),
                250,
                Limit::Build,
            ),
            (
                "selections",
                |n| "self".to_string() + &".a".repeat(n) + " == 1",
                249,
                Limit::Build,
            ),
            (
                "indexes",
                |n| "self".to_string() + &"['a']".repeat(n) + " == 1",
                249,
                Limit::Build,
            ),
            (
                "member calls",
                |n| "'a'".to_string() + &".size().string()".repeat(n) + " == ''",
                124,
                Limit::Build,
            ),
        ];
        for (what, shape, last_ok, over) in shapes {
            assert_eq!(limit(&shape(last_ok)), None, "{what} {last_ok}");
            assert_eq!(
                limit(&shape(last_ok + 1)),
                Some(over),
                "{what} {}",
                last_ok + 1
            );
            assert_eq!(limit(&shape(10_000)), Some(over), "{what} 10000");
        }
    }

    /// Unary operators, `||` and `&&` chains, parentheses, lists, maps and global calls are
    /// not counted by the builder: 100 of them around 150 selections pass; a ternary is.
    #[test]
    fn what_the_builder_counts() {
        let sel = || "self".to_string() + &".a".repeat(150);
        let t = 100;
        let passing = [
            "true || (".repeat(t) + &sel() + " == 1" + &")".repeat(t),
            "true && (".repeat(t) + &sel() + " == 1" + &")".repeat(t),
            "int(".repeat(t) + &sel() + &")".repeat(t) + " == 1",
            "[".repeat(t) + &sel() + &"]".repeat(t) + " == []",
            "!(".repeat(t) + &sel() + " == 1" + &")".repeat(t),
            "-(".repeat(t) + &sel() + &")".repeat(t) + " == 1",
            "{1: ".repeat(t) + &sel() + &"}".repeat(t) + " == {}",
            "(".repeat(t) + &sel() + &")".repeat(t) + " == 1",
        ];
        for e in passing {
            assert_eq!(limit(&e), None, "{}", &e[..40]);
        }
        let ternaries = "true ? (".repeat(t) + &sel() + " == 1" + &") : false".repeat(t);
        assert_eq!(limit(&ternaries), Some(Limit::Build));
        // long flat chains nest nothing
        assert_eq!(limit(&vec!["true"; 20_000].join(" || ")), None);
        assert_eq!(limit(&("!".repeat(20_000) + "true")), None);
    }

    /// Brackets in strings, comments and escaped names are not nesting.
    #[test]
    fn literals_and_comments_are_skipped() {
        let brackets = "(".repeat(300);
        for e in [
            format!("'{brackets}' == ''"),
            format!("\"{brackets}\\\"{brackets}\" == ''"),
            format!("'''{brackets}\n{brackets}''' == ''"),
            format!("r'\\{brackets}' == ''"),
            format!("b\"{brackets}\" == b''"),
            format!("true // {brackets}\n"),
            format!("self.`{brackets}` == 1"),
            format!("1.5e-3 + 0x1F + 2u + .5 == 0.0 // {brackets}"),
        ] {
            assert_eq!(limit(&e), None, "{e}");
        }
    }

    /// Nothing panics on text that does not parse, and unbalanced brackets still count.
    #[test]
    fn broken_text_is_scanned() {
        for e in [
            ")))",
            "]]",
            "}",
            "(((",
            "?:?:",
            ": :",
            "a ? b",
            "a : b",
            ".",
            "..",
            "a.",
            "a.(",
            "'unterminated",
            "'''",
            "r'",
            "`",
            "0x",
            "1e",
            "1.",
            "{?",
            "[?",
            "a.?",
            "-",
            "!",
        ] {
            assert_eq!(limit(e), None, "{e}");
        }
        assert_eq!(limit(&"(".repeat(300)), Some(Limit::Parse));
        assert_eq!(limit(&"a.b".repeat(300)), Some(Limit::Build));
    }

    #[test]
    fn messages_and_errors() {
        let ok = "x".repeat(EXPRESSION_SIZE_CODE_POINT_LIMIT - 6) + " == ''";
        assert_eq!(check(&ok), Ok(()));
        let long = format!("'{}' != ''", "é".repeat(EXPRESSION_SIZE_CODE_POINT_LIMIT));
        assert_eq!(
            check(&long),
            Err("ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100008, limit 100000".into())
        );
        assert_eq!(
            check(&nested("(", "true", ")", 300)),
            Err("ERROR: <input>:-1:0: expression recursion limit exceeded: 250".into())
        );
        assert_eq!(
            check(&("1".to_string() + &" + 1".repeat(300))),
            Err("ERROR: <input>:-1:0: max recursion depth exceeded".into())
        );
        // a message's qualified name is not a selection
        let name = "a".to_string() + &".b".repeat(300);
        assert_eq!(check(&format!("{name}{{f: 1}} == 1")), Ok(()));
    }
}
