//! Selector traces: the generator, and the replayer on kinformer-indexer's
//! `parse_selector` and its `Selector`'s matching (the peer uses apimachinery's `labels.Parse`).

use std::collections::BTreeMap;

use anyhow::bail;
use kinformer_indexer::{Error, parse_selector};
use serde_json::{Value, json};

use super::{Observations, Rng};

/// Replays a selector trace.
pub(crate) fn replay(_header: &Value, ops: &[Value]) -> anyhow::Result<Observations> {
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let name = op["op"].as_str().unwrap_or_default();
        let mut obs = vec![("n", json!(i + 1)), ("op", json!(name))];
        match name {
            "select" => {
                let labels: BTreeMap<String, String> = op["labels"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                            .collect()
                    })
                    .unwrap_or_default();
                match parse_selector(op["selector"].as_str().unwrap_or_default()) {
                    Ok(selector) => obs.extend([
                        ("valid", json!(true)),
                        ("matches", json!(selector.matches(&labels))),
                        ("string", json!(selector.to_string())),
                    ]),
                    Err(Error::UnsupportedSelectorOperator { .. }) => {
                        obs.push(("unsupported", json!(true)));
                    }
                    Err(_) => obs.push(("valid", json!(false))),
                }
            }
            other => bail!("op {}: unknown op {other:?}", i + 1),
        }
        out.push(super::observation(obs));
    }
    Ok(out)
}

const KEYS: [&str; 9] = [
    "a",
    "b",
    "app",
    "tier",
    "example.com/x",
    "in",
    "notin",
    "A1",
    "x.y_z-w",
];
const BAD_KEYS: [&str; 9] = [
    "-a",
    "a-",
    "Example.com/x",
    "a/b/c",
    "/a",
    "a/",
    "é",
    "a..b/c",
    "_x",
];
const VALUES: [&str; 8] = ["x", "y", "web", "", "in", "notin", "V-1.2_3", "9"];
const BAD_VALUES: [&str; 6] = ["-x", "x_", "a/b", "é", "x..", "_"];
/// Bytes a mutation inserts: the grammar's own, and a few outside it. Never `>` or `<`
/// (kinformer refuses them by design; `selector/gt_lt.jsonl` covers them).
const NOISE: [&str; 14] = [
    "=", "!", "(", ")", ",", " ", "\t", "a", "x", "-", ".", "/", "in", "\0",
];

fn ws(rng: &mut Rng) -> &'static str {
    match rng.below(12) {
        0 => " ",
        1 => "\t",
        2 => "  ",
        3 => "\n",
        _ => "",
    }
}

fn key(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => "k".repeat(63),
        1 => "k".repeat(64),
        2 => format!("{}/k", "p".repeat(254)),
        3..=4 => (*rng.pick(&BAD_KEYS)).to_owned(),
        _ => (*rng.pick(&KEYS)).to_owned(),
    }
}

fn value(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => "v".repeat(63),
        1 => "v".repeat(64),
        2..=3 => (*rng.pick(&BAD_VALUES)).to_owned(),
        _ => (*rng.pick(&VALUES)).to_owned(),
    }
}

fn requirement(rng: &mut Rng) -> String {
    let k = key(rng);
    let (w1, w2, w3) = (ws(rng), ws(rng), ws(rng));
    match rng.below(7) {
        0 => format!("{w1}{k}{w2}={w3}{}", value(rng)),
        1 => format!("{w1}{k}{w2}=={w3}{}", value(rng)),
        2 => format!("{w1}{k}{w2}!={w3}{}", value(rng)),
        3 | 4 => {
            let op = if rng.below(2) == 0 { "in" } else { "notin" };
            // Mostly `x,y`; sometimes empty entries (`(,x)`, `(x,,y)`, `(x,)`) or `()`.
            let n = rng.below(4);
            let mut vals: Vec<String> = (0..n).map(|_| value(rng)).collect();
            if rng.below(6) == 0 {
                let at = rng.below(vals.len() as u64 + 1) as usize;
                vals.insert(at, String::new());
            }
            let sep = format!("{},{}", ws(rng), ws(rng));
            format!("{w1}{k} {op}{w2}({w3}{}{})", vals.join(&sep), ws(rng))
        }
        5 => format!("{w1}{k}{w2}"),
        _ => format!("{w1}!{w2}{k}{w3}"),
    }
}

/// Inserts, deletes or replaces one byte-sized piece of `s`, on a character boundary.
fn mutate(rng: &mut Rng, s: &str) -> String {
    let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
    let at = *rng.pick(&bounds);
    let next = bounds.iter().copied().find(|&b| b > at).unwrap_or(s.len());
    let (head, tail) = s.split_at(at);
    match rng.below(3) {
        0 => format!("{head}{}{tail}", rng.pick(&NOISE)),
        1 => format!("{head}{}", &s[next..]),
        _ => format!("{head}{}{}", rng.pick(&NOISE), &s[next..]),
    }
}

fn labels(rng: &mut Rng) -> Value {
    let mut m = serde_json::Map::new();
    for k in ["a", "b", "app", "tier", "example.com/x", "in"] {
        if rng.below(3) == 0 {
            m.insert(
                k.to_owned(),
                json!(*rng.pick(&["x", "y", "web", "", "in", "notin"])),
            );
        }
    }
    Value::Object(m)
}

/// A random trace for `seed`: about 50 `select` ops, each a selector of zero to three
/// requirements from the grammar (valid and invalid keys and values, every operator, odd
/// whitespace and commas), one in five mutated by a byte or two, against a random label
/// set.
pub(crate) fn generate(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let header = json!({ "trace": "selector", "seed": seed });
    let mut lines = vec![header.to_string()];
    for _ in 0..40 + rng.below(21) {
        let n = match rng.below(16) {
            0 => 0,
            1..=6 => 1,
            7..=11 => 2,
            _ => 3,
        };
        let reqs: Vec<String> = (0..n).map(|_| requirement(&mut rng)).collect();
        let sep = match rng.below(10) {
            0 => ",,",
            1 => " ,",
            2 => ", ",
            _ => ",",
        };
        let mut selector = reqs.join(sep);
        match rng.below(20) {
            0 => selector.push(','),
            1 => selector.insert(0, ','),
            _ => {}
        }
        if rng.below(5) == 0 {
            for _ in 0..1 + rng.below(2) {
                selector = mutate(&mut rng, &selector);
            }
        }
        let op = json!({ "op": "select", "selector": selector, "labels": labels(&mut rng) });
        lines.push(op.to_string());
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selectors(seed: u64) -> Vec<String> {
        generate(seed)
            .lines()
            .skip(1)
            .map(|l| {
                let op: Value = serde_json::from_str(l).unwrap();
                op["selector"].as_str().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn generated_selectors_never_use_gt_or_lt_and_are_often_valid_and_often_not() {
        let (mut valid, mut invalid) = (0, 0);
        for seed in 1..=super::super::GENERATED_PER_KIND {
            for s in selectors(seed) {
                assert!(!s.contains(['>', '<']), "seed {seed}: {s:?}");
                match parse_selector(&s) {
                    Ok(sel) if !sel.selects_all() => valid += 1,
                    Ok(_) => {}
                    Err(_) => invalid += 1,
                }
            }
        }
        assert!(
            valid > 3000 && invalid > 3000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(generate(7), generate(7));
        assert_ne!(generate(7), generate(8));
    }
}
