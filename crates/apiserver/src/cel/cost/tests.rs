use super::*;
use serde_json::json;

/// The estimated cost of `rule` on a node of schema `node` (not a resource root).
fn cost_of(node: &Value, rule: &str) -> u64 {
    let decl = decl_of(node, false).expect("a declared type");
    let p = crate::cel::compile_checked(rule).expect("the rule compiles");
    estimate(p.expression(), &decl, false)
}

/// Costs kube-apiserver v1.36.2 reported for these rules (measured through the factor in its
/// "exceeds budget" message, the rule put under an array of a chosen maxItems).
#[test]
fn costs_match_kube_apiserver() {
    let cases: &[(&str, &str, u64)] = &[
        (
            r#"{"type":"string","maxLength":10}"#,
            r#"self.matches('^[a-z]+$')"#,
            11,
        ),
        (
            r#"{"type":"string"}"#,
            r#"self.matches('^[a-z]+$')"#,
            629147,
        ),
        (
            r#"{"type":"string","maxLength":63}"#,
            r#"self.startsWith('a') && self.endsWith('z')"#,
            4,
        ),
        (
            r#"{"type":"string","maxLength":63}"#,
            r#"self.contains('abc')"#,
            27,
        ),
        (
            r#"{"type":"string","enum":["a","bbb","cc"]}"#,
            r#"self != 'a'"#,
            2,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"size(self) <= 50"#,
            3,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.lowerAscii() == self"#,
            82,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.split('/').size() <= 3"#,
            83,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.replace('a', 'bb').size() < 10"#,
            83,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.indexOf('x') >= 0"#,
            42,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self + 'x' != 'y'"#,
            43,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.trim().size() > 0"#,
            43,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.substring(1).startsWith('a')"#,
            42,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self in ['a', 'b', 'c']"#,
            14,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"isURL(self)"#,
            2,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"isQuantity(self) && quantity(self).isLessThan(quantity('1Gi'))"#,
            84,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"isIP(self)"#,
            41,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"self.find('[0-9]+') != ''"#,
            83,
        ),
        (
            r#"{"type":"string","maxLength":100}"#,
            r#"url(self).getScheme() == 'https'"#,
            43,
        ),
        (
            r#"{"type":"string","format":"date-time"}"#,
            r#"self < timestamp('2030-01-01T00:00:00Z')"#,
            3,
        ),
        (
            r#"{"type":"string","format":"duration"}"#,
            r#"self < duration('1h')"#,
            3,
        ),
        (
            r#"{"type":"integer"}"#,
            r#"self > 0 && self < 100"#,
            4,
        ),
        (
            r#"{"type":"integer"}"#,
            r#"string(self).startsWith('1')"#,
            3,
        ),
        (
            r#"{"type":"number"}"#,
            r#"self >= 0.5"#,
            2,
        ),
        (
            r#"{"type":"boolean"}"#,
            r#"self == true"#,
            1,
        ),
        (
            r#"{"x-kubernetes-int-or-string":true}"#,
            r#"type(self) == int ? self > 0 : self.matches('^[0-9]+%$')"#,
            1258296,
        ),
        (
            r#"{"type":"array","items":{"type":"string"}}"#,
            r#"self.all(x, x.size() < 10)"#,
            6291452,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.all(x, x.startsWith('a'))"#,
            52,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.exists(x, x == 'a')"#,
            62,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.exists_one(x, x == 'a')"#,
            43,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.map(x, x + 'a').all(y, y.size() > 1)"#,
            293,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.filter(x, x.startsWith('a')).size() < 3"#,
            164,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.all(x, self.exists_one(y, x == y))"#,
            1262,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"'a' in self"#,
            11,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self[0] == 'a'"#,
            3,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.isSorted()"#,
            91,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.join(',').size() < 100"#,
            84,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"integer"}}"#,
            r#"self.sum() < 100 && self.max() < 50"#,
            24,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"integer"}}"#,
            r#"self.indexOf(3) < 5"#,
            12,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":30},"port":{"type":"integer"}},"required":["name"]}}"#,
            r#"self.all(p, p.port > 1024)"#,
            62,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":30},"port":{"type":"integer"}}}}"#,
            r#"self.all(a, self.filter(b, b.name == a.name).size() == 1)"#,
            3072,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":30},"port":{"type":"integer"}}}}"#,
            r#"self.map(p, p.name).all(n, n.size() > 0)"#,
            213,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"object","properties":{"name":{"type":"string","maxLength":30},"port":{"type":"integer"}}}}"#,
            r#"size(self.filter(p, p.port <= 1024)) == 0"#,
            174,
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}"#,
            r#"has(self.a) || self.b > 0"#,
            4,
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"string","maxLength":5},"b":{"type":"string","maxLength":7}}}"#,
            r#"self.a == self.b"#,
            6,
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}"#,
            r#"self.?a.orValue('') == 'x'"#,
            4,
        ),
        (
            r#"{"type":"object","properties":{"replicas":{"type":"integer"},"maxReplicas":{"type":"integer"}}}"#,
            r#"self.replicas <= self.maxReplicas"#,
            5,
        ),
        (
            r#"{"type":"object","properties":{"ports":{"type":"array","maxItems":8,"items":{"type":"object","properties":{"port":{"type":"integer"}}}}}}"#,
            r#"self.ports.all(p, p.port > 1024)"#,
            51,
        ),
        (
            r#"{"type":"object","additionalProperties":{"type":"string","maxLength":10}}"#,
            r#"self.all(k, self[k].size() < 5)"#,
            3145722,
        ),
        (
            r#"{"type":"object","maxProperties":5,"additionalProperties":{"type":"string","maxLength":10}}"#,
            r#"self.all(k, k.startsWith('x') && self[k].size() < 5)"#,
            52,
        ),
        (
            r#"{"type":"object","maxProperties":5,"additionalProperties":{"type":"string","maxLength":10}}"#,
            r#"'a' in self && self['a'] == 'b'"#,
            5,
        ),
        (
            r#"{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}"#,
            r#"self.m.exists(k, self.m[k] > 3)"#,
            4044504,
        ),
        (
            r#"{"type":"object","properties":{"l":{"type":"array","maxItems":4,"items":{"type":"array","maxItems":3,"items":{"type":"string","maxLength":2}}}}}"#,
            r#"self.l.all(x, x.all(y, y != ''))"#,
            71,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"[1, 2, 3].all(x, x > 0)"#,
            26,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.map(x, x).filter(y, y == 'a').size() < 2"#,
            305,
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}"#,
            r#"{'x': self.a}['x'] == 'y'"#,
            34,
        ),
        (
            r#"{"type":"object","properties":{"a":{"type":"string","maxLength":5},"b":{"type":"boolean"}}}"#,
            r#"(self.b ? self.a : 'zzz').matches('z')"#,
            7,
        ),
        (
            r#"{"type":"string","maxLength":20}"#,
            r#"self.format([]) == 'x'"#,
            20,
        ),
        (
            r#"{"type":"string","maxLength":20}"#,
            r#"bytes(self).size() > 2"#,
            11,
        ),
        (
            r#"{"type":"string","maxLength":20}"#,
            r#"self.charAt(0) == 'a'"#,
            3,
        ),
        (
            r#"{"type":"string","maxLength":20}"#,
            r#"self.upperAscii().contains(self)"#,
            74,
        ),
        (
            r#"{"type":"array","maxItems":10,"items":{"type":"string","maxLength":20}}"#,
            r#"self.all(x, x.matches('^' + self[0] + '$'))"#,
            2132,
        ),
        (
            r#"{"type":"object","properties":{"s":{"type":"string","maxLength":20}}}"#,
            r#"dyn(self.s).size() > 0"#,
            5,
        ),
        (
            r#"{"type":"array","maxItems":5,"items":{"type":"integer"}}"#,
            r#"self.slice(1, 3).size() == 2"#,
            16,
        ),
        (
            r#"{"type":"array","maxItems":5,"items":{"type":"integer"}}"#,
            r#"self.sort() == self"#,
            64,
        ),
        (
            r#"{"type":"array","maxItems":5,"items":{"type":"integer"}}"#,
            r#"self.distinct().size() == size(self)"#,
            66,
        ),
        (
            r#"{"type":"array","maxItems":5,"items":{"type":"integer"}}"#,
            r#"lists.range(4).size() == 4"#,
            17,
        ),
    ];
    let mut wrong = Vec::new();
    for (node, rule, want) in cases {
        let node: Value = serde_json::from_str(node).expect("a schema");
        let got = cost_of(&node, rule);
        if got != *want {
            wrong.push(format!("{rule} on {node}: {got}, kube-apiserver {want}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
